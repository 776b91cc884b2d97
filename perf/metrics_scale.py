"""Scoring speed at InstructIR scale: nDCG@10 + Robustness@10 on a 9,906-instance run
(k = 100), the kit's way (one evaluator for the qrels) against the authors' way (one
pytrec_eval evaluator per query group, as ``eval/robust_eval.py`` in kaistAI/InstructIR
does), with identical values asserted.

The qrels are the real ones (``qrels/test.tsv``); the run is synthetic: for each instance
100 documents drawn from a 16,072-id pool (the real relevant ids plus distractor ids), the
instance's relevant document placed in 90% of the instances, at a geometrically distributed
rank (p = 0.3, so mostly near the top, as a reasonable retriever would). The run is
built as a :class:`Run` before timing (a retriever hands one over); the authors' way gets
its ``{qid: {docid: score}}`` dict for free, also before timing. Times are the best of
``--repeats``, wall and CPU; peak RSS is the growth of the process's high-water mark over
each phase (reset through ``/proc/self/clear_refs`` where the kernel allows).

    .venv/bin/python -m perf.metrics_scale [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytrec_eval

from instir.benchmarks.instructir import group_of
from instir.benchmarks.readers import read_qrels
from instir.metrics.robustness import robustness
from instir.metrics.scoring import without_self_hits
from instir.metrics.standard import Evaluator
from instir.retrieval.runs import Run
from perf.common import check_targets, instructir_data

CORPUS_SIZE, DEPTH, HIT_RATE, RANK_P = 16_072, 100, 0.9, 0.3


def synthetic_run(qrels: dict[str, dict[str, int]], seed: int = 0) -> Run:
    """100 distinct documents per instance from a 16,072-id pool, the relevant one included
    in ``HIT_RATE`` of the instances at a geometric(``RANK_P``) rank; scores decrease with rank."""
    rng = np.random.default_rng(seed)
    qids = list(qrels)
    relevant = sorted({d for docs in qrels.values() for d in docs})
    pool = np.array(relevant + [f"d{i}" for i in range(CORPUS_SIZE - len(relevant))], dtype=object)
    docs = np.stack([pool[rng.choice(len(pool), DEPTH, replace=False)] for _ in qids])
    hit = rng.random(len(qids)) < HIT_RATE
    for i in np.flatnonzero(hit):
        rel = next(iter(qrels[qids[i]]))
        target = min(rng.geometric(RANK_P), DEPTH) - 1
        drawn = np.flatnonzero(docs[i] == rel)
        if drawn.size:  # already drawn: swap places, so the row keeps distinct documents
            docs[i, drawn[0]] = docs[i, target]
        docs[i, target] = rel
    scores = np.sort(rng.random((len(qids), DEPTH)), axis=1)[:, ::-1] * 20
    return Run(pd.DataFrame({"qid": np.repeat(qids, DEPTH), "docid": docs.ravel(), "score": scores.ravel()}))


def kit_way(qrels, run: Run, groups: dict[str, str]) -> tuple[dict[str, float], float, float]:
    """Per-query nDCG@10, its mean and Robustness@10 through the kit."""
    per_query = Evaluator(qrels, ["nDCG@10"]).per_query(without_self_hits(run))
    robust = robustness(per_query, groups)["value"].iloc[0]
    return dict(zip(per_query["qid"], per_query["value"])), per_query["value"].mean(), robust


def authors_way(qrels, results: dict[str, dict[str, float]],
                groups: dict[str, str]) -> tuple[dict[str, float], float, float]:
    """The same numbers the way the InstructIR authors compute them: self-hits popped from
    the results dict, then per query group a fresh pytrec_eval evaluator over the full qrels."""
    for qid, docs in results.items():
        docs.pop(qid, None)
    by_group: dict[str, dict[str, dict[str, float]]] = {}
    for qid, docs in results.items():
        by_group.setdefault(groups[qid], {})[qid] = docs
    values: dict[str, float] = {}
    minima = []
    for group_results in by_group.values():
        scores = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10"}).evaluate(group_results)
        group_values = [s["ndcg_cut_10"] for s in scores.values()]
        values.update({q: s["ndcg_cut_10"] for q, s in scores.items()})
        minima.append(min(group_values))
    return values, sum(values.values()) / len(values), sum(minima) / len(minima)


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _rss_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def timed(fn, repeats: int):
    """(result, best wall s, best CPU s, peak RSS growth MB) of ``fn()`` over ``repeats`` calls."""
    best_wall = best_cpu = float("inf")
    growth = 0.0
    for _ in range(repeats):
        start_rss = _rss_mb("VmRSS")
        _reset_peak()
        w, c = time.perf_counter(), time.process_time()
        result = fn()
        best_wall, best_cpu = min(best_wall, time.perf_counter() - w), min(best_cpu, time.process_time() - c)
        growth = max(growth, _rss_mb("VmHWM") - start_rss)
    return result, best_wall, best_cpu, growth


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    qrels_path = instructir_data() / "qrels" / "test.tsv"
    qrels, _ = read_qrels(qrels_path)
    groups = {q: group_of(q) for q in qrels}
    run = synthetic_run(qrels)
    print(f"qrels {qrels_path}: {len(qrels)} instances, {len(set(groups.values()))} groups; "
          f"run: {len(run.df)} rows (k = {DEPTH}); peak RSS reset: {_reset_peak()}")

    (kit_values, kit_mean, kit_robust), kit_wall, kit_cpu, kit_mb = timed(
        lambda: kit_way(qrels, run, groups), args.repeats)
    results = [run.to_dict() for _ in range(args.repeats)]  # the authors' input, made before timing
    (auth_values, auth_mean, auth_robust), auth_wall, auth_cpu, auth_mb = timed(
        lambda: authors_way(qrels, results.pop(), groups), args.repeats)

    assert kit_values == auth_values, "per-query nDCG@10 differs between the two ways"
    # the means differ only by summation order (pandas sums pairwise)
    assert abs(kit_mean - auth_mean) < 1e-12 and abs(kit_robust - auth_robust) < 1e-12
    print(f"nDCG@10 = {kit_mean:.6f}, Robustness@10 = {kit_robust:.6f} (per-query values identical "
          f"both ways; means equal to 1e-12)")
    print(f"{'way':<34}{'wall s':>8}{'CPU s':>8}{'peak RSS +MB':>14}")
    print(f"{'kit (one evaluator)':<34}{kit_wall:8.3f}{kit_cpu:8.3f}{kit_mb:14.1f}")
    print(f"{'authors (evaluator per group)':<34}{auth_wall:8.3f}{auth_cpu:8.3f}{auth_mb:14.1f}")
    ratio = auth_wall / kit_wall
    print(f"speed-up {ratio:.1f}x wall, {auth_cpu / kit_cpu:.1f}x CPU; process peak RSS "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    # wall time suffers when other jobs share the cores; CPU time shows the work itself
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return check_targets({"kit wall": kit_wall, "kit CPU": kit_cpu, "speed-up wall": ratio,
                          "speed-up CPU": auth_cpu / kit_cpu},
                         {"kit wall": "<= 1 s", "kit CPU": "<= 1 s", "speed-up wall": ">= 15 x",
                          "speed-up CPU": ">= 15 x"})


if __name__ == "__main__":
    sys.exit(main())
