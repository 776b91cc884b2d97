"""One judge actor serving many concurrent Ray tasks: exact cache counts, one SQLite writer."""

import functools
import sqlite3

import pytest

from instir.distributed.judge import JudgeService, RateLimit, RemoteJudge


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


def test_rate_limit_lets_a_call_of_no_requests_through_at_once():
    now, slept = [100.0], []
    limit = RateLimit(60, clock=lambda: now[0], sleep=slept.append)
    limit.wait(3)
    limit.wait(0)
    assert slept == []
    limit.wait(1)
    assert slept == [3.0]
    assert RateLimit(None, clock=lambda: now[0], sleep=slept.append).interval == 0.0


def test_rate_limit_spaces_requests_by_sixty_seconds_over_the_rate():
    now, slept = [100.0], []
    limit = RateLimit(30, clock=lambda: now[0], sleep=slept.append)
    limit.wait(2)
    limit.wait(1)
    assert slept == [4.0] and limit.next_free == 106.0


class Scripted:
    """A backend that answers 1 for every text, except the first time it is asked for one of ``fail_first``."""

    name, model = "scripted", "none"

    def __init__(self, fail_first=()):
        self.seen = set()
        self.fail_first = set(fail_first)

    def judge(self, requests, on_result=None):
        from instir.judge.types import Judgment

        out = []
        for r in requests:
            ok = r.passage not in self.fail_first or r.passage in self.seen
            self.seen.add(r.passage)
            out.append(Judgment(1 if ok else None, 1.0 if ok else None, None, "parsed", "1",
                                error=None if ok else "no answer"))
        return out


def paced_service(tmp_path, backend, per_minute=60):
    """A judge service over ``backend`` whose rate limit records the seconds it would sleep (a clock that stands)."""
    from instir.judge import CachedJudge

    slept = []
    service = JudgeService(functools.partial(CachedJudge, backend, tmp_path / "judgments.sqlite"), per_minute)
    assert service.limit.interval == 60 / per_minute
    service.limit = RateLimit(per_minute, clock=lambda: 100.0, sleep=slept.append)
    return service, slept


def requests(*passages):
    from instir.judge.rubrics import rubric_for
    from instir.judge.types import JudgeRequest

    return [JudgeRequest("query", "instruction", p, rubric_for("")) for p in passages]


def test_the_judge_service_paces_only_the_distinct_texts_the_cache_lacks(tmp_path):
    service, slept = paced_service(tmp_path, Scripted())
    service.judge(requests("a", "b", "a"))  # two distinct texts: the next may start 2 s later
    service.judge(requests("a", "b"))  # both cached: no wait
    assert slept == []
    service.judge(requests("a", "c", "c"))  # one new text, after the first two
    assert slept == [2.0] and service.limit.next_free == 103.0
    service.judge(requests("a", "b"), repeat=1)  # a repeat's own entries: two new texts
    assert slept == [2.0, 3.0]
    assert service.stats() == {"judged": 5, "hits": 3, "failed": 0}


def test_the_judge_service_paces_a_failed_judgment_asked_again(tmp_path):
    service, slept = paced_service(tmp_path, Scripted(fail_first=["a"]))
    assert [j.ok for j in service.judge(requests("a"))] == [False]
    assert [j.ok for j in service.judge(requests("a"))] == [True]  # asked of the backend again: paced
    assert slept == [1.0]


def test_a_remote_judges_repeat_keeps_its_actor_and_identity(tmp_path):
    from instir.judge import BaselineJudge, CachedJudge

    service = JudgeService(lambda: CachedJudge(BaselineJudge("lexical", progress=False), tmp_path / "j.sqlite"))
    assert service.identity() == ("baseline-lexical", "stemmed-term-overlap", True)
    judge = RemoteJudge("actor", "name", "model", deterministic=True)
    again = judge.with_repeat(2)
    assert (again.actor, again.name, again.model, again.deterministic, again.repeat) == (
        "actor", "name", "model", True, 2)
    assert judge.repeat == 0


def test_a_remote_judge_reports_each_judgment_at_its_position(monkeypatch):
    import sys
    import types

    class Method:
        def remote(self, requests, repeat):
            return [f"{r}@{repeat}" for r in requests]

    monkeypatch.setitem(sys.modules, "ray", types.SimpleNamespace(get=lambda x: x))
    actor = types.SimpleNamespace(judge=Method())
    reported = []
    out = RemoteJudge(actor, "n", "m").with_repeat(1).judge(("x", "y"), on_result=lambda i, j: reported.append((i, j)))
    assert out == ["x@1", "y@1"] and reported == [(0, "x@1"), (1, "y@1")]
