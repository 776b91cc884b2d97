"""The rerank stage: a first-stage run in, a new run + sidecar out.

Follows kaistAI/InstructIR ``eval/eval_instructir_bm25_rerank.py`` (``main``): for every query
the first-stage documents are sorted by score and the top ``rerank_n`` (100) are rescored by the
reranker; the reranked run holds exactly those documents with the reranker's scores (documents
below the cut are not kept, as in the authors' pickles); self-hits are kept in it and dropped when it is
scored (:func:`instir.metrics.scoring.without_self_hits`), as the authors'
``eval_instructir_bm25_rerank_combine_and_score.py`` does before scoring.

Query and instruction (``query_split``). The authors read the query file's text
(``instruction [SEP] query``) and split it: ``query = text.split(" [SEP] ")[-1]``,
``instruction = text.split(" [SEP] ")[0]``. For an instance with an instruction that gives the
loaded fields back; for a bare query (no `` [SEP] ``) *both* are the whole text, so a reranker
sees the query twice (``"q q"``). ``"authors"`` (default) reproduces that; ``"fields"`` uses the
benchmark's query and instruction as loaded (an empty instruction stays empty).

Documents (``doc_field``): the papers' rerankers see a document's title and text: FollowIR's (mteb 1.x
``search_cross_encoder``: ``(title + " " + text).strip()``) as the retrievers see it, ``"indexed"`` (default);
InstructIR's authors pass ``corpus[doc]['text']``, the same text, as its documents have no title. ``"text"``
leaves a title out.

Scores are cached (:class:`~instir.retrieval.score_cache.ScoreCache`) under the reranker's
identity and the exact model input, so a rerun scores nothing and a killed run resumes. With
``out_dir`` a complete run with the same key (first-stage file hash, benchmark content,
reranker identity, depth, split, document field) is read back instead.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from instir import atomic
from instir.benchmarks.types import Benchmark, FormatError, Query, quoted
from instir.errors import UsageError, expect
from instir.parameters import depth as check_depth
from instir.progress import tqdm
from instir.retrieval.runs import (
    Run,
    ranked_depth,
    read_run,
    trec_bytes,
)
from instir.retrieval.score_cache import ScoreCache
from instir.retrieval.search import file_slug, key_digest, keyed, keyed_run

#: Separator the InstructIR query files put between instruction and query.
SEP = " [SEP] "
QuerySplit = Literal["authors", "fields"]
DocField = Literal["text", "indexed"]


@runtime_checkable
class Reranker(Protocol):
    """What :func:`rerank` needs from a reranker.

    ``name`` is short and file-name friendly; ``identity()`` returns the JSON-ready settings
    that change a score (model, revision, dtype, template, truncation …), recorded in the
    sidecar and keying the score cache; ``model_input(query, instruction, text)`` is the exact
    input the model sees for one pair (a string, or a [query, passage] pair); ``score`` maps a
    batch of those inputs to one float each (the only call that runs the model);
    ``batch_size`` is how many inputs go into one ``score`` call.
    """

    name: str
    batch_size: int

    def identity(self) -> dict: ...

    def model_input(self, query: str, instruction: str, text: str) -> str | list[str]: ...

    def score(self, inputs: Sequence[str | list[str]]) -> list[float]: ...


def query_parts(query: Query, query_split: QuerySplit = "authors") -> tuple[str, str]:
    """``(query, instruction)`` as the reranker receives them (see the module docstring)."""
    if query_split == "fields":
        return query.query, query.instruction
    if query_split != "authors":
        raise ValueError(f"unknown query_split {query_split!r}; use 'authors' or 'fields'")
    text = f"{query.instruction}{SEP}{query.query}" if query.instruction else query.query
    parts = text.split(SEP)
    return parts[-1], parts[0]


def _first_stage(run: Run | str | Path) -> tuple[Run, dict]:
    """The first-stage run and its provenance (path and SHA-256 of its TREC text)."""
    if isinstance(run, (str, Path)):
        run = read_run(run)
    path = run.meta.get("path")
    if path and Path(path).is_file():
        digest = atomic.file_sha256(path)
    else:  # an in-memory run: hash the TREC text it would be written as
        path, digest = None, hashlib.sha256(trec_bytes(run, "instir")).hexdigest()
    retriever = run.meta.get("retriever")
    source = {"path": path, "trec_sha256": digest, "k": run.meta.get("k"),
              "retriever": retriever.get("name") if isinstance(retriever, dict) else retriever}
    return run, source


def rerank_key(benchmark: Benchmark, reranker: Reranker, first_stage: dict, depth: int,
               query_split: QuerySplit, doc_field: DocField) -> dict:
    """The :func:`~instir.retrieval.search.keyed` key of a reranked run."""
    return keyed(benchmark, first_stage_sha256=first_stage["trec_sha256"], depth=depth, query_split=query_split,
                 doc_field=doc_field, reranker={"name": reranker.name, "identity": reranker.identity()})


def rerank_path(out_dir: str | Path, key: dict, first_stage_path: str | None) -> Path:
    """``<first-stage stem>__rerank-<reranker>__d<depth>-<hash8>.trec`` under ``out_dir``."""
    bench = key["benchmark"]
    stem = Path(first_stage_path).stem if first_stage_path else f"{bench['name']}__{bench['setting']}"
    reranker = file_slug(key["reranker"]["name"])
    return Path(out_dir) / f"{file_slug(stem)}__rerank-{reranker}__d{key['depth']}-{key_digest(key)}.trec"


def _pairs(run: Run, benchmark: Benchmark, depth: int, query_split: QuerySplit,
           doc_field: DocField) -> list[tuple[str, str, str, str, str]]:
    """``(qid, docid, query, instruction, text)`` of every pair to rescore, in run order."""
    top = run.df[run.df["rank"] <= depth]
    where = run.meta.get("path") or "the first-stage run"
    unknown_q = sorted(set(top["qid"]) - set(benchmark.queries))
    if unknown_q:
        raise FormatError(where, None, "qid", f"{len(unknown_q)} query ids are not in {benchmark.label} "
                                              f"(first: {quoted(unknown_q[0])}); rerank the run with the benchmark it "
                                              "was made from")
    docs = benchmark.corpus.get(top["docid"].unique())
    missing = sorted(set(top["docid"]) - set(docs))
    if missing:
        raise FormatError(where, None, "docid", f"{len(missing)} document ids are not in the corpus of "
                                                f"{benchmark.label} (first: {quoted(missing[0])})")
    parts = {qid: query_parts(benchmark.queries[qid], query_split) for qid in top["qid"].unique()}
    out = []
    for qid, docid in zip(top["qid"].tolist(), top["docid"].tolist()):
        doc = docs[docid]
        text = doc.text if doc_field == "text" else doc.indexed_text
        out.append((qid, docid, *parts[qid], text))
    return out


def score_inputs(reranker: Reranker, inputs: Sequence[str | list[str]], cache: ScoreCache,
                 progress: bool = True) -> tuple[list[float], int]:
    """Scores of ``inputs`` (in order) through ``cache``: only inputs without a stored score are
    sent to ``reranker.score``, ``batch_size`` at a time, each batch stored as soon as it is
    scored. Returns the scores and how many inputs were scored now."""
    identity = reranker.identity()
    keys = [cache.input_key(x) for x in inputs]
    known = cache.get(identity, keys)
    todo: dict[str, str | list[str]] = {}
    for key, item in zip(keys, inputs):
        if key not in known:
            todo.setdefault(key, item)
    pending = list(todo.items())
    size = max(1, reranker.batch_size)
    with tqdm(total=len(pending), desc=f"reranking ({reranker.name})", unit="pair",
              disable=not progress or not pending) as bar:
        for start in range(0, len(pending), size):
            batch = pending[start:start + size]
            scores = reranker.score([item for _, item in batch])
            if len(scores) != len(batch):
                raise ValueError(f"reranker {reranker.name} returned {len(scores)} scores for {len(batch)} inputs")
            scored = [(key, float(s)) for (key, _), s in zip(batch, scores)]
            cache.put(identity, scored)
            known.update(scored)
            bar.update(len(batch))
    return [known[k] for k in keys], len(pending)


def rerank(run: Run | str | Path, benchmark: Benchmark, reranker: Reranker, depth: int = 100,
           out_dir: str | Path | None = None, *, cache: ScoreCache | str | Path | None = None,
           query_split: QuerySplit = "authors", doc_field: DocField = "indexed", progress: bool = True) -> Run:
    """Rescore the top-``depth`` documents of every query of a first-stage ``run`` (a
    :class:`Run` or a TREC file) with ``reranker`` and return the reranked run.

    With ``out_dir`` the run and its sidecar (reranker identity and prompt, the first-stage
    file's path and SHA-256, depth, split, document field, counts) are written there, and a
    complete run with the same key is read back instead of scoring again. ``cache`` is the
    score cache (default: :func:`~instir.retrieval.score_cache.default_score_cache_path`).
    """
    expect(benchmark, Benchmark, "rerank(run, benchmark, …)")
    if not callable(getattr(reranker, "model_input", None)):
        raise UsageError(f"rerank(…, reranker) takes a reranker (instir.build_system of a reranker card, e.g. "
                         f"'MonoT5-base (FollowIR)'), got {quoted(reranker)}")
    depth = check_depth(depth, where="rerank(…, depth)")
    if doc_field not in ("text", "indexed"):
        raise UsageError(f"unknown doc_field {doc_field!r}; use 'text' or 'indexed'")
    run, source = _first_stage(run)
    made_on = run.meta.get("benchmark")
    if isinstance(made_on, dict) and made_on.get("name") not in (None, benchmark.name):  # a sample's ids are the
        # real benchmark's too: reranked against it, the run would lose its sample label and its missing queries
        raise UsageError(f"{source['path'] or 'the first-stage run'} was retrieved on {quoted(made_on['name'])} (its "
                         f"sidecar), not on {quoted(benchmark.name)}: rerank it with the benchmark it was made from")
    key = rerank_key(benchmark, reranker, source, depth, query_split, doc_field)

    def rescore() -> tuple[Run, dict]:
        score_cache = cache if isinstance(cache, ScoreCache) else ScoreCache(cache)
        pairs = _pairs(run, benchmark, depth, query_split, doc_field)
        inputs = [reranker.model_input(query, instruction, text) for _, _, query, instruction, text in pairs]
        scores, scored = score_inputs(reranker, inputs, score_cache, progress)
        identity = key["reranker"]["identity"]
        reranked = Run.from_scores(_nested(pairs, scores))
        return reranked, {
            "retriever": {"name": f"{source['retriever'] or 'run'}>>{reranker.name}", "family": "rerank",
                          "params": {"reranker": key["reranker"], "depth": depth}},
            "reranker": key["reranker"],
            "template": {"name": identity.get("template_name", reranker.name), "prompt": identity.get("template")},
            "first_stage": source, "depth": depth, "query_split": query_split, "doc_field": doc_field,
            # what it ranks a query: no deeper than its first stage (by the one rule of a run's depth), however deep
            # the reranking
            "k": min(depth, ranked_depth(run, run.meta.get("k"), benchmark.queries)),
            "pairs": len(inputs), "scored": scored, "score_cache": str(score_cache.path)}

    return keyed_run(rerank_path(out_dir, key, source["path"]) if out_dir is not None else None, key, rescore)


def _nested(pairs: list[tuple[str, str, str, str, str]], scores: list[float]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for (qid, docid, *_), score in zip(pairs, scores):
        out.setdefault(qid, {})[docid] = score
    return out
