"""The shared readers on hostile input: grades that are not whole numbers, bytes that are not
UTF-8, a byte-order mark, huge ids, and broken Parquet files. Every refusal is one
FormatError naming the file, the line and the field; nothing is truncated silently."""

import bz2
import codecs
import io
import json
import lzma
import re
import shutil
import sys
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from says import raises_saying

from instir.benchmarks.docstore import jsonl_corpus
from instir.benchmarks.ifir import load_ifir
from instir.benchmarks.instructir import load_instructir
from instir.benchmarks.readers import grade, read_json_array, read_qrels, read_qrels_files, read_records
from instir.benchmarks.types import FormatError, quoted
from instir.errors import UsageError

FIXTURES = Path(__file__).parent / "fixtures"


def qrels_file(tmp_path: Path, kind: str, grades: list) -> Path:
    """A qrels file in one of the read layouts with one judgment per grade."""
    if kind == "tsv":
        path = tmp_path / "test.tsv"
        path.write_text("qid\tpid\tscore\n" + "".join(f"q{i}\td{i}\t{g}\n" for i, g in enumerate(grades)))
    elif kind == "trec":
        path = tmp_path / "qrels.txt"
        path.write_text("".join(f"q{i} 0 d{i} {g}\n" for i, g in enumerate(grades)))
    elif kind == "jsonl":
        path = tmp_path / "test.jsonl"
        path.write_text("".join(json.dumps({"query-id": f"q{i}", "corpus-id": f"d{i}", "score": g}) + "\n"
                                for i, g in enumerate(grades)))
    else:
        path = tmp_path / "test.parquet"
        pq.write_table(pa.table({"query-id": [f"q{i}" for i in range(len(grades))],
                                 "corpus-id": [f"d{i}" for i in range(len(grades))], "score": grades}), path)
    return path


#: (layout, bad grade, line of the second judgment in that layout)
BAD_GRADES = [("tsv", "0.9", 3), ("tsv", "1.5", 3), ("tsv", "inf", 3), ("tsv", "nan", 3), ("tsv", "1e400", 3),
              ("tsv", "two", 3), ("trec", "1.5", 2), ("jsonl", 0.9, 2), ("jsonl", 1.5, 2), ("jsonl", True, 2),
              ("jsonl", None, 2), ("jsonl", "0.5", 2), ("parquet", 1.5, 2), ("parquet", float("inf"), 2)]


@pytest.mark.parametrize("kind, bad, line", BAD_GRADES)
def test_fractional_infinite_or_non_numeric_grade_is_refused_with_file_line_and_field(tmp_path, kind, bad, line):
    path = qrels_file(tmp_path, kind, [1, bad, 1] if kind != "parquet" else [1.0, bad, 1.0])
    with pytest.raises(FormatError) as err:
        read_qrels(path)
    assert (err.value.path, err.value.where, err.value.field) == (str(path), line, "score")
    assert "expected an integer grade" in str(err.value)


@pytest.mark.parametrize("kind", ["tsv", "trec", "jsonl", "parquet"])
def test_integral_and_negative_grades_are_read_as_ints(tmp_path, kind):
    grades = {"tsv": ["2", "2.0", "-1", " 0 "], "trec": ["2", "2.0", "-1", "0"], "jsonl": [2, 2.0, -1, "0"],
              "parquet": [2.0, 2.0, -1.0, 0.0]}[kind]
    qrels, _ = read_qrels(qrels_file(tmp_path, kind, grades))
    assert qrels == {"q0": {"d0": 2}, "q1": {"d1": 2}, "q2": {"d2": -1}, "q3": {"d3": 0}}
    assert all(type(g) is int for rel in qrels.values() for g in rel.values())


def test_grade_accepts_only_whole_numbers():
    assert [grade(v, Path("f"), 1) for v in (3, "3", " 3 ", 3.0, "3.0", "-2", "1e2")] == [3, 3, 3, 3, 3, -2, 100]
    for value in (0.9, "0.9", float("nan"), "-inf", False, [1], {}):
        with pytest.raises(FormatError, match="expected an integer grade"):
            grade(value, Path("f"), 1)
    for value in (2**31, "-1e12", 10**30):  # beyond what trec_eval's C long holds everywhere
        with pytest.raises(FormatError, match="is beyond"):
            grade(value, Path("f"), 1)


def test_instructir_fractional_grade_no_longer_drops_the_query(tmp_path):
    root = tmp_path / "hf"
    shutil.copytree(FIXTURES / "instructir-hf", root)
    path = root / "qrels" / "test.tsv"
    lines = path.read_text().splitlines()
    qid, did, _ = lines[1].split("\t")
    lines[1] = f"{qid}\t{did}\t0.9"  # was read as 0: the query lost its only relevant document
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(FormatError) as err:
        load_instructir(root, "instructed")
    assert (err.value.path, err.value.where, err.value.field) == (str(path), 2, "score")


@pytest.mark.parametrize("name, content, line, column", [
    ("corpus.jsonl", b'{"_id": "a", "text": "ok"}\n{"_id": "b", "text": "caf\xe9"}\n', 2, 26),
    ("test.tsv", b"qid\tpid\tscore\nq1\td\xff1\t1\n", 2, 5),
    ("test_data.json", b'[\n  {"_id": "q1",\n   "text": "\x80"}\n]\n', 3, 13),
])
def test_bytes_that_are_not_utf8_name_file_line_and_column(tmp_path, name, content, line, column):
    path = tmp_path / name
    path.write_bytes(content)
    read = {"corpus.jsonl": lambda p: list(read_records(p)), "test.tsv": read_qrels, "test_data.json": read_json_array}
    with pytest.raises(FormatError) as err:
        read[name](path)
    assert (err.value.path, err.value.where) == (str(path), line)
    assert f"not UTF-8 text (byte 0x{content.splitlines()[line - 1][column - 1]:02x} at column {column})" \
        in str(err.value)


def test_byte_order_mark_is_accepted_in_every_text_reader(tmp_path):
    bom = codecs.BOM_UTF8
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(bom + b'{"_id": "d1", "text": "first"}\n{"_id": "d2", "text": "second"}\n')
    assert jsonl_corpus(corpus).ids() == ["d1", "d2"]
    tsv = tmp_path / "test.tsv"
    tsv.write_bytes(bom + b"qid\tpid\tscore\nq1\td1\t1\n")
    assert read_qrels(tsv)[0] == {"q1": {"d1": 1}}
    array = tmp_path / "test_data.json"
    array.write_bytes(bom + b'[{"_id": "q1"}]')
    assert read_json_array(array) == [{"_id": "q1"}]


@pytest.mark.parametrize("layout, files", [("songtingyu", ["fiqa/fiqa-corpus.jsonl", "fiqa/test_data.json"]),
                                           ("beir", ["fiqa/fiqa-query.jsonl", "fiqa/fiqa-qrel.tsv"]),
                                           ("readme", ["fiqa/fiqa-query.json", "fiqa/fiqa-qrel.jsonl"])])
def test_ifir_files_saved_with_a_byte_order_mark_load_like_the_originals(tmp_path, layout, files):
    root = tmp_path / layout
    shutil.copytree(FIXTURES / f"ifir-{layout}", root)
    plain = load_ifir(root, "fiqa")
    for name in files:
        (root / name).write_bytes(codecs.BOM_UTF8 + (root / name).read_bytes())
    with_bom = load_ifir(root, "fiqa")
    assert with_bom.queries == plain.queries and with_bom.qrels == plain.qrels
    assert with_bom.corpus.ids() == plain.corpus.ids()


def test_a_huge_id_is_quoted_short_in_messages(tmp_path):
    huge = "x" * 10_000_000
    corpus = tmp_path / "corpus.jsonl"
    line = json.dumps({"_id": huge, "text": "t"}) + "\n"
    corpus.write_text(line + line)
    with pytest.raises(FormatError) as err:
        list(jsonl_corpus(corpus))
    message = str(err.value)
    assert len(message) < 300 and "… (10000000 chars)" in message and "line 2" in message


def test_quoted_caps_long_values_and_escapes_control_characters():
    assert quoted("d1") == "'d1'"
    assert quoted("a" * 100) == repr("a" * 80) + "… (100 chars)"
    assert quoted("\x1b[31mred") == repr("\x1b[31mred")  # no terminal escape reaches the screen
    assert len(quoted(list(range(10_000)))) < 120


def test_a_problem_text_is_capped_even_when_a_value_is_not_quoted():
    err = FormatError("f.tsv", 3, "corpus-id", "unknown document id " + "y" * 50_000)
    assert len(str(err)) < 1100 and str(err).endswith("(50020 chars)")


def test_a_broken_parquet_file_is_a_format_error(tmp_path):
    path = tmp_path / "test.parquet"
    path.write_bytes(b"PAR1 this is not parquet")
    with pytest.raises(FormatError, match="not a readable Parquet file") as err:
        list(read_records(path))
    assert err.value.path == str(path)


# -- bounded sizes: a document over the limit never reaches a tokenizer ---------------------------

def _corpus(tmp_path: Path, *texts: str) -> Path:
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    return path


def test_a_document_over_the_limit_is_refused_with_file_line_field_and_length(tmp_path, monkeypatch):
    import instir.benchmarks.readers as readers

    monkeypatch.setattr(readers, "MAX_DOC_CHARS", 1000)
    path = _corpus(tmp_path, "short text", "x" * 1500)
    for read in (lambda: list(jsonl_corpus(path)), lambda: jsonl_corpus(path).ids()):  # streaming and the index
        with pytest.raises(FormatError) as err:
            read()
        assert str(err.value) == (f"{path}, line 2, field 'text': document 'd1' holds 1,500 characters, more than "
                                  "the 1,000 a document may hold (INSTIR_MAX_DOC_CHARS changes that)")
    monkeypatch.setenv("INSTIR_MAX_DOC_CHARS", "2000")
    assert jsonl_corpus(path).ids() == ["d0", "d1"]


def test_a_line_over_the_limit_is_refused_without_holding_it(tmp_path, monkeypatch):
    import tracemalloc

    import instir.benchmarks.readers as readers

    monkeypatch.setattr(readers, "MAX_DOC_CHARS", 1000)
    limit = readers.line_limit()
    path = _corpus(tmp_path, "short text", "y" * (20 * limit))  # a 20 MiB line
    tracemalloc.start()
    try:
        with pytest.raises(FormatError) as err:
            list(read_records(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    length = len(path.read_text().splitlines()[1])
    assert str(err.value) == (f"{path}, line 2: line of {length:,} characters, more than the {limit:,} one record "
                              "may hold (a document may hold 1,000; INSTIR_MAX_DOC_CHARS changes that)")
    assert peak < 5 * limit  # read in pieces, never the whole 20 MiB line


def test_the_default_document_limit_stops_a_document_of_ten_million_characters(tmp_path):
    from instir.benchmarks.readers import MAX_DOC_CHARS

    path = _corpus(tmp_path, "fine", "z " * (MAX_DOC_CHARS // 2) + "zz")  # 10 MB: a stand-in for the 2 GiB one
    with raises_saying(FormatError, "line 2", "field 'text'", "'d1'", "10,000,002 characters", "10,000,000"):
        jsonl_corpus(path).ids()


def test_a_bad_document_limit_in_the_environment_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("INSTIR_MAX_DOC_CHARS", "１０")
    with raises_saying(ValueError, "INSTIR_MAX_DOC_CHARS", "whole number"):
        list(jsonl_corpus(_corpus(tmp_path, "text")))


# -- characters trec_eval would not read as Python does ------------------------------------------

@pytest.mark.parametrize("kind", ["tsv", "trec", "jsonl"])
@pytest.mark.parametrize("text,char", [("１", "U+FF11 FULLWIDTH DIGIT ONE"), ("٢", "U+0662 ARABIC-INDIC DIGIT TWO"),
                                       ("\u00a01", "U+00A0 NO-BREAK SPACE")])
def test_a_grade_in_digits_trec_eval_would_not_read_is_refused(tmp_path, kind, text, char):
    # on main: int("１") == 1 and "\xa01".strip() == "1": read silently where trec_eval's atol reads 0
    path = qrels_file(tmp_path, kind, [1, text])
    expected = f"line [23], field 'score': expected an integer grade, got .*{re.escape(char)}"
    with pytest.raises(FormatError, match=expected):
        read_qrels(path)


def test_an_underscore_in_a_grade_is_refused():
    with pytest.raises(FormatError, match="expected an integer grade, got '1_0'"):
        grade("1_0", Path("q.tsv"), 2)  # int("1_0") == 10


@pytest.mark.parametrize("line,field", [("q1\u00a0\td1\t1", "query-id"), ("q1\td1\u00a0\t1", "corpus-id"),
                                        ("q1 0 d\u00a01 1", "corpus-id"), ("q1\td\u200b1\t1", "corpus-id")])
def test_a_no_break_or_zero_width_space_in_a_qrels_id_is_refused(tmp_path, line, field):
    path = tmp_path / "qrels.tsv"
    path.write_text(f"q0\td0\t1\n{line}\n", encoding="utf-8")
    with pytest.raises(FormatError, match=f"qrels.tsv, line 2, field '{field}': '.*' holds U\\+(00A0 NO-BREAK|200B "
                                          "ZERO WIDTH) SPACE at character"):
        read_qrels(path)


@pytest.mark.parametrize("first,second,shown", [  # the Kelvin sign is K once NFC-normalized
    ("caf\u00e9", "cafe\u0301", ("'caf\u00e9' = 'caf\\xe9'", "'cafe\u0301' = 'cafe\\u0301'")),
    ("cafe\u0301", "caf\u00e9", ("'cafe\u0301' = 'cafe\\u0301'", "'caf\u00e9' = 'caf\\xe9'")),
    ("K", "\u212a", ("'K'", "'\u212a' = '\\u212a'"))])
def test_a_corpus_holding_two_unicode_forms_of_one_id_warns_naming_both_lines(tmp_path, first, second, shown):
    from instir.benchmarks.docstore import IdFormWarning

    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"_id": i, "text": "t"}) + "\n" for i in (first, "other", second)))
    with pytest.warns(IdFormWarning) as caught:
        assert jsonl_corpus(path).ids() == [first, "other", second]
    (warning,) = caught
    assert str(warning.message).startswith(
        f"document ids that differ only in Unicode normalization (NFC / NFD): {shown[0]} ({path}, line 1) and "
        f"{shown[1]} ({path}, line 3)")
    with pytest.warns(IdFormWarning):  # again from the cached index
        jsonl_corpus(path).ids()


_READ_TEXT = """
import sys
from pathlib import Path
from instir.benchmarks.readers import read_text
from instir.benchmarks.types import FormatError
try:
    read_text(Path(sys.argv[1]))
except FormatError as err:
    print(err)
"""


@pytest.mark.processes
def test_a_whole_file_reader_given_a_fifo_names_it_instead_of_waiting_for_ever(tmp_path):
    # the readers of whole JSON files (IFIR's, a JSON array) read through read_text; run in a process of its own,
    # so that a regression fails here rather than hanging the suite
    import os
    import subprocess
    import sys

    fifo = tmp_path / "queries.json"
    os.mkfifo(fifo)
    done = subprocess.run([sys.executable, "-c", _READ_TEXT, str(fifo)], capture_output=True, text=True, timeout=20)
    assert done.returncode == 0 and str(fifo) in done.stdout and "FIFO" in done.stdout, done.stderr


@pytest.mark.parametrize("kind", ["tsv", "trec", "jsonl", "parquet"])
def test_a_pair_judged_twice_in_one_qrels_file_is_refused_at_the_second_line(tmp_path, kind):
    path = qrels_file(tmp_path, kind, [1, 2])
    if kind == "parquet":
        pq.write_table(pa.table({"query-id": ["q0", "q1", "q0"], "corpus-id": ["d0", "d1", "d0"], "score": [1, 2, 0]}),
                       path)
    else:
        first = path.read_text().splitlines()[1 if kind == "tsv" else 0]
        with path.open("a") as fh:
            fh.write(first.replace("\t1", "\t0").replace(" 1", " 0") + "\n")  # q0, d0 again, another grade
    first, line = (2, 4) if kind == "tsv" else (1, 3)
    with raises_saying(FormatError, f"line {line}", "duplicate judgment for ('q0', 'd0')", f"first on line {first}"):
        read_qrels(path)


def test_a_header_row_is_skipped_on_the_first_line_only(tmp_path):
    path = tmp_path / "test.tsv"
    path.write_text("query-id\tcorpus-id\tscore\nq0\td0\t1\nquery-id\tcorpus-id\tscore\n")
    with raises_saying(FormatError, "line 3", "field 'score'", "'score'"):
        read_qrels(path)


def test_a_document_whose_title_and_text_together_pass_the_limit_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("INSTIR_MAX_DOC_CHARS", "1000")
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps({"_id": "d0", "title": "t" * 600, "text": "x" * 500}) + "\n")
    with raises_saying(FormatError, "line 1", "field 'title'", "holds 1,100 characters"):
        list(jsonl_corpus(path))


def test_an_id_given_as_true_or_false_is_refused_not_read_as_text(tmp_path):
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps({"_id": True, "text": "a document"}) + "\n")
    with raises_saying(FormatError, "line 1", "field '_id'", "expected a string, got bool"):
        list(jsonl_corpus(path))


def test_a_qrels_file_holding_only_its_header_is_refused_as_holding_no_judgments(tmp_path):
    path = tmp_path / "test.tsv"
    path.write_text("query-id\tcorpus-id\tscore\n")
    with raises_saying(FormatError, str(path), "no judgments found"):
        read_qrels(path)


def test_lines_of_only_spaces_or_tabs_in_a_qrels_file_are_skipped_as_blank(tmp_path):
    path = tmp_path / "test.tsv"
    path.write_text("query-id\tcorpus-id\tscore\nq0\td0\t1\n   \n\t\t\nq1\td1\t2\n")
    assert read_qrels(path) == ({"q0": {"d0": 1}, "q1": {"d1": 2}}, {("q0", "d0"): 2, ("q1", "d1"): 5})


@pytest.mark.parametrize("score", ["absent", None])
def test_a_json_lines_judgment_without_a_grade_is_refused_naming_its_line_not_read_as_relevant(tmp_path, score):
    path = tmp_path / "test.jsonl"
    second = {"query-id": "q1", "corpus-id": "d1"} | ({} if score == "absent" else {"score": score})
    path.write_text(json.dumps({"query-id": "q0", "corpus-id": "d0", "score": 1}) + "\n" + json.dumps(second) + "\n")
    with raises_saying(FormatError, str(path), "line 2", "field 'score'", "missing"):
        read_qrels(path)


@pytest.mark.parametrize("value", [str((sys.maxsize - (1 << 20) - 2) // 12 + 1), "1" + "0" * 20, "9" * 5000],
                         ids=["one past the ceiling", "past a C ssize_t", "past 4300 digits"])
def test_a_document_limit_in_the_environment_too_large_to_read_a_line_by_is_one_line(tmp_path, monkeypatch, value):
    # on main: OverflowError (readline's size past a C ssize_t) or ValueError (past 4300 digits), a traceback
    from instir.benchmarks.readers import MAX_DOC_CHARS_CEILING

    path = _corpus(tmp_path, "text")
    monkeypatch.setenv("INSTIR_MAX_DOC_CHARS", str(MAX_DOC_CHARS_CEILING))
    assert len(list(jsonl_corpus(path))) == 1
    monkeypatch.setenv("INSTIR_MAX_DOC_CHARS", value)
    with raises_saying(UsageError, "INSTIR_MAX_DOC_CHARS must be a positive whole number of characters (at most "
                                   f"{MAX_DOC_CHARS_CEILING:,}), got '{value[:80]}'"):
        list(jsonl_corpus(path))


def test_a_document_at_the_limit_written_with_json_escapes_of_emoji_is_read_and_one_more_is_refused(tmp_path,
                                                                                                   monkeypatch):
    # on main: a line of 12 characters per emoji (json.dumps writes each as a surrogate pair, \\ud83d\\ude00) was
    # refused as longer than 6 per character allow, though the document held no more than the limit
    monkeypatch.setenv("INSTIR_MAX_DOC_CHARS", "200000")
    path = _corpus(tmp_path, "\U0001F600" * 200_000)
    assert [len(doc.text) for doc in jsonl_corpus(path)] == [200_000]
    path = _corpus(tmp_path, "\U0001F600" * 200_001)
    with raises_saying(FormatError, "line 1", "field 'text'", "200,001 characters, more than the 200,000"):
        list(jsonl_corpus(path))


def test_a_json_number_of_more_digits_than_python_reads_is_refused_at_its_line_in_every_json_reader(tmp_path):
    # on main: json.loads raised Python's 4300-digit ValueError out of every JSON reader (JSON lines, a JSON array,
    # a Parquet export's metadata string): a traceback from instir summary / evaluate
    big = "9" * 5000
    path = tmp_path / "corpus.jsonl"
    path.write_text('{"_id": "d0", "text": "a"}\n{"_id": "d1", "text": "b", "n": ' + big + "}\n")
    with raises_saying(FormatError, f"{path}, line 2: a number of more than 4300 digits"):
        list(read_records(path))
    array = tmp_path / "test_data.json"
    array.write_text('[\n{"a": 1},\n{"a": ' + big + "}\n]\n")
    with raises_saying(FormatError, f"{array}, line 3: a number of more than 4300 digits"):
        read_json_array(array)


# ------------------------------------------------------------------ mut76: the field a qrels error names


@pytest.mark.parametrize(("header", "row", "where", "field"), [
    # a 4-column TREC-style header: the document is its third name, not its second
    ("query\titer\tdocno\trel", "q1\t0\td\u00a01\t1", 3, "docno"),
    ("query\titer\tdocno\trel", "q1\t0\td1\tx", 3, "rel"),
    ("qid\tpid\tscore", "q\u00a01\td1\t1", 3, "qid"),
    ("qid\tpid\tscore", "q1\td\u00a01\t1", 3, "pid"),
    ("query_id\tdoc_id\tgrade", "q1\td1\tx", 3, "grade"),
    ("query_id\tdoc_id\tgrade", "q0\td0\t0", 3, "doc_id"),  # the pair of line 2 again
    # a first line of two fields is no header of a qrels file: the names are the layouts' own
    ("qid\tpid", "q1\td\u00a01\t1", 3, "corpus-id"),
    ("q0\td0\t1", "q1\td1\tx", 2, "score"),  # no header: the first line is a judgment
])
def test_a_qrels_error_names_the_field_as_the_files_header_names_it(tmp_path, header, row, where, field):
    path = tmp_path / "qrels.tsv"
    first = "" if header.startswith("q0") else ("q0\t0\td0\t1\n" if header.count("\t") == 3 else "q0\td0\t1\n")
    path.write_text(f"{header}\n{first}{row}\n", encoding="utf-8")
    with pytest.raises(FormatError) as err:
        read_qrels(path)
    assert (err.value.where, err.value.field) == (where, field)


def test_a_pair_judged_in_an_earlier_qrels_file_names_the_document_field_as_its_header_does(tmp_path):
    first, second = tmp_path / "a.tsv", tmp_path / "b.tsv"
    first.write_text("qid\tpid\tscore\nq0\td0\t1\n")
    second.write_text("qid\tpid\tscore\nq1\td1\t1\nq0\td0\t2\n")
    with pytest.raises(FormatError) as err:
        read_qrels_files([first, second], {"q0", "q1"}, {"d0", "d1"})
    assert (Path(err.value.path).name, err.value.where, err.value.field) == ("b.tsv", 3, "pid")
    assert "judged in an earlier qrels file too" in err.value.problem


@pytest.mark.parametrize("line", ["q1 0\td1\t2", "q1\t0 d1 2", "q1 \t 0 d1\t2", "q1 d1\t2"])
def test_a_qrels_line_of_tabs_and_spaces_mixed_is_read_as_trec_eval_reads_it(tmp_path, line):
    # on the commit before, "q1 0<TAB>d1<TAB>2" was refused: "field 'query-id': 'q1 0' holds U+0020 SPACE … remove it"
    path = tmp_path / "qrels.txt"
    path.write_text(f"{line}\nq2 0 d2 1\n")
    assert read_qrels(path)[0] == {"q1": {"d1": 2}, "q2": {"d2": 1}}


def test_a_qrels_line_of_five_columns_is_refused_saying_the_columns_a_qrels_file_may_have(tmp_path):
    path = tmp_path / "qrels.txt"
    path.write_text("q1 0 d1 1 2024-01-01\n")
    with raises_saying(FormatError, f"{path}, line 1", "expected 3 columns (qid, pid, score) or TREC's 4",
                       "separated by tabs or spaces, got 5"):
        read_qrels(path)


def test_a_byte_order_mark_inside_a_jsonl_file_is_named_as_one_at_its_line(tmp_path):
    # two files joined with cat, the second saved with a BOM; on the commit before: "malformed JSON (Unexpected UTF-8
    # BOM (decode using utf-8-sig) at column 1)"
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(b'{"_id": "d1", "text": "a"}\n' + codecs.BOM_UTF8 + b'{"_id": "d2", "text": "b"}\n')
    with raises_saying(FormatError, f"{path}, line 2", "a byte-order mark (U+FEFF) starts this line, inside the file"):
        list(read_records(path))
    path.write_bytes(codecs.BOM_UTF8 + b'{"_id": "d1", "text": "a"}\n')  # at the start of the file: skipped
    assert [record["_id"] for _, record in read_records(path)] == ["d1"]


def _zipped(data: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:  # a fixed time: the same bytes on every run
        archive.writestr(zipfile.ZipInfo("corpus.jsonl", (2024, 1, 1, 0, 0, 0)), data, zipfile.ZIP_DEFLATED)
    return buffer.getvalue()


@pytest.mark.parametrize("packed, said", [
    (bz2.compress, "bzip2-compressed, not text: decompress it first (bunzip2)"),
    (lzma.compress, "xz-compressed, not text: decompress it first (unxz)"),
    (_zipped, "a zip archive, not text: unpack it first (unzip)"),
    (lambda data: b"\x28\xb5\x2f\xfd\x04\x58\xff" + data, "zstd-compressed, not text: decompress it first (unzstd)"),
])
def test_a_compressed_corpus_under_a_text_name_is_said_to_be_compressed_and_how_to_open_it(tmp_path, packed, said):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(packed(b'{"_id": "d1", "text": "a"}\n' * 100))
    with raises_saying(FormatError, f"{corpus}: {said}"):
        list(read_records(corpus))


def test_a_line_past_the_first_that_begins_as_an_archive_does_is_named_as_not_utf8_at_its_line(tmp_path):
    # only a file's first bytes say what it is: a later line's are text that is not UTF-8
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(b'{"_id": "d1", "text": "a"}\nPK\x03\x04\xff\n')
    with raises_saying(FormatError, f"{corpus}, line 2", "not UTF-8 text (byte 0xff at column 5)"):
        list(read_records(corpus))
