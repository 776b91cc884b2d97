"""What every command shares: the argument parser with one-line errors, the argparse types of
counts and times, the output-folder check, plain text tables, and the options that name one
benchmark (what the terminal is shown, and how an error is answered, is :mod:`instir.terminal`'s)."""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from instir.errors import UsageError, closest, quoted
from instir.inputs import expanded
from instir.parameters import MAX_SECONDS, MIN_PER_MINUTE, depth
from instir.terminal import cut_message, terminal_text

if TYPE_CHECKING:
    from instir.benchmarks.types import Benchmark

#: the widest line a command prints on its own (tables are wrapped to fit)
TEXT_WIDTH = 120


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error (subparsers inherit it): ``instir retrieve: argument
    --k: must be at least 1, got 0 (see instir retrieve --help)``, exit 2. An option a command does not know is said
    by the command, with the one meant (``instir retrieve: unrecognized argument --benchmrk (did you mean
    --benchmark?)``), before argparse's complaint about the required option the slip left out."""

    def __init__(self, *args: Any, **kwargs: Any):
        self.commands = False
        self.given: list[str] = []
        super().__init__(*args, **kwargs)

    def add_subparsers(self, **kwargs: Any) -> argparse._SubParsersAction:
        self.commands = True
        return super().add_subparsers(**kwargs)

    def parse_known_args(self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
                         ) -> tuple[argparse.Namespace, list[str]]:
        self.given = list(sys.argv[1:] if args is None else args)
        parsed, extras = super().parse_known_args(args, namespace)
        if extras and not self.commands:  # a command's own parser says what it does not take
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        twice = None if self.commands else self.option_given_twice()
        if twice is not None:
            self.error(twice)
        return parsed, extras

    def option_given_twice(self) -> str | None:
        """The first option given twice whose second value argparse would keep in place of the first without a word
        (``instir run --benchmark instructir-sample --benchmark ifir-sample/fiqa`` ran FiQA alone, ``instir evaluate
        --measures nDCG@10 --measures R@100`` scored R@100 alone); options that gather (``--run``, ``-p``) and flags
        aside. None when there is none."""
        seen: dict[argparse.Action, str] = {}
        for arg in self.given:
            if arg == "--":
                break
            name = arg.split("=", 1)[0]
            action = self._option_string_actions.get(name)
            if action is None and name.startswith("--"):  # an abbreviation argparse takes: the one option it begins
                begun = {found for option, found in self._option_string_actions.items() if option.startswith(name)}
                action = begun.pop() if len(begun) == 1 else None
            if not isinstance(action, argparse._StoreAction):
                continue
            if action in seen:
                every = " with all its values" if action.nargs in ("+", "*") else ""
                first = "" if seen[action] == name else f" (first as {seen[action]})"
                return f"{name} is given twice{first}: only the last would count; give it once{every}"
            seen[action] = name
        return None

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {cut_message(self.unknown_option() or message)} (see {self.prog} --help)\n")

    def unknown_option(self) -> str | None:
        """The first ``--option`` given that this command does not take (nor abbreviates), with the closest one it
        takes; None for the parser of commands and where every option is known."""
        if self.commands:
            return None
        options = list(self._option_string_actions)  # argparse's own table, groups' options included
        for arg in self.given:
            if arg == "--":
                break
            name = arg.split("=", 1)[0]
            if name.startswith("--") and not any(option.startswith(name) for option in options):
                close = closest(name[2:], [option[2:] for option in options if option.startswith("--")])
                return f"unrecognized argument {name}" + (f" (did you mean --{close}?)" if close else "")
        return None


def positive_int(text: str) -> int:
    """argparse type of counts (``--max-instances``, ``--resamples`` …): a whole number of at least 1 written in
    decimal digits (Python's ``int`` would also read ``1_0`` as 10); the command checks a count's own bound."""
    if not re.fullmatch(r"[-+]?[0-9]+", text.strip()):
        raise argparse.ArgumentTypeError(f"expected a whole number, got {quoted(text)}")
    value = _whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def depth_option(text: str) -> int:
    """argparse type of a depth (``--k``, ``--depth``): a :func:`positive_int` that :func:`instir.parameters.depth`,
    the rule of every depth, accepts (at most :data:`~instir.parameters.MAX_CUTOFF`)."""
    try:
        return depth(positive_int(text), where="")  # where="": argparse puts the option's name before the line
    except UsageError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def output_folder(path: str | Path, option: str = "--out") -> Path:
    """Create the folder an output option names (``~`` expanded: a quoted ``'~/out'`` means what the stages read),
    before any work (:func:`writable_folder`), and return it; one inside the cache root, or with subfolders
    symlinked elsewhere, is refused (:func:`instir.report.lock.refuse_unsafe_folder`)."""
    from instir.report.lock import refuse_unsafe_folder
    from instir.terminal import refuse_unshown

    path = expanded(path)
    refuse_unshown(path.resolve(), f"{option}'s path")
    refuse_unsafe_folder(path.resolve())
    return writable_folder(path, option)


def report_folder(path: str | Path, option: str = "--out") -> Path:
    """The report folder an output option names, refused where it is the filesystem root or the home folder
    (:func:`instir.report.layout.check_report_folder`) before anything is written, then made as
    :func:`output_folder` makes it."""
    from instir.report.layout import check_report_folder

    return output_folder(check_report_folder(expanded(path)), option)


def refuse_written_input(out: str | Path, option: str, path: str | Path) -> None:
    """Refuse in one line an input file (a run) that ``option`` names at a path a stage writes in the report folder
    ``out`` (``~`` expanded, as :func:`report_folder` makes it; :meth:`instir.report.layout.ReportLayout.stage_writes`),
    before anything is written: the stage would replace it, and it may be the only copy of a run."""
    from instir.report.layout import ReportLayout

    if ReportLayout(expanded(out)).stage_writes(Path(path)):
        raise UsageError(f"{option} {path}: instir writes there in the report folder {out} (report.json, "
                         "runs/runs.csv, data/, metrics/, judge/, paper_tables/); copy the run out of it or "
                         "choose another --out")


def writable_folder(path: str | Path, option: str) -> Path:
    """Create the folder ``option`` names, before any work: a folder that cannot be written fails at once, not
    after minutes of downloading, retrieval or scoring."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UsageError(f"{option} {path} is a file, not a folder") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path} is not writable")
    return path


def text_table(rows: list[dict[str, object]], width: int = TEXT_WIDTH, wrap: tuple[str, ...] = ()) -> str:
    """``rows`` as a plain text table (tabulate's ``simple`` style) at most ``width`` columns wide:
    the ``wrap`` columns, in that order, are wrapped onto several lines as far as needed (never
    below 12 characters) when the table would be wider."""
    from tabulate import tabulate

    rows = [{c: terminal_text(v) for c, v in row.items()} for row in rows]
    columns = list(rows[0]) if rows else []
    natural = {c: max([len(c), *(len(str(r[c])) for r in rows)]) for c in columns}
    limits = dict(natural)
    excess = sum(natural.values()) + 2 * (len(columns) - 1) - width
    for column in wrap:
        if excess <= 0:
            break
        cut = min(excess, max(0, natural[column] - 12))
        limits[column] -= cut
        excess -= cut
    return tabulate([[r[c] for c in columns] for r in rows], headers=columns, tablefmt="simple", disable_numparse=True,
                    maxcolwidths=[limits[c] if limits[c] < natural[c] else None for c in columns])


def positive_seconds(text: str) -> float:
    """argparse type of time limits (``--timeout``): a number of seconds above 0, at most
    :data:`~instir.parameters.MAX_SECONDS` (a day)."""
    return _positive(text, "a positive number of seconds", 0.0, MAX_SECONDS, f"; at most {MAX_SECONDS:,} (a day)")


def positive_rate(text: str) -> float:
    """argparse type of rates per minute (``--requests-per-minute``): at least one a day (the longest wait,
    :data:`~instir.parameters.MAX_SECONDS`), finite."""
    return _positive(text, "a positive number", MIN_PER_MINUTE, math.inf,
                     f"; at least {MIN_PER_MINUTE:.6g} (one a day)")


def _positive(text: str, expected: str, low: float, high: float, bound: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (0 < value < math.inf and low <= value <= high):
        raise argparse.ArgumentTypeError(f"expected {expected}, got {quoted(text)}{bound}")
    return value


def whole_number(text: str) -> int:
    """argparse type of counts that may be 0 (``--max-retries``) and of seeds (numpy's generators take no negative
    one)."""
    if not (text.isascii() and text.isdecimal()):  # "١٢" is decimal to Python, and to no reader of the command
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {quoted(text)}")
    return _whole(text)


def _whole(text: str) -> int:
    """``int(text)`` of a text of decimal digits; one of more digits than Python reads (4300, a ``ValueError`` that
    argparse would answer with the whole text) is an ``ArgumentTypeError`` saying so."""
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a number of {len(text.strip().lstrip('+-'))} digits, more than any count "
                                         "or seed here") from None


def file_system_name(path: Path) -> str:
    """A TREC run file's system name: its file name without ``.trec`` / ``.run`` / ``.txt``."""
    name = path.name
    for suffix in (".trec", ".run", ".txt"):
        name = name.removesuffix(suffix)
    return name


def add_benchmark_arguments(p: argparse.ArgumentParser) -> None:
    """``--benchmark``, ``--setting`` and ``--root``: the same for every command that reads one benchmark."""
    p.add_argument("--benchmark", required=True, help="a benchmark name (instir summary lists the bundled samples; "
                                                      "instir fetch downloads the real ones)")
    p.add_argument("--setting", default="instructed", help="benchmark setting (default: instructed)")
    p.add_argument("--root", default=None,
                   help="local benchmark files: a benchmark folder, or a data root laid out like the fetch cache "
                        "(default: the fetch cache; samples are always bundled)")


def benchmark_from_args(args: argparse.Namespace) -> Benchmark:
    """The benchmark named by :func:`add_benchmark_arguments`' options."""
    from instir.benchmarks.registry import load_benchmark

    return load_benchmark(args.benchmark, args.setting, root=args.root)
