"""InstFol@k against hand-worked examples: the formula, failures dropped from both lists, the
constant 3 on 0-1 and 0-2 rubrics, Table 3 aggregation, stratified selection, and reruns."""

import math
import warnings

import pandas as pd
import pytest
from says import raises_saying
from scripted_judge import ScriptedJudge, toy_benchmark

from instir.benchmarks.types import Query
from instir.errors import UsageError
from instir.judge.cache import CachedJudge
from instir.judge.following import (
    UnscoredWarning,
    aggregate,
    instfol,
    instfol_score,
    overall,
    printable,
    score_list_pair,
    select_instances,
)
from instir.retrieval.runs import Run


def run_frame(lists: dict[str, list[str]]) -> pd.DataFrame:
    """A run whose documents rank in the given order."""
    return pd.DataFrame([(qid, d, float(len(docs) - r)) for qid, docs in lists.items() for r, d in enumerate(docs)],
                        columns=["qid", "docid", "score"])


@pytest.mark.parametrize(("s_q", "s_inst", "expected"), [
    (1.0, 2.0, 0.5),        # (2 - 1) / (3 - 1)
    (0.0, 3.0, 1.0),
    (1.5, 1.5, 0.0),        # equal
    (3.0, 2.0, -1.0),       # S_q == 3: plain difference
    (3.0, 3.0, 0.0),
    (2.0, 0.0, -2.0),       # not bounded below by -1: (0 - 2) / (3 - 2)
])
def test_instfol_score_follows_the_official_formula(s_q, s_inst, expected):
    assert instfol_score(s_q, s_inst) == pytest.approx(expected)


def test_failures_are_dropped_from_both_lists_and_counted():
    # rank 2 failed in the query list, rank 3 in the instructed list: both ranks leave both lists
    pair = score_list_pair([3.0, None, 1.0], [2.0, 3.0, None])
    assert (pair.s_q, pair.s_inst) == (3.0, 2.0)
    assert pair.instfol == pytest.approx(-1.0)  # S_q == 3
    assert (pair.n_q, pair.n_inst, pair.dropped, pair.failed) == (1, 1, 2, 2)


def test_parsed_judgments_are_counted_where_they_enter_the_averages():
    # rank 2 is dropped (failure in the instructed list), so its parsed query-list judgment is not counted
    pair = score_list_pair([1.0, 2.0, 3.0], [2.0, None, 1.0], query_weighting=["parsed", "parsed", "logprobs"],
                           instructed_weighting=["logprobs", None, "parsed"])
    assert (pair.parsed, pair.dropped, pair.failed) == (2, 1, 1)
    assert score_list_pair([1.0], [2.0]).parsed == 0


def test_instfol_counts_parsed_judgments_per_instance_level_subset_and_average(toy):
    judge = ScriptedJudge(SCORES, parsed={"d1", "d6", "d8", "e1", "e4"})
    result = instfol(run_frame(INSTRUCTED), run_frame(QUERY_ONLY), toy, judge, k=3)
    got = result.instances.set_index("qid")["parsed"]
    # a_1: d1 in both lists; a_2: d8 kept, d6 failed (not a judgment that entered S); n_0: e1, e4
    assert got.to_dict() == {"a_1": 2, "a_2": 1, "n_0": 2}
    summary = result.summary().set_index(["scope", "subset"])
    assert summary.loc[("subset", "fiqa"), "parsed"] == 3 and summary.loc[("average", "average"), "parsed"] == 5
    assert result.meta["parsed_judgments"] == 4  # distinct requests: d1, d8, e1, e4
    assert list(summary.columns[-3:]) == ["failed", "dropped", "parsed"]


def test_a_failure_at_the_same_rank_of_both_lists_counts_twice_but_drops_one_rank():
    pair = score_list_pair([1.0, None, 2.0], [2.0, None, 3.0])
    assert (pair.s_q, pair.s_inst) == (1.5, 2.5)
    assert pair.instfol == pytest.approx(1.0 / 1.5)
    assert (pair.dropped, pair.failed) == (1, 2)


def test_a_shorter_list_is_averaged_over_what_it_has():
    pair = score_list_pair([1.0, 2.0], [3.0, 3.0, 0.0])
    assert (pair.s_q, pair.s_inst, pair.n_q, pair.n_inst) == (1.5, 2.0, 2, 3)
    assert pair.instfol == pytest.approx(0.5 / 1.5)


def test_an_instance_without_any_usable_judgment_is_nan_not_zero():
    pair = score_list_pair([None, None], [1.0, 2.0])
    assert math.isnan(pair.instfol) and math.isnan(pair.s_q)
    assert (pair.dropped, pair.failed) == (2, 2)
    assert math.isnan(score_list_pair([], [1.0]).instfol)


QUERIES = [
    Query("a_1", "qa", "ia1", group="a", level=1, subset="fiqa"),
    Query("a_2", "qa", "ia2", group="a", level=2, subset="fiqa"),
    Query("n_0", "qn", "in0", group="n", level=0, subset="nfcorpus"),
]
DOCS = ["d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8", "e1", "e2", "e3", "e4"]
QUERY_ONLY = {"a_1": ["d1", "d2", "d3"], "a_2": ["d5", "d6", "d7"], "n_0": ["e1", "e2"]}
INSTRUCTED = {"a_1": ["d2", "d4", "d1"], "a_2": ["d8", "d6", "dX"], "n_0": ["e3", "e4"]}
# a_1 is judged on the 0-1 level-1 ladder, a_2 on the 0-2 ladder; d6 fails, dX is not in the corpus
SCORES = {"d1": 0.0, "d2": 1.0, "d3": 0.0, "d4": 1.0, "d5": 2.0, "d6": None, "d7": 1.0, "d8": 2.0,
          "e1": 3.0, "e2": 3.0, "e3": 3.0, "e4": 2.0}


@pytest.fixture
def toy():
    return toy_benchmark(QUERIES, {"a_1": {"d2": 1}, "a_2": {"d8": 1}, "n_0": {"e3": 1}}, DOCS)


def test_instfol_per_instance_by_hand(toy):
    judge = ScriptedJudge(SCORES)
    result = instfol(run_frame(INSTRUCTED), run_frame(QUERY_ONLY), toy, judge, k=3)
    got = result.instances.set_index("qid")
    # a_1: S_q = 1/3, S_inst = 2/3 on a 0-1 ladder, still divided by 3 - S_q: (1/3) / (8/3) = 1/8, not 1/2
    assert got.loc["a_1", ["s_q", "s_inst", "instfol"]].tolist() == pytest.approx([1 / 3, 2 / 3, 0.125])
    assert got.loc["a_1", "rubric"] == "fiqa/1"
    # a_2: ranks 2 (d6 failed in both lists) and 3 (dX unknown) dropped; S_q = S_inst = 2
    assert got.loc["a_2", ["s_q", "s_inst", "instfol"]].tolist() == [2.0, 2.0, 0.0]
    assert got.loc["a_2", ["n_q", "n_inst", "dropped", "failed"]].tolist() == [1, 1, 2, 3]
    # n_0: S_q == 3, so InstFol is S_inst - S_q
    assert got.loc["n_0", ["s_q", "s_inst", "instfol"]].tolist() == [3.0, 2.5, -0.5]
    missing = result.positions.query("docid == 'dX'")
    assert missing["error"].tolist() == ["document not in the corpus"] and missing["weighted"].isna().all()


def test_a_k_past_the_runs_depth_is_said_not_printed_as_instfol_at_k_alone(toy):
    # on the commit before, instir judge --k 1000000 on runs 100 deep printed InstFol@1000000 without a word; and
    # (before the one depth rule) the warning said 3, its deepest instance, while the depth recorded said 2
    judge = ScriptedJudge(SCORES)
    with pytest.warns(UserWarning, match="the instructed run ranks 2 passages for instance 'n_0' \\(its shallowest "
                                         "instance: the others rank more\\), fewer than k = 5: each list of this "
                                         "InstFol@5 is averaged over the passages it holds"):
        deep = instfol(run_frame(INSTRUCTED), run_frame(QUERY_ONLY), toy, judge, k=5)
    assert deep.meta["depth"] == 2
    assert deep.instances.equals(instfol(run_frame(INSTRUCTED), run_frame(QUERY_ONLY), toy, judge, k=3).instances)


def test_an_instance_whose_s_passes_the_formulas_3_is_said_with_its_value_as_the_official_formula_gives_it(toy):
    # a judge may answer 5 on any rubric (the official code takes it): n_0's query-only list averages 4.5, so
    # (S_inst - S_q) / (3 - S_q) turns over: an instructed list judged worse reads as a gain
    judge = ScriptedJudge({**SCORES, "e1": 5.0, "e2": 4.0})
    with pytest.warns(UserWarning, match="1 instance\\(s\\) \\(first 'n_0'\\) have S_q or S_inst above 3: the judge "
                                         "scored passages above its rubric's top step"):
        result = instfol(run_frame(INSTRUCTED), run_frame(QUERY_ONLY), toy, judge, k=3)
    got = result.instances.set_index("qid")
    assert got.loc["n_0", ["s_q", "s_inst", "instfol"]].tolist() == pytest.approx([4.5, 2.5, (2.5 - 4.5) / (3 - 4.5)])


def test_both_lists_are_judged_against_the_instance_instruction_once_per_distinct_pair(toy):
    judge = ScriptedJudge(SCORES)
    result = instfol(run_frame(INSTRUCTED), run_frame(QUERY_ONLY), toy, judge, k=3)
    a_1 = [r for r in judge.requests if r.passage in {"d1", "d2", "d3", "d4"}]
    assert {(r.query, r.instruction, r.rubric.name) for r in a_1} == {("qa", "ia1", "fiqa/1")}
    assert sorted(r.passage for r in a_1) == ["d1", "d2", "d3", "d4"]  # d1, d2 are in both lists: judged once
    assert (result.meta["requests"], result.meta["unique_requests"], len(judge.requests)) == (16, 12, 12)
    assert result.meta["failed_judgments"] == 1  # d6 (dX never reached the judge)


def test_summary_aggregates_levels_subsets_and_average_with_failures(toy):
    result = instfol(run_frame(INSTRUCTED), run_frame(QUERY_ONLY), toy, ScriptedJudge(SCORES), k=3)
    summary = result.summary()
    rows = {(r.scope, r.subset, None if pd.isna(r.level) else int(r.level)): r for r in summary.itertuples()}
    assert rows[("level", "fiqa", 1)].instfol == pytest.approx(0.125)
    assert rows[("level", "fiqa", 2)].failed == 3
    assert rows[("subset", "fiqa", None)].instfol == pytest.approx(0.0625)
    assert rows[("subset", "nfcorpus", None)].instfol == pytest.approx(-0.5)
    assert rows[("average", "average", None)].instfol == pytest.approx((0.0625 - 0.5) / 2)
    assert (rows[("average", "average", None)].failed, rows[("average", "average", None)].dropped) == (3, 2)
    shown = printable(summary).set_index(["scope", "subset"])
    assert shown.loc[("average", "average"), "InstFol x100"] == pytest.approx(-21.9)


def test_multi_level_subset_takes_the_unweighted_mean_of_its_levels():
    instances = pd.DataFrame({
        "qid": ["x1", "x2", "x3", "x4", "y1"],
        "subset": ["fiqa", "fiqa", "fiqa", "fiqa", "cds"],
        "level": pd.array([1, 1, 1, 2, 0], dtype="Int64"),
        "s_q": [1.0, 1.0, 1.0, 1.0, 0.0], "s_inst": [1.0, 1.0, 1.0, 1.0, 0.0],
        "instfol": [0.2, 0.4, math.nan, 0.6, -0.5],
        "failed": [0, 1, 40, 0, 2], "dropped": [0, 1, 20, 0, 1], "parsed": [0, 3, 0, 2, 5],
    })
    summary = aggregate(instances).set_index(["scope", "subset"])
    assert summary.loc[("level", "fiqa")]["instfol"].tolist() == pytest.approx([0.3, 0.6])
    fiqa = summary.loc[("subset", "fiqa")]
    assert fiqa["instfol"] == pytest.approx(0.45)  # not 0.4, the mean over the three scored instances
    assert (fiqa["instances"], fiqa["scored"], fiqa["failed"], fiqa["dropped"]) == (4, 3, 41, 21)
    assert summary.loc[("average", "average"), "instfol"] == pytest.approx((0.45 - 0.5) / 2)
    assert summary.loc[("average", "average"), "failed"] == 43
    assert summary.loc[("level", "fiqa")]["parsed"].tolist() == [3, 2]
    assert (fiqa["parsed"], summary.loc[("average", "average"), "parsed"]) == (5, 10)


def test_a_three_level_subset_is_the_mean_of_its_three_level_values_not_their_median():
    # METRICS.md (InstFol step 6): Table 3's subset value is the unweighted mean of its three level values
    instances = pd.DataFrame({
        "qid": ["x1", "x2", "x3"], "subset": "fiqa", "level": pd.array([1, 2, 3], dtype="Int64"),
        "s_q": [0.0, 0.5, 2.5], "s_inst": [0.3, 1.0, 2.8], "instfol": [0.1, 0.2, 0.9],
        "failed": 0, "dropped": 0, "parsed": 0,
    })
    fiqa = aggregate(instances).set_index(["scope", "subset"]).loc[("subset", "fiqa")]
    assert fiqa["instfol"] == pytest.approx((0.1 + 0.2 + 0.9) / 3)  # 0.4; the median would be 0.2
    assert fiqa["s_q"] == pytest.approx((0.0 + 0.5 + 2.5) / 3)
    assert fiqa["s_inst"] == pytest.approx((0.3 + 1.0 + 2.8) / 3)


def test_printable_shows_s_values_to_three_decimals():
    instances = pd.DataFrame({"qid": ["y1"], "subset": "nfcorpus", "level": pd.array([0], dtype="Int64"),
                              "s_q": [1 / 3], "s_inst": [2 / 3], "instfol": [0.125], "failed": 0, "dropped": 0,
                              "parsed": 0})
    shown = printable(aggregate(instances)).iloc[0]
    assert (shown["s_q"], shown["s_inst"], shown["InstFol x100"]) == (0.333, 0.667, 12.5)  # (1/3 -> 2/3: 1/8 x 100)


def test_a_subset_with_a_level_left_without_a_value_has_none_nor_has_the_average():
    # before, pandas' mean skipped the level every judgment of which failed: fiqa was printed as the mean of the two
    # levels left (6.3 where the complete judgment gave 4.2), and the Average as the mean of what was left of it
    instances = pd.DataFrame({
        "qid": ["x1", "x2", "x3", "x4", "y1"],
        "subset": ["fiqa", "fiqa", "fiqa", "fiqa", "cds"],
        "level": pd.array([1, 1, 2, 3, 0], dtype="Int64"),
        "s_q": [1.0, 1.0, math.nan, 1.0, 0.0], "s_inst": [1.0, 1.0, math.nan, 1.0, 0.0],
        "instfol": [0.2, math.nan, math.nan, 0.6, -0.5],
        "failed": [0, 40, 40, 0, 0], "dropped": [0, 20, 20, 0, 0], "parsed": 0,
    })
    summary = aggregate(instances).set_index(["scope", "subset"])
    assert summary.loc[("level", "fiqa")]["instfol"].tolist() == pytest.approx([0.2, math.nan, 0.6], nan_ok=True)
    assert summary.loc[("subset", "fiqa"), ["instfol", "s_q", "s_inst"]].isna().all()  # not (0.2 + 0.6) / 2
    assert summary.loc[("subset", "cds"), "instfol"] == pytest.approx(-0.5)
    assert math.isnan(summary.loc[("average", "average"), "instfol"])  # not cds's -0.5 alone
    assert summary.loc[("subset", "fiqa"), "scored"] == 2 and summary.loc[("average", "average"), "failed"] == 80


def test_instances_left_without_a_value_are_said_with_their_level_and_that_a_rerun_resumes(toy):
    # before, nothing said that fiqa's value stood on level 1 alone once every judgment of level 2 failed
    scores = {**SCORES, "d5": None, "d7": None, "d8": None}
    with pytest.warns(UnscoredWarning) as said:
        result = instfol(run_frame(INSTRUCTED), run_frame(QUERY_ONLY), toy, ScriptedJudge(scores), k=3)
    message = " ".join(str(w.message) for w in said if issubclass(w.category, UnscoredWarning))
    assert "1 of 3 instance(s) have no InstFol" in message and "fiqa level 2: 'a_2'" in message
    assert "fiqa level 2 has no scored instance, so fiqa has no value (nor has the Average)" in message
    assert "run again" in message and "judged again" in message
    assert math.isnan(result.summary().set_index(["scope", "subset"]).loc[("subset", "fiqa"), "instfol"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnscoredWarning)  # every instance scored: nothing said
        instfol(run_frame(INSTRUCTED), run_frame(QUERY_ONLY), toy, ScriptedJudge({**SCORES, "d6": 1.0}), k=3)


def test_a_sample_too_small_to_hold_every_level_of_a_subset_is_said_naming_the_levels_left_out(toy):
    # before, max_instances = 2 judged fiqa's level 1 (or 2) alone and printed that as fiqa's value without a word
    with pytest.warns(UnscoredWarning, match=r"max_instances = 2 leaves fiqa level \d out of the sample: such a "
                                             r"subset's InstFol is the mean of the levels sampled.*at least 3"):
        instfol(run_frame(INSTRUCTED), run_frame(QUERY_ONLY), toy, ScriptedJudge({**SCORES, "d6": 1.0}), k=3,
                max_instances=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnscoredWarning)  # one instance a level: nothing said
        instfol(run_frame(INSTRUCTED), run_frame(QUERY_ONLY), toy, ScriptedJudge({**SCORES, "d6": 1.0}), k=3,
                max_instances=3)


def test_the_judge_page_says_which_instances_have_no_value_as_text():
    from types import SimpleNamespace

    from markdown_render import rendered_html

    from instir.stages.judge import Judging

    hostile = "bm25 *x* <b>"
    instances = pd.DataFrame({"qid": ["x1", "x2", "y1"], "subset": ["fiqa", "fiqa", "cds"],
                              "level": pd.array([1, 2, 0], dtype="Int64"), "instfol": [0.2, math.nan, 0.1],
                              "failed": [0, 40, 0], "collection": "ifir", "system": [hostile, hostile, hostile]})
    said = rendered_html(Judging.unscored_statement(SimpleNamespace(instfol=SimpleNamespace(instances=instances))))
    assert said.startswith("<ul>\n<li><strong>ifir / bm25 *x* &lt;b&gt;</strong>: 1 of 3 instance(s) have no "
                           "InstFol (fiqa level 2: 'x2')")
    assert "fiqa level 2 has no scored instance, so fiqa has no value (nor has the Average)" in said
    complete = SimpleNamespace(instfol=SimpleNamespace(instances=instances.assign(instfol=0.1)))
    assert Judging.unscored_statement(complete) == ""


def test_a_benchmark_without_levels_or_subsets_gets_one_row():
    """InstructIR: no level, one 'subset' (the benchmark's name). A level, subset and Average row
    would be one value three times (and collide when compared with the papers)."""
    instances = pd.DataFrame({"qid": ["1_1", "1_2", "2_1"], "subset": "instructir",
                              "level": pd.array([None, None, None], dtype="Int64"),
                              "s_q": [1.0, 2.0, 0.0], "s_inst": [2.0, 2.0, 1.0], "instfol": [0.5, 0.0, 1 / 3],
                              "failed": [0, 1, 0], "dropped": [0, 1, 0], "parsed": [0, 0, 2]})
    summary = aggregate(instances)
    assert summary[["scope", "subset"]].values.tolist() == [["subset", "instructir"]]
    row = summary.iloc[0]
    assert row["instfol"] == pytest.approx((0.5 + 0 + 1 / 3) / 3)
    assert (row["instances"], row["scored"], row["failed"], row["dropped"], row["parsed"]) == (3, 3, 1, 1, 2)
    assert pd.isna(row["level"])


def test_a_single_level_subset_has_no_level_row_and_one_subset_no_average():
    instances = pd.DataFrame({"qid": ["y1", "y2"], "subset": "nfcorpus", "level": pd.array([0, 0], dtype="Int64"),
                              "s_q": 1.0, "s_inst": 1.0, "instfol": [0.2, 0.4], "failed": 0, "dropped": 0,
                              "parsed": 0})
    summary = aggregate(instances)
    assert summary[["scope", "subset"]].values.tolist() == [["subset", "nfcorpus"]]
    assert summary["instfol"].iloc[0] == pytest.approx(0.3)


def test_overall_takes_the_average_row_else_the_only_subset_row():
    instances = pd.DataFrame({"qid": ["x1", "x2", "y1"], "subset": ["fiqa", "fiqa", "nfcorpus"],
                              "level": pd.array([1, 2, 0], dtype="Int64"), "s_q": 1.0, "s_inst": 1.0,
                              "instfol": [0.2, 0.4, -0.5], "failed": 0, "dropped": 0, "parsed": 0})
    two = aggregate(instances).assign(system="a", benchmark="ifir")
    one = aggregate(instances[instances["subset"] == "fiqa"]).assign(system="b", benchmark="ifir")
    top = overall(pd.concat([two, one], ignore_index=True))
    assert top[["system", "scope", "subset"]].values.tolist() == [["a", "average", "average"],
                                                                  ["b", "subset", "fiqa"]]
    assert top["instfol"].tolist() == pytest.approx([(0.3 - 0.5) / 2, 0.3])


def queries_in_strata(sizes: dict[int, int]) -> list[Query]:
    return [Query(f"q{level}_{i}", "q", "i", group=f"q{level}_{i}", level=level, subset="fiqa")
            for level, n in sizes.items() for i in range(n)]


def test_selection_shares_the_budget_across_subset_and_level_strata():
    queries = queries_in_strata({1: 5, 2: 5, 3: 1})
    chosen, table = select_instances(queries, 7, seed=3)
    assert table.set_index("level")["selected"].to_dict() == {1: 3, 2: 3, 3: 1}  # the small stratum's share moves on
    assert table["available"].tolist() == [5, 5, 1]
    assert len(chosen) == 7 and chosen == [q.id for q in queries if q.id in set(chosen)]
    assert select_instances(queries, 7, seed=3)[0] == chosen
    assert {tuple(select_instances(queries, 7, seed=s)[0]) for s in range(10)} != {tuple(chosen)}
    assert select_instances(queries, None)[0] == [q.id for q in queries]


def test_max_instances_judges_only_the_recorded_selection(toy):
    judge = ScriptedJudge(SCORES)
    result = instfol(run_frame(INSTRUCTED), run_frame(QUERY_ONLY), toy, judge, k=3, max_instances=2, seed=1)
    assert len(result.meta["selected"]) == 2 and result.meta["max_instances"] == 2
    assert result.instances["qid"].tolist() == result.meta["selected"]
    assert result.selection["selected"].sum() == 2 and result.selection["available"].sum() == 3
    assert {r.instruction for r in judge.requests} == {toy.queries[q].instruction for q in result.meta["selected"]}


def test_warm_rerun_through_the_cache_calls_the_backend_only_for_earlier_failures(toy, tmp_path):
    backend = ScriptedJudge(SCORES)
    inst, query_only = run_frame(INSTRUCTED), run_frame(QUERY_ONLY)
    first = instfol(inst, query_only, toy, CachedJudge(backend, tmp_path / "j.sqlite"), k=3)
    asked = len(backend.requests)
    second = instfol(inst, query_only, toy, CachedJudge(backend, tmp_path / "j.sqlite"), k=3)
    assert [r.passage for r in backend.requests[asked:]] == ["d6"]  # a failure is retried, never stored as 0
    assert (second.meta["from_cache"], second.meta["judged"]) == (11, 1)
    pd.testing.assert_frame_equal(first.instances, second.instances)

    complete = {**SCORES, "d6": 1.0}
    backend = ScriptedJudge(complete)
    instfol(inst, query_only, toy, CachedJudge(backend, tmp_path / "k.sqlite"), k=3)
    rerun = ScriptedJudge(complete)
    instfol(inst, query_only, toy, CachedJudge(rerun, tmp_path / "k.sqlite"), k=3)
    assert rerun.requests == []


def test_runs_without_a_shared_instance_are_refused(toy):
    bare = run_frame({"a": ["d1"], "n": ["e1"]})  # group ids, as a query-only *setting* would have
    with pytest.raises(ValueError, match="share no instance"):
        instfol(run_frame(INSTRUCTED), bare, toy, ScriptedJudge(SCORES), k=3)


def test_an_instructed_run_of_another_benchmark_is_named_not_the_query_only_run(toy):
    other = Run(run_frame({"zz_1": ["d1"]}), meta={"path": "other.trec"})
    with pytest.raises(UsageError, match=r"the run other.trec answers none of the 3 queries of .*'zz_1'"):
        instfol(other, run_frame(QUERY_ONLY), toy, ScriptedJudge(SCORES), k=3)


def test_two_runs_with_the_same_rankings_are_said_and_scored_0_as_a_system_blind_to_the_instruction_would_be(toy):
    # a copy of the instructed run as the query-only one gave InstFol 0.0 on every instance without a word; refusing
    # it (as the same object or file is refused) refused a system that never sees the instruction (its queries cut
    # to their first tokens), whose InstFol is truly 0
    inst = Run(run_frame(INSTRUCTED))
    reordered = Run(run_frame(dict(reversed(list(INSTRUCTED.items())))))  # the queries in another order
    for copy in (Run(inst.df.copy()), reordered, run_frame(INSTRUCTED)):
        with pytest.warns(UserWarning, match="rank the same documents with the same scores for every query: InstFol is "
                                             "0 on every instance"):
            result = instfol(inst, copy, toy, ScriptedJudge(SCORES), k=3)
        assert (result.instances["instfol"].dropna() == 0).all()
    with raises_saying(UsageError, "are one run", "the same object", "0 by construction"):
        instfol(inst, inst, toy, ScriptedJudge(SCORES), k=3)
    one_lower = run_frame(INSTRUCTED).assign(score=lambda f: f["score"].where(f["docid"] != "e4", 0.5))
    assert instfol(inst, one_lower, toy, ScriptedJudge(SCORES), k=3).instances["instfol"].notna().any()


def test_runs_whose_sidecars_say_they_are_swapped_are_refused(toy):
    # before, a query-only run given as the instructed one was judged so, and InstFol came out with its sign flipped
    bare = {"name": "query-only", "query": "{query}", "bare_query": "{query}"}
    instructed = {"name": "ifir", "query": "{query} {instruction}", "bare_query": "{query}"}
    with raises_saying(UsageError, "instructed's sidecar records the template 'query-only'", "\"template\"",
                       "query_only's records 'ifir'", "swapped"):
        instfol(Run(run_frame(QUERY_ONLY), {"template": bare}), Run(run_frame(INSTRUCTED), {"template": instructed}),
                toy, ScriptedJudge(SCORES), k=3)
    paired = {"name": "instructor", "query": ["Represent the {domain} query: {instruction}", "{query}"]}
    for first, second in ((instructed, bare), (paired, bare), ({}, instructed), (bare, {"name": "user"})):
        instfol(Run(run_frame(INSTRUCTED), {"template": first}), Run(run_frame(QUERY_ONLY), {"template": second}),
                toy, ScriptedJudge(SCORES), k=3)


def test_an_instance_missing_from_one_run_is_reported_and_not_scored(toy):
    query_only = {q: docs for q, docs in QUERY_ONLY.items() if q != "n_0"}
    result = instfol(run_frame(INSTRUCTED), run_frame(query_only), toy, ScriptedJudge(SCORES), k=3)
    assert result.meta["missing_from_query_only_run"] == ["n_0"]
    assert math.isnan(result.instances.set_index("qid").loc["n_0", "instfol"])
    summary = result.summary().set_index(["scope", "subset"])
    assert (summary.loc[("subset", "nfcorpus"), "instances"], summary.loc[("subset", "nfcorpus"), "scored"]) == (1, 0)


@pytest.mark.parametrize("failing, same", [(None, True), ("d1", False)])
def test_lists_of_the_same_passages_are_0_by_construction_only_where_no_judgment_failed(failing, same):
    # a review: a failed rank is dropped from both lists by position, so two orders of the same passages keep
    # different ones (S_q 1.0, S_inst 3.0): the note "0 by construction" was then false
    queries = [Query("q_og", "q", "i", group="q")]
    lists = {"q_og": ["d1", "d2", "d3"]}
    bench = toy_benchmark(queries, {"q_og": {"d3": 1}}, ["d1", "d2", "d3"], meta={"top_ranked": lists})
    judge = ScriptedJudge({"d1": None if failing else 0.0, "d2": 1.0, "d3": 3.0})
    result = instfol(run_frame({"q_og": ["d2", "d3", "d1"]}), run_frame(lists), bench, judge, k=20)
    assert result.meta["same_passages"] is same


def test_lists_of_the_same_top_k_are_not_said_to_be_so_by_construction_where_a_list_holds_more_than_k():
    # the note "0 by construction" rests on every candidate list holding at most k documents; here the list holds 3
    # and k = 2: both runs' top 2 are {d1, d2} by this run's choice, not by construction
    queries = [Query("q_og", "q", "i", group="q")]
    lists = {"q_og": ["d1", "d2", "d3"]}
    bench = toy_benchmark(queries, {"q_og": {"d3": 1}}, ["d1", "d2", "d3"], meta={"top_ranked": lists})
    judge = ScriptedJudge({"d1": 0.0, "d2": 1.0, "d3": 3.0})
    result = instfol(run_frame({"q_og": ["d2", "d1", "d3"]}), run_frame(lists), bench, judge, k=2)
    assert bench.rankable() == 3 > 2
    assert result.instances["instfol"].tolist() == [0.0]  # the same two passages: S_q = S_inst = 0.5
    assert result.meta["same_passages"] is False


def test_the_same_scores_in_another_order_give_an_instfol_of_exactly_0():
    # (0.1 + 0.2 + 0.3) / 3 and (0.3 + 0.2 + 0.1) / 3 differ in the last bit: float noise, not a gain
    pair = score_list_pair([0.1, 0.2, 0.3], [0.3, 0.2, 0.1])
    assert pair.instfol == 0.0 and math.copysign(1.0, pair.instfol) == 1.0


def test_an_instance_one_run_lacks_has_neither_s_value_nor_instfol():
    # the query-only run lacks it: S_inst alone would enter its level's mean S_inst while InstFol leaves it out
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no mean of an empty list
        for pair in (score_list_pair([], [1.0, 2.0]), score_list_pair([1.0, 2.0], [])):
            assert math.isnan(pair.s_q) and math.isnan(pair.s_inst) and math.isnan(pair.instfol)


@pytest.mark.parametrize(("rows", "said"), [
    # one subset: a level with no scored instance leaves the subset without a value; no Average to speak of; three
    # ids are all named, without an ellipsis
    ([("x1", "fiqa", 1, 0.2), ("y1", "fiqa", 2, math.nan), ("y2", "fiqa", 2, math.nan), ("y3", "fiqa", 2, math.nan)],
     "3 of 4 instance(s) have no InstFol (fiqa level 2: 'y1', 'y2', 'y3'): every rank of a list failed, or a run "
     "lacks them. fiqa level 2 has no scored instance, so fiqa has no value."),
    # a subset of one instruction per query (level 0) is named alone, with how many of its instances lack a value
    ([("n1", "nfcorpus", 0, 0.1), ("n2", "nfcorpus", 0, math.nan), ("x1", "fiqa", 1, 0.2)],
     "1 of 3 instance(s) have no InstFol (nfcorpus: 1 of 2, 'n2'): every rank of a list failed, or a run lacks them."),
    # none has a value: no figure to take for a whole one, nothing to say (the front ends say every judgment failed)
    ([("n1", "nfcorpus", 0, math.nan), ("x1", "fiqa", 1, math.nan)], ""),
])
def test_the_unscored_note_names_each_level_once_with_its_count_and_the_subset_left_without_a_value(rows, said):
    from instir.judge.following import unscored_note

    instances = pd.DataFrame(rows, columns=["qid", "subset", "level", "instfol"]).assign(failed=0)
    instances["level"] = instances["level"].astype("Int64")
    assert unscored_note(instances) == said


def test_instances_of_a_benchmark_without_subsets_are_counted_under_its_name(toy):
    # InstructIR's instances have no subset: instfol.csv names the benchmark, as the metrics table does
    bare = toy_benchmark([Query(q.id, q.query, q.instruction, group=q.group) for q in QUERIES],
                         {"a_1": {"d2": 1}, "a_2": {"d8": 1}, "n_0": {"e3": 1}}, DOCS)
    result = instfol(run_frame(INSTRUCTED), run_frame(QUERY_ONLY), bare, ScriptedJudge({**SCORES, "d6": 1.0}), k=3)
    assert set(result.instances["subset"]) == {"toy"}
    assert result.summary()[["scope", "subset"]].values.tolist() == [["subset", "toy"]]


def test_an_s_q_of_exactly_3_is_no_score_above_the_rubric(toy):
    # n_0's query-only list is judged 3 and 3: S_q = 3, the formula's own case (S_inst - S_q), nothing to warn of
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*above 3")
        result = instfol(run_frame(INSTRUCTED), run_frame(QUERY_ONLY), toy, ScriptedJudge({**SCORES, "d6": 1.0}), k=3)
    assert result.instances.set_index("qid").loc["n_0", "s_q"] == 3.0


def test_a_list_pairs_instfol_is_taken_against_the_maximum_it_is_given():
    # (2 - 1) / (5 - 1): the official constant is 3, a caller may give another
    assert score_list_pair([1.0], [2.0], max_score=5.0).instfol == pytest.approx(0.25)
