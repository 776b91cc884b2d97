"""Judge validation: gold-pair strata from the qrels, agreement statistics checked against
direct scikit-learn / SciPy calls on hand-made labels, and Kendall's tau between rankings."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from scripted_judge import ScriptedJudge, toy_benchmark
from sklearn.metrics import cohen_kappa_score, roc_auc_score

from instir.benchmarks.types import Query
from instir.judge.validation import (
    agreement,
    confusion,
    describe_agreement,
    gold_pairs,
    judge_grade,
    ranking_agreement,
    validate_judge,
)

NEGATIVES = [f"n{i}" for i in range(6)]


@pytest.fixture
def cumulative():
    """One IFIR-like query with cumulative levels: rel(3) ⊆ rel(2) ⊆ rel(1); c1 is a candidate
    that no level marks relevant."""
    queries = [Query(f"a_{lvl}", "qa", f"ia{lvl}", group="a", level=lvl, subset="fiqa") for lvl in (1, 2, 3)]
    qrels = {"a_1": {"d1": 1, "d2": 1, "d3": 1}, "a_2": {"d1": 1, "d2": 1}, "a_3": {"d1": 1, "d9": 0}}
    return toy_benchmark(queries, qrels, ["d1", "d2", "d3", "c1", "d9", *NEGATIVES],
                         meta={"candidates": {"a": ["d1", "d2", "d3", "c1"]}})


def pairs_of(frame, level, label):
    rows = frame[(frame["level"] == level) & (frame["label"] == label)]
    return sorted(zip(rows["qid"], rows["docid"]))


def test_gold_pairs_label_siblings_from_other_levels_and_candidates(cumulative):
    pairs = gold_pairs(cumulative, per_stratum=100)
    assert pairs_of(pairs, 1, "relevant") == [("a_1", "d1"), ("a_1", "d2"), ("a_1", "d3")]
    assert pairs_of(pairs, 1, "sibling") == [("a_1", "c1")]
    assert pairs_of(pairs, 2, "sibling") == [("a_2", "c1"), ("a_2", "d3")]
    assert pairs_of(pairs, 3, "relevant") == [("a_3", "d1")]  # grade 0 is not relevant
    assert pairs_of(pairs, 3, "sibling") == [("a_3", "c1"), ("a_3", "d2"), ("a_3", "d3")]
    negatives = pairs[pairs["label"] == "not_relevant"]
    assert set(negatives["docid"]) <= set(NEGATIVES + ["d9"]) and len(negatives) == 3 * 7
    assert (pairs["grade"] == pairs["label"].map({"relevant": 2, "sibling": 1, "not_relevant": 0})).all()


def test_gold_pairs_take_at_most_per_stratum_pairs_with_a_fixed_seed(cumulative):
    pairs = gold_pairs(cumulative, per_stratum=2, seed=5)
    counts = pairs.groupby(["level", "label"]).size().to_dict()
    assert counts == {(1, "not_relevant"): 2, (1, "relevant"): 2, (1, "sibling"): 1, (2, "not_relevant"): 2,
                      (2, "relevant"): 2, (2, "sibling"): 2, (3, "not_relevant"): 2, (3, "relevant"): 1,
                      (3, "sibling"): 2}
    pd.testing.assert_frame_equal(pairs, gold_pairs(cumulative, per_stratum=2, seed=5))
    others = {tuple(map(tuple, gold_pairs(cumulative, per_stratum=2, seed=s)[["qid", "docid"]].to_numpy()))
              for s in range(8)}
    assert len(others) > 1


def test_instructir_siblings_are_the_targets_of_the_other_instructions_of_the_group():
    queries = [Query(f"g_{k}", "q", f"instruction {k}", group="g") for k in (1, 2, 3)]
    bench = toy_benchmark(queries, {f"g_{k}": {f"t{k}": 1} for k in (1, 2, 3)}, ["t1", "t2", "t3", *NEGATIVES])
    pairs = gold_pairs(bench, per_stratum=50)
    assert set(pairs["subset"]) == {"toy"} and pairs["level"].isna().all()
    sib = pairs[pairs["label"] == "sibling"]
    assert sorted(zip(sib["qid"], sib["docid"])) == [("g_1", "t2"), ("g_1", "t3"), ("g_2", "t1"), ("g_2", "t3"),
                                                     ("g_3", "t1"), ("g_3", "t2")]
    assert set(pairs.loc[pairs["label"] == "not_relevant", "docid"]) <= set(NEGATIVES)


@pytest.mark.parametrize(("score", "max_score", "grade"), [(0, 1, 0), (1, 1, 2), (1, 2, 1), (2, 2, 2), (0, 3, 0),
                                                           (2, 3, 1), (3, 3, 2)])
def test_judge_grade_maps_the_full_ladder_to_relevant_and_partial_steps_to_sibling(score, max_score, grade):
    assert judge_grade(score, max_score) == grade


def hand_made() -> pd.DataFrame:
    return pd.DataFrame({
        "grade": [2, 2, 2, 1, 1, 1, 0, 0, 0, 2, 0],
        "judge_grade": pd.array([2, 1, 2, 1, 0, 2, 0, 0, 1, None, None], dtype="Int64"),
        "norm": [0.9, 0.6, 1.0, 0.5, 0.2, 0.8, 0.0, 0.1, 0.4, math.nan, math.nan],
        "error": [None] * 9 + ["malformed answer: no JSON object", "HTTP 500: boom"],
        "latency_s": [1.0, 2.0, 3.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 4.0, 0.0],
        "cost": [0.01] * 9 + [None, None],
        "from_cache": [False] * 8 + [True, False, False],
        "weighting": ["logprobs"] * 6 + ["parsed"] * 3 + [None, None],
    })


def test_agreement_matches_direct_sklearn_and_scipy_on_the_successful_judgments():
    frame = hand_made()
    got = agreement(frame).set_index("statistic")
    gold = np.array([2, 2, 2, 1, 1, 1, 0, 0, 0])
    judged = np.array([2, 1, 2, 1, 0, 2, 0, 0, 1])
    norm = np.array([0.9, 0.6, 1.0, 0.5, 0.2, 0.8, 0.0, 0.1, 0.4])
    assert got.loc["kappa_binary", "value"] == pytest.approx(cohen_kappa_score(gold == 2, judged == 2))
    assert got.loc["kappa_graded_linear", "value"] == pytest.approx(cohen_kappa_score(gold, judged, weights="linear"))
    assert got.loc["pearson_r", "value"] == pytest.approx(stats.pearsonr(norm, gold).statistic)
    assert got.loc["spearman_rho", "value"] == pytest.approx(stats.spearmanr(norm, gold).statistic)
    assert got.loc["roc_auc", "value"] == pytest.approx(roc_auc_score(gold == 2, norm))
    assert got.loc["roc_auc", "value"] == pytest.approx(17 / 18)  # one relevant (0.6) below one other (0.8)
    assert got.loc["kappa_binary", "n"] == 9
    assert got.loc["failure_rate", "value"] == pytest.approx(2 / 11)
    assert got.loc["parse_failure_rate", "value"] == pytest.approx(1 / 11)
    assert (got.loc["parsed_share", "value"], got.loc["parsed_share", "n"]) == (pytest.approx(3 / 9), 9)
    assert got.loc["mean_latency_s", "value"] == pytest.approx((1 + 2 + 3 + 5 * 1 + 4 + 0) / 10)  # fresh ones only
    assert got.loc["cost", "value"] == pytest.approx(0.08)


def test_confusion_counts_gold_rows_against_judge_columns():
    matrix = confusion(hand_made())
    assert matrix.loc["relevant"].tolist() == [0, 1, 2]
    assert matrix.loc["sibling"].tolist() == [1, 1, 1]
    assert matrix.loc["not_relevant"].tolist() == [2, 1, 0]
    assert int(matrix.to_numpy().sum()) == 9


def test_statistics_undefined_on_one_class_are_nan():
    frame = hand_made().iloc[:3]  # gold all relevant
    got = agreement(frame).set_index("statistic")["value"]
    assert math.isnan(got["roc_auc"]) and math.isnan(got["pearson_r"])
    assert math.isnan(agreement(hand_made().iloc[9:]).set_index("statistic").loc["kappa_binary", "value"])


def test_validate_judges_each_pair_on_its_instance_rubric(cumulative):
    pairs = gold_pairs(cumulative, per_stratum=100)
    judge = ScriptedJudge({"d1": 1.0, "d2": 1.0, "d3": 0.0, "c1": 0.0, "d9": 0.0, "n0": None}, parsed={"d1"})
    result = validate_judge(cumulative, judge, pairs)
    by_pair = result.pairs.set_index(["qid", "docid"])
    assert by_pair.loc[("a_1", "d2"), ["max_score", "judge_grade"]].tolist() == [1, 2]  # level 1: 0-1 ladder
    assert by_pair.loc[("a_3", "d2"), ["max_score", "judge_grade"]].tolist() == [3, 1]
    assert by_pair.loc[("a_3", "d2"), "norm"] == pytest.approx(1 / 3)
    assert len(judge.requests) == len(pairs)
    failed = result.pairs["error"].notna()
    assert set(result.pairs.loc[failed, "docid"]) <= {"n0", "n1", "n2", "n3", "n4", "n5"}
    assert failed.sum() == result.pairs["docid"].isin(NEGATIVES).sum() > 0  # unscripted passages fail
    stats_ = result.agreement.set_index("statistic")["value"]
    assert stats_["failure_rate"] == pytest.approx(failed.mean())
    assert stats_["parsed_share"] == pytest.approx((result.pairs.loc[~failed, "docid"] == "d1").mean())
    assert set(result.pairs.loc[~failed, "weighting"]) == {"parsed", "logprobs"}
    assert int(result.confusion.to_numpy().sum()) == (~failed).sum()


def test_judge_scores_are_normalised_by_their_own_rubrics_top_score(cumulative):
    # a_1 is judged on the 0-1 ladder: d2 scored 1 is its top, norm 1 / 1 = 1.0; on a_3's 0-3 ladder 1 / 3
    pairs = gold_pairs(cumulative, per_stratum=100)
    judge = ScriptedJudge({"d1": 1.0, "d2": 1.0, "d3": 0.0, "c1": 0.0, "d9": 0.0})
    result = validate_judge(cumulative, judge, pairs)
    by_pair = result.pairs.set_index(["qid", "docid"])
    assert by_pair.loc[("a_1", "d2"), ["max_score", "weighted", "norm"]].tolist() == [1, 1.0, 1.0]
    assert by_pair.loc[("a_3", "d2"), "norm"] == pytest.approx(1 / 3)
    ok = result.pairs["norm"].notna()
    assert (result.pairs.loc[ok, "norm"] == result.pairs.loc[ok, "weighted"] / result.pairs.loc[ok, "max_score"]).all()


def test_a_judge_whose_every_judgment_fails_gives_nan_statistics_and_an_empty_confusion(cumulative):
    """A judge outage: every request fails. The validation must still finish (no sklearn error on
    an empty array), with failure rate 1, undefined statistics and no sentence about agreement."""
    result = validate_judge(cumulative, ScriptedJudge({}, error="gave up after 7 attempts; last: HTTP 500: down"),
                      per_stratum=2)
    got = result.agreement.set_index("statistic")
    assert got.loc["failure_rate", "value"] == 1.0 and got.loc["pairs", "value"] == len(result.pairs) > 0
    for name in ("kappa_binary", "kappa_graded_linear", "pearson_r", "spearman_rho", "roc_auc"):
        assert math.isnan(got.loc[name, "value"]) and got.loc[name, "n"] == 0
    assert result.confusion.shape == (3, 3) and int(result.confusion.to_numpy().sum()) == 0
    assert describe_agreement(result.agreement) == ""


def test_describe_agreement_reads_the_pooled_figures_and_names_undefined_ones():
    text = describe_agreement(agreement(hand_made()))
    assert "On 9 successfully judged of 11 labelled pairs" in text
    assert f"ROC AUC {17 / 18:.2f}" in text
    one_class = describe_agreement(agreement(hand_made().iloc[:3]))
    assert "ROC AUC undefined (one class only)" in one_class


def test_only_figures_from_fewer_than_100_judgments_are_called_a_rough_indication():
    caution = "These are few pairs: treat the figures as a rough indication"
    assert caution in describe_agreement(agreement(hand_made()))  # 9 judged
    many = pd.concat([hand_made()] * 12, ignore_index=True)  # 108 judged of 132
    text = describe_agreement(agreement(many))
    assert "On 108 successfully judged of 132 labelled pairs" in text and caution not in text
    assert caution in describe_agreement(agreement(pd.concat([hand_made()] * 11, ignore_index=True)))  # 99


def test_ranking_agreement_is_scipy_kendall_tau_over_common_systems():
    judge = {"bm25": 0.10, "dense": 0.25, "hybrid": 0.20, "only-judged": 0.9}
    gold = {"bm25": 0.40, "dense": 0.55, "hybrid": 0.60}
    got = ranking_agreement(judge, gold)
    expected = stats.kendalltau([0.10, 0.25, 0.20], [0.40, 0.55, 0.60])
    assert got["systems"] == ["bm25", "dense", "hybrid"]
    assert got["tau"] == pytest.approx(expected.statistic) and got["tau"] == pytest.approx(1 / 3)
    assert got["p_value"] == pytest.approx(expected.pvalue)
    with pytest.raises(ValueError, match="at least two systems"):
        ranking_agreement({"bm25": 0.1}, gold)


def test_ranking_agreement_with_tied_judge_scores_is_tau_b():
    # a and b tie on the judge's side: pairs (a,b) tied in x, (a,c) and (b,c) concordant; tau-b = (C - D) /
    # sqrt((n0 - ties_x)(n0 - ties_y)) = 2 / sqrt((3 - 1)(3 - 0)) = 2 / sqrt(6) (tau-c would be 8/9)
    got = ranking_agreement({"a": 1, "b": 1, "c": 2}, {"a": 1, "b": 2, "c": 3})
    assert got["tau"] == pytest.approx(2 / math.sqrt(6))
    assert got["tau"] == pytest.approx(stats.kendalltau([1, 1, 2], [1, 2, 3], variant="b").statistic)


def test_single_level_ifir_subsets_get_hard_negatives_from_the_candidate_lists():
    from instir.benchmarks import load_benchmark

    pairs = gold_pairs(load_benchmark("ifir-sample/nfcorpus"), per_stratum=50)
    siblings = pairs[pairs["label"] == "sibling"]
    assert len(siblings) > 0
    bench = load_benchmark("ifir-sample/nfcorpus")
    for qid, docid in siblings[["qid", "docid"]].itertuples(index=False):
        assert docid in bench.meta["candidates"][bench.queries[qid].group]
        assert docid not in bench.qrels[qid]


def test_confusion_has_every_label_even_one_neither_side_used():
    frame = pd.DataFrame({"grade": [2, 0, 0], "judge_grade": pd.array([2, 0, 2], dtype="Int64"), "error": [None] * 3})
    matrix = confusion(frame)
    assert matrix.loc["sibling"].tolist() == [0, 0, 0] and matrix["sibling"].tolist() == [0, 0, 0]
    assert matrix.loc["not_relevant"].tolist() == [1, 0, 1] and matrix.loc["relevant"].tolist() == [0, 0, 1]


def test_kappa_on_relevant_vs_rest_is_defined_when_only_the_gold_side_is_one_class():
    # gold all relevant, the judge split: kappa is 0 (chance), as scikit-learn computes it, not undefined
    got = agreement(hand_made().iloc[:3]).set_index("statistic")["value"]
    assert got["kappa_binary"] == pytest.approx(cohen_kappa_score([1, 1, 1], [1, 0, 1])) == 0.0


def test_gold_pairs_leave_out_relevant_ids_the_corpus_lacks():
    # such a pair could only fail ("document not in the corpus") and raise the failure rate
    bench = toy_benchmark([Query("g_1", "q", "i", group="g")], {"g_1": {"t1": 1, "gone": 1}}, ["t1", *NEGATIVES])
    pairs = gold_pairs(bench, per_stratum=50)
    assert "gone" not in set(pairs["docid"])
    assert pairs.loc[pairs["label"] == "relevant", "docid"].tolist() == ["t1"]


def test_a_pair_whose_document_is_not_in_the_corpus_is_a_failed_judgment(cumulative):
    pairs = pd.DataFrame({"qid": ["a_3", "a_3"], "docid": ["d1", "gone"], "subset": "fiqa", "level": [3, 3],
                          "label": ["relevant", "not_relevant"], "grade": [2, 0]})
    result = validate_judge(cumulative, ScriptedJudge({"d1": 3.0}), pairs)
    by_doc = result.pairs.set_index("docid")
    assert by_doc.loc["gone", "error"] == "document not in the corpus" and pd.isna(by_doc.loc["gone", "judge_grade"])
    assert by_doc.loc["gone", "max_score"] == 3 and by_doc.loc["d1", "judge_grade"] == 2
    assert result.agreement.set_index("statistic").loc["failure_rate", "value"] == 0.5
