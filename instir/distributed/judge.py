"""One place for every judge call of a sweep: a Ray actor that owns the judge, its SQLite judgment cache
(:class:`~instir.judge.cache.CachedJudge`) and its endpoint's pace (the provider's rate limit:
:class:`instir.http_retry.Pace`), and a :class:`RemoteJudge` proxy that any task passes to
:func:`instir.judge.following.instfol` like a local judge. Only the actor's process opens the cache file, so no
two nodes write one SQLite file, and one pace holds for the whole cluster's requests.

The actor runs its calls one at a time (Ray's default for an actor), so the hit/miss counts
are exact and concurrent tasks asking for the same text pay for it once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from instir.judge.cache import CachedJudge
from instir.judge.types import JudgeRequest, Judgment, OnResult


class JudgeService:
    """The body of the judge actor: ``make_judge()`` builds the cached judge in the actor's
    process (e.g. ``functools.partial(instir.judge.factory.make_judge, "openai", model=…,
    cache=…)``: API keys are read there from its environment, never shipped; the SQLite file
    is opened only by this process)."""

    def __init__(self, make_judge: Callable[[], CachedJudge]):
        self.judge_ = make_judge()
        self.repeats = {0: self.judge_}

    def identity(self) -> tuple[str, str, bool]:
        """The judge's name, model and whether it is deterministic."""
        return self.judge_.name, self.judge_.model, self.judge_.deterministic

    def judge(self, requests: Sequence[JudgeRequest], repeat: int = 0) -> list[Judgment]:
        """Judgments in input order (of ``repeat``'s cache entries); only requests the cache lacks
        reach the backend."""
        judge = self.repeats.setdefault(repeat, self.judge_.with_repeat(repeat))
        return judge.judge(requests)

    def stats(self) -> dict[str, int]:
        """Cache hits, backend judgments and failures since the actor started (every repeat's)."""
        return asdict(self.judge_.stats)


class RemoteJudge:
    """A :class:`~instir.judge.types.Judge` that forwards to a judge actor (picklable: tasks
    receive it as an argument), with a cached judge's ``with_repeat`` and ``deterministic``
    (:func:`instir.judge.stability.judge_repeats`)."""

    def __init__(self, actor: Any, name: str, model: str, deterministic: bool = False, repeat: int = 0):
        self.actor, self.name, self.model = actor, name, model
        self.deterministic, self.repeat = deterministic, repeat

    def with_repeat(self, repeat: int) -> RemoteJudge:
        """The same actor, judging with ``repeat``'s cache entries."""
        return RemoteJudge(self.actor, self.name, self.model, self.deterministic, repeat)

    def judge(self, requests: Sequence[JudgeRequest], on_result: OnResult | None = None) -> list[Judgment]:
        import ray

        out = ray.get(self.actor.judge.remote(list(requests), self.repeat))
        if on_result is not None:
            for i, judgment in enumerate(out):
                on_result(i, judgment)
        return out


def start_judge(make_judge: Callable[[], CachedJudge]) -> tuple[Any, RemoteJudge]:
    """Start the judge actor (Ray must be initialised) and return it with its proxy.

    The actor is pinned to the driver's node, so the cache file lives where the sweep's
    output folder is."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = ray.get_runtime_context().get_node_id()
    actor = ray.remote(JudgeService).options(
        num_cpus=0, max_restarts=-1, max_task_retries=-1,
        scheduling_strategy=NodeAffinitySchedulingStrategy(here, soft=False),
    ).remote(make_judge)
    name, model, deterministic = ray.get(actor.identity.remote())
    return actor, RemoteJudge(actor, name, model, deterministic)
