"""The tidy result table: one row per system × measure × slice (benchmark, setting, subset,
level) with its value and the number of queries averaged, plus paper-style wide views and
exports (CSV, Parquet, LaTeX, Markdown).

Slices: ``subset`` is the query's subset (``all`` where the benchmark has none; ``average``
for IFIR's Average), ``level`` is ``all`` for instances pooled across levels, or the level
(``1``, ``2``, ``3``) for per-level rows, which exist only when a benchmark has several
levels. Values are on the 0–1 scale; the wide view scales them (papers print ×100).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from instir import atomic
from instir.benchmarks.types import Benchmark

COLUMNS = ["system", "benchmark", "setting", "subset", "level", "measure", "value", "n_queries"]


def _level(level: int | None) -> str:
    return "all" if level is None else str(level)


def summarise(per_query: pd.DataFrame, benchmark: Benchmark, system: str) -> pd.DataFrame:
    """Table rows of one system's per-query values (``qid``, ``measure``, ``value``): the mean
    per subset pooled across levels, and per level when the benchmark has several."""
    scored = per_query["qid"].unique()
    unknown = set(scored) - set(benchmark.queries)
    if unknown:
        raise KeyError(f"{len(unknown)} scored queries are not in {benchmark.name}, e.g. {sorted(unknown)[:3]}")
    queries = benchmark.queries
    frame = per_query.assign(subset=per_query["qid"].map({q: queries[q].subset or "all" for q in scored}),
                             level=per_query["qid"].map({q: _level(queries[q].level) for q in scored}))
    slices = [frame.assign(level="all")]
    if frame["level"].nunique() > 1:
        slices.append(frame)
    pooled = pd.concat(slices, ignore_index=True)
    rows = (pooled.groupby(["subset", "level", "measure"], sort=False)["value"]
            .agg(value="mean", n_queries="size").reset_index())
    return with_slice(rows, benchmark, system)


def with_slice(rows: pd.DataFrame, benchmark: Benchmark, system: str, *, subset: str = "all",
               level: str = "all") -> pd.DataFrame:
    """Complete ``rows`` (at least ``measure``, ``value``, ``n_queries``) with the slice
    columns, taking ``subset``/``level`` from the rows where they have them."""
    out = rows.assign(system=system, benchmark=benchmark.name, setting=benchmark.setting)
    if "subset" not in out:
        out["subset"] = subset
    if "level" not in out:
        out["level"] = level
    return out[COLUMNS]


def combine(tables: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Several tables (systems, benchmarks, settings) as one, in the standard column order."""
    return pd.concat([t[COLUMNS] for t in tables], ignore_index=True)


def wide(table: pd.DataFrame, *, index: Sequence[str] = ("system",),
         columns: Sequence[str] = ("benchmark", "setting", "subset", "level", "measure"),
         scale: float = 100.0, digits: int = 1) -> pd.DataFrame:
    """A paper-style view: ``index`` down, ``columns`` across (levels of the column index
    that hold a single value are dropped), values × ``scale`` rounded to ``digits``."""
    return (pivoted(table, index=index, columns=columns) * scale).round(digits)


def pivoted(table: pd.DataFrame, *, index: Sequence[str] = ("system",),
            columns: Sequence[str] = ("benchmark", "setting", "subset", "level", "measure")) -> pd.DataFrame:
    """:func:`wide`'s layout of the ``value`` column, its values as they are (numbers, or text already formatted:
    a paper's numbers as printed); one value per cell, else ValueError."""
    duplicated = table.duplicated([*index, *columns])
    if duplicated.any():
        raise ValueError(f"several values for one cell, e.g. {table[duplicated].iloc[0].to_dict()}")
    view = table.pivot_table(index=list(index), columns=list(columns), values="value", aggfunc="first", sort=False)
    if isinstance(view.columns, pd.MultiIndex):
        constant = [name for name, lv in zip(view.columns.names, view.columns.levels) if len(lv) == 1]
        if len(constant) < view.columns.nlevels:
            view.columns = view.columns.droplevel(constant)
    return view


def export(table: pd.DataFrame, path: str | Path, **wide_options) -> Path:
    """Write ``table`` by file suffix, atomically: ``.csv`` / ``.parquet`` hold the tidy table;
    ``.tex`` (LaTeX, needs jinja2) and ``.md`` (Markdown, needs tabulate) hold the
    :func:`wide` view, to which ``wide_options`` are passed."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in (".csv", ".parquet"):
        data = atomic.frame_bytes(path.with_suffix(suffix), table)
    elif suffix == ".tex":
        view = wide(table, **wide_options)
        data = view.to_latex(float_format=f"%.{wide_options.get('digits', 1)}f", na_rep="--").encode("utf-8")
    elif suffix == ".md":
        data = (wide(table, **wide_options).to_markdown() + "\n").encode("utf-8")
    else:
        raise ValueError(f"unknown table format {suffix!r} (use .csv, .parquet, .tex or .md)")
    atomic.write_bytes(path, data)
    return path


def subset_average(table: pd.DataFrame, subsets: Iterable[str] | None = None) -> pd.DataFrame:
    """A paper's Average column (IFIR Table 3's): per system, setting and measure, the unweighted
    mean over subsets of the pooled (``level == "all"``) values. Rows come back in the table's
    layout with ``benchmark`` = the collection (``ifir`` / ``ifir-sample``), ``subset`` =
    ``average`` and ``n_queries`` summed. Every system × measure must have all ``subsets``
    (default: all subsets the table holds of that collection), otherwise the averages would not
    be comparable."""
    pooled = table[(table["level"] == "all") & (table["subset"] != "average")].copy()
    pooled["benchmark"] = pooled["benchmark"].str.split("/").str[0]
    keys = ["system", "benchmark", "setting", "measure"]
    kept = []
    for _, rows in pooled.groupby("benchmark", sort=False):  # a family and its sample: each its own subsets
        wanted = sorted(set(subsets) if subsets is not None else set(rows["subset"]))
        for key, part in rows.groupby(keys, sort=False):
            have = set(part["subset"])
            if not set(wanted) <= have:
                raise ValueError(f"{dict(zip(keys, key))}: subsets {sorted(have)} differ from {wanted}")
        kept.append(rows[rows["subset"].isin(wanted)])
    out = (pd.concat(kept) if kept else pooled).groupby(keys, sort=False).agg(
        value=("value", "mean"), n_queries=("n_queries", "sum")).reset_index()
    out["subset"] = "average"
    out["level"] = "all"
    return out[list(table.columns)]
