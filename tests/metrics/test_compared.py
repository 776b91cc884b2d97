"""instir.compare_runs: runs to a results table in one call, as ranx's ``compare`` gives a Report — each pair of
systems tested per measure (checked here against scipy's paired t-test and Holm's correction worked by hand), the
means ×100, the letters each system beats, and the same table as HTML, Markdown and ranx's LaTeX."""

import re

import numpy as np
import pytest
from says import raises_saying
from scipy import stats

import instir
from instir.errors import UsageError
from instir.metrics import compare_runs, evaluate_runs
from instir.metrics.latex import evaluation_marks, latex_table


@pytest.fixture(scope="module")
def bench():
    return instir.load_benchmark("instructir-sample")


@pytest.fixture(scope="module")
def runs(bench):
    bm25 = instir.build_system("bm25")
    instructed = instir.retrieve(bench, bm25)
    bare = instir.retrieve(bench, bm25, "query-only")
    # a third system: the instructed run with each query's top two swapped (close to it, far from the bare run)
    swapped = instructed.df.copy()
    top = swapped["rank"] <= 2
    swapped.loc[top, "score"] = swapped.loc[top].groupby("qid")["score"].transform(lambda s: s.iloc[::-1].to_numpy())
    return {"bm25": instructed, "bm25 (query-only)": bare, "bm25 <top two swapped> | x": swapped}


def _holm(p: list[float]) -> np.ndarray:
    """Holm's step-down adjustment, by hand: the i-th smallest p times (m - i), made monotone, at most 1."""
    order = np.argsort(p)
    adjusted = np.empty(len(p))
    running = 0.0
    for i, j in enumerate(order):
        running = max(running, (len(p) - i) * p[j])
        adjusted[j] = min(1.0, running)
    return adjusted


def test_each_system_beats_exactly_the_systems_a_holm_corrected_paired_t_test_says(bench, runs):
    compared = compare_runs(bench, runs, ["nDCG@10", "P@10"], max_p=0.05)
    per_query = evaluate_runs(runs, bench, ["nDCG@10", "P@10"]).per_query
    names = list(runs)
    for measure in ("nDCG@10", "P@10"):
        wide = per_query[per_query["measure"] == measure].pivot(index="qid", columns="system", values="value")
        pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
        p = [stats.ttest_rel(wide[a], wide[b]).pvalue for a, b in pairs]
        p = [1.0 if np.isnan(v) else v for v in p]  # identical columns: no difference
        beaten = {name: "" for name in names}
        for (a, b), adjusted in zip(pairs, _holm(p)):
            if adjusted <= 0.05:
                winner, loser = (a, b) if wide[a].mean() > wide[b].mean() else (b, a)
                beaten[winner] += "abc"[names.index(loser)]
        marks = compared.marks[compared.marks["measure"] == measure].set_index("system")
        assert {name: "".join(sorted(marks.loc[name, "beats"])) for name in names} == \
            {name: "".join(sorted(letters)) for name, letters in beaten.items()}
        assert marks.loc[names, "letter"].tolist() == ["a", "b", "c"]
        np.testing.assert_allclose(compared.means()[measure].to_numpy(), wide[names].mean().to_numpy() * 100)
    assert compared.marks["beats"].str.len().sum() > 0  # the sample separates instructed from bare


def test_robustness_is_tested_paired_by_query_group(bench, runs):
    compared = compare_runs(bench, runs, ["Robustness@10"])
    robust = compared.marks[compared.marks["measure"] == "Robustness@10"]
    assert set(robust["unit"]) == {"group"} and "paired by query group" in compared.caption()
    groups = compared.evaluation.per_group.astype({"value": float})
    expected = groups[groups["measure"] == "Robustness@10"].groupby("system")["value"].mean() * 100
    np.testing.assert_allclose(compared.means().loc[list(runs), "Robustness@10"], expected[list(runs)])


def test_the_latex_is_ranxs_table_of_the_same_marks(bench, runs):
    compared = compare_runs(bench, runs, ["nDCG@10"], test="perm", correction=None)
    evaluation = evaluate_runs(runs, bench, ["nDCG@10"], derived=False)
    marks = evaluation_marks(evaluation, systems=list(runs), test="perm", correction=None)
    assert compared.to_latex(caption="InstructIR sample.") == latex_table(marks, caption="InstructIR sample.")


def test_html_and_markdown_show_bold_bests_and_letters_and_escape_the_names(bench, runs):
    compared = compare_runs(bench, runs, ["nDCG@10"])
    html = compared._repr_html_()
    assert "&lt;top two swapped&gt;" in html and "<top two" not in html
    best = compared.means()["nDCG@10"].idxmax()
    shown = f"{compared.means().loc[best, 'nDCG@10']:.1f}"
    assert f"<b>{shown}</b>" in html and f"**{shown}**" in compared.to_markdown()
    markdown = compared.to_markdown().splitlines()
    assert markdown[0].startswith("| # | system | nDCG@10 |") and len(markdown) == 2 + len(runs) + 2
    assert "\\| x" in markdown[4]  # a | in a name does not split the row
    row = {r.system: r for r in compared.marks.itertuples()}["bm25"]
    assert (f"<sup>{row.beats}</sup>" in markdown[2]) == bool(row.beats)
    assert str(compared) == compared.to_markdown()


def test_a_run_of_another_benchmark_is_refused_naming_the_system(bench, runs):
    other = instir.retrieve(instir.load_benchmark("ifir-sample/fiqa"), instir.build_system("bm25"))
    with raises_saying(UsageError, "'bm25 (fiqa)'", "none of the", "another benchmark"):
        compare_runs(bench, {"bm25": runs["bm25"], "bm25 (fiqa)": other})


def test_a_comparison_needs_two_runs(bench, runs):
    with pytest.raises(ValueError, match="two runs or more, got 1"):
        compare_runs(bench, {"bm25": runs["bm25"]})


@pytest.mark.parametrize("digits", [-1, 1.5, True, 16])
def test_decimals_no_table_can_show_are_refused_in_one_line(bench, runs, digits):
    # on the commit before: -1 gave "ValueError: Format specifier missing precision" when the table was shown
    pair = {"bm25": runs["bm25"], "bm25 (query-only)": runs["bm25 (query-only)"]}
    with raises_saying(UsageError, "digits", "whole number from 0 to 15", repr(digits)):
        compare_runs(bench, pair, ["nDCG@10"], digits=digits).to_markdown()
    assert re.search(r"\| \*\*\d+\*\*", compare_runs(bench, pair, ["nDCG@10"], digits=0).to_markdown())  # 0: whole


def test_compare_runs_is_one_public_name():
    assert instir.compare_runs is compare_runs and "compare_runs" in instir.__all__


def test_compare_scores_shows_the_measures_in_the_order_asked_not_the_order_scored(bench, runs):
    from instir.metrics.compared import compare_scores

    pair = {"bm25": runs["bm25"], "bm25 (query-only)": runs["bm25 (query-only)"]}
    evaluation = evaluate_runs(pair, bench, ["nDCG@10", "P@10"], derived=False)
    compared = compare_scores(evaluation, measures=["P@10", "nDCG@10"])
    assert compared.measures == ["P@10", "nDCG@10"] and list(compared.means().columns) == ["P@10", "nDCG@10"]
    assert compared.to_markdown().startswith("| # | system | P@10 | nDCG@10 |")


def test_the_table_rows_follow_the_systems_order_given_not_the_alphabet(bench, runs):
    from instir.metrics.compared import compare_scores

    pair = {"bm25": runs["bm25"], "bm25 (query-only)": runs["bm25 (query-only)"]}
    evaluation = evaluate_runs(pair, bench, ["nDCG@10"], derived=False)
    compared = compare_scores(evaluation, systems=["bm25 (query-only)", "bm25"])
    assert compared.means().index.tolist() == ["bm25 (query-only)", "bm25"]
    assert compared.to_markdown().splitlines()[2].startswith("| a | bm25 (query-only) |")


@pytest.mark.parametrize("digits", [-1, 1.5, True, 16, 10**5000], ids=["-1", "1.5", "True", "16", "10**5000"])
def test_decimals_no_table_can_show_are_refused_by_latex_table_too(bench, runs, digits):
    # on main: latex_table, a public name, took the digits unchecked: -1 gave "Format specifier missing precision",
    # 10**5000 Python's 4300-digit ValueError, 1.5 a TypeError
    from instir.metrics.latex import best_systems

    marks = compare_runs(bench, {"bm25": runs["bm25"], "bm25 (query-only)": runs["bm25 (query-only)"]},
                         ["nDCG@10"]).marks
    assert "tabular" in latex_table(marks, digits=15)
    for call in (lambda: latex_table(marks, digits=digits), lambda: best_systems(marks, digits=digits)):
        with raises_saying(UsageError, "digits", "whole number from 0 to 15"):
            call()
