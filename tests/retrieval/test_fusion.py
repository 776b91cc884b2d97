"""Reciprocal rank fusion against a hand-worked example, and the IFIR hybrid retriever."""

import pandas as pd
import pytest

from instir.benchmarks.types import Benchmark
from instir.formatting import Template, get_template
from instir.retrieval import retrieve
from instir.retrieval.fusion import IFIR_RRF_K, IFIR_WEIGHTS, HybridRetriever, rrf
from instir.retrieval.lexical import BM25Retriever
from instir.retrieval.runs import Run


def run_of(ranked: dict[str, list[str]]) -> Run:
    """A run whose scores are 1/rank (only the ranks matter to RRF)."""
    return Run(pd.DataFrame([(q, d, 1.0 / r) for q, docs in ranked.items() for r, d in enumerate(docs, 1)],
                            columns=["qid", "docid", "score"]))


def test_weighted_rrf_matches_the_hand_worked_example():
    dense = run_of({"q": ["d1", "d2", "d3"]})
    bm25 = run_of({"q": ["d3", "d4"]})
    fused = rrf([dense, bm25], weights=[1.0, 0.3], k=60)
    # d1 = 1/61 = .016393; d2 = 1/62 = .016129; d3 = 1/63 + .3/61 = .015873 + .004918 = .020791; d4 = .3/62 = .004839
    assert fused.df["docid"].tolist() == ["d3", "d1", "d2", "d4"]
    assert fused.df["score"].tolist() == pytest.approx([0.020791, 0.016393, 0.016129, 0.004839], abs=1e-6)
    assert fused.meta["fusion"] == {"method": "rrf", "k": 60, "weights": [1.0, 0.3]}


def test_rrf_defaults_equal_weights_depth_and_bare_frames():
    a = run_of({"q1": ["x", "y"], "q2": ["z"]})
    b = run_of({"q1": ["y", "x"]}).df  # a bare DataFrame works too
    fused = rrf([a, b], depth=1)
    # x and y tie at 1/61 + 1/62: docid descending puts y first
    assert fused.df[["qid", "docid"]].values.tolist() == [["q1", "y"], ["q2", "z"]]
    assert IFIR_RRF_K == 60 and IFIR_WEIGHTS == (1.0, 0.3)


def test_rrf_rejects_mismatched_weights_and_no_runs():
    with pytest.raises(ValueError, match="2 weights for 1 runs"):
        rrf([run_of({"q": ["a"]})], weights=[1.0, 0.3])
    with pytest.raises(ValueError, match="at least one run"):
        rrf([])


class FixedDense:
    """A stand-in dense retriever: a fixed ranking, and a record of the template it got."""

    name = "dense-fixed"
    family = "dense"

    def __init__(self, ranked: dict[str, list[str]]):
        self.ranked, self.templates = ranked, []

    def params(self) -> dict:
        return {"ranking": "fixed"}

    def search(self, benchmark: Benchmark, template: Template, k: int) -> Run:
        self.templates.append(template.name)
        return run_of({q: docs[:k] for q, docs in self.ranked.items()})


def test_hybrid_fuses_dense_and_bm25_with_ifir_weights(toy_benchmark):
    bench = toy_benchmark("ifir-toy/fiqa")
    dense = FixedDense({q: ["900", "901", "902"] for q in bench.queries})
    hybrid = HybridRetriever(dense, BM25Retriever(show_progress=False))
    run = retrieve(bench, hybrid, template="ifir-promptriever", k=3)
    assert dense.templates == ["ifir-promptriever"]
    bm25 = BM25Retriever(show_progress=False).search(bench, get_template("ifir"), 3)
    expected = rrf([dense.search(bench, get_template("ifir"), 3), bm25], [1.0, 0.3], k=60, depth=3)
    pd.testing.assert_frame_equal(run.df, expected.df)
    params = run.meta["retriever"]["params"]
    assert params["weights"] == [1.0, 0.3] and params["rrf_k"] == 60 and params["dense"]["name"] == "dense-fixed"
    assert run.meta["search"]["retriever"]["lexical_template"] == "ifir"
    assert hybrid.name == "hybrid-dense-fixed-bm25" and hybrid.family == "dense"
