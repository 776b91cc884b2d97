"""Cost of judge stability: ``judge_repeats`` with R = 3 on the IFIR samples (fiqa and
nfcorpus, BM25 instructed vs query-only, every instance, top 20) through a fresh judgment
cache, with the lexical baseline and with the in-process SmolLM2-135M-Instruct judge (backend
``hf``; its model load is timed apart: the first load in a machine dequantises the GGUF once
into INSTIR_HOME/models, later loads read that copy). Per judge: the time of all R repeats, the
judgments made, the stability table's time, and a warm rerun (all from the cache). Both judges
are deterministic (``CachedJudge.deterministic``), so ``judge_repeats`` judges repeat 0 only and
copies it for the others: the time is that of one judging, and the line says how many repeats
were judged.

    .venv/bin/python -m perf.judge_stability_cost [--repeats 3] [--skip-hf] [--subsets ifir-sample/nfcorpus]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pandas as pd

from instir.benchmarks import load_benchmark
from instir.judge import BaselineJudge, CachedJudge, HFCausalLMJudge
from instir.judge.stability import deterministic_note, judge_repeats, stability, verdict
from instir.retrieval import retrieve
from instir.retrieval.lexical import BM25Retriever

SUBSETS = ("ifir-sample/fiqa", "ifir-sample/nfcorpus")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--skip-hf", action="store_true")
    p.add_argument("--subsets", nargs="+", default=list(SUBSETS), help="IFIR sample subsets (default: both)")
    args = p.parse_args()
    work = Path(tempfile.mkdtemp(prefix="instir-stability-"))
    retriever = BM25Retriever(show_progress=False)
    pairs = []
    for name in args.subsets:
        bench = load_benchmark(name)
        pairs.append((bench, retrieve(bench, retriever, k=20, out_dir=work / "runs"),
                      retrieve(bench, retriever, "query-only", k=20, out_dir=work / "runs")))
    backends = [("baseline (lexical)", lambda: BaselineJudge("lexical"))]
    if not args.skip_hf:
        backends.append(("hf (SmolLM2-135M-Instruct)", lambda: HFCausalLMJudge(progress=False)))
    for label, make in backends:
        t = time.perf_counter()
        backend = make()
        backend.judge([])  # load the model now (the hf judge loads lazily)
        load = time.perf_counter() - t
        cache = work / f"{label.split()[0]}.sqlite"
        for attempt in ("cold", "warm"):
            t = time.perf_counter()
            parts = [judge_repeats(inst, query, bench, CachedJudge(backend, cache), args.repeats)
                     for bench, inst, query in pairs]
            judging = time.perf_counter() - t
            made = sum(m["judged"] for part in parts for m in part.attrs["meta"])
            instances = pd.concat(parts, ignore_index=True)
            t = time.perf_counter()
            table = stability(instances)
            spread_s = time.perf_counter() - t
            judged = int(table["judged_repeats"].iloc[0])
            print(f"{label} [{attempt}] model load {load:.1f} s; {instances['qid'].nunique()} instances x "
                  f"{args.repeats} repeats ({judged} judged, {args.repeats - judged} copied) in {judging:.2f} s "
                  f"({made} judgments made); stability table {spread_s:.2f} s")
            load = 0.0
        print("   ", verdict(table))
        if judged < args.repeats:
            print("   ", deterministic_note(args.repeats))


if __name__ == "__main__":
    main()
