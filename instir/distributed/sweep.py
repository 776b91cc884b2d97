"""``run_sweep``: every cell of a grid's plan as a Ray task (or in a plain loop,
``executor="serial"``), into one output folder laid out like a notebook run's ``out_dir``, so
notebooks 03–05 read a sweep unchanged. The sweep decides only where cells run, with which
resources, and what its summary says; what is computed is the stages'. Its steps (explore,
sharded encoding, cells, collect, judge and compare) and the actors' resources are described in
docs/scale-out.md, "How cells run"; a rerun recomputes only what is missing.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from instir.benchmarks.catalog import FAMILIES_VAR, families_var
from instir.distributed.cells import CellResult, collect, import_collect, one_line, run_cell, write_summary
from instir.distributed.grid import Grid
from instir.errors import UserError
from instir.progress import tqdm
from instir.report.layout import LoadedBenchmarks, ReportLayout, report_layout
from instir.report.lock import FolderLock
from instir.stages.plan import PlannedRun
from instir.systems.specs import SystemSpec

EXECUTORS = ("ray", "serial")
#: Retries of a cell task whose worker died (never for an error the cell itself reports).
WORKER_LOSS_RETRIES = 3


@dataclass
class SweepReport:
    """What a sweep did: each cell's :class:`CellResult`, the written tables, the wall time, and with a
    judge the judge step's and the compare step's outcomes (``state`` done or failed)."""

    results: dict[str, CellResult]
    written: dict[str, Path] = field(default_factory=dict)
    wall_s: float = 0.0
    encoded: dict[str, int] = field(default_factory=dict)
    judge: dict[str, Any] = field(default_factory=dict)
    compare: dict[str, Any] = field(default_factory=dict)

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
    ``ray://HOST:PORT``), shut down afterwards. A cluster's workers get this process's
    :data:`~instir.benchmarks.catalog.FAMILIES_VAR` (a local Ray's inherit it), so the families registered by it
    load on every node (the folders on storage every node reads)."""
    import ray

    if ray.is_initialized():
        yield
        return
    options: dict[str, Any] = {"address": address or "local", "include_dashboard": False, "log_to_driver": False}
    if address is None:  # "local": a new instance even where another one runs on this machine
        options["num_cpus"] = num_cpus
    elif os.environ.get(FAMILIES_VAR):
        options["runtime_env"] = {"env_vars": {FAMILIES_VAR: families_var()}}
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
    out = report_layout(out_dir).root  # the filesystem root or the home folder refused before any cell runs
    out.mkdir(parents=True, exist_ok=True)
    with FolderLock(out, "instir sweep"):
        return _sweep(grid, out, executor=executor, address=address, num_cpus=num_cpus,
                      encoder_actors=encoder_actors)


def _sweep(grid: Grid, out: Path, *, executor: str, address: str | None, num_cpus: int | None,
           encoder_actors: int | None) -> SweepReport:
    """:func:`run_sweep` once the folder's lock is held."""
    from instir.stages.explore import describe_benchmarks
    from instir.stages.retrieve import front_end, refuse_dropping

    start = time.perf_counter()
    cells = grid.cells()
    # before anything is written (the statistics were replaced, then runs.csv refused, leaving a mixed folder)
    refuse_dropping(ReportLayout(out), [(c.benchmark, c.setting, c.label, c.variant, c.k) for c in cells],
                    front_end(out))
    judged: dict[str, Any] = {}
    loaded = LoadedBenchmarks(grid.data_root, record_in=out)  # the driver's: every benchmark read once here
    try:
        describe_benchmarks(out, grid.benchmarks, grid.data_root, loaded=loaded)
        described: dict[str, Any] = {"state": "done"}
    except Exception as e:  # noqa: BLE001 - a benchmark that cannot load fails its cells, one line each
        described = {"state": "failed", "error": one_line(e)}
    if executor == "serial":
        results = _serial_cells(grid, cells, out, loaded)
        written = collect(out, cells, results, grid.data_root, loaded)
        if grid.judge:
            judged = _judge_step(grid, out, loaded, remote=False)
            written.update(judged.pop("written", {}))
        encoded: dict[str, int] = {}
    else:
        with ray_session(address, num_cpus=num_cpus):
            encoded = _shard_encodings(grid, encoder_actors)
            # the driver waits while the actors work: it imports what ``collect`` needs meanwhile
            imports = threading.Thread(target=import_collect, daemon=True)
            imports.start()
            results = _ray_cells(grid, cells, out)
            imports.join()
            written = collect(out, cells, results, grid.data_root, loaded)
            if grid.judge:
                judged = _judge_step(grid, out, loaded, remote=True)
                written.update(judged.pop("written", {}))
    compared: dict[str, Any] = {}
    if grid.judge:  # whatever the judge did: its failure leaves InstFol out of the tables, not the tables out
        compared = _compare_step(out)
        written.update(compared.pop("written", {}))
    report = SweepReport(results, written, time.perf_counter() - start, encoded, judged, compared)
    extra: dict[str, Any] = {"executor": executor, "address": address, "wall_s": round(report.wall_s, 3),
                             "encoded_chunks": encoded, "explore": described}
    if judged:
        extra["judge"] = judged
    if compared:
        extra["compare"] = compared
    write_summary(out, results, extra)
    return report


def _judge_step(grid: Grid, out: Path, loaded: LoadedBenchmarks, *, remote: bool) -> dict[str, Any]:
    """The judge stage on the sweep's folder (``remote``: every judge call through one judge actor
    holding the cache and the rate limit); it never ends the sweep: its outcome for the record's ``sweep``
    section (``state`` done or failed, the counts), the traceback of a stage that raised in
    ``sweep/judge.error.txt``, and what it left incomplete (:meth:`instir.stages.judge.Judging.incomplete`). The
    runs and metrics are written before it, the compare step and the summary after it, whatever it does."""
    from instir.judge.outcomes import AllJudgmentsFailed
    from instir.stages.judge import judge_runs

    spec = grid.judge
    try:
        host = None
        if remote:
            from instir.distributed.judge import start_judge

            def host(make: Callable[[], Any]) -> Any:
                return start_judge(make)[1]

        judging = judge_runs(out, backend=spec.backend, model=spec.model, base_url=spec.base_url,
                             api_key_env=spec.api_key_env, timeout_s=spec.timeout_s,
                             requests_per_minute=spec.requests_per_minute, max_instances=spec.max_instances,
                             repeats=spec.repeats, host=host, data_root=grid.data_root, loaded=loaded)
    except Exception as e:  # noqa: BLE001 - the judge's failure is reported, the sweep's files are still written
        return _step_failed(out, "judge", e)
    outcome = {"state": "done", "pairs": len(judging.instfol.costs), "failed_judgments": judging.failed_judgments(),
               "warnings": int(judging.instfol.costs["warnings"].sum()),
               "written": {"instfol": out / "judge" / "instfol.csv"}}
    try:
        judging.require_judgments()
    except AllJudgmentsFailed as e:
        return {**outcome, "state": "failed", "error": one_line(e), "detail": "judge/instfol_positions.csv"}
    incomplete = judging.incomplete()
    return {**outcome, "incomplete": incomplete} if incomplete else outcome


def _compare_step(out: Path) -> dict[str, Any]:
    """The compare stage (``paper_tables/``) on the sweep's folder, after the judge step whatever it did (InstFol
    joins in where ``judge/`` holds it); it never ends the sweep: its outcome (``state`` done or failed), the
    traceback of a stage that raised in ``sweep/compare.error.txt``."""
    from instir.stages.compare import paper_tables

    try:
        paper_tables(out)
    except Exception as e:  # noqa: BLE001 - reported as the judge's is; the sweep's files are still written
        return _step_failed(out, "compare", e)
    return {"state": "done", "written": {"paper_tables": out / "paper_tables"}}


def _step_failed(out: Path, step: str, error: Exception) -> dict[str, Any]:
    """The outcome of a ``step`` (judge, compare) that raised ``error``, its traceback kept in
    ``sweep/<step>.error.txt``."""
    from instir import atomic

    path = out / "sweep" / f"{step}.error.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, traceback.format_exc())
    return {"state": "failed", "error": one_line(error), "detail": f"sweep/{step}.error.txt"}


def _bar(total: int):
    return tqdm(total=total, desc="sweep", unit="cell")


def _show(bar, results: dict[str, CellResult]) -> None:
    counts = Counter(r.state for r in results.values())
    bar.set_postfix(done=counts["done"], reused=counts["reused"], failed=counts["failed"], refresh=False)
    bar.update(1)


def _serial_cells(grid: Grid, cells: list[PlannedRun], out: Path, loaded: LoadedBenchmarks) -> dict[str, CellResult]:
    """The cell groups in this process, in the actors' order, on one in-process :class:`SystemWorker` (each
    system built, and its model loaded where a cell searches, once; each benchmark read once, into the driver's
    ``loaded``)."""
    results: dict[str, CellResult] = {}
    worker: SystemWorker | None = None
    with _bar(len(cells)) as bar:
        for group in cell_groups(cells):
            worker = worker or SystemWorker(group[0].system, grid.cache_dir, grid.data_root, loaded)
            for result in worker.run(group, str(out)):
                results[result.cell_id] = result
                _show(bar, results)
    return {c.run_id: results[c.run_id] for c in cells}


def _actor_resources(system: SystemSpec) -> dict[str, float]:
    """What one cell actor of ``system`` holds: the GPUs it asks for, one CPU and its memory hint;
    any other system (BM25, a model on CPUs) a whole node's CPUs (the smallest node's), as for
    corpus encoding (:func:`~instir.distributed.encode.encoder_pool`), so torch spreads each
    batch over the node's cores and a node holds one copy of the model."""
    from instir.distributed.encode import encoder_pool

    resources: dict[str, float] = {"num_cpus": 1}
    if system.resources.get("num_gpus"):
        resources["num_gpus"] = system.resources["num_gpus"]
    else:
        resources["num_cpus"] = encoder_pool()[1]
    if system.resources.get("memory_gb"):
        resources["memory"] = int(system.resources["memory_gb"] * 2**30)
    return resources


class SystemWorker:
    """A Ray actor that runs groups of cells, one system at a time: it builds that system's retriever once (its
    model loaded by the first cell that searches), keeps the benchmark it read, and runs a group's cells in order, so
    the cells of one benchmark share the corpus embedding the first one wrote to the cache, as in the serial loop. A
    group of another system replaces the retriever (one model in memory)."""

    def __init__(self, system: SystemSpec, cache_dir: str | None, data_root: str | None,
                 loaded: LoadedBenchmarks | None = None):
        self.system: str | None = None
        self.retriever: Any = None
        self.cache_dir, self.data_root = cache_dir, data_root
        self.shared = loaded is not None  # the driver's benchmarks (in-process): keep them all
        self.loaded = loaded or LoadedBenchmarks(data_root)
        self._use(system)

    def _use(self, system: SystemSpec) -> None:
        self.system, self.retriever = system.name, None
        try:  # the model's weights load in the first cell that searches: a rerun that reuses every run loads none
            self.retriever = system.factory(self.cache_dir)()
        except Exception:  # noqa: BLE001 - each cell then builds it again and reports the error, one line each
            self.retriever = None

    def run(self, cells: list[PlannedRun], out_dir: str) -> list[CellResult]:
        if cells[0].system.name != self.system:
            self._use(cells[0].system)
        if not self.shared:
            self.loaded.keep_only(cells[0].benchmark)
        return [run_cell(cell, out_dir, data_root=self.data_root, cache_dir=self.cache_dir,
                         retriever=self.retriever, loaded=self.loaded) for cell in cells]


def cell_groups(cells: list[PlannedRun]) -> list[list[PlannedRun]]:
    """The cells by system and benchmark (one group runs on one actor, in order): systems with
    a model first, BM25 last, otherwise in grid order."""
    groups: dict[tuple[str, str], list[PlannedRun]] = {}
    for cell in cells:
        groups.setdefault((cell.system.name, cell.benchmark), []).append(cell)
    return sorted(groups.values(), key=lambda group: group[0].system.kind == "bm25")


def _pool_size(resources: dict[str, float], groups: int) -> int:
    """Actors of one pool (one resource shape, see :func:`_actor_resources`): one per group, at
    most as many as the cluster can run at once."""
    import ray

    total = ray.cluster_resources()
    if resources.get("num_gpus"):
        fit = total.get("GPU", 0) // resources["num_gpus"]
    else:
        fit = total.get("CPU", 1) // resources["num_cpus"]
    return max(1, min(groups, int(fit)))


def unplaceable(resources: dict[str, float]) -> str | None:
    """Why no alive node of the Ray cluster can hold an actor asking ``resources`` (Ray would
    keep it pending for ever), or None when one can."""
    import ray

    nodes = [node["Resources"] for node in ray.nodes() if node.get("Alive")]
    wants = {"CPU": resources.get("num_cpus", 1), "GPU": resources.get("num_gpus", 0),
             "memory": resources.get("memory", 0)}
    if any(all(node.get(key, 0) >= amount for key, amount in wants.items()) for node in nodes):
        return None
    def amounts(values: dict[str, float]) -> str:
        return ", ".join(f"memory {value / 2**30:.4g} GiB" if key == "memory" else f"{key} {value:g}"
                         for key, value in values.items() if wants[key])

    largest = {key: max((node.get(key, 0) for node in nodes), default=0) for key in wants}
    return f"needs {amounts(wants)} on one node; the largest node of the Ray cluster has {amounts(largest)}"


def _ray_cells(grid: Grid, cells: list[PlannedRun], out: Path) -> dict[str, CellResult]:
    """Stage 2: the cell groups on pools of :class:`SystemWorker` actors, one pool per resource
    shape (:func:`_actor_resources`) sized to what the cluster runs at once. A free actor takes
    the next group of the system it holds, else the next group of its pool (model systems
    first); an actor whose pool has nothing left is ended, freeing its resources for another
    pool's actors."""
    import ray

    held = {system.name: _actor_resources(system) for system in grid.systems}
    queues: dict[tuple, list[list[PlannedRun]]] = {}
    for group in cell_groups(cells):
        queues.setdefault(tuple(sorted(held[group[0].system.name].items())), []).append(group)
    worker = ray.remote(SystemWorker)
    holds: dict[Any, str] = {}
    pending: dict[Any, tuple[Any, tuple, list[PlannedRun]]] = {}

    def start(system: SystemSpec) -> Any:  # a lost actor is restarted and its call retried, never a cell's error
        options = {"max_restarts": WORKER_LOSS_RETRIES, "max_task_retries": WORKER_LOSS_RETRIES}
        actor = worker.options(**held[system.name], **options, scheduling_strategy="SPREAD").remote(
            system, grid.cache_dir, grid.data_root)
        holds[actor] = system.name
        return actor

    def give(actor: Any, shape: tuple) -> None:
        queue = queues[shape]
        if not queue:
            ray.kill(actor)  # frees its CPU/GPU for the actors still waiting
            return
        group = next((g for g in queue if g[0].system.name == holds[actor]), queue[0])
        queue.remove(group)
        holds[actor] = group[0].system.name
        pending[actor.run.remote(group, str(out))] = (actor, shape, group)

    results: dict[str, CellResult] = {}
    for shape, queue in list(queues.items()):
        if (why := unplaceable(dict(shape))) is not None:  # a cell that can never run fails now, not never
            results.update({c.run_id: CellResult(c.run_id, "failed", error=f"{c.run_id}: {c.system.name} {why}")
                            for group in queue for c in group})
            queue.clear()
            continue
        for group in queue[:_pool_size(dict(shape), len(queue))]:
            give(start(group[0].system), shape)
    with _bar(len(cells)) as bar:
        for _ in results:
            _show(bar, results)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            actor, shape, group = pending.pop(ready[0])
            try:
                done = ray.get(ready[0])
            except ray.exceptions.RayError as e:  # the actor was lost more often than restarted
                done = [CellResult(c.run_id, "failed", error=f"{c.run_id}: {one_line(e)}") for c in group]
                ray.kill(actor)
                actor = start(group[0].system)  # a fresh actor for the pool's remaining groups
            for result in done:
                results[result.cell_id] = result
                _show(bar, results)
            give(actor, shape)
    return {c.run_id: results[c.run_id] for c in cells}


def _shard_encodings(grid: Grid, actors: int | None) -> dict[str, int]:
    """Stage 1: encode large corpora with Ray Data for every dense system and document format;
    returns the chunks written per (benchmark, system, template)."""
    from instir.distributed.encode import dense_part, encode_corpus, encoder_pool
    from instir.formatting import get_template
    from instir.retrieval import template_for

    encoded: dict[str, int] = {}
    dense_systems = [s for s in grid.systems if s.kind != "bm25"]
    if not dense_systems:
        return encoded
    loaded = LoadedBenchmarks(grid.data_root)
    for name in grid.benchmarks:
        try:
            bench = loaded.get(name)
        except Exception:  # the cells report the error, one line each
            continue
        if len(bench.corpus) < grid.shard_min_docs:
            continue
        for system in dense_systems:
            factory = system.factory(grid.cache_dir)
            try:
                retriever = factory()
            except UserError:  # a model that cannot load here: its cells report it, one line each
                continue
            if dense_part(retriever) is None:
                continue
            spec = bench.spec
            variants = [v for v in spec.variants if grid.variants is None or v in grid.variants]
            templates = dict.fromkeys(spec.variant_template(v) or template_for(bench, retriever).name for v in variants)
            for template in templates:
                num_gpus = system.resources.get("num_gpus", 0)
                n_actors, num_cpus = encoder_pool(num_gpus, actors)
                if unplaceable({"num_gpus": num_gpus, "num_cpus": num_cpus}):
                    continue  # its cells fail with the reason
                done = encode_corpus(factory, bench.corpus, get_template(template), bench.shared_subset,
                                     actors=n_actors, num_gpus=num_gpus, num_cpus=num_cpus)
                encoded[f"{name} {system.name} {template}"] = len(done.written)
    return encoded


