"""Retrieval: the Retriever protocol and :func:`retrieve` (:mod:`instir.retrieval.search`), TREC
runs with JSON sidecars (:mod:`instir.retrieval.runs`), BM25, dense and hybrid retrievers."""

from instir._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "search": ("BUNDLED_MODEL_ID", "RETRIEVER_KINDS", "Retriever", "make_retriever", "retrieve", "retriever_family",
               "run_key", "run_path", "system_name", "template_for"),
    "runs": ("Run", "RunIdCheck", "as_run", "check_run_ids", "drop_self_hits", "read_run", "read_sidecar",
             "run_engine", "run_is_complete", "run_template", "run_windowing", "write_run"),
})
