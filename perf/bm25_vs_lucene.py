"""The kit's BM25 (bm25s, :class:`instir.retrieval.lexical.BM25Retriever` with each benchmark's
defaults) against Lucene BM25 (Pyserini) on the same texts: ranking agreement, metrics, speed.

Data (``--sets``):

- ``instructir-sample``: the bundled sample; both sides at InstructIR's Anserini defaults
  (k1 0.9, b 0.4, Lucene's English stop words, Porter stemming; the kit's ``instructir``
  template ``instruction [SEP] query``);
- ``ifir-sample/fiqa``, ``ifir-sample/nfcorpus``: k1 1.2, b 0.75, no stemming, no stop words
  (Elasticsearch's ``standard`` analyzer as IFIR ran it; Lucene side: ``-stemmer none
  -keepStopwords``, StandardAnalyzer-like), template ``ifir`` (``query instruction``);
- ``instructir-real``: the real 9,906 InstructIR queries (``--data``, the authors' GitHub files)
  over the 16,072-document corpus of ``perf/bm25_scale.py`` (``generate_corpus``).

Each document is indexed as the kit indexes it (``Doc.indexed_text``), each query as the
kit's template formats it. Lucene: ``python -m pyserini.index.lucene`` (JsonCollection, 2
threads) and ``LuceneSearcher.batch_search`` (2 threads) in their own processes, JVM start
included. Timings are medians of ``--repeat`` runs; rankings are compared at depth ``--k``.

Needs Java 11+ (Debian ``openjdk-17-jre-headless``; ``JAVA_HOME`` set or found under
/usr/lib/jvm) and ``pip install --no-deps pyserini==0.21.0 pyjnius faiss-cpu sentencepiece
onnxruntime`` (the last Pyserini for Java < 21; ``--no-deps`` keeps the pinned torch), e.g. into a
folder passed as ``--pyserini-path``:

    python -m perf.bm25_vs_lucene [--sets instructir-sample ifir-sample/fiqa ...] [--repeat 3]
        [--data DIR] [--pyserini-path DIR] [--k 100]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SETS = ("instructir-sample", "ifir-sample/fiqa", "ifir-sample/nfcorpus", "instructir-real")


def _java_env(pyserini_path: str | None) -> dict:
    env = dict(os.environ)
    if "JAVA_HOME" not in env:
        jvms = sorted(Path("/usr/lib/jvm").glob("java-17-openjdk-*"))
        if jvms:
            env["JAVA_HOME"] = str(jvms[0])
    paths = [p for p in (pyserini_path, str(REPO), env.get("PYTHONPATH")) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def _load(name: str, data: Path | None, work: Path):
    """The benchmark, its template and its BM25 settings."""
    from instir.benchmarks import load_benchmark
    from instir.formatting import get_template
    from instir.retrieval.lexical import bm25_defaults

    if name == "instructir-real":
        from instir.benchmarks.instructir import load_instructir
        from perf.bm25_scale import generate_corpus
        from perf.common import instructir_data

        root = work / "instructir-real"
        if not (root / "corpus.jsonl").is_file():
            root.mkdir(parents=True, exist_ok=True)
            generate_corpus(instructir_data(str(data) if data else None), root)
        bench = load_instructir(root)
    else:
        bench = load_benchmark(name)
    family = "instructir" if name.startswith("instructir") else "ifir"
    return bench, get_template(family), bm25_defaults(family)


def _kit(bench, template, k: int):
    from instir.retrieval.lexical import BM25Retriever

    start = time.perf_counter()
    run = BM25Retriever(show_progress=False).search(bench, template, k)
    return run, time.perf_counter() - start


def _lucene(bench, template, params: dict, k: int, work: Path, env: dict):
    """Index and search with Pyserini in subprocesses; the run and (index_s, search_s)."""
    import shutil

    import pandas as pd

    from instir.retrieval.runs import Run

    docs, index = work / "collection", work / "index"
    shutil.rmtree(index, ignore_errors=True)
    docs.mkdir(parents=True, exist_ok=True)
    with (docs / "docs.jsonl").open("w", encoding="utf-8") as fh:
        for doc in bench.corpus:
            fh.write(json.dumps({"id": doc.id, "contents": doc.indexed_text}) + "\n")
    queries = work / "queries.tsv"
    texts = template.format_queries(bench.queries.values())
    with queries.open("w", encoding="utf-8") as fh:
        for qid, text in zip(bench.queries, texts):
            fh.write(qid + "\t" + " ".join(str(text).split()) + "\n")
    plain = params["stemmer"] == "none"
    analysis = ["-stemmer", "none", "-keepStopwords"] if plain else []
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pyserini.index.lucene", "-collection", "JsonCollection", "-input",
                    str(docs), "-index", str(index), "-generator", "DefaultLuceneDocumentGenerator", "-threads", "2",
                    *analysis], check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    index_s = time.perf_counter() - start
    out = work / "lucene.tsv"
    start = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--search-part", str(index), str(queries), str(out),
                    str(params["k1"]), str(params["b"]), str(k), "plain" if plain else "english"],
                   check=True, env=env)
    search_s = time.perf_counter() - start
    df = pd.read_csv(out, sep="\t", names=["qid", "docid", "score"], dtype={"qid": str, "docid": str})
    return Run(df), (index_s, search_s)


def _search_part(index: str, queries: str, out: str, k1: str, b: str, k: str, analysis: str) -> None:
    """In its own process: LuceneSearcher.batch_search over the query file."""
    from pyserini.analysis import get_lucene_analyzer
    from pyserini.search.lucene import LuceneSearcher

    searcher = LuceneSearcher(index)
    searcher.set_bm25(float(k1), float(b))
    if analysis == "plain":
        searcher.set_analyzer(get_lucene_analyzer(stemming=False, stopwords=False))
    qids, texts = [], []
    for line in Path(queries).read_text(encoding="utf-8").splitlines():
        qid, _, text = line.partition("\t")
        qids.append(qid)
        texts.append(text)
    hits = searcher.batch_search(texts, qids, k=int(k), threads=2)
    with open(out, "w", encoding="utf-8") as fh:
        for qid in qids:
            fh.writelines(f"{qid}\t{hit.docid}\t{hit.score}\n" for hit in hits[qid])


def _agreement(a, b, depth: int = 10) -> dict:
    """Mean top-``depth`` overlap (shared documents over the longer of the two lists, at most
    ``depth``) and the share of queries with the same top-1 document."""
    tops = [{q: g.sort_values("rank")["docid"].tolist()[:depth] for q, g in run.df.groupby("qid")} for run in (a, b)]
    qids = sorted(set(tops[0]) | set(tops[1]))
    overlap = [len(set(tops[0].get(q, [])) & set(tops[1].get(q, [])))
               / max(len(tops[0].get(q, [])), len(tops[1].get(q, [])), 1) for q in qids]
    same_top1 = [bool(tops[0].get(q)) and tops[0].get(q, [None])[0] == tops[1].get(q, [None])[0] for q in qids]
    return {"top10_overlap": statistics.mean(overlap), "same_top1": statistics.mean(same_top1), "queries": len(qids)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--data", default=None, help="the authors' InstructIR GitHub files (instructir-real)")
    parser.add_argument("--pyserini-path", default=None, help="folder holding pyserini and its deps")
    parser.add_argument("--work", default=None, help="scratch folder (default: a new temporary one)")
    args = parser.parse_args()

    from instir.metrics import evaluate_runs

    env = _java_env(args.pyserini_path)
    work = Path(args.work or tempfile.mkdtemp(prefix="bm25-vs-lucene-"))
    for name in args.sets:
        bench, template, params = _load(name, Path(args.data) if args.data else None, work)
        folder = work / name.replace("/", "-")
        kit_s, lucene_s, kit_run, lucene_run = [], [], None, None
        for _ in range(args.repeat):
            kit_run, seconds = _kit(bench, template, args.k)
            kit_s.append(seconds)
            lucene_run, seconds = _lucene(bench, template, params, args.k, folder, env)
            lucene_s.append(seconds)
        table = evaluate_runs({"bm25s": kit_run, "lucene": lucene_run}, bench).table
        main_measures = ["nDCG@10", "Robustness@10"] if name.startswith("instructir") else ["nDCG@20"]
        overall = table[table.level == "all"]  # IFIR's subset column names the subset, InstructIR's says "all"
        scores = {m: {s: 100 * float(overall[(overall.system == s) & (overall.measure == m)]["value"].iloc[0])
                      for s in ("bm25s", "lucene")} for m in main_measures}
        agree = _agreement(kit_run, lucene_run)
        index_med = statistics.median(s[0] for s in lucene_s)
        search_med = statistics.median(s[1] for s in lucene_s)
        print(f"{name}: {len(bench.corpus)} docs, {agree['queries']} queries, k1 {params['k1']} b {params['b']}, "
              f"stemmer {params['stemmer']}, stop words {params['stopwords']}")
        print(f"  mean top-10 overlap {agree['top10_overlap']:.3f}, same top-1 {100 * agree['same_top1']:.1f}%")
        for measure, values in scores.items():
            print(f"  {measure}: bm25s {values['bm25s']:.1f}, lucene {values['lucene']:.1f}")
        print(f"  time (median of {args.repeat}): bm25s {statistics.median(kit_s):.2f} s index+search; "
              f"lucene index {index_med:.2f} s + search {search_med:.2f} s (JVM start included)")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--search-part":
        _search_part(*sys.argv[2:9])
    else:
        main()
