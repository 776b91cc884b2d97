"""Whole-process speed of the command line: ``instir --help``, and ``instir evaluate`` of one
990,600-line run on InstructIR's 9,906 instances (the real queries and qrels of the authors'
release, the corpus generated as ``tests/real_data.py`` generates it, with a filler document for
each other id the run holds; the run as ``perf.metrics_scale`` draws it: 100 documents per
instance). Each command runs ``--repeats``
times as a fresh process into a new folder, after one warm-up run that builds the corpus index
in a scratch ``INSTIR_HOME`` (a user's first load pays that once); medians are checked against the targets
(``--help`` ≤ 0.4 s, ``evaluate`` ≤ 1.2 s; exit status 1 if one is missed).

    .venv/bin/python -m perf.cli_speed [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perf.common import REPO, check_targets, instructir_data

TARGETS = {"help": "<= 0.4 s", "evaluate": "<= 1.2 s"}


def prepared(scratch: Path) -> tuple[Path, Path]:
    """A data root holding the real InstructIR files and a generated corpus, and the run file."""
    from instir.benchmarks.readers import read_qrels
    from instir.retrieval.runs import write_run
    from perf.metrics_scale import synthetic_run
    from tests.real_data import generated_instructir_corpus

    data = instructir_data()
    root = scratch / "data" / "instructir" / "github"
    root.mkdir(parents=True)
    for item in data.iterdir():
        (root / item.name).symlink_to(item)
    qrels = read_qrels(data / "qrels" / "test.tsv")[0]
    drawn = synthetic_run(qrels)
    docs = generated_instructir_corpus(data)
    # the run's pool draws ids the generated corpus lacks (38 % of its rows): evaluate would time a run of
    # unknown documents, which it reports, not the one a user scores
    known = {doc["_id"] for doc in docs}
    docs += [{"_id": docid, "title": "", "text": "filler"} for docid in sorted(set(drawn.df["docid"]) - known)]
    with (root / "corpus.jsonl").open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(doc) + "\n" for doc in docs)
    run = write_run(drawn, scratch / "run.trec")
    return scratch / "data", run


def timed(argv: list[str], env: dict[str, str], repeats: int) -> list[float]:
    """Wall seconds of ``python -m instir.cli ARGV`` in fresh processes (after a warm-up); a
    ``{run}`` in an argument becomes the run's number, so each evaluation writes a new folder
    (a rerun in the same folder would reuse the scores it stored)."""
    walls = []
    for i in range(repeats + 1):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "instir.cli", *(a.format(run=i) for a in argv)], env=env,
                              cwd=REPO, capture_output=True, text=True, check=False)
        if done.returncode:
            sys.exit(f"instir {' '.join(argv)} failed:\n{done.stderr[-3000:]}")
        if i:  # the first run warms the caches (corpus index) and the file cache
            walls.append(time.perf_counter() - start)
    return walls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        data, run = prepared(scratch)
        # as an installed package runs, its modules compiled once: PYTHONDONTWRITEBYTECODE would recompile them each run
        env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
        env = {**env, "INSTIR_HOME": str(scratch / "home"), "INSTIR_PROGRESS": "0", "HF_HUB_OFFLINE": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        times = {"help": timed(["--help"], env, args.repeats),
                 "evaluate": timed(["evaluate", "--benchmark", "instructir", "--root", str(data), "--run", str(run),
                                    "--out", str(scratch / "out-{run}")], env, args.repeats)}
    medians = {name: statistics.median(walls) for name, walls in times.items()}
    for name, walls in times.items():
        print(f"{name:<9} median {medians[name]:.3f} s over {len(walls)} runs (min {min(walls):.3f}, "
              f"max {max(walls):.3f})")
    status = check_targets(medians, TARGETS)
    print(json.dumps(medians))
    return status


if __name__ == "__main__":
    sys.exit(main())
