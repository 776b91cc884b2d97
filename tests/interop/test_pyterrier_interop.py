"""Runs and qrels as PyTerrier frames and back, checked against PyTerrier 1.x itself (no JVM: its
frames, ``pt.model.add_ranks``, ``pt.io`` and ``pt.Evaluate`` / ``pt.Experiment`` run without one)."""

import ir_measures
import pandas as pd
import pytest

from instir.interop import qrels_to_pyterrier
from instir.metrics import qrels_of
from instir.metrics.scoring import evaluate_runs
from instir.retrieval.runs import Run

#: PyTerrier 1.1.2 calls pandas with inplace=, which pandas 3.1 deprecates (its warning, not the kit's)
pytestmark = [pytest.mark.interop, pytest.mark.filterwarnings("ignore:The inplace keyword in DataFrame")]


def test_a_kit_run_is_a_pyterrier_result_frame_ranked_as_pyterrier_ranks_it(pt, bm25_run):
    frame = bm25_run.to_pyterrier()
    assert list(frame.columns) == ["qid", "docno", "score", "rank"]
    assert frame["rank"].min() == pt.model.FIRST_RANK == 0
    reranked = pt.model.add_ranks(frame.drop(columns="rank").copy())  # PyTerrier's canonical ranks
    assert reranked["rank"].tolist() == frame["rank"].tolist()
    assert frame["docno"].tolist() == bm25_run.df["docid"].tolist() and not pt.java.started()


def test_a_kit_run_goes_to_pyterrier_and_back_identical_with_its_metadata(pt, bm25_run):
    back = Run.from_pyterrier(bm25_run.to_pyterrier())
    pd.testing.assert_frame_equal(back.df, bm25_run.df)
    assert back.meta == bm25_run.meta


def test_a_frame_changed_in_pyterrier_comes_back_without_the_stale_metadata(pt, bm25_run):
    frame = bm25_run.to_pyterrier()
    cut = frame[frame["rank"] < 10]  # pandas carries attrs through, the content changed: a top-10 run
    assert "instir" in cut.attrs
    back = Run.from_pyterrier(cut)
    pd.testing.assert_frame_equal(back.df, bm25_run.top(10).df)
    assert back.meta == {"source": "pyterrier"}


def test_pt_evaluate_and_pt_experiment_score_the_frame_as_the_kit_does(pt, bm25_run, instructir_sample):
    kit = evaluate_runs({"bm25": bm25_run}, instructir_sample, ["nDCG@10", "RR@10"], derived=False)
    frame, qrels = bm25_run.to_pyterrier(), qrels_to_pyterrier(instructir_sample.qrels)
    per_query = pt.Evaluate(frame, qrels, [ir_measures.nDCG @ 10, ir_measures.RR @ 10], perquery=True)
    for measure in ("nDCG@10", "RR@10"):
        theirs = {q: values[measure] for q, values in per_query.items()}
        ours = kit.per_query[kit.per_query["measure"] == measure]
        assert theirs == pytest.approx(dict(zip(ours["qid"], ours["value"])), abs=1e-12)
    topics = pd.DataFrame({"qid": list(instructir_sample.queries),
                           "query": [q.query for q in instructir_sample.queries.values()]})
    experiment = pt.Experiment([frame], topics, qrels, [ir_measures.nDCG @ 10], names=["bm25"])
    table = kit.table[(kit.table["measure"] == "nDCG@10") & (kit.table["level"] == "all")]
    assert experiment["nDCG@10"].iloc[0] == pytest.approx(table["value"].iloc[0], abs=1e-12)


def test_a_tied_pyterrier_frame_is_ordered_as_pt_evaluate_scores_it(pt):
    """PyTerrier numbers ties in frame order (add_ranks, method="first"); its evaluation, like the
    kit, ranks them by docno descending (trec_eval), whatever the rank column says."""
    frame = pt.model.add_ranks(pd.DataFrame({"qid": ["q1"] * 3, "docno": ["a", "b", "c"], "score": [1.0, 1.0, 0.5]}))
    assert frame["rank"].tolist() == [0, 1, 2]
    qrels = pd.DataFrame({"qid": ["q1"], "docno": ["a"], "label": [1]})
    run = Run.from_pyterrier(frame)
    assert run.df["docid"].tolist() == ["b", "a", "c"]
    theirs = pt.Evaluate(frame, qrels, [ir_measures.nDCG @ 10])["nDCG@10"]
    ours = pt.Evaluate(run.to_pyterrier(), qrels, [ir_measures.nDCG @ 10])["nDCG@10"]
    assert theirs == ours == pytest.approx(1 / 1.5849625007211563)  # a at rank 2: 1 / log2(3)


def test_a_run_written_and_read_by_pyterrier_comes_back_with_its_name(pt, bm25_run, tmp_path):
    path = tmp_path / "bm25.res"
    pt.io.write_results(bm25_run.to_pyterrier(), str(path), run_name="bm25-pt")
    read = pt.io.read_results(str(path))
    back = Run.from_pyterrier(read)
    pd.testing.assert_frame_equal(back.df, bm25_run.df)
    assert back.meta == {"source": "pyterrier", "name": "bm25-pt", "tag": "bm25-pt"}


def test_frames_without_the_result_columns_are_refused(pt):
    with pytest.raises(ValueError, match="qid, docno, score"):
        Run.from_pyterrier(pd.DataFrame({"qid": ["1"], "docid": ["d"], "score": [1.0]}))


def test_qrels_go_to_a_pyterrier_frame_and_back(pt, instructir_sample):
    frame = qrels_to_pyterrier(instructir_sample.qrels)
    assert list(frame.columns) == ["qid", "docno", "label"] and frame["label"].dtype == "int64"
    assert qrels_of(frame) == instructir_sample.qrels
    graded = {"q1": {"d1": 2, "d2": 0}, "q2": {"d3": 1}}
    assert qrels_of(qrels_to_pyterrier(graded).assign(iteration="0")) == graded


def test_a_pyterrier_qrels_frame_judging_a_document_twice_is_refused():
    frame = pd.DataFrame({"qid": ["q1", "q1"], "docno": ["d1", "d1"], "label": [1, 0]})
    with pytest.raises(ValueError, match="judged twice"):
        qrels_of(frame)
    with pytest.raises(ValueError, match="whole numbers"):
        qrels_of(frame.assign(docno=["d1", "d2"], label=[0.5, 1.0]))
