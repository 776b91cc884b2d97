"""One sweep cell, run anywhere (in-process or on a Ray actor): the retrieve and evaluate
stages on the cell's part of the grid, so a sweep folder holds what the notebooks write:

- ``runs/<run>.trec`` + sidecar, through :func:`instir.stages.retrieve.retrieve_variant`
  (reused when the sidecar's key matches);
- ``sweep/cells/<cell id>.json``: the cell's ``runs.csv`` row, its run key digest, the check of
  its run's ids, state and error; ``sweep/cells/<cell id>.{table,per_query,per_group}.parquet``:
  its scores (:func:`instir.stages.evaluate.score_run`).

:func:`collect` joins the cells with the stages' own aggregation
(:func:`~instir.stages.retrieve.write_runs_table`, :func:`~instir.stages.evaluate.write_metrics`),
so ``runs/runs.csv`` and ``metrics/`` are the files notebooks 02 and 03 write for the same runs.
A cell whose run is reused and whose scores were made from that same run is not scored again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from instir import atomic
from instir.distributed.grid import Cell
from instir.report.layout import ReportLayout

if TYPE_CHECKING:
    from instir.benchmarks.types import Benchmark
    from instir.retrieval import Retriever

CELLS_DIR = Path("sweep") / "cells"
FRAMES = ("table", "per_query", "per_group")


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


def _run_digest(sidecar_key: dict) -> str:
    return hashlib.sha256(json.dumps(sidecar_key, sort_keys=True).encode()).hexdigest()


def cell_files(out: Path, cell: Cell) -> dict[str, Path]:
    """The cell's record and score files under ``out``."""
    base = out / CELLS_DIR / cell.cell_id
    return {"record": base.with_suffix(".json"), **{f: Path(f"{base}.{f}.parquet") for f in FRAMES}}


def run_cell(cell: Cell, out_dir: str | Path, *, k: int = 100, data_root: str | None = None,
             cache_dir: str | None = None, retriever: Retriever | None = None,
             loaded: dict[tuple[str, str], Benchmark] | None = None) -> CellResult:
    """Retrieve and score one cell into ``out_dir``; never raises for a bad cell (its
    error comes back as ``state="failed"`` with one line naming the cell and the cause).

    A caller that runs many cells of one system passes its ``retriever`` (built once, its
    model loaded and its index or corpus vectors kept) and a ``loaded`` dict that keeps each
    benchmark read once."""
    from instir.benchmarks import load_benchmark
    from instir.stages.evaluate import score_run
    from instir.stages.retrieve import retrieve_variant

    out = Path(out_dir)
    layout = ReportLayout(out)
    (out / CELLS_DIR).mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    where = {"node": socket.gethostname() + ":" + _node_id(), "pid": os.getpid()}
    try:
        key = (cell.benchmark, cell.setting)
        bench = loaded.get(key) if loaded is not None else None
        if bench is None:
            bench = load_benchmark(cell.benchmark, cell.setting, root=data_root)
            if loaded is not None:
                loaded[key] = bench
        if retriever is None:
            retriever = cell.system.factory(cache_dir)()
        row, run = retrieve_variant(layout, bench, cell.system, retriever, cell.variant, k)
        digest = _run_digest(run.meta["key"])
        files = cell_files(out, cell)
        previous = _read_record(files["record"])
        scores_current = (previous is not None and previous.get("run_digest") == digest and "check" in previous
                          and all(files[f].is_file() for f in FRAMES))
        check = previous["check"] if scores_current else None
        if not scores_current:
            scores = score_run(bench, run, row["system"])
            atomic.write_frames({files[name]: getattr(scores, name) for name in FRAMES})
            check = asdict(scores.check)
        if scores_current:
            row = {**previous["row"], "reused": True}
        state = "reused" if row["reused"] and scores_current else "done"
        record = {"cell": cell.cell_id, "state": state, "run_digest": digest, "row": row, "check": check, **where}
        atomic.write_text(files["record"], json.dumps(record, indent=2, default=str))
        return CellResult(cell.cell_id, state, row, None, wall_s=time.perf_counter() - start, **where)
    except Exception as e:  # a bad cell fails alone; the sweep reports it and goes on
        message = f"{cell.cell_id}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}".rstrip(": ")
        detail = traceback.format_exc()
        with contextlib.suppress(OSError):  # a full disk fails the cell, not the sweep (the message names the file)
            atomic.write_text(out / CELLS_DIR / f"{cell.cell_id}.error.txt", detail)
        return CellResult(cell.cell_id, "failed", {}, message, wall_s=time.perf_counter() - start, **where)


def _node_id() -> str:
    """The Ray node this runs on, or ``local`` outside Ray (a process that never imported Ray
    does not import it here: that alone costs seconds)."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        return ray.get_runtime_context().get_node_id()[:12]
    return "local"


def _read_record(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def import_collect() -> None:
    """Import what :func:`collect` uses (the metric tables, scipy's statistics: about a second),
    for a driver to do while it waits on the cells rather than after them."""
    import instir.stages.evaluate  # noqa: F401


def collect(out_dir: str | Path, cells: list[Cell], results: dict[str, CellResult]) -> dict[str, Path]:
    """Write ``runs/runs.csv`` and ``metrics/`` for every successful cell, in grid order, with
    the stages' own aggregation (comparisons against each benchmark's first system). Returns
    the written paths."""
    import pandas as pd

    from instir.retrieval.runs import RunIdCheck
    from instir.stages.evaluate import RunScores, write_metrics
    from instir.stages.retrieve import write_runs_table

    out = Path(out_dir)
    layout = ReportLayout(out)
    ok = [c for c in cells if c.cell_id in results and results[c.cell_id].state != "failed"]
    if not ok:
        return {}
    runs = write_runs_table(layout, [results[c.cell_id].row for c in ok])
    scores = []
    for cell in ok:
        files = cell_files(out, cell)
        record = _read_record(files["record"]) or {}
        scores.append(RunScores(*(pd.read_parquet(files[f]) for f in FRAMES), check=RunIdCheck(**record["check"])))
    write_metrics(layout, runs, scores)
    return {"runs": layout.runs_table, "metrics": layout.metrics_table, "comparisons": layout.comparisons}


def write_summary(out_dir: str | Path, results: dict[str, CellResult], extra: dict[str, Any]) -> Path:
    """``sweep/summary.json``: every cell's state, error, node and wall time, plus ``extra``."""
    path = Path(out_dir) / "sweep" / "summary.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    counts = {s: sum(r.state == s for r in results.values()) for s in ("done", "reused", "failed")}
    body = {**extra, "counts": counts, "cells": [asdict(r) for r in results.values()]}
    atomic.write_text(path, json.dumps(body, indent=2, default=str))
    return path
