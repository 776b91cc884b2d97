"""Standard measures: against pytrec_eval called directly, and against hand-worked values."""

import math

import ir_measures
import numpy as np
import pandas as pd
import pytest
import pytrec_eval

from instir.metrics.standard import (
    Evaluator,
    labelled,
    mean_by_measure,
    metric_rows,
    parse_measures,
    ranked,
    run_dict,
    top_candidates,
)
from instir.retrieval.runs import Run

L2 = math.log2


def scored(run, qrels, measures):
    """Per-query values of one run: a one-off Evaluator."""
    return Evaluator(qrels, measures).per_query(run)


def _values(per_query: pd.DataFrame, measure: str) -> dict[str, float]:
    part = per_query[per_query["measure"] == measure]
    return dict(zip(part["qid"], part["value"]))


def _random_case(seed: int, n_queries: int = 30, n_docs: int = 60):
    """Graded qrels (some queries without relevant docs) and a run with tied scores that
    misses some queries and has some the qrels do not know."""
    rng = np.random.default_rng(seed)
    docs = [f"d{i:02d}" for i in range(n_docs)]
    qrels = {}
    for q in range(n_queries):
        judged = rng.choice(n_docs, size=rng.integers(1, 8), replace=False)
        qrels[f"q{q}"] = {docs[j]: int(rng.integers(0, 3)) for j in judged}
    run = {}
    for q in list(qrels)[: n_queries - 4] + ["unjudged1", "unjudged2"]:
        picked = rng.choice(n_docs, size=rng.integers(5, 40), replace=False)
        run[q] = {docs[j]: float(rng.integers(0, 6)) / 2 for j in picked}  # coarse scores: many ties
    return qrels, run


def _frame(run: dict[str, dict[str, float]]) -> pd.DataFrame:
    return pd.DataFrame([(q, d, s) for q, docs in run.items() for d, s in docs.items()],
                        columns=["qid", "docid", "score"])


TREC_NAMES = {"nDCG@10": "ndcg_cut_10", "nDCG@5": "ndcg_cut_5", "P@10": "P_10", "R@100": "recall_100",
              "R@5": "recall_5", "RR": "recip_rank", "AP": "map", "AP@10": "map_cut_10"}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_measure_matches_pytrec_eval_called_directly(seed):
    qrels, run = _random_case(seed)
    ev = Evaluator(qrels, list(TREC_NAMES))
    per_query = ev.per_query(_frame(run))
    direct = pytrec_eval.RelevanceEvaluator(qrels, set(TREC_NAMES.values())).evaluate(run)
    for measure, trec in TREC_NAMES.items():
        ours = _values(per_query, measure)
        assert set(ours) == set(ev.qids)
        for qid in ev.qids:
            expected = direct[qid][trec] if qid in run else 0.0
            assert ours[qid] == pytest.approx(expected, abs=1e-12), (measure, qid)


@pytest.mark.parametrize("seed", [0, 1])
def test_values_read_from_pytrec_eval_directly_are_ir_measures_own(seed):
    """:func:`metric_rows` reads pytrec_eval's answer as ir_measures' ``iter_calc`` does: the same rows (a query the run
    misses at the measure's default), for measures with and without a cutoff, whatever the labels name."""
    qrels, run = _random_case(seed)
    measures = [ir_measures.parse_measure(m) for m in [*TREC_NAMES, "RR@10", "P@5", "nDCG", "R@1000"]]
    evaluator = ir_measures.pytrec_eval.evaluator(measures, qrels)
    assert type(evaluator).__name__ == "PytrecEvalEvaluator"  # the evaluator metric_rows reads directly
    for labels in ({m: str(m) for m in measures}, {measures[0]: "only this"}):
        for answered in (run, {}):
            assert sorted(metric_rows(evaluator, answered, labels)) == \
                sorted(labelled(evaluator.iter_calc(answered), labels))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_run_and_its_frame_in_another_row_order_score_the_same_at_every_cutoff(seed):
    """A Run's top k per query is taken from its whole dict (its first k documents); a bare frame, shuffled, is put
    in order anew: the same values."""
    qrels, run = _random_case(seed)
    measures = ["nDCG@10", "RR@10", "RR@3", "R@100", "P@5"]
    frame = _frame(run).sample(frac=1, random_state=seed)
    pd.testing.assert_frame_equal(Evaluator(qrels, measures).per_query(Run(frame)),
                                  Evaluator(qrels, measures).per_query(frame))


def _rr_at_k_by_hand(run: dict[str, float], relevant: set[str], k: int) -> float:
    """trec_eval order written out: float32 score descending, then document id descending."""
    order = sorted(run, key=lambda d: (np.float32(run[d]), d), reverse=True)
    return next((1 / r for r, d in enumerate(order[:k], 1) if d in relevant), 0.0)


@pytest.mark.parametrize("seed", [3, 4])
def test_rr_at_k_matches_a_hand_written_trec_eval_order(seed):
    qrels, run = _random_case(seed)
    per_query = scored(_frame(run), qrels, ["RR@3", "RR@10"])
    for k in (3, 10):
        ours = _values(per_query, f"RR@{k}")
        for qid, value in ours.items():
            relevant = {d for d, g in qrels[qid].items() if g > 0}
            assert value == pytest.approx(_rr_at_k_by_hand(run.get(qid, {}), relevant, k)), (k, qid)


def test_graded_gains_hand_worked():
    # run order c (grade 0), b (1), a (2): DCG = 1/log2(3) + 2/log2(4); ideal = 2 + 1/log2(3)
    qrels = {"q": {"a": 2, "b": 1, "c": 0}}
    run = pd.DataFrame({"qid": "q", "docid": ["c", "b", "a"], "score": [3.0, 2.0, 1.0]})
    values = mean_by_measure(Evaluator(qrels, ["nDCG@10", "nDCG(gains={0:0,1:1,2:1})@10"]).per_query(run))
    assert values["nDCG@10"] == pytest.approx((1 / L2(3) + 2 / L2(4)) / (2 + 1 / L2(3)))
    # binary gains: DCG = 1/log2(3) + 1/log2(4); ideal = 1 + 1/log2(3)
    binary = [v for k, v in values.items() if k != "nDCG@10"]
    assert binary == [pytest.approx((1 / L2(3) + 1 / L2(4)) / (1 + 1 / L2(3)))]


def test_ties_are_broken_by_document_id_descending():
    qrels = {"q": {"a": 1}}
    run = pd.DataFrame({"qid": "q", "docid": ["a", "b"], "score": [1.0, 1.0]})
    values = mean_by_measure(Evaluator(qrels, ["RR", "RR@1", "nDCG@10", "P@1"]).per_query(run))
    assert values == pytest.approx({"RR": 0.5, "RR@1": 0.0, "nDCG@10": 1 / L2(3), "P@1": 0.0})


def test_scores_equal_at_float32_precision_are_ties():
    qrels = {"q": {"a": 1}}
    run = pd.DataFrame({"qid": "q", "docid": ["a", "b"], "score": [1.0000000001, 1.0]})
    assert mean_by_measure(Evaluator(qrels, ["RR", "RR@1"]).per_query(run)) == pytest.approx({"RR": 0.5, "RR@1": 0.0})


def test_a_document_a_hair_below_the_kth_in_float64_but_tied_in_float32_stays_in_the_top_k():
    """1.0 and 0.99999999999 are one float32 value: trec_eval ties them and puts b (id descending)
    first, so b is at rank 1 (pytrec_eval called directly: recip_rank = P_1 = ndcg_cut_1 = 1.0)."""
    qrels = {"q": {"b": 1}}
    run = {"q": {"a": 1.0, "b": 0.99999999999}}
    direct = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank", "P_1", "ndcg_cut_1"}).evaluate(run)
    assert direct["q"] == pytest.approx({"recip_rank": 1.0, "P_1": 1.0, "ndcg_cut_1": 1.0})
    values = mean_by_measure(Evaluator(qrels, ["RR@1", "P@1", "nDCG@1"]).per_query(_frame(run)))
    assert values == pytest.approx({"RR@1": 1.0, "P@1": 1.0, "nDCG@1": 1.0})


def test_a_query_without_retrieved_documents_scores_zero_and_is_averaged():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    run = pd.DataFrame({"qid": ["q1"], "docid": ["a"], "score": [1.0]})
    per_query = scored(run, qrels, ["nDCG@10", "RR@10"])
    assert _values(per_query, "nDCG@10") == {"q1": 1.0, "q2": 0.0}
    assert mean_by_measure(Evaluator(qrels, ["nDCG@10"]).per_query(run)) == {"nDCG@10": 0.5}


def test_an_empty_run_scores_zero_everywhere():
    qrels = {"q1": {"a": 1}, "q2": {"b": 2}}
    empty = pd.DataFrame({"qid": pd.Series([], dtype=str), "docid": pd.Series([], dtype=str),
                          "score": pd.Series([], dtype=float)})
    per_query = scored(empty, qrels, ["nDCG@10", "RR@10", "R@100", "P@10"])
    assert len(per_query) == 8 and (per_query["value"] == 0).all()


def test_queries_without_relevant_documents_are_excluded_and_listed():
    qrels = {"q1": {"a": 1}, "q2": {"b": 0, "c": 0}}
    run = pd.DataFrame({"qid": ["q1", "q2"], "docid": ["a", "b"], "score": [1.0, 1.0]})
    ev = Evaluator(qrels, ["nDCG@10"])
    assert ev.qids == ["q1"] and ev.excluded == ["q2"]
    assert mean_by_measure(ev.per_query(run)) == {"nDCG@10": 1.0}  # ir-measures/trec_eval would average in q2 as 0


def test_qrels_without_any_relevant_document_are_refused():
    with pytest.raises(ValueError, match="no relevant document"):
        Evaluator({"q": {"a": 0}}, ["nDCG@10"])


def test_run_queries_unknown_to_the_qrels_are_ignored():
    qrels = {"q1": {"a": 1}}
    run = pd.DataFrame({"qid": ["q1", "zz"], "docid": ["a", "a"], "score": [1.0, 1.0]})
    assert set(scored(run, qrels, ["nDCG@10"])["qid"]) == {"q1"}


def test_a_run_object_and_its_bare_frame_score_the_same():
    qrels, run = _random_case(5)
    frame = _frame(run)
    ev = Evaluator(qrels, ["nDCG@10", "RR@10", "AP"])
    pd.testing.assert_frame_equal(ev.per_query(Run(frame)), ev.per_query(frame))


def test_rr_at_k_counts_a_first_relevant_document_at_rank_k_in_a_run_read_from_a_file():
    """The only relevant document sits at rank exactly 10: RR@10 = 1/10 (pytrec_eval's recip_rank on
    the same run gives 0.1), for a Run object as for its bare frame."""
    qrels = {"q": {"d09": 1}}
    frame = pd.DataFrame({"qid": "q", "docid": [f"d{i:02d}" for i in range(12)],
                          "score": [float(12 - i) for i in range(12)]})  # d00 first, ..., d09 at rank 10
    direct = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(run_dict(frame))
    assert direct["q"]["recip_rank"] == pytest.approx(0.1)
    ev = Evaluator(qrels, ["RR@10"])
    assert _values(ev.per_query(Run(frame)), "RR@10") == {"q": pytest.approx(0.1)}
    assert _values(ev.per_query(frame), "RR@10") == {"q": pytest.approx(0.1)}


@pytest.mark.parametrize("as_run", [True, False], ids=["Run", "frame"])
def test_several_cutoffs_of_rr_alone_each_cut_a_run_deeper_than_the_smaller(as_run):
    """RR@3 and RR@10 with no other measure, on a run 12 deep: the only relevant document at rank 5 is past 3 and
    within 10, so RR@3 = 0 and RR@10 = 1/5 (the run is read 10 deep for both; each cutoff still cuts its own)."""
    qrels = {"q": {"d04": 1}}
    frame = pd.DataFrame({"qid": "q", "docid": [f"d{i:02d}" for i in range(12)],
                          "score": [float(12 - i) for i in range(12)]})  # d00 first, ..., d04 at rank 5
    per_query = Evaluator(qrels, ["RR@3", "RR@10"]).per_query(Run(frame) if as_run else frame)
    assert _values(per_query, "RR@3") == {"q": 0.0}
    assert _values(per_query, "RR@10") == {"q": pytest.approx(0.2)}


def test_per_query_frame_has_one_row_per_query_and_measure_in_order():
    qrels = {"q2": {"a": 1}, "q1": {"b": 1}}
    per_query = scored(pd.DataFrame({"qid": ["q1"], "docid": ["b"], "score": [1.0]}), qrels, ["P@10", "nDCG@10"])
    assert list(per_query.columns) == ["qid", "measure", "value"]
    assert list(zip(per_query["measure"], per_query["qid"])) == [
        ("P@10", "q2"), ("P@10", "q1"), ("nDCG@10", "q2"), ("nDCG@10", "q1")]


def test_duplicate_documents_in_a_query_are_refused():
    frame = pd.DataFrame({"qid": ["q", "q"], "docid": ["a", "a"], "score": [2.0, 1.0]})
    with pytest.raises(ValueError, match="more than once"):
        run_dict(frame)
    huge = "a" * 1_000_000
    with pytest.raises(ValueError, match=r"more than once for query 'q'") as err:
        run_dict(pd.DataFrame({"qid": ["q", "q"], "docid": [huge, huge], "score": [2.0, 1.0]}))
    assert len(str(err.value)) < 200  # the id is quoted by its first characters only


def test_unsupported_or_malformed_measures_are_refused():
    with pytest.raises(ValueError, match="not supported"):
        parse_measures(["ERR@10"])
    with pytest.raises(ValueError):
        parse_measures(["nDCG@@10"])
    with pytest.raises(ValueError, match="missing column"):
        scored(pd.DataFrame({"qid": ["q"], "docid": ["a"]}), {"q": {"a": 1}}, ["P@1"])


def test_measures_are_parsed_to_canonical_names():
    assert [str(m) for m in parse_measures(["nDCG@10", "RR@10", "R@100", "P@10", "nDCG@10"])] == \
        ["nDCG@10", "RR@10", "R@100", "P@10"]


def test_evaluator_reads_runs_only_as_deep_as_its_cutoffs_need():
    assert Evaluator({"q": {"a": 1}}, ["nDCG@10", "R@100"]).depth == 100
    assert Evaluator({"q": {"a": 1}}, ["nDCG@10", "AP"]).depth is None


@pytest.mark.parametrize("seed", [6, 7])
def test_top_candidates_keep_every_document_of_the_top_k(seed):
    _, run = _random_case(seed)
    frame = _frame(run)
    kept = top_candidates(frame, 5)
    top = ranked(frame, 5)
    assert set(zip(top["qid"], top["docid"])) <= set(zip(kept["qid"], kept["docid"]))
    assert len(kept) < len(frame)


def test_negative_grades_count_as_non_relevant_like_zero():
    """The readers keep negative grades (trec_eval accepts them); they score as grade 0."""
    run = pd.DataFrame({"qid": "q1", "docid": ["b", "a"], "score": [2.0, 1.0]})
    negative = scored(run, {"q1": {"a": 1, "b": -1}}, ["nDCG@10", "P@10", "RR@10"])
    zero = scored(run, {"q1": {"a": 1, "b": 0}}, ["nDCG@10", "P@10", "RR@10"])
    pd.testing.assert_frame_equal(negative, zero)
    assert negative["value"].tolist() == pytest.approx([1 / L2(3), 0.1, 0.5])
