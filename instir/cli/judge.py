"""``instir judge`` (the judge stage on an instructed run and a query-only run: InstFol@20,
written under ``--out``'s ``judge/``, the folder notebook 04 writes) and ``instir
judge-validate`` (judge agreement with gold labels). Judgments go through the SQLite
cache, so a rerun is free and a killed run resumes. API keys: only the *name* of the
environment variable holding one is ever an argument (:func:`instir.judge.factory.key_env_for`
says which names are accepted). Heavy modules are imported in handlers."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from instir.cli.options import (
    add_benchmark_arguments,
    benchmark_from_args,
    depth_option,
    positive_int,
    positive_rate,
    positive_seconds,
    refuse_written_input,
    report_folder,
    whole_number,
)
from instir.judge.factory import BACKENDS, DEFAULT_KEY_ENV, OPENAI_BASE_URL, make_judge, require_reachable

if TYPE_CHECKING:
    import pandas as pd

    from instir.judge.cache import CachedJudge

_KEY_RULE = (f"Any other variable must be set; {DEFAULT_KEY_ENV} may be unset only when the endpoint is a local "
             "server (loopback, private network or a single-label host name), which then gets no key.")


def _judge_options(p: argparse.ArgumentParser) -> None:
    """Options shared by both subcommands: benchmark, backend, model and cache."""
    add_benchmark_arguments(p)
    p.add_argument("--backend", required=True, choices=BACKENDS,
                   help="openai: any OpenAI-compatible chat API; hf: a causal LM in this process; "
                        "baseline: no LLM (term overlap or embedding similarity)")
    p.add_argument("--model", default=None,
                   help="openai: model name (required); hf: local path or model id (default: the bundled "
                        "SmolLM2-135M-Instruct GGUF); baseline: lexical (default) or embedding")
    p.add_argument("--gguf-file", default=None, help="hf: GGUF file inside --model")
    p.add_argument("--base-url", default=None,
                   help=f"openai: endpoint before /chat/completions (default: {OPENAI_BASE_URL}; "
                        "e.g. http://127.0.0.1:8000/v1 for vLLM)")
    p.add_argument("--api-key-env", default=None,
                   help=f"openai: NAME of the environment variable holding the API key, never the key itself "
                        f"(default: {DEFAULT_KEY_ENV}). {_KEY_RULE}")
    p.add_argument("--timeout", type=positive_seconds, default=60.0, metavar="SECONDS",
                   help="openai: seconds one attempt of a request may take, connect, headers and answer together, "
                        "by wall clock (default: 60)")
    p.add_argument("--max-retries", type=whole_number, default=6, metavar="N",
                   help="openai: retries of a request after a timeout, connection error, 408/409/429 or 5xx "
                        "(default: 6); a dead or slow server costs at most SECONDS x (N + 1) per request, plus "
                        "the waits between retries (1 s doubling, at most 60 s)")
    p.add_argument("--requests-per-minute", type=positive_rate, default=None, metavar="N",
                   help="openai: the provider's rate limit; every attempt of a request waits for its turn, spread "
                        "evenly over the minute (default: no pacing)")
    p.add_argument("--cache", default=None, help="judgment cache file (default: $INSTIR_HOME/judgments.sqlite)")
    p.add_argument("--seed", type=whole_number, default=0, help="seed of the stratified sample (default: 0)")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``judge`` and ``judge-validate`` subcommands."""
    p = subparsers.add_parser("judge", help="InstFol@20: judge an instructed and a query-only run with an LLM",
                              description="The judge stage: judge both top-k lists of every instance against its "
                                          "query + instruction and print InstFol (x100) per level, subset and "
                                          "Average, with the failed judgments behind each value; the runs are "
                                          "listed in --out's runs/runs.csv and InstFol written to its judge/.")
    _judge_options(p)
    p.add_argument("--run", required=True, help="TREC run retrieved with query + instruction")
    p.add_argument("--query-only-run", required=True,
                   help="TREC run of the same instances retrieved with the bare query (query-only template)")
    p.add_argument("--name", default="run", help="the system's name in the tables (default: run)")
    p.add_argument("--out", default=None, type=Path,
                   help="report folder (default: ./judgment-<benchmark>-<setting>)")
    p.add_argument("--max-instances", type=positive_int, default=None,
                   help="judge a stratified sample of at most N instances (default: all)")
    p.add_argument("--k", type=depth_option, default=20, help="list cut-off (default: 20, as InstFol@20)")
    p.add_argument("--repeats", type=positive_int, default=1,
                   help="judge the sample R times (own cache entries per repeat) and print the spread of InstFol "
                        "the judge causes next to the spread the query sample causes (default: 1)")
    p.set_defaults(handler=judge_command)

    v = subparsers.add_parser("judge-validate", help="agreement of a judge with gold labels from the qrels",
                              description="Judge a stratified sample of (instruction, passage) pairs labelled "
                                          "relevant / relevant to a sibling only / not relevant and print kappa, "
                                          "correlations, ROC AUC, the confusion matrix, failures, cost and latency.")
    _judge_options(v)
    v.add_argument("--per-stratum", type=positive_int, default=20,
                   help="pairs per (subset, level, label) stratum (default: 20)")
    v.set_defaults(handler=validate_command)


def _cli_judge(args: argparse.Namespace) -> CachedJudge:
    """The judge the command-line options ask for; an openai endpoint nothing answers at is refused before any
    request, as the judge stage and ``instir run`` refuse it (:func:`require_reachable`)."""
    judge = make_judge(args.backend, model=args.model, gguf_file=args.gguf_file, base_url=args.base_url,
                       api_key_env=args.api_key_env, timeout_s=args.timeout, max_retries=args.max_retries,
                       requests_per_minute=args.requests_per_minute, cache=args.cache)
    if args.backend == "openai":  # after the model and key are checked, as the judge stage does
        require_reachable(args.base_url, min(args.timeout, 5.0), where=f"--base-url {args.base_url or OPENAI_BASE_URL}",
                          names=("--base-url", "--backend"))
    return judge


def _judge_line(meta: dict) -> str:
    judge = meta["judge"]
    return (f"judge {judge['name']} / {judge['model']}: {meta['unique_requests']} distinct judgments, "
            f"{meta['judged']} made now, {meta['from_cache']} from the cache")


def _warning_lines(frame: pd.DataFrame, what: str) -> list[str]:
    """One line per distinct warning of the successful judgments in ``frame`` (one row per
    judged pair or list position: columns qid, docid, error, warning), each pair counted once."""
    from instir.judge.outcomes import error_counts

    judged = frame[frame["error"].isna()].drop_duplicates(["qid", "docid"])
    counts = error_counts(judged["warning"], limit=3)
    return [f"warning: {row.judgments} {what} {row.error}" for row in counts.itertuples(index=False)]


def judge_command(args: argparse.Namespace) -> int:
    """Print InstFol per level, subset and Average with failure counts (and, with ``--repeats``,
    the judge's spread next to the query sample's). Exit status 1, after the reasons, when some
    judgments failed (their values are missing or stand on fewer passages); a rerun judges only those."""
    import sys

    from instir.judge.following import answered_instances, check_max_instances, printable
    from instir.judge.stability import check_repeats
    from instir.report.layout import ReportLayout
    from instir.report.lock import FolderLock
    from instir.retrieval.runs import read_run
    from instir.stages.judge import judge_runs
    from instir.stages.retrieve import listed_row, write_runs_table

    check_repeats(args.repeats)  # before the benchmark, the judge and the runs load
    check_max_instances(args.max_instances)
    benchmark = benchmark_from_args(args)
    instructed, query_only = read_run(args.run), read_run(args.query_only_run)  # refused before anything is written
    answered_instances(benchmark, instructed, query_only, names=("--run", "--query-only-run"))
    judge = _cli_judge(args)  # (its cache file is made here)
    out = args.out or Path(f"judgment-{benchmark.name.replace('/', '_')}-{benchmark.setting}")
    for option, path in (("--run", args.run), ("--query-only-run", args.query_only_run)):
        refuse_written_input(out, option, path)
    out = report_folder(out)
    rows = [listed_row(benchmark, args.name + ("" if variant == "instructed" else " (query-only)"),
                       str(Path(path).resolve()), variant, retriever=args.name)
            for variant, path in (("instructed", args.run), ("query-only", args.query_only_run))]
    with FolderLock(out, "instir judge"):
        write_runs_table(ReportLayout(out), rows)
        judging = judge_runs(out, backend=args.backend, judge=judge, max_instances=args.max_instances,
                             repeats=args.repeats, validate=False, k=args.k, seed=args.seed, data_root=args.root)
    result = judging.instfol.results[0]
    meta = result.meta
    print(f"InstFol@{args.k} on {benchmark.label}")
    print(f"instances: {len(meta['selected'])} judged (max {args.max_instances or 'all'}, seed {args.seed})")
    print(_judge_line(meta) + f", {meta['failed_judgments']} failed, {meta['parsed_judgments']} scored by the parsed "
          f"integer (no usable log-probabilities), {meta['warnings']} with a warning")
    for line in _warning_lines(result.positions, "judgment(s)"):
        print(line)
    for name in ("missing_from_query_only_run", "missing_from_instructed_run"):
        if meta[name]:
            print(f"{len(meta[name])} instances {name.replace('_', ' ')}: {', '.join(meta[name][:5])}")
    print(printable(result.summary()).to_string(index=False))
    for note in judging.instfol_notes():
        print(note)
    if args.repeats > 1:
        _print_spread(judging, args)
    print(f"\nwrote {ReportLayout(out).instfol}")
    judging.require_judgments()
    *reasons, said = judging.incomplete() or [None]
    for line in reasons:
        print(line)
    if said is None:
        return 0
    print(f"instir judge: {said}", file=sys.stderr)
    return 1


def _print_spread(judging, args: argparse.Namespace) -> None:
    """``--repeats R``: InstFol x100 with the judge's spread and the query sample's, and the verdict."""
    print(f"\njudged {args.repeats} times: the judge's spread next to the query sample's")
    for m in judging.spread.attrs["repeats"][0]:
        if "copied_from" in m:
            print(f"repeat {m['repeat']}: repeat {m['copied_from']}'s judgments (a deterministic judge is not "
                  "judged again)")
            continue
        if "from_instfol" in m:
            print(f"repeat {m['repeat']}: the InstFol judgments above, {m['judged']} made now, {m['from_cache']} from "
                  f"the cache, {m['failed_judgments']} failed")
            continue
        print(f"repeat {m['repeat']}: {m['unique_requests']} distinct judgments, {m['judged']} made now, "
              f"{m['from_cache']} from the cache, {m['failed_judgments']} failed")
    print(judging.stability_table().reset_index().drop(columns=["benchmark", "system"]).to_string(index=False))
    for _, _, verdict in judging.verdicts:
        print(verdict)


def validate_command(args: argparse.Namespace) -> int:
    """Print the agreement table and confusion matrix of a judge on gold pairs."""
    from instir.judge.outcomes import require_judged
    from instir.judge.validation import check_per_stratum, validate_judge

    check_per_stratum(args.per_stratum, "--per-stratum")  # before the benchmark and the judge load
    benchmark = benchmark_from_args(args)
    result = validate_judge(benchmark, _cli_judge(args), per_stratum=args.per_stratum, seed=args.seed)
    print(f"judge validation on {benchmark.label}")
    print(_judge_line(result.meta) + f", {result.meta['failed_judgments']} failed, {result.meta['warnings']} with a "
          "warning")
    for line in _warning_lines(result.pairs, "judgment(s)"):
        print(line)
    counts = result.pairs.groupby(["subset", "level", "label"], dropna=False).size().rename("pairs").reset_index()
    print(counts.to_string(index=False))
    print()
    print(result.agreement.round(4).to_string(index=False))
    print()
    print(result.confusion.to_string())
    require_judged(result.pairs.drop_duplicates(["qid", "docid"])["error"], "no agreement statistic has a value")
    return 0
