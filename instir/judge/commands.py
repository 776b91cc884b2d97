"""``instir judge`` (InstFol@20 of an instructed run against a query-only run) and
``instir judge-validate`` (judge agreement with gold labels). Judgments go through the SQLite
cache, so a rerun is free and a killed run resumes. API keys: only the *name* of the
environment variable holding one is ever an argument. Heavy modules are imported in handlers."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from instir.benchmarks.commands import add_benchmark_arguments, benchmark_from_args

if TYPE_CHECKING:
    from instir.judge.cache import CachedJudge

#: judge backends :func:`make_judge` builds
BACKENDS = ("openai", "hf", "baseline")

#: where an openai judge sends its requests unless ``base_url`` says otherwise
OPENAI_BASE_URL = "https://api.openai.com/v1"


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
    p.add_argument("--api-key-env", default="OPENAI_API_KEY",
                   help="openai: NAME of the environment variable holding the API key (never the key itself)")
    p.add_argument("--cache", default=None, help="judgment cache file (default: $INSTIR_HOME/judgments.sqlite)")
    p.add_argument("--seed", type=int, default=0, help="seed of the stratified sample (default: 0)")


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``judge`` and ``judge-validate`` subcommands."""
    p = subparsers.add_parser("judge", help="InstFol@20: judge an instructed and a query-only run with an LLM",
                              description="Judge both top-k lists of every instance against its query + "
                                          "instruction and print InstFol (x100) per level, subset and Average, "
                                          "with the failed judgments behind each value.")
    _judge_options(p)
    p.add_argument("--run", required=True, help="TREC run retrieved with query + instruction")
    p.add_argument("--query-only-run", required=True,
                   help="TREC run of the same instances retrieved with the bare query (query-only template)")
    p.add_argument("--max-instances", type=int, default=None,
                   help="judge a stratified sample of at most N instances (default: all)")
    p.add_argument("--k", type=int, default=20, help="list cut-off (default: 20, as InstFol@20)")
    p.add_argument("--repeats", type=int, default=1,
                   help="judge the sample R times (own cache entries per repeat) and print the spread of InstFol "
                        "the judge causes next to the spread the query sample causes (default: 1)")
    p.set_defaults(handler=judge_command)

    v = subparsers.add_parser("judge-validate", help="agreement of a judge with gold labels from the qrels",
                              description="Judge a stratified sample of (instruction, passage) pairs labelled "
                                          "relevant / relevant to a sibling only / not relevant and print kappa, "
                                          "correlations, ROC AUC, the confusion matrix, failures, cost and latency.")
    _judge_options(v)
    v.add_argument("--per-stratum", type=int, default=20,
                   help="pairs per (subset, level, label) stratum (default: 20)")
    v.set_defaults(handler=validate_command)


def make_judge(backend: str, *, model: str | None = None, gguf_file: str | None = None,
               base_url: str | None = None, api_key_env: str = "OPENAI_API_KEY",
               cache: str | Path | None = None) -> CachedJudge:
    """The judge ``backend`` names (one of :data:`BACKENDS`), behind the SQLite judgment cache.

    ``model``: openai: the served model name (required); hf: a local folder or model id (default:
    the bundled SmolLM2-135M-Instruct GGUF, with ``gguf_file`` naming a GGUF file in the folder);
    baseline: ``lexical`` (default) or ``embedding``. ``base_url``: openai only, the endpoint before
    ``/chat/completions`` (default: OpenAI's). ``api_key_env``: the *name* of the environment variable
    holding the API key. ``cache``: the cache file (default: ``$INSTIR_HOME/judgments.sqlite``).
    Empty strings count as not given, as the notebooks' parameters use them. Raises ``ValueError``
    for an unknown backend or an openai judge without a model."""
    from instir.judge import BaselineJudge, CachedJudge, HFCausalLMJudge, OpenAICompatibleJudge

    if backend not in BACKENDS:
        raise ValueError(f"unknown judge backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    if backend == "openai":
        if not model:
            raise ValueError("the openai judge backend needs a model name, e.g. 'gpt-4o-mini' "
                             "or the name of the model a local server serves")
        judge = OpenAICompatibleJudge(model, base_url or OPENAI_BASE_URL, api_key_env=api_key_env)
    elif backend == "hf":
        judge = HFCausalLMJudge(model or None, gguf_file=gguf_file or None)
    else:
        judge = BaselineJudge(model or "lexical")
    if not cache:
        from instir.benchmarks import instir_home

        cache = instir_home() / "judgments.sqlite"
    return CachedJudge(judge, Path(cache))


def _cli_judge(args: argparse.Namespace) -> CachedJudge:
    """The judge the command-line options ask for; a bad choice ends the command with its reason."""
    try:
        return make_judge(args.backend, model=args.model, gguf_file=args.gguf_file, base_url=args.base_url,
                          api_key_env=args.api_key_env, cache=args.cache)
    except ValueError as err:
        raise SystemExit(f"instir {args.command}: {err}") from None


def _judge_line(meta: dict) -> str:
    judge = meta["judge"]
    return (f"judge {judge['name']} / {judge['model']}: {meta['unique_requests']} distinct judgments, "
            f"{meta['judged']} made now, {meta['from_cache']} from the cache")


def judge_command(args: argparse.Namespace) -> int:
    """Print InstFol per level, subset and Average with failure counts."""
    from instir.judge.instfol import instfol, printable
    from instir.retrieval.runs import read_run

    if args.repeats < 1:
        raise SystemExit(f"instir judge: --repeats must be at least 1, got {args.repeats}")
    benchmark = benchmark_from_args(args)
    judge = _cli_judge(args)
    if args.repeats > 1:
        from instir.judge.stability import stability_command

        return stability_command(args, benchmark, judge)
    result = instfol(read_run(args.run), read_run(args.query_only_run), benchmark, judge, k=args.k,
                     max_instances=args.max_instances, seed=args.seed)
    meta = result.meta
    print(f"InstFol@{args.k} on {benchmark.label}")
    print(f"instances: {len(meta['selected'])} judged (max {args.max_instances or 'all'}, seed {args.seed})")
    print(_judge_line(meta) + f", {meta['failed_judgments']} failed")
    for name in ("missing_from_query_only_run", "missing_from_instructed_run"):
        if meta[name]:
            print(f"{len(meta[name])} instances {name.replace('_', ' ')}: {', '.join(meta[name][:5])}")
    print(printable(result.summary()).to_string(index=False))
    return 0


def validate_command(args: argparse.Namespace) -> int:
    """Print the agreement table and confusion matrix of a judge on gold pairs."""
    from instir.judge.validation import validate

    benchmark = benchmark_from_args(args)
    result = validate(benchmark, _cli_judge(args), per_stratum=args.per_stratum, seed=args.seed)
    print(f"judge validation on {benchmark.label}")
    print(_judge_line(result.meta))
    counts = result.pairs.groupby(["subset", "level", "label"], dropna=False).size().rename("pairs").reset_index()
    print(counts.to_string(index=False))
    print()
    print(result.agreement.round(4).to_string(index=False))
    print()
    print(result.confusion.to_string())
    return 0
