"""One judge actor serving many concurrent Ray tasks: exact cache counts, one SQLite writer."""

import functools
import sqlite3

import pytest

from instir.distributed.judge import JudgeService, RemoteJudge


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


def requests(*passages):
    from instir.judge.rubrics import rubric_for
    from instir.judge.types import JudgeRequest

    return [JudgeRequest("query", "instruction", p, rubric_for("")) for p in passages]


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
