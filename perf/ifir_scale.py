"""The report chain at IFIR's real corpus size: a generated ``cds``-sized subset in the
songtingyu layout (633,955 documents of about 1,600 characters, about 1 GB, as real ``cds``;
43 queries with one level-0 instruction each), run with BM25 and the baseline judge, next to a
plain bm25s script on the same texts, side by side in each repeat:

- ``plain bm25s``: read the corpus and the queries, tokenise, index (IFIR's BM25 settings:
  k1 1.2, b 0.75, no stemming, no stop words), search the 43 instructed queries (k = 100);
- ``cold chain``: ``instir run --benchmark ifir/cds --retrievers bm25 -p data_root=DATA -p
  judge_backend=baseline`` into a new folder with an empty instir home (no corpus index, no
  BM25 index cached);
- ``warm rerun``: the same command again, nothing changed;
- ``k=50 rerun``: the same with ``-p k=50`` (new runs, no new index: its sidecar says whether
  the BM25 index was built or loaded).

Each is a fresh process; its peak RSS is the largest of its processes (the notebook kernels
included: they are reaped by ``instir run``). Per-notebook times come from ``report.json``.
Medians of ``--repeats`` and the ratios to the plain script of the same repeat.

    python -m perf.ifir_scale [--docs 633955] [--repeats 3] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perf.common import REPO

SUBSET = "cds"
DOCS, CHARS, QUERIES, RELEVANT = 633_955, 1_600, 43, 12
CHAIN = ["run", "--benchmark", f"ifir/{SUBSET}", "--retrievers", "bm25", "-p", "judge_backend=baseline"]


def generate(folder: Path, n_docs: int, chars: int, n_queries: int, seed: int = 0) -> Path:
    """``folder/ifir/songtingyu/cds/{test_data.json, cds-corpus.jsonl}``: documents made of
    sentences drawn from a pool of Zipf-distributed words, each query's relevant documents
    holding its words; kept and reused when complete (``.complete`` marker)."""
    import numpy as np

    subset = folder / "ifir" / "songtingyu" / SUBSET
    if (subset / ".complete").is_file():
        return folder
    subset.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    vocab = ["".join(rng.choice(letters, size=int(n))) for n in rng.integers(3, 11, size=60_000)]
    weights = 1.0 / np.arange(1, len(vocab) + 1) ** 1.07
    weights /= weights.sum()
    sentences = [" ".join(vocab[i] for i in rng.choice(len(vocab), size=int(n), p=weights)).capitalize() + "."
                 for n in rng.integers(12, 25, size=40_000)]
    per_doc = max(1, round(chars / (sum(map(len, sentences[:2000])) / 2000 + 1)))
    queries = [" ".join(vocab[i] for i in rng.choice(np.arange(2000, 20_000), size=6)) for _ in range(n_queries)]
    instructions = [" ".join(vocab[i] for i in rng.choice(np.arange(500, 20_000), size=12)) for _ in range(n_queries)]
    relevant = rng.choice(n_docs, size=(n_queries, RELEVANT), replace=False)
    owner = {int(d): q for q in range(n_queries) for d in relevant[q]}
    picks = rng.integers(0, len(sentences), size=(n_docs, per_doc))
    with (subset / f"{SUBSET}-corpus.jsonl").open("w", encoding="utf-8") as fh:
        for d in range(n_docs):
            text = " ".join(sentences[i] for i in picks[d])
            if d in owner:
                q = owner[d]
                text = f"{queries[q]}. {instructions[q]}. {text}"
            fh.write(json.dumps({"_id": f"D{d:07d}", "title": "", "text": text}) + "\n")
    elements = []
    for q in range(n_queries):
        candidates = [f"D{int(d):07d}" for d in relevant[q]] + [f"D{int(d):07d}" for d in rng.choice(n_docs, size=8)]
        elements.append({"_id": f"Q{q:03d}", "text": queries[q], "corpus": [{"_id": c} for c in candidates],
                         "instructions": [{"level": 0, "instruction": instructions[q],
                                           "rel": list(range(RELEVANT))}]})
    (subset / "test_data.json").write_text(json.dumps(elements, indent=1), encoding="utf-8")
    (subset / ".complete").write_text("", encoding="utf-8")
    return folder


def plain_bm25s(data: Path, k: int = 100) -> dict:
    """The plain script: what the chain's BM25 does, without the kit."""
    import bm25s

    subset = data / "ifir" / "songtingyu" / SUBSET
    start = time.perf_counter()
    ids, texts = [], []
    with (subset / f"{SUBSET}-corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            ids.append(rec["_id"])
            texts.append(f"{rec['title']} {rec['text']}" if rec.get("title") else rec["text"])
    model = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    model.index(bm25s.tokenize(texts, stopwords=[], show_progress=False), show_progress=False)
    del texts
    elements = json.loads((subset / "test_data.json").read_text(encoding="utf-8"))
    queries = [f"{e['text']} {i['instruction']}" for e in elements for i in e["instructions"]]
    top, _ = model.retrieve(bm25s.tokenize(queries, stopwords=[], return_ids=False, show_progress=False), k=k,
                            show_progress=False)
    return {"wall_s": time.perf_counter() - start, "rows": int(top.size)}


def measured(command: list[str], env: dict[str, str]) -> dict:
    """Run ``command`` through a fresh intermediate process that waits for it and reports its
    wall time and the peak RSS of the largest process of its tree (RUSAGE_CHILDREN)."""
    probe = ("import json, resource, subprocess, sys, time\n"
             "t = time.perf_counter(); rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
             "print(json.dumps({'rc': rc, 'wall_s': time.perf_counter() - t,\n"
             "                  'peak_rss_mb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))")
    done = subprocess.run([sys.executable, "-c", probe, *command], env=env, cwd=REPO, capture_output=True, text=True,
                          check=False)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if result["rc"]:
        sys.exit(f"{' '.join(command)} failed (exit {result['rc']}):\n{done.stderr[-3000:]}")
    return result


def chain(out: Path, data: Path, env: dict[str, str], *extra: str) -> dict:
    """One ``instir run`` of the chain into ``out``: wall, peak RSS, per-notebook wall times."""
    result = measured([sys.executable, "-m", "instir.cli", *CHAIN, "-p", f"data_root={data}", *extra,
                       "--out", str(out)], env)
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    result["notebooks"] = {nb["name"][:2]: nb["wall_s"] for nb in report["notebooks"]}
    return result


def index_use(out: Path, k: int) -> list[str]:
    """How the BM25 index behind each run of depth ``k`` came about (``built`` or ``loaded``, and
    whether the retriever already held it), from the runs' sidecars."""
    uses = []
    for sidecar in sorted((out / "runs").glob(f"*__k{k}-*.trec.json")):
        index = json.loads(sidecar.read_text(encoding="utf-8"))["search"]["index"]
        uses.append(index["origin"] + (" (held)" if index["reused_in_memory"] else ""))
    return uses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=DOCS)
    parser.add_argument("--chars", type=int, default=CHARS)
    parser.add_argument("--queries", type=int, default=QUERIES)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--work", default=None, help="folder for the data (kept and reused) and the runs")
    parser.add_argument("--plain", metavar="DATA", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plain:
        result = plain_bm25s(Path(args.plain))
        print(json.dumps({**result, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
        return
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="ifir-scale-"))
    t0 = time.perf_counter()
    data = generate(work / "data", args.docs, args.chars, args.queries)
    corpus = data / "ifir" / "songtingyu" / SUBSET / f"{SUBSET}-corpus.jsonl"
    print(f"data: {corpus} ({corpus.stat().st_size / 1e9:.2f} GB, {args.docs} documents; "
          f"{time.perf_counter() - t0:.0f} s to make or find)", flush=True)
    base_env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
                "INSTIR_PROGRESS": "0", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    rows: list[dict] = []
    for r in range(args.repeats):
        home, out = work / f"home-{r}", work / "reports" / f"cds-{r}"
        for stale in (home, out):
            shutil.rmtree(stale, ignore_errors=True)
        env = {**base_env, "INSTIR_HOME": str(home)}
        plain = measured([sys.executable, "-m", "perf.ifir_scale", "--plain", str(data)], env)
        cold = chain(out, data, env)
        warm = chain(out, data, env)
        k50 = chain(out, data, env, "-p", "k=50")
        rows.append({"plain": plain, "cold": cold, "warm": warm, "k50": k50, "k50_index": index_use(out, 50)})
        print(f"repeat {r + 1}: plain {plain['wall_s']:.1f} s / {plain['peak_rss_mb']:.0f} MB; cold chain "
              f"{cold['wall_s']:.1f} s / {cold['peak_rss_mb']:.0f} MB {cold['notebooks']}; warm {warm['wall_s']:.1f} s "
              f"{warm['notebooks']}; k=50 {k50['wall_s']:.1f} s, index {rows[-1]['k50_index']}", flush=True)

    def median(values) -> float:
        return statistics.median(list(values))

    print(f"\nmedians of {args.repeats} (ratios: to the plain script of the same repeat)")
    plain_s = median(row["plain"]["wall_s"] for row in rows)
    print(f"plain bm25s script        {plain_s:8.1f} s  {median(row['plain']['peak_rss_mb'] for row in rows):7.0f} MB")
    for name, label in (("cold", "cold chain"), ("warm", "warm rerun"), ("k50", "rerun with k=50")):
        wall = median(row[name]["wall_s"] for row in rows)
        ratio = median(row[name]["wall_s"] / row["plain"]["wall_s"] for row in rows)
        rss = median(row[name]["peak_rss_mb"] / row["plain"]["peak_rss_mb"] for row in rows)
        print(f"{label:<26}{wall:8.1f} s  x{ratio:.2f} of plain; peak RSS x{rss:.2f} "
              f"({median(row[name]['peak_rss_mb'] for row in rows):.0f} MB)")
    for name, label in (("cold", "cold"), ("warm", "warm")):
        for nb in rows[0][name]["notebooks"]:
            wall = median(row[name]["notebooks"][nb] for row in rows)
            ratio = median(row[name]["notebooks"][nb] / row["plain"]["wall_s"] for row in rows)
            print(f"  {label} notebook {nb}: {wall:7.1f} s  (x{ratio:.2f} of plain)")
    print(f"k=50 reruns' BM25 index: {[row['k50_index'] for row in rows]}")
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
