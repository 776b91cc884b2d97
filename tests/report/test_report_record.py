"""A report folder's one record (``report.json``, :mod:`instir.report.record`): whatever a damaged or foreign
record holds, reading it never raises, says once which file and which sections were left out, and never
stops another report being listed, a stage writing its folder or the next writer remaking the record."""

import json
import re
import warnings
from pathlib import Path

import pytest

from instir.report.index import read_reports, write_index
from instir.report.manifest import record_dataset
from instir.report.provenance import stale_pages
from instir.report.record import RecordWarning, read_record, update_record
from instir.stages import retrieve_runs

GOOD = {"status": "ok", "started": "2026-01-01T00:00:00+00:00", "notebooks": [{"name": "01_a", "status": "ok"}]}

#: (name, what report.json holds, the sections read as left out)
DAMAGED = [
    ("notebooks as strings", {**GOOD, "notebooks": ["01_a", "02_b"]}, ["notebooks"]),
    ("an infinite wall time", json.dumps({**GOOD, "wall_s": 1.0}).replace("1.0", "1e400"), ["wall_s"]),
    ("stages reading an unknown folder", {**GOOD, "stages": {"03_metrics": [{"inputs": {"bogus": "x"}}]}},
     ["stages"]),
    ("datasets as a string", {**GOOD, "datasets": "instructir"}, ["datasets"]),
    ("a manifest whose git is a list", {**GOOD, "manifest": {"git": ["abc"]}}, ["manifest"]),
    # was linked from the parent index as href="a/../../../etc/passwd"
    ("a page outside the folder", {**GOOD, "notebooks": [{"name": "01_a", "html": "../../../etc/passwd"}]},
     ["notebooks"]),
    ("a page record outside the folder", {**GOOD, "pages": {"01_a": {"html": "/etc/passwd"}}}, ["pages"]),
    # on the commits before, one stray entry left out the whole section: every file the kit had noted was unvouched,
    # one old stage run of a version that read another folder cost the stage's whole history
    ("one bad run in a stage's history", {**GOOD, "stages": {"04_judge_validation": [
        {"stamp": "new", "parameters": {"k": 3}}, {"stamp": "old", "inputs": {"rerank": "x"}}]}},
     ["stages['04_judge_validation'][1]"]),
    ("a made entry of an unknown folder", {**GOOD, "made": {"nope": {"a": "b"}, "metrics": {"m.csv": "0" * 64}}},
     ["made['nope']"]),
    ("a made file outside the folder", {**GOOD, "made": {".": {"../evil.ipynb": "x", "01_a.html": "0" * 64}}},
     ["made['.']['../evil.ipynb']"]),
    # valid JSON no UTF-8 file can hold: on the commit before, every later run and stage into the folder failed
    # writing it back (UnicodeEncodeError)
    ("a lone surrogate", {**GOOD, "stages": {"04_judge_validation": [
        {"stamp": "new", "parameters": {"k": 3}}, {"stamp": "old", "parameters": {"note": "\ud800"}}]}},
     ["stages['04_judge_validation'][1]"]),
]


def _holds(record: dict, said: str) -> bool:
    """Whether ``record`` holds what a warning said was left out (``stages['03_metrics']``, ``made['.']['x']``)."""
    section, *keys = said.replace("']", "").split("['")
    value = record.get(section)
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            return False
        value = value[key]
    return section in record


def _write(folder: Path, body) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "report.json").write_text(body if isinstance(body, str) else json.dumps(body))
    return folder


@pytest.mark.parametrize(("name", "body", "left_out"), DAMAGED, ids=[d[0] for d in DAMAGED])
def test_a_damaged_section_is_left_out_with_one_warning_naming_the_file(tmp_path, name, body, left_out):
    folder = _write(tmp_path / "r", body)
    with pytest.warns(RecordWarning, match=rf"{folder / 'report.json'}: left out .*{re.escape(left_out[0])}") as caught:
        record = read_record(folder)
    assert len(caught) == 1 and record["status"] == "ok" and not any(_holds(record, said) for said in left_out)
    if name.startswith("a made"):  # the entries that fit are kept
        assert record["made"] in ({"metrics": {"m.csv": "0" * 64}}, {".": {"01_a.html": "0" * 64}})
    if name.startswith(("one bad run", "a lone")):
        assert [run["stamp"] for run in record["stages"]["04_judge_validation"]] == ["new"]
        update_record(folder, datasets={})  # the next writer writes what fits
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_record(folder)  # said once per version of the file



@pytest.mark.parametrize("field", ["wall_s", "render_s"])
def test_a_notebook_entry_holding_an_infinite_time_is_left_out_not_written_back(tmp_path, field):
    """A time of Infinity (as Python's json reads and writes it) would reach the index as "inf s" and be written
    back into report.json: the entry holding it is left out, the others kept."""
    second = {"name": "02_b", "status": "ok", field: 1.5}
    folder = _write(tmp_path / "r", json.dumps({**GOOD, "notebooks": [{"name": "01_a", field: float("inf")}, second]}))
    with pytest.warns(RecordWarning, match=rf"{folder / 'report.json'}: left out .*notebooks\[0\]") as caught:
        record = read_record(folder)
    assert len(caught) == 1 and [nb["name"] for nb in record["notebooks"]] == ["02_b"]
    update_record(folder, status="ok")
    assert "Infinity" not in (folder / "report.json").read_text()


def test_a_record_larger_than_the_bound_is_unreadable_not_read_whole(tmp_path, monkeypatch):
    from instir.report import record as records

    folder = _write(tmp_path / "r", GOOD)
    monkeypatch.setattr(records, "MAX_RECORD_BYTES", 10)
    with pytest.warns(RecordWarning, match=rf"{folder / 'report.json'}: unreadable \(larger than") as caught:
        record = read_record(folder)
    assert len(caught) == 1 and record == {} and record.problem.startswith("unreadable (larger than")

@pytest.mark.parametrize(("name", "body", "left_out"), DAMAGED, ids=[d[0] for d in DAMAGED])
def test_a_damaged_sibling_never_stops_the_index_or_a_stage(tmp_path, name, body, left_out):
    root = tmp_path / "reports"
    write_index(root)  # the index make reports left
    _write(root / "old", body)
    out = root / "new"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RecordWarning)
        retrieve_runs(out, ["instructir-sample"], ["bm25"], k=10)  # rewrites the index beside it
        listed = {meta["folder"]: meta for meta in read_reports(root)}
    assert read_record(out)["stages"]["02_retrieval"]
    assert "old" in listed and 'id="old"' in (root / "index.html").read_text()  # rewritten, the sibling shown


def test_a_damaged_record_is_remade_by_the_next_writer(tmp_path):
    folder = _write(tmp_path / "r", {**GOOD, "stages": {"03_metrics": [{"inputs": {"bogus": "x"}}]},
                                     "datasets": "instructir"})
    with pytest.warns(RecordWarning):
        assert stale_pages(folder) == []
    from instir.benchmarks import load_benchmark

    record_dataset(folder, load_benchmark("instructir-sample"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        record = read_record(folder)
    assert record["datasets"]["instructir-sample"]["sample"] is True and not record.get("stages")
    assert record["notebooks"] == [{**GOOD["notebooks"][0], "source": "", "executed": "", "html": None,
                                    "wall_s": None, "render_s": None, "error": None}]


@pytest.mark.parametrize("text", ["{not json", "\x00\x01", '{"status": "ok", "notebooks": [' * 50_000],
                         ids=["broken", "binary", "nested past the recursion limit"])
def test_a_record_that_is_not_json_is_listed_as_unreadable_and_remade(tmp_path, text):
    folder = _write(tmp_path / "reports" / "broken", text)
    with pytest.warns(RecordWarning, match=rf"{folder / 'report.json'}: not JSON"):
        (entry,) = read_reports(tmp_path / "reports")
    assert entry["folder"] == "broken" and entry["status"] == "failed" and "unreadable" in entry["error"]
    update_record(folder, status="running", notebooks=[])
    assert read_record(folder) == {"status": "running", "notebooks": []}


def test_another_tools_report_json_is_not_listed_and_warned_about_once(tmp_path):
    _write(tmp_path / "pytest", [1, 2])
    _write(tmp_path / "mine", GOOD)
    with pytest.warns(RecordWarning, match="not a JSON object") as caught:
        assert [meta["folder"] for meta in read_reports(tmp_path)] == ["mine"]
    assert len(caught) == 1
    assert "mine" in write_index(tmp_path).read_text()


def test_each_writer_replaces_only_its_own_sections(tmp_path):
    update_record(tmp_path, stages={"02_retrieval": [{"stamp": "a", "inputs": {}}]})
    update_record(tmp_path, status="ok", notebooks=[])
    update_record(tmp_path, datasets={"x": {"revision": "r"}})
    record = read_record(tmp_path)
    assert set(record) == {"status", "notebooks", "stages", "datasets"}
    with pytest.raises(ValueError, match="not sections of a report record: bogus"):
        update_record(tmp_path, bogus=1)


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "folder"])
def test_a_record_that_is_no_regular_file_reads_as_unreadable_at_once(tmp_path, kind):
    """On the commit before, a FIFO named report.json in a sibling folder blocked every later instir run into the
    reports root for ever (the index reads every sibling's record), and a link to /dev/zero read without end."""
    import os

    folder = tmp_path / "old"
    folder.mkdir()
    path = folder / "report.json"
    {"fifo": lambda: os.mkfifo(path), "/dev/zero": lambda: path.symlink_to("/dev/zero"),
     "folder": path.mkdir}[kind]()
    with pytest.warns(RecordWarning, match=rf"{path}: unreadable \(is a "):
        record = read_record(folder)
    assert record == {} and record.problem.startswith("unreadable")
    with pytest.warns(UserWarning, match="is not instir's record .*set aside"):
        update_record(folder, status="ok")  # the next writer keeps it aside and remakes the record
    assert read_record(folder)["status"] == "ok"


def test_another_tools_key_in_a_record_is_not_read_and_not_warned_about(tmp_path):
    folder = _write(tmp_path / "r", {**GOOD, "their_tool": {"anything": [1, 2]}})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        record = read_record(folder)
    assert sorted(record) == ["notebooks", "started", "status"] and record.problem is None


def test_every_section_left_out_is_named_in_the_one_warning(tmp_path):
    folder = _write(tmp_path / "r", {**GOOD, "wall_s": "slow", "datasets": "instructir", "planned": 3})
    with pytest.warns(RecordWarning, match="left out what does not fit instir's record: wall_s, datasets, planned;"
                      ) as caught:
        record = read_record(folder)
    assert len(caught) == 1 and sorted(record) == ["notebooks", "started", "status"]


def test_a_section_none_of_whose_entries_fits_is_named_once_as_a_whole(tmp_path):
    folder = _write(tmp_path / "r", {**GOOD, "notebooks": ["01_a", "02_b"]})
    with pytest.warns(RecordWarning, match="left out what does not fit instir's record: notebooks; the next writer"):
        assert "notebooks" not in read_record(folder)


def test_a_section_given_as_none_is_removed_and_the_sections_keep_the_records_order(tmp_path):
    folder = tmp_path / "r"
    folder.mkdir()
    update_record(folder, made={"metrics": {"m.csv": "0" * 64}}, wall_s=2.5)
    update_record(folder, status="ok", wall_s=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read_record(folder) == {"status": "ok", "made": {"metrics": {"m.csv": "0" * 64}}}
    assert list(json.loads((folder / "report.json").read_text())) == ["status", "made"]  # the run's fields first


def test_a_run_record_whose_status_is_damaged_is_listed_as_unreadable_not_as_a_run(tmp_path):
    _write(tmp_path / "reports" / "r", {**GOOD, "status": 3})
    with pytest.warns(RecordWarning):
        (entry,) = read_reports(tmp_path / "reports")
    assert entry["status"] == "failed" and entry["error"].startswith("unreadable report.json: left out")
    assert entry["error"].endswith("record: status")


def test_instir_run_writes_only_the_runs_own_sections():
    # the notebooks write datasets, the stages stages/pages/made, a sweep its cells: instir run's write of its own
    # sections (None removes one) must leave them as they are
    from instir.report.record import RUN_SECTIONS

    assert set(RUN_SECTIONS) == {"status", "out_dir", "parameters", "defaults", "show_code", "kernel", "started",
                                 "manifest", "planned", "notebooks", "wall_s", "finished", "error"}


def test_a_record_damaged_again_after_a_warning_is_warned_about_again(tmp_path):
    import os

    folder = _write(tmp_path / "r", {**GOOD, "wall_s": "slow"})
    with pytest.warns(RecordWarning, match="wall_s"):
        read_record(folder)
    _write(folder, {**GOOD, "planned": 3})  # another version of the file, damaged otherwise
    os.utime(folder / "report.json", ns=(1_000_000_000, 1_000_000_000))
    with pytest.warns(RecordWarning, match="planned"):
        read_record(folder)


def test_a_record_that_is_not_utf8_is_unreadable_with_one_warning_not_a_traceback(tmp_path):
    folder = tmp_path / "r"
    folder.mkdir()
    (folder / "report.json").write_bytes(b'{"status": "\xff"}')
    with pytest.warns(RecordWarning, match=rf"{folder / 'report.json'}: unreadable \("):
        assert read_record(folder) == {}


@pytest.mark.parametrize("kind", ["folder", "symlink"])
def test_a_record_that_is_a_folder_or_a_link_is_set_aside_by_the_next_writer_which_writes_its_own(tmp_path, kind):
    """A folder named report.json stopped every later run and stage into the folder ("Is a directory"), after a stage
    had written half its files; a symlink (to a file outside the folder) was replaced without a word."""
    folder = tmp_path / "r"
    folder.mkdir()
    path = folder / "report.json"
    outside = tmp_path / "mine.json"
    outside.write_text('{"mine": 1}')
    if kind == "folder":
        path.mkdir()
        (path / "notes.txt").write_text("kept")
    else:
        path.symlink_to(outside)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RecordWarning)
        with pytest.warns(UserWarning, match=rf"{path} is not instir's record .*set aside as {path}\.set-aside-"):
            update_record(folder, status="ok")
    assert read_record(folder) == {"status": "ok"} and path.is_file() and not path.is_symlink()
    (aside,) = folder.glob("report.json.set-aside-*")
    assert (aside / "notes.txt").read_text() == "kept" if kind == "folder" else aside.resolve() == outside
    assert outside.read_text() == '{"mine": 1}'


def test_a_newer_kits_section_is_never_read_and_is_written_back_as_it_was(tmp_path):
    # a colleague's newer kit wrote a section this one does not know: the next writer here dropped it without a word
    folder = _write(tmp_path / "r", {**GOOD, "costs": {"judge": {"usd": 41.7}}, "format": 3, "odd": "\ud800"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        record = read_record(folder)
        assert "costs" not in record and "format" not in record
        update_record(folder, status="running")
    written = json.loads((folder / "report.json").read_text())
    assert written["status"] == "running" and written["costs"] == {"judge": {"usd": 41.7}} and written["format"] == 3
    assert "odd" not in written  # no UTF-8 file can hold it (a lone surrogate): left out


@pytest.mark.parametrize("body", [{"created": 1.0, "tests": [{"nodeid": "t.py::a", "outcome": "passed"}]},
                                  [{"name": "a", "passed": True}]], ids=["an object", "a list"])
def test_another_tools_report_json_is_set_aside_by_the_next_writer_not_written_over(tmp_path, body):
    # pytest-json-report's report.json in a folder given as --out was replaced by instir's record without a word
    folder = _write(tmp_path / "proj", body)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RecordWarning)
        with pytest.warns(UserWarning, match=rf"{folder / 'report.json'} is another tool's file, not instir's record: "
                                             "set aside as"):
            update_record(folder, status="ok")
    (aside,) = folder.glob("report.json.set-aside-*")
    assert json.loads(aside.read_text()) == body
    assert json.loads((folder / "report.json").read_text()) == {"status": "ok"}


@pytest.mark.parametrize("before", [None, '{"status": "running"}', "{}"], ids=["no record", "the kit's", "empty"])
def test_a_record_of_the_kits_or_none_yet_is_written_without_a_warning_and_nothing_set_aside(tmp_path, before):
    # only what the kit cannot have written is kept aside: a folder's first record, and the kit's own (or an empty
    # object, which holds no other tool's keys) are written in place without a word
    if before is not None:
        (tmp_path / "report.json").write_text(before)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        update_record(tmp_path, status="ok")
    assert json.loads((tmp_path / "report.json").read_text()) == {"status": "ok"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]
