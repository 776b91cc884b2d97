"""Edit-test loop, full suite and report chain: wall and CPU time, median of ``--runs`` runs.

Issue 11's targets on a 2-core machine with the venv in place: ``make test-quick`` <= 60 s,
``make test`` <= 4 min, and the default notebook chain ``instir run`` <= 60 s warm (a second run
into a fresh report folder: the embedding cache, the dequantised judge and the Python bytecode are
in place, the judgments are not). Both suites are timed as ``make`` runs them (the Makefile's
QUICK tiers, or ruff then the whole suite, on two xdist workers), with this Python's folder as
make's ``BIN`` and the test stamp taken as made (``-o``), so no install is timed. CPU time is
user + system of the command and every process it waited for (kernels, servers, Ray workers); on a
shared machine it is the steadier figure, the wall time is the target's. A failed run is said and
left out of the medians; the exit status is 1 if a run failed or a target is missed.

    .venv/bin/python -m perf.suite_time [--runs 3] [--only quick,full,chain]

Per-notebook wall times of the chain come from its ``report.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perf.common import REPO, check_targets

TARGETS = {"make test-quick": "<= 60 s", "make test": "<= 240 s", "instir run (warm)": "<= 60 s"}


def make(target: str) -> list[str]:
    """``make TARGET`` with this Python's venv, its test stamp taken as made (no pip install)."""
    return ["make", "-s", "-o", ".venv/.instir-test", f"BIN={Path(sys.executable).parent}", target]


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (this command and its waited-for children) and exit status."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode:
        print(done.stdout[-2000:], file=sys.stderr)
    return wall, cpu, done.returncode


def measure(name: str, argv: list[str], env: dict[str, str], runs: int, warmup: bool = False) -> dict:
    """``runs`` timed runs of ``argv`` (after one untimed run when ``warmup``): the medians of those that
    succeeded (None if none did), which succeeded and how many failed."""
    failed = 0
    if warmup and timed(argv(-1) if callable(argv) else argv, env)[2]:
        print(f"{name} warm-up FAILED", flush=True)
        failed += 1
    walls, cpus, ok = [], [], []
    for i in range(runs):
        wall, cpu, rc = timed(argv(i) if callable(argv) else argv, env)
        print(f"{name} run {i + 1}: {wall:6.1f} s wall, {cpu:6.1f} s CPU ({'ok' if rc == 0 else f'FAILED, exit {rc}'})",
              flush=True)
        if rc:
            failed += 1
            continue
        walls.append(wall)
        cpus.append(cpu)
        ok.append(i)
    return {"name": name, "wall": statistics.median(walls) if walls else None,
            "cpu": statistics.median(cpus) if cpus else None, "ok": ok, "failed": failed}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default="quick,full,chain", help="comma-separated: quick, full, chain")
    args = parser.parse_args()
    parts = set(args.only.split(","))
    python = sys.executable
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    results = []
    if "quick" in parts:
        results.append(measure("make test-quick", make("test-quick"), env, args.runs))
    if "full" in parts:
        results.append(measure("make test", make("test"), env, args.runs))
    if "chain" in parts:
        with tempfile.TemporaryDirectory(prefix="instir-chain-") as tmp:
            instir = [python, "-m", "instir.cli", "run", "--notebooks", str(REPO / "notebooks")]

            def chain(i: int) -> list[str]:
                return [*instir, "--out", str(Path(tmp) / "reports" / f"run{i + 1}")]

            results.append(measure("instir run (warm)", chain, env, args.runs, warmup=True))
            for i in results[-1]["ok"]:
                meta = json.loads((Path(tmp) / "reports" / f"run{i + 1}" / "report.json").read_text())
                print(f"chain run {i + 1}: " + ", ".join(f"{nb['name']} {nb['wall_s']:.1f} s"
                                                        for nb in meta["notebooks"]))
    print(f"\nmedians of the successful runs of {args.runs}")
    for r in results:
        if r["wall"] is not None:
            print(f"{r['name']:<20} {r['wall']:7.1f} s wall {r['cpu']:7.1f} s CPU ({len(r['ok'])} runs)")
    status = check_targets({r["name"]: r["wall"] for r in results}, TARGETS)
    if any(r["failed"] for r in results):
        print("FAILED runs: " + ", ".join(f"{r['name']} {r['failed']}" for r in results if r["failed"]))
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
