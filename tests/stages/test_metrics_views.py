"""Notebook 03's tables from the evaluate stage's frames (:class:`instir.stages.evaluate.Metrics`), built by hand
so every number the page shows is worked out here: the ×100 views, the per-level table, the reading under the
table, the instructed-against-query-only pairs, the group minima and the subset Averages."""

import pandas as pd
import pytest

from instir.metrics.table import COLUMNS
from instir.stages.evaluate import Metrics, with_averages


def _row(benchmark, system, measure, value, subset="all", level="all", n=2):
    return {"system": system, "benchmark": benchmark, "setting": "instructed", "subset": subset, "level": level,
            "measure": measure, "value": value, "n_queries": n}


def _per_query(benchmark, system, measure, values):
    return pd.DataFrame({"benchmark": benchmark, "system": system, "qid": [f"q{i}" for i in range(len(values))],
                         "measure": measure, "value": values})


def _runs(benchmark, retriever):
    return pd.DataFrame({"benchmark": benchmark, "system": [retriever, f"{retriever} (query-only)"],
                         "retriever": retriever, "variant": ["instructed", "query-only"], "run_file": ["a", "b"]})


def _instructir() -> Metrics:
    bench = "instructir-sample"
    table = pd.DataFrame([_row(bench, "bm25", "nDCG@10", 0.9), _row(bench, "bm25", "Robustness@10", 0.6),
                          _row(bench, "bm25 (query-only)", "nDCG@10", 0.4),
                          _row(bench, "bm25 (query-only)", "Robustness@10", 0.1),
                          _row(bench, "bm25", "RR@10", 0.7)])[COLUMNS]
    per_query = pd.concat([_per_query(bench, "bm25", "nDCG@10", [1.0, 0.8]),
                           _per_query(bench, "bm25 (query-only)", "nDCG@10", [0.5, 0.3]),
                           _per_query(bench, "bm25", "RR@10", [1.0, 1.0]),
                           _per_query("ifir-sample/fiqa", "bm25", "nDCG@10", [0.123])], ignore_index=True)
    per_group = pd.DataFrame({"benchmark": bench, "system": ["bm25", "bm25", "bm25 (query-only)"],
                              "group": ["g1", "g2", "g1"], "measure": "Robustness@10", "value": [0.6, 0.6, 0.1],
                              "n_queries": 1})
    return Metrics(per_query, per_group, table, runs=_runs(bench, "bm25"))


def test_a_benchmarks_view_shows_its_headline_measures_x100_under_a_title_that_says_so():
    (view,) = _instructir().views()
    assert view.title == "instructir-sample: nDCG@10 and Robustness@10 (×100)"
    assert view.table.loc["bm25", "nDCG@10"] == 90.0 and view.table.loc["bm25 (query-only)", "Robustness@10"] == 10.0
    assert "RR@10" not in view.table.columns and view.by_level is None


def test_a_benchmarks_view_reads_its_numbers_in_words_counting_instances_of_the_first_headline_measure():
    (view,) = _instructir().views()
    # bm25's nDCG@10 per instance: 1.0 and 0.8, so 1 of 2 instances ranks the target below first
    assert "90.0 with the instruction against 40.0 with the query alone (+50.0 points)" in view.explanation
    assert "In 1 of 2 instances the target is not ranked first" in view.explanation


def test_the_instructed_and_query_only_values_are_paired_query_only_first_x100():
    measure, pairs = _instructir().instructed_vs_query_only("instructir-sample")
    assert measure == "nDCG@10"
    ((retriever, query_only, instructed),) = pairs
    assert retriever == "bm25"
    assert query_only.tolist() == [50.0, 30.0] and instructed.tolist() == [100.0, 80.0]


def test_group_minima_pair_each_systems_minima_with_its_own_benchmarks_instance_values():
    minima = _instructir().group_minima("instructir-sample")
    assert [(base, system) for base, system, _, _ in minima] == [("nDCG@10", "bm25"), ("nDCG@10", "bm25 (query-only)")]
    _, _, groups, values = minima[0]
    assert groups.tolist() == [0.6, 0.6] and values.tolist() == [1.0, 0.8]  # not ifir-sample/fiqa's 0.123


def _ifir() -> Metrics:
    rows = []
    for system, fiqa, levels, nfcorpus in (("bm25", 0.5, (0.7, 0.3), 0.2), ("bm25 (query-only)", 0.4, (0.6, 0.2), 0.1)):
        for measure, shift in (("nDCG@20", 0.0), ("nDCG@20[ifir-native]", 0.05)):
            rows += [_row("ifir-sample/fiqa", system, measure, fiqa + shift, "fiqa"),
                     _row("ifir-sample/fiqa", system, measure, levels[0] + shift, "fiqa", "1", 1),
                     _row("ifir-sample/fiqa", system, measure, levels[1] + shift, "fiqa", "2", 1),
                     _row("ifir-sample/nfcorpus", system, measure, nfcorpus + shift, "nfcorpus")]
    table = with_averages(pd.DataFrame(rows)[COLUMNS])
    per_query = pd.concat([_per_query("ifir-sample/fiqa", s, "nDCG@20", [0.5]) for s in ("bm25", "bm25 (query-only)")],
                          ignore_index=True)
    return Metrics(per_query, pd.DataFrame(), table, runs=_runs("ifir-sample/fiqa", "bm25"))


def test_a_familys_view_shows_its_subsets_and_their_average_pooled_and_its_levels_apart():
    (view,) = _ifir().views()
    assert view.title == "IFIR: nDCG@20, standard and IFIR-native (×100)"
    pooled = view.table
    assert pooled.loc["bm25", ("fiqa", "nDCG@20")] == 50.0 and pooled.loc["bm25", ("nfcorpus", "nDCG@20")] == 20.0
    assert pooled.loc["bm25", ("Average", "nDCG@20")] == pytest.approx(35.0)  # (50 + 20) / 2
    assert pooled.loc["bm25 (query-only)", ("Average", "nDCG@20")] == pytest.approx(25.0)
    assert view.by_level.loc["bm25", ("nDCG@20", "level 1")] == 70.0  # one subset: its name is in the title
    assert view.by_level.loc["bm25", ("nDCG@20", "level 2")] == 30.0
    assert view.by_level_title == "Per instruction level (fiqa)"
    assert view.note.startswith("Per subset with levels pooled")
    assert pooled.loc["bm25", ("fiqa", "nDCG@20[ifir-native]")] == 55.0


def test_a_family_without_levels_has_no_per_level_table_to_say_is_empty():
    # FollowIR's subsets have no levels: notebook 03 says "No benchmark with instruction levels loaded." only of a
    # family that can have them (IFIR with nfcorpus alone), not under FollowIR beside IFIR's per-level table
    followir = pd.DataFrame([_row("followir-sample/core17", "bm25", "p-MRR", 0.05, "core17")])[COLUMNS]
    (view,) = Metrics(_per_query("followir-sample/core17", "bm25", "AP@1000[og]", [0.5]), pd.DataFrame(),
                      followir).views()
    assert view.title.startswith("FollowIR") and view.by_level is None
    nfcorpus = pd.DataFrame([_row("ifir-sample/nfcorpus", "bm25", "nDCG@20", 0.2, "nfcorpus")])[COLUMNS]
    (view,) = Metrics(_per_query("ifir-sample/nfcorpus", "bm25", "nDCG@20", [0.2]), pd.DataFrame(), nfcorpus).views()
    assert view.by_level is not None and view.by_level.empty


def test_the_average_over_subsets_is_added_for_two_subsets_and_not_for_one():
    two = _ifir().table
    average = two[(two["subset"] == "average") & (two["measure"] == "nDCG@20")].set_index("system")
    assert average.loc["bm25", "value"] == pytest.approx((0.5 + 0.2) / 2) and average.loc["bm25", "n_queries"] == 4
    assert set(average["benchmark"]) == {"ifir-sample"} and set(average["level"]) == {"all"}
    one = with_averages(pd.DataFrame([_row("ifir-sample/fiqa", "bm25", "nDCG@20", 0.5, "fiqa")])[COLUMNS])
    assert (one["subset"] != "average").all() and len(one) == 1
    instructir = with_averages(pd.DataFrame([_row("instructir-sample", "bm25", "nDCG@10", 0.5)])[COLUMNS])
    assert len(instructir) == 1  # a family without an Average


def test_the_bundled_samples_among_the_scored_benchmarks_are_named():
    assert _instructir().samples == ["instructir-sample"]


def test_the_run_checks_table_keeps_a_column_that_says_something_of_one_run():
    checks = pd.DataFrame({"benchmark": "instructir-sample", "system": ["a", "b"], "run_file": ["a.trec", "b.trec"],
                           "run ids": "all known", "other_data": ["", "corpus"], "notes": ""})
    shown = Metrics(pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), run_checks=checks).checks_table()
    assert shown.columns.tolist() == ["benchmark", "system", "run ids", "other_data"]
    assert shown["other_data"].tolist() == ["", "corpus"]


def test_followirs_instructed_and_query_only_values_are_paired_on_its_first_per_query_measure():
    # p-MRR, FollowIR's first headline measure, has one value per query pair: the pairs are of AP@1000[og]
    bench = "followir-sample/core17"
    per_query = pd.concat([_per_query(bench, "bm25", "AP@1000[og]", [0.5, 0.25]),
                           _per_query(bench, "bm25 (query-only)", "AP@1000[og]", [0.25, 0.125])], ignore_index=True)
    per_group = pd.DataFrame({"benchmark": bench, "system": ["bm25", "bm25 (query-only)"], "group": "q0",
                              "measure": "p-MRR", "value": [0.1, 0.0], "n_queries": 2})
    metrics = Metrics(per_query, per_group, pd.DataFrame(columns=COLUMNS), runs=_runs(bench, "bm25"))
    measure, ((retriever, query_only, instructed),) = metrics.instructed_vs_query_only(bench)
    assert (measure, retriever) == ("AP@1000[og]", "bm25")
    assert query_only.tolist() == [25.0, 12.5] and instructed.tolist() == [50.0, 25.0]


def test_a_retriever_with_only_its_instructed_run_is_paired_with_nothing():
    metrics = _instructir()
    metrics.runs = metrics.runs[metrics.runs["variant"] == "instructed"]  # its query-only run not retrieved
    assert metrics.instructed_vs_query_only("instructir-sample") == ("nDCG@10", [])
