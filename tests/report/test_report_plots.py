"""The plot helpers draw what they are given (checked on the artists, Agg backend)."""

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.text import Text

from instir.report import plot_group_minima, plot_instructed_vs_query_only, plot_per_level, plot_reproduced_vs_reported
from instir.report.plots import SMALLEST_TEXT


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_scatter_has_one_point_per_row_and_a_diagonal():
    compared = pd.DataFrame({
        "metric": ["nDCG@20", "nDCG@20", "InstFol@20"], "reported": [0.4, 0.5, 1.0],
        "reproduced": [0.41, 0.2, 2.0], "within_tolerance": pd.array([True, False, pd.NA], dtype="boolean"),
        "subset_id": ["fiqa", "aila", "pm"],
    })
    ax = plot_reproduced_vs_reported(compared, label_column="subset_id")
    points = sum(len(c.get_offsets()) for c in ax.collections)
    assert points == 3 and len(ax.lines) == 1 and len(ax.texts) == 3


def test_per_level_draws_a_line_per_model_and_a_panel_per_subset():
    rows = [(m, s, lvl, 0.1 * lvl) for m in ("bm25", "gtr") for s in ("fiqa", "aila") for lvl in (1, 2, 3)]
    rows.append(("bm25", "fiqa", None, 0.5))
    fig = plot_per_level(pd.DataFrame(rows, columns=["model", "subset_id", "level", "value"]))
    assert len(fig.axes) == 2
    assert all(len(ax.lines) == 2 and len(ax.lines[0].get_xdata()) == 3 for ax in fig.axes)


def test_group_minima_histogram_marks_the_robustness_mean():
    ax = plot_group_minima([0.0, 0.5, 1.0], instance_values=[0.5, 1.0, 1.0, 1.0], bins=4)
    heights = [p.get_height() for p in ax.patches]
    assert sum(heights) == 7
    assert any("Robustness@10 = 0.500" in t.get_text() for t in ax.get_legend().get_texts())
    scaled = plot_group_minima([0.0, 0.5, 1.0], bins=4, scale=100, ax=plt.subplots()[1])
    assert any("Robustness@10 = 50.0" in t.get_text() for t in scaled.get_legend().get_texts())


def test_per_level_keeps_each_model_colour_across_panels():
    rows = [("gtr", "fiqa", lvl, 0.2) for lvl in (1, 2, 3)]
    rows += [(m, "aila", lvl, 0.1) for m in ("bm25", "gtr") for lvl in (1, 2, 3)]
    fig = plot_per_level(pd.DataFrame(rows, columns=["model", "subset_id", "level", "value"]))
    by_panel = [line.get_color() for ax in fig.axes for line in ax.lines if line.get_label() == "gtr"]
    assert len(by_panel) == 2 and by_panel[0] == by_panel[1]


def test_panels_are_named_as_the_paper_prints_them_and_the_legend_sits_outside():
    rows = [(m, s, lvl, 0.1 * lvl) for m in ("bm25", "gtr") for s in ("pm", "scifact_open") for lvl in (1, 2, 3)]
    fig = plot_per_level(pd.DataFrame(rows, columns=["model", "subset_id", "level", "value"]))
    assert [ax.get_title() for ax in fig.axes] == ["TREC-PM", "SciFact-open"]
    assert all(ax.get_legend() is None for ax in fig.axes) and len(fig.legends) == 1
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["bm25", "gtr"]


def test_scatter_says_no_verdict_once_and_puts_the_legend_below_the_axes():
    compared = pd.DataFrame({"metric": ["nDCG@20", "nDCG@20", "NDCG@10 (with MAIR instruction; inferred from the "
                                        "results folder suffix)"], "reported": [0.4, 0.5, 0.7],
                             "reproduced": [0.3, 0.6, 0.7], "within_tolerance": pd.array([pd.NA] * 3, dtype="boolean")})
    ax = plot_reproduced_vs_reported(compared)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels == ["NDCG@10 (with MAIR instruction; inf…", "nDCG@20"]  # metrics only, long names cut
    assert "no verdict" in ax.get_title() and not any("verdict" in label for label in labels)
    ax.figure.canvas.draw()
    legend, axes = ax.get_legend().get_window_extent(), ax.get_window_extent()
    assert legend.y1 <= axes.y0 and legend.width <= axes.width  # below the axes, never wider than the plot


def test_scatter_explains_the_verdict_styles_only_when_they_mix():
    compared = pd.DataFrame({"metric": ["nDCG@20"] * 3, "reported": [0.4, 0.5, 0.6], "reproduced": [0.41, 0.2, 0.6],
                             "within_tolerance": pd.array([True, False, pd.NA], dtype="boolean")})
    labels = [t.get_text() for t in plot_reproduced_vs_reported(compared).get_legend().get_texts()]
    assert labels == ["nDCG@20", "within tolerance", "outside", "no verdict"]


def test_scatter_labels_the_largest_differences_once_per_spot():
    compared = pd.DataFrame({"metric": "nDCG@20", "reported": [0.25, 0.25, 0.26, 0.5, 0.9, 0.1],
                             "reproduced": [0.95, 0.95, 0.95, 0.5, 0.9, 0.12], "subset_id": ["fiqa", "fiqa", "pm",
                                                                                            "aila", "fire", "cds"],
                             "within_tolerance": pd.array([pd.NA] * 6, dtype="boolean")})
    ax = plot_reproduced_vs_reported(compared, label_column="subset_id", max_labels=2)
    assert sorted(t.get_text() for t in ax.texts) == ["cds", "fiqa, pm"]


def _fifteen_models() -> pd.DataFrame:
    """IFIR Fig. 4's redraw: fifteen models on three levels of two subsets."""
    rows = [(f"model-{i:02d}-with-a-long-name", s, lvl, 0.01 * i * lvl) for i in range(15) for s in ("fiqa", "pm")
            for lvl in (1, 2, 3)]
    return pd.DataFrame(rows, columns=["model", "subset_id", "level", "value"])


def _pairs(n: int) -> list:
    values = pd.Series([10.0, 50.0, 90.0], index=["q1", "q2", "q3"])
    return [(f"dense:sentence-transformers/all-MiniLM-L6-v2 #{i}", values, values[::-1]) for i in range(n)]


def test_no_text_of_any_figure_is_smaller_than_the_smallest_readable_size():
    compared = pd.DataFrame({"metric": ["nDCG@20", "InstFol@20"], "reported": [0.4, 0.5], "reproduced": [0.1, 0.9],
                             "within_tolerance": pd.array([True, False], dtype="boolean"), "subset_id": ["a", "b"]})
    figures = [plot_reproduced_vs_reported(compared, label_column="subset_id").figure,
               plot_per_level(_fifteen_models()),
               plot_group_minima([0.0, 0.5], instance_values=[0.5, 1.0]).figure,
               plot_instructed_vs_query_only(_pairs(2), "nDCG@10", "instructir-sample")]
    for fig in figures:
        sizes = {t.get_text(): t.get_fontsize() for t in fig.findobj(Text) if t.get_text() and t.get_visible()}
        assert sizes and min(sizes.values()) >= SMALLEST_TEXT, {k: v for k, v in sizes.items() if v < SMALLEST_TEXT}


def test_fifteen_lines_each_have_their_own_look_and_the_whole_legend_inside_the_figure():
    fig = plot_per_level(_fifteen_models())
    looks = {(line.get_color(), line.get_marker(), line.get_linestyle()) for line in fig.axes[0].lines}
    assert len(looks) == 15
    fig.canvas.draw()
    legend, whole = fig.legends[0].get_window_extent(), fig.bbox
    assert len(fig.legends[0].get_texts()) == 15
    assert whole.x0 <= legend.x0 and legend.x1 <= whole.x1 and whole.y0 <= legend.y0 and legend.y1 <= whole.y1


def test_a_scatter_panels_labels_never_reach_the_next_panel():
    fig = plot_instructed_vs_query_only(_pairs(3), "nDCG@10", "instructir-sample")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for left, right in zip(fig.axes, fig.axes[1:]):
        label = right.yaxis.label.get_window_extent(renderer)
        assert left.get_tightbbox(renderer).x1 <= label.x0


def _collection_at(ax, point):
    return next(c for c in ax.collections if len(c.get_offsets()) and tuple(c.get_offsets()[0]) == point)


def test_scatter_fills_points_within_tolerance_leaves_those_outside_hollow_and_crosses_a_metric_without_verdicts():
    compared = pd.DataFrame({"metric": ["nDCG@20", "nDCG@20", "InstFol"], "reported": [0.4, 0.5, 0.7],
                             "reproduced": [0.41, 0.2, 0.9],
                             "within_tolerance": pd.array([True, False, pd.NA], dtype="boolean")})
    ax = plot_reproduced_vs_reported(compared)
    assert _collection_at(ax, (0.4, 0.41)).get_facecolors()[0][3] == 1
    assert len(_collection_at(ax, (0.5, 0.2)).get_facecolors()) == 0  # hollow: no face
    legend = ax.get_legend()
    markers = {t.get_text(): h.get_marker() for t, h in zip(legend.get_texts(), legend.legend_handles)}
    assert markers["nDCG@20"] == "s" and markers["InstFol"] == "x"  # InstFol has no verdict: a cross, as its point


def test_a_scatter_of_one_point_is_square_around_it_and_draws_without_a_warning():
    import warnings

    compared = pd.DataFrame({"metric": ["nDCG@20"], "reported": [0.5], "reproduced": [0.5],
                             "within_tolerance": pd.array([True], dtype="boolean")})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ax = plot_reproduced_vs_reported(compared)
        ax.figure.canvas.draw()
    assert ax.get_xlim() == ax.get_ylim() and ax.get_xlim()[0] < 0.5 < ax.get_xlim()[1]
    assert ax.get_aspect() == 1.0


def test_group_minima_on_the_papers_scale_keep_every_value_and_the_line_at_the_mean():
    ax = plot_group_minima([0.0, 0.1, 1.0], instance_values=[0.2, 0.3], bins=4, scale=100)
    minima = [p for p in ax.patches if p.get_facecolor()[:3] == ax.patches[-1].get_facecolor()[:3]]
    assert sum(p.get_height() for p in ax.patches) == 5 and sum(p.get_height() for p in minima) == 3
    mean = (0.0 + 10.0 + 100.0) / 3
    assert any(line.get_xdata()[0] == pytest.approx(mean) for line in ax.lines)
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(f"Robustness@10 = {mean:.1f}" in text for text in texts)


def test_instructed_vs_query_only_puts_the_query_only_run_on_x():
    query_only, instructed = pd.Series([10.0, 20.0]), pd.Series([70.0, 90.0])
    fig = plot_instructed_vs_query_only([("bm25", query_only, instructed)], "nDCG@10", "t")
    assert [tuple(p) for p in fig.axes[0].collections[0].get_offsets()] == [(10.0, 70.0), (20.0, 90.0)]
    assert "query-only" in fig.axes[0].get_xlabel() and "instructed" in fig.axes[0].get_ylabel()


def test_no_pair_and_no_levelled_row_draw_one_empty_panel_not_a_matplotlib_error():
    # before: ValueError "Number of columns must be a positive integer, not 0" from matplotlib, for what
    # Metrics.instructed_vs_query_only gives on instructed runs alone, and for a per-subset table of pooled rows
    from instir import show

    fig = show.instructed_vs_query_only([], "nDCG@10", "instructir-sample")
    assert len(fig.axes) == 1 and "no retriever has both" in fig.axes[0].get_title()
    pooled = pd.DataFrame({"model": ["bm25"], "subset_id": ["fiqa"], "level": [None], "value": [0.5]})
    fig = show.per_level(pooled)
    assert len(fig.axes) == 1 and not fig.axes[0].lines
