"""instir run and its report folder: never a user's own index.html or notebook overwritten, one run at a
time per folder (the second names the first), an interrupted rerun whose index says which pages
are stale, and no home folder in what a report publishes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from says import raises_saying, says

from instir.errors import UsageError
from instir.parameters import home_path
from instir.pipeline import ReportResult, run_reports
from instir.report.index import GENERATOR, write_index
from instir.report.lock import FolderLock, holder_of
from instir.retrieval.model_files import hub_command

NOTEBOOKS = Path(__file__).resolve().parent / "fixtures" / "notebooks"


def test_a_users_own_index_html_is_never_replaced(tmp_path):
    mine = tmp_path / "reports" / "index.html"
    mine.parent.mkdir()
    mine.write_text("<html>my own page</html>")
    with raises_saying(UsageError, "index.html", f"give an --out outside {tmp_path / 'reports'} or move that file"):
        run_reports([NOTEBOOKS / "01_table.ipynb"], {}, tmp_path / "reports" / "mine")
    assert mine.read_text() == "<html>my own page</html>" and not (tmp_path / "reports" / "mine").exists()
    with pytest.raises(UsageError, match="was not written by instir"):
        write_index(tmp_path / "reports")


@pytest.mark.parametrize("out", ["lab", "link", "lab/../lab"])
def test_a_report_folder_that_is_the_notebooks_folder_is_refused_before_anything_is_written(tmp_path, capsys, out):
    """On main, ``instir run --notebooks D --out D`` removed the user's D/01_table.ipynb as a stale copy."""
    from instir.cli import main

    mine = tmp_path / "work" / "lab"
    mine.mkdir(parents=True)
    (tmp_path / "work" / "link").symlink_to(mine)
    notebook = mine / "01_table.ipynb"
    notebook.write_bytes((NOTEBOOKS / "01_table.ipynb").read_bytes() + b"\n")  # the user's working copy
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert main(["run", "--notebooks", str(mine), "--out", str(tmp_path / "work" / out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"the report folder {mine} is the notebooks' folder" in err
    assert "choose another --out" in err
    assert notebook.read_bytes() == (NOTEBOOKS / "01_table.ipynb").read_bytes() + b"\n"
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing written or removed


@pytest.mark.parametrize("name", ["01_table.ipynb", "01_table.html"])
def test_a_users_own_copy_in_the_report_folder_is_refused_before_anything_is_written(tmp_path, capsys, name):
    """A lab's working copy (or a page of one's own) where the run writes its executed notebook or page: on main
    the run removed it as a stale copy."""
    from instir.cli import main

    out = tmp_path / "lab"
    out.mkdir()
    mine = out / name
    mine.write_bytes((NOTEBOOKS / "01_table.ipynb").read_bytes())  # no papermill record, no page of the kit's
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert main(["run", "--notebooks", str(NOTEBOOKS), "--out", str(out)]) == 2
    says(capsys.readouterr().err, str(mine), "move it", "--out")
    assert mine.read_bytes() == (NOTEBOOKS / "01_table.ipynb").read_bytes()
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("name", ["01_table.ipynb", "01_table.html", "../index.html", ".instir-run.lock"])
def test_a_fifo_where_the_run_reads_or_writes_is_refused_naming_it_not_waited_on(tmp_path, capsys, name):
    """On the commit before, reading it to see whether the kit wrote it blocked for ever."""
    from instir.cli import main

    out = tmp_path / "reports" / "lab"
    out.mkdir(parents=True)
    os.mkfifo(out / name)
    assert main(["run", "--notebooks", str(NOTEBOOKS), "--out", str(out)]) == 2
    says(capsys.readouterr().err, str((out / name).resolve()), "is a FIFO (named pipe), not a regular file")


def test_a_fifo_named_index_html_beside_the_report_folder_is_no_index_of_instirs(tmp_path):
    """On the commit before, looking whether instir wrote it blocked ``instir run --out dir/r1`` for ever."""
    from instir.report.index import index_folder

    os.mkfifo(tmp_path / "index.html")
    assert index_folder(tmp_path / "r1") == tmp_path / "r1"


def test_the_executed_copies_and_pages_of_an_earlier_run_may_be_replaced(tmp_path):
    from instir.pipeline import PAGE_MARK, check_apart_from_sources

    notebook = json.loads((NOTEBOOKS / "01_table.ipynb").read_text())
    notebook["metadata"]["papermill"] = {"input_path": str(NOTEBOOKS / "01_table.ipynb"), "parameters": {}}
    (tmp_path / "01_table.ipynb").write_text(json.dumps(notebook))
    (tmp_path / "01_table.html").write_bytes(b"<html><body><nav " + PAGE_MARK + b">index</nav></body></html>")
    check_apart_from_sources(tmp_path, [NOTEBOOKS / "01_table.ipynb"])
    (tmp_path / "01_table.html").write_text("<html>a page of my own</html>")
    with raises_saying(UsageError, "01_table.html", "move it"):
        check_apart_from_sources(tmp_path, [NOTEBOOKS / "01_table.ipynb"])


def test_an_executed_notebook_is_edited_when_a_cell_is_and_not_when_papermill_noted_its_runs_failure(tmp_path):
    """Papermill's save after the last cell, and the error notes it adds to a failed run, are no edit; a changed
    cell is, the parameters it injected included (a copy of that cell keeps its tag: on the commit before, leaving
    those cells out let such an edit be replaced without a word)."""
    from instir.report.provenance import made_digest

    def notebook(injected: str, source: str, failed: bool = False, kind: str = "code") -> Path:
        cells = [{"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": ["rows = 3"]},
                 {"cell_type": "code", "metadata": {"tags": ["injected-parameters"]}, "source": [injected]},
                 {"cell_type": kind, "metadata": {}, "source": [source], "outputs": []}]
        if failed:
            cells.insert(0, {"cell_type": "markdown", "metadata": {"tags": ["papermill-error-cell-tag"]},
                             "source": ['<span id="papermill-error-cell">An Exception was encountered</span>']})
        path = tmp_path / "01_table.ipynb"
        path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
        return path

    kits = made_digest(notebook("rows = 5", "table = make(rows)"))
    assert made_digest(notebook("rows = 5", "table = make(rows)", failed=True)) == kits
    assert made_digest(notebook("rows = 50", "table = make(rows)")) != kits
    assert made_digest(notebook("rows = 5", "table = make(rows)  # my change")) != kits
    assert made_digest(notebook("rows = 5", "table = make(rows)", kind="markdown")) != kits  # a cell made text
    assert made_digest(tmp_path / "01_table.ipynb").startswith("cells:")
    (tmp_path / "01_table.ipynb").write_text("[" * 100_000)  # no notebook: its bytes, never a RecursionError
    assert not made_digest(tmp_path / "01_table.ipynb").startswith("cells:")


@pytest.mark.parametrize("record", ['{"status": "ok", "made": {".": "a string"}}', '{"made": ["a", "list"]}',
                                    '{"made": {".": {"01_table.html": 5}}}', '{"made": {"metrics": {}}}',
                                    '{"status": "ok", "ma', "[]", None])
def test_a_page_the_record_does_not_note_as_the_kits_is_not_vouched_for(tmp_path, record):
    """On the commit before, a record damaged, missing or without ``made['.']`` read as "nothing noted", and an
    edited page was replaced unkept (``instir run`` rewrote the record first, so its damage was forgotten)."""
    import warnings

    from instir.report.provenance import record_page, unvouched

    page = tmp_path / "01_table.html"
    page.write_text("<html>my edited page</html>")
    if record is not None:
        (tmp_path / "report.json").write_text(record)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the record's one warning, where it is damaged
        assert unvouched(tmp_path, [page, tmp_path / "02_none.html"]) == [page]
        record_page(tmp_path, "01_table", page.name)  # the kit's page, as it rendered it
    assert unvouched(tmp_path, [page]) == []


@pytest.mark.notebooks  # runs a notebook in a kernel
def test_a_page_saved_while_its_notebook_runs_is_kept_when_the_kit_renders_its_own(tmp_path):
    # on the commit before, the run removed the page before the notebook ran and rendered over whatever was saved
    # there meanwhile
    from instir.pipeline import PAGE_MARK

    notebook = json.loads((NOTEBOOKS / "01_table.ipynb").read_text())
    notebook["cells"].append({"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                              "source": ["Path('01_table.html').write_text('<html>saved meanwhile</html>')"]})
    source = tmp_path / "nbs" / "01_table.ipynb"
    source.parent.mkdir()
    source.write_text(json.dumps(notebook))
    out = tmp_path / "reports" / "r"
    with pytest.warns(UserWarning, match="saved while the kit ran it"):
        run_reports([source], {}, out)
    (kept,) = out.glob("01_table.html.set-aside-*")
    assert kept.read_text() == "<html>saved meanwhile</html>"
    assert PAGE_MARK in (out / "01_table.html").read_bytes()  # the kit's page of this run


@pytest.mark.notebooks  # runs notebooks in a kernel
def test_an_executed_notebook_or_page_edited_since_the_run_is_kept_when_the_next_run_replaces_it(tmp_path):
    """A student opens the report's executed notebook in the lab, adds a cell and saves, and edits its page: on the
    commit before, the next ``instir run`` into the folder replaced both without a word. A run that follows a run
    with no edit between sets nothing aside."""
    import warnings

    out = tmp_path / "reports" / "r"
    run_reports([NOTEBOOKS / "01_table.ipynb"], {}, out)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run_reports([NOTEBOOKS / "01_table.ipynb"], {}, out)  # nothing edited: nothing aside, no warning
    assert not list(out.glob("*.set-aside-*"))
    notebook = json.loads((out / "01_table.ipynb").read_text())
    notebook["cells"].append({"cell_type": "markdown", "metadata": {}, "source": ["my notes on the table"]})
    (out / "01_table.ipynb").write_text(json.dumps(notebook))
    (out / "01_table.html").write_text((out / "01_table.html").read_text() + "<p>my remark</p>")
    with pytest.warns(UserWarning, match="cannot show it left as it is") as caught:
        run_reports([NOTEBOOKS / "01_table.ipynb"], {}, out)
    assert len(caught) == 2
    (kept_notebook,) = out.glob("01_table.ipynb.set-aside-*")
    (kept_page,) = out.glob("01_table.html.set-aside-*")
    assert "my notes on the table" in kept_notebook.read_text() and "my remark" in kept_page.read_text()
    assert "my notes" not in (out / "01_table.ipynb").read_text()
    assert "my remark" not in (out / "01_table.html").read_text()
    record = (out / "report.json").read_text()
    (out / "report.json").write_text(record[:100])  # damaged: it vouches for nothing, and the run rewrites it first
    (out / "01_table.html").write_text((out / "01_table.html").read_text() + "<p>my second remark</p>")
    with pytest.warns(UserWarning, match="not noted in its record"):
        run_reports([NOTEBOOKS / "01_table.ipynb"], {}, out)
    assert any("my second remark" in kept.read_text() for kept in out.glob("01_table.html.set-aside-*"))


@pytest.mark.notebooks  # runs notebooks in a kernel
def test_a_report_outside_a_reports_root_keeps_its_index_inside_and_lists_no_sibling(tmp_path):
    some = tmp_path / "some" / "dir"
    for name, meta in (("r1", {"status": "ok", "notebooks": []}), ("other", {"tool": "not instir"})):
        (some / name).mkdir(parents=True)
        (some / name / "report.json").write_text(json.dumps(meta))
    result = run_reports([NOTEBOOKS / "01_table.ipynb"], {}, some / "r2")
    assert result.index == some / "r2" / "index.html"
    assert sorted(p.name for p in some.iterdir()) == ["other", "r1", "r2"]  # nothing added beside the folder
    index = result.index.read_text()
    assert 'id="r2"' in index and 'id="r1"' not in index and "other" not in index
    assert '<a href="index.html">' in (some / "r2" / "01_table.html").read_text()  # the page's way back


def test_an_index_instir_wrote_is_rewritten(tmp_path):
    write_index(tmp_path)
    assert GENERATOR in (tmp_path / "index.html").read_text()
    write_index(tmp_path)


def test_a_second_run_into_a_folder_is_refused_naming_the_first(tmp_path):
    out = tmp_path / "reports" / "r"
    code = ("import sys, time; from instir.report.lock import FolderLock\n"
            f"with FolderLock({str(out)!r}):\n    print('held', flush=True); time.sleep(30)\n")
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert holder_of(out)["pid"] == holder.pid
        refused = rf"another writer \(instir run, pid {holder.pid} on .*\) is writing into {out}"
        with pytest.raises(UsageError, match=refused):
            run_reports([NOTEBOOKS / "01_table.ipynb"], {}, out)
    finally:
        holder.kill()
        holder.wait()
    assert holder_of(out) is None  # released when its process ended, however it ended
    with FolderLock(out):
        assert holder_of(out)["pid"] == os.getpid()


def _report(folder: Path, status: str, planned: list[str], done: list[str]) -> None:
    folder.mkdir(parents=True)
    notebooks = [{"name": n, "html": f"{n}.html", "executed": f"{n}.ipynb", "status": "ok"} for n in done]
    (folder / "report.json").write_text(json.dumps({"status": status, "planned": planned, "notebooks": notebooks,
                                                    "started": "2026-12-01T12:00:00+00:00"}))
    for name in planned:  # every page exists: those not done are an earlier run's
        (folder / f"{name}.html").write_text("<html></html>")


def test_an_interrupted_rerun_leaves_an_index_that_names_the_stale_pages(tmp_path):
    _report(tmp_path / "r", "running", ["01_a", "02_b", "03_c"], ["01_a"])  # no process holds its lock
    index = write_index(tmp_path).read_text()
    assert '<span class="interrupted">interrupted</span>' in index and "2 not run yet" in index
    assert index.count("stale page</span> from an earlier run") == 2 and 'href="r/02_b.html"' in index


def test_a_run_in_progress_says_pending_not_interrupted(tmp_path):
    _report(tmp_path / "r", "running", ["01_a", "02_b"], ["01_a"])
    with FolderLock(tmp_path / "r"):
        index = write_index(tmp_path).read_text()
    assert '<span class="running">running</span>' in index and "<td>pending</td>" in index


@pytest.mark.notebooks  # runs notebooks in a kernel
def test_the_index_says_a_run_started_before_its_first_notebook_ends(tmp_path):
    out = tmp_path / "reports" / "r"
    with pytest.raises(Exception):  # the failing notebook ends the chain after the index was written
        run_reports([NOTEBOOKS / "03_fails.ipynb", NOTEBOOKS / "02_corpus.ipynb"], {"out_dir": str(out)}, out)
    meta = json.loads((out / "report.json").read_text())
    assert meta["planned"] == ["03_fails", "02_corpus"] and [n["name"] for n in meta["notebooks"]] == ["03_fails"]
    assert "1 not run yet" in (out.parent / "index.html").read_text()


def test_paths_under_home_are_published_with_a_tilde(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert home_path(tmp_path / "reports" / "x") == "~/reports/x"
    assert home_path("/opt/data") == "/opt/data"
    result = ReportResult(out_dir=tmp_path / "r", parameters={"out_dir": str(tmp_path / "r"), "data_root": "",
                                                              "k": 3}, defaults={}, show_code=False, kernel="python3",
                          started="", manifest={})
    data = result.to_json()
    assert data["out_dir"] == "~/r" and data["parameters"] == {"out_dir": "~/r", "data_root": "", "k": 3}


def test_the_manifest_names_the_python_under_home_with_a_tilde(monkeypatch):
    from instir.report.manifest import environment_manifest

    monkeypatch.setenv("HOME", str(Path(sys.executable).parent.parent))
    assert environment_manifest(packages=())["executable"] == str(Path("~") / "bin" / Path(sys.executable).name)


def test_a_system_card_that_does_not_exist_fails_before_any_notebook(tmp_path):
    from instir.pipeline import notebook_parameters, validate_parameters

    known = notebook_parameters(sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("0[1-5]_*.ipynb")))
    with raises_saying(UsageError, "'systems'", "NoSuchCard"):
        validate_parameters({"systems": ["NoSuchCard"]}, known)
    with pytest.raises(UsageError, match="'bm25' is given twice"):
        validate_parameters({"retrievers": ["bm25", "bm25"]}, known)
    validate_parameters({"systems": ["BM25 (IFIR)"], "retrievers": ["bm25"]}, known)


def test_missing_data_or_a_card_that_cannot_run_is_refused_before_the_tour(tmp_path, monkeypatch, capsys):
    """Found by notebook 01 or 02 after the tour before, with a hint naming a knob instir run does not take."""
    import time

    from instir.cli import main
    from instir.systems import registry

    monkeypatch.setenv("INSTIR_HOME", str(tmp_path / "empty-home"))
    monkeypatch.setattr(registry, "hub_reachable", lambda: False)
    start = time.perf_counter()
    assert main(["run", "--benchmark", "instructir-sample", "ifir/fiqa", "--out", str(tmp_path / "reports" / "r")]) == 2
    says(capsys.readouterr().err.strip(), "ifir/fiqa", "instir fetch ifir --subset fiqa", "-p data_root=")
    assert main(["run", "--benchmark", "instructir-sample", "--systems", "Promptriever-7B",
                 "--out", str(tmp_path / "reports" / "r")]) == 2
    says(capsys.readouterr().err.strip(), "'Promptriever-7B'", hub_command("download"))
    assert time.perf_counter() - start < 30 and not (tmp_path / "reports" / "r").exists()  # no kernel, no folder


def test_a_dead_judge_endpoint_is_refused_in_seconds(tmp_path):
    import socket

    from instir.pipeline import check_judge_endpoint

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]  # nothing listens there once closed
    with pytest.raises(UsageError, match=rf"'judge_base_url': nothing answers at 127.0.0.1:{port}"):
        check_judge_endpoint({"judge_backend": "openai", "judge_base_url": f"http://127.0.0.1:{port}/v1"}, 2.0)
    check_judge_endpoint({"judge_backend": "baseline", "judge_base_url": f"http://127.0.0.1:{port}/v1"})
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        check_judge_endpoint({"judge_backend": "openai",
                              "judge_base_url": f"http://127.0.0.1:{server.getsockname()[1]}/v1"})


def test_a_data_root_that_is_not_a_folder_fails_before_any_notebook(tmp_path):
    from instir.stages.request import check_runnable, notebook_request

    def check(root: str) -> None:
        check_runnable(notebook_request({"benchmarks": ["instructir-sample"], "data_root": root}))

    with raises_saying(UsageError, "parameter 'data_root'", str(tmp_path / "nodata"), "not a folder"):
        check(str(tmp_path / "nodata"))
    (tmp_path / "a-file").write_text("not a folder")
    with raises_saying(UsageError, "parameter 'data_root'", str(tmp_path / "a-file"), "not a folder"):
        check(str(tmp_path / "a-file"))
    check(str(tmp_path))
    check("")


def test_a_kernel_that_is_not_installed_is_refused_before_the_folder_is_made(tmp_path, capsys):
    # on the commit before, every notebook failed in turn and a report folder of failures was left
    from instir.cli import main

    assert main(["run", "--notebooks", str(NOTEBOOKS), "--out", str(tmp_path / "r"), "--kernel", "python"]) == 2
    says(capsys.readouterr().err, "unknown Jupyter kernel 'python'; did you mean 'python3'?")
    assert not (tmp_path / "r").exists()


def test_a_failed_notebooks_error_cannot_drive_the_terminal(tmp_path, capsys, monkeypatch):
    # on the commit before, FAILED printed the notebook's error as it was: a value holding ESC reached the terminal
    import instir.pipeline
    from instir.cli import main
    from instir.pipeline import NotebookFailed

    def failing(notebooks, parameters, out, **_):
        result = ReportResult(Path(out), {}, {}, False, "python3", "now", {})
        raise NotebookFailed("02_retrieval.ipynb, cell 3: ValueError: '\x1b[2J\x1b]0;owned\x07'", result)

    monkeypatch.setattr(instir.pipeline, "run_reports", failing)
    assert main(["run", "--benchmark", "instructir-sample", "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert "FAILED: 02_retrieval.ipynb, cell 3: ValueError: '\\x1b[2J" in err


def test_a_run_ended_by_what_no_one_foresaw_says_failed_not_running_and_an_unnameable_notebook_is_refused(
        tmp_path, monkeypatch):
    # before, a notebook named 01_a\\b.ipynb ran, then its entry failed validation: a pydantic traceback, and
    # report.json and the index said "running" ever after
    import shutil

    import instir.pipeline
    from instir.report.record import read_record

    source = Path(__file__).parents[1] / "notebooks" / "01_data_exploration.ipynb"
    odd = tmp_path / "nb" / "01_a\\b.ipynb"
    odd.parent.mkdir()
    shutil.copy(source, odd)
    with pytest.raises(UsageError, match="backslash"):
        run_reports([odd], {}, tmp_path / "reports" / "odd")
    assert not (tmp_path / "reports").exists()

    def unforeseen(path, result, *args, **kwargs):
        raise RuntimeError("no one foresaw this")

    monkeypatch.setattr(instir.pipeline, "_run_one", unforeseen)
    out = tmp_path / "reports" / "r"
    with pytest.raises(RuntimeError):
        run_reports([source], {"benchmarks": ["instructir-sample"]}, out)
    record = read_record(out)
    assert record["status"] == "failed" and record["error"] == "RuntimeError: no one foresaw this"
    assert "<span class=\"failed\">failed</span>" in (tmp_path / "reports" / "index.html").read_text()


def test_a_run_interrupted_says_so_in_its_record_and_index_not_running(tmp_path, monkeypatch):
    # on the commit before, Ctrl-C left report.json "running" and the folder's index "running … not run yet"
    import instir.pipeline
    from instir.report.record import read_record

    def interrupted(path, result, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(instir.pipeline, "_run_one", interrupted)
    notebooks = sorted((Path(__file__).parents[1] / "notebooks").glob("0[01]_*.ipynb"))
    out = tmp_path / "reports" / "r"
    with pytest.raises(KeyboardInterrupt):
        run_reports(notebooks, {"benchmarks": ["instructir-sample"]}, out)
    record = read_record(out)
    assert record["status"] == "interrupted" and record["finished"]
    assert "interrupted" in (tmp_path / "reports" / "index.html").read_text()


def test_a_notebook_saved_while_an_interrupted_run_ran_it_is_kept_when_the_kit_keeps_the_cells_that_ran(
        tmp_path, monkeypatch):
    """Interrupted, the run publishes the cells that ran as the executed notebook: it wrote over one saved there
    meanwhile (a lab's save of the report's notebook) with no copy kept, where a run that ends keeps it."""
    import papermill

    source = tmp_path / "nbs" / "01_table.ipynb"
    source.parent.mkdir()
    source.write_text((NOTEBOOKS / "01_table.ipynb").read_text())
    out = tmp_path / "reports" / "r"

    def interrupted(notebook, partial, **kwargs):
        Path(partial).write_text(Path(notebook).read_text())  # the cells that ran, as papermill leaves them
        (out / "01_table.ipynb").write_text('{"saved": "meanwhile"}')
        raise KeyboardInterrupt

    monkeypatch.setattr(papermill, "execute_notebook", interrupted)
    with pytest.raises(KeyboardInterrupt), pytest.warns(UserWarning, match="saved while the kit ran it"):
        run_reports([source], {}, out)
    (kept,) = out.glob("01_table.ipynb.set-aside-*")
    assert kept.read_text() == '{"saved": "meanwhile"}'
    assert json.loads((out / "01_table.ipynb").read_text())["cells"]  # the cells that ran


def test_a_run_interrupted_while_rendering_a_page_leaves_its_executed_notebook_the_next_run_replaces_without_a_word(
        tmp_path, monkeypatch):
    """Ctrl-C while a page was rendered left the executed notebook the run had just published unnoted: the next run
    set it aside (``….ipynb.set-aside-…``) warning that the kit "cannot show it left" it, its own file."""
    import warnings

    import papermill

    import instir.pipeline

    source = tmp_path / "nbs" / "01_table.ipynb"
    source.parent.mkdir()
    source.write_text((NOTEBOOKS / "01_table.ipynb").read_text())
    out = tmp_path / "reports" / "r"
    rendered = instir.pipeline.render_html

    def executed(notebook, partial, **kwargs):  # every cell ran, and papermill recorded its run
        cells = json.loads(Path(notebook).read_text())
        cells["metadata"]["papermill"] = {"input_path": str(notebook), "output_path": str(partial)}
        Path(partial).write_text(json.dumps(cells))

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(papermill, "execute_notebook", executed)
    monkeypatch.setattr(instir.pipeline, "render_html", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_reports([source], {}, out)
    assert (out / "01_table.ipynb").is_file() and not (out / "01_table.html").exists()
    monkeypatch.setattr(instir.pipeline, "render_html", rendered)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_reports([source], {}, out)
    assert not [str(w.message) for w in caught if "cannot show it left" in str(w.message)]
    assert not list(out.glob("*.set-aside-*")) and (out / "01_table.html").is_file()


def test_a_page_edited_since_the_kit_rendered_it_is_kept_aside_when_replaced_and_the_kits_own_is_not(tmp_path):
    from instir import atomic
    from instir.report.provenance import keeping_edits, record_page

    out = tmp_path / "r"
    out.mkdir()
    page, mine = out / "02_retrieval.html", out / "03_metrics.html"
    for path in (page, mine):
        path.write_text("<html>the kit's</html>")
        record_page(out, path.stem, path.name)
    mine.write_text("<html>my notes</html>")
    with pytest.warns(UserWarning, match="the kit cannot show it left as it is .*kept as"):
        with keeping_edits(out, [page, mine]):
            for path in (page, mine):
                atomic.write_text(path, "<html>rendered again</html>")
    (kept,) = out.glob("03_metrics.html.set-aside-*")
    assert kept.read_text() == "<html>my notes</html>" and not list(out.glob("02_retrieval.html.set-aside-*"))


@pytest.mark.parametrize("mark", ["\x1b]0;owned\x07", "\u202e", "\u200b", "\n"])
def test_a_notebook_whose_name_a_terminal_would_act_on_is_refused_before_anything_is_written(tmp_path, capsys, mark):
    # on the commit before, its progress bar printed the name raw (an OSC retitled the terminal) and the index showed
    # it reordered by the bidirectional override
    import shutil

    from instir.cli import main

    odd = tmp_path / "nb" / f"01_x{mark}y.ipynb"
    odd.parent.mkdir()
    shutil.copy(sorted(NOTEBOOKS.glob("0*.ipynb"))[0], odd)
    assert main(["run", "--notebooks", str(odd.parent), "--out", str(tmp_path / "reports" / "r")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "its name holds a control character or an invisible mark" in err
    assert mark not in err[:-1] and not (tmp_path / "reports").exists()


def test_a_notebook_refused_for_its_name_is_named_with_the_mark_escaped(tmp_path):
    # run_reports raises in a notebook or a script too, whose traceback shows the message as it is
    import shutil

    odd = tmp_path / "nb" / "01_x\u202ey.ipynb"
    odd.parent.mkdir()
    shutil.copy(sorted(NOTEBOOKS.glob("0*.ipynb"))[0], odd)
    with pytest.raises(UsageError) as err:
        run_reports([odd], {}, tmp_path / "reports" / "r")
    assert "01_x\\u202ey.ipynb" in str(err.value) and "\u202e" not in str(err.value)
    assert not (tmp_path / "reports").exists()


@pytest.mark.parametrize("inside", ["", "r"])  # the folder's own name, or a folder's on its way
@pytest.mark.parametrize("mark", ["\u202e", "\n", "\x1b]0;owned\x07"])
@pytest.mark.parametrize("command", ["run", "evaluate"])
def test_a_report_folder_whose_name_a_terminal_would_act_on_is_refused_before_anything_is_written(
        tmp_path, capsys, mark, command, inside):
    # on the commit before, "reports in …/x" and "y; index: …" were two lines, and the index showed a‮b reordered
    from instir.cli import main

    out = tmp_path / "reports" / f"x{mark}y" / inside
    argv = (["run", "--notebooks", str(NOTEBOOKS)] if command == "run" else
            ["evaluate", "--benchmark", "ifir-sample/fiqa", "--run",
             str(Path(__file__).parent / "fixtures" / "mteb" / "predictions" / "IFIRFiQA_predictions.json")])
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "a report folder's path may not hold a control character" in err
    assert mark not in err[:-1] and not (tmp_path / "reports").exists()


def test_a_link_where_the_run_keeps_its_partial_notebook_leaves_the_file_it_leads_to_as_it_was(tmp_path, monkeypatch):
    """A report folder handed over as an archive held ``.01_table.partial.ipynb``, a symlink to a notebook of the
    user's elsewhere: papermill writes the partial notebook with a plain open(), through the link, over that file."""
    import papermill

    source = tmp_path / "nbs" / "01_table.ipynb"
    source.parent.mkdir()
    source.write_text((NOTEBOOKS / "01_table.ipynb").read_text())
    thesis = tmp_path / "thesis.ipynb"
    thesis.write_text('{"my": "thesis"}')
    out = tmp_path / "reports" / "r"
    out.mkdir(parents=True)
    (out / ".01_table.partial.ipynb").symlink_to(thesis)

    def executed(notebook, partial, **kwargs):  # papermill: a plain open() of the output path
        with open(partial, "w") as fh:
            fh.write(Path(notebook).read_text())

    monkeypatch.setattr(papermill, "execute_notebook", executed)
    run_reports([source], {}, out)
    assert thesis.read_text() == '{"my": "thesis"}'
    assert json.loads((out / "01_table.ipynb").read_text())["cells"] and not (out / ".01_table.partial.ipynb").exists()
