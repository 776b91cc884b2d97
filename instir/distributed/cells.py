"""One sweep cell, run anywhere (in-process or as a Ray task): retrieve → evaluate, writing
what notebooks 02 and 03 write, so a sweep folder reads like a notebook run's ``out_dir``:

- ``runs/<run>.trec`` + sidecar, through :func:`instir.retrieval.retrieve` (reused when the
  sidecar's key matches);
- ``sweep/cells/<cell id>.json``: the cell's ``runs.csv`` row, its run key digest, state
  and error; ``sweep/cells/<cell id>.{table,per_query,per_group}.parquet``: its evaluation.

:func:`collect` joins the cells into ``runs/runs.csv`` and ``metrics/{metrics.csv,
metrics.parquet, per_query.parquet, per_group.parquet, comparisons.csv}`` exactly as
notebooks 02 and 03 compute them. A cell whose run is reused and whose evaluation was made
from that same run is not evaluated again.
"""

from __future__ import annotations

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

import pandas as pd

from instir import atomic
from instir.benchmarks import catalog
from instir.distributed.grid import Cell

if TYPE_CHECKING:
    from instir.benchmarks.types import Benchmark
    from instir.retrieval import Retriever

CELLS_DIR = Path("sweep") / "cells"
_FRAMES = ("table", "per_query", "per_group")


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
    """The cell's record and evaluation files under ``out``."""
    base = out / CELLS_DIR / cell.cell_id
    return {"record": base.with_suffix(".json"), **{f: Path(f"{base}.{f}.parquet") for f in _FRAMES}}


def run_cell(cell: Cell, out_dir: str | Path, *, k: int = 100, data_root: str | None = None,
             cache_dir: str | None = None, retriever: Retriever | None = None,
             loaded: dict[tuple[str, str], Benchmark] | None = None) -> CellResult:
    """Retrieve and evaluate one cell into ``out_dir``; never raises for a bad cell (its
    error comes back as ``state="failed"`` with one line naming the cell and the cause).

    A caller that runs many cells of one system passes its ``retriever`` (built once, its
    model loaded once) and a ``loaded`` dict that keeps each benchmark read once."""
    from instir.benchmarks import load_benchmark
    from instir.metrics import evaluate_runs
    from instir.retrieval import retrieve

    out = Path(out_dir)
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
        t0 = time.perf_counter()
        run = retrieve(bench, retriever, None if cell.variant == "instructed" else "query-only", k=k,
                       out_dir=out / "runs")
        reused_run = bool(run.meta.get("reused", False))
        digest = _run_digest(run.meta["key"])
        files = cell_files(out, cell)
        previous = _read_record(files["record"])
        evaluation_current = (previous is not None and previous.get("run_digest") == digest
                              and all(files[f].is_file() for f in _FRAMES))
        if not evaluation_current:
            ev = evaluate_runs({cell.run_label: run}, bench)
            for name in _FRAMES:
                _write_parquet(getattr(ev, name), files[name])
        row = {"benchmark": cell.benchmark, "sample": bench.is_sample, "retriever": cell.system.name,
               "system": cell.run_label, "variant": cell.variant, "template": run.meta["template"]["name"],
               "k": k, "queries": run.df["qid"].nunique(), "rows": len(run.df),
               "search_s": run.meta["wall_time_s"], "elapsed_s": round(time.perf_counter() - t0, 3),
               "reused": reused_run,
               "run_file": Path(run.meta["path"]).resolve().relative_to(out.resolve()).as_posix(),
               "setting": cell.setting}
        if evaluation_current and previous is not None:
            row = {**previous["row"], "reused": True}
        state = "reused" if reused_run and evaluation_current else "done"
        record = {"cell": cell.cell_id, "state": state, "run_digest": digest, "row": row, **where}
        atomic.write_text(files["record"], json.dumps(record, indent=2, default=str))
        return CellResult(cell.cell_id, state, row, None, wall_s=time.perf_counter() - start, **where)
    except Exception as e:  # a bad cell fails alone; the sweep reports it and goes on
        message = f"{cell.cell_id}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}".rstrip(": ")
        detail = traceback.format_exc()
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


def _write_parquet(frame: pd.DataFrame, path: Path) -> None:
    """Write a frame atomically (a killed cell never leaves half a table)."""
    import io

    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    atomic.write_bytes(path, buffer.getvalue())


def import_collect() -> None:
    """Import what :func:`collect` uses (the metric tables, scipy's statistics: about a second),
    for a driver to do while it waits on the cells rather than after them."""
    from instir.metrics import combine, ifir_average, paired_tests  # noqa: F401 -- lazy attributes load here


def collect(out_dir: str | Path, cells: list[Cell], results: dict[str, CellResult]) -> dict[str, Path]:
    """Write ``runs/runs.csv`` and the ``metrics/`` tables of every successful cell, as
    notebooks 02 and 03 do (same columns, same order: grid order; comparisons against each
    benchmark's first system). Returns the written paths."""
    from instir.metrics import combine, ifir_average, paired_tests

    out = Path(out_dir)
    ok = [c for c in cells if c.cell_id in results and results[c.cell_id].state != "failed"]
    written: dict[str, Path] = {}
    if not ok:
        return written
    rows = [results[c.cell_id].row for c in ok]
    runs_table = pd.DataFrame(rows)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    atomic.write_text(out / "runs" / "runs.csv", runs_table.to_csv(index=False))
    written["runs"] = out / "runs" / "runs.csv"

    frames = {f: [pd.read_parquet(cell_files(out, c)[f]) for c in ok] for f in _FRAMES}
    table = combine(frames["table"])
    ifir_rows = table[table["benchmark"].map(catalog.family_of) == "ifir"]
    if len(ifir_rows):
        table = combine([table, ifir_average(ifir_rows)])
    per_query, per_group = [], []
    for name in dict.fromkeys(c.benchmark for c in ok):  # as one evaluate_runs per benchmark builds them
        mine = [i for i, c in enumerate(ok) if c.benchmark == name]
        per_query.append(pd.concat([frames["per_query"][i] for i in mine], ignore_index=True).assign(benchmark=name))
        groups = [frames["per_group"][i] for i in mine if len(frames["per_group"][i])]
        per_group.append((pd.concat(groups, ignore_index=True) if groups
                          else pd.DataFrame(columns=frames["per_group"][mine[0]].columns)).assign(benchmark=name))
    per_query = pd.concat(per_query, ignore_index=True)
    per_group = pd.concat(per_group, ignore_index=True)
    metrics = out / "metrics"
    metrics.mkdir(exist_ok=True)
    atomic.write_text(metrics / "metrics.csv", table.to_csv(index=False))
    for name, frame in (("metrics", table), ("per_query", per_query), ("per_group", per_group)):
        _write_parquet(frame, metrics / f"{name}.parquet")
    headline = ["nDCG@10", "Robustness(nDCG@10)", "nDCG@20", "nDCG@20[ifir-native]"]
    comparisons = []
    for name in dict.fromkeys(c.benchmark for c in ok):
        baseline = runs_table.loc[runs_table["benchmark"] == name, "system"].iloc[0]
        pq = per_query[per_query["benchmark"] == name].drop(columns="benchmark")
        comparisons.append(paired_tests(pq[pq["measure"].isin(headline)], baseline)
                           .assign(benchmark=name, unit="query"))
        pg = per_group[per_group["benchmark"] == name].drop(columns="benchmark")
        minima = pg[pg["measure"].isin(headline)]
        if len(minima):
            comparisons.append(paired_tests(minima, baseline, unit="group").assign(benchmark=name, unit="group"))
    atomic.write_text(metrics / "comparisons.csv", pd.concat(comparisons, ignore_index=True).to_csv(index=False))
    written.update(metrics=metrics / "metrics.csv", comparisons=metrics / "comparisons.csv")
    return written


def write_summary(out_dir: str | Path, results: dict[str, CellResult], extra: dict[str, Any]) -> Path:
    """``sweep/summary.json``: every cell's state, error, node and wall time, plus ``extra``."""
    path = Path(out_dir) / "sweep" / "summary.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    counts = {s: sum(r.state == s for r in results.values()) for s in ("done", "reused", "failed")}
    body = {**extra, "counts": counts, "cells": [asdict(r) for r in results.values()]}
    atomic.write_text(path, json.dumps(body, indent=2, default=str))
    return path
