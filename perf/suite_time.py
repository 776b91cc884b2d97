"""Edit-test loop, full suite and report chain: wall and CPU time, median of ``--runs`` runs.

Issue 11's targets on a 2-core machine with the venv in place: ``make test-quick`` (the tiers
without notebooks, browser, llama.cpp server, Ray or the in-process LLM judge) <= 60 s,
``make test`` <= 4 min (timed as ``make test``: ruff, then two pytest processes side by side),
and the default notebook chain ``instir run`` <= 60 s warm (a second run into a fresh report
folder: the embedding cache, the dequantised judge and the Python bytecode are in place, the
judgments are not). CPU time is user + system of the command and every process it waited for
(kernels, servers, Ray workers); on a shared machine it is the steadier figure, the wall time
is the target's.

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

REPO = Path(__file__).resolve().parent.parent
QUICK = "not (notebooks or browser or llama_server or ray or local_llm)"


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (this command and its waited-for children) and exit status."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode:
        print(done.stderr[-2000:], file=sys.stderr)
    return wall, cpu, done.returncode


def measure(name: str, argv: list[str], env: dict[str, str], runs: int, warmup: bool = False) -> dict:
    """``runs`` timed runs of ``argv`` (after one untimed run when ``warmup``); medians."""
    if warmup:
        timed(argv(-1) if callable(argv) else argv, env)
    walls, cpus = [], []
    for i in range(runs):
        wall, cpu, rc = timed(argv(i) if callable(argv) else argv, env)
        status = "ok" if rc == 0 else f"exit {rc}"
        print(f"{name} run {i + 1}: {wall:6.1f} s wall, {cpu:6.1f} s CPU ({status})", flush=True)
        walls.append(wall)
        cpus.append(cpu)
    return {"name": name, "wall": statistics.median(walls), "cpu": statistics.median(cpus), "runs": runs}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", default="quick,full,chain", help="comma-separated: quick, full, chain")
    args = parser.parse_args()
    parts = set(args.only.split(","))
    python = sys.executable
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    pytest = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    results = []
    if "quick" in parts:
        results.append(measure("make test-quick", [*pytest, "-m", QUICK], env, args.runs))
    if "full" in parts:
        results.append(measure("make test", ["make", "-s", "test"], env, args.runs))  # its two pytest processes
    if "chain" in parts:
        with tempfile.TemporaryDirectory(prefix="instir-chain-") as tmp:
            instir = [python, "-m", "instir.cli", "run", "--notebooks", str(REPO / "notebooks")]

            def chain(i: int) -> list[str]:
                return [*instir, "--out", str(Path(tmp) / "reports" / f"run{i + 1}")]

            results.append(measure("instir run (warm)", chain, env, args.runs, warmup=True))
            for i in range(args.runs):
                meta = json.loads((Path(tmp) / "reports" / f"run{i + 1}" / "report.json").read_text())
                print(f"chain run {i + 1}: " + ", ".join(f"{nb['name']} {nb['wall_s']:.1f} s"
                                                        for nb in meta["notebooks"]))
    print(f"\nmedians of {args.runs} runs")
    for r in results:
        print(f"{r['name']:<20} {r['wall']:7.1f} s wall {r['cpu']:7.1f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
