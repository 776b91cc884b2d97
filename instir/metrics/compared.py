"""One call from runs to a results table, as ranx's ``compare`` gives a ``Report``: the runs scored on a
benchmark (:func:`instir.metrics.evaluate_runs`), every pair of systems tested per measure (paired per query, and
per query group for Robustness), and the means ×100 with the letters of the systems each one beats —
shown as HTML in a notebook, written as LaTeX (ranx's rows, :func:`instir.metrics.latex.latex_table`) or
Markdown."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from instir.metrics.evaluation import Evaluation
from instir.metrics.latex import (
    MAX_P,
    best_systems,
    check_digits,
    evaluation_marks,
    latex_table,
    tests_said,
)
from instir.report.html import NO_MATH, escape_text


@dataclass(frozen=True, repr=False)
class RunComparison:
    """The result of :func:`compare_runs`: ``evaluation`` (the scores compared), ``marks`` (per system and measure: its
    letter, mean and the letters of the systems it beats, :func:`~instir.metrics.latex.significance_marks`) and
    how the table shows the means (× ``scale``, ``digits`` decimals)."""

    evaluation: Evaluation
    marks: pd.DataFrame
    scale: float = 100.0
    digits: int = 1

    def __post_init__(self) -> None:
        """A ``digits`` no format can show is refused as the comparison is made, not when the table is first shown."""
        check_digits(self.digits)

    @property
    def systems(self) -> list[str]:
        """The systems, in the order given (their letters ``a``, ``b`` … follow it)."""
        return list(dict.fromkeys(self.marks["system"]))

    @property
    def measures(self) -> list[str]:
        """The measures, in the order asked."""
        return list(dict.fromkeys(self.marks["measure"]))

    def means(self) -> pd.DataFrame:
        """The means × ``scale``, one row per system (in order) and one column per measure."""
        wide = self.marks.pivot(index="system", columns="measure", values="mean") * self.scale
        return wide.loc[self.systems, self.measures].rename_axis(columns=None)

    def caption(self) -> str:
        """What the letters mean: the test, its threshold, the correction and what it pairs."""
        said, units = tests_said(self.marks)
        return (f"Scores ×{self.scale:g}. A letter after a score names a system it beats: {said}, paired by "
                f"{' and by '.join(units)}. The best score of each measure is in bold.")

    def _cells(self, bold: tuple[str, str], sup: tuple[str, str], text=str) -> list[list[str]]:
        best = best_systems(self.marks, self.scale, self.digits)
        cell = {(r.system, r.measure): r for r in self.marks.itertuples()}
        rows = []
        for system in self.systems:
            row = [cell[(system, self.measures[0])].letter, text(system)]
            for measure in self.measures:
                mark = cell[(system, measure)]
                shown = f"{round(mark.mean * self.scale, self.digits):.{self.digits}f}"
                shown = f"{bold[0]}{shown}{bold[1]}" if best[measure] == system else shown
                row.append(shown + (f"{sup[0]}{mark.beats}{sup[1]}" if mark.beats else ""))
            rows.append(row)
        return rows

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{escape_text(h)}</th>" for h in ["#", "system", *self.measures])
        body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>"
                       for row in self._cells(("<b>", "</b>"), ("<sup>", "</sup>"), escape_text))
        return (f'<div class="{NO_MATH}"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
                f"<p><small>{escape_text(self.caption())}</small></p></div>")

    def to_markdown(self) -> str:
        """A Markdown table (GitHub's: ``<sup>`` for the letters) with the caption under it."""
        def text(value: str) -> str:
            return value.replace("|", "\\|")

        header = ["#", "system", *map(text, self.measures)]
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in self._cells(("**", "**"), ("<sup>", "</sup>"), text)]
        return "\n".join(lines + ["", self.caption(), ""])

    def to_latex(self, caption: str | None = None, label: str = "tab:results") -> str:
        """The LaTeX table ranx's ``Report.to_latex`` prints, row for row (``caption``: a first sentence)."""
        return latex_table(self.marks, scale=self.scale, digits=self.digits, caption=caption, label=label)

    def __repr__(self) -> str:
        return self.to_markdown()


def compare_scores(evaluation: Evaluation, systems: Sequence[str] | None = None,
                   measures: Sequence[str] | None = None, *, scale: float = 100.0, digits: int = 1,
                   **options) -> RunComparison:
    """The comparison of scores already computed (``evaluation.per_query``, and ``per_group`` for Robustness): of
    ``systems`` (default: in order of appearance) on ``measures`` (default: every one scored, in that order);
    ``options`` (``test``, ``max_p``, ``correction``, ``n_resamples``, ``seed``) go to
    :func:`~instir.metrics.latex.significance_marks`."""
    if measures is not None:
        order = {name: i for i, name in enumerate(measures)}
        evaluation = Evaluation(*(part[part["measure"].isin(order)] for part in (evaluation.per_query,
                                                                                  evaluation.per_group)),
                                evaluation.table)
    marks = evaluation_marks(evaluation, systems=systems, **options)
    if measures is not None:
        marks = marks.iloc[marks["measure"].map(order).argsort(kind="stable")].reset_index(drop=True)
    return RunComparison(evaluation, marks, scale, digits)


def compare_runs(benchmark, runs: Mapping[str, object], measures: Sequence[object] | None = None, *,
                 test: str = "ttest", max_p: float = MAX_P, correction: str | None = "holm", scale: float = 100.0,
                 digits: int = 1) -> RunComparison:
    """Score ``runs`` (``{system name: Run or DataFrame}``, letters ``a``, ``b`` … in this order) on ``benchmark``
    with ``measures`` (exactly these; default: the family's and those derived from them, as
    :func:`~instir.metrics.evaluate_runs` scores them) and test every pair of
    systems on each (``test``: ``ttest`` or ``perm``; ``correction``: ``holm`` or None; significant at
    ``p_adjusted`` ≤ ``max_p``), as ranx's ``compare`` does."""
    from instir.errors import UsageError, quoted
    from instir.metrics.inputs import run_of
    from instir.metrics.scoring import check_ids_belong, evaluate_runs, require_runs, scored_measures

    require_runs(runs, benchmark, "compare_runs(benchmark, runs)")
    check_digits(digits)  # before the runs are scored
    if len(runs) < 2:
        raise UsageError(f"compare_runs compares two runs or more, got {len(runs)}")
    for name, run in runs.items():  # as instir.evaluate: a run of another benchmark is refused, stray ids warned
        try:
            check_ids_belong(run_of(run), benchmark)
        except UsageError as err:
            raise UsageError(f"{quoted(name)}: {err}") from None
    scored = scored_measures(benchmark, measures, derived=measures is None)
    evaluation = evaluate_runs(runs, benchmark, scored, derived=False)
    # the measures asked, not the ones Robustness is computed from (scored too, and in the evaluation)
    return compare_scores(evaluation, list(runs), [str(measure) for measure in scored], scale=scale, digits=digits,
                          test=test, max_p=max_p, correction=correction)
