"""The `instir` command, the top floor of the package: one module per step of the data flow
registers its subcommands (each parses, calls a stage or a library function, prints); this
module assembles them and answers their errors. With no subcommand it prints the help and a
short pointer to the bundled samples.

Errors, the same for every subcommand (:func:`main` is the one place that handles them):

- an expected failure — a :class:`instir.errors.UserError` (bad file, unknown name, bad
  option or parameter, failed download), an ``OSError`` (missing or unwritable file or
  folder, a model that cannot be found) or an ``sqlite3.DatabaseError`` (a damaged cache) —
  prints ``instir <command>: <message>`` as one line on stderr and exits 2;
- a mistake on the command line (argparse) prints one line too, and exits 2;
- Ctrl-C prints ``instir <command>: interrupted`` and exits 130;
- anything else is a bug: the traceback is kept, exit 1.

``--debug`` (on any subcommand) or ``INSTIR_DEBUG=1`` adds the traceback to expected failures.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap

from instir.cli.options import Parser
from instir.errors import quoted, utf8_problem
from instir.secrets import leaked_secret
from instir.terminal import DEBUG_VAR, answered


def samples_pointer() -> str:
    """What bare ``instir`` prints after the help: where to look next (no benchmark is loaded)."""
    from instir.benchmarks.catalog import collection_of, sample_benchmarks

    collections: dict[str, list[str]] = {}
    for name in sample_benchmarks():
        collections.setdefault(collection_of(name), []).append(name.partition("/")[2])
    named = [c + (f" ({', '.join(subs)})" if any(subs) else "") for c, subs in collections.items()]
    listed = textwrap.fill(f"bundled samples: {', '.join(named)}", width=100, subsequent_indent="  ",
                           break_on_hyphens=False, break_long_words=False)
    return (f"{listed}\n"
            "  instir summary   their counts (queries, groups, documents, levels)\n"
            "  instir run       the tour and the five report notebooks on them, as HTML pages")


def family_names() -> list[str]:
    """The benchmark families' printed names, in the catalog's order."""
    from instir.benchmarks import catalog

    return [catalog.family(name).printed for name in catalog.families()]


def build_parser() -> Parser:
    """The full argument parser (subcommands import their heavy dependencies lazily); every
    subcommand also takes ``--debug``. Building it reads the family specs (names and choices come from them)."""
    from instir.cli import data, evaluate, judge, mteb, rerank, retrieve, run, sweep

    parser = Parser(
        prog="instir",
        description=f"Reproducibility kit for instruction-following retrieval ({', '.join(family_names())}).",
        epilog=f"Errors print one line and exit 2; add --debug to any command (or set {DEBUG_VAR}=1) "
               "for the traceback.",
    )
    parser.add_argument("--debug", action="store_true", help=f"show the traceback of an error (also: {DEBUG_VAR}=1)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in (data, retrieve, rerank, mteb, evaluate, judge, run, sweep):  # in the order the data flows
        module.register(sub)
    for subparser in {id(p): p for p in sub.choices.values()}.values():  # aliases share a parser
        subparser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                               help=f"show the traceback of an error (also: {DEBUG_VAR}=1)")
    return parser


def _debugging(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "debug", False)) or os.environ.get(DEBUG_VAR, "0") not in ("", "0")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script: run the subcommand, answer its errors (see the module
    docstring; :func:`instir.terminal.answered`) and return the exit status."""
    argv = sys.argv[1:] if argv is None else argv
    built: list[Parser] = []  # a family spec from outside the package (INSTIR_FAMILIES) may hold a user's mistake
    status = answered("instir", lambda: built.append(build_parser()),
                      debug=_debugging(argparse.Namespace(debug="--debug" in argv)))
    if not built:
        return status
    parser = built[0]
    for arg in argv:  # before argparse, which quotes a bad value back (--timeout <key>: the key on the terminal)
        found = leaked_secret(arg)
        if found:
            command = "" if argv[0].startswith("-") else f" {argv[0]}"
            print(f"{parser.prog}{command}: an argument holds {found}: keys are read from environment variables "
                  "only (--api-key-env names one); nothing was run or written", file=sys.stderr)
            return 2
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        print()
        print(samples_pointer())
        return 0
    for arg in argv:  # a byte such as 0xff, where records and pages hold UTF-8
        problem = utf8_problem(arg)
        if problem is not None:
            print(f"{parser.prog} {args.command}: {quoted(arg)} is no UTF-8 text ({problem}; a name, value or path the "
                  "kit would write into its records, tables and pages): give it as UTF-8", file=sys.stderr)
            return 2
    return answered(f"{parser.prog} {args.command}", lambda: args.handler(args), debug=_debugging(args))
