"""BM25 at InstructIR scale: the real 9,906 instructed queries against a generated
16,072-document corpus (the real corpus is only on Hugging Face).

The corpus holds the 9,906 relevant document ids of the real qrels plus 6,166 distractors.
Each document has about 64 words: a relevant document borrows words from its own
instruction and query, a distractor from the instructions of a random query group, and
both are filled with words drawn from the pooled instruction vocabulary, so BM25 has to
tell sibling instructions apart.

Compared, each in its own process (so peak RSS is per system):
- ``instir``: the kit's BM25Retriever (index, then the batched search to a Run);
- ``bm25s``: plain bm25s on the same texts and settings (the kit's overhead);
- ``rank_bm25``: BM25Okapi on the same tokens, searched for a few hundred queries and
  extrapolated to all 9,906 (said in the table).

    python -m perf.bm25_scale [--data DIR] [--rank-bm25-queries 200]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perf.common import instructir_data

N_DOCS = 16_072
WORDS_PER_DOC = 64
REPO = Path(__file__).resolve().parent.parent


def generate_corpus(data: Path, out: Path, seed: int = 0) -> None:
    """Write ``out/corpus.jsonl`` and link the real query/qrels files beside it."""
    import numpy as np

    from instir.benchmarks.readers import read_qrels, read_records

    rng = np.random.default_rng(seed)
    instances = {rec["_id"]: (rec["text"], rec["metadata"]["origin_query"])
                 for _, rec in read_records(data / "only_instruction_queries.jsonl")}
    qrels, _ = read_qrels(data / "qrels/test.tsv")
    words = [w.strip('.,;:!?"()').lower() for text, _ in instances.values() for w in text.split()]
    vocab, counts = np.unique([w for w in words if w], return_counts=True)
    prob = counts / counts.sum()
    ids = list(instances)
    docs = []
    for qid, rel in qrels.items():
        instruction, query = instances[qid]
        own = (instruction.split() + query.split())
        picked = list(rng.choice(own, size=24)) + list(rng.choice(vocab, size=WORDS_PER_DOC - 24, p=prob))
        rng.shuffle(picked)
        docs.extend({"_id": did, "title": "", "text": " ".join(picked)} for did in rel)
    for n in range(N_DOCS - len(docs)):
        instruction, query = instances[ids[rng.integers(len(ids))]]
        picked = list(rng.choice(instruction.split() + query.split(), size=24)) + \
            list(rng.choice(vocab, size=WORDS_PER_DOC - 24, p=prob))
        docs.append({"_id": str(9_000_000 + n), "title": "", "text": " ".join(picked)})
    with (out / "corpus.jsonl").open("w") as fh:
        for doc in docs:
            fh.write(json.dumps(doc) + "\n")
    for name in ("only_instruction_queries.jsonl", "only_queries.jsonl", "qrels"):
        (out / name).symlink_to((data / name).resolve())  # a relative --data would make broken links


class Clock:
    """Wall and CPU time at each lap (CPU time is steadier on a shared machine)."""

    def __init__(self) -> None:
        self.wall, self.cpu = [time.perf_counter()], [time.process_time()]

    def lap(self) -> None:
        self.wall.append(time.perf_counter())
        self.cpu.append(time.process_time())

    def result(self, search_factor: float = 1.0) -> dict:
        """Index/search wall seconds and total CPU seconds (search part scaled by ``search_factor``)."""
        return {"index_s": self.wall[1] - self.wall[0], "search_s": (self.wall[2] - self.wall[1]) * search_factor,
                "cpu_s": self.cpu[1] - self.cpu[0] + (self.cpu[2] - self.cpu[1]) * search_factor}


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def part_instir(root: Path, k: int) -> dict:
    from instir.benchmarks.instructir import load_instructir
    from instir.formatting import get_template
    from instir.retrieval.lexical import BM25Retriever

    benchmark = load_instructir(root)
    template = get_template("instructir")
    retriever = BM25Retriever(show_progress=False, cache=False)  # the build is measured, not a cache hit
    clock = Clock()
    index = retriever.index(benchmark, template)
    clock.lap()
    run = index.search(benchmark.queries.values(), template, k)
    clock.lap()
    return {**clock.result(), "rows": len(run), "queries": run.df["qid"].nunique()}


def _plain_texts(root: Path) -> tuple[list[str], list[str]]:
    docs = [json.loads(line)["text"] for line in (root / "corpus.jsonl").open()]
    queries = []
    for line in (root / "only_instruction_queries.jsonl").open():
        rec = json.loads(line)
        queries.append(f"{rec['text']} [SEP] {rec['metadata']['origin_query']}")
    return docs, queries


def part_bm25s(root: Path, k: int) -> dict:
    import bm25s
    import Stemmer

    from instir.retrieval.lexical import LUCENE_ENGLISH_STOPWORDS

    stemmer, stopwords = Stemmer.Stemmer("porter"), list(LUCENE_ENGLISH_STOPWORDS)
    clock = Clock()
    docs, queries = _plain_texts(root)
    model = bm25s.BM25(k1=0.9, b=0.4, method="lucene")
    model.index(bm25s.tokenize(docs, stopwords=stopwords, stemmer=stemmer, show_progress=False), show_progress=False)
    clock.lap()
    tokens = bm25s.tokenize(queries, stopwords=stopwords, stemmer=stemmer, return_ids=False, show_progress=False)
    top, _ = model.retrieve(tokens, k=k, show_progress=False)
    clock.lap()
    return {**clock.result(), "rows": int(top.size), "queries": len(queries)}


def part_rank_bm25(root: Path, k: int, n_queries: int) -> dict:
    import bm25s
    import numpy as np
    import Stemmer
    from rank_bm25 import BM25Okapi

    from instir.retrieval.lexical import LUCENE_ENGLISH_STOPWORDS

    stemmer, stopwords = Stemmer.Stemmer("porter"), list(LUCENE_ENGLISH_STOPWORDS)
    docs, queries = _plain_texts(root)
    clock = Clock()
    doc_tokens = bm25s.tokenize(docs, stopwords=stopwords, stemmer=stemmer, return_ids=False, show_progress=False)
    model = BM25Okapi(doc_tokens, k1=0.9, b=0.4)
    clock.lap()
    sample = queries[:: max(1, len(queries) // n_queries)][:n_queries]
    for tokens in bm25s.tokenize(sample, stopwords=stopwords, stemmer=stemmer, return_ids=False, show_progress=False):
        scores = model.get_scores(tokens)
        np.argpartition(-scores, k)[:k]
    clock.lap()
    return {**clock.result(len(queries) / len(sample)), "measured_queries": len(sample), "queries": len(queries)}


def run_part(name: str, root: Path, args: argparse.Namespace) -> dict:
    """One measurement in a fresh interpreter, so its peak RSS is its own."""
    cmd = [sys.executable, __file__, "--part", name, "--root", str(root), "--k", str(args.k),
           "--rank-bm25-queries", str(args.rank_bm25_queries)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=REPO)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=None, help="InstructIR GitHub release folder")
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--rank-bm25-queries", type=int, default=200)
    parser.add_argument("--part", choices=("instir", "bm25s", "rank_bm25"), help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.part:
        root = Path(args.root)
        result = {"instir": lambda: part_instir(root, args.k), "bm25s": lambda: part_bm25s(root, args.k),
                  "rank_bm25": lambda: part_rank_bm25(root, args.k, args.rank_bm25_queries)}[args.part]()
        print(json.dumps({**result, "peak_rss_mb": peak_rss_mb()}))
        return
    data = instructir_data(args.data)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        generate_corpus(data, root)
        results = {name: run_part(name, root, args) for name in ("bm25s", "instir", "rank_bm25")}
    kit = results["instir"]["index_s"] + results["instir"]["search_s"]
    print(f"BM25 at InstructIR scale: {results['instir']['queries']} real instructed queries from {data}, "
          f"{N_DOCS} generated docs (~{WORDS_PER_DOC} words), k={args.k}")
    print(f"{'system':<34}{'index s':>9}{'search s':>10}{'total s':>9}{'CPU s':>8}{'peak RSS MB':>13}"
          f"{'vs instir':>11}")
    for name, label in (("bm25s", "plain bm25s"), ("instir", "instir BM25Retriever"),
                        ("rank_bm25", f"rank_bm25 (extrapolated from {args.rank_bm25_queries} q)")):
        r = results[name]
        total = r["index_s"] + r["search_s"]
        print(f"{label:<34}{r['index_s']:>9.2f}{r['search_s']:>10.2f}{total:>9.2f}{r['cpu_s']:>8.2f}"
              f"{r['peak_rss_mb']:>13.0f}{total / kit:>10.2f}x")
    plain = results["bm25s"]["index_s"] + results["bm25s"]["search_s"]
    print(f"kit overhead over plain bm25s: {100 * (kit / plain - 1):+.1f}% wall; rank_bm25 / instir: "
          f"{(results['rank_bm25']['index_s'] + results['rank_bm25']['search_s']) / kit:.0f}x. Wall times on a "
          f"shared machine vary; CPU s (same interval, single-threaded) is steadier.")


if __name__ == "__main__":
    main()
