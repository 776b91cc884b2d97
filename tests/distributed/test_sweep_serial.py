"""The sweep's plain loop (no Ray): the judge step writes notebook 04's InstFol files."""

import re
from contextlib import nullcontext

import pandas as pd
import pytest

from instir.distributed.grid import parse_grid
from instir.distributed.sweep import run_sweep
from instir.report.record import read_record


@pytest.fixture(scope="module")
def tiny_dense(tmp_path_factory) -> str:
    """A dense system (``dense:PATH``) on a tiny random BERT whose vocabulary is the FiQA sample's words: a model that
    encodes the sample at once (the bundled model's vectors are checked in tests/retrieval/test_dense.py, its runs
    in every chain)."""
    from tiny_models import build_tiny_bert

    from instir.benchmarks import load_benchmark

    bench = load_benchmark("ifir-sample/fiqa")
    words = {word for text in [*(d.indexed_text for d in bench.corpus),
                               *(q.query + " " + q.instruction for q in bench.queries.values())]
             for word in text.split()}
    return "dense:" + str(build_tiny_bert(tmp_path_factory.mktemp("tiny-bert"), sorted(words)))


def test_judge_step_writes_the_instfol_tables_notebook_04_writes(tmp_path):
    from instir.benchmarks import load_benchmark
    from instir.judge import BaselineJudge
    from instir.judge.following import aggregate, instfol
    from instir.retrieval import read_run

    grid = parse_grid({"benchmarks": ["instructir-sample"], "systems": ["bm25"], "k": 20,
                       "judge": {"backend": "baseline", "model": "lexical", "max_instances": 2}})
    report = run_sweep(grid, tmp_path, executor="serial")
    assert report.count("done") == 2
    runs = pd.read_csv(tmp_path / "runs" / "runs.csv").set_index("variant")
    expected = instfol(read_run(tmp_path / runs.loc["instructed", "run_file"]),
                       read_run(tmp_path / runs.loc["query-only", "run_file"]), load_benchmark("instructir-sample"),
                       BaselineJudge("lexical", progress=False), max_instances=2, seed=0).instances
    written = pd.read_csv(tmp_path / "judge" / "instfol_instances.csv")
    assert written["system"].unique().tolist() == ["bm25"]
    assert written["instfol"].tolist() == expected["instfol"].tolist()
    summary = pd.read_csv(tmp_path / "judge" / "instfol.csv")
    assert summary["instfol"].tolist() == aggregate(expected)["instfol"].tolist()
    assert (tmp_path / "judge" / "judgments.sqlite").is_file()


def test_plain_loop_builds_each_system_once_and_reads_each_benchmark_once(tmp_path, monkeypatch):
    from instir.report import layout
    from instir.systems import registry

    built, read = [], []
    build, load = registry.build_system, layout.load_benchmark
    monkeypatch.setattr(registry, "build_system", lambda name, **kw: built.append(name) or build(name, **kw))
    # every stage and cell loads benchmarks through LoadedBenchmarks, so this reaches them all
    monkeypatch.setattr(layout, "load_benchmark", lambda name, *a, **kw: read.append(name) or load(name, *a, **kw))
    report = run_sweep(parse_grid({"benchmarks": ["instructir-sample", "ifir-sample/fiqa"], "systems": ["bm25"],
                                   "k": 10}), tmp_path, executor="serial")
    assert report.count("done") == 4
    assert built == ["bm25"]
    assert sorted(read) == ["ifir-sample/fiqa", "instructir-sample"]


def test_a_judge_whose_answers_are_malformed_still_leaves_runs_metrics_and_summary(tmp_path, monkeypatch):
    """Issue 24: a judge answering broken log-probabilities ended the sweep with a traceback and
    no summary; its answers are failed judgments now, counted in the summary, and as every one
    failed the judge step is failed with the reason (issue 30), its files still written."""

    from tests.judge.judge_fakes import FakeChatServer, Reply, chat_body

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    broken = chat_body('{"score": 2, "reason": "x"}')
    broken["choices"][0]["logprobs"] = [{"token": "2", "logprob": "-0.1"}]  # a list, with a string logprob
    with FakeChatServer(responder=lambda body: Reply(body=broken)) as server:
        grid = parse_grid({"benchmarks": ["ifir-sample/fiqa"], "systems": ["bm25"], "k": 20,
                           "judge": {"backend": "openai", "model": "fake-model", "base_url": server.url,
                                     "max_instances": 1}})
        report = run_sweep(grid, tmp_path, executor="serial")
    assert report.count("done") == 2 and server.count > 0
    for name in ("runs/runs.csv", "metrics/metrics.csv", "report.json", "judge/instfol.csv"):
        assert (tmp_path / name).is_file(), name
    judged = read_record(tmp_path)["sweep"]["judge"]
    error = judged.pop("error")
    assert judged == {"state": "failed", "pairs": 1, "failed_judgments": server.count, "warnings": 0,
                      "detail": "judge/instfol_positions.csv"}
    assert re.fullmatch(r"AllJudgmentsFailed: all (\d+) judgments failed, so InstFol has no value: \1x malformed "
                        r"log-probabilities: logprobs is a JSON list, not an object", error), error
    positions = pd.read_csv(tmp_path / "judge" / "instfol_positions.csv")
    assert positions["error"].str.startswith("malformed log-probabilities").all()


def test_the_grids_rate_limit_paces_every_request_of_a_serial_sweeps_judge(tmp_path, monkeypatch):
    # before, only the Ray sweep's judge actor read requests_per_minute (and let each call's requests start at
    # once): a serial sweep sent its requests as fast as the server answered. The pace itself:
    # tests/judge/test_backends_http.py
    from instir.http_retry import Pace
    from tests.judge.judge_fakes import FakeChatServer, Reply

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    paced, wait = [], Pace.wait
    monkeypatch.setattr(Pace, "wait", lambda self: paced.append(self.interval) or wait(self))
    with FakeChatServer(responder=lambda body: Reply(400, "no")) as server:  # answered or not, a request is paced
        grid = parse_grid({"benchmarks": ["ifir-sample/fiqa"], "systems": ["bm25"], "k": 20,
                           "judge": {"backend": "openai", "model": "fake-model", "base_url": server.url,
                                     "max_instances": 1, "repeats": 1, "requests_per_minute": 600_000}})
        run_sweep(grid, tmp_path, executor="serial")
    assert server.count > 20 and paced == [60 / 600_000] * server.count


def _judge_that_falls_over(monkeypatch) -> None:
    """The judge stage raises, as a judge that dies in the middle of a sweep does."""
    from instir.stages import judge

    def falls_over(*args, **kwargs):
        raise RuntimeError("the judge server went away")

    monkeypatch.setattr(judge, "judge_runs", falls_over)


def test_a_judge_step_that_raises_is_reported_and_the_summary_still_written(tmp_path, monkeypatch, capsys):
    from instir.cli import main

    _judge_that_falls_over(monkeypatch)
    grid = tmp_path / "grid.yaml"
    grid.write_text("benchmarks: [instructir-sample]\nsystems: [bm25]\nk: 20\n"
                    "judge: {backend: baseline, model: lexical, max_instances: 1}\n")
    code = main(["sweep", str(grid), "--out", str(tmp_path / "out"), "--serial"])
    out = capsys.readouterr().out
    assert code == 1 and "2 done, 0 reused, 0 failed" in out
    # what will run, said before it runs
    assert out.startswith(f"{grid}: 2 cells (1 benchmark x 1 setting x 1 system x 2 variants); 2 cells on bundled "
                          "samples\n")
    assert "FAILED judge: RuntimeError: the judge server went away" in out
    summary = read_record(tmp_path / "out")["sweep"]
    assert summary["counts"]["done"] == 2 and summary["judge"]["state"] == "failed"
    assert "went away" in summary["judge"]["error"]
    assert "Traceback" in (tmp_path / "out" / "sweep" / "judge.error.txt").read_text()
    assert (tmp_path / "out" / "runs" / "runs.csv").is_file()
    assert (tmp_path / "out" / "metrics" / "metrics.csv").is_file()


def test_the_compare_stage_runs_when_the_judge_step_fails(tmp_path, monkeypatch, capsys):
    # on the commit before, the compare stage sat in the judge step's try: a judge that raised left no paper_tables/
    # and the output said nothing of it
    from instir.cli import main

    _judge_that_falls_over(monkeypatch)
    grid = tmp_path / "grid.yaml"
    grid.write_text("benchmarks: [instructir-sample]\nsystems: [bm25]\nk: 20\n"
                    "judge: {backend: baseline, model: lexical, max_instances: 1}\n")
    assert main(["sweep", str(grid), "--out", str(tmp_path / "out"), "--serial"]) == 1
    out = capsys.readouterr().out
    assert "FAILED judge: RuntimeError: the judge server went away" in out
    assert "compare: paper_tables/ written all the same" in out and f"paper_tables: {tmp_path / 'out'}" in out
    assert (tmp_path / "out" / "paper_tables").is_dir()
    summary = read_record(tmp_path / "out")["sweep"]
    assert summary["judge"]["state"] == "failed" and summary["compare"] == {"state": "done"}


def test_a_compare_stage_that_raises_is_reported_as_the_compare_steps_failure(tmp_path, monkeypatch, capsys):
    # on the commit before, it was reported as "FAILED judge: …" after a judge step that had worked
    from instir.cli import main
    from instir.stages import compare

    def broken(out_dir, *args, **kwargs):
        raise RuntimeError("the papers' tables are unreadable")

    monkeypatch.setattr(compare, "paper_tables", broken)
    grid = tmp_path / "grid.yaml"
    grid.write_text("benchmarks: [instructir-sample]\nsystems: [bm25]\nk: 20\n"
                    "judge: {backend: baseline, model: lexical, max_instances: 1}\n")
    assert main(["sweep", str(grid), "--out", str(tmp_path / "out"), "--serial"]) == 1
    out = capsys.readouterr().out
    assert "FAILED judge" not in out and "judge: 1 run pair(s) judged" in out
    assert "FAILED compare: RuntimeError: the papers' tables are unreadable (details in sweep/compare.error.txt)" in out
    summary = read_record(tmp_path / "out")["sweep"]
    assert summary["judge"]["state"] == "done" and summary["compare"]["state"] == "failed"
    assert "Traceback" in (tmp_path / "out" / "sweep" / "compare.error.txt").read_text()


@pytest.mark.parametrize("judge, field, said", [
    ("api_key_env: NO_SUCH_JUDGE_KEY, base_url: 'http://127.0.0.1:9/v1'", "judge.api_key_env",
     "the environment variable NO_SUCH_JUDGE_KEY named by api_key_env is not set"),
    ("base_url: 'http://127.0.0.1:9/v1'", "judge.base_url", "fix judge.base_url, or choose another judge.backend"),
])
def test_an_openai_judge_without_its_key_or_endpoint_is_refused_before_any_cell(tmp_path, monkeypatch, capsys, judge,
                                                                                field, said):
    # before, every cell ran (hours at real size), then the judge step failed on what was known at the start
    from instir.cli import main

    monkeypatch.delenv("NO_SUCH_JUDGE_KEY", raising=False)
    grid = tmp_path / "grid.yaml"
    grid.write_text("benchmarks: [instructir-sample]\nsystems: [bm25]\nk: 20\n"
                    f"judge: {{backend: openai, model: m, {judge}, max_instances: 1}}\n")
    assert main(["sweep", str(grid), "--out", str(tmp_path / "out"), "--serial"]) == 2
    err = capsys.readouterr().err
    assert f"{grid}: field '{field}'" in err and said in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out" / "runs").exists()


@pytest.mark.parametrize("timeout_s, waited", [(600, 5.0), (2, 2.0)])
def test_an_openai_judge_endpoint_is_waited_for_at_most_five_seconds_before_any_cell(tmp_path, monkeypatch, capsys,
                                                                                    timeout_s, waited):
    # the endpoint is only asked whether it answers: a silent one holds the sweep's start 5 s, not the judge's timeout
    from instir.cli import main
    from instir.errors import UsageError
    from instir.judge import factory

    asked = []

    def silent(url, timeout_s=5.0, **kw):
        asked.append(timeout_s)
        raise UsageError(f"{kw['where']}: no answer")

    monkeypatch.setattr(factory, "require_reachable", silent)
    monkeypatch.setenv("SOME_JUDGE_KEY", "k")
    grid = tmp_path / "grid.yaml"
    grid.write_text("benchmarks: [instructir-sample]\nsystems: [bm25]\nk: 20\njudge: {backend: openai, model: m, "
                    f"base_url: 'http://127.0.0.1:9/v1', api_key_env: SOME_JUDGE_KEY, timeout_s: {timeout_s}}}\n")
    assert main(["sweep", str(grid), "--out", str(tmp_path / "out"), "--serial"]) == 2
    assert asked == [waited] and "no answer" in capsys.readouterr().err


@pytest.mark.parametrize("grid_text, said", [
    ("benchmarks: [ifir/fiqa]\nsystems: [bm25]\n", ("not in the instir cache", "`instir fetch ifir --subset fiqa`",
                                                     "data_root: FOLDER in")),
    ("benchmarks: [instructir-sample]\nsystems: [bm25]\ndata_root: {tmp}/nodata\n",
     ("field 'data_root'", "nodata is not a folder")),
    ("benchmarks: [instructir-sample]\nsystems: ['dense:{tmp}']\n",
     ("system 'dense:", "a folder without modules.json or config.json")),
], ids=["not-fetched", "no-data-root", "no-model"])
def test_what_every_cell_would_fail_on_is_refused_before_any_cell_as_instir_run_refuses_it(tmp_path, capsys,
                                                                                         grid_text, said):
    # before, the sweep started, and each cell failed on it in turn (a real grid's other cells ran for hours first)
    from instir.cli import main

    grid = tmp_path / "grid.yaml"
    grid.write_text(grid_text.format(tmp=tmp_path))
    assert main(["sweep", str(grid), "--out", str(tmp_path / "out"), "--serial"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"instir sweep: {grid}: ") and all(part in err for part in said), err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_an_unknown_executor_is_refused_before_the_folder_is_made(tmp_path):
    grid = parse_grid({"benchmarks": ["instructir-sample"], "systems": ["bm25"], "k": 20})
    with pytest.raises(ValueError, match="'threads'.*ray or serial"):
        run_sweep(grid, tmp_path / "out", executor="threads")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("options, said", [
    (["--num-cpus", "-1"], "argument --num-cpus: must be at least 1, got -1"),
    (["--num-cpus", "0"], "argument --num-cpus: must be at least 1, got 0"),
    (["--num-cpus", "2", "--address", "auto"], "--num-cpus is for a run on this machine"),
    (["--serial", "--address", "auto"], "--serial is for a run on this machine"),
])
def test_cpu_and_cluster_options_that_cannot_hold_are_one_line_before_anything_runs(tmp_path, capsys, options, said):
    # before, --num-cpus -1 was Ray's traceback, 0 failed every cell, and with --address both were ignored
    from instir.cli import main

    grid = tmp_path / "grid.yaml"
    grid.write_text("benchmarks: [instructir-sample]\nsystems: [bm25]\nk: 20\n")
    with pytest.raises(SystemExit) if "argument" in said else nullcontext():
        assert main(["sweep", str(grid), "--out", str(tmp_path / "out"), *options]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_judgments_that_failed_are_said_by_reason_and_end_the_sweep_with_status_1(tmp_path, monkeypatch, capsys):
    # before, a sweep whose judge step left judgments failed ended with status 0, only "N failed judgment(s)" in its
    # summary, where instir judge exits 1 with the reasons: a batch took it for a complete result
    from instir.cli import main
    from tests.judge.judge_fakes import flaky_baseline

    flaky_baseline(monkeypatch)
    grid = tmp_path / "grid.yaml"
    grid.write_text("benchmarks: [ifir-sample/fiqa]\nsystems: [bm25]\nk: 20\n"
                    "judge: {backend: baseline, model: lexical, max_instances: 3, repeats: 1}\n")
    argv = ["sweep", str(grid), "--out", str(tmp_path / "out"), "--serial"]
    assert main(argv) == 1
    captured = capsys.readouterr()
    failed = read_record(tmp_path / "out")["sweep"]["judge"]["failed_judgments"]
    assert failed > 0
    assert "judge: failed: " in captured.out and "malformed answer: no JSON (e.g. " in captured.out
    assert captured.err.splitlines()[-1].startswith(f"instir sweep: {failed} judgment(s) failed")
    assert captured.err.splitlines()[-1].endswith("run the same command again to judge only those (the judgment "
                                                  "cache keeps every success)")
    assert main(argv) == 0  # the rerun judges what failed, and the result is complete
    assert "judgment(s) failed" not in capsys.readouterr().err


def test_a_rerun_reuses_every_cell_and_still_lists_its_runs(tmp_path):
    # a rerun of the same grid computes nothing and keeps every run in runs.csv (a reused cell is as good as a done one)
    grid = parse_grid({"benchmarks": ["ifir-sample/fiqa"], "systems": ["bm25"], "k": 10})
    first = run_sweep(grid, tmp_path, executor="serial")
    listed = pd.read_csv(tmp_path / "runs" / "runs.csv")["run_file"].tolist()
    again = run_sweep(grid, tmp_path, executor="serial")
    assert (first.count("done"), again.count("reused"), again.count("done")) == (2, 2, 0)
    assert pd.read_csv(tmp_path / "runs" / "runs.csv")["run_file"].tolist() == listed and len(listed) == 2
    assert read_record(tmp_path)["sweep"]["counts"] == {"done": 0, "reused": 2, "failed": 0}


def test_a_cell_whose_scores_are_computed_again_is_done_not_reused(tmp_path):
    # its run file was reused, its scores were not: the summary says the cell computed something
    import shutil

    grid = parse_grid({"benchmarks": ["ifir-sample/fiqa"], "systems": ["bm25"], "k": 10})
    run_sweep(grid, tmp_path, executor="serial")
    shutil.rmtree(tmp_path / "metrics" / "runs")
    again = run_sweep(grid, tmp_path, executor="serial")
    assert (again.count("done"), again.count("reused")) == (2, 0)
    assert all(r.row["reused"] for r in again.results.values())


def test_a_rerun_whose_every_cell_fails_leaves_the_earlier_runs_listed(tmp_path, monkeypatch):
    # the runs.csv of the earlier sweep stays as it was: an all-failed rerun writes no empty list over it
    from instir.stages import retrieve

    grid = parse_grid({"benchmarks": ["ifir-sample/fiqa"], "systems": ["bm25"], "k": 10})
    run_sweep(grid, tmp_path, executor="serial")
    before = (tmp_path / "runs" / "runs.csv").read_bytes()

    def broken(*args, **kwargs):
        raise RuntimeError("the disk went away")

    monkeypatch.setattr(retrieve, "retrieve_planned", broken)
    again = run_sweep(grid, tmp_path, executor="serial")
    assert again.count("failed") == 2 and "the disk went away" in again.failed[0].error
    assert (tmp_path / "runs" / "runs.csv").read_bytes() == before


def test_instir_sweep_prints_each_failed_cells_error_and_ends_with_status_1(tmp_path, monkeypatch, capsys):
    from instir.cli import main
    from instir.stages import retrieve

    def broken(*args, **kwargs):
        raise RuntimeError("the disk went away")

    monkeypatch.setattr(retrieve, "retrieve_planned", broken)
    grid = tmp_path / "grid.yaml"
    grid.write_text("benchmarks: [instructir-sample]\nsystems: [bm25]\nk: 10\n")
    assert main(["sweep", str(grid), "--out", str(tmp_path / "out"), "--serial"]) == 1
    out = capsys.readouterr().out
    assert "2 cells: 0 done, 0 reused, 2 failed" in out
    failed = [line for line in out.splitlines() if line.startswith("  FAILED ")]
    assert len(failed) == 2 and all("the disk went away" in line for line in failed), out


def test_each_system_of_a_serial_sweep_runs_its_own_retriever(tmp_path, tiny_dense):
    # the in-process worker replaces its retriever when a group of another system comes (one model in memory)
    import json

    report = run_sweep(parse_grid({"benchmarks": ["ifir-sample/fiqa"], "systems": [tiny_dense, "bm25"], "k": 10,
                                   "variants": ["instructed"]}), tmp_path, executor="serial")
    assert report.count("done") == 2
    runs = pd.read_csv(tmp_path / "runs" / "runs.csv").set_index("retriever")
    made_by = {system: json.loads((tmp_path / f"{path}.json").read_text())["retriever"]["name"]
               for system, path in runs["run_file"].items()}
    assert made_by["bm25"] == "bm25" and made_by[tiny_dense] != "bm25", made_by


def test_the_dense_half_of_a_hybrid_is_what_sharded_encoding_encodes():
    from instir.distributed.encode import dense_part
    from instir.retrieval.dense import DenseRetriever
    from instir.retrieval.fusion import HybridRetriever
    from instir.retrieval.lexical import BM25Retriever

    dense, lexical = DenseRetriever(progress=False), BM25Retriever()
    assert dense_part(HybridRetriever(dense, lexical)) is dense
    assert dense_part(dense) is dense and dense_part(lexical) is None


@pytest.mark.parametrize(("nodes", "asked", "pool"), [
    ([8, 4], (0, None), (2, 4)),  # one actor per node, each with the smallest node's CPUs
    ([8, 4], (0, 6), (6, 2)),  # six actors share the 12 CPUs: more CPUs each could never all be placed
    ([8, 4, {"GPU": 2}, {"GPU": 1}], (1, None), (3, 1)),  # one per GPU, one CPU each
    ([8, 4, {"GPU": 2}, {"GPU": 1}], (0.5, None), (6, 1)),
    ([8, 4], (1, None), (1, 1)),  # a model asking a GPU of a cluster that has none: one actor, never none
])
def test_the_encoders_are_one_per_node_or_gpu_and_their_cpus_fit_the_alive_nodes(monkeypatch, nodes, asked, pool):
    ray = pytest.importorskip("ray")
    from instir.distributed.encode import encoder_pool

    listed = [{"Alive": True, "Resources": {"CPU": n} if isinstance(n, int) else {"CPU": 1, **n}} for n in nodes]
    listed.append({"Alive": False, "Resources": {"CPU": 64, "GPU": 8}})  # a node gone: none of its resources
    monkeypatch.setattr(ray, "nodes", lambda: listed)
    assert encoder_pool(*asked) == pool


def test_a_grown_grid_lists_its_reused_runs_beside_the_new_ones(tmp_path):
    # a rerun with one more benchmark: the cells reused from the first sweep stay in runs.csv with the new cells
    first = parse_grid({"benchmarks": ["ifir-sample/fiqa"], "systems": ["bm25"], "k": 10})
    run_sweep(first, tmp_path, executor="serial")
    grown = run_sweep(parse_grid({"benchmarks": ["ifir-sample/fiqa", "instructir-sample"], "systems": ["bm25"],
                                  "k": 10}), tmp_path, executor="serial")
    assert (grown.count("reused"), grown.count("done")) == (2, 2)
    assert sorted(pd.read_csv(tmp_path / "runs" / "runs.csv")["benchmark"]) == ["ifir-sample/fiqa"] * 2 + \
        ["instructir-sample"] * 2
