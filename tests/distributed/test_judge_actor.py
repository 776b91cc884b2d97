"""One judge actor serving many concurrent Ray tasks: exact cache counts, one SQLite writer."""

import functools
import sqlite3

import pytest

from instir.distributed.judge import RateLimit


def test_rate_limit_spaces_requests_over_the_whole_minute():
    now, slept = [100.0], []

    def sleep(s):
        slept.append(s)
        now[0] += s

    limit = RateLimit(60, clock=lambda: now[0], sleep=sleep)
    limit.wait(3)  # the first three start at once ...
    limit.wait(1)  # ... and use up the next three seconds
    assert slept == [3.0]
    now[0] += 10
    limit.wait(2)
    assert slept == [3.0]


def _cached_lexical_judge(path):
    from instir.judge import BaselineJudge, CachedJudge

    return CachedJudge(BaselineJudge("lexical", progress=False), path)


@pytest.mark.ray
def test_many_concurrent_tasks_share_one_cache_with_exact_counts(local_ray, tmp_path):
    ray = pytest.importorskip("ray")
    from instir.distributed.judge import start_judge
    from instir.judge.rubrics import rubric_for
    from instir.judge.types import JudgeRequest

    cache = tmp_path / "judgments.sqlite"
    actor, judge = start_judge(functools.partial(_cached_lexical_judge, cache))
    try:
        rubric = rubric_for("")
        shared = [JudgeRequest(f"query {i}", "prefer recent work", f"passage {i} about query {i}", rubric)
                  for i in range(10)]

        @ray.remote(num_cpus=0.5)  # four at a time on two CPUs
        def task(n, judge):
            own = JudgeRequest(f"own query {n}", "no instruction", f"passage for task {n}", rubric)
            return judge.judge([*shared, own, own])

        n_tasks = 16
        answers = ray.get([task.remote(n, judge) for n in range(n_tasks)])
        stats = ray.get(actor.stats.remote())
    finally:
        ray.kill(actor)  # its process closes the SQLite file
    assert all(j.ok and j.error is None for answer in answers for j in answer)
    assert stats == {"judged": 10 + n_tasks, "hits": 10 * (n_tasks - 1), "failed": 0}
    assert [j.weighted for j in answers[0][:10]] == [j.weighted for j in answers[-1][:10]]
    with sqlite3.connect(cache) as db:
        assert db.execute("SELECT COUNT(*), SUM(attempts) FROM judgments").fetchone() == (10 + n_tasks, 10 + n_tasks)
