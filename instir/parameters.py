"""Notebook parameters as papermill hands them over: ``-p benchmarks instructir-sample`` gives
the kernel a string where the parameters cell has a list, so every list-of-names parameter goes
through :func:`names` before it is used."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from instir.errors import UsageError, quoted, unknown


def names(value: str | Sequence[str], parameter: str = "names") -> list[str]:
    """A list parameter as a list: a list as it is, a string as its comma-separated items
    (``-p benchmarks instructir-sample`` to papermill gives a string, not a one-item list)."""
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    if not all(isinstance(item, str) for item in value):
        raise UsageError(f"parameter {parameter!r} takes names, got {quoted(list(value))}")
    return list(value)


def benchmark_names(value: str | Sequence[str]) -> list[str]:
    """A ``benchmarks`` parameter as benchmark names (:func:`names`), a collection such as
    ``followir-sample`` standing for its benchmarks (:func:`instir.benchmarks.catalog.expand`);
    an empty list, and a name the catalog lacks (with the closest one), refused in one line, so
    every stage answers a misspelt name as the command line does, before any work."""
    from instir.benchmarks import catalog

    given = names(value, "benchmarks")
    if not given:
        raise UsageError(f"parameter 'benchmarks' is empty: name at least one, e.g. {catalog.sample_benchmarks()[0]!r}")
    known = catalog.known_names()
    for name in given:
        if name not in known:
            raise unknown("benchmark", name, known, where="in parameter 'benchmarks'")
    return catalog.expand(given)


def depth(value: object, parameter: str = "k") -> int:
    """A cut-off parameter (``k``) as a whole number of at least 1; text such as ``"10"``, a
    fraction or a boolean refused in one line naming the parameter."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UsageError(f"parameter {parameter!r} takes a whole number of at least 1 (e.g. {parameter} = 10), "
                         f"got {quoted(value)}")
    return value


def home_path(path: str | Path) -> str:
    """``path`` made absolute, with the home folder written ``~`` (``~/work/reports/sample``): how
    instir writes paths into parameters, report.json and the index, which a user may publish.
    :func:`instir.report.layout.user_path` expands it again."""
    absolute = Path(os.path.abspath(Path(path).expanduser()))  # symlinks kept: a venv's python stays itself
    try:
        return str(Path("~") / absolute.relative_to(Path.home()))
    except (ValueError, RuntimeError):  # outside the home folder, or no home
        return str(absolute)
