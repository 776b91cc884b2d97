"""The judge stage's tables from its frames, built by hand (:mod:`instir.stages.judge`): InstFol's summary with
the k, depth and run files behind each value, the ranking against gold, the spread ×100, the agreement table,
and the counts and warnings the page says in words."""

import warnings
from types import SimpleNamespace

import pandas as pd
import pytest

from instir.stages.judge import InstFolTables, Judging, rank_systems, summarise_instfol


def _instances(system, subset, values, k, depth, run_files, collection="ifir-sample"):
    return pd.DataFrame({"system": system, "collection": collection, "benchmark": f"{collection}/{subset}",
                         "subset": subset, "level": [1, 2][:len(values)], "qid": [f"{subset}{i}" for i in
                                                                                  range(len(values))],
                         "instfol": values, "s_q": 0.0, "s_inst": values, "failed": 0, "dropped": 0, "parsed": 0,
                         "judge_backend": "baseline", "judge_model": "overlap", "k": k, "depth": depth,
                         "run_files": run_files})


def test_instfols_summary_names_the_shallowest_depth_and_each_subsets_own_run_files():
    instances = pd.concat([_instances("bm25", "fiqa", [0.2, 0.4], 20, [20, 20], "f.trec; fq.trec"),
                           _instances("bm25", "nfcorpus", [0.6, 0.8], 20, [20, 7], "n.trec; nq.trec")],
                          ignore_index=True)
    summary = summarise_instfol(instances).set_index(["scope", "subset", "level"])
    average = summary[summary.index.get_level_values(0) == "average"].iloc[0]
    assert average["instfol"] == pytest.approx(((0.2 + 0.4) / 2 + (0.6 + 0.8) / 2) / 2)
    assert average["depth"] == 7 and average["k"] == 20  # the shallower run of the two bounds every value
    assert average["run_files"] == "f.trec; fq.trec; n.trec; nq.trec"
    fiqa = summary[(summary.index.get_level_values(0) == "subset") & (summary.index.get_level_values(1) == "fiqa")]
    assert fiqa["run_files"].tolist() == ["f.trec; fq.trec"]  # its own runs only: it stays while they do


def test_the_judges_ranking_is_compared_with_gold_on_pooled_values_and_the_collections_average():
    summary = pd.DataFrame({"benchmark": ["instructir-sample"] * 3 + ["ifir-sample"] * 2,
                            "system": ["a", "b", "c", "a", "b"], "scope": ["subset"] * 3 + ["average"] * 2,
                            "subset": ["all"] * 3 + ["average"] * 2, "instfol": [0.1, 0.2, 0.3, 0.1, 0.2]})
    metrics = pd.DataFrame({
        "benchmark": ["instructir-sample"] * 6 + ["ifir-sample"] * 2 + ["ifir-sample/fiqa"] * 2,
        "subset": ["all"] * 6 + ["average"] * 2 + ["fiqa"] * 2,
        "level": ["all"] * 3 + ["1"] * 3 + ["all"] * 4,
        "measure": ["nDCG@10"] * 6 + ["nDCG@20"] * 4, "system": ["a", "b", "c"] * 2 + ["a", "b"] * 2,
        # pooled gold reverses InstFol's order (tau -1); a level's rows, listed after, agree with it
        # on ifir-sample the Average agrees (tau 1); fiqa's own rows, listed after, reverse it
        "value": [0.3, 0.2, 0.1, 0.1, 0.2, 0.3, 0.1, 0.2, 0.2, 0.1]})
    tau = rank_systems(summary, metrics).set_index("benchmark")["tau"]
    assert tau.to_dict() == {"ifir-sample": pytest.approx(1.0), "instructir-sample": pytest.approx(-1.0)}


def _judging(**parts) -> Judging:
    none = pd.DataFrame(columns=["qid", "docid", "error"])
    defaults = dict(judge=None, backend="baseline", max_instances=1, validations={},
                    pairs=pd.DataFrame(columns=["benchmark", "norm", "error", "warning"]), agreement=pd.DataFrame(),
                    instfol=InstFolTables(none, none, pd.DataFrame(), pd.DataFrame({"failed_judgments": [0]})),
                    rankings=pd.DataFrame(), spread=pd.DataFrame(), summary="")
    return Judging(**{**defaults, **parts})


def test_the_spread_table_shows_instfol_and_both_spreads_x100():
    spread = pd.DataFrame([{"benchmark": "b", "system": "s", "scope": "subset", "subset": "all", "level": pd.NA,
                            "instances": 3, "repeats": 2, "judged_repeats": 2, "instfol": 0.125,
                            "judge_mean": 0.12, "judge_sd": 0.01, "judge_low": 0.1, "judge_high": 0.14,
                            "sample_mean": 0.12, "sample_sd": 0.05, "sample_low": 0.02, "sample_high": 0.2,
                            "identical_repeats": False, "dominant": "query sample"}])
    row = _judging(spread=spread).stability_table().iloc[0]
    assert row["instfol"] == 12.5 and row["judge_sd"] == 1.0 and row["sample_high"] == 20.0
    assert row["instances"] == 3 and row["repeats"] == 2


def test_the_agreement_table_keeps_the_statistics_order_and_counts_pairs_as_integers():
    agreement = pd.DataFrame({"statistic": ["pairs", "kappa"] * 2, "benchmark": ["x", "x", "all", "all"],
                              "value": [15.0, 0.25, 15.0, 0.25]})
    table = _judging(agreement=agreement).agreement_table()
    assert table.index.tolist() == ["pairs", "kappa"]
    assert table.loc["pairs", "all"] == 15 and isinstance(table.loc["pairs", "all"], int)


def test_the_warning_statement_counts_only_judgments_that_count():
    pairs = pd.DataFrame({"benchmark": "x", "norm": [0.5, None, 0.5], "error": [None, "HTTP 500", None],
                          "warning": ["served by m2", "served by m2", None]})
    assert "**1 judgment(s) carry a warning**" in _judging(pairs=pairs).warning_statement()
    two = pairs.assign(warning=["served by m2", "served by m2", "served by m2"])  # the failed one's is not counted
    assert "**2 judgment(s) carry a warning**" in _judging(pairs=two).warning_statement()


def test_failed_judgments_are_summed_over_pairs_and_repeat_0_is_instfols_own():
    spread = pd.DataFrame()
    spread.attrs["repeats"] = [[{"repeat": 0, "from_instfol": True, "failed_judgments": 1},
                                {"repeat": 1, "failed_judgments": 2}]]
    positions = pd.DataFrame({"qid": ["q1", "q2", "q3"], "docid": ["d", "d", "d"], "error": ["HTTP 503"] * 3})
    judging = _judging(spread=spread, instfol=InstFolTables(positions, positions, pd.DataFrame(),
                                                            pd.DataFrame({"failed_judgments": [1, 2]})))
    assert judging.failed_judgments() == 3 + 2  # InstFol's 1 + 2, the repeats' 2 (repeat 0 is InstFol's 1)
    assert judging.incomplete()[-1].startswith("5 judgment(s) failed (3 of InstFol, 2 of its repeats) and")
    alone = _judging(instfol=InstFolTables(positions, positions, pd.DataFrame(),
                                           pd.DataFrame({"failed_judgments": [1, 2]})))
    assert alone.incomplete()[-1].startswith("3 judgment(s) failed and are left out")


def test_the_judged_statement_counts_each_instance_once_whatever_the_systems():
    instances = pd.DataFrame({"benchmark": "x", "system": ["a", "a", "b", "b"], "qid": ["q1", "q2", "q1", "q2"]})
    judge = SimpleNamespace(name="baseline", model="overlap", stats=SimpleNamespace(judged=4, failed=0, hits=0))
    none = pd.DataFrame(columns=["qid", "docid", "error"])
    text = _judging(judge=judge, instfol=InstFolTables(instances, none, pd.DataFrame(), pd.DataFrame())
                    ).judged_statement()
    assert "**2 instance(s)** for InstFol@20 (x\\: 2)" in text and "top-20 of 2 retriever(s)" in text



def test_the_judged_statement_names_the_cut_off_the_stage_judged_at():
    instances = pd.DataFrame({"benchmark": "x", "system": ["a"], "qid": ["q1"]})
    judge = SimpleNamespace(name="baseline", model="overlap", stats=SimpleNamespace(judged=2, failed=0, hits=0))
    none = pd.DataFrame(columns=["qid", "docid", "error"])
    at_10 = SimpleNamespace(meta={"k": 10})  # judge_runs(k=10): each pair's InstFolResult carries its k
    text = _judging(judge=judge, instfol=InstFolTables(instances, none, pd.DataFrame(), pd.DataFrame(), [at_10])
                    ).judged_statement()
    assert "for InstFol@10 (x\\: 1)" in text and "top-10 of 1 retriever(s)" in text and "20" not in text

def test_a_deterministic_judge_judged_once_is_said_to_have_no_spread_not_told_to_judge_again():
    # judge_repeats=1 with the baseline judge: its spread is 0 by construction, not unknown
    spread = pd.DataFrame({"repeats": [1]})
    judge = SimpleNamespace(deterministic=True)
    said = _judging(judge=judge, spread=spread, verdicts=[("ifir", "bm25", "One repeat per judgment.")])
    text = said.stability_statement()
    assert "exactly 0 by construction" in text and "One repeat" not in text and "stands for all" not in text
    varies = _judging(judge=SimpleNamespace(deterministic=False), spread=spread, verdicts=said.verdicts)
    assert varies.stability_statement() == "- **ifir / bm25**: One repeat per judgment\\."  # Markdown-escaped
    again = _judging(judge=judge, spread=spread.assign(repeats=3), verdicts=said.verdicts).stability_statement()
    assert again.startswith("This judge is deterministic") and "stands for all 3 repeats" in again


def test_instfols_files_name_both_runs_each_value_compared(tmp_path):
    from instir.report.layout import ReportLayout
    from instir.stages.judge import RunPair, write_instfol

    instances = _instances("x", "fiqa", [0.2, 0.4], 20, [20, 20], "").drop(
        columns=["system", "collection", "benchmark", "judge_backend", "judge_model", "k", "depth", "run_files"])
    meta = {"judge": {"name": "baseline", "model": "overlap"}, "k": 20, "depth": 20,
            **dict.fromkeys(("unique_requests", "judged", "from_cache", "failed_judgments", "parsed_judgments",
                             "warnings"), 0), "cost": None}
    result = SimpleNamespace(instances=instances, positions=pd.DataFrame({"qid": ["fiqa0"], "docid": ["d"]}),
                             meta=meta)
    pair = RunPair("ifir-sample/fiqa", "bm25", "bm25", "runs/i.trec", "runs/q.trec")
    tables = write_instfol(ReportLayout(tmp_path), [pair], [result])
    assert set(tables.summary["run_files"]) == {"runs/i.trec; runs/q.trec"}
    assert set(pd.read_csv(tmp_path / "judge" / "instfol.csv")["run_files"]) == {"runs/i.trec; runs/q.trec"}


def test_instfols_files_name_the_judges_backend_and_model_each_in_its_column_and_the_costs_each_count(tmp_path):
    # the compare stage checks the two columns against the paper's judge (openai-compatible, gpt-4o-mini)
    from instir.report.layout import ReportLayout
    from instir.stages.judge import RunPair, write_instfol

    instances = _instances("x", "fiqa", [0.2, 0.4], 20, [20, 20], "")[["qid", "subset", "level", "instfol", "s_q",
                                                                         "s_inst", "failed", "dropped", "parsed"]]
    meta = {"judge": {"name": "openai", "model": "gpt-4o-mini"}, "k": 20, "depth": 20,
            **dict.fromkeys(("unique_requests", "judged", "failed_judgments", "parsed_judgments", "warnings"), 0),
            "from_cache": 7, "cost": None}
    result = SimpleNamespace(instances=instances, positions=pd.DataFrame({"qid": ["fiqa0"], "docid": ["d"]}),
                             meta=meta)
    tables = write_instfol(ReportLayout(tmp_path), [RunPair("ifir-sample/fiqa", "bm25", "bm25", "i.trec", "q.trec")],
                           [result])
    written = pd.read_csv(tmp_path / "judge" / "instfol.csv")
    assert set(zip(written["judge_backend"], written["judge_model"])) == {("openai", "gpt-4o-mini")}
    assert tables.costs.to_dict("records") == [{"benchmark": "ifir-sample/fiqa", "system": "bm25", "unique_requests": 0,
                                                "judged": 0, "from_cache": 7, "failed_judgments": 0,
                                                "parsed_judgments": 0, "warnings": 0, "cost": None}]


def test_the_judges_ranking_is_not_compared_with_one_subsets_gold_when_the_collection_has_no_average():
    # two subsets scored, no Average row (the metrics of an earlier version, or another measure's): neither subset's
    # gold values stand for the collection, so no tau
    summary = pd.DataFrame({"benchmark": "ifir-sample", "system": ["a", "b"], "scope": "average",
                            "subset": "average", "instfol": [0.1, 0.2]})
    metrics = pd.DataFrame({"benchmark": ["ifir-sample/fiqa"] * 2 + ["ifir-sample/nfcorpus"] * 2,
                            "subset": ["fiqa"] * 2 + ["nfcorpus"] * 2, "level": "all", "measure": "nDCG@20",
                            "system": ["a", "b"] * 2, "value": [0.1, 0.2, 0.2, 0.1]})
    assert rank_systems(summary, metrics).empty


def test_a_runs_list_without_a_query_only_run_is_refused_naming_it_before_any_judgment(tmp_path, monkeypatch):
    from says import raises_saying

    from instir.report.layout import MissingInput
    from instir.retrieval import Run, write_run
    from instir.stages import judge_runs

    write_run(Run(pd.DataFrame({"qid": ["q"], "docid": ["d"], "score": [1.0]})), tmp_path / "runs" / "a.trec")
    pd.DataFrame([{"benchmark": "instructir-sample", "setting": "instructed", "system": "bm25", "retriever": "bm25",
                   "variant": "instructed", "run_file": "runs/a.trec"}]).to_csv(tmp_path / "runs" / "runs.csv",
                                                                                index=False)
    monkeypatch.setattr("instir.judge.factory.make_judge", lambda *a, **k: pytest.fail("a judge was made"))
    with raises_saying(MissingInput, "runs.csv lists no instructed and query-only run of one system"):
        judge_runs(tmp_path, backend="baseline", repeats=1)


def _hand_made_runs(folder, instances: int) -> None:
    """A runs folder made by hand: the first ``instances`` of the InstructIR sample, their relevant documents in one
    order (the instructed run) and the other (the query-only run), listed in ``runs/runs.csv``."""
    from instir.benchmarks import load_benchmark
    from instir.retrieval import Run, write_run

    bench = load_benchmark("instructir-sample")
    qids = list(bench.qrels)[:instances]
    docs = [d for q in qids for d in bench.qrels[q]]
    rows = []
    for variant, order in (("instructed", docs), ("query-only", docs[::-1])):
        write_run(Run(pd.DataFrame([(q, d, float(len(order) - i)) for q in qids for i, d in enumerate(order)],
                                   columns=["qid", "docid", "score"])), folder / "runs" / f"{variant}.trec")
        rows.append({"benchmark": "instructir-sample", "setting": "instructed", "system": f"bm25 {variant}",
                     "retriever": "bm25", "variant": variant, "run_file": f"runs/{variant}.trec"})
    pd.DataFrame(rows).to_csv(folder / "runs" / "runs.csv", index=False)


def test_the_judge_stage_writes_its_validation_pairs_and_their_agreement(tmp_path):
    from instir.stages import judge_runs

    _hand_made_runs(tmp_path, instances=3)
    with pytest.warns(UserWarning, match="fewer than k = 20"):
        judging = judge_runs(tmp_path, backend="baseline", max_instances=1, repeats=1)
    pairs = pd.read_csv(tmp_path / "judge" / "validation_pairs.csv")
    stats = pd.read_csv(tmp_path / "judge" / "validation.csv").set_index(["benchmark", "statistic"])["value"]
    assert len(pairs) == len(judging.pairs) > 0 and set(pairs["benchmark"]) == {"instructir-sample"}
    assert stats[("instructir-sample", "pairs")] == stats[("all", "pairs")] == len(pairs)


def test_an_emptied_metrics_table_is_one_line_out_of_the_judge_stage_naming_it_and_its_notebook(tmp_path):
    # the judge stage read metrics/metrics.csv with pandas itself (to rank the systems): an emptied one was
    # EmptyDataError out of the stage, after every judgment was paid
    from instir.benchmarks.types import FormatError
    from instir.stages import judge_runs

    _hand_made_runs(tmp_path, instances=2)
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "metrics.csv").write_text("")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # fewer than k documents listed: not what is tested here
        with pytest.raises(FormatError, match=rf"^{tmp_path / 'metrics' / 'metrics.csv'}: not a table the kit can "
                                              r"read \(EmptyDataError.* run notebook 03_metrics "):
            judge_runs(tmp_path, backend="baseline", max_instances=1, repeats=1)
