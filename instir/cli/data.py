"""``instir fetch`` (download a benchmark at its pinned revision) and ``instir summary``
(dataset statistics of named benchmarks, by default the bundled samples)."""

from __future__ import annotations

import argparse

from instir.benchmarks import catalog
from instir.cli.options import writable_folder
from instir.errors import UsageError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``fetch`` and ``summary`` subcommands."""
    families = [catalog.family(name) for name in catalog.families()]
    p = subparsers.add_parser(
        "fetch", help="download a benchmark from the Hugging Face Hub at its pinned revision",
        description=f"Download {' or '.join(f.printed for f in families)} into the instir cache ($INSTIR_HOME, "
                    "default ~/.cache/instir) at the pinned revision, check files and record counts, and write "
                    "instir-manifest.json. The only command that downloads benchmarks: loading one never uses the "
                    "network.")
    p.add_argument("benchmark", choices=catalog.families())
    p.add_argument("--subset", choices=[s for f in families for s in f.subsets], default=None,
                   help="one subset of a family with subsets (default: all of them)")
    layouts = "; ".join(f"{f.name}: " + " or ".join(f"{layout} ({source.repo})" for layout, source in f.sources.items())
                        for f in families)
    p.add_argument("--layout", default=None, help=f"where from, the first the default: {layouts}")
    p.add_argument("--revision", default=None, help="override the pinned revision (a commit hash)")
    p.add_argument("--cache-dir", default=None, help="cache root instead of $INSTIR_HOME")
    p.set_defaults(handler=fetch_command)

    p = subparsers.add_parser(
        "summary", help="dataset statistics of benchmarks (default: the bundled samples)",
        description="Print queries, groups, documents, levels and average relevant documents per benchmark.")
    p.add_argument("names", nargs="*", help="benchmark or collection names (default: every bundled sample)")
    p.add_argument("--setting", default="instructed", help="benchmark setting (default: instructed)")
    p.add_argument("--root", default=None, help="local benchmark files (only with one name)")
    p.set_defaults(handler=summary_command)


def fetch_command(args: argparse.Namespace) -> int:
    """Handler of ``instir fetch``."""
    from instir.benchmarks.fetch import fetch, read_manifest

    if args.cache_dir:  # before the Hub is asked
        writable_folder(args.cache_dir, "--cache-dir")
    root = fetch(args.benchmark, args.subset, layout=args.layout, cache_dir=args.cache_dir, revision=args.revision)
    subsets = [args.subset] if args.subset else list(catalog.family(args.benchmark).subsets)
    folders = [root / s for s in subsets] or [root]
    for folder in folders:
        manifest = read_manifest(folder)
        state = "verified" if manifest["verified"] else "COUNTS DIFFER from the published ones"
        print(f"{manifest['benchmark']}: {manifest['repo']} @ {manifest['resolved_revision']} -> {folder} ({state})")
    print(f"load it with --root {root} or by name (it is in the cache)")
    return 0


def summary_command(args: argparse.Namespace) -> int:
    """Handler of ``instir summary``."""
    import pandas as pd

    from instir.benchmarks.registry import load_benchmark

    names = catalog.expand(args.names) if args.names else catalog.sample_benchmarks()
    if args.root and len(names) != 1:
        raise UsageError("--root needs exactly one benchmark name")
    rows = [load_benchmark(name, args.setting, root=args.root).describe() for name in names]
    print(pd.DataFrame(rows).to_string(index=False))
    return 0
