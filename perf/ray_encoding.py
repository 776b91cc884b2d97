"""Sharded encoding on Ray Data against one process (issue 13): medians of ``--repeat``.

``--docs`` documents (default 20,000; ``--sizes 5000,10000`` for several) are generated
deterministically from the words of the bundled sample corpora (60 consecutive words from a
random offset each, so tokenisation is that of real English, about 80 MiniLM tokens a
document). Each side runs in a FRESH Python process, alternated (one-process, then Ray, then
one-process ...), so both pay their own imports and model loads, and the shared machine's
load falls on both alike:

- one process: ``DenseRetriever(chunk_size=--chunk).embed_corpus`` (the kit's embedding-cache
  path; torch on all ``--cpus`` threads);
- Ray Data: ``instir.distributed.encode.encode_corpus`` on the actors ``instir sweep`` would
  use (:func:`~instir.distributed.encode.encoder_pool`: on one node, one actor with all
  ``--cpus`` CPUs as torch threads; one Ray Data row per cache chunk), after Ray starts as
  ``instir sweep`` starts it (timed apart). The model load for the cache key counts (a Ray task
  loads it, as ``encode_corpus`` does: the driver loads no model).

Each writes its own cache folder; the two matrices must be identical (asserted, every
repetition). Printed: docs/s of both, the wall times, the median of the per-repetition
ratios ``ray / one process`` (target: ≤ 1.15; exit status 1 if missed) and Ray's start-up.

    python -m perf.ray_encoding [--docs 20000 | --sizes 5000,10000,20000] [--repeat 3]
    python -m perf.ray_encoding --quick      # 1,000 documents, chunks of 250: < 2 minutes
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
from pathlib import Path

from perf.common import check_targets, run_child

SAMPLES = ("instructir-sample", "ifir-sample/fiqa")


def corpus(n_docs: int):
    """``n_docs`` documents of 60 consecutive words of the sample corpora, seed 0."""
    import numpy as np

    from instir.benchmarks import load_benchmark
    from instir.benchmarks.types import Corpus, Doc

    words = [w for name in SAMPLES for doc in load_benchmark(name).corpus for w in doc.text.split()]
    starts = np.random.default_rng(0).integers(0, len(words) - 60, n_docs)
    return Corpus.from_docs(Doc(f"d{i}", " ".join(words[s:s + 60]), f"title {i % 97}") for i, s in enumerate(starts))


def child(side: str, n_docs: int, chunk: int, cpus: int, folder: str) -> dict:
    """One measurement in this (fresh) process; saves the matrix beside the cache for the check.
    The Ray side starts Ray as ``instir sweep`` does (its workers inherit this environment)."""
    import functools

    import numpy as np

    from instir.formatting import get_template
    from instir.retrieval.dense import DenseRetriever

    docs, template = corpus(n_docs), get_template("query-only")
    factory = functools.partial(DenseRetriever, None, cache_dir=folder, chunk_size=chunk, progress=False)
    out: dict = {}
    with contextlib.ExitStack() as stack:
        if side == "single":
            import torch

            torch.set_num_threads(cpus)
            start = time.perf_counter()
            embeddings = factory().embed_corpus(docs, template)
        else:
            from instir.distributed.encode import encode_corpus, encoder_pool
            from instir.distributed.sweep import ray_session

            start = time.perf_counter()
            stack.enter_context(ray_session(num_cpus=cpus))
            out["startup_s"] = time.perf_counter() - start
            start = time.perf_counter()
            actors, per_actor = encoder_pool()  # the sweep's choice: here one actor on all the CPUs
            out["actors"], out["cpus_per_actor"] = actors, per_actor
            embeddings = encode_corpus(factory, docs, template, actors=actors, num_cpus=per_actor).embeddings
        out["wall_s"] = time.perf_counter() - start
    np.save(Path(folder) / "matrix.npy", np.asarray(embeddings.matrix))
    return out


def _spawn(side: str, n_docs: int, chunk: int, cpus: int, folder: str) -> dict:
    return run_child("perf.ray_encoding", ["--child", side, "--docs", str(n_docs), "--chunk", str(chunk),
                                           "--cpus", str(cpus), "--folder", folder])


def measure(n_docs: int, chunk: int, cpus: int, repeat: int) -> dict:
    """Alternated single / Ray runs; medians, the median per-repetition ratio, identity checked."""
    import numpy as np

    single, spread, startup, ratios = [], [], [], []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            one = _spawn("single", n_docs, chunk, cpus, f"{tmp}/single")
            many = _spawn("ray", n_docs, chunk, cpus, f"{tmp}/ray")
            a, b = np.load(f"{tmp}/single/matrix.npy"), np.load(f"{tmp}/ray/matrix.npy")
            assert a.shape == (n_docs, a.shape[1]) and np.array_equal(a, b), "Ray Data vectors differ"
        single.append(one["wall_s"])
        spread.append(many["wall_s"])
        startup.append(many["startup_s"])
        ratios.append(many["wall_s"] / one["wall_s"])
    s, r = statistics.median(single), statistics.median(spread)
    return {"docs": n_docs, "chunk": chunk, "repeat": repeat, "ray_actors": many["actors"],
            "cpus_per_actor": many["cpus_per_actor"], "single_s": round(s, 2), "ray_s": round(r, 2),
            "single_docs_per_s": round(n_docs / s, 1), "ray_docs_per_s": round(n_docs / r, 1),
            "ratio": round(statistics.median(ratios), 3), "ray_startup_s": round(statistics.median(startup), 2),
            "vectors_identical": True, "single_runs_s": [round(x, 2) for x in single],
            "ray_runs_s": [round(x, 2) for x in spread]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=20000)
    parser.add_argument("--sizes", default="", help="comma-separated document counts (overrides --docs)")
    parser.add_argument("--chunk", type=int, default=1000, help="cache chunk size (one Ray Data row each)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--quick", action="store_true", help="1,000 documents in chunks of 250 (< 2 minutes)")
    parser.add_argument("--child", choices=("single", "ray"), help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.docs, args.chunk, args.cpus, args.folder)))
        return 0
    sizes = [1000] if args.quick else [int(n) for n in args.sizes.split(",") if n] or [args.docs]
    chunk = 250 if args.quick else args.chunk
    ratios = {}
    for n_docs in sizes:
        result = measure(n_docs, chunk, args.cpus, 1 if args.quick else args.repeat)
        print("encode", result, flush=True)
        ratios[f"ray / one process, {n_docs} docs"] = result["ratio"]
    return check_targets(ratios, dict.fromkeys(ratios, "<= 1.15"))


if __name__ == "__main__":
    sys.exit(main())
