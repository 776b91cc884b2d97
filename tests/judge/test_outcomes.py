"""Judgment outcomes for reports: distinct errors counted and capped, a plain failure statement
(all failed says so), and judgments counted per weighting."""

import math
from dataclasses import replace

import pandas as pd
import pytest

from instir.judge.outcomes import (
    PARSED_MEANING,
    WEIGHTINGS,
    AllJudgmentsFailed,
    error_counts,
    failure_statement,
    judgment_counts,
    require_judged,
    weighting_counts,
)
from instir.judge.types import Judgment


def test_error_counts_lists_distinct_messages_most_frequent_first_and_caps_them():
    errors = ["HTTP 500: down"] * 3 + [None, math.nan] + ["timeout (ReadTimeout)"] * 2 + ["a", "b", "a"]
    table = error_counts(errors, limit=2)
    assert table.values.tolist() == [["HTTP 500: down", 3], ["timeout (ReadTimeout)", 2], ["… 2 other message(s)", 3]]


def test_error_counts_name_a_few_judgments_of_each_message_when_given_what_each_judged():
    errors = ["HTTP 500: down", None, "HTTP 500: down", "no JSON", "HTTP 500: down", "b", "c"]
    judged = ["q1/d1", "q1/d2", "q2/d1", "q2/d2", "q3/d1", "q3/d2", "q4/d1"]
    table = error_counts(errors, limit=3, examples=judged, per_error=2)
    assert table.values.tolist() == [["HTTP 500: down", 3, "q1/d1, q2/d1"], ["no JSON", 1, "q2/d2"],
                                      ["b", 1, "q3/d2"], ["… 1 other message(s)", 1, ""]]
    assert list(error_counts(errors).columns) == ["error", "judgments"]


def test_error_counts_cuts_long_messages_and_is_empty_without_failures():
    table = error_counts(["x" * 5000], max_chars=50)
    assert len(table.loc[0, "error"]) == 50 and table.loc[0, "error"].endswith("…")
    assert error_counts([None, None]).empty


def test_failure_statement_says_plainly_when_every_judgment_failed():
    assert failure_statement("the validation", ["HTTP 500"] * 4) == (
        "**All 4 judgments for the validation failed (100%)**: the judge answered none of them, so every figure "
        "that needs a judgment is left out. The errors are listed below.")
    assert failure_statement("InstFol", ["HTTP 500", None, None, None]).startswith(
        "1 of 4 judgments for InstFol failed (25%)")
    assert failure_statement("InstFol", [None, None]) == "All 2 judgments for InstFol succeeded."
    assert failure_statement("InstFol", []) == "No judgments were needed for InstFol."


def test_weighting_counts_count_each_weighting_and_the_failures_per_frame():
    pairs = pd.DataFrame({"weighting": ["logprobs", "parsed", "parsed", None]})
    positions = pd.DataFrame({"weighting": ["logits"] * 3})
    table = weighting_counts({"validation pairs": pairs, "InstFol positions": positions}).set_index("judgments")
    assert list(table.columns) == [*WEIGHTINGS, "failed", "total"]
    assert table.loc["validation pairs"].to_dict() == {"logprobs": 1, "logits": 0, "parsed": 2, "baseline": 0,
                                                       "failed": 1, "total": 4}
    assert table.loc["InstFol positions", "logits"] == 3
    assert "parsed" in PARSED_MEANING and "log-probabilities" in PARSED_MEANING


def test_judgments_are_required_only_when_every_one_failed():
    require_judged([None, "HTTP 500", "HTTP 500"], "InstFol has no value")  # one success: a value exists
    require_judged([], "InstFol has no value")
    with pytest.raises(AllJudgmentsFailed, match="all 2 judgments failed, so InstFol has no value: 2x HTTP 500"):
        require_judged(["HTTP 500", "HTTP 500"], "InstFol has no value")


def test_a_failed_judgment_counts_as_failed_never_as_parsed_or_warned():
    ok = Judgment(score=2, weighted=2.0, probs=None, weighting="parsed", raw="2", warning="served by m2")
    failed = replace(Judgment.failure("HTTP 500"), weighting="parsed", warning="served by m2")
    counts = judgment_counts([ok, failed])
    assert (counts["failed_judgments"], counts["parsed_judgments"], counts["warnings"]) == (1, 1, 1)


@pytest.mark.parametrize(("option", "value"), [("limit", -1), ("limit", True), ("limit", 2.5), ("max_chars", 0),
                                               ("per_error", 0)])
def test_error_counts_refuses_a_limit_no_table_can_keep_in_one_line(option, value):
    # on main: limit=-1 showed all messages but one, max_chars=0 two characters each ('e…'), True or 2.5 a pandas
    # TypeError
    from instir.errors import UsageError
    from instir.judge.outcomes import error_counts

    errors = [f"e{i}" for i in range(10)] + [None]
    assert list(error_counts(errors, limit=0)["error"]) == ["… 10 other message(s)"]
    assert list(error_counts(["long message"], max_chars=1)["error"]) == ["…"]
    with pytest.raises(UsageError, match=f"error_counts' {option} .* must be a whole number from"):
        error_counts(errors, examples=[str(i) for i in range(11)], **{option: value})
