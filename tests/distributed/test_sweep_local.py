"""The sweep on a local Ray (2 CPUs): where its cells and encoders are placed, and what fails alone. (A grid on
Ray against the serial ways, where its cells ran and its rerun: ``test_same_folder.py``.)"""

import re

import pandas as pd
import pytest

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray

from instir.distributed.grid import parse_grid  # noqa: E402
from instir.distributed.sweep import run_sweep  # noqa: E402
from instir.report.record import read_record  # noqa: E402


def test_cell_actors_hold_a_node_on_cpus_and_their_gpus_and_memory_otherwise(local_ray):
    from instir.distributed.sweep import _actor_resources
    from instir.systems.specs import resolve_system

    assert _actor_resources(resolve_system("bm25")) == {"num_cpus": 2}
    assert _actor_resources(resolve_system("dense")) == {"num_cpus": 2}  # torch gets both cores
    assert _actor_resources(resolve_system("GritLM-7B")) == {"num_cpus": 1, "num_gpus": 1.0, "memory": 20 * 2**30}


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
