"""A sweep of the bundled samples on a local Ray (2 CPUs) against the notebooks' serial path."""

import io
import os
import re

import pandas as pd
import pytest

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray

from instir.distributed.grid import parse_grid  # noqa: E402
from instir.distributed.sweep import run_sweep  # noqa: E402
from instir.report.record import read_record  # noqa: E402

#: instructir-sample's 152 documents are over ``shard_min_docs`` (its corpus goes through the Ray
#: Data stage), ifir-sample/fiqa's 38 under it (encoded inside its cells' actor): both paths at once
SAMPLE_GRID = {"benchmarks": ["instructir-sample", "ifir-sample/fiqa"], "systems": ["bm25", "dense"],
               "variants": ["instructed", "query-only"], "k": 20, "shard_min_docs": 100}


@pytest.fixture(scope="module")
def sample_grid(tmp_path_factory):
    """The sample grid with its own embedding cache, so the serial path below (the default
    cache) encodes every vector again and the run files compare the two."""
    return parse_grid({**SAMPLE_GRID, "cache_dir": str(tmp_path_factory.mktemp("sweep_cache"))})


@pytest.fixture(scope="module")
def swept(local_ray, sample_grid, tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    return out, run_sweep(sample_grid, out)


def notebook_path(out):
    """What notebooks 02 and 03 do for the same grid, step by step, in this process."""
    from instir.benchmarks import load_benchmark
    from instir.metrics import combine, evaluate_runs, subset_average
    from instir.retrieval import make_retriever, read_run, retrieve, system_name

    rows = []
    made = {kind: make_retriever(kind, None) for kind in ("bm25", "dense")}
    loaded = {name: load_benchmark(name) for name in SAMPLE_GRID["benchmarks"]}
    for name, bench in loaded.items():
        for kind, retriever in made.items():
            for variant, template in (("instructed", None), ("query-only", "query-only")):
                run = retrieve(bench, retriever, template, k=20, out_dir=out / "runs")
                rows.append({"benchmark": name, "retriever": kind, "variant": variant,
                             "system": system_name(kind, None) + ("" if variant == "instructed" else " (query-only)"),
                             "run_file": os.path.relpath(run.meta["path"], out)})
    runs_table = pd.DataFrame(rows)
    evaluations = {}
    for name, bench in loaded.items():
        listed = runs_table[runs_table["benchmark"] == name]
        evaluations[name] = evaluate_runs({r.system: read_run(out / r.run_file) for r in listed.itertuples()}, bench)
    table = combine([ev.table for ev in evaluations.values()])
    ifir = table[table["benchmark"].str.startswith("ifir")]
    if ifir["benchmark"].nunique() > 1:  # an Average over two subsets or more (of one it repeats the subset)
        table = combine([table, subset_average(ifir)])
    per_query = pd.concat([ev.per_query.assign(benchmark=n) for n, ev in evaluations.items()], ignore_index=True)
    return runs_table, table, per_query


def test_sample_grid_gives_the_runs_and_metrics_of_the_serial_path(swept, tmp_path):
    out, report = swept
    assert report.count("failed") == 0 and report.count("done") == 8
    runs_table, table, per_query = notebook_path(tmp_path)
    swept_runs = pd.read_csv(out / "runs" / "runs.csv")
    pd.testing.assert_frame_equal(swept_runs[["benchmark", "retriever", "variant", "system", "run_file"]],
                                  runs_table, check_dtype=False)
    for row in runs_table.itertuples():
        assert (out / row.run_file).read_bytes() == (tmp_path / row.run_file).read_bytes()
    pd.testing.assert_frame_equal(pd.read_csv(out / "metrics" / "metrics.csv"),
                                  pd.read_csv(io.StringIO(table.to_csv(index=False))))
    pd.testing.assert_frame_equal(pd.read_parquet(out / "metrics" / "per_query.parquet"),
                                  per_query[["benchmark", "system", "qid", "measure", "value"]])


def test_sample_grid_cells_ran_as_ray_tasks(swept):
    _, report = swept
    assert {r.pid for r in report.results.values()} - {os.getpid()}
    assert all(not r.node.endswith(":local") for r in report.results.values())


def test_cpu_cells_run_on_one_actor_per_node_that_keeps_its_imports_and_model(swept):
    _, report = swept
    assert len({r.pid for r in report.results.values()}) == 1  # one node: one actor, MiniLM then BM25


def test_cell_actors_hold_a_node_on_cpus_and_their_gpus_and_memory_otherwise(local_ray):
    from instir.distributed.sweep import _actor_resources
    from instir.systems.specs import resolve_system

    assert _actor_resources(resolve_system("bm25")) == {"num_cpus": 2}
    assert _actor_resources(resolve_system("dense")) == {"num_cpus": 2}  # torch gets both cores
    assert _actor_resources(resolve_system("GritLM-7B")) == {"num_cpus": 1, "num_gpus": 1.0, "memory": 20 * 2**30}


def test_rerun_computes_nothing(swept, sample_grid):
    out, _ = swept
    before = {p: p.stat().st_mtime_ns for p in (out / "runs").glob("*.trec")}
    before |= {p: p.stat().st_mtime_ns for p in (out / "sweep" / "cells").glob("*.parquet")}
    report = run_sweep(sample_grid, out)
    assert report.count("reused") == 8 and report.count("done") == 0
    assert report.encoded and not any(report.encoded.values())  # the stage found every chunk in the cache
    assert {p: p.stat().st_mtime_ns for p in before} == before


def test_cell_with_bad_input_fails_alone_with_a_clear_message(local_ray, tmp_path):
    grid = parse_grid({"benchmarks": ["instructir-sample", "instructir"], "systems": ["bm25"],
                       "variants": ["instructed"], "data_root": str(tmp_path / "no-such-data"), "k": 10})
    report = run_sweep(grid, tmp_path / "out")
    states = {cell_id: r.state for cell_id, r in report.results.items()}
    assert states == {"instructir-sample__instructed__bm25__instructed": "done",
                      "instructir__instructed__bm25__instructed": "failed"}
    (failed,) = report.failed
    assert failed.error.startswith("instructir__instructed__bm25__instructed: ")
    assert "no-such-data" in failed.error and "\n" not in failed.error
    assert len(pd.read_csv(tmp_path / "out" / "runs" / "runs.csv")) == 1


def test_large_corpus_stage_encodes_with_ray_data_only_corpora_over_the_threshold(swept):
    _, report = swept
    assert report.encoded and all(key.startswith("instructir-sample dense ") for key in report.encoded)
    assert sum(report.encoded.values()) >= 1  # its corpus chunks came from the Ray Data stage, not the cells


def test_cpu_encoding_takes_one_actor_per_node_with_all_its_cpus(local_ray):
    from instir.distributed.encode import encoder_pool

    assert encoder_pool() == (1, 2)  # one node with 2 CPUs: torch spreads each chunk over both
    assert encoder_pool(actors=2) == (2, 1)


def test_a_system_that_needs_a_gpu_fails_at_once_on_a_cluster_without_one(local_ray, tmp_path):
    grid = parse_grid({"benchmarks": ["instructir-sample"], "systems": ["bm25", "dense:some/model"],
                       "variants": ["instructed"], "shard_min_docs": 1, "k": 10})
    report = run_sweep(grid, tmp_path / "out")  # waited for ever for a GPU before
    assert report.count("done") == 1
    (failed,) = report.failed
    assert failed.error == ("instructir-sample__instructed__dense-some-model__instructed: dense:some/model needs "
                            "CPU 1, GPU 1 on one node; the largest node of the Ray cluster has CPU 2, GPU 0")


def test_a_memory_hint_no_node_meets_is_named_in_gib(local_ray):
    from instir.distributed.sweep import unplaceable

    assert unplaceable({"num_cpus": 1, "memory": 2**30}) is None
    why = unplaceable({"num_cpus": 1, "memory": 4096 * 2**30})
    assert re.fullmatch(r"needs CPU 1, memory 4096 GiB on one node; the largest node of the Ray cluster has "
                        r"CPU 2, memory [\d.]+ GiB", why), why


def test_a_judge_with_malformed_answers_or_none_at_all_leaves_the_sweep_its_summary(local_ray, tmp_path, monkeypatch):
    """Issue 24: through the judge actor, broken log-probabilities are failed judgments, and a
    judge that cannot start is the judge step's failure, and so is one whose judgments all failed
    (issue 30); runs, metrics and summary are written."""

    from tests.judge.judge_fakes import FakeChatServer, Reply, chat_body

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    broken = chat_body('{"score": 2, "reason": "x"}')
    broken["choices"][0]["logprobs"] = [{"token": "2", "logprob": "-0.1"}]  # a list, with a string logprob
    with FakeChatServer(responder=lambda body: Reply(body=broken)) as server:
        spec = {"backend": "openai", "model": "fake-model", "base_url": server.url, "max_instances": 1}
        for name, judge in (("broken", spec), ("no key", {**spec, "api_key_env": "NO_SUCH_JUDGE_KEY"})):
            out = tmp_path / name.replace(" ", "_")
            report = run_sweep(parse_grid({"benchmarks": ["ifir-sample/fiqa"], "systems": ["bm25"], "k": 20,
                                           "judge": judge}), out)
            assert report.count("done") == 2
            for path in ("runs/runs.csv", "metrics/metrics.csv", "report.json"):
                assert (out / path).is_file(), (name, path)
            judged = read_record(out)["sweep"]["judge"]
            if name == "broken":
                assert judged["state"] == "failed" and judged["failed_judgments"] == server.count > 0
                assert judged["error"].startswith("AllJudgmentsFailed: all "), judged  # every judgment failed
            else:
                assert judged["state"] == "failed", judged
                assert judged["error"].startswith("UsageError: the environment variable NO_SUCH_JUDGE_KEY"), judged
