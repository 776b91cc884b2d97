"""One sweep cell, run anywhere (in-process or on a Ray actor): the retrieve and evaluate stages
on the cell's run of the plan (:func:`instir.stages.retrieve.retrieve_planned`,
:func:`instir.stages.evaluate.run_scores`, each reusing what is stored), plus
``sweep/cells/<cell id>.json`` (the cell's ``runs.csv`` row, state, where it ran).
:func:`collect` joins the cells with the stages' own aggregation, so ``runs/runs.csv`` and
``metrics/`` are the files notebooks 02 and 03 write for the same runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from instir import atomic
from instir.report.layout import LoadedBenchmarks, ReportLayout
from instir.report.record import update_record
from instir.stages.plan import PlannedRun

if TYPE_CHECKING:
    from instir.retrieval import Retriever

CELLS_DIR = Path("sweep") / "cells"


@dataclass
class CellResult:
    """What a cell reports back: ``state`` is ``done`` (computed), ``reused`` (nothing
    computed) or ``failed`` (``error`` says why, one line). ``row`` is the cell's line of
    ``runs/runs.csv``; ``node`` and ``pid`` say where it ran."""

    cell_id: str
    state: str
    row: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    node: str = ""
    pid: int = 0
    wall_s: float = 0.0


def run_cell(cell: PlannedRun, out_dir: str | Path, *, data_root: str | None = None,
             cache_dir: str | None = None, retriever: Retriever | None = None,
             loaded: LoadedBenchmarks | None = None) -> CellResult:
    """Retrieve (to the cell's depth ``cell.k``) and score one cell into ``out_dir``; never raises for a bad cell (its
    error comes back as ``state="failed"`` with one line naming the cell and the cause).

    A caller that runs many cells of one system passes its ``retriever`` (built once, its
    model loaded and its index or corpus vectors kept) and its ``loaded`` benchmarks (each read
    once)."""
    from instir.stages.evaluate import run_scores
    from instir.stages.retrieve import retrieve_planned

    out = Path(out_dir)
    layout = ReportLayout(out)
    (out / CELLS_DIR).mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    where = {"node": socket.gethostname() + ":" + _node_id(), "pid": os.getpid()}
    try:
        bench = (loaded or LoadedBenchmarks(data_root)).get(cell.benchmark, cell.setting)
        retriever = retriever or cell.system.factory(cache_dir)()
        row, _ = retrieve_planned(layout, bench, cell, retriever)
        _, scores_reused = run_scores(layout, bench, row["run_file"], row["system"])
        state = "reused" if row["reused"] and scores_reused else "done"
        record = {"cell": cell.run_id, "state": state, "row": row, **where}
        atomic.write_text(out / CELLS_DIR / f"{cell.run_id}.json", json.dumps(record, indent=2, default=str))
        return CellResult(cell.run_id, state, row, None, wall_s=time.perf_counter() - start, **where)
    except Exception as e:  # a bad cell fails alone; the sweep reports it and goes on
        message = f"{cell.run_id}: {one_line(e)}"
        detail = traceback.format_exc()
        with contextlib.suppress(OSError):  # a full disk fails the cell, not the sweep (the message names the file)
            atomic.write_text(out / CELLS_DIR / f"{cell.run_id}.error.txt", detail)
        return CellResult(cell.run_id, "failed", {}, message, wall_s=time.perf_counter() - start, **where)


_RAISED = re.compile(r"(?:[\w]+\.)*(\w+(?:Error|Exception)): (.*)")


def one_line(error: Exception) -> str:
    """``Type: first line`` of an exception; of a Ray error, of the exception it wraps (a task's
    own; an actor's creation task's, which Ray keeps only as the last line of its message)."""
    cause = getattr(error, "cause", None)
    if isinstance(cause, Exception):
        error = cause
    elif type(error).__module__.startswith("ray."):
        raised = [m for line in str(error).splitlines() if (m := _RAISED.fullmatch(line.strip()))]
        if raised:
            return f"{raised[-1].group(1)}: {raised[-1].group(2)}"
    first = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {first}".rstrip(": ")


def _node_id() -> str:
    """The Ray node this runs on, or ``local`` outside Ray (a process that never imported Ray
    does not import it here: that alone costs seconds)."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        return ray.get_runtime_context().get_node_id()[:12]
    return "local"


def import_collect() -> None:
    """Import what :func:`collect` uses (the evaluate stage; scipy loads only when a test runs), for a
    driver to do while it waits on the cells rather than after them."""
    import instir.stages.evaluate  # noqa: F401


def collect(out_dir: str | Path, cells: list[PlannedRun], results: dict[str, CellResult],
            data_root: str | None = None, loaded: LoadedBenchmarks | None = None) -> dict[str, Path]:
    """Write ``runs/runs.csv`` for every successful cell, in plan order, then run the evaluate
    stage on it (every run's scores are stored by its cell: nothing is scored again; ``loaded``:
    the driver's benchmarks). Returns the written paths."""
    from instir.stages.evaluate import score_runs
    from instir.stages.retrieve import write_runs_table

    layout = ReportLayout(Path(out_dir))
    ok = [c for c in cells if c.run_id in results and results[c.run_id].state != "failed"]
    if not ok:
        return {}
    write_runs_table(layout, [results[c.run_id].row for c in ok])
    score_runs(layout.root, data_root=data_root, loaded=loaded)
    return {"runs": layout.runs_table, "metrics": layout.metrics_table, "comparisons": layout.comparisons}


def write_summary(out_dir: str | Path, results: dict[str, CellResult], extra: dict[str, Any]) -> dict:
    """The ``sweep`` section of the folder's record (:mod:`instir.report.record`): every cell's state,
    error, node and wall time, plus ``extra``; returns it."""
    counts = {s: sum(r.state == s for r in results.values()) for s in ("done", "reused", "failed")}
    body = {**extra, "counts": counts, "cells": [asdict(r) for r in results.values()]}
    return update_record(out_dir, sweep=json.loads(json.dumps(body, default=str)))["sweep"]
