"""instir: a reproducibility kit for instruction-following retrieval (InstructIR, IFIR, FollowIR).

The public API, in ranx's manner a few functions and the data types, one or two per stage of the data
flow (benchmark → formatted queries → run → metrics / judgments → report): ``load_benchmark``,
``get_template``, ``build_system``, ``retrieve``, ``rerank``, ``evaluate`` / ``evaluate_runs`` /
``compare_runs``, ``make_judge`` / ``instfol`` / ``validate_judge``, ``explore``, ``compare_to_papers`` and
``run_reports``; and two namespaces: :mod:`instir.stages` (the report chain's stages, one function each,
what the notebooks call) and :mod:`instir.show` (the notebooks' tables, figures and statements). The bundled
notebooks import from nothing else. Names are imported on first use (PEP 562), so the ``instir`` command
starts without loading torch, pandas or scipy; names that left the top level still work, with a
``DeprecationWarning`` saying where they are now.
"""

import warnings

from instir._lazy import lazy_exports

__version__ = "0.1.0"

# tqdm.auto (the kit's bars, and bm25s', huggingface_hub's) in a Jupyter kernel without ipywidgets: the
# plain text bar, the one wanted there, without the "IProgress not found" warning it gives first (a red
# box on every report page). Set before any submodule, so before any library imports tqdm.auto.
warnings.filterwarnings("ignore", message="IProgress not found")

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    # benchmarks
    "instir.benchmarks": ("Benchmark", "Query", "Doc", "FormatError", "load_benchmark", "list_benchmarks"),
    # query formatting
    "instir.formatting": ("Template", "get_template"),
    # runs: a system built from a name or a card, retrieval, reranking, TREC files
    "instir.systems": ("build_system",),
    "instir.retrieval": ("Run", "read_run", "write_run", "retrieve"),
    "instir.retrieval.rerank": ("rerank",),
    # metrics
    "instir.metrics": ("evaluate", "evaluate_runs", "compare_runs"),
    # judge: a judge, the request and rubric it answers, InstFol of two runs, the judge checked against gold labels
    "instir.judge": ("JudgeRequest", "rubric_for"),
    "instir.judge.factory": ("make_judge",),
    "instir.judge.following": ("instfol",),
    "instir.judge.validation": ("validate_judge",),
    # exploring, the papers, the whole chain
    "instir.report.explorer": ("explore",),
    "instir.papers": ("compare_to_papers",),
    "instir.pipeline": ("run_reports",),
}, deprecated={
    "compare": "compare_to_papers", "validate": "validate_judge",
    # names that left the top level for their modules
    "register_template": "instir.formatting:register_template",
    "make_retriever": "instir.retrieval:make_retriever", "system_name": "instir.retrieval:system_name",
    "BM25Retriever": "instir.retrieval.lexical:BM25Retriever",
    "DenseRetriever": "instir.retrieval.dense:DenseRetriever",
    "rrf": "instir.retrieval.fusion:rrf", "SystemCard": "instir.systems:SystemCard",
    "load_cards": "instir.systems:load_cards", "get_card": "instir.systems:get_card",
    "paired_tests": "instir.metrics:paired_tests", "CachedJudge": "instir.judge:CachedJudge",
    "load_reported": "instir.papers:load_reported",
},
    namespaces=("show", "stages"))  # the notebooks' displays, and the report chain's stages
