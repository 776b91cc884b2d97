"""The `instir` command: each pipeline stage registers its own subcommands; this module
only assembles them. With no subcommand it prints a summary of the bundled samples."""

from __future__ import annotations

import argparse
import importlib
import sys

#: Modules that define ``register(subparsers)``, in the order the data flows.
COMMAND_MODULES = (
    "instir.benchmarks.commands",
    "instir.retrieval.commands",
    "instir.metrics.commands",
    "instir.judge.commands",
    "instir.pipeline",
    "instir.distributed.commands",
)


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser (subcommands import their heavy dependencies lazily)."""
    parser = argparse.ArgumentParser(
        prog="instir",
        description="Reproducibility kit for instruction-following retrieval (InstructIR, IFIR).",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["summary"])
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
