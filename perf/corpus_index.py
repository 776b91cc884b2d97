"""Corpus index speed: what a cached index saves a stage that loads a large benchmark.

Generates an IFIR subset in the ``songtingyu`` layout (``cds/test_data.json`` with 43 queries
and ``cds/cds-corpus.jsonl`` of ``--docs`` documents of ~1,600 characters of made-up words,
a few of them non-ASCII (``json.dumps`` writes those as escapes); IFIR's ``cds`` has 633,955)
and reports, as medians of ``--repeat`` runs, beside a plain streaming parse of the same file
(``iter_corpus_docs``, which every load paid before the index):

- ``cold build``: :func:`~instir.benchmarks.docstore.load_index` into an empty cache folder
  (one streaming pass + writing the entry);
- ``cold load_benchmark``: ``load_benchmark("ifir/cds", root=…)`` plus ids, content hash and
  word counts, in a fresh process with an empty cache (the first process ever);
- ``warm load_benchmark``: the same in a fresh process with the cache filled (every later
  process); the process's whole wall time (interpreter start and imports included) is shown too;
- ``get(40)``: ``corpus.get`` of 40 random ids on a loaded corpus.

The generated corpus file is dated an hour back: the index is not cached for a file modified
moments before the build (:data:`~instir.benchmarks.docstore.FRESH_NS`).

    python -m perf.corpus_index [--docs 100000] [--repeat 3] [--keep DIR]
    python -m perf.corpus_index --docs 633955     # IFIR cds scale (~1 GB of corpus)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from perf.common import run_child

SUBSET = "cds"
QUERIES = 43
TEXT_CHARS = 1_600
GET_IDS = 40


def generate(folder: Path, docs: int, seed: int = 0) -> Path:
    """``folder/cds/`` in the songtingyu layout: a corpus of ``docs`` documents and a
    ``test_data.json`` whose queries judge a few of them. Returns the corpus file."""
    rng = random.Random(seed)
    vocabulary = [f"{rng.choice('bcdfghklmnprst')}{rng.choice('aeiou')}{rng.choice('nrstl')}{i}" for i in range(5_000)]
    vocabulary += ["β-blocker", "café-au-lait", "Sjögren's", "≥5", "mg/m²", "(n=12),", "patient's", "–"] * 25
    subset = folder / SUBSET
    subset.mkdir(parents=True, exist_ok=True)
    corpus = subset / f"{SUBSET}-corpus.jsonl"
    with corpus.open("w", encoding="utf-8") as fh:
        for i in range(docs):
            words, size = [], 0
            while size < TEXT_CHARS:
                word = rng.choice(vocabulary)
                words.append(word)
                size += len(word) + 1
            title = f"Case report {i}" if i % 2 else ""
            fh.write(json.dumps({"_id": f"{i}", "title": title, "text": " ".join(words)}) + "\n")
    back = time.time_ns() - 3600 * 10**9
    os.utime(corpus, ns=(back, back))
    data = []
    for q in range(QUERIES):
        candidates = [{"_id": str(rng.randrange(docs))} for _ in range(5)]
        data.append({"_id": f"q{q}", "text": f"patient case {q}", "corpus": candidates,
                     "instructions": [{"level": 0, "instruction": "Prefer adult patients.", "rel": [0, 1]}]})
    (subset / "test_data.json").write_text(json.dumps(data), encoding="utf-8")
    return corpus


def child(root: str) -> dict:
    """One ``load_benchmark`` in this (fresh) process: load + ids + content hash + word counts."""
    start = time.perf_counter()
    from instir.benchmarks import load_benchmark

    imported = time.perf_counter()
    bench = load_benchmark(f"ifir/{SUBSET}", root=root)
    corpus = bench.corpus
    out = {"documents": len(corpus.ids()), "hash": corpus.content_hash(), "words": int(corpus.word_counts().sum())}
    done = time.perf_counter()
    return {**out, "load_s": done - imported, "import_s": imported - start}


def _spawn(root: Path, home: Path) -> dict:
    start = time.perf_counter()
    out = run_child("perf.corpus_index", ["--child", str(root)], INSTIR_HOME=str(home))
    out["process_s"] = time.perf_counter() - start
    return out


def _fmt(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} s ({', '.join(f'{v:.3f}' for v in values)})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--keep", help="generate into (or reuse) this folder instead of a temporary one")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return

    from instir.benchmarks.docstore import IndexedCorpus, load_index
    from instir.benchmarks.readers import iter_corpus_docs

    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="perf-corpus-index-"))
    try:
        corpus_path = work / SUBSET / f"{SUBSET}-corpus.jsonl"
        t = time.perf_counter()
        if not corpus_path.is_file():
            generate(work, args.docs)
        print(f"corpus: {args.docs:,} documents, {corpus_path.stat().st_size / 1e6:,.0f} MB "
              f"({time.perf_counter() - t:.1f} s to generate or find)", flush=True)

        stream, build, cold, warm, warm_process, gets = [], [], [], [], [], []
        for r in range(args.repeat):
            t = time.perf_counter()
            n = sum(1 for _ in iter_corpus_docs(corpus_path, skip_empty=True))
            stream.append(time.perf_counter() - t)
            cache = work / f"cache-{r}"
            shutil.rmtree(cache, ignore_errors=True)
            t = time.perf_counter()
            index = load_index([corpus_path], skip_empty=True, cache_dir=cache)
            build.append(time.perf_counter() - t)
            if len(index) != n:
                sys.exit(f"index holds {len(index)} documents, the stream {n}")
            home = work / f"home-{r}"
            shutil.rmtree(home, ignore_errors=True)
            first = _spawn(work, home)
            second = _spawn(work, home)
            if (first["documents"], first["hash"]) != (second["documents"], second["hash"]) or first["documents"] != n:
                sys.exit(f"cold and warm loads disagree: {first} / {second}")
            cold.append(first["load_s"])
            warm.append(second["load_s"])
            warm_process.append(second["process_s"])
            corpus = IndexedCorpus([corpus_path], skip_empty=True, cache_dir=cache)
            ids = random.Random(r).sample(corpus.ids(), GET_IDS)
            t = time.perf_counter()
            got = corpus.get(ids)
            gets.append(time.perf_counter() - t)
            if len(got) != GET_IDS:
                sys.exit(f"get returned {len(got)} of {GET_IDS} documents")
            print(f"repetition {r + 1}/{args.repeat} done", flush=True)

        print(f"medians of {args.repeat}:")
        print(f"  plain streaming parse (iter_corpus_docs):       {_fmt(stream)}")
        print(f"  cold index build (load_index, empty cache):     {_fmt(build)}")
        print(f"  cold load_benchmark, fresh process, no cache:   {_fmt(cold)}")
        print(f"  warm load_benchmark, fresh process, cached:     {_fmt(warm)}; whole process {_fmt(warm_process)}")
        print(f"  get({GET_IDS} random ids) on a loaded corpus:     {_fmt(gets)}")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
