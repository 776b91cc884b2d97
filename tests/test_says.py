"""The message assertions of :mod:`says` pass a reworded message that names the same things, and
fail one that drops a name, names them out of order, or spans lines."""

import pytest
from says import raises_saying, says


def test_a_reworded_message_naming_the_same_things_passes():
    says("runs.trec, line 2, field 'rank': 'two' is not a whole number", "runs.trec", "line 2", "'rank'", "'two'")
    says("in runs.trec at line 2 the rank field ('rank') reads 'two'", "runs.trec", "line 2", "'rank'", "'two'")


@pytest.mark.parametrize("message", [
    "runs.trec, field 'rank': 'two' is not a whole number",  # the line is not named
    "line 2 of runs.trec, field 'rank': 'two'",  # the line before the file
    "runs.trec, line 2,\nfield 'rank': 'two'",  # two lines
])
def test_a_message_that_drops_reorders_or_splits_the_names_fails(message):
    with pytest.raises(AssertionError):
        says(message, "runs.trec", "line 2", "'rank'", "'two'")


def test_raises_saying_reads_the_errors_first_argument():
    with raises_saying(KeyError, "unknown system", "'X'"):
        raise KeyError("unknown system 'X'")
    with pytest.raises(AssertionError), raises_saying(ValueError, "field 'k'"):
        raise ValueError("k must be a number")
