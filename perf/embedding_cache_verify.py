"""Cost of the embedding cache's integrity checks (median of ``--repeats`` runs each).

1. A cache hit on a ``--rows`` × ``--dim`` float32 matrix (default 20,000 × 384, 29 MiB, a
   MiniLM-sized corpus): with the full SHA-256 check (``embeddings.npy`` up to
   ``instir.verified_store.FULL_HASH_BYTES``) and with the size + header check only (what larger matrices get).
   The file is in the page cache, as on a warm rerun.
2. Writing and verifying one chunk of ``--chunk`` rows (default 4,096): ``write_part``
   (hash + two atomic writes) and ``part_ok`` (read + hash + header) against ``np.save``.

    .venv/bin/python -m perf.embedding_cache_verify [--rows 20000] [--dim 384]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from instir import verified_store
from instir.retrieval.embedding_cache import EmbeddingCache
from instir.verified_store import part_ok, write_part


def median_s(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--chunk", type=int, default=4_096)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((args.rows, args.dim), dtype=np.float32)
    items = [str(i) for i in range(args.rows)]

    def encode(batch: list[str]) -> np.ndarray:
        return matrix[int(batch[0]):int(batch[0]) + len(batch)]

    with tempfile.TemporaryDirectory() as tmp:
        cache = EmbeddingCache(tmp, chunk_size=args.chunk, progress=False)
        encoder = {"model": "bench"}
        cache.embed(encoder, items, encode, label="bench")
        mib = args.rows * args.dim * 4 / 2**20
        full = median_s(lambda: cache.embed(encoder, items, encode, label="bench"), args.repeats)
        saved = verified_store.FULL_HASH_BYTES
        verified_store.FULL_HASH_BYTES = 0
        try:
            cheap = median_s(lambda: cache.embed(encoder, items, encode, label="bench"), args.repeats)
        finally:
            verified_store.FULL_HASH_BYTES = saved
        key = cache.key(encoder, items)
        entry = cache.entry_dir("bench", key)
        key_only = median_s(lambda: cache.key(encoder, items), args.repeats)
        verify_only = median_s(lambda: cache.verified_matrix(entry, key), args.repeats)
        print(f"cache hit, {args.rows} x {args.dim} ({mib:.1f} MiB): {full * 1e3:.1f} ms with the full SHA-256, "
              f"{cheap * 1e3:.1f} ms with size + header only (the key alone: {key_only * 1e3:.1f} ms; "
              f"verification alone: {verify_only * 1e3:.1f} ms)")

        chunk = matrix[:args.chunk]
        path = Path(tmp) / "chunk.npy"
        plain = median_s(lambda: np.save(path, chunk), args.repeats)
        write = median_s(lambda: write_part(path, chunk), args.repeats)
        check = median_s(lambda: part_ok(path, args.chunk), args.repeats)
        print(f"one chunk of {args.chunk} x {args.dim}: np.save {plain * 1e3:.1f} ms, "
              f"write_part {write * 1e3:.1f} ms, "
              f"part_ok {check * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
