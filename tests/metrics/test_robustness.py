"""Robustness@k: group minimum averaged over groups, after self-hits are dropped."""

import pandas as pd
import pytest

from instir.metrics.robustness import group_minima, label, query_groups, robustness
from instir.metrics.scoring import evaluate_runs
from instir.papers import canonical_measure


def _per_query(values: dict[str, float], measure: str = "nDCG@10") -> pd.DataFrame:
    return pd.DataFrame({"qid": list(values), "measure": measure, "value": list(values.values())})


def test_robustness_takes_the_group_minimum_and_averages_over_groups():
    per_query = _per_query({"1_1": 0.9, "1_2": 0.5, "1_3": 0.7, "2_1": 0.2, "2_2": 0.4})
    groups = {"1_1": "1", "1_2": "1", "1_3": "1", "2_1": "2", "2_2": "2"}
    out = robustness(per_query, groups)
    assert out.to_dict("records") == [
        {"measure": "Robustness@10", "value": pytest.approx((0.5 + 0.2) / 2), "n_groups": 2, "n_queries": 5}]
    minima = group_minima(per_query, groups)
    assert dict(zip(minima["group"], minima["value"])) == {"1": 0.5, "2": 0.2}


def test_robustness_is_a_group_average_not_an_instance_average():
    # group sizes differ: a query-weighted mean of minima would give (3*0.5 + 1*1.0)/4
    per_query = _per_query({"a_1": 0.5, "a_2": 0.6, "a_3": 0.9, "b_1": 1.0})
    groups = {q: q.split("_")[0] for q in ["a_1", "a_2", "a_3", "b_1"]}
    assert robustness(per_query, groups)["value"].iloc[0] == pytest.approx(0.75)


def test_one_failing_instance_drives_its_group_to_zero(instructir_like):
    # every instance finds its relevant document first, except 100_2 which finds nothing relevant
    rows = [(q, f"p{q}", 2.0) for q in instructir_like.queries if q != "100_2"] + [("100_2", "x1", 2.0)]
    run = pd.DataFrame(rows, columns=["qid", "docid", "score"])
    result = evaluate_runs({"sys": run}, instructir_like, ["nDCG@10"])
    table = result.table.set_index("measure")["value"]
    assert table["nDCG@10"] == pytest.approx(5 / 6)
    assert table["Robustness@10"] == pytest.approx(0.5)  # group 100 → 0, group 200 → 1
    minima = result.per_group.set_index("group")["value"]
    assert minima.to_dict() == {"100": 0.0, "200": 1.0}


def test_self_hits_are_dropped_before_scoring(instructir_like):
    # each query retrieves a document carrying its own id first; the official code removes it
    rows = [r for q in instructir_like.queries for r in ((q, q, 3.0), (q, f"p{q}", 2.0))]
    run = pd.DataFrame(rows, columns=["qid", "docid", "score"])
    table = evaluate_runs({"sys": run}, instructir_like, ["nDCG@10", "RR@10"]).table.set_index("measure")["value"]
    assert table["nDCG@10"] == 1.0 and table["Robustness(RR@10)"] == 1.0


def test_without_derived_measures_the_table_holds_only_the_robustness_asked_for(instructir_like):
    # RR@10 asked beside Robustness@10 (nDCG@10's): no Robustness(RR@10) row that was not asked for
    run = pd.DataFrame([(q, f"p{q}", 1.0) for q in instructir_like.queries], columns=["qid", "docid", "score"])
    table = evaluate_runs({"s": run}, instructir_like, ["nDCG@10", "RR@10", "Robustness@10"], derived=False).table
    assert sorted(table["measure"]) == ["RR@10", "Robustness@10", "nDCG@10"]


def test_robustness_works_for_any_measure(instructir_like):
    rows = [(q, f"p{q}", 1.0) if q.endswith("_1") else (q, "x1", 1.0) for q in instructir_like.queries]
    rows += [(q, f"p{q}", 0.5) for q in instructir_like.queries if not q.endswith("_1")]
    run = pd.DataFrame(rows, columns=["qid", "docid", "score"])
    table = evaluate_runs({"s": run}, instructir_like, ["RR@10", "P@1", "R@100"]).table.set_index("measure")["value"]
    assert table["Robustness(RR@10)"] == 0.5
    assert table["Robustness(P@1)"] == 0.0
    assert table["Robustness(R@100)"] == 1.0
    assert table["RR@10"] == pytest.approx((2 * 1 + 4 * 0.5) / 6)


def test_a_query_without_a_group_is_an_error():
    with pytest.raises(KeyError, match="no group"):
        robustness(_per_query({"1_1": 1.0, "9_9": 0.0}), {"1_1": "1"})


def test_groups_come_from_the_benchmark_queries(instructir_like):
    groups = query_groups(instructir_like)
    assert groups["100_2"] == "100" and groups["200_3"] == "200" and len(groups) == 6


def test_ndcg_robustness_is_spelled_as_instructir_prints_it_and_others_keep_their_measure():
    assert label("nDCG@10") == "Robustness@10"
    assert label("nDCG@20") == "Robustness@20"
    assert label("RR@10") == "Robustness(RR@10)"
    assert label("nDCG@20[ifir-native]") == "Robustness(nDCG@20[ifir-native])"
    assert canonical_measure(label("nDCG@10")) == ("Robustness@10", "")


def test_robustness_where_every_group_holds_one_query_is_said_to_be_the_mean_of_its_measure():
    # before, InstructIR's query-only setting (each query its own group) gave Robustness@10 = nDCG@10 without a word
    import warnings

    import instir
    from instir.benchmarks import load_benchmark

    alone = load_benchmark("instructir-sample", "query-only")
    with pytest.warns(UserWarning, match="every query group holds one query here, so Robustness@10 is the mean of "
                                         "nDCG@10"):
        values = instir.evaluate(alone, instir.retrieve(alone, "bm25", k=10), ["nDCG@10", "Robustness@10"])
    assert values["nDCG@10"] == values["Robustness@10"]
    grouped = load_benchmark("instructir-sample")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        instir.evaluate(grouped, instir.retrieve(grouped, "bm25", k=10), ["Robustness@10"])
    runs = {name: instir.retrieve(alone, "bm25", k=10) for name in ("a", "b")}
    with warnings.catch_warnings(record=True) as caught:  # once per scoring, not once per run (regression review)
        warnings.simplefilter("always")
        evaluate_runs(runs, alone, ["nDCG@10", "Robustness@10"])
    assert sum("every query group holds one query" in str(w.message) for w in caught) == 1
