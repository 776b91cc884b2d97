"""BM25 index cache: building (former list-of-texts build vs the streamed build), storing and a
verified memory-mapped load, at about a sixth of IFIR-cds (100,000 generated documents of ~1,600
characters; cds has 633,955 documents, ~1 GB).

The corpus: words drawn from a Zipf-like vocabulary (exponent 1.05) of random lower-case words,
some with ``s``/``ing``/``ed`` forms (so stemming merges them), Lucene's English stop words among
the most frequent ones, and some punctuation. The queries: a few words taken from every 500th
document, plus a stop-word-only and an empty query.

Each measurement runs in a fresh process (peak RSS is per process):
- ``former``: the build ``BM25Retriever.index`` did before the cache (every formatted text in a
  list, ``bm25s.tokenize``, ``model.index``), then the kit's search on it;
- ``build``: ``BM25Retriever.index`` on an empty cache: the corpus tokenised as a stream and spilled
  as (document, term, count) triples, then the store (the index written from them in bm25s's files,
  ``instir.retrieval.bm25_build.write_index``, into a temporary folder, fsync, SHA-256 manifest, rename);
- ``load``: a fresh retriever on the stored entry (manifest, sizes, headers and SHA-256 checks,
  ``bm25s.BM25.load(mmap=True)``, the document ids).
Each part hashes the corpus first (``content_hash()``, which ``run_key`` pays in every
:func:`~instir.retrieval.retrieve` anyway), outside its timed span. Every part's run (TREC rows and
float32 scores) and raw bm25s top-k (``k`` = 100, ties included) must be identical.

    python -m perf.bm25_cache [--docs 100000] [--chars 1600] [--repeats 3] [--settings instructir,ifir]

CPU seconds (same span, one thread) are steadier than wall seconds on a shared machine.

Measured (2 shared CPU cores, medians of 3; index s = build + store for ``build``):

    settings          docs     former s / peak MB   build s / peak MB   store s   load s / peak MB   entry MiB
    instructir (porter) 100k   13.19 / 941          12.94 + 0.14 / 695  0.14      0.09 / 142         107
    ifir (plain)      100k     13.64 / 1100         13.37 + 0.19 / 823  0.19      0.10 / 145         130
    ifir (plain)      633,955  92.9 / 6259          93.7 + 1.0 / 4498   1.0       0.50 / 230         815   (1 run)

Runs and raw top-k were identical in every part (ties included). The streamed build holds no
list of texts (~1 GB at cds size) and keeps token ids as 32-bit arrays (half a list's pointers);
its tokenising is a little faster and bm25s's indexing of arrays a little slower than of lists,
so time is at parity without stemming and ~2-4 % lower with it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from perf.common import run_child

K = 100
SETTINGS = {"instructir": dict(k1=0.9, b=0.4, stemmer="porter", stopwords="lucene"),
            "ifir": dict(k1=1.2, b=0.75, stemmer="none", stopwords="none")}


def generate(out: Path, n_docs: int, chars: int, seed: int = 0) -> None:
    """Write ``out/corpus.jsonl`` and ``out/queries.json``."""
    import numpy as np

    from instir.retrieval.lexical import LUCENE_ENGLISH_STOPWORDS

    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    stems = ["".join(rng.choice(letters, size=n)) for n in rng.integers(2, 11, size=50_000)]
    words = list(LUCENE_ENGLISH_STOPWORDS)
    for stem in stems:
        words.append(stem)
        if rng.random() < 0.2:
            words.extend(stem + suffix for suffix in ("s", "ing", "ed"))
    vocab = np.array(words)
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** 1.05
    weights /= weights.sum()
    punct = np.array([""] * 12 + [",", ".", ";", ":", "'s", ")"])
    mean_words = chars / 6.25
    queries = []
    with (out / "corpus.jsonl").open("w") as fh:
        for i in range(n_docs):
            n = int(rng.integers(int(mean_words * 0.5), int(mean_words * 1.5)))
            picked = vocab[rng.choice(len(vocab), size=n, p=weights)]
            text = " ".join(np.char.add(picked, punct[rng.integers(0, len(punct), size=n)]))
            fh.write(json.dumps({"_id": f"doc{i}", "title": "", "text": text}) + "\n")
            if i % 500 == 0:
                queries.append(" ".join(rng.choice(picked, size=int(rng.integers(1, 12)))))
    queries += ["the of and", ""]
    (out / "queries.json").write_text(json.dumps(queries))


def benchmark(root: Path):
    from instir.benchmarks.docstore import jsonl_corpus
    from instir.benchmarks.types import Benchmark, Query

    texts = json.loads((root / "queries.json").read_text())
    queries = {f"q{i}": Query(f"q{i}", text) for i, text in enumerate(texts)}
    return Benchmark("bm25-cache-perf", "generated", "local", "instructed", jsonl_corpus(root / "corpus.jsonl"),
                     queries, {q: {} for q in queries})


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def digest_run(run) -> str:
    """SHA-256 over a run's rows (qid, docid, rank) and its float32 scores' bytes."""
    import numpy as np

    h = hashlib.sha256()
    for column in ("qid", "docid", "rank"):
        h.update("\x1f".join(map(str, run.df[column].tolist())).encode())
    h.update(np.asarray(run.df["score"], dtype=np.float32).tobytes())
    return h.hexdigest()


def digest_topk(model, bench, template, stopwords, stemmer) -> tuple[str, int]:
    """SHA-256 of bm25s's raw top-k (indices and scores) for every query, and the number of tied
    neighbours in it (the comparison covers tie order)."""
    import bm25s
    import numpy as np

    texts = [template.format_query(q) for q in bench.queries.values()]
    tokens = bm25s.tokenize(texts, stopwords=stopwords, stemmer=stemmer, return_ids=False, show_progress=False)
    top, scores = model.retrieve(tokens, k=K, show_progress=False)
    h = hashlib.sha256(np.ascontiguousarray(top).tobytes())
    h.update(np.ascontiguousarray(scores).tobytes())
    ties = int(((scores[:, 1:] == scores[:, :-1]) & (scores[:, 1:] > 0)).sum())
    return h.hexdigest(), ties


def part(name: str, root: Path, cache: Path, setting: str) -> dict:
    import bm25s
    import numpy as np
    import Stemmer

    from instir.formatting import get_template
    from instir.retrieval.lexical import LUCENE_ENGLISH_STOPWORDS, BM25Index, BM25Retriever

    bench = benchmark(root)
    template = get_template("query-only")
    settings = SETTINGS[setting]
    start = time.perf_counter()
    bench.corpus.content_hash()
    hash_s = time.perf_counter() - start
    rss_before = peak_rss_mb()
    stemmer = Stemmer.Stemmer("porter") if settings["stemmer"] == "porter" else None
    stopwords = list(LUCENE_ENGLISH_STOPWORDS) if settings["stopwords"] == "lucene" else []
    start, cpu = time.perf_counter(), time.process_time()
    out: dict = {}
    if name == "former":  # BM25Retriever.index before the cache, line for line
        doc_ids, texts = [], []
        for doc in bench.corpus:
            doc_ids.append(doc.id)
            texts.append(template.format_doc(doc, ""))
        model = bm25s.BM25(k1=settings["k1"], b=settings["b"], method="lucene")
        model.index(bm25s.tokenize(texts, stopwords=stopwords, stemmer=stemmer, show_progress=False),
                    show_progress=False)
        del texts
        index = BM25Index(model, np.asarray(doc_ids, dtype=object), stemmer, stopwords,
                          {"name": "bm25", "params": settings}, 0, False)
    else:
        index = BM25Retriever(**settings, cache_dir=cache, show_progress=False).index(bench, template)
        out = {"source": index.source}
        if name == "build":
            assert index.source["origin"] == "built", index.source
            out["entry_mb"] = sum(p.stat().st_size for p in Path(index.source["cache_entry"]).iterdir()) / 2**20
        else:
            assert index.source["origin"] == "loaded", index.source
    index_s, index_cpu_s = time.perf_counter() - start, time.process_time() - cpu
    rss_index = peak_rss_mb()
    start = time.perf_counter()
    run = index.search(bench.queries.values(), template, K)
    search_s = time.perf_counter() - start
    topk, ties = digest_topk(index.model, bench, template, stopwords, stemmer)
    out.update({"part": name, "hash_s": hash_s, "index_s": index_s, "index_cpu_s": index_cpu_s, "search_s": search_s,
                "rows": len(run), "run": digest_run(run), "topk": topk, "ties": ties, "rss_before_mb": rss_before,
                "peak_rss_mb": rss_index, "peak_rss_after_search_mb": peak_rss_mb()})
    if name == "load":
        from instir import atomic

        entry = Path(index.source["cache_entry"])
        start = time.perf_counter()
        for path in entry.iterdir():
            atomic.file_sha256(path)
        out["sha256_all_files_s"] = time.perf_counter() - start
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=100_000)
    parser.add_argument("--chars", type=int, default=1600)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--settings", default="instructir,ifir", help="comma-separated: instructir, ifir")
    parser.add_argument("--part", choices=("former", "build", "load"), help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    parser.add_argument("--cache", help=argparse.SUPPRESS)
    parser.add_argument("--setting", default="instructir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part:
        print(json.dumps(part(args.part, Path(args.root), Path(args.cache), args.setting)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        start = time.perf_counter()
        generate(root, args.docs, args.chars)
        size = (root / "corpus.jsonl").stat().st_size
        print(f"generated {args.docs:,} documents ({size / 2**20:.0f} MiB JSONL, "
              f"{size / args.docs:.0f} bytes/doc) in {time.perf_counter() - start:.0f} s", file=sys.stderr)
        for setting in args.settings.split(","):
            results: dict[str, list[dict]] = {"former": [], "build": [], "load": []}
            for i in range(args.repeats):
                cache = root / f"cache-{setting}-{i}"
                for name in ("former", "build", "load"):
                    results[name].append(run_child("perf.bm25_cache", ["--part", name, "--root", str(root),
                                                                        "--cache", str(cache), "--setting", setting]))
                    last = results[name][-1]
                    print(f"{setting} repeat {i + 1}: {name} {last['index_s']:.2f} s ({last['index_cpu_s']:.2f} s CPU)",
                          file=sys.stderr)
            report(setting, args, results)


def report(setting: str, args, results: dict[str, list[dict]]) -> None:
    def med(name: str, field: str) -> float:
        return statistics.median(r[field] for r in results[name])

    every = [r for rs in results.values() for r in rs]
    same_run = len({r["run"] for r in every}) == 1
    same_topk = len({r["topk"] for r in every}) == 1
    built = results["build"]
    print(f"\n{setting} settings ({SETTINGS[setting]}), {args.docs:,} docs, k={K}, "
          f"{len(results['former'][0]) and results['former'][0]['rows']:,} run rows, "
          f"{results['former'][0]['ties']} tied neighbours in the top-k; medians of {args.repeats}")
    print(f"{'part':<8}{'index s':>9}{'index CPU s':>13}{'search s':>10}{'peak RSS MB':>13}{'RSS before MB':>15}")
    for name in ("former", "build", "load"):
        print(f"{name:<8}{med(name, 'index_s'):>9.2f}{med(name, 'index_cpu_s'):>13.2f}{med(name, 'search_s'):>10.2f}"
              f"{med(name, 'peak_rss_mb'):>13.0f}{med(name, 'rss_before_mb'):>15.0f}")
    print(f"build = streamed build {statistics.median(r['source']['seconds'] for r in built):.2f} s, of which the "
          f"store (index written into the entry) {statistics.median(r['source']['store_seconds'] for r in built):.2f}"
          f" s; entry "
          f"{built[0]['entry_mb']:.0f} MiB; verified load {med('load', 'index_s'):.2f} s (of which the SHA-256 of "
          f"every file alone: {med('load', 'sha256_all_files_s'):.2f} s); corpus content_hash "
          f"{med('former', 'hash_s'):.2f} s (paid by run_key in every retrieve)")
    print(f"identical runs (rows + float32 scores) in every part: {same_run}; identical raw bm25s top-{K} "
          f"(indices + scores, ties in order): {same_topk}")
    if not (same_run and same_topk):
        sys.exit("the parts disagree")


if __name__ == "__main__":
    main()
