"""Reciprocal rank fusion against a hand-worked example, and the IFIR hybrid retriever."""

import pandas as pd
import pytest

from instir.benchmarks.types import Benchmark
from instir.formatting import Template, get_template
from instir.retrieval import retrieve
from instir.retrieval.fusion import IFIR_RRF_K, IFIR_WEIGHTS, HybridRetriever, lexical_template, rrf
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
    assert hybrid.name == "hybrid:dense-fixed+bm25" and hybrid.family == "dense"


class RecordingBM25(BM25Retriever):
    """BM25 that records the query texts each search fed it."""

    def __init__(self):
        super().__init__(show_progress=False)
        self.texts: list[str] = []

    def search(self, benchmark: Benchmark, template: Template, k: int) -> Run:
        self.texts += [template.format_query(q) for q in benchmark.queries.values()]
        return super().search(benchmark, template, k)


INSTRUCTION_WORDS = ("chef", "farmer", "homeowner", "sommelier")


@pytest.mark.parametrize("name", ["instructir-toy", "ifir-toy/fiqa"])
def test_a_query_only_hybrid_run_gives_bm25_no_instruction_words(toy_benchmark, name):
    bench = toy_benchmark(name)
    dense, bm25 = FixedDense({q: ["900", "901"] for q in bench.queries}), RecordingBM25()
    run = retrieve(bench, HybridRetriever(dense, bm25), template="query-only", k=3)
    assert dense.templates == ["query-only"]
    assert sorted(set(bm25.texts)) == ["what is saffron", "wine cabinet"]
    assert not any(word in text.lower() for text in bm25.texts for word in INSTRUCTION_WORDS)
    assert run.meta["search"]["retriever"]["lexical_template"] == "query-only"
    query_only = get_template("query-only")
    expected = rrf([dense.search(bench, query_only, 3),
                    BM25Retriever(show_progress=False).search(bench, query_only, 3)],
                   IFIR_WEIGHTS, depth=3)
    pd.testing.assert_frame_equal(run.df, expected.df)


@pytest.mark.parametrize("name,template,bm25_template", [
    ("instructir-toy", "instructir-e5-mistral", "instructir"),  # a model's own prompt: the benchmark's BM25 text
    ("instructir-toy", "instructir-instructor", "instructir"),
    ("ifir-toy/fiqa", "ifir-nv-embed", "ifir"),
    ("instructir-toy", "mteb", "mteb"),  # a plain text template reaches BM25 as it is
    ("instructir-toy", "instructir-query-first", "instructir-query-first"),
])
def test_an_instructed_hybrid_run_gives_bm25_the_plain_text_of_the_same_template(toy_benchmark, name, template,
                                                                                   bm25_template):
    bench = toy_benchmark(name)
    hybrid = HybridRetriever(FixedDense({q: ["900"] for q in bench.queries}), RecordingBM25())
    assert lexical_template(get_template(template), bench).name == bm25_template
    retrieve(bench, hybrid, template=template, k=3)
    expected = [get_template(bm25_template).format_query(q) for q in bench.queries.values()]
    assert hybrid.lexical.texts == expected and any("sommelier" in text for text in expected)


def test_bm25_gets_the_query_first_text_when_the_benchmark_asks_for_it(toy_benchmark):
    bench = toy_benchmark(setting="order-sensitivity")
    assert lexical_template(get_template("instructir-e5-mistral"), bench).name == "instructir-query-first"


def test_a_model_template_without_the_instruction_gives_bm25_the_bare_query(toy_benchmark):
    prompt_only = Template("prompt-only", "e5-mistral", "a model prompt around the bare query",
                           "Instruct: find passages\nQuery: {query}")
    assert lexical_template(prompt_only, toy_benchmark("ifir-toy/fiqa")).name == "query-only"


def test_a_hybrid_run_reports_the_engine_of_its_lexical_part(toy_benchmark):
    # on the commit before, the kit's own hybrid (bm25s) said "n/a": its BM25 engine is named only in the list of its
    # components, which run_engine did not read, so runs.csv and the paper comparison showed no engine for it
    from instir.retrieval.runs import run_engine

    bench = toy_benchmark("ifir-toy/fiqa")
    hybrid = HybridRetriever(FixedDense({q: ["900"] for q in bench.queries}), BM25Retriever(show_progress=False))
    run = retrieve(bench, hybrid, template="ifir", k=3)
    assert run_engine(run.meta) == run_engine(retrieve(bench, BM25Retriever(show_progress=False), k=3).meta) == "bm25s"


def test_rrf_scores_use_the_given_k_and_equal_unit_weights_and_the_meta_says_so():
    a, b = run_of({"q": ["x", "y"]}), run_of({"q": ["y"]})
    fused = rrf([a, b], k=10)
    assert fused.df[["docid", "score"]].values.tolist() == [["y", pytest.approx(1 / 12 + 1 / 11)],
                                                            ["x", pytest.approx(1 / 11)]]
    assert fused.meta["fusion"] == {"method": "rrf", "k": 10, "weights": [1.0, 1.0]}


def test_a_hybrid_fuses_with_its_own_rrf_k_and_says_which(toy_benchmark):
    bench = toy_benchmark("ifir-toy/fiqa")
    dense = FixedDense({q: ["900", "901", "902"] for q in bench.queries})
    hybrid = HybridRetriever(dense, BM25Retriever(show_progress=False), weights=(1.0, 0.5), rrf_k=5)
    run = retrieve(bench, hybrid, template="ifir", k=3)
    bm25 = BM25Retriever(show_progress=False).search(bench, get_template("ifir"), 3)
    expected = rrf([dense.search(bench, get_template("ifir"), 3), bm25], [1.0, 0.5], k=5, depth=3)
    pd.testing.assert_frame_equal(run.df, expected.df)
    assert run.meta["retriever"]["params"]["rrf_k"] == 5 and run.meta["retriever"]["params"]["weights"] == [1.0, 0.5]


def test_a_hybrid_is_named_after_its_dense_model_without_the_dense_prefix():
    dense = FixedDense({})
    dense.name = "dense:org/model"
    assert HybridRetriever(dense, BM25Retriever(show_progress=False)).name == "hybrid:org/model+bm25"


def test_a_hybrids_resolved_settings_are_the_lexical_parts_benchmark_defaults(toy_benchmark):
    bench = toy_benchmark("ifir-toy/fiqa")
    lexical = BM25Retriever(show_progress=False)
    resolved = HybridRetriever(FixedDense({}), lexical).resolved(bench)
    assert resolved["lexical"] == {"name": lexical.name, **lexical.resolved(bench)}
    assert resolved["lexical"]["k1"] is not None and resolved["lexical"]["k1"] != lexical.params()["k1"]


def test_a_pair_template_with_the_instruction_in_its_second_part_gives_bm25_the_instructed_text(toy_benchmark):
    pair = Template("pair-second", "instructor", "a fixed prompt, then the instructed query",
                    ("Represent the question:", "{instruction} {query}"))
    assert lexical_template(pair, toy_benchmark("ifir-toy/fiqa")).name == "ifir"
