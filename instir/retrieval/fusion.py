"""Hybrid retrieval by weighted reciprocal rank fusion (RRF).

IFIR (App. C; ``hybrid_search`` in the authors' ``src/utils/constant.py``) fuses the top-k
dense and BM25 lists with k = 60, dense weight 1.0 and BM25 weight 0.3:
``score(d) = sum_i w_i / (k + rank_i(d))`` over the runs that contain d, then keeps the top k.
The authors' Python sort kept dense-first insertion order among equal fused scores; here
ties are broken like every Run (document id descending, as trec_eval does).
"""

from __future__ import annotations

import string
from collections.abc import Sequence

import numpy as np
import pandas as pd

from instir.benchmarks.types import Benchmark
from instir.formatting import Template, default_template, get_template
from instir.retrieval.runs import Run, as_run

IFIR_RRF_K = 60
IFIR_WEIGHTS = (1.0, 0.3)  # (dense, BM25)


def rrf(runs: Sequence[Run | pd.DataFrame], weights: Sequence[float] | None = None, k: int = IFIR_RRF_K,
        depth: int | None = None, meta: dict | None = None) -> Run:
    """Weighted reciprocal rank fusion of any runs (equal weights by default).

    Ranks are each run's own 1-based ranks; ``depth`` cuts the fused list per query.
    """
    if not runs:
        raise ValueError("rrf needs at least one run")
    weights = [1.0] * len(runs) if weights is None else list(weights)
    if len(weights) != len(runs):
        raise ValueError(f"{len(weights)} weights for {len(runs)} runs")
    parts = []
    for run, weight in zip(runs, weights):
        df = as_run(run).df
        parts.append(pd.DataFrame({"qid": df["qid"], "docid": df["docid"],
                                   "score": weight / (k + df["rank"].to_numpy(dtype=np.float64))}))
    fused = pd.concat(parts, ignore_index=True).groupby(["qid", "docid"], sort=False, as_index=False)["score"].sum()
    out = Run(fused, {"fusion": {"method": "rrf", "k": k, "weights": weights}, **(meta or {})})
    return out.top(depth) if depth is not None else out


def lexical_template(template: Template, benchmark: Benchmark) -> Template:
    """The template BM25 gets in a hybrid run whose dense half gets ``template``: the same
    query text in BM25's plain form, so query-only stays query-only and instructed stays instructed.

    A plain-text template (family ``raw``: ``query-only``, ``instructir``, ``ifir``, ``mteb``, …)
    is used as it is; a model template that never uses the instruction gives ``query-only``;
    any other model template (prompts, INSTRUCTOR pairs) gives the benchmark's BM25 default
    (``instruction [SEP] query`` for InstructIR, ``query instruction`` for IFIR).
    """
    if template.family == "raw":
        return template
    parts = template.query if isinstance(template.query, tuple) else (template.query,)
    if not any(name == "instruction" for part in parts for _, name, _, _ in string.Formatter().parse(part)):
        return get_template("query-only")
    return default_template("bm25", benchmark)


class HybridRetriever:
    """IFIR's hybrid: a dense retriever and BM25, each taking its top ``k``, fused by RRF.

    The dense part uses the template :func:`retrieve` passes; BM25 gets that template's
    plain-text form (:func:`lexical_template`), so both halves see the same query text (as
    the authors did) and a query-only run is query-only in both.
    """

    def __init__(self, dense, lexical, *, weights: Sequence[float] = IFIR_WEIGHTS, rrf_k: int = IFIR_RRF_K):
        self.dense, self.lexical = dense, lexical
        self.weights, self.rrf_k = tuple(weights), rrf_k
        self.family = dense.family
        self.name = f"hybrid:{dense.name.removeprefix('dense:')}+{lexical.name}"  # as system_name("hybrid", model)

    def params(self) -> dict:
        """Both components' settings and the fusion parameters."""
        return {"dense": {"name": self.dense.name, **self.dense.params()},
                "lexical": {"name": self.lexical.name, **self.lexical.params()},
                "weights": list(self.weights), "rrf_k": self.rrf_k}

    def resolved(self, benchmark: Benchmark) -> dict:
        """:meth:`params` with the lexical part's settings as a search on ``benchmark`` takes them (BM25's
        ``resolved``: the benchmark's defaults for those it leaves unset)."""
        lexical = getattr(self.lexical, "resolved", lambda _: self.lexical.params())(benchmark)
        return {**self.params(), "lexical": {"name": self.lexical.name, **lexical}}

    def search(self, benchmark: Benchmark, template: Template, k: int) -> Run:
        """Top-``k`` fused results for every query; BM25 searches with :func:`lexical_template`."""
        bm25_template = lexical_template(template, benchmark)
        dense_run = self.dense.search(benchmark, template, k)
        lexical_run = self.lexical.search(benchmark, bm25_template, k)
        meta = {"retriever": {"name": self.name, "family": self.family, "params": self.params(),
                              "components": [dense_run.meta.get("retriever", {}),
                                             lexical_run.meta.get("retriever", {})],
                              "lexical_template": bm25_template.name}}
        return rrf([dense_run, lexical_run], self.weights, k=self.rrf_k, depth=k, meta=meta)
