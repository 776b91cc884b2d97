"""An MTEB prediction file is bounded before it is read (issue 30, item 2): a file above the
stated size is refused without reading it, and numbers outside float64 or float32 runs, integers
of thousands of digits, deep nesting and repeated keys are one line naming the file and the
field, never a traceback or a silent last-one-wins."""

from __future__ import annotations

import builtins

import pytest
from says import raises_saying
from test_cli_errors import fails

from instir.benchmarks.types import FormatError
from instir.retrieval import mteb
from instir.retrieval.mteb import read_mteb_predictions

QUERY = "sample-fiqa-q1_v1"


def predictions(tmp_path, text: str):
    path = tmp_path / "IFIRFiQA_predictions.json"
    path.write_text(text)
    return path


def test_a_file_above_the_cap_is_refused_without_being_read(tmp_path, monkeypatch):
    path = tmp_path / "IFIRFiQA_predictions.json"
    with open(path, "wb") as fh:
        fh.truncate(mteb.MAX_PREDICTIONS_BYTES + 1)  # sparse: 1 GiB of NUL bytes that cost no disk
    opened = []
    monkeypatch.setattr(builtins, "open", lambda *a, **k: opened.append(a) or (_ for _ in ()).throw(AssertionError))
    with pytest.raises(FormatError) as err:
        read_mteb_predictions(path)
    assert str(err.value) == (f"{path}: {mteb.MAX_PREDICTIONS_BYTES + 1:,} bytes, more than the "
                              f"{mteb.MAX_PREDICTIONS_BYTES:,} a prediction file may have (MTEB's top 1,000 of "
                              "10,000 queries take about 0.4 GB)")
    assert not opened  # was: read whole (4.3 GB RSS for 2 GB of NUL bytes) before the error


@pytest.mark.parametrize(("score", "problem"), [
    ("1e308", "field 'd1': the score 1e+308 does not fit a 32-bit float, in which runs hold scores"),
    ("-3.5e38", "field 'd1': the score -3.5e+38 does not fit a 32-bit float"),
    ("1e400", "the number 1e400 lies outside 64-bit floats"),
    ("9" * 5000, "an integer of 5,000 digits (more than 400) is no score"),
])
def test_numbers_no_run_can_hold_are_one_line_naming_the_field(tmp_path, score, problem):
    path = predictions(tmp_path, f'{{"default": {{"test": {{"{QUERY}": {{"d1": {score}}}}}}}}}')
    with pytest.raises(FormatError) as err:  # was: a float32 overflow ValueError, or Python's 4300-digit one
        read_mteb_predictions(path)
    assert str(err.value).startswith(str(path)) and problem in str(err.value) and "\n" not in str(err.value)


def test_json_nested_100000_deep_is_one_line_not_a_recursion_error(tmp_path):
    path = predictions(tmp_path, "[" * 100_000 + "]" * 100_000)
    with raises_saying(FormatError, "nested deeper", "4 objects deep"):
        read_mteb_predictions(path)


@pytest.mark.parametrize(("text", "key"), [
    (f'{{"default": {{"test": {{"{QUERY}": {{"d1": 1.0}}, "{QUERY}": {{"d2": 2.0}}}}}}}}', QUERY),
    (f'{{"default": {{"test": {{"{QUERY}": {{"d1": 1.0, "d2": 0.5, "d1": 3.0}}}}}}}}', "d1"),
])
def test_a_repeated_query_or_document_id_is_refused_naming_it(tmp_path, text, key):
    path = predictions(tmp_path, text)
    with pytest.raises(FormatError) as err:  # was: the last one won, silently
        read_mteb_predictions(path)
    assert str(err.value) == (f"{path}, field '{key}': the key appears twice in one object (a repeated query or "
                              "document id: which one counts?)")


def test_instir_evaluate_answers_a_bad_predictions_file_in_one_line(tmp_path, capsys):
    path = predictions(tmp_path, f'{{"default": {{"test": {{"{QUERY}": {{"d1": 1e308}}}}}}}}')
    line = fails(capsys, "evaluate", "--benchmark", "ifir-sample/fiqa", "--run", str(path), "--out",
                 str(tmp_path / "out"))
    assert line.startswith(f"instir evaluate: {path}, ") and "does not fit a 32-bit float" in line


def test_a_file_of_exactly_the_cap_is_read(tmp_path, monkeypatch):
    path = predictions(tmp_path, f'{{"default": {{"test": {{"{QUERY}": {{"d1": 1.5}}}}}}}}')
    monkeypatch.setattr(mteb, "MAX_PREDICTIONS_BYTES", path.stat().st_size)
    assert read_mteb_predictions(path).scores == {QUERY: {"d1": 1.5}}
    monkeypatch.setattr(mteb, "MAX_PREDICTIONS_BYTES", path.stat().st_size - 1)
    with raises_saying(FormatError, "bytes, more than the"):
        read_mteb_predictions(path)


@pytest.mark.parametrize("sign", ["", "-"])
def test_an_integer_of_exactly_the_digit_limit_is_judged_as_a_score_not_by_its_length(tmp_path, sign):
    number = sign + "9" * mteb.MAX_DIGITS  # the minus sign is no digit
    path = predictions(tmp_path, f'{{"default": {{"test": {{"{QUERY}": {{"d1": {number}}}}}}}}}')
    with pytest.raises(FormatError) as err:
        read_mteb_predictions(path)
    assert "does not fit a 32-bit float" in str(err.value) and "digits" not in str(err.value)


def test_a_document_id_of_100k_characters_is_quoted_cut_in_the_message_of_its_bad_score(tmp_path):
    # on main: the id, the field of the FormatError, went into the message whole (100 KB), past PROBLEM_LIMIT
    from instir.benchmarks.types import PROBLEM_LIMIT

    doc = "d" * 100_000
    path = predictions(tmp_path, f'{{"default": {{"test": {{"{QUERY}": {{"{doc}": "x"}}}}}}}}')
    with pytest.raises(FormatError) as err:
        read_mteb_predictions(path)
    assert f"field '{'d' * 80}… (100000 chars)': expected a finite number" in str(err.value)
    assert len(str(err.value)) < len(str(path)) + PROBLEM_LIMIT and err.value.field == doc


@pytest.mark.parametrize(("score", "problem"), [("9" * 401, "an integer of 401 digits (more than 400) is no score"),
                                                ("1e400", "the number 1e400 lies outside 64-bit floats")],
                         ids=["401 digits", "past float64"])
def test_a_number_past_the_limits_names_its_line(tmp_path, score, problem):
    # on main: only the file was named, in a prediction file of a million lines
    path = predictions(tmp_path, f'{{"default": {{"test": {{\n"{QUERY}": {{\n"d0": 1.5,\n"d1": {score}}}}}}}}}')
    with pytest.raises(FormatError) as err:
        read_mteb_predictions(path)
    assert str(err.value) == f"{path}, line 4: {problem}"
