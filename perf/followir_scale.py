"""FollowIR at its real size: a generated ``robust04``-sized dataset in the authors' release layout
(47,492 passages of about 1,500 characters, 52 topics, each an ``-og`` and a ``-changed``
instance with 1,000 candidates and about 20 relevant passages, a few made non-relevant by the
changed instruction), next to a plain bm25s script on the same texts, side by side in each repeat:

- ``plain bm25s``: read the corpus and the topics, tokenise, index (the family's BM25 settings),
  score every instance's candidates (the whole corpus ranked, the candidates kept), write nothing;
- ``retrieve``: ``instir retrieve --benchmark followir/robust04 --retriever bm25`` into a new folder
  with an empty instir home (no corpus index, no BM25 index cached): the run holds every candidate;
- ``evaluate``: ``instir evaluate`` of that run (p-MRR both ways, AP@1000 and nDCG@5 and their halves).

Each is a fresh process. Medians of ``--repeats`` and the ratio of the kit's retrieve to the plain
script of the same repeat.

    python -m perf.followir_scale [--repeats 3] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perf.common import REPO

DOCS, CHARS, TOPICS, CANDIDATES, RELEVANT, CHANGED = 47_492, 1_500, 52, 1_000, 20, 5
WORDS = [f"w{i}" for i in range(30_000)]

PLAIN = """
import json, sys, time
import bm25s, Stemmer
start = time.perf_counter()
root = sys.argv[1]
docs = [json.loads(line) for line in open(root + "/corpus.jsonl")]
topics = [json.loads(line) for line in open(root + "/queries.jsonl")]
candidates = {}
for line in open(root + "/top_ranked.jsonl"):
    rec = json.loads(line)
    candidates.setdefault(rec["qid"], []).append(rec["pid"])
stemmer = Stemmer.Stemmer("porter")
ids = [d["_id"] for d in docs]
tokens = bm25s.tokenize([d["title"] + " " + d["text"] for d in docs], stopwords="en", stemmer=stemmer,
                        show_progress=False)
model = bm25s.BM25(k1=1.5, b=0.75, method="robertson")
model.index(tokens, show_progress=False)
position = {d: i for i, d in enumerate(ids)}
kept = 0
for topic in topics:
    for key in ("instruction_og", "instruction_changed"):
        query = bm25s.tokenize([topic["text"] + " " + topic[key]], stopwords="en", stemmer=stemmer,
                               return_ids=False, show_progress=False)[0]
        scores = model.get_scores(query)
        kept += len([scores[position[d]] for d in candidates[topic["_id"]]])
print(json.dumps({"kept": kept, "s": time.perf_counter() - start}))
"""


def generate(root: Path, seed: int = 0) -> None:
    """The jhu-clsp layout of one dataset with the sizes above (random words, a fixed seed)."""
    rng = random.Random(seed)
    root.mkdir(parents=True)
    with open(root / "corpus.jsonl", "w", encoding="utf-8") as out:
        for i in range(DOCS):
            text = " ".join(rng.choices(WORDS, k=CHARS // 6))
            out.write(json.dumps({"_id": f"d{i}", "title": "", "text": text}) + "\n")
    og, changed = [], []
    with open(root / "queries.jsonl", "w", encoding="utf-8") as q, \
            open(root / "top_ranked.jsonl", "w", encoding="utf-8") as top:
        for t in range(TOPICS):
            words = rng.choices(WORDS, k=40)
            q.write(json.dumps({"_id": f"t{t}", "text": " ".join(words[:4]), "instruction_og": " ".join(words[4:24]),
                                "instruction_changed": " ".join(words[4:40])}) + "\n")
            pool = rng.sample(range(DOCS), CANDIDATES)
            for d in pool:
                top.write(json.dumps({"qid": f"t{t}", "pid": f"d{d}"}) + "\n")
            for n, d in enumerate(pool[:RELEVANT]):
                og.append({"query-id": f"t{t}", "corpus-id": f"d{d}", "score": 1})
                changed.append({"query-id": f"t{t}", "corpus-id": f"d{d}", "score": 0 if n < CHANGED else 1})
    for name, rows in (("qrels_og", og), ("qrels_changed", changed)):
        (root / name).mkdir()
        (root / name / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def timed(command: list[str], env: dict) -> tuple[float, str]:
    """Wall seconds of one fresh process, and its last output line."""
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO, check=True)
    return time.perf_counter() - start, done.stdout.strip().splitlines()[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="followir-scale-"))
    data = work / "data" / "followir" / "jhu-clsp" / "robust04"
    if not data.is_dir():
        generate(data)
    instir = [sys.executable, "-m", "instir.cli"]
    times: dict[str, list[float]] = {"plain bm25s": [], "retrieve": [], "evaluate": []}
    for repeat in range(args.repeats):
        home = work / f"home-{repeat}"
        shutil.rmtree(home, ignore_errors=True)
        env = {**os.environ, "INSTIR_HOME": str(home), "INSTIR_PROGRESS": "0"}
        times["plain bm25s"].append(timed([sys.executable, "-c", PLAIN, str(data)], env)[0])
        out = work / f"runs-{repeat}"
        shutil.rmtree(out, ignore_errors=True)
        seconds, run = timed([*instir, "retrieve", "--benchmark", "followir/robust04", "--root", str(work / "data"),
                              "--retriever", "bm25", "--out", str(out)], env)
        times["retrieve"].append(seconds)
        times["evaluate"].append(timed([*instir, "evaluate", "--benchmark", "followir/robust04", "--root",
                                        str(work / "data"), "--run", run, "--out", str(out / "eval")], env)[0])
    medians = {name: statistics.median(values) for name, values in times.items()}
    ratios = [r / p for r, p in zip(times["retrieve"], times["plain bm25s"])]
    for name, value in medians.items():
        print(f"{name:12s} median {value:6.2f} s  ({', '.join(f'{v:.2f}' for v in times[name])})")
    print(f"retrieve / plain bm25s, same repeat: median {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
