"""``instir retrieve``: write a run + sidecar for a benchmark and retriever (reusing a
complete run made from the same inputs). Heavy modules are imported inside the handler."""

from __future__ import annotations

import argparse

from instir.benchmarks.commands import add_benchmark_arguments, benchmark_from_args


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``retrieve`` subcommand."""
    p = subparsers.add_parser("retrieve", help="retrieve with BM25, a dense model or a hybrid; write TREC runs",
                              description="Write a TREC run and its JSON sidecar under --out; running it again "
                                          "with the same inputs reuses the existing run.")
    add_benchmark_arguments(p)
    p.add_argument("--retriever", required=True, choices=("bm25", "dense", "hybrid"))
    p.add_argument("--model", default=None,
                   help="sentence-transformers model id or path for dense/hybrid (default: bundled all-MiniLM-L6-v2)")
    p.add_argument("--windowing", default=None, choices=("ifir", "clean"),
                   help="dense/hybrid: encode long texts as the mean of windows, cut as IFIR's code does (ifir: "
                        "documents and queries) or the kit's way (clean: documents only); default: no windows")
    p.add_argument("--template", default=None,
                   help="query/document template name (default: the authors' template for the model family)")
    p.add_argument("--k", type=int, default=100, help="documents per query (default: 100)")
    p.add_argument("--out", required=True, help="output directory for runs")
    p.set_defaults(handler=_retrieve)


def _retrieve(args: argparse.Namespace) -> int:
    from instir.retrieval import make_retriever, retrieve

    benchmark = benchmark_from_args(args)
    run = retrieve(benchmark, make_retriever(args.retriever, args.model, windowing=args.windowing), template=args.template, k=args.k,
                   out_dir=args.out)
    state = "reused" if run.meta.get("reused") else f"written in {run.meta['wall_time_s']:.1f} s"
    print(f"{benchmark.label}: {run.df['qid'].nunique()} queries, {len(run)} rows, "
          f"template {run.meta['template']['name']} ({state})")
    print(run.meta["path"])
    return 0
