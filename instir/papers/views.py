"""The papers' own numbers as the reports show them, family by family as each spec's
``[papers]`` says: the tables with model rows as printed (×100), the reported scores listed
with who reported them, the per-level curves, and the dataset statistics."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from instir.benchmarks import catalog
from instir.metrics.table import pivoted
from instir.papers.loader import family_papers, load_reported


@dataclass
class ReportedView:
    """One table of a paper's numbers: ``title``, the ``table`` (a paper's scores as text ×100 at the precision it
    printed them: :func:`printed_x100`), and its ``source`` (empty when the rows carry their own)."""

    title: str
    table: pd.DataFrame
    source: str = ""


def printed_x100(rows: pd.DataFrame) -> list[str]:
    """Each reported score of ``rows`` ×100 (``value / scale``, the 0–1 scale, ×100) as text at the precision the
    paper printed it (the step of its ``rounding``, moved by the ×100): IFIR's nDCG@20 printed 0.25 reads ``25`` and
    its InstFol printed −4.85 (already ×100) ``-4.85``, never with a digit more or less than the paper printed."""
    out = []
    for value, scale, rounding in zip(rows["value"], rows["scale"], rows["rounding"]):
        digits = max(0, round(-math.log10(2 * rounding * 100 / scale)))
        out.append(f"{value / scale * 100:.{digits}f}")
    return out


def reported_views(reported: Mapping[str, pd.DataFrame]) -> list[ReportedView]:
    """Notebook 05's tables of each family's paper: every table matching the spec's ``tables``
    (a regular expression over table names) ×100 at the precision printed (:func:`printed_x100`) with its source,
    and, with ``listed``, the reported instructed scores row by row (the same, secondary sources marked)."""
    views = []
    for paper in family_papers():
        spec, rows = catalog.family(paper).papers, reported[paper]
        if spec.get("tables"):
            for name, table in rows[rows["table"].str.match(spec["tables"])].groupby("table", sort=False):
                shown = table.assign(level=table["level"].astype("string").fillna(""), value=printed_x100(table))
                view = pivoted(shown, index=("model",), columns=("subset", "level", "metric"))
                views.append(ReportedView(f"{catalog.family(paper).printed} {name} (×100)", view,
                                          table["source"].iloc[0]))
        if spec.get("listed"):
            shown = rows[rows["setting"] == "instructed"]
            views.append(ReportedView(f"{catalog.family(paper).printed} scores as reported (×100)",
                                      shown.assign(value=printed_x100(shown))[
                                          ["model", "measure", "value", "secondary", "reference", "source"]]))
    return views


def reported_curves(reported: Mapping[str, pd.DataFrame]) -> list[tuple[str, pd.DataFrame]]:
    """The tables whose per-level values notebook 05 plots as curves (a spec's ``curves``,
    IFIR's Table 11 as its Fig. 4 plots it): the paper's name and the table's rows."""
    return [(catalog.family(p).printed, reported[p][reported[p]["table"] == catalog.family(p).papers["curves"]])
            for p in family_papers() if catalog.family(p).papers.get("curves")]


def statistics_views() -> list[ReportedView]:
    """The dataset statistics the papers print (notebook 01): a spec's ``statistics`` table as
    printed (subsets × statistics, with its source), or, ``listed``, the reported counts each
    with who printed them (two sources printing one count make one row naming both)."""
    views = []
    for paper in family_papers():
        where, rows = catalog.family(paper).papers.get("statistics"), load_reported(paper)
        printed = catalog.family(paper).printed
        if where == "listed":
            counts = rows[rows["setting"] == ""]
            said = ["measure", "value_printed", "reference"]
            counts = counts.groupby(said, sort=False)["source"].agg(lambda s: list(dict.fromkeys(s))).reset_index()
            views.append(ReportedView(f"{printed} statistics, each with who printed it", counts))
        elif where:
            table = rows[rows["table"] == where]
            views.append(ReportedView(f"{printed} {where} (as printed)",
                                      table.pivot(index="subset", columns="metric", values="value_printed"),
                                      table["source"].iloc[0]))
    return views
