"""Paper tables with significance marks as ranx prints them (``ranx.Report.to_latex`` and
``Report.get_superscript_for_latex`` / ``get_phantoms_for_latex`` in ranx 0.3.21's
``ranx/data_structures/report.py``; ``tests/metrics/test_latex.py`` compares the rows with ranx's).

ranx's convention and what the kit adds to it are in docs/interop.md, "Significance marks".
The units are queries for per-query measures and query groups for Robustness (its value is a
per-group minimum): :func:`significance_marks` takes either, as ``instir evaluate`` hands them over.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pandas as pd

from instir.errors import UsageError
from instir.metrics.stats import (
    N_RESAMPLES,
    SIGNIFICANCE_LEVEL,
    holm,
    paired_permutation_p,
    paired_ttest,
    paired_values,
)
from instir.parameters import count_within

if TYPE_CHECKING:
    from instir.metrics.evaluation import Evaluation

#: the letters that name the systems, in order (as ranx's ``chars``)
LETTERS = "abcdefghijklmnopqrstuvwxyz"
#: the tests :func:`significance_marks` runs, as a caption names them
TESTS = {"ttest": "paired Student's t-test", "perm": "paired permutation test"}
#: the threshold of the letters: the kit's one significance level, ranx's default (``ranx.compare(max_p=0.01)``)
MAX_P = SIGNIFICANCE_LEVEL

#: Most decimals a table shows a mean with: a double holds about 15 significant digits.
MAX_DIGITS = 15


def check_digits(digits: object) -> int:
    """``digits`` when it is a whole number of decimals from 0 to :data:`MAX_DIGITS`, else a one-line
    :class:`~instir.errors.UsageError` (``-1`` gave Python's "Format specifier missing precision"): the rule of
    every table's decimals, :func:`latex_table`'s and :func:`best_systems`' as
    :class:`~instir.metrics.compared.RunComparison`'s."""
    return count_within(digits, 0, MAX_DIGITS, "digits (the decimals a table shows a mean with)")


#: how the caption names the units the tests pair
UNIT_WORDS = {"qid": "query", "group": "query group"}

MARK_COLUMNS = ["system", "letter", "measure", "unit", "mean", "beats", "test", "max_p", "correction"]
PAIR_COLUMNS = ["measure", "unit", "system", "other", "mean", "other_mean", "p", "p_adjusted", "significant"]


def pairwise_tests(per_unit: pd.DataFrame, *, unit: str = "qid", systems: Sequence[str] | None = None,
                   measures: Sequence[str] | None = None, test: str = "ttest", max_p: float = MAX_P,
                   correction: str | None = None, n_resamples: int = N_RESAMPLES, seed: int = 0) -> pd.DataFrame:
    """Every pair of systems of ``per_unit`` (columns ``system``, ``unit``, ``measure``,
    ``value``) tested once per measure, as ranx's ``compare`` does: one row per measure × pair
    (``system`` before ``other`` in ``systems`` order) with both means, ``p``, ``p_adjusted``
    (Holm across the pairs of that measure with ``correction="holm"``, else ``p``) and
    ``significant`` (``p_adjusted`` ≤ ``max_p``). Every system must have a value for the same units."""
    if test not in TESTS:
        raise UsageError(f"test must be one of {sorted(TESTS)}, got {test!r}")
    if correction not in (None, "holm"):
        raise UsageError(f"correction must be None or 'holm', got {correction!r}")
    if isinstance(max_p, bool) or not isinstance(max_p, (int, float)) or not 0 < max_p <= 1:
        raise UsageError(f"max_p must be a probability above 0 and at most 1, got {max_p!r}")
    systems = list(systems) if systems is not None else list(dict.fromkeys(per_unit["system"]))
    if len(systems) > len(LETTERS):
        raise ValueError(f"at most {len(LETTERS)} systems can be lettered, got {len(systems)}")
    measures = list(measures) if measures is not None else list(dict.fromkeys(per_unit["measure"]))
    rows = []
    for measure in measures:
        wide = paired_values(per_unit, measure, systems, unit)
        pairs = []
        for i, system in enumerate(systems):
            for other in systems[i + 1:]:
                x, y = wide[system].to_numpy(), wide[other].to_numpy()
                p = paired_ttest(x, y)[1] if test == "ttest" else paired_permutation_p(x, y, n_resamples=n_resamples,
                                                                                       seed=seed)
                pairs.append({"measure": measure, "unit": unit, "system": system, "other": other,
                              "mean": float(x.mean()), "other_mean": float(y.mean()), "p": p})
        adjusted = holm([r["p"] for r in pairs]) if correction == "holm" else [r["p"] for r in pairs]
        for row, p_adjusted in zip(pairs, adjusted):
            rows.append({**row, "p_adjusted": float(p_adjusted), "significant": bool(p_adjusted <= max_p)})
    return pd.DataFrame(rows, columns=PAIR_COLUMNS)


def significance_marks(per_unit: pd.DataFrame, *, unit: str = "qid", systems: Sequence[str] | None = None,
                       measures: Sequence[str] | None = None, test: str = "ttest", max_p: float = MAX_P,
                       correction: str | None = None, n_resamples: int = N_RESAMPLES, seed: int = 0) -> pd.DataFrame:
    """Each system's letter and, per measure, its mean over the units and ``beats``: the letters
    of the systems it beats (significant in :func:`pairwise_tests` and a higher mean), in letter
    order — ranx's superscripts. One row per system × measure (:data:`MARK_COLUMNS`), systems in
    ``systems`` order (default: first appearance), ready for :func:`latex_table`."""
    systems = list(systems) if systems is not None else list(dict.fromkeys(per_unit["system"]))
    pairs = pairwise_tests(per_unit, unit=unit, systems=systems, measures=measures, test=test, max_p=max_p,
                           correction=correction, n_resamples=n_resamples, seed=seed)
    measures = list(measures) if measures is not None else list(dict.fromkeys(per_unit["measure"]))
    means = per_unit[per_unit["system"].isin(systems)].groupby(["system", "measure"])["value"].mean()
    won = {(r.measure, r.system, r.other) for r in pairs.itertuples() if r.significant and r.mean > r.other_mean}
    won |= {(r.measure, r.other, r.system) for r in pairs.itertuples() if r.significant and r.other_mean > r.mean}
    rows = []
    for i, system in enumerate(systems):
        for measure in measures:
            beats = "".join(LETTERS[j] for j, other in enumerate(systems) if (measure, system, other) in won)
            rows.append({"system": system, "letter": LETTERS[i], "measure": measure, "unit": unit,
                         "mean": float(means[(system, measure)]), "beats": beats, "test": test, "max_p": max_p,
                         "correction": correction or "none"})
    return pd.DataFrame(rows, columns=MARK_COLUMNS)


def evaluation_marks(evaluation: Evaluation, **options) -> pd.DataFrame:
    """The marks of every pair of an :func:`instir.metrics.evaluate_runs` result's systems on all
    its measures: per query, and per query group for Robustness (``instir evaluate`` writes their
    :func:`latex_table` beside its CSV). ``options`` go to :func:`significance_marks`."""
    parts = [significance_marks(scores, unit=unit, **options)
             for scores, unit in ((evaluation.per_query, "qid"), (evaluation.per_group, "group")) if len(scores)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=MARK_COLUMNS)


def escape(text: str) -> str:
    """``text`` with LaTeX's special characters escaped (system and measure names)."""
    out = []
    for char in str(text):
        if char == "\\":
            out.append(r"\textbackslash{}")
        elif char in "&%$#_{}":
            out.append("\\" + char)
        elif char == "~":
            out.append(r"\textasciitilde{}")
        elif char == "^":
            out.append(r"\textasciicircum{}")
        else:
            out.append(char)
    return "".join(out)


def _format(value: float, scale: float, digits: int) -> str:
    return f"{round(value * scale, digits):.{digits}f}"


def best_systems(marks: pd.DataFrame, scale: float = 100.0, digits: int = 1) -> dict[str, str | None]:
    """The system shown in bold per measure of :func:`significance_marks`, by ranx's rule: the first system whose
    printed score (× ``scale``, ``digits`` decimals) is above every earlier one and above 0 (None: none is)."""
    check_digits(digits)
    systems = list(dict.fromkeys(marks["system"]))
    mean = {(r.system, r.measure): r.mean for r in marks.itertuples()}
    best: dict[str, str | None] = {}
    for m in dict.fromkeys(marks["measure"]):
        top, best[m] = 0.0, None
        for s in systems:
            shown = round(mean[(s, m)] * scale, digits)
            if top < shown:
                top, best[m] = shown, s
    return best


def tests_said(marks: pd.DataFrame, *, at_most: str = "p ≤ {}", text=str) -> tuple[str, list[str]]:
    """What the letters of :func:`significance_marks` rest on, as a caption says it: the tests with their threshold
    (``at_most`` formats it) and correction, and the units they pair (an unknown unit passed through ``text``)."""
    tests = sorted({(r.test, r.max_p, r.correction) for r in marks.itertuples()})
    said = "; ".join(f"{TESTS[t]} with {at_most.format(f'{p:g}')}" + (", Holm-corrected across the pairs"
                                                                      if c == "holm" else "") for t, p, c in tests)
    return said, [UNIT_WORDS.get(u, text(u)) for u in dict.fromkeys(marks["unit"])]


def latex_table(marks: pd.DataFrame, *, scale: float = 100.0, digits: int = 1, caption: str | None = None,
                label: str = "tab:results") -> str:
    """A LaTeX table (booktabs) of :func:`significance_marks`: a row per system with its letter,
    its name and its score per measure (× ``scale``, ``digits`` decimals) carrying the letters it
    beats as a superscript; the rows are ranx's ``Report.to_latex`` rows, character for character.
    The caption names the test, the threshold and the correction (``caption`` adds a first
    sentence, e.g. the benchmark). Unlike ranx's string, the text is a LaTeX file as it is (the
    packages it needs are named in a comment, not in a banner)."""
    if marks.empty:
        raise ValueError("no systems to tabulate")
    systems = list(dict.fromkeys(marks["system"]))
    measures = list(dict.fromkeys(marks["measure"]))
    cell = {(r.system, r.measure): r for r in marks.itertuples()}
    missing = [(s, m) for s in systems for m in measures if (s, m) not in cell]
    if missing:
        raise ValueError(f"marks lack system × measure cells, e.g. {missing[:3]}")
    letters = {s: cell[(s, measures[0])].letter for s in systems}
    best = best_systems(marks, scale, digits)
    said, units = tests_said(marks, at_most="$p \\le {}$", text=escape)
    lines = [
        "% needs \\usepackage{booktabs} and \\usepackage{graphicx}",
        "\\begin{table*}[ht]", "\\centering", "\\caption{",
        *([caption] if caption else []),
        "Superscripts denote significant differences in " + said + " (paired by " + " and by ".join(units)
        + "); the best results are in boldface.",
        "}", "\\resizebox{0.8\\textwidth}{!}{",
        "\\begin{tabular}{c|l" + "|c" * len(measures) + "}", "\\toprule", "\\textbf{\\#}", "& \\textbf{Model}",
        *[f"& \\textbf{{{escape(m)}}}" for m in measures[:-1]],
        f"& \\textbf{{{escape(measures[-1])}}} \\\\ ", "\\midrule",
    ]
    for s in systems:
        cells = []
        for m in measures:
            score = _format(cell[(s, m)].mean, scale, digits)
            score = f"\\textbf{{{score}}}" if best[m] == s else score
            beats = cell[(s, m)].beats
            phantoms = "".join(letters[o] for o in systems if o != s and letters[o] not in beats)
            cells.append(f"{score}$^{{{beats}}}$\\hphantom{{$^{{{phantoms}}}$}} &".replace("$^{}$", ""))
        cells[-1] = cells[-1][:-1]
        lines.append(f"{letters[s]} &\n{escape(s)} &\n" + "\n".join(cells) + "\\\\")
    lines += ["\\bottomrule", "\\end{tabular}", "}", f"\\label{{{label}}}", "\\end{table*}", ""]
    return "\n".join(lines)

