"""Ids that hold a control character (NUL, ESC, a tab) are refused at the readers' one entrance
(:func:`instir.benchmarks.readers.check_id`) in one line naming the file, line and field, before any scorer
sees them: pytrec_eval cuts an id at NUL, so ``<relevant id>\\x00junk`` would score as the relevant document.
Whatever names a command prints (a run's, an MTEB ``model_name``) cannot drive the terminal."""

import json
import shutil
from collections import namedtuple
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from says import raises_saying

from instir.benchmarks import load_benchmark
from instir.benchmarks.readers import iter_corpus_docs, read_qrels
from instir.benchmarks.types import FormatError
from instir.cli import main
from instir.metrics import evaluate_runs
from instir.metrics.inputs import qrels_of, run_of
from instir.retrieval.mteb import read_mteb_predictions
from instir.retrieval.runs import read_run

#: a run's row as ir_measures' ScoredDoc names its fields
ScoredDoc = namedtuple("ScoredDoc", ["query_id", "doc_id", "score"])
MTEB = Path(__file__).parent / "fixtures" / "mteb" / "predictions"
FIQA = "ifir-sample/fiqa"


def _relevant() -> tuple[str, str]:
    """A query of the FiQA sample and one of its relevant documents."""
    bench = load_benchmark(FIQA)
    qid = next(q for q, docs in bench.qrels.items() if any(g > 0 for g in docs.values()))
    return qid, next(d for d, g in bench.qrels[qid].items() if g > 0)


@pytest.mark.parametrize("junk", ["\x00junk", "\x1b[2J", "\tx"])
def test_a_trec_run_whose_docid_holds_a_control_character_is_refused_at_its_line(tmp_path, junk):
    qid, doc = _relevant()
    path = tmp_path / "run.trec"
    path.write_text(f"{qid} Q0 other 1 3.0 t\n{qid} Q0 {doc}{junk} 2 2.0 t\n", encoding="utf-8")
    if junk.startswith("\t"):  # a tab splits the line: a seventh field, refused as such
        with pytest.raises(FormatError, match=rf"{path}, line 2: expected 6 whitespace-separated fields"):
            read_run(path)
        return
    with pytest.raises(FormatError, match=rf"{path}, line 2, field 'docid': .* holds U\+00(00|1B) a control "
                                          r"character at character \d+: no id may hold a control character"):
        read_run(path)


# a tag character (d1 + U+E0041 prints as d1), a Hangul filler, a variation selector, the combining grapheme joiner:
# Unicode's default-ignorable code points (a review found them accepted)
@pytest.mark.parametrize("mark", ["\u202e", "\u2066", "\u200d", "\xad", "\U000e0041", "\u3164", "\ufe0f",
                                  "\u034f"])
def test_an_id_holding_an_invisible_mark_or_a_bidi_override_is_refused_on_both_read_paths(tmp_path, mark):
    # U+202E makes an id read backwards on a terminal or a page; a zero-width joiner makes two ids read alike.
    # The fast path (pyarrow) and the slow one (a line elsewhere is odd) refuse it alike, naming the line.
    qid, doc = _relevant()
    for odd in ("", "\t"):
        path = tmp_path / "run.trec"
        path.write_text(f"{qid} Q0 other 1 3.0 t{odd}\n{qid} Q0 {doc}{mark}x 2 2.0 t\n", encoding="utf-8")
        with raises_saying(FormatError, f"{path}, line 2, field 'docid'", f"U+{ord(mark):04X}",
                           "shows as nothing or reorders what is shown"):
            read_run(path)


def test_the_nul_twin_of_a_relevant_document_cannot_reach_pytrec_eval(tmp_path, capsys):
    qid, doc = _relevant()
    run = tmp_path / "run.trec"
    run.write_text(f"{qid} Q0 {doc}\x00junk 1 3.0 t\n", encoding="utf-8")
    assert main(["evaluate", "--benchmark", FIQA, "--run", str(run), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{run}, line 1, field 'docid'" in err and "\x00" not in err
    assert not (tmp_path / "out" / "metrics").exists()


def test_an_mteb_predictions_file_with_a_nul_in_an_id_is_refused_naming_the_query(tmp_path):
    data = json.loads((MTEB / "IFIRFiQA_predictions.json").read_text())
    split = next(iter(data[next(k for k in data if k != "mteb_model_meta")].values()))
    qid = next(iter(split))
    doc = next(iter(split[qid]))
    split[qid][doc + "\x00junk"] = split[qid].pop(doc)
    path = tmp_path / "IFIRFiQA_predictions.json"
    path.write_text(json.dumps(data))
    with pytest.raises(FormatError, match=rf"query '{qid}', field 'document id': .* holds U\+0000"):
        read_mteb_predictions(path)


def test_ids_in_corpora_and_qrels_files_are_refused_at_their_line(tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "d1", "text": "a"}\n{"_id": "d2\\u001b[31m", "text": "b"}\n')
    with pytest.raises(FormatError, match=rf"{corpus}, line 2, field '_id': 'd2\\x1b\[31m' holds U\+001B"):
        list(iter_corpus_docs(corpus))
    qrels = tmp_path / "qrels.jsonl"
    qrels.write_text('{"query-id": "q\\u0000", "corpus-id": "d1", "score": 1}\n')
    with pytest.raises(FormatError, match=rf"{qrels}, line 1, field 'query-id'"):
        read_qrels(qrels)


@pytest.mark.parametrize("given", [
    {"q": {"d\x00x": 1.0}},
    pd.DataFrame({"qid": ["q", "q"], "docid": ["a", "d\x00x"], "score": [2.0, 1.0]}),
])
def test_a_run_given_in_memory_is_checked_as_a_file_is(given):
    with pytest.raises(FormatError, match=r"the given run, row \d, field 'document id': 'd\\x00x' holds U\+0000"):
        run_of(given)


def test_qrels_given_in_memory_are_checked_as_a_file_is():
    with raises_saying(FormatError, "qrels", "row 1", "field 'query id'"):
        qrels_of({"q\x00": {"d": 1}})


def test_the_ids_of_the_real_layouts_and_samples_still_read():
    bench = load_benchmark(FIQA)
    run = run_of({q: {d: 1.0 for d in docs} for q, docs in bench.qrels.items()})
    assert evaluate_runs({"qrels": run}, bench, ["nDCG@10"]).table["value"].max() == pytest.approx(1.0)


def test_instir_evaluate_escapes_the_names_it_prints(tmp_path, capsys):
    data = json.loads((MTEB / "IFIRFiQA_predictions.json").read_text())
    data["mteb_model_meta"]["model_name"] = "evil\x1b]0;owned\x07\x1b[2Jname"
    path = tmp_path / "IFIRFiQA_predictions.json"
    path.write_text(json.dumps(data))
    (tmp_path / "other").mkdir()
    other = shutil.copy(MTEB / "IFIRFiQA_predictions.json", tmp_path / "other")
    assert main(["evaluate", "--benchmark", FIQA, "--run", str(path), "--run", str(other),
                 "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert "evil\\x1b]0;owned\\x07\\x1b[2Jname" in out  # shown as what it holds


@pytest.mark.parametrize("mark", ["\u202e", "\u2067", "\u200b", "\xad", "\x9b", "\u2028", "\u2029", "\U000e0041",
                                  "\u115f", "\ufe00"])
def test_the_terminal_escapes_every_character_an_id_may_not_hold(mark):
    # one rule for both: what a reader refuses in an id, a command never prints raw
    from instir.benchmarks.readers import check_id
    from instir.terminal import terminal_text
    with pytest.raises(FormatError):
        check_id(f"run{mark}name", Path("f"), 1, "name")
    assert mark not in terminal_text(f"run{mark}name")


def test_a_warning_a_command_prints_cannot_drive_the_terminal_either(capsys):
    # warnings go to standard error, which the progress bars share: each warning is escaped, not the stream
    import warnings

    from instir.terminal import escaped_stdout
    with escaped_stdout(), warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn("a file named 'x\x1b]0;owned\x07\u202ey.trec'")
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\u202e" not in err and "x\\x1b]0;owned\\x07\\u202ey.trec" in err


def test_what_a_data_command_writes_to_standard_output_is_the_data_its_warnings_still_escaped(capsys):
    # python -m instir.interop export: a corpus's soft hyphens and zero-width spaces are text, not terminal codes;
    # on the commit before, the export wrote them as "\xad"
    import warnings

    from instir.terminal import answered

    def export():
        print("soft\xadhyphen\u200bzero\x7f")
        warnings.warn("file 'x\x1b]0;owned\x07'")

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert answered("python -m instir.interop", export, data=True) == 0
    out, err = capsys.readouterr()
    assert out == "soft\xadhyphen\u200bzero\x7f\n" and "\x1b" not in err and "x\\x1b]0;owned" in err


def test_a_warning_a_command_prints_is_one_line_naming_the_command_and_debug_says_where(capsys):
    # on the commit before, every warning printed the kit's file and line and the line of code that warned
    import warnings

    from instir.terminal import escaped_stdout
    for prefix in ("instir evaluate", None):
        with escaped_stdout(prefix), warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("stored scores: x.parquet is zeroed:\n  removed, rebuilding it")
        err = capsys.readouterr().err
        if prefix:
            assert err == "instir evaluate: warning: stored scores: x.parquet is zeroed: removed, rebuilding it\n"
        else:
            assert "UserWarning" in err and __file__ in err


def test_an_id_with_a_space_is_refused_where_it_is_read_not_after_the_search(tmp_path):
    # on the commit before, a corpus id "a b" loaded; instir retrieve ran the whole search and then died in the run
    # writer with a ValueError naming no file
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text('{"_id": "d1", "text": "a"}\n{"_id": "a b", "text": "b"}\n')
    with raises_saying(FormatError, f"{corpus}, line 2, field '_id'", "'a b' holds U+0020 SPACE",
                       "a TREC run or qrels line cannot hold it"):
        list(iter_corpus_docs(corpus))


@pytest.mark.parametrize("names", [["sys", "sys "], ["sys ", "sys"], ["sys", " sys"], ["caf\u00e9", "cafe\u0301"]])
def test_two_run_names_that_read_alike_are_refused_naming_both(tmp_path, capsys, names):
    # on the commit before, both were scored as two systems, two rows of every table that read the same
    run = tmp_path / "run.trec"
    qid, doc = _relevant()
    run.write_text(f"{qid} Q0 {doc} 1 3.0 t\n")
    assert main(["evaluate", "--benchmark", FIQA, "--run", str(run), str(run), "--name", *names,
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "names that read apart" in err
    assert f"{ascii(names[0])} and {ascii(names[1])} differ" in err
    assert not (tmp_path / "out").exists()


def test_a_newline_in_a_run_name_is_escaped_in_every_line_evaluate_prints(tmp_path, capsys):
    # on the commit before, the run checks and notes printed the name whole: its second part began a line of its own
    data = json.loads((MTEB / "IFIRFiQA_predictions.json").read_text())
    data["mteb_model_meta"]["model_name"] = "evil\ninstir evaluate: forged line"
    queries = data["default"]["test"]
    queries.pop(next(iter(queries)))  # a query left out: the run's check is printed under its name too
    path = tmp_path / "IFIRFiQA_predictions.json"
    path.write_text(json.dumps(data))
    assert main(["evaluate", "--benchmark", FIQA, "--run", str(path), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "evil\\ninstir evaluate: forged line" in out
    assert "  evil\\ninstir evaluate: forged line: " in out  # the check's line
    assert not any(line.startswith("instir evaluate: forged") for line in out.splitlines())


@pytest.mark.parametrize("given", [
    pd.DataFrame({"qid": ["q", "q"], "docid": ["a", None], "score": [2.0, 1.0]}),
    pd.DataFrame({"qid": ["q", "q"], "docid": ["a", float("nan")], "score": [2.0, 1.0]}),
    {"q": {"a": 2.0, None: 1.0}},
    {b"q": {"a": 1.0}},
])
def test_a_run_given_in_memory_without_an_id_or_with_bytes_is_refused_naming_the_row(given):
    # on the commit before: a pyarrow traceback ("Expected bytes, got a 'float' object") or the ids 'None', "b'q'"
    with raises_saying(FormatError, "the given run, row", "expected an id (a string or a whole number)"):
        run_of(given)


def test_qrels_given_in_memory_without_a_document_id_are_refused_not_judged_as_document_none():
    with raises_saying(FormatError, "the given qrels, row 1, field 'document id'", "got None"):
        qrels_of({"q": {None: 1}})
    assert qrels_of({1: {2: 1}}) == {"1": {"2": 1}}  # whole numbers are ids, as in a file


def test_two_run_names_that_differ_in_more_than_unicode_form_or_spaces_are_two_systems(tmp_path):
    # x² and x2 are told apart on a page (NFKC would fold them; NFC does not)
    run = tmp_path / "run.trec"
    qid, doc = _relevant()
    run.write_text(f"{qid} Q0 {doc} 1 3.0 t\n")
    assert main(["evaluate", "--benchmark", FIQA, "--run", str(run), str(run), "--name", "x\u00b2", "x2",
                 "--out", str(tmp_path / "out")]) == 0


@pytest.mark.parametrize("given, said", [
    (pd.DataFrame({"qid": ["q", "q", None], "docid": ["a", "b", "c"], "score": [3.0, 2.0, 1.0]}),
     "the given run, row 3, field 'query id'"),
    (pd.DataFrame({"qid": ["q", "q", "r"], "docid": ["a", "b", None], "score": [3.0, 2.0, 1.0]}),
     "the given run, row 3, field 'document id'"),
    (pd.DataFrame({"qid": ["q", "q x"], "docid": ["a", "b"], "score": [2.0, 1.0]}),
     "the given run, row 2, field 'query id'"),
    ({"q": {"a": 2.0, "b": 1.0}, "r": {b"c": 1.0}}, "the given run, row 3, field 'document id'"),
    ([ScoredDoc("q", "a", 2.0), ScoredDoc("q", bytearray(b"c"), 1.0)], "the given run, row 2, field 'document id'"),
    ({"q": {"a": 2.0}, None: {"c": 1.0}}, "the given run, row 2, field 'query id'"),
])
def test_a_run_id_given_in_memory_that_is_refused_is_named_by_its_row_and_field(given, said):
    with raises_saying(FormatError, said):
        run_of(given)


@pytest.mark.parametrize("given, said", [
    (pd.DataFrame({"qid": ["q", "r", None], "docid": ["a", "b", "c"], "relevance": [1, 0, 1]}),
     "the given qrels, row 3, field 'query id'"),
    (pd.DataFrame({"qid": ["q", "r", "r"], "docid": ["a", "b", None], "relevance": [1, 0, 1]}),
     "the given qrels, row 3, field 'document id'"),
    ({"q": {"a": 1}, None: {}}, "the given qrels, its query keys, field 'query id'"),  # no judgment: kept as a query
])
def test_a_qrels_id_given_in_memory_that_is_refused_is_named_by_its_row_and_field(given, said):
    with raises_saying(FormatError, said):
        qrels_of(given)


def test_numpy_whole_numbers_given_in_memory_are_ids_written_as_their_digits():
    assert qrels_of({np.int64(1): {np.int64(2): 1}, np.int64(3): {}}) == {"1": {"2": 1}, "3": {}}
    assert run_of({np.int64(1): {np.int64(2): 0.5}}).df[["qid", "docid"]].values.tolist() == [["1", "2"]]
