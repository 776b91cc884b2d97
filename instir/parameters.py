"""The rules every front end's values go through, one per kind of value, each naming where the
value came from (``where``: ``parameter 'k'`` for a notebook parameter, ``grid.yaml:3: field 'k'`` for
a grid file) in its one-line error. Notebook parameters arrive as papermill hands them over:
``-p benchmarks instructir-sample`` gives the kernel a string where the parameters cell has a list,
so every list-of-names value goes through :func:`names`. :mod:`instir.stages.request` builds a run
request from these rules."""

from __future__ import annotations

import json
import math
import numbers
import os
import re
from collections.abc import Sequence
from pathlib import Path

from instir.errors import UnknownNameError, UsageError, quoted, unknown
from instir.inputs import expanded

#: The largest depth or count: pytrec_eval holds a measure's cutoff in a C int, so a run deeper than this could
#: never be scored at its depth (and no corpus, judge sample or resample count comes near it).
MAX_CUTOFF = 2**31 - 1


def _where(parameter: str) -> str:
    return f"parameter {parameter!r}"


def names(value: str | Sequence[str], parameter: str = "names", *, where: str | None = None,
          unique: bool = False) -> list[str]:
    """A list parameter as a list: a list as it is, a string as ``instir run -p`` reads one, a JSON list or its
    comma-separated items (``-p benchmarks instructir-sample`` to papermill gives a string, not a one-item list);
    ``unique``: a name given twice is refused."""
    where = where or _where(parameter)
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as err:
            raise UsageError(f"{where}: {quoted(value)} is no JSON list ({err.msg}); give names, comma-separated") \
                from None
    if isinstance(value, str):
        given = [item.strip() for item in value.split(",") if item.strip()]
    elif isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        given = list(value)
    else:
        raise UsageError(f"{where} takes names, got {quoted(value if not isinstance(value, tuple) else list(value))}")
    if unique:  # by a set: a grid of 120,000 names (1 MiB) took minutes, each name looked for among those before it
        seen: set[str] = set()
        twice = next((name for name in given if name in seen or seen.add(name)), None)
        if twice is not None:
            raise UsageError(f"{where}: {quoted(twice)} is given twice")
    return given


def choices(value: str | Sequence[str], known: Sequence[str], kind: str, *, where: str) -> list[str]:
    """A non-empty list of names each of ``known`` (a ``kind``: ``setting``, ``variant``), none given
    twice; the closest known name suggested for one that is not."""
    given = names(value, where=where, unique=True)
    if not given:
        raise UsageError(f"{where} is empty: name at least one of {', '.join(known)}")
    for name in given:
        if name not in known:
            raise UnknownNameError(f"{where}: {unknown(kind, name, known)}")
    return given


def benchmark_names(value: str | Sequence[str], *, where: str = "parameter 'benchmarks'") -> list[str]:
    """A ``benchmarks`` parameter as benchmark names (:func:`names`), a collection such as
    ``followir-sample`` standing for its benchmarks (:func:`instir.benchmarks.catalog.expand`);
    an empty list, a name given twice and a name the catalog lacks (with the closest one) refused
    in one line, so every stage answers a misspelt name as the command line does, before any work."""
    from instir.benchmarks import catalog

    given = names(value, where=where, unique=True)
    if not given:
        raise UsageError(f"{where} is empty: name at least one, e.g. {catalog.sample_benchmarks()[0]!r}")
    known = catalog.known_names()
    for name in given:
        if name not in known:
            raise UnknownNameError(f"{where}: {unknown('benchmark', name, known)}")
    return catalog.expand(given)


def depth(value: object, parameter: str = "k", *, where: str | None = None) -> int:
    """A count (the cut-off ``k``, a measure's cutoff, a number of instances) as a whole number from 1 to
    :data:`MAX_CUTOFF`: the one rule of every depth, whether from a grid, a parameter, an option or a call;
    text such as ``"10"``, a fraction, a boolean or ``10**20`` refused in one line naming the parameter
    (``where=""``: the line begins ``takes …``, for an option's type, whose name argparse puts before it)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not 1 <= value <= MAX_CUTOFF:
        where = _where(parameter) if where is None else where
        raise UsageError(f"{where} takes a whole number of at least 1 (at most {MAX_CUTOFF:,}), "
                         f"got {quoted(value)}".lstrip())
    return int(value)


def count_within(value: object, low: int, high: int, what: str) -> int:
    """``value`` when it is a whole number from ``low`` to ``high``, else a :class:`UsageError` naming ``what``:
    the one rule of the bounded counts (resamples, repeats, pairs per stratum, requests at once), where one
    wrong keystroke would mean hours of work or a million paid calls. numpy's integers count too (as :func:`depth`'s
    do: a DataFrame hands them over); the value is quoted bounded (:func:`~instir.errors.quoted`), whatever its size."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not low <= value <= high:
        raise UsageError(f"{what} must be a whole number from {low:,} to {high:,}, got {quoted(value)}")
    return int(value)


#: The longest time limit, in seconds (a day): the socket an HTTP attempt waits on takes no more than about 9.2e9 s
#: (2^63 ns), and one longer failed every judgment with "OverflowError: timestamp out of range for platform time_t".
MAX_SECONDS = 86_400
#: The lowest rate of requests per minute (one a day): a request's wait for its turn is at most :data:`MAX_SECONDS`.
MIN_PER_MINUTE = 60 / MAX_SECONDS


def positive_number(value: object, *, where: str, at_least: float = 0.0, at_most: float = math.inf) -> float:
    """A positive finite number (a rate, a timeout), from ``at_least`` (a rate per minute: one a day, the longest
    wait, :data:`MAX_SECONDS`) to ``at_most`` (a timeout: :data:`MAX_SECONDS`)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        raise UsageError(f"{where} takes a positive number, got {quoted(value)}")
    if value > at_most:
        raise UsageError(f"{where} takes a positive number of at most {at_most:,g}, got {quoted(value)}")
    if value < at_least:
        raise UsageError(f"{where} takes a positive number of at least {at_least:.6g}, got {quoted(value)}")
    return float(value)


def text(value: object, *, where: str) -> str:
    """A string value (a model name, a URL)."""
    if not isinstance(value, str):
        raise UsageError(f"{where} takes a string, got {quoted(value)}")
    return value


def folder(value: object, *, where: str) -> str | None:
    """A folder value: a path (a string without NUL); empty or absent: None (the default folder). A ``$NAME`` or
    ``${NAME}`` in it is refused: no shell expands it here (a grid's ``cache_dir: $HOME/cache`` made a folder named
    ``$HOME`` in the working directory, which ``rm -rf $HOME`` would then be typed to remove)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or "\x00" in value:
        raise UsageError(f"{where} takes a folder path (a string), got {quoted(value)}")
    variable = re.search(r"\$(?:\{[A-Za-z_][A-Za-z0-9_]*\}|[A-Za-z_][A-Za-z0-9_]*)", value)
    if variable:
        raise UsageError(f"{where}: {quoted(value)} names the environment variable {variable.group()}, which is not "
                         "expanded here; write the folder itself (~ stands for the home folder)")
    return value


def home_path(path: str | Path) -> str:
    """``path`` made absolute, with the home folder written ``~`` (``~/work/reports/sample``): how
    instir writes paths into parameters, report.json and the index, which a user may publish.
    :func:`instir.report.layout.user_path` expands it again."""
    absolute = Path(os.path.abspath(expanded(path)))  # symlinks kept: a venv's python stays itself
    try:
        return str(Path("~") / absolute.relative_to(Path.home()))
    except (ValueError, RuntimeError):  # outside the home folder, or no home
        return str(absolute)
