"""Judgment cache and local judge speed.

1. Cache: ``--stored`` judgments (default 50,000) of synthetic ~100-word passages are written
   one transaction each (as a judging run writes them), then read back through
   :class:`CachedJudge` in batches of 1,000 requests (rendering + hashing each request, one
   batched SQLite lookup, no backend call) and through :meth:`JudgmentCache.lookup` with
   precomputed keys. Target: >= 10,000 lookups/s (wall) through CachedJudge (exit status 1 if missed).
2. Warm rerun: BM25 runs (instructed and query-only templates) on the bundled samples
   ``ifir-sample/fiqa`` and ``ifir-sample/nfcorpus``, InstFol judged twice through one cache
   with the lexical baseline; the second pass must send nothing to the backend.
3. Local backends: judgments/s of the lexical and embedding baselines and of the in-process
   Hugging Face backend on the bundled SmolLM2-135M-Instruct GGUF (load time shown apart), on
   the first ``--pairs`` (instance, passage) requests of the sample's InstFol lists.

    .venv/bin/python -m perf.judge_cache [--stored 50000] [--pairs 32] [--skip-hf]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from instir.benchmarks import load_benchmark
from instir.judge import BaselineJudge, CachedJudge, HFCausalLMJudge, JudgmentCache, rubric_for
from instir.judge.cache import request_key
from instir.judge.following import instfol
from instir.judge.types import JudgeRequest, Judgment
from instir.retrieval import retrieve
from instir.retrieval.lexical import BM25Retriever
from perf.common import check_targets

SAMPLES = ("ifir-sample/fiqa", "ifir-sample/nfcorpus")
BATCH = 1_000


class InstantJudge:
    """A backend that answers at once (score 2), so the cache alone is timed."""

    name = "instant"
    model = "constant-2"

    def judge(self, requests: Sequence[JudgeRequest], on_result=None) -> list[Judgment]:
        out = [Judgment(score=2, weighted=2.0, probs={"2": 1.0}, weighting="parsed", raw='{"score": 2}')
               for _ in requests]
        for i, j in enumerate(out):
            if on_result is not None:
                on_result(i, j)
        return out


@contextmanager
def timed() -> Iterator[dict]:
    """Wall-clock and process CPU seconds of the block (CPU time is what the work costs; wall
    time also counts waiting for cores that other processes hold)."""
    out = {}
    wall, cpu = time.perf_counter(), time.process_time()
    yield out
    out["wall"], out["cpu"] = time.perf_counter() - wall, time.process_time() - cpu


def synthetic_requests(n: int, seed: int = 0) -> list[JudgeRequest]:
    """``n`` distinct requests with ~100-word passages drawn from a small vocabulary."""
    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i}" for i in range(5_000)])
    rubric = rubric_for("fiqa", 3)
    return [JudgeRequest("how should I save for retirement?", "I am 30, rent, and want to retire at 55.",
                           f"passage {i}: " + " ".join(rng.choice(vocab, 100)), rubric) for i in range(n)]


def cache_speed(n: int, folder: Path) -> dict:
    """Write ``n`` judgments, then time batched lookups two ways."""
    requests = synthetic_requests(n)
    path = folder / "speed.sqlite"
    judge = CachedJudge(InstantJudge(), path)
    with timed() as fill:
        judge.judge(requests)
    assert judge.stats.judged == n

    reader = CachedJudge(InstantJudge(), JudgmentCache(path))
    with timed() as via_judge:
        for b in range(0, n, BATCH):
            reader.judge(requests[b:b + BATCH])
    assert reader.stats.hits == n and reader.stats.judged == 0

    keys = [request_key(r) for r in requests]
    found = 0
    with timed() as via_keys:
        for b in range(0, n, BATCH):
            found += len(reader.cache.lookup(InstantJudge.name, InstantJudge.model, keys[b:b + BATCH]))
    assert found == n
    return {"stored": n, "file_mb": path.stat().st_size / 2**20,
            "rows": [("write (one transaction per judgment)", n, fill),
                     ("CachedJudge.judge, all hits (render + hash + lookup)", n, via_judge),
                     ("JudgmentCache.lookup, precomputed keys", n, via_keys)]}


class CountingJudge:
    """Wraps a backend and counts the requests it is asked to judge."""

    def __init__(self, backend):
        self.backend, self.name, self.model, self.calls = backend, backend.name, backend.model, 0

    def judge(self, requests, on_result=None):
        self.calls += len(requests)
        return self.backend.judge(requests, on_result=on_result)


def sample_runs(folder: Path):
    """(benchmark, instructed run, query-only run) for every bundled IFIR sample subset."""
    retriever = BM25Retriever(show_progress=False)
    out = []
    for name in SAMPLES:
        benchmark = load_benchmark(name)
        out.append((benchmark, retrieve(benchmark, retriever, k=20, out_dir=folder),
                    retrieve(benchmark, retriever, template="query-only", k=20, out_dir=folder)))
    return out


def warm_rerun(runs, folder: Path) -> list[dict]:
    """Cold and warm InstFol passes over the samples through one cache; backend calls counted."""
    backend = CountingJudge(BaselineJudge("lexical", progress=False))
    judge = CachedJudge(backend, folder / "warm.sqlite")
    rows = []
    for attempt in ("cold", "warm"):
        before = backend.calls
        with timed() as took:
            results = [instfol(inst, q, b, judge) for b, inst, q in runs]
        rows.append({"pass": attempt, "seconds": took["wall"],
                     "requests": sum(r.meta["requests"] for r in results),
                     "backend_calls": backend.calls - before,
                     "instfol": [round(float(r.summary().iloc[-1]["instfol"]), 6) for r in results]})
    assert rows[1]["backend_calls"] == 0 and rows[0]["instfol"] == rows[1]["instfol"]
    return rows


def pair_requests(runs, n: int) -> list[JudgeRequest]:
    """The first ``n`` distinct (instance, passage) requests of the samples' instructed lists."""
    out: dict[JudgeRequest, None] = {}
    for benchmark, inst, _ in runs:
        docs = {d.id: d for d in benchmark.corpus}
        for qid, docid in zip(inst.df["qid"], inst.df["docid"]):
            q = benchmark.queries[qid]
            out[JudgeRequest(q.query, q.instruction, docs[docid].indexed_text, rubric_for(q.subset, q.level))] = None
            if len(out) == n:
                return list(out)
    return list(out)


def backend_speed(requests: list[JudgeRequest], skip_hf: bool) -> list[dict]:
    """Judgments/s of each local backend (a warm-up batch first; model load timed apart)."""
    backends = [("baseline lexical", BaselineJudge("lexical", progress=False)),
                ("baseline embedding (all-MiniLM-L6-v2)", BaselineJudge("embedding", progress=False))]
    if not skip_hf:
        backends += [(f"hf SmolLM2-135M GGUF, batch {bs}", HFCausalLMJudge(batch_size=bs, progress=False))
                     for bs in (1, 8)]
    rows = []
    for label, backend in backends:
        with timed() as warm:
            backend.judge(requests[:2])
        with timed() as took:
            judged = backend.judge(requests)
        rows.append({"backend": label, "load_and_first_2_s": warm["wall"], "took": took,
                     "failed": sum(not j.ok for j in judged)})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stored", type=int, default=50_000, help="judgments in the cache (default 50,000)")
    parser.add_argument("--pairs", type=int, default=32, help="requests per local backend (default 32)")
    parser.add_argument("--skip-hf", action="store_true", help="leave out the in-process SmolLM2 backend")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        speed = cache_speed(args.stored, folder)
        print(f"cache: {speed['stored']:,} stored judgments, file {speed['file_mb']:.1f} MB")
        print(f"{'operation':<54}{'per wall s':>12}{'per CPU s':>12}")
        for label, n, took in speed["rows"]:
            print(f"{label:<54}{n / took['wall']:>12,.0f}{n / took['cpu']:>12,.0f}")
        _, n, took = speed["rows"][1]
        status = check_targets({"CachedJudge lookups (wall)": n / took["wall"]},
                               {"CachedJudge lookups (wall)": ">= 10,000 per s"})
        print()

        runs = sample_runs(folder)
        print(f"InstFol@20 on {', '.join(SAMPLES)} (BM25 instructed vs query-only), lexical baseline judge")
        print(f"{'pass':<6}{'seconds':>9}{'requests':>10}{'backend calls':>15}  InstFol per subset")
        for row in warm_rerun(runs, folder):
            print(f"{row['pass']:<6}{row['seconds']:>9.2f}{row['requests']:>10}{row['backend_calls']:>15}"
                  f"  {row['instfol']}")
        print()

        requests = pair_requests(runs, args.pairs)
        print(f"local backends on {len(requests)} sample requests (this machine)")
        print(f"{'backend':<40}{'load+2 s':>10}{'wall s':>8}{'CPU s':>8}{'per wall s':>12}{'per CPU s':>11}"
              f"{'failed':>8}")
        for row in backend_speed(requests, args.skip_hf):
            took = row["took"]
            print(f"{row['backend']:<40}{row['load_and_first_2_s']:>10.2f}{took['wall']:>8.2f}{took['cpu']:>8.2f}"
                  f"{len(requests) / took['wall']:>12.1f}{len(requests) / took['cpu']:>11.1f}{row['failed']:>8}")
    return status


if __name__ == "__main__":
    sys.exit(main())
