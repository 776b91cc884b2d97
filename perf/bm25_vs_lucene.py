"""The kit's fast BM25 (bm25s, ``bm25`` with each benchmark's defaults) against each paper's own engine
(``instir[engines]``) on the same texts, side by side in every repeat: index and search time, peak memory,
ranking agreement and the headline measures.

The paper's engines (:mod:`instir.retrieval.lucene`, :mod:`instir.retrieval.okapi`):

- InstructIR: Anserini's command line (Lucene, English analyzer, k1 0.9, b 0.4), the ``BM25 (InstructIR)`` card;
- IFIR: Elasticsearch's BM25 on Lucene (standard analyzer, match query, k1 1.2, b 0.75), ``BM25 (IFIR)``;
- FollowIR: rank_bm25 over each query's candidates with the authors' cleaning, ``BM25 (FollowIR)``.

Data (``--sets``): the bundled samples (``instructir-sample``, ``ifir-sample/fiqa``, ``followir-sample/core17``);
``instructir-real``: the real 9,906 InstructIR queries over the 16,072-document corpus ``perf/bm25_scale.py``
generates; ``ifir-cds``: IFIR's largest subset at its real size (633,955 documents of about 1,600 characters,
``perf/ifir_scale.py`` generates it; ``--ifir-docs`` makes it smaller).

Each side runs cold (an empty instir home: no index cached) in a fresh process; its wall time includes reading
the corpus, indexing and searching (JVM starts included) and its peak RSS is the largest process of its tree (the
JVM included). Medians of ``--repeats``.

    python -m perf.bm25_vs_lucene [--sets instructir-sample ifir-sample/fiqa ...] [--repeats 3] [--k 100]
        [--data DIR] [--ifir-docs 633955] [--work DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from perf.common import REPO, instructir_data

SETS = ("instructir-sample", "ifir-sample/fiqa", "followir-sample/core17", "instructir-real", "ifir-cds")
#: the card of each family's paper engine
CARDS = {"instructir": "BM25 (InstructIR)", "ifir": "BM25 (IFIR)", "followir": "BM25 (FollowIR)"}


def _benchmark(name: str, work: Path, data: str | None, ifir_docs: int):
    """The benchmark a set names (a generated one is written under ``work`` once)."""
    from instir.benchmarks import load_benchmark

    if name == "instructir-real":
        from instir.benchmarks.instructir import load_instructir
        from perf.bm25_scale import generate_corpus

        root = work / "instructir-real"
        if not (root / "corpus.jsonl").is_file():
            root.mkdir(parents=True, exist_ok=True)
            generate_corpus(instructir_data(data), root)
        return load_instructir(root)
    if name == "ifir-cds":
        from perf.ifir_scale import CHARS, QUERIES, SUBSET, generate

        root = generate(work / f"ifir-{ifir_docs}", ifir_docs, CHARS, QUERIES)
        return load_benchmark(f"ifir/{SUBSET}", root=root)
    return load_benchmark(name)


def _side(name: str, system: str, k: int, work: str, data: str, ifir_docs: str, out: str) -> None:
    """In its own process: ``system`` retrieves the set; the run goes to ``out``, the times to stdout."""
    from instir.retrieval import retrieve, write_run
    from instir.systems import build_system

    start = time.perf_counter()
    bench = _benchmark(name, Path(work), data or None, int(ifir_docs))
    loaded = time.perf_counter()
    run = retrieve(bench, build_system(system), k=int(k))
    done = time.perf_counter()
    write_run(run, Path(out))
    print(json.dumps({"load_s": loaded - start, "retrieve_s": done - loaded,
                      "self_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))


def _measured(name: str, system: str, args, out: Path) -> dict:
    """One cold side in a fresh process with an empty instir home: wall, peak RSS of its tree, its times."""
    home = Path(tempfile.mkdtemp(prefix="instir-home-", dir=args.work))
    env = {**os.environ, "INSTIR_HOME": str(home), "INSTIR_PROGRESS": "0", "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    probe = ("import json, resource, subprocess, sys, time; start = time.perf_counter(); "
             "done = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
             "sys.stderr.write(done.stderr[-3000:]) if done.returncode else None; "
             "print(json.dumps({'rc': done.returncode, 'wall_s': time.perf_counter() - start, "
             "'peak_rss_mb': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, "
             "'child': done.stdout.strip().splitlines()[-1] if done.stdout.strip() else '{}'}))")
    command = [sys.executable, "-c", probe, sys.executable, "-m", "perf.bm25_vs_lucene", "--side", name, system,
               str(args.k), str(args.work), args.data or "", str(args.ifir_docs), str(out)]
    done = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, check=False)
    result = json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {"rc": 1}
    if result["rc"]:
        sys.exit(f"{system} on {name} failed:\n{done.stderr[-3000:]}")
    return {**result, **json.loads(result.pop("child"))}


def _agreement(a, b, depth: int = 10) -> dict:
    """Mean top-``depth`` overlap (shared documents over the longer list, at most ``depth``) and the share
    of queries with the same top-1 document."""
    tops = [{q: g["docid"].tolist()[:depth] for q, g in run.df.groupby("qid", sort=False)} for run in (a, b)]
    qids = sorted(set(tops[0]) | set(tops[1]))
    overlap = [len(set(tops[0].get(q, [])) & set(tops[1].get(q, [])))
               / max(len(tops[0].get(q, [])), len(tops[1].get(q, [])), 1) for q in qids]
    same = [bool(tops[0].get(q)) and tops[0].get(q, [None])[0] == tops[1].get(q, [None])[0] for q in qids]
    return {"overlap": statistics.mean(overlap), "same_top1": statistics.mean(same), "queries": len(qids)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", nargs="+", default=list(SETS[:4]), choices=SETS)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--data", default=None, help="the authors' InstructIR GitHub files (instructir-real)")
    parser.add_argument("--ifir-docs", type=int, default=633_955)
    parser.add_argument("--work", default=None, help="scratch folder (default: a new temporary one)")
    args = parser.parse_args()
    args.work = str(Path(args.work or tempfile.mkdtemp(prefix="bm25-engines-")).resolve())
    Path(args.work).mkdir(parents=True, exist_ok=True)

    from instir.metrics import evaluate_runs
    from instir.retrieval import read_run

    for name in args.sets:
        bench = _benchmark(name, Path(args.work), args.data, args.ifir_docs)  # a generated corpus: written here
        family = name.split("-")[0]
        sides = {"bm25s": "bm25", "paper engine": CARDS[family]}
        rows = {side: [] for side in sides}
        for _ in range(args.repeats):
            for side, system in sides.items():
                rows[side].append(_measured(name, system, args, Path(args.work) / f"{side.replace(' ', '-')}.trec"))
        runs = {side: read_run(Path(args.work) / f"{side.replace(' ', '-')}.trec") for side in sides}
        agree = _agreement(runs["bm25s"], runs["paper engine"])
        print(f"{name}: {len(bench.corpus):,} documents, {agree['queries']:,} queries, k {args.k}; paper engine: "
              f"{sides['paper engine']}")
        print(f"  top-10 overlap {agree['overlap']:.3f}, same top-1 {100 * agree['same_top1']:.1f} %")
        table = evaluate_runs(runs, bench).table
        overall = table[table["level"].isin(["all", ""]) | table["level"].isna()]
        for measure in dict.fromkeys(overall["measure"]):
            if measure.startswith(("nDCG@10", "nDCG@20", "Robustness@10", "p-MRR")) and "[" not in measure:
                values = {side: overall[(overall.system == side) & (overall.measure == measure)]["value"]
                          for side in sides}
                if all(len(v) for v in values.values()):
                    print(f"  {measure}: " + ", ".join(f"{side} {100 * float(v.iloc[0]):.1f}"
                                                       for side, v in values.items()))
        for side in sides:
            def median(key: str, side=side) -> float:
                return statistics.median(row[key] for row in rows[side])
            print(f"  {side:<13} wall {median('wall_s'):7.1f} s (load {median('load_s'):.1f} s, index + search "
                  f"{median('retrieve_s'):.1f} s), peak RSS {median('peak_rss_mb'):,.0f} MB "
                  f"(median of {args.repeats})")
        ratio = statistics.median(p["retrieve_s"] / b["retrieve_s"] for p, b in zip(rows["paper engine"],
                                                                                     rows["bm25s"]))
        print(f"  paper engine / bm25s index + search time: x{ratio:.2f} (median of the repeats' ratios)")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--side":
        _side(*sys.argv[2:9])
    else:
        main()
