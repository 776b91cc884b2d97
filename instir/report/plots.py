"""Small matplotlib plots for the reports: reproduced vs reported numbers, scores per
instruction level (like IFIR's Fig. 4), and the distribution of query-group minima behind
Robustness@k. Each function draws on the axes it is given (or new ones) and returns them;
none selects a backend, so inline figures keep working in notebooks."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from instir.benchmarks import catalog


def _axes(ax=None, **subplot_kw):
    """The given axes, or the axes of a new figure."""
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.subplots(**subplot_kw)[1]


def plot_reproduced_vs_reported(compared: pd.DataFrame, *, ax=None, label_column: str | None = None,
                                x: str = "reported", y: str = "reproduced", unit: str = ""):
    """Scatter of ``y`` against ``x`` (default the ``reproduced`` and ``reported`` columns of
    :func:`instir.papers.compare`), one marker shape per reported ``metric``: points within
    tolerance filled, outside hollow, without a verdict (``within_tolerance`` empty, e.g. a
    SAMPLE) as crosses; the y = x diagonal; the legend outside the data. Optional text labels
    from ``label_column`` (e.g. ``"subset_id"``); ``unit`` is appended to the axis labels
    (e.g. ``" (×100)"``). Returns the axes."""
    ax = _axes(ax, figsize=(7, 5))
    markers = "osD^vP*X"
    verdict = compared["within_tolerance"].astype("boolean")
    for i, (metric, rows) in enumerate(compared.groupby("metric", sort=True)):
        marker, colour = markers[i % len(markers)], f"C{i}"
        known = verdict.loc[rows.index]
        inside, outside, open_ = known.fillna(False), (~known).fillna(False), known.isna()
        if inside.any():
            ax.scatter(rows.loc[inside, x], rows.loc[inside, y], marker=marker, color=colour,
                       label=f"{metric}: within tolerance")
        if outside.any():
            ax.scatter(rows.loc[outside, x], rows.loc[outside, y], marker=marker, facecolors="none",
                       edgecolors=colour, label=f"{metric}: outside")
        if open_.any():
            ax.scatter(rows.loc[open_, x], rows.loc[open_, y], marker="x", color=colour,
                       label=f"{metric}: no verdict")
        if label_column:
            for px, py, text in zip(rows[x], rows[y], rows[label_column]):
                ax.annotate(str(text), (px, py), fontsize=7, xytext=(3, 3), textcoords="offset points")
    values = pd.concat([compared[x], compared[y]]).dropna()
    if len(values):
        low, high = float(values.min()), float(values.max())
        pad = 0.05 * (high - low or 1.0)
        ax.plot([low - pad, high + pad], [low - pad, high + pad], color="grey", linewidth=0.8, linestyle="--")
    ax.set_xlabel(f"reported (paper){unit}")
    ax.set_ylabel(f"reproduced{unit}")
    ax.set_title("Reproduced vs reported")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    ax.figure.tight_layout()
    return ax


def panel_name(value: object) -> str:
    """A panel title as the paper prints it: IFIR subset ids become their printed names
    (``pm`` -> ``TREC-PM``, ``scifact_open`` -> ``SciFact-open``); anything else as it is."""
    printed = {sid: name for name, sid in catalog.subset_by_printed_name().items()}
    return printed.get(str(value), str(value))


def plot_per_level(table: pd.DataFrame, *, value: str = "value", level: str = "level", line: str = "model",
                   facet: str | None = "subset_id", ylabel: str = "nDCG@20"):
    """Score per instruction level, one line per ``line`` value (IFIR Fig. 4 style), one
    panel per ``facet`` value (a single panel when ``facet`` is None or absent), titled as the
    paper prints the subset (:func:`panel_name`), one legend for all panels outside the data.
    Rows with no level (pooled) are left out. Returns the figure."""
    import matplotlib.pyplot as plt

    rows = table[table[level].notna()].copy()
    rows[level] = rows[level].astype(int)
    panels = sorted(rows[facet].unique()) if facet and facet in rows.columns else [None]
    names = sorted(rows[line].astype(str).unique())
    palette = plt.get_cmap("tab20")
    colour = {name: palette(i % palette.N) for i, name in enumerate(names)}  # same colour in every panel
    fig, axes = plt.subplots(1, len(panels), figsize=(3.6 * len(panels) + 2.2, 3.5), squeeze=False, sharey=True,
                             layout="constrained")
    for ax, panel in zip(axes[0], panels):
        part = rows if panel is None else rows[rows[facet] == panel]
        for name, series in part.groupby(part[line].astype(str), sort=True):
            series = series.sort_values(level)
            ax.plot(series[level], series[value], marker="o", label=name, color=colour[name])
        ax.set_xticks(sorted(part[level].unique()))
        ax.set_xlabel("instruction level")
        ax.set_title("" if panel is None else panel_name(panel))
    axes[0][0].set_ylabel(ylabel)
    handles = {h.get_label(): h for ax in axes[0] for h in ax.get_lines()}
    fig.legend(list(handles.values()), list(handles), fontsize=7, loc="outside right upper")
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
        ax.hist(instances, bins=edges, alpha=0.35, color="C0", label=f"{measure} per instance")
        ax.axvline(instances.mean(), color="C0", linestyle="--", linewidth=1,
                   label=f"mean {measure} = {shown.format(instances.mean())}")
    ax.hist(minima, bins=edges, alpha=0.8, color="C3", label=f"minimum per group (n = {len(minima)})")
    ax.axvline(minima.mean(), color="C3", linestyle="--", linewidth=1,
               label=f"{label(measure)} = {shown.format(minima.mean())}")
    ax.set_xlabel(measure + unit)
    ax.set_ylabel("count")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    return ax
