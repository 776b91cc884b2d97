"""``run_sweep``: every cell of a grid as a Ray task (or in a plain loop, ``executor="serial"``),
into one output folder laid out like a notebook run's ``out_dir`` (``runs/``, ``metrics/``,
``judge/``), so notebooks 03–05 read a sweep unchanged.

Stages: (1) corpora of at least ``shard_min_docs`` documents are encoded for each dense system
by Ray Data (:mod:`instir.distributed.encode`); (2) cells run retrieve → evaluate as tasks
spread over the nodes, with the system's resource hints; a task is retried only when its
worker is lost, a bad cell fails alone; (3) with a ``judge`` in the grid, InstFol of each
instructed/query-only pair, every judge call through one judge actor; (4) the tables are joined
(:func:`instir.distributed.cells.collect`). Everything is resumable: a rerun recomputes only
what is missing.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from instir import atomic
from instir.distributed.cells import CellResult, collect, run_cell, write_summary
from instir.distributed.grid import Cell, Grid
from instir.progress import tqdm

EXECUTORS = ("ray", "serial")
#: Retries of a cell task whose worker died (never for an error the cell itself reports).
WORKER_LOSS_RETRIES = 3


@dataclass
class SweepReport:
    """What a sweep did: each cell's :class:`CellResult`, the written tables, the wall time."""

    results: dict[str, CellResult]
    written: dict[str, Path] = field(default_factory=dict)
    wall_s: float = 0.0
    encoded: dict[str, int] = field(default_factory=dict)

    def count(self, state: str) -> int:
        return sum(r.state == state for r in self.results.values())

    @property
    def failed(self) -> list[CellResult]:
        return [r for r in self.results.values() if r.state == "failed"]


def start_with_retries(start: Callable[[], Any], attempts: int = 4) -> Any:
    """``start()`` (a Ray start-up), tried again when Ray gives up starting: its raylet waits a
    fixed ~15 s for its agent processes, which a heavily loaded machine cannot always meet."""
    import ray

    for attempt in range(attempts):
        try:
            return start()
        except Exception as e:  # Ray raises a plain Exception for a node that timed out
            if "timed out during startup" not in str(e) or attempt == attempts - 1:
                raise
            ray.shutdown()
    raise AssertionError("unreachable")


@contextlib.contextmanager
def ray_session(address: str | None = None, *, num_cpus: int | None = None) -> Iterator[None]:
    """Ray for the duration of a block: the running session if there is one; else a local
    one started in-process (``address`` None) or a connection to a cluster (``auto`` or
    ``ray://HOST:PORT``), shut down afterwards."""
    import ray

    if ray.is_initialized():
        yield
        return
    options: dict[str, Any] = {"address": address, "include_dashboard": False, "log_to_driver": False}
    if address is None:
        options["num_cpus"] = num_cpus
    start_with_retries(lambda: ray.init(**options))
    try:
        yield
    finally:
        ray.shutdown()


def run_sweep(grid: Grid, out_dir: str | Path, *, executor: str = "ray", address: str | None = None,
              num_cpus: int | None = None, encoder_actors: int | None = None) -> SweepReport:
    """Run every cell of ``grid`` into ``out_dir`` (see the module docstring)."""
    if executor not in EXECUTORS:
        raise ValueError(f"unknown executor {executor!r}; use ray or serial")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    cells = grid.cells()
    if executor == "serial":
        results = _serial_cells(grid, cells, out)
        if grid.judge:
            _judge_pairs(grid, cells, results, out, judge=_local_judge(grid, out), remote=False)
        encoded: dict[str, int] = {}
    else:
        with ray_session(address, num_cpus=num_cpus):
            encoded = _shard_encodings(grid, encoder_actors)
            results = _ray_cells(grid, cells, out)
            if grid.judge:
                from instir.distributed.judge import start_judge

                _, judge = start_judge(_judge_factory(grid, out),
                                       requests_per_minute=grid.judge.get("requests_per_minute"))
                _judge_pairs(grid, cells, results, out, judge=judge, remote=True)
    written = collect(out, cells, results)
    report = SweepReport(results, written, time.perf_counter() - start, encoded)
    write_summary(out, results, {"executor": executor, "address": address, "wall_s": round(report.wall_s, 3),
                                 "encoded_chunks": encoded})
    return report


def _bar(total: int):
    return tqdm(total=total, desc="sweep", unit="cell")


def _show(bar, results: dict[str, CellResult]) -> None:
    bar.set_postfix(done=sum(r.state == "done" for r in results.values()),
                    reused=sum(r.state == "reused" for r in results.values()),
                    failed=sum(r.state == "failed" for r in results.values()), refresh=False)
    bar.update(1)


def _serial_cells(grid: Grid, cells: list[Cell], out: Path) -> dict[str, CellResult]:
    results: dict[str, CellResult] = {}
    with _bar(len(cells)) as bar:
        for cell in cells:
            results[cell.cell_id] = run_cell(cell, out, k=grid.k, data_root=grid.data_root, cache_dir=grid.cache_dir)
            _show(bar, results)
    return results


def _task_options(resources: dict[str, float]) -> dict[str, Any]:
    """Ray options of a system's cell actors from its resource hints (``num_gpus``, ``memory_gb``).
    An actor that dies is restarted and its call retried (worker loss), never a cell's own error."""
    options: dict[str, Any] = {"num_cpus": 1, "max_restarts": WORKER_LOSS_RETRIES,
                               "max_task_retries": WORKER_LOSS_RETRIES, "scheduling_strategy": "SPREAD"}
    if resources.get("num_gpus"):
        options["num_gpus"] = resources["num_gpus"]
    if resources.get("memory_gb"):
        options["memory"] = int(resources["memory_gb"] * 2**30)
    return options


class SystemWorker:
    """A Ray actor that serves one system's cells: it builds the retriever once (and loads its
    model while the driver is still submitting), keeps each benchmark it read, and runs a group
    of cells in order, so the cells of one benchmark share the corpus embedding the first one
    wrote to the cache, as they do in the serial loop."""

    def __init__(self, factory: Callable[[], Any]):
        from instir.distributed.encode import dense_part

        self.loaded: dict = {}
        try:
            self.retriever = factory()
            dense = dense_part(self.retriever)
            if dense is not None:
                dense.model  # noqa: B018 -- load the weights now, not inside the first cell
        except Exception:  # each cell then builds it again and reports the error, one line each
            self.retriever = None

    def run(self, cells: list[Cell], out_dir: str, k: int, data_root: str | None,
            cache_dir: str | None) -> list[CellResult]:
        return [run_cell(cell, out_dir, k=k, data_root=data_root, cache_dir=cache_dir, retriever=self.retriever,
                         loaded=self.loaded) for cell in cells]


def cell_groups(cells: list[Cell]) -> dict[str, list[list[Cell]]]:
    """The cells by system, then by benchmark (in grid order): one group runs on one actor."""
    groups: dict[str, dict[str, list[Cell]]] = {}
    for cell in cells:
        groups.setdefault(cell.system.name, {}).setdefault(cell.benchmark, []).append(cell)
    return {system: list(by_benchmark.values()) for system, by_benchmark in groups.items()}


def _pool_size(resources: dict[str, float], groups: int) -> int:
    """Actors one system gets: one per group, at most as many as the cluster can run at once."""
    import ray

    total = ray.cluster_resources()
    if resources.get("num_gpus"):
        fit = total.get("GPU", 0) // resources["num_gpus"]
    else:
        fit = total.get("CPU", 1)
    return max(1, min(groups, int(fit)))


def _ray_cells(grid: Grid, cells: list[Cell], out: Path) -> dict[str, CellResult]:
    """Stage 2: each system's cell groups on a pool of :class:`SystemWorker` actors. Systems
    with a model come first (their actors start, and import and load, while the cheap ones
    wait for a CPU); an actor with nothing left of its system is ended, which frees its
    resources for the next system's actors. Ray places the actors (resources, SPREAD)."""
    import ray

    systems = {c.system.name: c.system for c in cells}
    queues = cell_groups(cells)
    worker = ray.remote(SystemWorker)
    pending: dict[Any, tuple[Any, str, list[Cell]]] = {}

    def start(system: str) -> Any:
        spec = systems[system]
        return worker.options(**_task_options(spec.resources)).remote(spec.factory(grid.cache_dir))

    def give(actor: Any, system: str) -> None:
        if queues[system]:
            group = queues[system].pop(0)
            pending[actor.run.remote(group, str(out), grid.k, grid.data_root, grid.cache_dir)] = (actor, system, group)
        else:
            ray.kill(actor)  # frees its CPU/GPU for the actors of the systems still waiting

    for system in sorted(systems, key=lambda name: systems[name].kind == "bm25"):
        for _ in range(_pool_size(systems[system].resources, len(queues[system]))):
            give(start(system), system)
    results: dict[str, CellResult] = {}
    with _bar(len(cells)) as bar:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            actor, system, group = pending.pop(ready[0])
            try:
                done = ray.get(ready[0])
            except ray.exceptions.RayError as e:  # the actor was lost more often than restarted
                line = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                done = [CellResult(c.cell_id, "failed", error=f"{c.cell_id}: {line}") for c in group]
                ray.kill(actor)
                actor = start(system)  # a fresh actor for the system's remaining groups
            for result in done:
                results[result.cell_id] = result
                _show(bar, results)
            give(actor, system)
    return {c.cell_id: results[c.cell_id] for c in cells}


def _shard_encodings(grid: Grid, actors: int | None) -> dict[str, int]:
    """Stage 1: encode large corpora with Ray Data for every dense system and document format;
    returns the chunks written per (benchmark, system, template)."""
    import ray

    from instir.benchmarks import load_benchmark
    from instir.distributed.encode import dense_part, encode_corpus
    from instir.formatting import default_template, get_template
    from instir.retrieval import retriever_family
    from instir.retrieval.dense import _benchmark_subset

    encoded: dict[str, int] = {}
    dense_systems = [s for s in grid.systems if s.kind != "bm25"]
    if not dense_systems:
        return encoded
    n_actors = actors or max(1, int(ray.cluster_resources().get("GPU", 0) or ray.cluster_resources().get("CPU", 1)))
    for name in grid.benchmarks:
        try:
            bench = load_benchmark(name, root=grid.data_root)
        except Exception:  # the cells report the error, one line each
            continue
        if len(bench.corpus) < grid.shard_min_docs:
            continue
        for system in dense_systems:
            factory = system.factory(grid.cache_dir)
            retriever = factory()
            if dense_part(retriever) is None:
                continue
            templates = {("instructed", default_template(retriever_family(retriever), name,
                                                         query_order=bench.meta.get("query_order")).name),
                         ("query-only", "query-only")}
            for variant, template in templates:
                if variant not in grid.variants:
                    continue
                done = encode_corpus(factory, bench.corpus, get_template(template), _benchmark_subset(bench),
                                     actors=n_actors, num_gpus=system.resources.get("num_gpus", 0))
                encoded[f"{name} {system.name} {template}"] = len(done.written)
    return encoded


# ------------------------------------------------------------------ judge (InstFol), as notebook 04


def _judge_factory(grid: Grid, out: Path) -> functools.partial:
    from instir.judge.commands import make_judge

    spec = grid.judge or {}
    return functools.partial(make_judge, spec["backend"], model=spec.get("model") or None,
                             base_url=spec.get("base_url") or None,
                             api_key_env=spec.get("api_key_env", "OPENAI_API_KEY"),
                             cache=out / "judge" / "judgments.sqlite")


def _local_judge(grid: Grid, out: Path):
    return _judge_factory(grid, out)()


def judge_pair(benchmark: str, data_root: str | None, instructed: str, query_only: str, judge: Any,
               max_instances: int | None) -> pd.DataFrame:
    """InstFol instances of one system's instructed/query-only runs (as notebook 04 computes them)."""
    from instir.benchmarks import load_benchmark
    from instir.judge.instfol import instfol
    from instir.retrieval import read_run

    bench = load_benchmark(benchmark, root=data_root)
    result = instfol(read_run(instructed), read_run(query_only), bench, judge, max_instances=max_instances, seed=0)
    return result.instances


def _judge_pairs(grid: Grid, cells: list[Cell], results: dict[str, CellResult], out: Path, *, judge: Any,
                 remote: bool) -> None:
    """InstFol of every system with both variants done, into ``judge/instfol_instances.csv`` and
    ``judge/instfol.csv`` (notebook 04's files)."""
    from instir.judge.instfol import aggregate

    pairs: dict[tuple[str, str], dict[str, CellResult]] = {}
    for cell in cells:
        result = results[cell.cell_id]
        if cell.setting == "instructed" and result.state != "failed":
            pairs.setdefault((cell.benchmark, cell.system.name), {})[cell.variant] = result
    jobs = []
    max_instances = (grid.judge or {}).get("max_instances")
    for (benchmark, _), pair in pairs.items():
        if set(pair) != {"instructed", "query-only"}:
            continue
        args = (benchmark, grid.data_root, str(out / pair["instructed"].row["run_file"]),
                str(out / pair["query-only"].row["run_file"]), judge, max_instances)
        jobs.append((benchmark, pair["instructed"].row["system"], args))
    if not jobs:
        return
    if remote:
        import ray

        task = ray.remote(judge_pair).options(num_cpus=1, max_retries=WORKER_LOSS_RETRIES)
        frames = ray.get([task.remote(*args) for *_, args in jobs])
    else:
        frames = [judge_pair(*args) for *_, args in jobs]
    instances = pd.concat([f.assign(benchmark=b, family=b.split("/")[0], system=s)
                           for (b, s, _), f in zip(jobs, frames)], ignore_index=True)
    (out / "judge").mkdir(exist_ok=True)
    atomic.write_text(out / "judge" / "instfol_instances.csv", instances.to_csv(index=False))
    summary = pd.concat([aggregate(part).assign(system=system, benchmark=family)
                         for (system, family), part in instances.groupby(["system", "family"], sort=False)],
                        ignore_index=True)
    atomic.write_text(out / "judge" / "instfol.csv", summary.to_csv(index=False))
