"""The display methods of the stages' result objects, on small hand-made results: what the
notebooks show is computed here, where a test reaches it."""

import pandas as pd
from markdown_render import rendered_text

from instir.stages.compare import PaperComparison


def _comparison(compared: pd.DataFrame) -> PaperComparison:
    return PaperComparison(compared, None, pd.DataFrame(), pd.DataFrame(), None, pd.DataFrame(), {})


def _rows(levels: list[object], metric: str = "InstFol@20") -> pd.DataFrame:
    return pd.DataFrame({"metric": metric, "level": levels, "reported": 10.0, "reproduced": 12.0, "scale": 100.0,
                         "system": "bm25", "measure_reproduced": metric, "model": "BM25", "subset_id": "fiqa",
                         "within_tolerance": pd.array([pd.NA] * len(levels), dtype="boolean")})


def test_a_plot_of_one_point_is_left_out_and_a_line_says_so():
    one = _comparison(_rows([1.0]))
    assert one.scatter_rows() is None and one.per_level() == []
    assert [rendered_text(note) for note in one.plot_notes()] == [
        "One aligned number: no scatter of reproduced against reported (the table above has it).",
        "InstFol@20 per level: one aligned number, no curve (the table above has it)."]
    mixed = _comparison(pd.concat([_rows([1.0, 2.0, None]), _rows([3.0], "nDCG@20")], ignore_index=True))
    assert len(mixed.scatter_rows()) == 4 and [metric for metric, _ in mixed.per_level()] == ["InstFol@20"]
    assert [rendered_text(note) for note in mixed.plot_notes()] == [
        "nDCG@20 per level: one aligned number, no curve (the table above has it)."]


def test_per_level_curves_draw_one_line_per_system_and_protocol_and_the_papers_values_on_the_same_axes():
    rows = pd.concat([_rows([1.0, 2.0, 3.0], "nDCG@20").assign(measure_reproduced="nDCG@20[ifir-native]",
                                                               reproduced=[30.0, 20.0, 10.0])], ignore_index=True)
    ((metric, curves),) = _comparison(rows).per_level()
    assert metric == "nDCG@20"
    lines = curves.groupby("line")["value"].apply(list).to_dict()
    assert lines == {"bm25 · nDCG@20[ifir-native]": [30.0, 20.0, 10.0], "BM25 · paper": [10.0, 10.0, 10.0]}


def test_the_appendix_lists_each_known_reason_once_instfol_first():
    (instfol_title, instfol), (other_title, other) = _comparison(_rows([])).divergences()
    assert "InstFol" in instfol_title and "aila-judge-prompt" in set(instfol["key"])
    assert not set(instfol["key"]) & set(other["key"]) and "ifir-native-ndcg" in set(other["key"])


def test_verdict_counts_count_each_reproduced_number_once():
    # on the commit before, a number that two rows of one paper print (InstructIR's RepLLaMA in the paper and again in
    # the Promptriever paper's table) counted twice among that paper's "within tolerance"
    compared = pd.DataFrame({"paper": "instructir", "table": ["InstructIR paper", "SECONDARY: Promptriever Table 2"],
                             "system": "repllama", "benchmark": "instructir", "subset_id": "", "level": pd.NA,
                             "setting": "instructed", "measure_reproduced": "nDCG@10", "verdict": "within tolerance"})
    counts = _comparison(compared).verdicts()
    assert counts.to_dict("records") == [{"paper": "instructir", "verdict": "within tolerance", "numbers": 1}]


def test_verdict_counts_count_a_number_once_under_the_row_that_judges_it():
    # on the commit before, a number judged by the paper's row and shown, not judged, beside a secondary source's rerun
    # of it counted under both verdicts; a sample and the benchmark it samples are two numbers
    compared = pd.DataFrame({"paper": "instructir", "table": ["SECONDARY: Promptriever Table 2", "InstructIR paper",
                                                              "InstructIR paper"],
                             "system": "repllama", "benchmark": "instructir", "subset_id": "", "level": pd.NA,
                             "setting": "instructed", "measure_reproduced": "nDCG@10", "sample": [False, False, True],
                             "verdict": ["not comparable (a secondary source's rerun)", "within tolerance",
                                         "not comparable (SAMPLE)"]})
    counts = _comparison(compared).verdicts()
    assert counts.to_dict("records") == [{"paper": "instructir", "verdict": "not comparable (SAMPLE)", "numbers": 1},
                                         {"paper": "instructir", "verdict": "within tolerance", "numbers": 1}]


def test_the_verdicts_the_judges_spread_changed_are_counted():
    compared = pd.DataFrame({"within_tolerance": pd.array([False, False, True, pd.NA], dtype="boolean")})
    widened = pd.DataFrame({"within_tolerance": pd.array([True, False, True, pd.NA], dtype="boolean")})
    assert PaperComparison(compared, None, pd.DataFrame(), pd.DataFrame(), widened, pd.DataFrame(),
                           {}).changed_verdicts() == 1
    assert _comparison(compared).changed_verdicts() == 0  # no widened comparison


def test_a_number_outside_tolerance_is_flagged_bad_and_every_not_comparable_muted():
    compared = pd.DataFrame({"verdict": ["within tolerance", "outside tolerance", "not comparable (SAMPLE)"]})
    assert _comparison(compared).verdict_flags == {"within tolerance": "good", "outside tolerance": "bad",
                                                   "not comparable (SAMPLE)": "muted"}


def test_plotted_numbers_are_x100_whatever_scale_a_paper_prints():
    rows = pd.concat([_rows([None]), _rows([None]).assign(reported=0.25, reproduced=0.5, scale=1.0)],
                     ignore_index=True)
    scaled = _comparison(rows).scatter_rows()
    assert scaled["reported"].tolist() == [10.0, 25.0] and scaled["reproduced"].tolist() == [12.0, 50.0]


def test_a_papers_curve_is_drawn_once_however_many_systems_meet_its_row():
    rows = pd.concat([_rows([1.0, 2.0]), _rows([1.0, 2.0]).assign(system="bm25-again", reproduced=[5.0, 6.0])],
                     ignore_index=True)
    ((_, curves),) = _comparison(rows).per_level()
    lines = curves.groupby("line")["value"].apply(list).to_dict()
    assert lines == {"bm25 · InstFol@20": [12.0, 12.0], "bm25-again · InstFol@20": [5.0, 6.0],
                     "BM25 · paper": [10.0, 10.0]}


def test_verdict_counts_count_a_number_judged_in_one_row_and_without_a_value_in_another_under_its_verdict():
    # a number two tables of one paper print, one of them without a reported value: it counts once, under the verdict
    # of the row that judged it, whichever row comes first
    rows = pd.DataFrame({"paper": "ifir", "table": ["Table 9", "Table 3"], "system": "bm25", "benchmark": "ifir",
                         "subset_id": "fiqa", "level": pd.NA, "setting": "instructed",
                         "measure_reproduced": "nDCG@20", "verdict": ["no value", "outside tolerance"]})
    for compared in (rows, rows.iloc[::-1]):
        assert _comparison(compared).verdicts().to_dict("records") == [
            {"paper": "ifir", "verdict": "outside tolerance", "numbers": 1}]


def test_a_papers_curve_keeps_the_values_of_every_subset_it_reports():
    # IFIR reports InstFol per level for fiqa and for aila: the paper's points of both are drawn, not fiqa's alone
    rows = pd.concat([_rows([1.0, 2.0]).assign(reported=[10.0, 20.0]),
                      _rows([1.0, 2.0]).assign(subset_id="aila", reported=[30.0, 40.0])], ignore_index=True)
    ((_, curves),) = _comparison(rows).per_level()
    paper = curves[curves["line"] == "BM25 · paper"]
    assert sorted(zip(paper["subset_id"], paper["level"], paper["value"])) == [
        ("aila", 1.0, 30.0), ("aila", 2.0, 40.0), ("fiqa", 1.0, 10.0), ("fiqa", 2.0, 20.0)]


def test_verdict_counts_count_a_number_once_for_each_paper_that_reports_it():
    # one nDCG@20 against IFIR's Table 3 and against MTEB's results store: each paper counts it once
    compared = pd.DataFrame({"paper": ["ifir", "mteb"], "table": ["Table 3", "MTEB results"], "system": "bm25",
                             "benchmark": "ifir/fiqa", "subset_id": "fiqa", "level": pd.NA, "setting": "instructed",
                             "measure_reproduced": "nDCG@20", "verdict": ["within tolerance", "outside tolerance"]})
    assert _comparison(compared).verdicts().to_dict("records") == [
        {"paper": "ifir", "verdict": "within tolerance", "numbers": 1},
        {"paper": "mteb", "verdict": "outside tolerance", "numbers": 1}]
