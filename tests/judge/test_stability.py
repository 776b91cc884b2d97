"""Judge stability: repeats get their own cache entries (repeat 0 is the old key), reruns are
free, and the reported spreads recover a scripted judge's known noise and a sample's known spread."""

import math

import numpy as np
import pandas as pd
import pytest
from judge_fakes import stored_rows
from scripted_judge import ScriptedJudge, toy_benchmark

from instir.benchmarks.types import Query
from instir.judge.baseline import BaselineJudge
from instir.judge.cache import CachedJudge, JudgmentCache, request_key
from instir.judge.following import instfol
from instir.judge.rubrics import rubric_for
from instir.judge.stability import judge_repeats, stability, tolerance_widening, verdict
from instir.judge.types import JudgeRequest, Judgment

#: (subset, level) strata of the toy benchmark; the generic rubric serves them all
STRATA = [("alpha", 1), ("alpha", 2), ("beta", None)]


class NoisyJudge:
    """Scores a passage ``base[passage] + N(0, sigma)``, a fresh draw on every call (as an API
    judge varies between calls); counts the requests it gets. ``on_scale``: clipped to the rubric's 0 to
    top step, as a real judge answers (a cache distrusts a stored score outside it); off, the noise stays
    unbiased for the spread tests."""

    name = "noisy"
    model = "noise-v1"

    def __init__(self, base: dict[str, float], sigma: float, seed: int = 0, on_scale: bool = False):
        self.base, self.sigma, self.on_scale = base, sigma, on_scale
        self.rng = np.random.default_rng(seed)
        self.requests = []

    def judge(self, requests, on_result=None):
        self.requests.extend(requests)
        out = []
        for i, r in enumerate(requests):
            value = self.base[r.passage] + (self.rng.normal(0, self.sigma) if self.sigma else 0.0)
            if self.on_scale:
                value = min(max(value, 0.0), float(r.rubric.max_score))
            j = Judgment(score=round(value), weighted=value, probs=None, weighting="parsed", raw=f"{value:.4f}")
            out.append(j)
            if on_result is not None:
                on_result(i, j)
        return out


def toy(per_stratum: int, depth: int):
    """A benchmark of ``per_stratum`` instances per stratum; each instance's query-only list
    holds passages scored exactly 0 (noise-free) and its instructed list ``depth`` passages
    scored around the instance's own level, so InstFol = S_inst / 3."""
    queries, lists_q, lists_i, base = [], {}, {}, {}
    for s, (subset, level) in enumerate(STRATA):
        for n in range(per_stratum):
            qid = f"{subset}-{level}-{n}"
            queries.append(Query(qid, f"query {qid}", f"instruction {qid}", group=qid, level=level, subset=subset))
            lists_q[qid] = [f"q-{qid}-{r}" for r in range(depth)]
            lists_i[qid] = [f"i-{qid}-{r}" for r in range(depth)]
            base.update({d: 0.0 for d in lists_q[qid]})
            base.update({d: 0.5 + 2.0 * ((n * 7 + s * 3) % per_stratum) / per_stratum for d in lists_i[qid]})
    bench = toy_benchmark(queries, {q.id: {} for q in queries}, list(base))
    return bench, run_frame(lists_i), run_frame(lists_q), base


def run_frame(lists: dict[str, list[str]]) -> pd.DataFrame:
    return pd.DataFrame([(qid, d, float(len(docs) - r)) for qid, docs in lists.items() for r, d in enumerate(docs)],
                        columns=["qid", "docid", "score"])


def row(table: pd.DataFrame, scope: str, subset: str, level=None) -> pd.Series:
    part = table[(table["scope"] == scope) & (table["subset"] == subset)]
    if level is not None:
        part = part[part["level"] == level]
    assert len(part) == 1
    return part.iloc[0]


def test_repeat_zero_keeps_the_old_key_and_later_repeats_get_their_own():
    request = JudgeRequest("q", "inst", "passage", rubric_for("", None))
    assert request_key(request) == request_key(request, 0)
    assert request_key(request, 1) != request_key(request, 0)
    assert request_key(request, 1)[1] == request_key(request)[1]  # same text hash, own rubric-version slot
    assert request_key(request, 2) != request_key(request, 1)
    with pytest.raises(ValueError, match="repeat"):
        request_key(request, -1)


def test_an_existing_cache_is_repeat_zero_and_reruns_are_free(tmp_path):
    bench, inst, query, base = toy(per_stratum=2, depth=3)
    cache = JudgmentCache(tmp_path / "j.sqlite")
    first = NoisyJudge(base, sigma=0.2, on_scale=True)
    instfol(inst, query, bench, CachedJudge(first, cache))  # judged before repeats existed
    one_run = len(first.requests)

    second = NoisyJudge(base, sigma=0.2, seed=1, on_scale=True)
    frames = judge_repeats(inst, query, bench, CachedJudge(second, cache), repeats=3)
    assert len(second.requests) == 2 * one_run  # repeat 0 came from the cache; repeats 1 and 2 were judged
    assert sorted(frames["repeat"].unique()) == [0, 1, 2]
    assert [m["from_cache"] for m in frames.attrs["meta"]] == [one_run, 0, 0]

    third = NoisyJudge(base, sigma=0.2, seed=2, on_scale=True)
    again = judge_repeats(inst, query, bench, CachedJudge(third, cache), repeats=3)
    assert third.requests == []
    pd.testing.assert_frame_equal(again, frames)
    versions = set(stored_rows(cache.path)["rubric_version"])
    assert any(v.endswith("#repeat=2") for v in versions) and any("#" not in v for v in versions)


def test_every_repeats_requests_count_in_the_judges_stats(tmp_path):
    # before, with_repeat gave each repeat fresh counts: the stage said it made one repeat's judgments, not all
    bench, inst, query, base = toy(per_stratum=2, depth=3)
    backend = NoisyJudge(base, sigma=0.2, on_scale=True)
    judge = CachedJudge(backend, tmp_path / "j.sqlite")
    judge_repeats(inst, query, bench, judge, repeats=3)
    assert judge.stats.judged == len(backend.requests) > 0 and judge.stats.hits == 0
    judge_repeats(inst, query, bench, judge, repeats=3)
    assert judge.stats.judged == len(backend.requests) and judge.stats.hits == len(backend.requests)


def test_a_given_repeat_zero_is_used_and_not_judged_again(tmp_path):
    # before, repeat 0 of the spread judged the pair's InstFol sample again: what failed was paid for twice and the
    # spread's repeat 0 was another judgment than the InstFol beside it
    bench, inst, query, base = toy(per_stratum=2, depth=3)
    backend = NoisyJudge(base, sigma=0.2, on_scale=True)
    judge = CachedJudge(backend, tmp_path / "j.sqlite")
    first = instfol(inst, query, bench, judge)
    sent = len(backend.requests)
    frames = judge_repeats(inst, query, bench, judge, repeats=2, first=first)
    assert len(backend.requests) == 2 * sent  # repeat 1 alone was judged
    pd.testing.assert_frame_equal(frames[frames["repeat"] == 0].drop(columns=["repeat", "judged"]),
                                  first.instances)
    assert frames.attrs["meta"][0]["from_instfol"] and "from_instfol" not in frames.attrs["meta"][1]


def test_the_reported_judge_spread_recovers_the_scripted_noise(tmp_path):
    per_stratum, depth, sigma, repeats = 6, 4, 0.3, 25
    bench, inst, query, base = toy(per_stratum, depth)
    judge = CachedJudge(NoisyJudge(base, sigma=sigma, seed=7), tmp_path / "j.sqlite")
    table = stability(judge_repeats(inst, query, bench, judge, repeats=repeats), seed=3)

    level_sd = sigma / 3 / math.sqrt(depth * per_stratum)  # InstFol = S_inst / 3; mean of depth x instances
    alpha_sd = level_sd / math.sqrt(2)  # unweighted mean of two level values
    # beta has no levels: only its subset row (instir.judge aggregate gives level rows for levels 1-3)
    expected = {("level", "alpha", 1): level_sd,
                ("subset", "alpha", None): alpha_sd, ("subset", "beta", None): level_sd,
                ("average", "average", None): math.sqrt(alpha_sd ** 2 + level_sd ** 2) / 2}
    for (scope, subset, level), sd in expected.items():
        got = row(table, scope, subset, level)
        assert got["judge_sd"] == pytest.approx(sd, rel=0.25), (scope, subset, level)
        assert got["judge_low"] < got["instfol"] < got["judge_high"]
        assert got["repeats"] == repeats
    assert not table["identical_repeats"].any()


def test_the_query_sample_spread_recovers_the_spread_between_instances(tmp_path):
    per_stratum, depth = 8, 2
    bench, inst, query, base = toy(per_stratum, depth)
    judge = CachedJudge(NoisyJudge(base, sigma=0.0), tmp_path / "j.sqlite")
    table = stability(judge_repeats(inst, query, bench, judge, repeats=2), n_boot=2000, seed=0)
    # per-instance InstFol = base / 3; the bootstrap sd of a stratum's mean is sd(ddof=0) / sqrt(n)
    values = np.array([0.5 + 2.0 * ((n * 7) % per_stratum) / per_stratum for n in range(per_stratum)]) / 3
    level = row(table, "level", "alpha", 1)
    assert level["sample_sd"] == pytest.approx(values.std() / math.sqrt(per_stratum), rel=0.1)
    assert level["instfol"] == pytest.approx(values.mean())
    assert level["judge_sd"] == 0 and bool(level["identical_repeats"])
    assert level["dominant"] == "query sample"


def test_a_deterministic_judge_says_its_spread_is_exactly_zero(tmp_path):
    bench, inst, query, base = toy(per_stratum=3, depth=2)
    scripted = ScriptedJudge(base)
    frames = judge_repeats(inst, query, bench, CachedJudge(scripted, tmp_path / "j.sqlite"), repeats=3)
    table = stability(frames, n_boot=200)
    assert (table["judge_sd"] == 0).all() and table["identical_repeats"].all()
    assert (table["judge_low"] == table["instfol"]).all() and (table["judge_high"] == table["instfol"]).all()
    assert "deterministic" in verdict(table)
    made = [m["judged"] for m in frames.attrs["meta"]]
    assert made[0] > 0 and made == [made[0]] * 3 == [m["unique_requests"] for m in frames.attrs["meta"]]
    assert len(scripted.requests) == sum(made)  # every repeat was really judged, none answered from another


class CountingBaseline(BaselineJudge):
    """The lexical baseline judge (deterministic by construction), counting what it is asked."""

    def __init__(self):
        super().__init__("lexical", progress=False)
        self.requests = []

    def judge(self, requests, on_result=None):
        self.requests.extend(requests)
        return super().judge(requests, on_result)


def test_a_deterministic_backend_is_judged_once_for_all_repeats_and_the_verdict_says_so(tmp_path):
    bench, inst, query, base = toy(per_stratum=3, depth=2)
    once = CountingBaseline()
    single = instfol(inst, query, bench, CachedJudge(once, tmp_path / "once.sqlite"))
    backend = CountingBaseline()
    cache = JudgmentCache(tmp_path / "j.sqlite")
    frames = judge_repeats(inst, query, bench, CachedJudge(backend, cache), repeats=3)
    assert CachedJudge(backend, cache).deterministic and not CachedJudge(ScriptedJudge(base), cache).deterministic
    assert len(backend.requests) == len(once.requests) == single.meta["unique_requests"]  # one repeat's worth
    assert not any("#repeat=" in v for v in stored_rows(cache.path)["rubric_version"])  # none for repeats 1, 2
    assert frames.groupby("repeat")["judged"].all().tolist() == [True, False, False]
    assert [m.get("copied_from") for m in frames.attrs["meta"]] == [None, 0, 0]
    for r in (1, 2):
        pd.testing.assert_series_equal(frames.loc[frames["repeat"] == r, "instfol"].reset_index(drop=True),
                                       frames.loc[frames["repeat"] == 0, "instfol"].reset_index(drop=True))
    table = stability(frames, n_boot=200)
    assert (table["repeats"] == 3).all() and (table["judged_repeats"] == 1).all()
    assert (table["judge_sd"] == 0).all() and table["identical_repeats"].all()
    assert "deterministic" not in verdict(table)  # the stage says it once for every system


def test_the_deterministic_note_is_said_once_above_every_systems_verdict():
    from types import SimpleNamespace

    from markdown_render import rendered_html

    from instir.stages.judge import Judging

    hostile = "g`[clk](javascript:alert(1))` *x* <b>"
    verdicts = [("a", "bm25", "Average InstFol x100: judge sd 0.00."), ("b", hostile, hostile + " sd 0.09.")]

    def said(deterministic: bool) -> str:
        judging = SimpleNamespace(judge=SimpleNamespace(deterministic=deterministic), verdicts=verdicts,
                                  spread=pd.DataFrame({"repeats": [3, 3]}))
        return rendered_html(Judging.stability_statement(judging))

    out = said(True)
    assert out.startswith("<p>This judge is deterministic") and out.count("deterministic") == 1
    assert "judged once and that judgment stands for all 3 repeats" in out
    assert "<li><strong>a / bm25</strong>: Average InstFol x100: judge sd 0.00.</li>" in out
    assert "<a" not in out and "<b>" not in out and "<em>" not in out and "<code>" not in out
    assert out.count("g`[clk](javascript:alert(1))` *x* &lt;b&gt;") == 2
    assert said(False).startswith("<ul>") and "deterministic" not in said(False)


def test_one_repeat_leaves_the_judge_spread_unknown_and_says_so(tmp_path):
    bench, inst, query, base = toy(per_stratum=3, depth=2)
    table = stability(judge_repeats(inst, query, bench, CachedJudge(ScriptedJudge(base), tmp_path / "j.sqlite"),
                                    repeats=1), n_boot=100)
    assert table["judge_sd"].isna().all() and (table["dominant"] == "").all()
    assert "unknown" in verdict(table)
    assert tolerance_widening(table.assign(system="s", benchmark="b")).empty


def test_zero_repeats_is_refused(tmp_path):
    bench, inst, query, base = toy(per_stratum=1, depth=1)
    with pytest.raises(ValueError, match="a whole number from 1 to 100, got 0"):
        judge_repeats(inst, query, bench, CachedJudge(ScriptedJudge(base), tmp_path / "j.sqlite"), repeats=0)


def test_tolerance_widening_is_the_half_width_of_the_judges_interval():
    table = pd.DataFrame([{"scope": "average", "subset": "average", "level": pd.NA, "judge_sd": 0.01,
                           "judge_low": 0.10, "judge_high": 0.14, "system": "bm25", "benchmark": "ifir"}])
    widen = tolerance_widening(table)
    assert widen.loc[0, "widen"] == pytest.approx(0.02)
    assert widen.loc[0, "measure"] == "InstFol@20"


def test_instir_judge_repeats_prints_both_spreads_and_reruns_free(tmp_path, capsys):
    import argparse

    from instir.benchmarks import load_benchmark
    from instir.cli import judge as commands
    from instir.retrieval import retrieve
    from instir.retrieval.lexical import BM25Retriever

    bench = load_benchmark("ifir-sample/fiqa")
    retriever = BM25Retriever(show_progress=False)
    inst = retrieve(bench, retriever, k=20, out_dir=tmp_path).meta["path"]
    query = retrieve(bench, retriever, template="query-only", k=20, out_dir=tmp_path).meta["path"]
    parser = argparse.ArgumentParser(prog="instir")
    commands.register(parser.add_subparsers(dest="command"))
    argv = ["judge", "--benchmark", "ifir-sample/fiqa", "--backend", "baseline", "--run", str(inst),
            "--query-only-run", str(query), "--cache", str(tmp_path / "j.sqlite"), "--out", str(tmp_path / "report"),
            "--repeats", "3"]
    args = parser.parse_args(argv)
    assert args.handler(args) == 0
    first = capsys.readouterr().out
    assert "judged 3 times" in first and "judge_sd" in first and "sample_sd" in first
    assert "deterministic" in first  # the baseline judge: zero spread, said so
    args = parser.parse_args(argv)
    args.handler(args)
    again = capsys.readouterr().out
    assert "repeat 0:" in again and " 0 made now" in again.split("repeat 0:")[1].splitlines()[0]
    for printed in (first, again):  # the deterministic baseline's repeats 1 and 2 are repeat 0's judgments
        assert "not judged again" in printed.split("repeat 2:")[1].splitlines()[0]
    with pytest.raises(SystemExit):
        parser.parse_args(argv[:-1] + ["0"])
    assert "at least 1" in capsys.readouterr().err


def _repeated(values: dict[str, list[list[float]]], level: int = 0) -> pd.DataFrame:
    """Per-instance InstFol of each repeat, by subset: ``values[subset][instance][repeat]``."""
    rows = [{"subset": subset, "level": level, "qid": f"{subset}{i}", "repeat": r, "judged": True, "instfol": v,
             "s_q": 0.0, "s_inst": 0.0, "failed": 0, "dropped": 0, "parsed": 0}
            for subset, instances in values.items() for i, repeats in enumerate(instances)
            for r, v in enumerate(repeats)]
    return pd.DataFrame(rows)


def test_the_judge_spread_is_the_unbiased_spread_of_one_run_with_a_95_percent_interval():
    # 200 instances, each judged 0 in one repeat and 1 in the other: one run's value is the mean of 200 draws of
    # 0.5 +- sqrt(2) * 0.5 (the spread of 2 repeats made unbiased), so its sd is sqrt(2) * 0.5 / sqrt(200) = 0.05
    # and its 95% interval 0.5 -+ 1.96 * 0.05 (a 90% one would be 0.5 -+ 1.645 * 0.05)
    table = stability(_repeated({"s": [[0.0, 1.0]] * 200}), n_boot=2000, seed=0)
    (row,) = table.to_dict("records")
    assert row["instfol"] == 0.5 and row["judge_mean"] == pytest.approx(0.5, abs=0.005)
    assert row["judge_sd"] == pytest.approx(0.05, rel=0.05)
    assert row["judge_low"] == pytest.approx(0.5 - 1.96 * 0.05, abs=0.007)
    assert row["judge_high"] == pytest.approx(0.5 + 1.96 * 0.05, abs=0.007)
    assert row["sample_sd"] == 0 and row["dominant"] == "judge"  # every instance's mean is 0.5


def test_a_draw_in_which_a_subset_has_no_value_has_no_average():
    # subset a: an unscored instance and 0.5; subset b: 0 and 1. A draw of a's two instances picks the unscored one
    # twice with probability 1/4: that draw has no value for a, nor an Average (a mean of b alone is another quantity)
    # the Average's draws are then (0.5 + mean of b) / 2: 0.25, 0.5, 0.75 with 1/4, 1/2, 1/4, sd 0.25 * sqrt(1/2)
    table = stability(_repeated({"a": [[math.nan], [0.5]], "b": [[0.0], [1.0]]}), n_boot=4000, seed=0)
    average = table[table["scope"] == "average"].iloc[0]
    assert average["sample_sd"] == pytest.approx(0.25 * math.sqrt(0.5), rel=0.05)


def test_the_verdict_reads_the_average_x100_not_a_subsets_row():
    rows = [{"scope": "subset", "subset": "fiqa", "instances": 3, "repeats": 3, "judged_repeats": 3,
             "judge_sd": 0.5, "sample_sd": 0.1, "identical_repeats": False, "dominant": "judge"},
            {"scope": "average", "subset": "average", "instances": 6, "repeats": 3, "judged_repeats": 3,
             "judge_sd": 0.0123, "sample_sd": 0.0456, "identical_repeats": False, "dominant": "query sample"}]
    assert verdict(pd.DataFrame(rows)) == ("Average InstFol x100: judge sd 1.23, query-sample sd 4.56 over 6 "
                                           "instances: the query sample dominates.")


def test_the_verdict_of_a_collection_without_an_average_names_its_one_subset_not_an_average():
    rows = [{"scope": "subset", "subset": "instructir", "instances": 5, "repeats": 3, "judged_repeats": 3,
             "judge_sd": 0.0123, "sample_sd": 0.0456, "identical_repeats": False, "dominant": "query sample"}]
    assert verdict(pd.DataFrame(rows)) == ("InstFol of instructir x100: judge sd 1.23, query-sample sd 4.56 over 5 "
                                           "instances: the query sample dominates.")


def test_the_query_sample_is_redrawn_within_each_level_as_it_was_drawn():
    # level 1 holds instances 0 and 1, level 2 six of 0.5: redrawn within its level, level 1's mean is that of two
    # draws from {0, 1}, sd 0.5 / sqrt(2); redrawn across levels it would rest on a varying number of instances
    instances = pd.concat([_repeated({"s": [[0.0], [1.0]]}, level=1),
                           _repeated({"s": [[0.5]] * 6}, level=2).assign(qid=lambda f: "b" + f["qid"])],
                          ignore_index=True)
    table = stability(instances, n_boot=4000, seed=0)
    level1 = table[(table["scope"] == "level") & (table["level"] == 1)].iloc[0]
    assert level1["sample_sd"] == pytest.approx(0.5 / math.sqrt(2), rel=0.03)
    level2 = table[(table["scope"] == "level") & (table["level"] == 2)].iloc[0]
    assert level2["sample_sd"] == 0


def test_one_instance_in_every_stratum_leaves_the_query_sample_spread_unknown_not_dominant():
    # judge_max_instances=1: a bootstrap of one instance draws it every time, so its sd 0.00 is no measurement, and
    # a deterministic judge's 0.00 beside it must not read "the query sample dominates"
    table = stability(_repeated({"fiqa": [[0.029, 0.029]], "nfcorpus": [[0.0058, 0.0058]]}), n_boot=200, seed=0)
    assert table["sample_sd"].isna().all() and (table["dominant"] == "").all()
    said = verdict(table)
    assert "the query-sample spread is unknown: every subset and level holds one instance" in said
    assert "dominates" not in said


def test_equal_instances_whose_bootstrap_sd_is_rounding_say_neither_varies():
    # two equal instances a subset: every draw's mean is the same number, its sd ~1e-17 from rounding alone
    table = stability(_repeated({"fiqa": [[0.029, 0.029]] * 2, "nfcorpus": [[0.0058, 0.0058]] * 2}), n_boot=200)
    assert (table["dominant"] == "neither").all()
    assert verdict(table).endswith("query-sample sd 0.00; neither varies.")
