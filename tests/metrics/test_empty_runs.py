"""A run in which no query retrieved anything is a result (every query scores 0), not a
format error: retrieve → write → read → evaluate, end to end, on a corpus that shares no
term with the queries."""

from pathlib import Path

import pytest

from instir.benchmarks.types import Benchmark, Corpus, Doc, Query
from instir.metrics.scoring import evaluate_runs
from instir.retrieval import read_run, retrieve
from instir.retrieval.lexical import BM25Retriever

DOCS = [Doc("d1", "Volcanoes erupt when magma rises through the crust."),
        Doc("d2", "Glaciers carve valleys over thousands of years.")]


def disjoint_benchmark(name: str) -> Benchmark:
    """Queries whose words occur in no document, in the InstructIR or the IFIR shape."""
    if name.startswith("ifir"):
        queries = {f"q_{lvl}": Query(f"q_{lvl}", "saffron paella", f"chef recipe {lvl}", group="q", level=lvl,
                                     subset="fiqa") for lvl in (1, 2)}
    else:
        queries = {f"1_{i}": Query(f"1_{i}", "saffron paella", f"chef recipe {i}", group="1") for i in (1, 2)}
    qrels = {qid: {doc.id: 1} for qid, doc in zip(queries, DOCS)}
    return Benchmark(name, "hand-made", "local", "instructed", Corpus.from_docs(DOCS), queries, qrels)


@pytest.mark.parametrize("name", ["instructir-sample", "ifir-sample/fiqa"])
def test_a_run_that_retrieved_nothing_scores_zero_for_every_query(tmp_path, name):
    bench = disjoint_benchmark(name)
    run = retrieve(bench, BM25Retriever(), template="query-only", k=10, out_dir=tmp_path)
    path = run.meta["path"]
    assert len(run) == 0 and Path(path).stat().st_size == 0

    evaluation = evaluate_runs({"bm25": read_run(path)}, bench)
    assert set(evaluation.per_query["qid"]) == set(bench.queries)
    assert (evaluation.per_query["value"] == 0).all() and (evaluation.table["value"] == 0).all()
    assert (evaluation.table.loc[evaluation.table["level"] == "all", "n_queries"] == len(bench.queries)).all()
    check = evaluation.checks["bm25"]
    assert check.ok and check.missing_qids == list(bench.queries)
    assert "2 benchmark queries have no results (they score 0)" in check.summary()
    if name.startswith("instructir"):
        assert (evaluation.per_group["value"] == 0).all() and len(evaluation.per_group)
    else:
        assert {"nDCG@20[ifir-native]", "RR@20[ifir-native]"} <= set(evaluation.per_query["measure"])


def test_a_run_that_leaves_queries_out_is_said_by_the_python_api_as_by_instir_evaluate():
    # instir.evaluate scored an empty run, or one answering 1 of 2 queries, without a word (the CLI warned)
    import instir
    from instir.metrics.scoring import RunIdWarning

    bench = disjoint_benchmark("instructir-sample")
    with pytest.warns(RunIdWarning, match="2 benchmark queries have no results \\(they score 0\\)"):
        assert instir.evaluate(bench, {}, "nDCG@10") == 0.0
    one = {"1_1": {"d1": 1.0}}
    with pytest.warns(RunIdWarning, match="1 benchmark queries have no results \\(they score 0\\): '1_2'"):
        assert instir.evaluate(bench, one, "nDCG@10") == 0.5
    with pytest.warns(RunIdWarning, match="1 queries of the qrels have no results in the run \\(they score 0\\): "
                                          "'1_2'"):
        assert instir.evaluate(bench.qrels, one, "nDCG@10") == 0.5


def test_a_query_judged_all_non_relevant_is_left_out_of_the_mean_and_said():
    # the kit's rule (instir.metrics.standard); trec_eval, ir-measures and ranx average it in as 0 (0.5 here)
    import instir

    qrels = {"q1": {"a": 1, "b": 0}, "q2": {"c": 0, "d": 0}}
    run = {"q1": {"a": 2.0, "b": 1.0}, "q2": {"c": 2.0, "d": 1.0}}
    with pytest.warns(UserWarning, match="1 queries of the qrels have no relevant document and are not averaged "
                                         "\\(trec_eval, ir-measures and ranx count each as 0\\): 'q2'"):
        assert instir.evaluate(qrels, run, "nDCG@10") == 1.0
