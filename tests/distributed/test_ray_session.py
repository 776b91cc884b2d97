"""What ``instir sweep`` asks of Ray around a sweep (:func:`instir.distributed.sweep.ray_session`), checked
against a recording stand-in for the ``ray`` module: the suite's Ray tests run inside the session's running Ray,
and the README's ``instir sweep`` (tests/test_readme.py) starts a real local one in its own process."""

import sys
import types

import pytest

from instir.benchmarks.catalog import FAMILIES_VAR
from instir.distributed.sweep import ray_session


class RecordingRay(types.ModuleType):
    """``ray.init``/``ray.shutdown``/``ray.is_initialized`` that record their calls; ``init`` raises the errors in
    ``failures`` first, one per call."""

    def __init__(self, running: bool = False, failures: tuple[Exception, ...] = ()):
        super().__init__("ray")
        self.running, self.failures, self.calls = running, list(failures), []

    def is_initialized(self) -> bool:
        return self.running

    def init(self, **options):
        self.calls.append(("init", options))
        if self.failures:
            raise self.failures.pop(0)
        self.running = True

    def shutdown(self):
        self.calls.append(("shutdown", {}))
        self.running = False


@pytest.fixture
def ray(monkeypatch) -> RecordingRay:
    fake = RecordingRay()
    monkeypatch.setitem(sys.modules, "ray", fake)
    return fake


def test_a_sweep_without_a_running_ray_starts_a_local_one_of_the_cpus_asked_and_stops_it_after(ray):
    with ray_session(num_cpus=3):
        assert ray.running and len(ray.calls) == 1
    assert ray.calls == [("init", {"address": "local", "include_dashboard": False, "log_to_driver": False,
                                   "num_cpus": 3}), ("shutdown", {})]
    assert not ray.running


def test_a_cluster_address_is_joined_without_a_cpu_count_and_left_after(ray):
    with ray_session("ray://head:10001", num_cpus=3):
        pass
    assert ray.calls == [("init", {"address": "ray://head:10001", "include_dashboard": False,
                                   "log_to_driver": False}), ("shutdown", {})]


def test_a_cluster_gets_the_families_registered_by_the_environment_and_a_local_ray_inherits_them(ray, monkeypatch):
    monkeypatch.setenv(FAMILIES_VAR, "/shared/families")
    with ray_session("auto"):
        pass
    with ray_session():
        pass
    (_, cluster), _, (_, local), _ = ray.calls
    assert cluster["runtime_env"] == {"env_vars": {FAMILIES_VAR: "/shared/families"}}
    assert "runtime_env" not in local  # a local Ray's workers inherit this process's environment


def test_a_sweep_inside_a_running_ray_uses_it_and_leaves_it_running(ray):
    ray.running = True
    with ray_session(num_cpus=3):
        pass
    assert ray.calls == [] and ray.running


def test_ray_is_stopped_even_when_the_sweep_fails(ray):
    with pytest.raises(KeyError), ray_session():
        raise KeyError("a cell's bug")
    assert [name for name, _ in ray.calls] == ["init", "shutdown"] and not ray.running


def test_a_start_that_timed_out_is_tried_again_and_any_other_failure_is_raised(ray):
    ray.failures = [Exception("The current node timed out during startup.")]
    with ray_session():
        assert ray.running
    assert [name for name, _ in ray.calls] == ["init", "shutdown", "init", "shutdown"]

    ray.calls, ray.failures = [], [RuntimeError("no such address")]
    with pytest.raises(RuntimeError, match="no such address"), ray_session("auto"):
        pass
    assert [name for name, _ in ray.calls] == ["init"]


def test_a_cluster_gets_a_relative_families_folder_absolute(ray, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(FAMILIES_VAR, "families")
    with ray_session("auto"):
        pass
    # before, the workers got 'families', read from wherever each of them runs
    assert ray.calls[0][1]["runtime_env"] == {"env_vars": {FAMILIES_VAR: str(tmp_path / "families")}}
