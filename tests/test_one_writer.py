"""One writer per report folder, whichever front end (issue 30, item 3): ``instir sweep``,
``instir evaluate``, ``instir judge`` and every stage a notebook calls take the folder's lock as
``instir run`` does (a second writer is refused in one line naming the first), the processes a
holder starts inherit its lock, and a ``runs.csv`` that would drop another front end's runs is
refused naming them, where the same runs at the same k replace them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from denied import refuse_open
from says import raises_saying

from instir.cli import main
from instir.distributed.grid import parse_grid
from instir.distributed.sweep import run_sweep
from instir.errors import UsageError
from instir.report.lock import INHERITED_VAR, FolderLock, holder_of
from instir.report.record import update_record
from instir.stages import retrieve_runs, score_runs

HOLD = ("import sys, time; from instir.report.lock import FolderLock\n"
        "with FolderLock(sys.argv[1], sys.argv[2]):\n    print('held', flush=True); time.sleep(60)\n")


class Holder:
    """Another process holding ``folder``'s lock as ``who`` until the block ends."""

    def __init__(self, folder: Path, who: str):
        env = {k: v for k, v in os.environ.items() if k != INHERITED_VAR}
        self.process = subprocess.Popen([sys.executable, "-c", HOLD, str(folder), who], stdout=subprocess.PIPE,
                                        text=True, env=env)

    def __enter__(self) -> subprocess.Popen:
        assert self.process.stdout.readline().strip() == "held"
        return self.process

    def __exit__(self, *exc) -> None:
        self.process.kill()
        self.process.wait()


@pytest.fixture(scope="module")
def swept(tmp_path_factory) -> Path:
    """A serial sweep's folder: bm25 on ifir-sample/fiqa, both variants, k 20."""
    out = tmp_path_factory.mktemp("swept")
    run_sweep(parse_grid({"benchmarks": ["ifir-sample/fiqa"], "systems": ["bm25"], "k": 20}), out,
              executor="serial")
    return out


def copy_of(folder: Path, dest: Path) -> Path:
    import shutil

    shutil.copytree(folder, dest)
    return dest


def test_a_notebook_stage_is_refused_while_a_sweep_writes_the_folder(swept, tmp_path):
    out = copy_of(swept, tmp_path / "r")
    before = (out / "runs" / "runs.csv").read_bytes()
    with Holder(out, "instir sweep") as holder:
        with raises_saying(UsageError, "another writer", "instir sweep", f"pid {holder.pid}", str(out)):
            score_runs(out)
        with pytest.raises(UsageError, match=r"another writer \(instir sweep"):
            retrieve_runs(out, ["ifir-sample/fiqa"], ["bm25"], k=20)
    assert (out / "runs" / "runs.csv").read_bytes() == before


def test_instir_evaluate_and_judge_are_refused_in_one_line_while_another_evaluate_writes(swept, tmp_path, capsys):
    out = tmp_path / "e"
    run, other = map(str, sorted((swept / "runs").glob("*.trec"))[:2])
    with Holder(out, "instir evaluate"):
        code = main(["evaluate", "--benchmark", "ifir-sample/fiqa", "--run", run, "--out", str(out)])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and "another writer (instir evaluate, pid " in err[0], err
        code = main(["judge", "--benchmark", "ifir-sample/fiqa", "--run", run, "--query-only-run", other,
                     "--backend", "baseline", "--out", str(out)])
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and "another writer (instir evaluate" in err[-1], err
    assert not (out / "runs").exists() and not (out / "metrics").exists()  # nothing half-written


def test_a_sweep_is_refused_while_instir_run_writes_the_folder(tmp_path):
    out = tmp_path / "s"
    with Holder(out, "instir run"):
        with pytest.raises(UsageError, match=r"another writer \(instir run"):
            run_sweep(parse_grid({"benchmarks": ["ifir-sample/fiqa"], "systems": ["bm25"], "k": 20}), out,
                      executor="serial")
    assert not (out / "runs").exists()


ASK = ("import sys, time; from pathlib import Path; from instir.report.lock import holder_of\n"
       "print('asking', flush=True); end = time.monotonic() + 60\n"
       "while not Path(sys.argv[2]).exists() and time.monotonic() < end:\n    holder_of(sys.argv[1])\n")


def test_a_writer_is_not_refused_for_a_reader_asking_who_holds_the_folder(tmp_path):
    """holder_of (every index rewrite asks it of a running report) holds the lock shared for an instant."""
    out, done = tmp_path / "r", tmp_path / "done"
    out.mkdir()
    reader = subprocess.Popen([sys.executable, "-c", ASK, str(out), str(done)], stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip() == "asking"
        refused = 0
        for _ in range(300):  # one in ten was refused beside the reader
            try:
                with FolderLock(out, "instir evaluate"):
                    pass
            except UsageError:
                refused += 1
        assert refused == 0
    finally:
        done.touch()
        reader.wait(timeout=60)


def test_the_processes_a_holder_starts_write_under_its_lock_and_others_do_not(tmp_path):
    out = tmp_path / "k:a=b;c"  # a separator of environment lists in the name: the lock still passes down
    take = f"from instir.report.lock import FolderLock\nwith FolderLock({str(out)!r}, 'a notebook'):\n    print('in')"
    with FolderLock(out, "instir run"):
        with FolderLock(out, "a notebook"):  # re-entrant within the process (the sweep calling stages)
            assert holder_of(out)["who"] == "instir run"
        kernel = subprocess.run([sys.executable, "-c", take], capture_output=True, text=True)  # a notebook kernel
        assert kernel.returncode == 0 and kernel.stdout.strip() == "in", kernel.stderr
        env = {k: v for k, v in os.environ.items() if k != INHERITED_VAR}
        lab = subprocess.run([sys.executable, "-c", take], capture_output=True, text=True, env=env)  # a lab kernel
        assert lab.returncode != 0 and "another writer (instir run, pid " in lab.stderr
    assert INHERITED_VAR not in os.environ and holder_of(out) is None


def test_a_list_that_would_drop_a_sweeps_runs_is_refused_naming_them(swept, tmp_path):
    out = copy_of(swept, tmp_path / "r")
    before = (out / "runs" / "runs.csv").read_bytes()
    with pytest.raises(UsageError) as refused:
        retrieve_runs(out, ["instructir-sample"], ["bm25"], k=20)
    assert str(refused.value) == (
        f"{out / 'runs' / 'runs.csv'} lists 2 run(s) written by instir sweep that notebooks would drop: bm25 "
        "instructed on ifir-sample/fiqa (k 20); bm25 (query-only) query-only on ifir-sample/fiqa (k 20); write into "
        f"another folder (--out / out_dir), or delete {out / 'runs' / 'runs.csv'} to let them go")
    assert (out / "runs" / "runs.csv").read_bytes() == before  # was: replaced by the notebook's rows, silently
    assert not list((out / "runs").glob("instructir*"))  # refused before any retrieval
    with pytest.raises(UsageError, match="would drop"):
        retrieve_runs(out, ["ifir-sample/fiqa"], ["bm25"], k=50)  # the same runs at another k


def test_a_list_that_would_drop_runs_listed_at_no_k_names_them_without_an_empty_k(tmp_path):
    # instir judge lists the run files it was given at no k (it retrieves nothing): "(k )" was shown for them
    retrieve_runs(tmp_path, ["instructir-sample"], ["bm25"], k=20)
    table = tmp_path / "runs" / "runs.csv"
    listed = pd.read_csv(table, dtype=str, keep_default_na=False).assign(k="", written_by="instir judge")
    listed.to_csv(table, index=False)
    with raises_saying(UsageError, "written by instir judge that notebooks would drop: bm25 instructed on "
                       "instructir-sample; bm25 (query-only) query-only on instructir-sample; write into") as refused:
        retrieve_runs(tmp_path, ["ifir-sample/fiqa"], ["bm25"], k=20)
    assert "(k" not in str(refused.value)


def test_the_same_runs_at_the_same_k_replace_a_sweeps_rows(swept, tmp_path):
    out = copy_of(swept, tmp_path / "r")
    retrieve_runs(out, ["ifir-sample/fiqa"], ["bm25"], k=20)
    table = pd.read_csv(out / "runs" / "runs.csv")
    assert len(table) == 2 and set(table["written_by"]) == {"notebooks"}
    retrieve_runs(out, ["instructir-sample"], ["bm25"], k=20)  # its own rows: a notebook replaces them freely
    assert set(pd.read_csv(out / "runs" / "runs.csv")["benchmark"]) == {"instructir-sample"}


def test_a_sweep_that_would_drop_the_notebooks_runs_is_refused_before_it_writes_anything(tmp_path):
    # on the commit before, the sweep replaced data/statistics.csv and wrote its cells' runs, then refused runs.csv
    from instir.stages.explore import describe_benchmarks

    out = tmp_path / "r"
    describe_benchmarks(out, ["instructir-sample"])
    retrieve_runs(out, ["instructir-sample"], ["bm25"], k=20)
    kept = ("report.json", ".instir-run.lock")  # the record and the lock's holder line change, nothing else
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name not in kept}
    grid = parse_grid({"benchmarks": ["ifir-sample/fiqa"], "systems": ["bm25"], "k": 20}, "grid.yaml")
    with raises_saying(UsageError, "lists 2 run(s) written by notebooks that instir sweep would drop"):
        run_sweep(grid, out, executor="serial")
    after = {p: p.read_bytes() for p in out.rglob("*") if p.is_file() and p.name not in kept}
    assert after == before


def test_a_file_the_kit_did_not_leave_is_kept_where_a_stage_replaces_it_and_left_where_it_does_not(tmp_path):
    # on 5af149b, the edited metrics.csv and a .tex of one's own at the kit's name were replaced without a word
    out = tmp_path / "r"
    retrieve_runs(out, ["instructir-sample"], ["bm25"], k=20)
    score_runs(out, ["instructir-sample"])
    metrics = out / "metrics"
    kit_written = (metrics / "comparisons.csv").read_bytes()
    (tex,) = metrics.glob("*.tex")
    (metrics / "metrics.csv").write_text("benchmark,system\nmy,numbers\n")
    tex.write_text("my own table\n")
    (metrics / "mine.csv").write_text("a table the stage does not write\n")
    with pytest.warns(UserWarning, match="held files the kit did not leave there as they are: kept as") as said:
        score_runs(out, ["instructir-sample"])
    aside = {path.name.split(".set-aside-")[0]: path.read_text() for path in metrics.glob("*.set-aside-*")}
    assert aside == {"metrics.csv": "benchmark,system\nmy,numbers\n", tex.name: "my own table\n"}, said.list
    assert "nDCG@10" in (metrics / "metrics.csv").read_text() and tex.read_text() != "my own table\n"
    assert (metrics / "mine.csv").read_text() == "a table the stage does not write\n"  # left where it is
    assert (metrics / "comparisons.csv").read_bytes() == kit_written  # the kit's own: replaced, not kept
    score_runs(out, ["instructir-sample"])  # what it wrote itself it replaces without a word
    assert len(list(metrics.glob("*.set-aside-*"))) == 2


def test_what_a_failed_stage_wrote_is_the_kits_when_the_stage_runs_again(tmp_path):
    # at 3b16279, the tables a stage wrote before it failed were set aside by its next run, as not the kit's
    from instir.report.stage_writer import writes_stage

    @writes_stage("03_metrics")
    def stage(out_dir, fail):
        (out_dir / "metrics").mkdir(exist_ok=True)
        (out_dir / "metrics" / "metrics.csv").write_text(f"written, then {fail}\n")
        if fail:
            raise RuntimeError("the judge's endpoint went away")

    with pytest.raises(RuntimeError):
        stage(tmp_path, True)
    stage(tmp_path, False)
    assert sorted(path.name for path in (tmp_path / "metrics").iterdir()) == ["metrics.csv"]


@pytest.mark.parametrize("edit", [
    lambda table: "system,run_file\nmine,runs/mine.trec\n",  # a list of one's own
    lambda table: table + "instructir-sample,instructed,True,bm25,mine,instructed,,,100,,,,,,runs/mine.trec,\n",
    lambda table: table.replace("written_by\n", "written_by,note\n"),  # a column of one's own
])
def test_a_runs_list_the_kit_did_not_leave_as_it_is_is_kept_when_replaced(tmp_path, edit):
    # on 5af149b, a list without written_by, a row added by hand and a column added were dropped without a word
    out = tmp_path / "r"
    retrieve_runs(out, ["ifir-sample/fiqa"], ["bm25"], k=20)
    table = edit((out / "runs" / "runs.csv").read_text())
    (out / "runs" / "runs.csv").write_text(table)
    with pytest.warns(UserWarning, match="runs held files the kit did not leave there as they are: kept as"):
        retrieve_runs(out, ["instructir-sample"], ["bm25"], k=20)
    (aside,) = (out / "runs").glob("runs.csv.set-aside-*")
    assert aside.read_text() == table and "instructir-sample" in (out / "runs" / "runs.csv").read_text()


@pytest.mark.parametrize("call", ["score_runs", "judge_runs", "paper_tables", "explore"])
def test_a_runs_list_without_the_columns_every_reader_needs_is_one_line_naming_file_and_column(tmp_path, call):
    # on the commit before, an AttributeError or a KeyError ('benchmark', 'run_file') that named no file
    import instir
    from instir import stages
    from instir.benchmarks.types import FormatError
    from instir.retrieval import read_run, write_run

    out = tmp_path / "r"
    retrieve_runs(out, ["instructir-sample"], ["bm25"], k=20)
    (run_file,) = [p for p in (out / "runs").glob("*.trec") if "query" not in p.name][:1]
    write_run(read_run(run_file), out / "runs" / "runs.csv")  # a run at the list's name: no header the readers know
    front = {"score_runs": stages.score_runs, "judge_runs": lambda o: stages.judge_runs(o, backend="baseline"),
             "paper_tables": stages.paper_tables, "explore": instir.explore}[call]
    with raises_saying(FormatError, f"{out / 'runs' / 'runs.csv'}, line 1, field 'benchmark': no such column"):
        front(out)


def test_a_stage_refused_at_once_leaves_no_folder_record_or_lock_behind(tmp_path):
    # on the commit before, score_runs into a folder with no runs made it and left .instir-run.lock there
    from instir.report.layout import MissingInput

    with pytest.raises(MissingInput, match="runs.csv is missing: run notebook 02_retrieval"):
        score_runs(tmp_path / "none", ["instructir-sample"])
    assert not (tmp_path / "none").exists()
    (tmp_path / "mine").mkdir()
    with pytest.raises(MissingInput):
        score_runs(tmp_path / "mine", ["instructir-sample"])
    assert sorted(p.name for p in (tmp_path / "mine").iterdir()) == [".instir-run.lock"]  # not its folder to remove


def test_an_edit_stays_ones_own_through_a_stage_call_that_failed_or_left_the_file_alone(tmp_path):
    # at 5936327, any call that ended (a typo refused inside the stage, a judge without validation) noted every
    # file of the folder as the kit's, the edit among them: the next call replaced it without a word
    from instir.stages import describe_benchmarks, judge_runs

    out = tmp_path / "r"
    describe_benchmarks(out, ["instructir-sample"])
    (out / "data" / "statistics.csv").write_text("my statistics\n")
    with pytest.raises(UsageError, match="did you mean 'instructir-sample'"):
        describe_benchmarks(out, ["instructir-smaple"])
    retrieve_runs(out, ["instructir-sample"], ["bm25"], k=20)
    judge_runs(out, backend="baseline", max_instances=2, repeats=1)
    (out / "judge" / "validation.csv").write_text("my validation\n")
    judge_runs(out, backend="baseline", max_instances=2, repeats=1, validate=False)
    assert (out / "judge" / "validation.csv").read_text() == "my validation\n"  # left alone, still one's own
    with pytest.warns(UserWarning, match="held files the kit did not leave there as they are"):
        describe_benchmarks(out, ["instructir-sample"])
        judge_runs(out, backend="baseline", max_instances=2, repeats=1)
    kept = sorted(path.read_text() for path in out.glob("*/*.set-aside-*"))
    assert kept == ["my statistics\n", "my validation\n"]


def test_a_folder_of_an_earlier_version_vouches_for_its_tables_only(tmp_path):
    # at 5936327, a record without `made` whose tables matched their digest vouched for every file, a .tex edited
    # by hand among them
    out = tmp_path / "r"
    retrieve_runs(out, ["instructir-sample"], ["bm25"], k=20)
    score_runs(out, ["instructir-sample"])
    update_record(out, made=None)
    (tex,) = (out / "metrics").glob("*.tex")
    tex.write_text(tex.read_text() + "% my note\n")
    with pytest.warns(UserWarning, match="held files the kit did not leave there as they are"):
        score_runs(out, ["instructir-sample"])
    (kept,) = (out / "metrics").glob("*.tex.set-aside-*")
    assert kept.read_text().endswith("% my note\n")
    assert not list((out / "metrics").glob("*.csv.set-aside-*"))  # its tables, vouched for by their digest


@pytest.mark.parametrize("digest", [5, None, ["x"]])
def test_a_damaged_journal_is_read_as_none_never_raised_into_every_later_stage(tmp_path, digest):
    # on the commit before, a digest that was no string made every later stage of the folder raise a ValidationError
    import json

    from instir import atomic
    from instir.report.stage_writer import writes_stage

    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "other.csv").write_text("a table of one's own")
    inode = (tmp_path / "metrics" / "other.csv").stat().st_ino
    (tmp_path / ".instir-replacing-metrics.json").write_text(
        json.dumps({"inodes": {"other.csv": inode}, "made": {"other.csv": digest}}))

    @writes_stage("03_metrics")
    def stage(out_dir):
        (out_dir / "metrics").mkdir(exist_ok=True)
        atomic.write_text(out_dir / "metrics" / "metrics.csv", "written")

    stage(tmp_path)
    stage(tmp_path)
    assert (tmp_path / "metrics" / "metrics.csv").read_text() == "written"
    assert not list(tmp_path.glob(".instir-replacing-*"))


def test_what_a_killed_stage_wrote_is_the_kits_when_the_next_one_runs(tmp_path):
    # on the commit before, the files a stage wrote before kill -9 were kept aside by the next run, with a warning,
    # as not the kit's
    import warnings

    from instir import atomic
    from instir.report.stage_writer import writes_stage

    killed = (f"import os, pathlib\nfrom instir import atomic\nfrom instir.report.stage_writer import writes_stage\n"
              f"@writes_stage('03_metrics')\ndef stage(out_dir):\n"
              f"    (out_dir / 'metrics').mkdir(exist_ok=True)\n"
              f"    atomic.write_text(out_dir / 'metrics' / 'metrics.csv', 'written, then killed')\n"
              f"    os.kill(os.getpid(), 9)\n"
              f"stage(pathlib.Path({str(tmp_path)!r}))\n")
    assert subprocess.run([sys.executable, "-c", killed]).returncode == -9

    @writes_stage("03_metrics")
    def stage(out_dir):
        atomic.write_text(out_dir / "metrics" / "metrics.csv", "written again")

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stage(tmp_path)
    assert sorted(p.name for p in (tmp_path / "metrics").iterdir()) == ["metrics.csv"]
    assert not list(tmp_path.glob(".instir-replacing-*"))


@pytest.mark.processes
def test_a_copied_lock_variable_naming_no_token_of_the_holder_joins_no_one(tmp_path, monkeypatch):
    """A process whose environment names the folder in INSTIR_FOLDER_LOCKS (a stale export, a kernel of an earlier
    run) with a token other than the holder's is a second writer: refused, never joined."""
    import json

    out = tmp_path / "r"
    with Holder(out, "instir sweep") as holder:
        monkeypatch.setenv(INHERITED_VAR, json.dumps({str(out.resolve()): "0" * 32}))
        with raises_saying(UsageError, "another writer", "instir sweep", f"pid {holder.pid}", str(out)):
            FolderLock(out, "a notebook").__enter__()


_STATUS = "import sys; from instir.report.index import read_reports; print(read_reports(sys.argv[1])[0]['status'])"


@pytest.mark.processes
def test_a_fifo_where_the_lock_file_goes_is_no_writer_and_the_index_says_interrupted_not_hangs(tmp_path):
    """Opening a FIFO blocks for ever: a folder whose record says running and whose lock file is a FIFO is listed as
    interrupted (in a process of its own, so that a regression fails here rather than hanging the suite)."""
    import json

    folder = tmp_path / "reports" / "r1"
    folder.mkdir(parents=True)
    (folder / "report.json").write_text(json.dumps({"status": "running", "notebooks": []}))
    os.mkfifo(folder / ".instir-run.lock")
    listed = subprocess.run([sys.executable, "-c", _STATUS, str(folder.parent)], capture_output=True, text=True,
                            timeout=20)
    assert listed.returncode == 0 and listed.stdout.strip() == "interrupted", listed.stderr


def test_a_folder_of_an_earlier_version_whose_table_was_edited_vouches_for_none_of_it(tmp_path):
    # a record without `made` vouches for the tables a stage run recorded as they are: an edited one is not the kit's
    out = tmp_path / "r"
    retrieve_runs(out, ["instructir-sample"], ["bm25"], k=20)
    score_runs(out, ["instructir-sample"])
    update_record(out, made=None)
    (out / "metrics" / "metrics.csv").write_text("benchmark,system\nmy,numbers\n")
    with pytest.warns(UserWarning, match="held files the kit did not leave there as they are"):
        score_runs(out, ["instructir-sample"])
    (kept,) = (out / "metrics").glob("metrics.csv.set-aside-*")
    assert kept.read_text() == "benchmark,system\nmy,numbers\n"


def test_a_process_that_did_not_inherit_a_lock_writes_under_no_one_however_busy_the_folder(tmp_path):
    from instir.report.lock import writer_of

    out = tmp_path / "r"
    with Holder(out, "instir sweep"):
        assert holder_of(out)["who"] == "instir sweep" and writer_of(out) is None
    with FolderLock(out, "instir evaluate"):
        assert writer_of(out) == "instir evaluate"


def test_a_held_lock_whose_file_says_nothing_readable_yet_still_reads_as_held(tmp_path):
    # the instant between a writer taking the lock and writing who it is: a running report, never "interrupted"
    import fcntl

    from instir.report.lock import LOCK_FILE

    (tmp_path / LOCK_FILE).write_text("")
    fd = os.open(tmp_path / LOCK_FILE, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert holder_of(tmp_path) == {}
    finally:
        os.close(fd)
    assert holder_of(tmp_path) is None


def test_a_stage_records_its_parameters_who_ran_it_and_what_it_left_incomplete(tmp_path):
    from instir.report.lock import STAGE_WRITER
    from instir.report.provenance import READS, stage_records
    from instir.report.stage_writer import writes_stage

    class Judged:
        def incomplete(self):
            return ["2 judgment(s) failed and are left out of the values"]

    @writes_stage("03_metrics")
    def stage(out_dir, measures, resamples=99, loaded=None, **options):
        (out_dir / "metrics").mkdir(exist_ok=True)
        (out_dir / "metrics" / "metrics.csv").write_text("system,value\n")
        return Judged()

    stage(tmp_path / "r", ["nDCG@10"], loaded=object(), seed=7)
    (run,) = stage_records(tmp_path / "r")["03_metrics"]
    assert run["parameters"] == {"measures": ["nDCG@10"], "resamples": 99, "seed": 7}
    assert run["by"] == STAGE_WRITER and run["incomplete"] == ["2 judgment(s) failed and are left out of the values"]
    assert run["output"] is not None and set(run["inputs"]) == set(READS["03_metrics"])  # the folders it read


def test_a_stage_run_alone_rewrites_the_index_that_lists_its_folder(tmp_path):
    from instir.report.index import write_index
    from instir.report.stage_writer import writes_stage

    @writes_stage("03_metrics")
    def stage(out_dir):
        (out_dir / "metrics").mkdir(exist_ok=True)
        (out_dir / "metrics" / "metrics.csv").write_text("system,value\n")

    reports = tmp_path / "reports"
    reports.mkdir()
    write_index(reports)
    os.utime(reports / "index.html", (0, 0))
    stage(reports / "r")
    assert (reports / "index.html").stat().st_mtime > 0  # rewritten


@pytest.mark.parametrize(("holder", "written_by"), [(None, "notebooks"), ("instir run", "notebooks"),
                                                    ("instir sweep", "instir sweep")])
def test_runs_written_under_instir_run_are_the_notebooks_as_in_the_lab(tmp_path, holder, written_by):
    # instir run executes the notebooks: their runs.csv rows are the lab's, so neither refuses the other's runs
    from contextlib import nullcontext

    from instir.stages.retrieve import front_end

    out = tmp_path / "r"
    with FolderLock(out, holder) if holder else nullcontext():
        assert front_end(out) == written_by


def test_a_run_file_made_outside_the_kit_is_listed_under_its_system_and_variant():
    from instir.benchmarks import load_benchmark
    from instir.stages.retrieve import RUNS_COLUMNS, listed_row

    row = listed_row(load_benchmark("ifir-sample/fiqa"), "my-system", "runs/mine.trec", "query-only", k=10)
    assert list(row) == RUNS_COLUMNS
    assert {key: value for key, value in row.items() if value is not None} == {
        "benchmark": "ifir-sample/fiqa", "setting": "instructed", "sample": True, "retriever": "my-system",
        "system": "my-system", "variant": "query-only", "reused": False, "run_file": "runs/mine.trec", "k": 10}


@pytest.mark.parametrize(("listed_k", "kept_k", "refused"), [
    ("20.0", 20, False), ("20", 20.0, False), ("", None, False), ("", float("nan"), False), ("50", 20, True)])
def test_another_front_ends_run_is_the_same_run_at_the_same_k_however_the_k_is_spelt(tmp_path, listed_k, kept_k,
                                                                                     refused):
    # a k read back through pandas is 20.0 where a column has a gap, and a run of no k is "" or NaN
    from contextlib import nullcontext

    from instir.report.layout import ReportLayout
    from instir.stages.retrieve import RUNS_COLUMNS, refuse_dropping

    layout = ReportLayout(tmp_path)
    layout.runs.mkdir()
    row = {**dict.fromkeys(RUNS_COLUMNS, ""), "benchmark": "ifir-sample/fiqa", "setting": "instructed",
           "system": "bm25", "variant": "instructed", "k": listed_k, "written_by": "instir sweep"}
    pd.DataFrame([row], columns=RUNS_COLUMNS).to_csv(layout.runs_table, index=False)
    with raises_saying(UsageError, "lists 1 run(s) written by instir sweep") if refused else nullcontext():
        refuse_dropping(layout, [("ifir-sample/fiqa", "instructed", "bm25", "instructed", kept_k)], "notebooks")


@pytest.mark.parametrize(("lost", "more"), [(3, ""), (4, " and 1 more")])
def test_runs_that_would_be_dropped_are_named_three_at_most_with_a_count_of_the_rest(tmp_path, lost, more):
    from instir.report.layout import ReportLayout
    from instir.stages.retrieve import RUNS_COLUMNS, refuse_dropping

    layout = ReportLayout(tmp_path)
    layout.runs.mkdir()
    rows = [{**dict.fromkeys(RUNS_COLUMNS, ""), "benchmark": "ifir-sample/fiqa", "setting": "instructed",
             "system": system, "variant": "instructed", "k": "10", "written_by": "instir sweep"}
            for system in ["kept", *(f"s{i}" for i in range(lost))]]  # the sweep's run the notebooks keep is no loss
    pd.DataFrame(rows, columns=RUNS_COLUMNS).to_csv(layout.runs_table, index=False)
    shown = "; ".join(f"s{i} instructed on ifir-sample/fiqa (k 10)" for i in range(3))
    with raises_saying(UsageError, f"lists {lost} run(s) written by instir sweep that notebooks would drop: "
                                   f"{shown}{more}; write into another folder"):
        refuse_dropping(layout, [("ifir-sample/fiqa", "instructed", "kept", "instructed", 10)], "notebooks")


def test_a_runs_list_written_over_another_front_ends_runs_is_refused_and_left_as_it_was(tmp_path):
    # the last guard, when the list changed between the stage's first look and its write
    from instir.report.layout import ReportLayout
    from instir.stages.retrieve import RUNS_COLUMNS, write_runs_table

    layout = ReportLayout(tmp_path)
    layout.runs.mkdir()
    row = {**dict.fromkeys(RUNS_COLUMNS, ""), "benchmark": "ifir-sample/fiqa", "setting": "instructed",
           "system": "bm25", "variant": "instructed", "k": "10", "written_by": "instir sweep"}
    pd.DataFrame([row], columns=RUNS_COLUMNS).to_csv(layout.runs_table, index=False)
    before = layout.runs_table.read_bytes()
    mine = {**row, "benchmark": "instructir-sample", "written_by": None}
    with raises_saying(UsageError, "lists 1 run(s) written by instir sweep that notebooks would drop"):
        write_runs_table(layout, [mine])
    assert layout.runs_table.read_bytes() == before


_KILLED_WRITER = """
import multiprocessing, os, signal, sys
from instir.report.lock import FolderLock
with FolderLock(sys.argv[1], "instir sweep"):
    context = multiprocessing.get_context("fork")  # as the BM25 tokeniser's pool in a serial sweep's retrieve stage
    worker = context.Process(target=context.Event().wait)  # blocked for ever, as a worker whose parent died
    worker.start()
    print(worker.pid, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_writer_killed_while_a_worker_it_forked_still_runs_holds_the_folder_no_more(tmp_path):
    """kill -9 of ``instir sweep --serial`` while it built a BM25 index left the tokeniser's workers running, each with
    a copy of the folder's lock: every later run into the folder was refused, naming a writer long gone."""
    import signal

    out, said = tmp_path / "reports", tmp_path / "worker.pid"
    with said.open("w") as stdout:  # a file, not a pipe: the worker outlives the writer and keeps its stdout open
        writer = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(out)], stdout=stdout, timeout=120)
    worker = int(said.read_text().split()[0])
    try:
        assert writer.returncode == -signal.SIGKILL
        with FolderLock(out, "instir run"):
            assert holder_of(out)["pid"] == os.getpid()
    finally:
        os.kill(worker, signal.SIGKILL)


def another_accounts(path: Path, monkeypatch) -> None:
    """Make ``path`` refuse to be opened for writing, as another account's 0644 lock file does (in-process: root
    ignores file permissions); once replaced, the file at ``path`` is this account's."""
    real_open = os.open
    refused = os.stat(path).st_ino

    def open_(name, flags, *args, **kwargs):
        if str(name) == str(path) and flags & (os.O_RDWR | os.O_WRONLY) and os.stat(path).st_ino == refused:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(name, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)


def test_a_report_folder_another_account_wrote_is_written_by_this_one(tmp_path, monkeypatch):
    # a group's report folder: the lock file the first account left there (0644) stopped every other account with
    # "Permission denied: <out>/.instir-run.lock"; now the free lock is taken and a new lock file replaces it, with
    # the mode a plain open gives (0664 under umask 002)
    with FolderLock(tmp_path, "instir run"):
        pass
    lock = tmp_path / ".instir-run.lock"
    another_accounts(lock, monkeypatch)
    old = os.umask(0o002)
    try:
        with FolderLock(tmp_path, "instir judge"):
            assert holder_of(tmp_path)["who"] == "instir judge"
            assert lock.stat().st_mode & 0o777 == 0o664
        assert sorted(p.name for p in tmp_path.iterdir()) == [".instir-run.lock"]
    finally:
        os.umask(old)


def test_a_report_folder_another_account_is_writing_is_refused_naming_it(tmp_path, monkeypatch):
    # its lock file cannot be written by this account, and its writer holds it: the usual refusal naming that writer
    import fcntl
    import json

    lock = tmp_path / ".instir-run.lock"
    lock.write_text(json.dumps({"who": "instir run", "pid": 4242, "host": "lab", "started": "2026-12-07T22:00:00Z"}))
    holder = os.open(lock, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)
    another_accounts(lock, monkeypatch)
    try:
        with raises_saying(UsageError, "instir run", "pid 4242", "lab", str(tmp_path)), FolderLock(tmp_path, "b"):
            pass
    finally:
        os.close(holder)
    assert lock.read_text().startswith('{"who": "instir run", "pid": 4242')


def test_a_report_folders_lock_file_made_under_a_groups_umask_can_be_written_by_the_group(tmp_path):
    # the lock file was 0644 whatever the umask: every other account of the group was refused at it
    old = os.umask(0o002)
    try:
        with FolderLock(tmp_path, "instir run"):
            mode = (tmp_path / ".instir-run.lock").stat().st_mode & 0o777
    finally:
        os.umask(old)
    assert mode == 0o664


def test_a_lock_file_this_account_can_neither_write_nor_read_is_refused_naming_it(tmp_path, monkeypatch):
    lock = tmp_path / ".instir-run.lock"
    lock.write_text("")
    refuse_open(monkeypatch, lock)
    with raises_saying(UsageError, f"{lock} cannot be read by this account (Permission denied)", "remove it"):
        with FolderLock(tmp_path, "instir run"):
            pass


def test_another_accounts_lock_file_that_cannot_be_replaced_is_refused_leaving_no_file_of_this_one(tmp_path,
                                                                                                   monkeypatch):
    # a sticky folder: the free lock file is another account's, which this one may neither write nor rename over
    with FolderLock(tmp_path, "instir run"):
        pass
    lock = tmp_path / ".instir-run.lock"
    another_accounts(lock, monkeypatch)
    real_replace = os.replace

    def replace(src, dst, *args, **kwargs):
        if str(dst) == str(lock):
            raise PermissionError(1, "Operation not permitted", str(src), str(dst))
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    with raises_saying(UsageError, f"{lock} is another account's lock file", "neither write nor replace",
                       "Operation not permitted"), FolderLock(tmp_path, "instir judge"):
        pass
    assert [p.name for p in tmp_path.iterdir()] == [".instir-run.lock"]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts this process's descriptors in /proc")
def test_a_lock_file_another_account_left_replaced_leaves_no_descriptor_open_once_let_go(tmp_path, monkeypatch):
    # a notebook's kernel writes into a group's folder again and again: each lock it took over kept the old file open
    with FolderLock(tmp_path, "instir run"):
        pass
    another_accounts(tmp_path / ".instir-run.lock", monkeypatch)
    before = len(os.listdir("/proc/self/fd"))
    with FolderLock(tmp_path, "instir judge"):
        pass
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_writer_refused_at_a_held_folder_leaves_no_lock_its_later_workers_would_close(tmp_path):
    # the refused writer's lock descriptor was closed but stayed listed as held: a worker forked later closed the
    # file that reused its number (a pool's pipe, a data file) in the child
    import fcntl
    import multiprocessing

    from instir import atomic

    lock = tmp_path / ".instir-run.lock"
    lock.write_text("{}")
    holder = os.open(lock, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)
    before = set(atomic.HELD_LOCKS)
    try:
        with raises_saying(UsageError, "is writing into"), FolderLock(tmp_path, "instir run"):
            pass
    finally:
        os.close(holder)
    assert atomic.HELD_LOCKS == before
    fd = os.open(tmp_path / "data", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        worker = multiprocessing.get_context("fork").Process(target=os.fstat, args=(fd,))
        worker.start()
        worker.join(30)
        assert worker.exitcode == 0  # 1: the copy of the descriptor was closed in the worker
    finally:
        os.close(fd)


def test_a_lock_file_that_is_a_symlink_to_a_users_file_is_refused_and_the_file_left_as_it_was(tmp_path):
    # a report folder handed over as an archive: its .instir-run.lock led to a file outside it, which every writer
    # into the folder truncated and overwrote with who held the lock
    thesis = tmp_path / "thesis.txt"
    thesis.write_text("my notes\n")
    folder = tmp_path / "r"
    folder.mkdir()
    lock = folder / ".instir-run.lock"
    lock.symlink_to(os.path.join("..", thesis.name))  # as an archive holds it: relative, to a file outside the folder
    with raises_saying(UsageError, str(lock), "is a symlink (to '../thesis.txt')", "remove it"), \
            FolderLock(folder, "instir evaluate"):
        pass  # the message names the file the link leads to, the one the user would look for
    assert thesis.read_text() == "my notes\n"


def test_a_lock_file_made_a_symlink_after_it_was_looked_at_is_refused_and_the_file_it_leads_to_left_as_it_was(
        tmp_path, monkeypatch):
    # the link made between the look and the open (another process, a sync tool): the open must not follow it
    import instir.report.lock as lock_module

    thesis = tmp_path / "thesis.txt"
    thesis.write_text("my notes\n")
    folder = tmp_path / "r"
    folder.mkdir()
    lock = folder / ".instir-run.lock"

    def absent_then_linked(path):
        lock.symlink_to(thesis)
        return "not found"

    monkeypatch.setattr(lock_module, "file_problem", absent_then_linked)
    with raises_saying(UsageError, str(lock), "remove it"), FolderLock(folder, "instir evaluate"):
        pass
    assert thesis.read_text() == "my notes\n"


def test_a_lock_file_another_name_shares_is_replaced_by_one_of_the_folders_own_and_the_other_left_as_it_was(tmp_path):
    # a hard link (a `cp -al` copy of the folder, or a link to a file of the user's): every writer wrote who held the
    # lock into the file both names share
    other = tmp_path / "other.txt"
    other.write_text("my notes\n")
    folder = tmp_path / "r"
    folder.mkdir()
    lock = folder / ".instir-run.lock"
    os.link(other, lock)
    with FolderLock(folder, "instir evaluate"):
        assert holder_of(folder)["who"] == "instir evaluate" and lock.stat().st_nlink == 1
    assert other.read_text() == "my notes\n"


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_stage_journal_that_is_a_fifo_or_a_folder_is_set_aside_and_the_stage_writes(tmp_path, kind):
    # a folder named .instir-replacing-runs.json stopped every stage writing runs/ ("Is a directory")
    journal = tmp_path / ".instir-replacing-runs.json"
    os.mkfifo(journal) if kind == "fifo" else journal.mkdir()
    with pytest.warns(UserWarning, match=rf"{journal} is not the journal of a stage's writes .*set aside"):
        retrieve_runs(tmp_path, ["instructir-sample"], ["bm25"], k=10)
    assert (tmp_path / "runs" / "runs.csv").is_file() and not os.path.lexists(journal)
