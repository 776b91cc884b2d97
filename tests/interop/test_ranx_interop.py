"""Runs and qrels to ranx and back, checked against ranx itself: the round trip is identical (order,
ties, float32 scores, metadata), and ranx's own nDCG@10 on a converted run is the kit's."""

import pandas as pd
import pytest

from instir.benchmarks.registry import load_benchmark
from instir.interop import qrels_to_ranx
from instir.metrics import qrels_of
from instir.metrics.scoring import evaluate_runs
from instir.retrieval.lexical import BM25Retriever
from instir.retrieval.runs import Run, content_sha256, trec_bytes
from instir.retrieval.search import retrieve

pytestmark = pytest.mark.interop


def test_a_kit_run_goes_to_ranx_and_back_identical_with_its_metadata(ranx, bm25_run):
    converted = bm25_run.to_ranx()
    assert isinstance(converted, ranx.Run) and converted.name == "bm25"
    assert list(converted.keys()) == sorted(bm25_run.qids)  # ranx orders queries by id …
    back = Run.from_ranx(converted)
    pd.testing.assert_frame_equal(back.df, bm25_run.df)  # … the kit gets its own order back
    assert back.meta == bm25_run.meta and back.meta is not bm25_run.meta
    assert trec_bytes(back) == trec_bytes(bm25_run)


def test_ties_keep_the_kits_trec_order_in_ranx_and_on_the_way_back(ranx, tied_frame):
    run = Run(tied_frame, {"name": "tied"})
    converted = run.to_ranx()
    for qid, docs in converted.to_dict().items():  # ranx's own ranking: sorted by score
        ranked = sorted(docs, key=docs.get, reverse=True)
        assert ranked == run.df.loc[run.df["qid"] == qid, "docid"].tolist()
    assert run.df.loc[run.df["qid"] == "q2", "docid"].tolist() == ["d3", "d2", "d1", "d10"]  # docid descending
    back = Run.from_ranx(converted)
    pd.testing.assert_frame_equal(back.df, run.df)
    assert back.qids == ["q2", "q1"] and back.meta == run.meta and run.meta["name"] == "tied"  # its ties record too


def test_the_name_given_to_ranx_is_what_its_reports_print(ranx, bm25_run):
    assert bm25_run.to_ranx(name="BM25 (InstructIR)").name == "BM25 (InstructIR)"
    assert Run.from_scores({"q": {"d": 1.0}}).to_ranx().name is None


@pytest.mark.parametrize("name", ["instructir-sample", "ifir-sample/fiqa", "ifir-sample/nfcorpus"])
def test_ranx_scores_a_converted_run_as_the_kit_does(ranx, name):
    benchmark = load_benchmark(name)
    run = retrieve(benchmark, BM25Retriever(), k=100)
    kit = evaluate_runs({"bm25": run}, benchmark, ["nDCG@10"], derived=False).per_query
    converted = run.to_ranx()
    mean = ranx.evaluate(qrels_to_ranx(benchmark.qrels), converted, "ndcg@10")
    assert mean == pytest.approx(kit["value"].mean(), abs=1e-12)
    per_query = dict(converted.scores["ndcg@10"])
    assert per_query == pytest.approx(dict(zip(kit["qid"], kit["value"])), abs=1e-12)


def test_a_ranx_run_changed_after_conversion_comes_back_without_the_stale_metadata(ranx, bm25_run):
    converted = bm25_run.to_ranx()
    first = bm25_run.qids[0]
    converted.add_score(first, "a-new-document", 1e6)  # ranx's API; the content hash no longer matches
    back = Run.from_ranx(converted)
    assert back.meta == {"source": "ranx", "name": "bm25", "tag": "bm25"}
    assert back.qids == sorted(bm25_run.qids)  # ranx's order: the kit's order is not vouched for either
    assert back.df.loc[back.df["qid"] == first, "docid"].iloc[0] == "a-new-document"
    assert content_sha256(back) != content_sha256(bm25_run)


def test_a_ranx_run_made_elsewhere_reads_with_ranx_s_name(ranx):
    made = ranx.Run({"q1": {"d1": 0.5, "d2": 0.25}, "q2": {"d3": 1.0}}, name="my system")
    run = Run.from_ranx(made)
    assert run.meta == {"source": "ranx", "name": "my system"}  # two words: no TREC tag
    assert run.to_dict() == {"q1": {"d1": 0.5, "d2": 0.25}, "q2": {"d3": 1.0}}
    assert Run.from_ranx(made, meta={"tag": "mine"}).meta == {"tag": "mine"}


def test_queries_ranx_holds_without_documents_have_no_rows(ranx, bm25_run, instructir_sample):
    converted = bm25_run.to_ranx()
    qrels = qrels_to_ranx({**instructir_sample.qrels, "unanswered": {"d": 1}})
    converted.make_comparable(qrels)  # what ranx.evaluate(make_comparable=True) does: adds an empty query
    back = Run.from_ranx(converted)
    assert "unanswered" in converted.keys() and "unanswered" not in back.qids
    pd.testing.assert_frame_equal(back.df, bm25_run.df)
    assert back.meta == bm25_run.meta


def test_an_empty_run_round_trips(ranx):
    empty = Run.from_scores({}, {"name": "nothing"})
    back = Run.from_ranx(empty.to_ranx())
    assert len(back) == 0 and back.meta == {"name": "nothing"}


def test_qrels_go_to_ranx_and_back_with_their_grades(ranx, instructir_sample):
    graded = {"q1": {"d1": 2, "d2": 0, "d3": 1}, "q2": {"d4": 1}, "unjudged": {}}
    converted = qrels_to_ranx(graded, name="toy")
    assert isinstance(converted, ranx.Qrels) and converted.name == "toy"
    assert qrels_of(converted) == {"q1": {"d1": 2, "d2": 0, "d3": 1}, "q2": {"d4": 1}}
    assert qrels_of(qrels_to_ranx(instructir_sample.qrels)) == instructir_sample.qrels


@pytest.mark.parametrize("grade", [2.7, 0.5, float("nan"), float("inf"), "1.5", True])
def test_a_grade_that_is_no_whole_number_is_refused_not_cut(ranx, grade):
    # on the commit before, 2.7 went to ranx as 2 and 0.5 to PyTerrier as 0: a relevant document made non-relevant
    from instir.interop import qrels_to_pyterrier

    for convert in (qrels_to_ranx, qrels_to_pyterrier):
        with pytest.raises(ValueError, match="query 'q', document 'd', field 'relevance'.*grades are whole numbers"):
            convert({"q": {"d": grade}})
    assert qrels_to_pyterrier({"q": {"d": 2.0}})["label"].tolist() == [2]


def test_the_old_names_of_qrels_back_from_ranx_and_pyterrier_still_read_them_with_a_warning():
    import instir.interop
    from instir.interop import qrels_to_pyterrier

    for old in ("qrels_from_ranx", "qrels_from_pyterrier"):
        with pytest.warns(DeprecationWarning, match="instir.metrics.qrels_of"):
            convert = getattr(instir.interop, old)
        assert convert(qrels_to_pyterrier({"q": {"d": 2}})) == {"q": {"d": 2}}
