"""``instir rerank``: rescore a first-stage run's top documents with a reranker and write the
new run + sidecar (reusing a complete run made from the same inputs; scores are cached)."""

from __future__ import annotations

import argparse

from instir.cli.options import (
    add_benchmark_arguments,
    benchmark_from_args,
    depth_option,
    output_folder,
)
from instir.errors import UsageError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``rerank`` subcommand."""
    p = subparsers.add_parser("rerank", help="rerank a run's top documents (monoT5, cross-encoder, LLM P(true))",
                              description="Rescore the top --depth documents per query of --run with a reranker; "
                                          "write the reranked TREC run and its JSON sidecar under --out. Scores are "
                                          "cached, so running it again scores nothing.")
    add_benchmark_arguments(p)
    p.add_argument("--run", required=True, help="first-stage TREC run file (its sidecar is used when present)")
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--system", help="paper reranker name, e.g. monoT5-base, FollowIR-7B")
    who.add_argument("--reranker", choices=("monot5", "cross-encoder", "llm-ptrue"),
                     help="reranker kind, with --model")
    p.add_argument("--model", default=None, help="model id or local path (with --reranker)")
    p.add_argument("--depth", type=depth_option, default=None,
                   help="documents rescored per query (default: 100; on a reranking task such as FollowIR, every "
                        "candidate)")
    p.add_argument("--batch-size", type=depth_option, default=None,  # a card's batch_size rule: 1 to MAX_CUTOFF
                   help="inputs per model call (default: the card's, the authors' for that model; 64 with --reranker)")
    p.add_argument("--dtype", default=None, choices=("float32", "float16", "bfloat16"),
                   help="model dtype (default: a --system card's; with --reranker llm-ptrue, its prompt's authors'; "
                        "else float32)")
    p.add_argument("--query-split", default="authors", choices=("authors", "fields"),
                   help="'authors': split 'instruction [SEP] query' as the InstructIR code does (a bare query "
                        "is seen twice); 'fields': the loaded query and instruction")
    p.add_argument("--cache", default=None, help="score cache file (default: $INSTIR_HOME/rerank-scores.sqlite)")
    p.add_argument("--out", required=True, help="output directory for runs")
    p.set_defaults(handler=_rerank)


def _rerank(args: argparse.Namespace) -> int:
    from instir.retrieval.rerank import rerank
    from instir.retrieval.runs import read_run
    from instir.systems.rerankers import make_reranker, reranker_from_name

    options = {"batch_size": args.batch_size, "dtype": args.dtype or None}
    if args.system and args.model:
        raise UsageError("--model goes with --reranker, not --system")
    if not args.system and not args.model:
        raise UsageError("--reranker needs --model (a model id or local path)")
    benchmark = benchmark_from_args(args)
    first_stage = read_run(args.run)  # a bad run file is said before a model is looked for (offline: a long wait)
    if args.system:
        from instir.systems import get_card, load_cards
        from instir.systems.registry import check_weights_reachable

        cards = load_cards()
        reranker = reranker_from_name(args.system, cards=cards, dtype=options["dtype"], batch_size=args.batch_size)
        check_weights_reachable(get_card(args.system, cards), cards)  # offline: one line, not the Hub's retries
    else:
        reranker = make_reranker(args.reranker, args.model, **{k: v for k, v in options.items() if v is not None})
    candidates = benchmark.meta.get("top_ranked")
    depth = args.depth or (max(map(len, candidates.values())) if candidates else 100)
    out = output_folder(args.out)  # before the scoring, with "~" expanded
    run = rerank(first_stage, benchmark, reranker, depth=depth, out_dir=out, cache=args.cache,
                 query_split=args.query_split)
    scored = f"{run.meta['scored']} pairs scored in {run.meta['wall_time_s']:.1f} s"
    state = "reused" if run.meta.get("reused") else scored
    print(f"{benchmark.label}: {run.df['qid'].nunique()} queries, {len(run)} rows, reranker {reranker.name} ({state})")
    print(run.meta["path"])
    return 0
