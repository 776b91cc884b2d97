"""The Retriever protocol and :func:`retrieve`, which formats queries with a template,
searches, drops self-hits and writes the run + sidecar, reusing a complete run that was made
from identical inputs."""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

from instir import atomic
from instir.benchmarks.types import Benchmark, quoted
from instir.errors import UsageError, expect, unknown
from instir.formatting import Template, default_template, family_of_model, get_template
from instir.parameters import depth
from instir.progress import enabled as progress_enabled
from instir.retrieval.model_files import check_model
from instir.retrieval.runs import Run, drop_self_hits, read_run, read_sidecar, tied_again, write_run
from instir.stamps import json_sha256

#: The retriever kinds :func:`make_retriever` builds.
RETRIEVER_KINDS = ("bm25", "dense", "hybrid")
#: The system names besides cards: the kinds, dense and hybrid also with a model (what an unknown system's line shows).
KIND_NAMES = ("bm25", "dense", "dense:MODEL", "hybrid", "hybrid:MODEL")
#: Hugging Face id of the bundled offline encoder, the default ``model`` of dense and hybrid.
BUNDLED_MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"


@runtime_checkable
class Retriever(Protocol):
    """What :func:`retrieve` needs from a retriever.

    ``name`` is the one name reports, sidecars and run files (slugged) give it (``bm25``,
    ``dense:sentence-transformers/all-MiniLM-L6-v2``, a card's name: :func:`system_name`);
    ``params()`` returns the JSON-ready settings that change results (recorded and part of
    the reuse key; one that leaves settings to the benchmark's defaults also gives ``resolved(benchmark)``, the
    settings a search on it takes, which the key holds instead); ``search`` formats queries/docs with ``template`` and
    returns the top ``k`` per query (its ``run.meta`` is kept under ``meta["search"]``). A retriever may
    also declare ``family`` (one of :data:`instir.formatting.MODEL_FAMILIES`), which picks the
    default template; see :func:`retriever_family`.
    """

    name: str

    def params(self) -> dict: ...

    def search(self, benchmark: Benchmark, template: Template, k: int) -> Run: ...


def retriever_family(retriever: Retriever) -> str:
    """The retriever's ``family`` attribute, else the family its name suggests
    (:func:`instir.formatting.family_of_model`, e.g. ``dense-instructor-xl`` → instructor)."""
    return getattr(retriever, "family", None) or family_of_model(retriever.name)


def make_retriever(kind: str, model: str | None = None, *, windowing: str | None = None, device: str | None = None,
                   cache_dir: str | Path | None = None, progress: bool | None = None) -> Retriever:
    """A retriever by kind: ``bm25`` (benchmark defaults), ``dense`` or ``hybrid`` (IFIR's RRF of
    dense + BM25) with ``model`` (default: the bundled offline MiniLM) and the dense encoder's
    long-text ``windowing`` (``None``: none, ``"ifir"``: the IFIR authors' cut, ``"clean"``: the
    kit's; see :class:`~instir.retrieval.dense.DenseRetriever`), ``device``, embedding
    ``cache_dir`` and ``progress`` (None: the kit's setting). By name, as reports name systems:
    :func:`instir.systems.build_system` (``"dense:MODEL"``)."""
    from instir.retrieval.lexical import BM25Retriever

    _check_kind(kind, model, windowing)
    model = model and model_location(model)
    check_model(model, "sentence-transformers")
    if kind == "bm25":
        return BM25Retriever(show_progress=progress)
    from instir.retrieval.dense import DenseRetriever

    dense = DenseRetriever(model, windowing=windowing, device=device, cache_dir=cache_dir,
                           progress=progress_enabled() if progress is None else progress)
    if kind == "dense":
        return dense
    from instir.retrieval.fusion import HybridRetriever

    return HybridRetriever(dense, BM25Retriever(show_progress=progress))


def model_location(model: str) -> str:
    """The bundled MiniLM's local path for its Hugging Face id :data:`BUNDLED_MODEL_ID` (the name reports give it
    loads its weights offline, the run of ``dense``); any other id or path as is."""
    if model != BUNDLED_MODEL_ID:
        return model
    from instir.retrieval.dense import bundled_model_path

    return bundled_model_path()


def system_name(kind: str, model: str | None = None) -> str:
    """The name reports give the system ``make_retriever(kind, model)`` builds: ``bm25``,
    ``dense:<model id>`` or ``hybrid:<model id>+bm25`` (``model`` None or empty: the bundled
    MiniLM, :data:`BUNDLED_MODEL_ID`). :func:`instir.papers.loader.model_key` maps these names
    onto the papers' models (``hybrid:GritLM/GritLM-7B+bm25`` is IFIR's GritLM hybrid row)."""
    _check_kind(kind, model or None)
    if kind == "bm25":
        return "bm25"
    model_id = model or BUNDLED_MODEL_ID
    return f"dense:{model_id}" if kind == "dense" else f"hybrid:{model_id}+bm25"


def _check_kind(kind: str, model: str | None, windowing: str | None = None) -> None:
    """Refuse an unknown retriever kind, and a model or windowing for BM25 (which has no encoder)."""
    if kind not in RETRIEVER_KINDS:
        raise unknown("retriever", kind, RETRIEVER_KINDS)
    if kind == "bm25" and model is not None:
        raise UsageError("--model applies to dense and hybrid retrievers, not bm25")
    if kind == "bm25" and windowing is not None:
        raise UsageError("--windowing applies to dense and hybrid retrievers, not bm25")


def file_slug(text: str) -> str:
    """``text`` as a file-name part: runs of anything but letters, digits, ``._-`` become ``-``."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")


def queries_sha256(benchmark: Benchmark) -> str:
    """SHA-256 over every query instance's id, query, instruction, level and subset, in order
    (part of run and rerank keys, so an edited query file is noticed)."""
    h = hashlib.sha256()
    for q in benchmark.queries.values():
        h.update(json.dumps([q.id, q.query, q.instruction, q.level, q.subset]).encode())
    return h.hexdigest()


class OtherDataWarning(UserWarning):
    """A run is scored on a benchmark whose corpus or queries are not those its sidecar's key says it was retrieved
    over (:func:`other_data`): it is scored as asked, yet its numbers are no numbers of that benchmark's data."""


def other_data(meta: Mapping | None, benchmark: Benchmark) -> list[str]:
    """What of ``benchmark``'s data a run was not retrieved over, by the key its sidecar (or ``run.meta``) holds
    (:func:`keyed`): ``corpus`` where the key's corpus hash is not the benchmark's content hash, ``queries`` where
    its queries' hash is not :func:`queries_sha256` (compared in the run's own setting only: another setting's queries
    differ by design); empty for a run whose key records no hash (an external run, one of an earlier version)."""
    key = (meta or {}).get("key")
    if not isinstance(key, Mapping):
        return []
    recorded = key.get("benchmark")
    setting = recorded.get("setting") if isinstance(recorded, Mapping) else None
    differs = []
    if isinstance(key.get("corpus_sha256"), str) and key["corpus_sha256"] != benchmark.corpus.content_hash():
        differs.append("corpus")
    if (isinstance(key.get("queries_sha256"), str) and setting in (None, benchmark.setting)
            and key["queries_sha256"] != queries_sha256(benchmark)):
        differs.append("queries")
    return differs


def keyed(benchmark: Benchmark, **parts: object) -> dict:
    """A run's key, everything that determines its content (identical keys: the run can be reused): the
    benchmark (name, layout, revision, setting, sample) with hashes of its corpus and queries, so a changed local
    copy is noticed, ``parts`` (what made the run) and the self-hits rule, as JSON holds them."""
    key = {"benchmark": {"name": benchmark.name, "layout": benchmark.layout, "revision": benchmark.revision,
                         "setting": benchmark.setting, "sample": benchmark.is_sample},
           "corpus_sha256": benchmark.corpus.content_hash(), "queries_sha256": queries_sha256(benchmark),
           **parts, "self_hits": "dropped"}
    return json.loads(json.dumps(key, sort_keys=True, default=str))


def key_digest(key: dict) -> str:
    """The short hash of a whole key that ends a run's file name, so runs with other parameters never share one."""
    return json_sha256(key)[:8]


def keyed_run(path: Path | None, key: dict, make: Callable[[], tuple[Run, dict]]) -> Run:
    """The run of ``key``, made once: the complete run at ``path`` whose sidecar holds ``key`` (marked ``reused``),
    else ``make()``'s ``(run, meta)`` without self-hits, its ``meta`` with the benchmark, the self-hits dropped, the
    wall time and ``key``, written to ``path`` with its sidecar when there is one. One rule for retrieval and
    reranking. A file at ``path`` that is not a run the kit wrote (changed since: its sidecar's digest differs, or
    it has none) is set aside, never replaced."""
    existing = read_sidecar(path) if path is not None else None
    if existing is not None and existing.get("key") == key:
        run = read_run(path)
        run.meta["reused"] = True
        return run
    if path is not None and existing is None and os.path.lexists(path):
        atomic.set_aside(path, f"{path} is not the run the kit wrote there (changed since, or its sidecar is gone)",
                         "the run is made anew", suffixes=("", ".json"))
    start = time.perf_counter()
    found, meta = make()
    wall = time.perf_counter() - start
    run = drop_self_hits(found)
    run.meta = {"benchmark": key["benchmark"], "setting": key["benchmark"]["setting"], **meta,
                "self_hits_dropped": run.meta["self_hits_dropped"], "wall_time_s": round(wall, 3), "key": key}
    if path is not None:
        write_run(run, path)
        run.meta["path"] = str(path)
    return run


#: Version of the kit's retrieval rules in a run's key; a new version makes every run anew, as a run of the old rules
#: is another run. 2: tied documents at the cut go by trec_eval's order (:func:`instir.retrieval.runs.tie_ranks`) and
#: a setting left to the benchmark's default is keyed by the value it takes (version 1 keyed it as ``None``).
RUN_VERSION = 2


def run_key(benchmark: Benchmark, retriever: Retriever, template: Template, k: int) -> dict:
    """The :func:`keyed` key of a retrieval run: the settings as the search on ``benchmark`` takes them
    (``resolved(benchmark)`` where a retriever leaves some to the benchmark's defaults, so an edited default is
    another run), the template, ``k`` and :data:`RUN_VERSION`."""
    return keyed(benchmark, k=k, template=template.describe(), version=RUN_VERSION, retriever={
        "name": retriever.name, "family": retriever_family(retriever), "params": settings(retriever, benchmark)})


def settings(retriever: Retriever, benchmark: Benchmark) -> dict:
    """The settings a search of ``retriever`` on ``benchmark`` takes: its ``resolved(benchmark)`` where it leaves
    some to the benchmark's defaults (BM25's), else its ``params()``."""
    resolved = getattr(retriever, "resolved", None)
    return resolved(benchmark) if callable(resolved) else retriever.params()


def run_path(out_dir: str | Path, key: dict) -> Path:
    """``<benchmark>__<setting>__<retriever>__<template>__k<k>-<hash8>.trec`` under ``out_dir``
    (:func:`key_digest`)."""
    parts = [key["benchmark"]["name"], key["benchmark"]["setting"], key["retriever"]["name"], key["template"]["name"]]
    return Path(out_dir) / ("__".join(file_slug(p) for p in parts) + f"__k{key['k']}-{key_digest(key)}.trec")


def template_for(benchmark: Benchmark, retriever: Retriever, template: Template | str | None = None) -> Template:
    """The template a run of ``retriever`` on ``benchmark`` uses: ``template`` (name or
    object) when given, else the template of the retriever's system card (a retriever from
    :func:`instir.systems.build_system` carries ``card``), else the authors' template for the
    retriever's family on this benchmark in its setting (the family spec's ``templates``)."""
    card = getattr(retriever, "card", None)
    if template is None and card is not None and card.template:
        template = card.template
    if isinstance(template, str):
        return get_template(template)
    if template is None:
        return default_template(retriever_family(retriever), benchmark)
    return template


def only_candidates(run: Run, candidates: dict[str, list[str]]) -> Run:
    """``run`` restricted to each query's candidates, in the run's order; a candidate the system
    did not return (it ranked the whole corpus, so one that matched nothing) is added below the
    rest with the lowest score found minus one, so every candidate has a rank."""
    import pandas as pd

    wanted = pd.DataFrame([(q, d) for q, docs in candidates.items() for d in docs], columns=["qid", "docid"])
    frame = tied_again(run)  # its ties as ties, so the candidates' run records those among them
    kept = frame.merge(wanted, on=["qid", "docid"], how="right")
    if kept["score"].isna().any():
        floor = (frame["score"].min() if len(frame) else 0.0) - 1.0
        kept["score"] = kept["score"].fillna(floor)
    return Run(kept[["qid", "docid", "score"]], dict(run.meta, candidates=True))


def retrieve(benchmark: Benchmark, retriever: Retriever | str, template: Template | str | None = None, k: int = 100,
             out_dir: str | Path | None = None) -> Run:
    """Run ``retriever`` on ``benchmark`` and return the top-``k`` run without self-hits.

    On a benchmark with candidate lists (``meta["top_ranked"]``: a reranking task such as
    FollowIR) the system ranks the whole corpus and the run keeps each query's candidates, all
    of them in the system's order (``k`` becomes the longest list): every candidate scored as
    the task asks, by any retriever. ``template`` defaults as :func:`template_for` says. With
    ``out_dir`` the run and its sidecar are written there, and a complete run with the same key
    is read back instead of searching again. A system's full card is recorded as ``meta["system"]``. A ``k`` that
    is no whole number from 1 to :data:`instir.parameters.MAX_CUTOFF` is refused (a run of nothing is no result,
    and no measure scores a run deeper).
    """
    if isinstance(retriever, Benchmark) and not isinstance(benchmark, Benchmark):
        raise UsageError(f"retrieve(benchmark, retriever, …) got the two swapped: a {type(benchmark).__name__}, then "
                         f"the benchmark {quoted(retriever.name)}")
    expect(benchmark, Benchmark, "retrieve(benchmark, …)",
           f"; load one: instir.load_benchmark({quoted(benchmark) if isinstance(benchmark, str) else 'name'})")
    expect(template, (Template, str, type(None)), "retrieve(…, template)")
    k = depth(k, where="retrieve(…, k)")
    if isinstance(retriever, str):  # a kind, as make_retriever takes it ("bm25"); a card: build_system(name)
        if retriever not in RETRIEVER_KINDS:
            raise UsageError(f"retrieve takes a retriever: make_retriever(kind) for one of {', '.join(RETRIEVER_KINDS)}"
                             f", or instir.build_system(name) for a system card; got {quoted(retriever)}")
        retriever = make_retriever(retriever)
    if not callable(getattr(retriever, "search", None)):
        raise UsageError(f"retrieve(…, retriever) takes a retriever (instir.build_system('bm25'), a card's name, or a "
                         f"kind such as 'bm25'), got {quoted(retriever)}")
    card = getattr(retriever, "card", None)
    template = template_for(benchmark, retriever, template)
    candidates = benchmark.meta.get("top_ranked")
    if candidates:
        k = max(len(docs) for docs in candidates.values())
    key = run_key(benchmark, retriever, template, k)

    def search() -> tuple[Run, dict]:
        found = retriever.search(benchmark, template, len(benchmark.corpus) if candidates else k)
        found = only_candidates(found, candidates) if candidates else found
        meta = {"retriever": {**key["retriever"], "params": retriever.params()}, "template": key["template"], "k": k,
                "search": found.meta}  # the settings as configured; the key's as the search took them
        return found, meta if card is None else {**meta, "system": card.to_dict()}

    return keyed_run(run_path(out_dir, key) if out_dir is not None else None, key, search)
