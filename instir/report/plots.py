"""Small matplotlib plots for the reports: reproduced vs reported numbers, scores per
instruction level (like IFIR's Fig. 4), and the distribution of query-group minima behind
Robustness@k. Each function draws on the axes it is given (or new ones) and returns them;
none selects a backend, so inline figures keep working in notebooks."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from instir.benchmarks import catalog
from instir.report.html import cut, plot_text


def _axes(ax=None, **subplot_kw):
    """The given axes, or the axes of a new figure."""
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.subplots(**subplot_kw)[1]


#: characters of a metric's name kept in the scatter's legend, before an ellipsis (the reported
#: tables print some at length)
LEGEND_CHARS = 35

#: the smallest text of any figure, in points: a page shrinks a wide figure (100 dpi) to its
#: width, where 7-point legends read as 7 pixels
SMALLEST_TEXT = 9

#: line styles of :func:`plot_per_level`, one (colour, marker, dash) per line: ten colours, then
#: the next marker and dash, so the paper's fifteen models never share a look
_COLOURS = [f"C{i}" for i in range(10)]
_MARKERS = "osD^v"
_DASHES = ["-", "--", ":", "-."]


def plot_reproduced_vs_reported(compared: pd.DataFrame, *, ax=None, label_column: str | None = None,
                                x: str = "reported", y: str = "reproduced", unit: str = "", max_labels: int = 8):
    """Scatter of ``y`` against ``x`` (default the ``reproduced`` and ``reported`` columns of
    :func:`instir.papers.compare_to_papers`), one marker shape and colour per reported ``metric`` (the
    legend's entries, names cut at :data:`LEGEND_CHARS`): points within tolerance filled,
    outside hollow, without a verdict (``within_tolerance`` empty, e.g. a SAMPLE) as crosses
    (the styles in the legend when the plot mixes them; all crosses: said once in the title);
    the y = x diagonal on equal axes; the legend below the axes. Text labels from
    ``label_column`` (e.g. ``"subset_id"``) for the ``max_labels`` spots farthest from the
    diagonal (:func:`_spot_labels`). ``unit`` is appended to the axis labels (e.g. ``" ×100"``).
    Returns the axes."""
    from matplotlib.lines import Line2D

    ax = _axes(ax, figsize=(7.5, 7.5), layout="constrained")
    markers = "osD^vP*X"
    verdict = compared["within_tolerance"].astype("boolean")
    styles = {"within tolerance": verdict.fillna(False), "outside": (~verdict).fillna(False),
              "no verdict": verdict.isna()}
    mixed = sum(bool(rows.any()) for rows in styles.values()) > 1
    handles = []
    for i, (metric, rows) in enumerate(compared.groupby("metric", sort=True)):
        marker, colour = markers[i % len(markers)], f"C{i}"
        for style, chosen in styles.items():
            shown = rows[chosen.loc[rows.index]]
            if style == "within tolerance":
                ax.scatter(shown[x], shown[y], marker=marker, color=colour)
            elif style == "outside":
                ax.scatter(shown[x], shown[y], marker=marker, facecolors="none", edgecolors=colour)
            else:
                ax.scatter(shown[x], shown[y], marker="x", color=colour)
        judged = bool(verdict.loc[rows.index].notna().any())
        handles.append(Line2D([], [], linestyle="", marker=marker if judged else "x", color=colour,
                              label=plot_text(cut(metric, LEGEND_CHARS))))
    if mixed:
        handles += [Line2D([], [], linestyle="", marker="o", color="grey", label="within tolerance"),
                    Line2D([], [], linestyle="", marker="o", markerfacecolor="none", color="grey", label="outside"),
                    Line2D([], [], linestyle="", marker="x", color="grey", label="no verdict")]
    if label_column:
        for (px, py), text in _spot_labels(compared, x, y, label_column, max_labels):
            ax.annotate(plot_text(text), (px, py), fontsize=SMALLEST_TEXT, xytext=(3, 3), textcoords="offset points")
    values = pd.concat([compared[x], compared[y]]).dropna()
    if len(values):
        low, high = float(values.min()), float(values.max())
        pad = 0.05 * (high - low or 1.0)
        ax.plot([low - pad, high + pad], [low - pad, high + pad], color="grey", linewidth=0.8, linestyle="--")
        ax.set_xlim(low - pad, high + pad)
        ax.set_ylim(low - pad, high + pad)
        ax.set_aspect("equal")
    ax.set_xlabel(plot_text(f"reported (paper){unit}"))
    ax.set_ylabel(plot_text(f"reproduced{unit}"))
    ax.set_title("Reproduced vs reported" + ("" if mixed or not styles["no verdict"].all() else
                                             " (no verdicts: every point is a cross)"))
    ax.legend(handles=handles, fontsize=SMALLEST_TEXT, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=2,
              borderaxespad=0.0)
    return ax


def _spot_labels(frame: pd.DataFrame, x: str, y: str, column: str, limit: int) -> list[tuple[tuple[float, float], str]]:
    """The text labels of the ``limit`` spots farthest from the diagonal. Points are taken farthest
    first; one within 6% of the data's range of a spot (on both axes) joins that spot's label
    (its distinct texts, comma-separated) instead of starting a label of its own."""
    rows = frame[[x, y, column]].dropna(subset=[x, y])
    both = pd.concat([rows[x], rows[y]])
    near = 0.06 * (float(both.max() - both.min()) or 1.0) if len(rows) else 0.0
    spots: list[tuple[tuple[float, float], list[str]]] = []
    ordered = rows.iloc[(-(rows[y] - rows[x]).abs()).argsort(kind="stable")]  # farthest first, ties in order
    for px, py, text in zip(ordered[x], ordered[y], ordered[column].astype(str)):
        spot = next((s for s in spots if abs(s[0][0] - px) <= near and abs(s[0][1] - py) <= near), None)
        if spot is None:
            spots.append(((px, py), [text]))
        elif text not in spot[1]:
            spot[1].append(text)
    return [(at, ", ".join(texts)) for at, texts in spots[:limit]]


def panel_name(value: object) -> str:
    """A panel title as the paper prints it: subset ids become their printed names
    (``pm`` -> ``TREC-PM``, ``scifact_open`` -> ``SciFact-open``); anything else as it is."""
    printed = {sid: sub.printed for name in catalog.families() for sid, sub in catalog.family(name).subsets.items()}
    return printed.get(str(value), str(value))


def _line_style(i: int) -> dict[str, str]:
    """The ``i``-th line's colour, marker and dash: no two of the first 200 alike."""
    return {"color": _COLOURS[i % 10], "marker": _MARKERS[i // 10 % len(_MARKERS)],
            "linestyle": _DASHES[i // 50 % len(_DASHES)]}


def plot_per_level(table: pd.DataFrame, *, value: str = "value", level: str = "level", line: str = "model",
                   facet: str | None = "subset_id", ylabel: str = "nDCG@20"):
    """Score per instruction level, one line per ``line`` value (IFIR Fig. 4 style), one
    panel per ``facet`` value (a single panel when ``facet`` is None or absent), titled as the
    paper prints the subset (:func:`panel_name`), one legend for all panels outside the data.
    Rows with no level (pooled) are left out. Returns the figure."""
    import matplotlib.pyplot as plt

    rows = table[table[level].notna()].copy()
    rows[level] = rows[level].astype(int)
    panels = (sorted(rows[facet].unique()) if facet and facet in rows.columns else []) or [None]
    names = sorted(rows[line].astype(str).unique())
    style = {name: _line_style(i) for i, name in enumerate(names)}  # the same look in every panel
    # tall enough for the legend's column beside the panels (about 0.2 in a line at SMALLEST_TEXT)
    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels) + 2.6, max(3.5, 0.2 * len(names) + 0.8)),
                             squeeze=False, sharey=True, layout="constrained")
    for ax, panel in zip(axes[0], panels):
        part = rows if panel is None else rows[rows[facet] == panel]
        for name, series in part.groupby(part[line].astype(str), sort=True):
            series = series.sort_values(level)
            ax.plot(series[level], series[value], label=plot_text(name), **style[name])
        ax.set_xticks(sorted(part[level].unique()))
        ax.set_xlabel("instruction level")
        ax.set_title("" if panel is None else plot_text(panel_name(panel)))
    axes[0][0].set_ylabel(plot_text(ylabel))
    handles = {h.get_label(): h for ax in axes[0] for h in ax.get_lines()}
    fig.legend(list(handles.values()), list(handles), fontsize=SMALLEST_TEXT, loc="outside right upper")
    return fig


def plot_group_minima(minima: Sequence[float] | pd.Series, instance_values: Sequence[float] | pd.Series | None = None,
                      *, bins: int = 20, ax=None, measure: str = "nDCG@10", scale: float = 1.0):
    """Histogram of the per-group minima behind Robustness@k, with the per-instance values
    behind it for contrast, and a dashed line at each mean (mean of minima = Robustness;
    mean of instances = the plain average), values × ``scale`` (100: as the papers print),
    the legend outside the data. Returns the axes."""
    from instir.metrics.robustness import label

    ax = _axes(ax, figsize=(6, 3.5))
    minima = pd.Series(minima, dtype=float).dropna() * scale
    edges = [scale * i / bins for i in range(bins + 1)]
    shown = "{:.1f}" if scale >= 10 else "{:.3f}"
    unit = f" ×{scale:g}" if scale != 1 else ""
    if instance_values is not None:
        instances = pd.Series(instance_values, dtype=float).dropna() * scale
        ax.hist(instances, bins=edges, alpha=0.35, color="C0", label=plot_text(f"{measure} per instance"))
        ax.axvline(instances.mean(), color="C0", linestyle="--", linewidth=1,
                   label=plot_text(f"mean {measure} = {shown.format(instances.mean())}"))
    ax.hist(minima, bins=edges, alpha=0.8, color="C3", label=f"minimum per group (n = {len(minima)})")
    ax.axvline(minima.mean(), color="C3", linestyle="--", linewidth=1,
               label=plot_text(f"{label(measure)} = {shown.format(minima.mean())}"))
    ax.set_xlabel(plot_text(measure + unit))
    ax.set_ylabel("count")
    ax.legend(fontsize=SMALLEST_TEXT, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    return ax


def plot_instructed_vs_query_only(pairs: Sequence[tuple[str, pd.Series, pd.Series]], measure: str, title: str):
    """One scatter per retriever (``pairs``: its name, query-only and instructed values per
    instance, ×100, as :meth:`instir.stages.evaluate.Metrics.instructed_vs_query_only` gives them): x the
    query-only run, y the instructed run, the diagonal where the instruction changed nothing; each
    panel titled ``title`` over the retriever, laid out so no label reaches the next panel (no pair: one empty panel
    saying so). Returns the figure."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, max(len(pairs), 1), figsize=(4.2 * max(len(pairs), 1), 4.2), squeeze=False,
                             layout="constrained")
    if not pairs:  # no retriever with both runs (Metrics.instructed_vs_query_only of instructed runs alone)
        axes[0][0].set_title(plot_text(f"{title}\nno retriever has both an instructed and a query-only run"),
                             fontsize=10)
    for ax, (retriever, query_only, instructed) in zip(axes[0], pairs):
        ax.scatter(query_only, instructed, alpha=0.5)
        ax.plot([0, 100], [0, 100], color="grey", linestyle="--", linewidth=0.8)
        ax.set(xlabel=plot_text(f"{measure} ×100, query-only"), ylabel=plot_text(f"{measure} ×100, instructed"))
        ax.set_title(plot_text(f"{title}\n{retriever}"), fontsize=10)  # two lines: a model's name is long
    return fig
