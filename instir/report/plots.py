"""Small matplotlib plots for the reports: reproduced vs reported numbers, scores per
instruction level (like IFIR's Fig. 4), and the distribution of query-group minima behind
Robustness@k. Each function draws on the axes it is given (or new ones) and returns them;
none selects a backend, so inline figures keep working in notebooks."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd


def _axes(ax=None, **subplot_kw):
    """The given axes, or the axes of a new figure."""
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.subplots(**subplot_kw)[1]


def plot_reproduced_vs_reported(compared: pd.DataFrame, *, ax=None, label_column: str | None = None):
    """Scatter of ``reproduced`` against ``reported`` (the output of
    :func:`instir.papers.compare`), one marker shape per reported ``metric``, points
    within tolerance filled and the others hollow, with the y = x diagonal. Optional text
    labels from ``label_column`` (e.g. ``"subset_id"``). Returns the axes."""
    ax = _axes(ax, figsize=(5, 5))
    markers = "osD^vP*X"
    within = compared["within_tolerance"].fillna(False).astype(bool)
    for i, (metric, rows) in enumerate(compared.groupby("metric", sort=True)):
        inside = within.loc[rows.index]
        marker = markers[i % len(markers)]
        ax.scatter(rows.loc[inside, "reported"], rows.loc[inside, "reproduced"], marker=marker,
                   label=f"{metric} (within tolerance)", color=f"C{i}")
        ax.scatter(rows.loc[~inside, "reported"], rows.loc[~inside, "reproduced"], marker=marker,
                   label=f"{metric} (outside)", facecolors="none", edgecolors=f"C{i}")
        if label_column:
            for x, y, text in zip(rows["reported"], rows["reproduced"], rows[label_column]):
                ax.annotate(str(text), (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    values = pd.concat([compared["reported"], compared["reproduced"]]).dropna()
    if len(values):
        low, high = float(values.min()), float(values.max())
        pad = 0.05 * (high - low or 1.0)
        ax.plot([low - pad, high + pad], [low - pad, high + pad], color="grey", linewidth=0.8, linestyle="--")
    ax.set_xlabel("reported (paper)")
    ax.set_ylabel("reproduced")
    ax.set_title("Reproduced vs reported")
    ax.legend(fontsize=7)
    return ax


def plot_per_level(table: pd.DataFrame, *, value: str = "value", level: str = "level", line: str = "model",
                   facet: str | None = "subset_id", ylabel: str = "nDCG@20"):
    """Score per instruction level, one line per ``line`` value (IFIR Fig. 4 style), one
    panel per ``facet`` value (a single panel when ``facet`` is None or absent). Rows with no
    level (pooled) are left out. Returns the figure."""
    import matplotlib.pyplot as plt

    rows = table[table[level].notna()].copy()
    rows[level] = rows[level].astype(int)
    panels = sorted(rows[facet].unique()) if facet and facet in rows.columns else [None]
    names = sorted(rows[line].astype(str).unique())
    palette = plt.get_cmap("tab20")
    colour = {name: palette(i % palette.N) for i, name in enumerate(names)}  # same colour in every panel
    fig, axes = plt.subplots(1, len(panels), figsize=(4 * len(panels), 3.5), squeeze=False, sharey=True)
    for ax, panel in zip(axes[0], panels):
        part = rows if panel is None else rows[rows[facet] == panel]
        for name, series in part.groupby(part[line].astype(str), sort=True):
            series = series.sort_values(level)
            ax.plot(series[level], series[value], marker="o", label=name, color=colour[name])
        ax.set_xticks(sorted(part[level].unique()))
        ax.set_xlabel("instruction level")
        ax.set_title("" if panel is None else str(panel))
    axes[0][0].set_ylabel(ylabel)
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_group_minima(minima: Sequence[float] | pd.Series, instance_values: Sequence[float] | pd.Series | None = None,
                      *, bins: int = 20, ax=None, measure: str = "nDCG@10"):
    """Histogram of the per-group minima behind Robustness@k, with the per-instance values
    behind it for contrast, and a dashed line at each mean (mean of minima = Robustness;
    mean of instances = the plain average). Returns the axes."""
    ax = _axes(ax, figsize=(6, 3.5))
    minima = pd.Series(minima, dtype=float).dropna()
    edges = [i / bins for i in range(bins + 1)]
    if instance_values is not None:
        instances = pd.Series(instance_values, dtype=float).dropna()
        ax.hist(instances, bins=edges, alpha=0.35, color="C0", label=f"{measure} per instance")
        ax.axvline(instances.mean(), color="C0", linestyle="--", linewidth=1)
    ax.hist(minima, bins=edges, alpha=0.8, color="C3", label=f"minimum per group (n = {len(minima)})")
    ax.axvline(minima.mean(), color="C3", linestyle="--", linewidth=1, label=f"Robustness = {minima.mean():.3f}")
    ax.set_xlabel(measure)
    ax.set_ylabel("count")
    ax.legend(fontsize=7)
    return ax
