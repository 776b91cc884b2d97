"""Sentences computed from the numbers: notebook 03's reading of a family's results (InstructIR's) and
notebook 04's plain statement of a constant judge."""

from dataclasses import replace

import pandas as pd
from markdown_render import rendered_html, rendered_text

from instir.benchmarks import catalog
from instir.report.explain import constant_judge, explain_agreement, explain_runs

INSTRUCTIR = catalog.family("instructir")
IFIR = catalog.family("ifir")


def _table(rows):
    return pd.DataFrame(rows, columns=["system", "measure", "value"]).assign(level="all")


def test_instructir_reading_names_the_gain_the_robustness_gap_and_the_missed_targets():
    table = _table([("bm25", "nDCG@10", 0.9), ("bm25", "Robustness@10", 0.6),
                    ("bm25 (query-only)", "nDCG@10", 0.4), ("bm25 (query-only)", "Robustness@10", 0.1)])
    per_query = pd.DataFrame({"system": "bm25", "qid": ["a", "b", "c", "d"], "measure": "nDCG@10",
                              "value": [1.0, 1.0, 0.63, 0.97]})
    markdown = explain_runs(table, per_query, INSTRUCTIR)
    text = rendered_text(markdown)
    assert "nDCG@10 90.0 with the instruction against 40.0 with the query alone (+50.0 points)" in text
    assert "Robustness@10 is 60.0, 30.0 points lower" in text and "worst instance" in text
    assert "In 2 of 4 instances the target is not ranked first" in text and "near-miss" in text
    assert "words, not conditions" in text
    assert "bm25 (query-only):" not in text  # query-only runs are compared against, not described
    assert rendered_html(markdown).count("<li><strong>bm25</strong>: nDCG@10 90.0") == 1


def test_instructir_reading_says_when_the_instruction_does_not_help_and_skips_bm25_note():
    table = _table([("dense", "nDCG@10", 0.3), ("dense", "Robustness@10", 0.3),
                    ("dense (query-only)", "nDCG@10", 0.5)])
    text = rendered_text(explain_runs(table, pd.DataFrame(columns=["system", "qid", "measure", "value"]), INSTRUCTIR))
    assert "(−20.0 points): the instruction does not help" in text and "words, not conditions" not in text


def test_instructir_reading_is_empty_without_the_measures():
    empty = pd.DataFrame(columns=["system", "measure"])
    assert explain_runs(_table([("bm25", "nDCG@20", 0.5)]), empty, INSTRUCTIR) == ""


def test_a_second_headline_that_is_not_the_firsts_robustness_is_never_read_as_a_group_minimum():
    spec = replace(INSTRUCTIR, headline=("nDCG@10", "RR@10"))
    table = _table([("bm25", "nDCG@10", 0.9), ("bm25", "RR@10", 0.5), ("bm25 (query-only)", "nDCG@10", 0.4)])
    text = rendered_text(explain_runs(table, pd.DataFrame(columns=["system", "qid", "measure", "value"]), spec))
    assert "nDCG@10 90.0 with the instruction against 40.0" in text
    assert "RR@10" not in text and "worst instance" not in text


def test_a_judge_that_gives_one_label_is_called_constant():
    pairs = pd.DataFrame({"judge_grade": [0, 0, 0, None], "error": [None, None, None, "HTTP 500"]})
    text = constant_judge(pairs)
    assert "constant" in text and "all 3 successfully judged pairs <strong>not relevant</strong>" in rendered_html(text)
    varied = pd.DataFrame({"judge_grade": [0, 2], "error": [None, None]})
    assert constant_judge(varied) is None


def test_a_judge_of_one_label_whose_weighted_scores_differ_is_not_said_to_carry_no_information():
    pairs = pd.DataFrame({"judge_grade": [1, 1, 1], "norm": [0.2, 0.5, 0.6], "error": [None, None, None]})
    text = rendered_html(constant_judge(pairs))
    assert "labels are constant" in text and "all 3 successfully judged pairs <strong>sibling</strong>" in text
    assert "carry no information" not in text and "only its weighted scores differ" in text
    same = pairs.assign(norm=0.5)
    assert "carry no information" in constant_judge(same)


def test_labels_and_texts_are_escaped_for_markdown():
    hostile = "g`[clk](javascript:alert(1))` *x* <b>"
    table = _table([(hostile, "nDCG@10", 0.9), (hostile, "Robustness@10", 0.6)])
    per_query = pd.DataFrame({"system": hostile, "qid": ["a"], "measure": "nDCG@10", "value": [1.0]})
    text = rendered_html(explain_runs(table, per_query, INSTRUCTIR))
    assert "<a" not in text and "<b>" not in text
    assert "<strong>g`[clk](javascript:alert(1))` *x* &lt;b&gt;</strong>" in text


def _instances(native):
    """Three instances of one system, standard nDCG@20 then the IFIR-native values ``native``."""
    standard = [0.5, 0.8, 1.0]
    return pd.DataFrame({"benchmark": "ifir-sample/fiqa", "system": "bm25", "qid": ["a", "b", "c"] * 2,
                         "measure": ["nDCG@20"] * 3 + ["nDCG@20[ifir-native]"] * 3, "value": standard + native})


def test_ifirs_two_ndcgs_are_said_equal_with_why_or_counted_where_they_differ():
    same = rendered_text(explain_agreement(_instances([0.5, 0.8, 1.0]), IFIR))
    assert "nDCG@20 and nDCG@20[ifir-native] are equal on all 3 instance scores here" in same
    assert "retrieved top 20 re-sorted" in same and "On these runs neither changes a score." in same
    apart = rendered_text(explain_agreement(_instances([0.5, 0.9, 1.0]), IFIR))
    assert "are equal on 2 of 3 instance scores" in apart and "on the other 1 they differ" in apart
    assert explain_agreement(_instances([0.5, 0.8, 1.0]), INSTRUCTIR) == ""  # a family without the pair


def test_an_instruction_that_leaves_the_score_unchanged_is_not_said_to_help():
    table = _table([("dense", "nDCG@10", 0.5), ("dense", "Robustness@10", 0.5), ("dense (query-only)", "nDCG@10", 0.5)])
    text = rendered_text(explain_runs(table, pd.DataFrame(columns=["system", "qid", "measure", "value"]), INSTRUCTIR))
    assert "(+0.0 points): the instruction does not help" in text and "steers" not in text


def test_the_reading_says_the_differences_of_the_values_it_prints():
    table = _table([("bm25", "nDCG@10", 0.9364), ("bm25", "Robustness@10", 0.6926),
                    ("bm25 (query-only)", "nDCG@10", 0.4006)])
    text = rendered_text(explain_runs(table, pd.DataFrame(columns=["system", "qid", "measure", "value"]), INSTRUCTIR))
    assert "nDCG@10 93.6 with the instruction against 40.1 with the query alone (+53.5 points)" in text
    assert "Robustness@10 is 69.3, 24.3 points lower" in text
    level = _table([("dense", "nDCG@10", 0.50004), ("dense", "Robustness@10", 0.6),
                    ("dense (query-only)", "nDCG@10", 0.5)])
    text = rendered_text(explain_runs(level, pd.DataFrame(columns=["system", "qid", "measure", "value"]), INSTRUCTIR))
    assert "(+0.0 points): the instruction does not help" in text and "steers" not in text
    assert "Robustness@10 is 60.0, 10.0 points higher" in text  # groups of unequal size: the minima's mean can exceed


def test_the_reading_takes_the_pooled_value_not_a_levels():
    table = pd.DataFrame({"system": ["bm25", "bm25", "bm25", "bm25 (query-only)", "bm25 (query-only)"],
                          "measure": ["nDCG@10", "nDCG@10", "Robustness@10", "nDCG@10", "nDCG@10"],
                          "value": [0.9, 0.2, 0.6, 0.4, 0.1], "level": ["all", "1", "all", "all", "1"]})
    text = rendered_text(explain_runs(table, pd.DataFrame(columns=["system", "qid", "measure", "value"]), INSTRUCTIR))
    assert "nDCG@10 90.0 with the instruction against 40.0 with the query alone (+50.0 points)" in text
    assert "Robustness@10 is 60.0, 30.0 points lower" in text


def test_one_successfully_judged_pair_does_not_make_a_judge_constant():
    assert constant_judge(pd.DataFrame({"judge_grade": [2, None], "error": [None, "HTTP 500"]})) is None
    assert constant_judge(pd.DataFrame({"judge_grade": [2, 2], "error": [None, None]})) is not None
