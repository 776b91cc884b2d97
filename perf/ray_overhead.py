"""What Ray costs a sweep (issue 13): medians of ``--repeat`` runs on this machine's cores.

- ``sweep``: the sample grid (instructir-sample + ifir-sample/fiqa × bm25 + bundled MiniLM ×
  instructed + query-only, 8 cells) with ``executor="serial"`` against a local Ray (``--cpus``).
  Each side runs in a FRESH Python process with a fresh instir home (so both compute every run
  and embedding and pay their own imports and model loads), alternated serial, Ray, serial, …,
  so the shared machine's load falls on both alike. Ray's start-up (``ray.init``) is timed
  apart from the sweep. Printed: medians, the median of the per-repetition ratios
  ``ray / serial`` (target ≤ 1.20; exit status 1 if missed) and with start-up included.
- ``tasks``: the scheduling cost of one small Ray task (submit + run + get of a no-op, in
  batches of 1,000) and of one actor call.
- Corpus encoding (Ray Data against one process): ``perf/ray_encoding.py``.

    python -m perf.ray_overhead [--parts sweep,tasks] [--repeat 3] [--cpus 2]
    python -m perf.ray_overhead --quick     # one repetition, 200 tasks: < 2 minutes
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time

from perf.common import check_targets, run_child

GRID = {"benchmarks": ["instructir-sample", "ifir-sample/fiqa"], "systems": ["bm25", "dense"]}


def _median(values: list[float]) -> float:
    return statistics.median(values)


def child(side: str, folder: str, cpus: int) -> dict:
    """One sweep in this (fresh) process, into ``folder``; the Ray side starts Ray as ``instir
    sweep`` does (:func:`~instir.distributed.sweep.ray_session`: the workers inherit this
    process's environment, no runtime env to set up), timed apart."""
    from instir.distributed.grid import parse_grid
    from instir.distributed.sweep import ray_session, run_sweep

    out: dict = {}
    with contextlib.ExitStack() as stack:
        if side == "ray":
            start = time.perf_counter()
            stack.enter_context(ray_session(num_cpus=cpus))
            out["startup_s"] = time.perf_counter() - start
        start = time.perf_counter()
        report = run_sweep(parse_grid(GRID), f"{folder}/out", executor=side)
        out["sweep_s"] = time.perf_counter() - start
    out["done"] = report.count("done")
    return out


def _spawn(side: str, folder: str, cpus: int) -> dict:
    start = time.perf_counter()
    out = run_child("perf.ray_overhead", ["--child", side, "--folder", folder, "--cpus", str(cpus)],
                    INSTIR_HOME=f"{folder}/home")
    out["process_s"] = time.perf_counter() - start
    if out["done"] != 8:
        sys.exit(f"{side} sweep computed {out['done']} cells, not 8")
    return out


def bench_sweep(repeat: int, cpus: int) -> dict:
    """Alternated serial / Ray sweeps in fresh processes (see the module docstring)."""
    serial, spread, startup, ratios, with_startup, process = [], [], [], [], [], []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            one = _spawn("serial", f"{tmp}/serial", cpus)
            many = _spawn("ray", f"{tmp}/ray", cpus)
        serial.append(one["sweep_s"])
        spread.append(many["sweep_s"])
        startup.append(many["startup_s"])
        ratios.append(many["sweep_s"] / one["sweep_s"])
        with_startup.append((many["sweep_s"] + many["startup_s"]) / one["sweep_s"])
        process.append(many["process_s"] / one["process_s"])
    return {"repeat": repeat, "serial_s": round(_median(serial), 2), "ray_s": round(_median(spread), 2),
            "ratio": round(_median(ratios), 3), "ray_startup_s": round(_median(startup), 2),
            "ratio_with_startup": round(_median(with_startup), 3), "ratio_whole_process": round(_median(process), 3),
            "serial_runs_s": [round(x, 2) for x in serial], "ray_runs_s": [round(x, 2) for x in spread]}


def bench_tasks(repeat: int, cpus: int, n: int = 1000) -> dict:
    import ray

    from instir.distributed.sweep import start_with_retries

    start_with_retries(lambda: ray.init(address="local", num_cpus=cpus, include_dashboard=False, log_to_driver=False))
    try:
        @ray.remote
        def noop(x):
            return x

        @ray.remote
        class Echo:
            def call(self, x):
                return x

        echo = Echo.remote()
        ray.get([noop.remote(0) for _ in range(100)] + [echo.call.remote(0)])  # warm the worker pool
        tasks, calls = [], []
        for _ in range(repeat):
            start = time.perf_counter()
            ray.get([noop.remote(i) for i in range(n)])
            tasks.append((time.perf_counter() - start) / n)
            start = time.perf_counter()
            ray.get([echo.call.remote(i) for i in range(n)])
            calls.append((time.perf_counter() - start) / n)
    finally:
        ray.shutdown()
    return {"task_ms": 1000 * _median(tasks), "actor_call_ms": 1000 * _median(calls)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", default="sweep,tasks")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--quick", action="store_true", help="one repetition and 200 tasks (< 2 minutes)")
    parser.add_argument("--child", choices=("serial", "ray"), help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.folder, args.cpus)))
        return 0
    os.environ.setdefault("INSTIR_PROGRESS", "0")
    repeat = 1 if args.quick else args.repeat
    parts = args.parts.split(",")
    if "tasks" in parts:
        print("tasks ", bench_tasks(repeat, args.cpus, 200 if args.quick else 1000), flush=True)
    if "sweep" not in parts:
        return 0
    sweep = bench_sweep(repeat, args.cpus)
    print("sweep ", sweep, flush=True)
    return check_targets({"sweep ray / serial": sweep["ratio"]}, {"sweep ray / serial": "<= 1.20"})


if __name__ == "__main__":
    sys.exit(main())
