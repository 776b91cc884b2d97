"""Sentences computed from the numbers: notebook 03's reading of InstructIR results and
notebook 04's plain statement of a constant judge."""

import pandas as pd

from instir.report.explain import constant_judge, explain_instructir, said_once


def _table(rows):
    return pd.DataFrame(rows, columns=["system", "measure", "value"]).assign(level="all")


def test_instructir_reading_names_the_gain_the_robustness_gap_and_the_missed_targets():
    table = _table([("bm25", "nDCG@10", 0.9), ("bm25", "Robustness@10", 0.6),
                    ("bm25 (query-only)", "nDCG@10", 0.4), ("bm25 (query-only)", "Robustness@10", 0.1)])
    per_query = pd.DataFrame({"system": "bm25", "qid": ["a", "b", "c", "d"], "measure": "nDCG@10",
                              "value": [1.0, 1.0, 0.63, 0.97]})
    text = explain_instructir(table, per_query)
    assert "nDCG@10 90.0 with the instruction against 40.0 with the query alone (+50.0 points)" in text
    assert "Robustness@10 is 60.0, 30.0 points lower" in text and "worst instance" in text
    assert "In 2 of 4 instances the target is not ranked first" in text and "near-miss" in text
    assert "words, not conditions" in text
    assert "(query-only)**" not in text  # query-only runs are compared against, not described


def test_instructir_reading_says_when_the_instruction_does_not_help_and_skips_bm25_note():
    table = _table([("dense", "nDCG@10", 0.3), ("dense", "Robustness@10", 0.3),
                    ("dense (query-only)", "nDCG@10", 0.5)])
    text = explain_instructir(table, pd.DataFrame(columns=["system", "qid", "measure", "value"]))
    assert "(−20.0 points): the instruction does not help" in text and "words, not conditions" not in text


def test_instructir_reading_is_empty_without_the_measures():
    assert explain_instructir(_table([("bm25", "nDCG@20", 0.5)]), pd.DataFrame(columns=["system", "measure"])) == ""


def test_a_judge_that_gives_one_label_is_called_constant():
    pairs = pd.DataFrame({"judge_grade": [0, 0, 0, None], "error": [None, None, None, "HTTP 500"]})
    text = constant_judge(pairs)
    assert "constant" in text and "all 3 successfully judged pairs **not relevant**" in text
    varied = pd.DataFrame({"judge_grade": [0, 2], "error": [None, None]})
    assert constant_judge(varied) is None


def test_what_every_verdict_begins_with_is_said_once():
    lead = "This judge is deterministic: judged once. Its spread is 0. "
    texts = [("a / bm25", lead + "Average: sd 0.36."), ("b / dense", lead + "Average: sd 0.09.")]
    out = said_once(texts)
    assert out.count("deterministic") == 1 and out.startswith("This judge is deterministic")
    assert "- **a / bm25**: Average: sd 0.36." in out and "- **b / dense**: Average: sd 0.09." in out
    different = said_once([("a", "One. Two."), ("b", "Three. Four.")])
    assert different == "- **a**: One. Two.\n- **b**: Three. Four."
    assert said_once([("a", lead + "x.")]) == f"- **a**: {lead}x."
