"""What Ray costs (issue 13): medians of ``--repeat`` runs on this machine's cores.

- ``sweep``: the sample grid (instructir-sample + ifir-sample/fiqa × bm25 + bundled MiniLM ×
  instructed + query-only) with ``executor="serial"`` against a local Ray (``--cpus``) into
  fresh folders (fresh embedding cache each time, so both sides compute everything). Ray's
  start-up is timed apart from the sweep itself. Target: Ray ≤ 20 % over the serial loop.
- ``encode``: ``--docs`` generated documents (about 64 words each) with the bundled MiniLM:
  one process (``DenseRetriever.embed_corpus``, torch on all ``--cpus`` threads) against
  Ray Data (``encode_corpus``, ``--cpus`` actors of one torch thread each), same chunk size.
  Target: Ray ≤ 15 % over one process.
- ``tasks``: the scheduling cost of one small Ray task (submit + run + get of a no-op, in
  batches of 1,000) and of one actor call.

    python -m perf.ray_overhead [--parts sweep,encode,tasks] [--docs 20000] [--repeat 3] [--cpus 2]

Measured 2026-11-30 on the shared 2-core helper machine (load average 11-16 from other jobs),
medians of 3: tasks 0.65 ms per no-op task, 0.34 ms per actor call; sweep serial 40.3 s,
Ray 58.5 s (+45 %, Ray start-up 26.1 s on top). The encode part did not finish in the time
available there (one Ray Data run of 2,000 documents took 491 s under that load); run it on a
quiet machine.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import tempfile
import time

from instir.distributed.sweep import start_with_retries


def _median(values: list[float]) -> float:
    return statistics.median(values)


def bench_sweep(repeat: int, cpus: int) -> dict:
    import ray

    from instir.distributed.grid import parse_grid
    from instir.distributed.sweep import run_sweep

    grid = {"benchmarks": ["instructir-sample", "ifir-sample/fiqa"], "systems": ["bm25", "dense"]}
    serial, spread, startup = [], [], []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["INSTIR_HOME"] = f"{tmp}/home-serial"
            start = time.perf_counter()
            run_sweep(parse_grid(grid), f"{tmp}/serial", executor="serial")
            serial.append(time.perf_counter() - start)
            os.environ["INSTIR_HOME"] = f"{tmp}/home-ray"
            start = time.perf_counter()
            start_with_retries(lambda: ray.init(
                num_cpus=cpus, include_dashboard=False, log_to_driver=False,
                runtime_env={"env_vars": {"INSTIR_HOME": f"{tmp}/home-ray", "INSTIR_PROGRESS": "0"}}))
            startup.append(time.perf_counter() - start)
            start = time.perf_counter()
            run_sweep(parse_grid(grid), f"{tmp}/ray")
            spread.append(time.perf_counter() - start)
            ray.shutdown()
    s, r = _median(serial), _median(spread)
    return {"serial_s": s, "ray_s": r, "ray_startup_s": _median(startup), "overhead": r / s - 1}


def _corpus(n: int):
    import numpy as np

    from instir.benchmarks.types import Corpus, Doc

    rng = np.random.default_rng(0)
    words = [f"term{i}" for i in range(5000)]
    return Corpus.from_docs(Doc(f"d{i}", " ".join(rng.choice(words, 64)), "") for i in range(n))


def _ray_encoder(cache_dir: str, chunk: int):
    import torch

    from instir.retrieval.dense import DenseRetriever

    torch.set_num_threads(1)
    return DenseRetriever(None, cache_dir=cache_dir, chunk_size=chunk, progress=False)


def bench_encode(n_docs: int, repeat: int, cpus: int, chunk: int) -> dict:
    import ray
    import torch

    from instir.distributed.encode import encode_corpus
    from instir.formatting import get_template
    from instir.retrieval.dense import DenseRetriever

    corpus, template = _corpus(n_docs), get_template("query-only")
    torch.set_num_threads(cpus)
    single, spread = [], []
    start_with_retries(lambda: ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False,
                                        runtime_env={"env_vars": {"INSTIR_PROGRESS": "0", "OMP_NUM_THREADS": "1"}}))
    try:
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as tmp:
                retriever = DenseRetriever(None, cache_dir=f"{tmp}/one", chunk_size=chunk, progress=False)
                retriever.model  # loaded before timing, as each actor loads its own before its first chunk
                start = time.perf_counter()
                retriever.embed_corpus(corpus, template)
                single.append(time.perf_counter() - start)
                start = time.perf_counter()
                encode_corpus(functools.partial(_ray_encoder, f"{tmp}/ray", chunk), corpus, template, actors=cpus)
                spread.append(time.perf_counter() - start)
    finally:
        ray.shutdown()
    s, r = _median(single), _median(spread)
    return {"docs": n_docs, "single_s": s, "ray_s": r, "overhead": r / s - 1,
            "single_ms_per_doc": 1000 * s / n_docs, "ray_ms_per_doc": 1000 * r / n_docs}


def bench_tasks(repeat: int, cpus: int, n: int = 1000) -> dict:
    import ray

    start_with_retries(lambda: ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=False))
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", default="sweep,encode,tasks")
    parser.add_argument("--docs", type=int, default=20000)
    parser.add_argument("--chunk", type=int, default=1024, help="cache chunk size (one Ray task per chunk)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--cpus", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    os.environ.setdefault("INSTIR_PROGRESS", "0")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    parts = args.parts.split(",")
    if "tasks" in parts:
        print("tasks ", bench_tasks(args.repeat, args.cpus), flush=True)
    if "sweep" in parts:
        print("sweep ", bench_sweep(args.repeat, args.cpus), flush=True)
    if "encode" in parts:
        print("encode", bench_encode(args.docs, args.repeat, args.cpus, args.chunk), flush=True)


if __name__ == "__main__":
    main()
