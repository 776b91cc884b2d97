"""Crash-safe writes (issue 24, item 3): on a full disk or a failing device every write of the
kit is one error naming the file, nothing is left half-written, temporaries are removed, and
a set of files that belong together is seen whole, old or new.

Two kinds of full disk (:mod:`full_disk`): a real small tmpfs in a private mount namespace
(skipped where the kernel allows none) and a simulated one in process (everywhere)."""

import ast
import errno
import hashlib
import json
import os
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from full_disk import SimulatedDisk, run_on_full_disk

from instir import atomic
from instir.cli import main as cli
from instir.report.layout import ReportLayout
from instir.report.lock import LOCK_FILE
from instir.retrieval.embedding_cache import EmbeddingCache, in_chunks

PACKAGE = Path(__file__).resolve().parents[1] / "instir"
NOTEBOOKS = Path(__file__).resolve().parent / "fixtures" / "notebooks"


@pytest.fixture(autouse=True)
def _no_bars(monkeypatch):
    """No progress bars on stderr: the tests read the one line an error prints."""
    monkeypatch.setenv("INSTIR_PROGRESS", "0")


def _hashes(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` (by its path there) with its SHA-256, but the writer's lock
    (who held it last: a new pid and token each time)."""
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and p.name != LOCK_FILE}


def _hidden(folder: Path) -> list[str]:
    """Temporaries and journals left in ``folder`` (every name the kit writes for itself starts with a dot)."""
    return sorted(p.name for p in folder.rglob(".*") if p.name != LOCK_FILE)


def _runs(sample, rank: int) -> pd.DataFrame:
    """Each query retrieves 5 documents, its relevant one at ``rank``."""
    docs = list(sample.corpus.ids())[:8]
    rows = []
    for qid, rel in sample.qrels.items():
        target = next(iter(rel))
        ranked = [d for d in docs if d != target][:4]
        ranked.insert(rank - 1, target)
        rows += [(qid, d, 10.0 - i) for i, d in enumerate(ranked)]
    return pd.DataFrame(rows, columns=["qid", "docid", "score"])


# ------------------------------------------------------------------ sets of files (atomic.write_files)


def _old_set(folder: Path) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("a.csv", "b.csv", "c.json"):
        (folder / name).write_text(f"old {name}\n")
    return _hashes(folder)


NEW_SET = {"a.csv": "new a\n" * 200, "b.csv": "new b\n" * 200, "c.json": '{"new": true}\n'}


def test_a_full_disk_replaces_no_file_of_a_set_and_leaves_no_temporary(tmp_path, monkeypatch):
    before = _old_set(tmp_path)
    SimulatedDisk.under(monkeypatch, tmp_path, free=1500)  # a.csv fits, b.csv does not
    with pytest.raises(OSError) as failed:
        atomic.write_files({tmp_path / n: text for n, text in NEW_SET.items()})
    assert failed.value.errno == errno.ENOSPC and failed.value.filename == str(tmp_path / "b.csv")
    assert _hashes(tmp_path) == before and _hidden(tmp_path) == []


def _crash_at_rename(monkeypatch, n: int):
    """The n-th os.replace (the journal's is the first) raises, as if the process died there."""
    real, calls = os.replace, []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == n:
            raise KeyboardInterrupt("killed")
        return real(src, dst)

    monkeypatch.setattr(atomic.os, "replace", replace)


def test_a_writer_killed_between_two_renames_is_finished_by_the_next_reader(tmp_path, monkeypatch):
    metrics = tmp_path / "metrics"
    _old_set(metrics)
    with pytest.MonkeyPatch.context() as killed:
        _crash_at_rename(killed, 3)  # journal in place, a.csv renamed, b.csv and c.json not yet
        with pytest.raises(KeyboardInterrupt):
            atomic.write_files({metrics / n: text for n, text in NEW_SET.items()})
    assert (metrics / "a.csv").read_text() == NEW_SET["a.csv"] and (metrics / "b.csv").read_text() == "old b.csv\n"
    ReportLayout(tmp_path).require(metrics / "b.csv")  # a reader of the kit finishes the set first
    assert {n: (metrics / n).read_text() for n in NEW_SET} == NEW_SET and _hidden(metrics) == []


def test_a_killed_writer_is_finished_by_the_next_writer_and_a_crash_before_the_journal_keeps_the_old_set(
        tmp_path, monkeypatch):
    before = _old_set(tmp_path)
    with pytest.MonkeyPatch.context() as killed:
        _crash_at_rename(killed, 1)  # the journal's own rename: nothing of the new set is in place
        with pytest.raises(KeyboardInterrupt):
            atomic.write_files({tmp_path / n: text for n, text in NEW_SET.items()})
    assert _hashes(tmp_path) == before and _hidden(tmp_path) == []
    with pytest.MonkeyPatch.context() as killed:
        _crash_at_rename(killed, 2)
        with pytest.raises(KeyboardInterrupt):
            atomic.write_files({tmp_path / n: text for n, text in NEW_SET.items()})
    atomic.write_files({tmp_path / "d.txt": "other set\n"})  # settles the interrupted one first
    assert {n: (tmp_path / n).read_text() for n in NEW_SET} == NEW_SET and _hidden(tmp_path) == []


def test_a_live_writers_journal_is_left_to_it(tmp_path):
    import fcntl

    _old_set(tmp_path)
    (tmp_path / ".a.csv.x.tmp").write_text("new a\n")
    journal = tmp_path / f"{atomic.JOURNAL_PREFIX}x.json"
    journal.write_text(json.dumps({"replace": [[".a.csv.x.tmp", "a.csv"]], "remove": ["b.csv"]}))
    fd = os.open(journal, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # its writer is alive
        assert atomic.settle(tmp_path) == 0 and (tmp_path / "a.csv").read_text() == "old a.csv\n"
    finally:
        os.close(fd)
    assert atomic.settle(tmp_path) == 1
    assert (tmp_path / "a.csv").read_text() == "new a\n" and not (tmp_path / "b.csv").exists()



def test_a_journal_its_writer_finished_while_a_reader_opened_it_is_not_applied_again(tmp_path, monkeypatch):
    """A reader that opened a journal just before its writer finished and removed it would apply that stale plan:
    its removals delete the files a later set wrote under those names."""
    _old_set(tmp_path)
    (tmp_path / ".a.csv.x.tmp").write_text("new a\n")
    journal = tmp_path / f"{atomic.JOURNAL_PREFIX}x.json"
    plan = {"replace": [[".a.csv.x.tmp", "a.csv"]], "remove": ["b.csv"]}
    journal.write_text(json.dumps(plan))
    real_open = os.open

    def opened_as_the_writer_ends(path, *args, **kwargs):
        fd = real_open(path, *args, **kwargs)
        if str(path) == str(journal):
            atomic._apply(tmp_path, plan)  # the writer's end: its renames, the journal removed
            os.unlink(journal)
            (tmp_path / "b.csv").write_text("a later set's b.csv\n")
        return fd

    monkeypatch.setattr(atomic.os, "open", opened_as_the_writer_ends)
    assert atomic.settle(tmp_path) == 0
    assert (tmp_path / "b.csv").read_text() == "a later set's b.csv\n" and (tmp_path / "a.csv").read_text() == "new a\n"

def test_a_journal_naming_files_outside_its_folder_is_not_followed(tmp_path):
    (tmp_path / "victim").write_text("kept")
    inner = tmp_path / "set"
    inner.mkdir()
    journal = inner / f"{atomic.JOURNAL_PREFIX}x.json"
    journal.write_text(json.dumps({"replace": [], "remove": ["../victim"]}))
    with pytest.warns(UserWarning, match="unreadable journal"):
        assert atomic.settle(inner) == 0
    assert (tmp_path / "victim").read_text() == "kept" and not journal.exists()


# ------------------------------------------------------------------ the embedding matrix


def test_a_full_disk_while_embeddings_are_joined_is_an_error_naming_the_matrix_not_a_sigbus(tmp_path):
    # 512 x 384 float32: the chunks (768 KiB) fit on the 1 MiB disk, the joined matrix beside them does not
    # (before: the matrix was joined through a memory map, and the process died of SIGBUS, rc 135, no message)
    result, output = run_on_full_disk(tmp_path, '''
        import numpy as np
        from instir.retrieval.embedding_cache import EmbeddingCache
        cache = EmbeddingCache(DISK / "embeddings", chunk_size=64, progress=False)
        try:
            cache.embed({"model": "fake"}, [f"doc {i}" for i in range(512)],
                        lambda chunk: np.ones((len(chunk), 384), np.float32), label="fake")
            report(error=None, files=listing())
        except OSError as err:
            report(error=[err.errno, err.filename, str(err)], files=listing())
    ''', size_kib=1024)
    assert result["error"] is not None, output
    code, filename, _ = result["error"]
    assert code == errno.ENOSPC and filename.endswith("/embeddings.npy")
    assert not [f for f in result["files"] if f.endswith(".tmp")]  # no .embeddings.npy.*.tmp left behind
    assert sum(f.endswith(".npy") for f in result["files"]) == 8  # the encoded chunks are kept for the rerun


def test_the_embedding_matrix_is_written_with_plain_writes_after_its_size_is_reserved(tmp_path, monkeypatch):
    real_open_memmap = np.lib.format.open_memmap

    def open_memmap(filename, mode="r+", *args, **kwargs):
        assert mode == "r", f"{filename} written through a memory map ({mode}): SIGBUS on a full disk"
        return real_open_memmap(filename, mode, *args, **kwargs)

    monkeypatch.setattr(np.lib.format, "open_memmap", open_memmap)
    cache = EmbeddingCache(tmp_path / "emb", chunk_size=4, progress=False)
    items, encoder = [f"doc {i}" for i in range(10)], {"model": "fake"}
    key = cache.key(encoder, items)
    entry = cache.entry_dir("fake", key)

    def encode(chunk):
        return np.full((len(chunk), 8), 0.5, np.float32)

    for index, chunk in enumerate(in_chunks(items, 4)):
        cache.write_chunk(entry, index, chunk, encode)
    with pytest.MonkeyPatch.context() as full:
        disk = SimulatedDisk.under(full, cache.root, free=100)
        with pytest.raises(OSError) as failed:
            cache.embed(encoder, items, encode, label="fake")
        assert failed.value.errno == errno.ENOSPC and failed.value.filename == str(entry / "embeddings.npy")
        assert disk.refused and disk.refused[0].name.startswith(".embeddings.npy.")  # refused at the reservation
    assert _hidden(cache.root) == [] and not entry.exists()
    again = cache.embed(encoder, items, encode, label="fake")  # space again: the kept chunks are joined
    assert again.encoded == 0 and again.matrix.shape == (10, 8) and float(again.matrix.min()) == 0.5
    assert cache.verified_matrix(entry, key) is not None  # the checksum computed while writing is the file's


# ------------------------------------------------------------------ instir evaluate: one set of files

EVALUATE_SCRIPT = '''
    import contextlib, hashlib, io
    import pandas as pd
    from instir.benchmarks import load_benchmark
    from instir.cli import main
    from instir.retrieval.runs import Run, write_run

    bench = load_benchmark("instructir-sample")
    docs = list(bench.corpus.ids())[:8]
    def run(rank):
        rows = []
        for qid, rel in bench.qrels.items():
            target = next(iter(rel))
            ranked = [d for d in docs if d != target][:4]
            ranked.insert(rank - 1, target)
            rows += [(qid, d, 10.0 - i) for i, d in enumerate(ranked)]
        return Run(pd.DataFrame(rows, columns=["qid", "docid", "score"]))
    runs = DISK.parent / "runs"
    strong, weak = write_run(run(1), runs / "strong.trec"), write_run(run(3), runs / "weak.trec")
    out = DISK / "eval"
    def hashes():  # the writer's lock left out: a new pid and token each time
        return {p.relative_to(out).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(out.rglob("*")) if p.is_file() and p.name != ".instir-run.lock"}
    common = ["evaluate", "--benchmark", "instructir-sample", "--run", str(strong), "--run", str(weak),
              "--out", str(out), "--resamples", "99"]
    assert main([*common, "--measures", "nDCG@10"]) == 0
    before = hashes()
    fill(8192)  # room for a small file, not for the new per-query values (all measures now)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(common)
    report(rc=rc, stderr=err.getvalue(), before=before, after=hashes(), files=listing(out))
'''


def test_instir_evaluate_over_an_earlier_evaluation_on_a_full_disk_keeps_the_earlier_set_whole(tmp_path):
    # before: the summary CSV was replaced, the per-query CSV truncated mid-row, the JSON left from the old run
    result, output = run_on_full_disk(tmp_path, EVALUATE_SCRIPT, size_kib=2048, timeout=300)
    assert result["rc"] == 2, output
    line = result["stderr"].strip()
    assert "\n" not in line and line.startswith("instir evaluate: No space left on device: "), line
    assert f"{tmp_path}/disk/eval/" in line

    def the_set(hashes):  # the per-run stored scores are a verified cache: an entry is published whole or not at all
        return {name: digest for name, digest in hashes.items() if not name.startswith("metrics/runs/")}

    stored = [name for name in result["after"] if name.startswith("metrics/runs/")]
    assert all(name.rsplit("/", 1)[0] + "/manifest.json" in stored for name in stored)
    assert the_set(result["after"]) == the_set(result["before"])
    assert {"runs/runs.csv", "metrics/metrics.csv", "metrics/comparisons.csv",
            "metrics/per_query.parquet"} <= set(result["before"])
    assert not [name for name in result["files"] if name.startswith(".") and name != LOCK_FILE]  # no temporary


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    from instir.benchmarks import load_benchmark
    from instir.retrieval.runs import Run, write_run

    sample = load_benchmark("instructir-sample")
    folder = tmp_path_factory.mktemp("runs")
    return (write_run(Run(_runs(sample, 1)), folder / "strong.trec"),
            write_run(Run(_runs(sample, 3)), folder / "weak.trec"))


def _evaluate(runs, out: Path, *more: str) -> int:
    argv = ["evaluate", "--benchmark", "instructir-sample", "--out", str(out), "--resamples", "99", *more]
    for run in runs:
        argv += ["--run", str(run)]
    return cli(argv)


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
def test_a_failing_disk_under_instir_evaluate_is_one_line_naming_the_file_and_the_old_set_stays(
        two_runs, tmp_path, monkeypatch, capsys, code):
    out = tmp_path / "eval"
    assert _evaluate(two_runs, out, "--measures", "nDCG@10") == 0
    before = _hashes(out)
    capsys.readouterr()
    with pytest.MonkeyPatch.context() as full:
        SimulatedDisk.under(full, out, free=3000, code=code)
        assert _evaluate(two_runs, out) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"instir evaluate: {os.strerror(code)}: {out}/"), err
    assert _hashes(out) == before and _hidden(out) == []


def test_an_evaluation_with_one_run_removes_the_comparisons_of_an_earlier_one(two_runs, tmp_path):
    out = tmp_path / "eval"
    assert _evaluate(two_runs, out) == 0
    assert (out / "metrics" / "instructir-sample.tex").is_file()
    assert len(pd.read_csv(out / "metrics" / "comparisons.csv"))
    mine = out / "metrics" / "my-table.tex"  # a table of the user's own beside the stage's: never the kit's to remove
    mine.write_text("\\begin{tabular}{l}mine\\end{tabular}\n")
    assert _evaluate(two_runs[:1], out) == 0
    assert not (out / "metrics" / "instructir-sample.tex").exists()  # the set's file the new one has none of
    assert mine.read_text() == "\\begin{tabular}{l}mine\\end{tabular}\n"
    assert pd.read_csv(out / "runs" / "runs.csv")["system"].tolist() == ["strong"]
    assert not len(pd.read_csv(out / "metrics" / "comparisons.csv"))  # nothing compared
    assert set(pd.read_csv(out / "metrics" / "metrics.csv")["system"]) == {"strong"}


def test_the_metrics_stage_on_a_full_disk_keeps_the_last_evaluations_files(tmp_path, monkeypatch):
    from instir.benchmarks import load_benchmark
    from instir.metrics import evaluate_runs
    from instir.retrieval.runs import Run
    from instir.stages.evaluate import write_metrics

    sample = load_benchmark("instructir-sample")
    layout = ReportLayout(tmp_path)
    runs = pd.DataFrame({"benchmark": ["instructir-sample"] * 2, "system": ["strong", "weak"]})
    scores = [evaluate_runs({system: Run(_runs(sample, rank))}, sample)
              for rank, system in ((1, "strong"), (3, "weak"))]
    write_metrics(layout, runs, scores)
    before = _hashes(layout.metrics)
    SimulatedDisk.under(monkeypatch, layout.metrics, free=4000)
    with pytest.raises(OSError, match="No space left on device") as failed:
        write_metrics(layout, runs[:1], scores[:1])
    assert Path(failed.value.filename).parent == layout.metrics
    assert _hashes(layout.metrics) == before and _hidden(layout.metrics) == []


def test_a_sweep_cell_on_a_full_disk_fails_alone_with_a_line_naming_the_file(tmp_path, monkeypatch):
    import instir.stages.evaluate
    from instir.distributed.grid import parse_grid
    from instir.distributed.sweep import run_sweep

    frame = tmp_path / "metrics" / "runs" / "x.parquet"

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(frame))

    monkeypatch.setattr(instir.stages.evaluate, "run_scores", full)  # run_cell imports it when it runs
    SimulatedDisk(monkeypatch, lambda path: ".error.txt." in path.name)  # nor is there room for the traceback
    report = run_sweep(parse_grid({"benchmarks": ["instructir-sample"], "systems": ["bm25"], "k": 10}), tmp_path,
                       executor="serial")
    assert report.count("failed") == 2
    assert all(f"No space left on device: '{frame}'" in r.error for r in report.results.values())
    assert not list((tmp_path / "sweep" / "cells").glob("*error.txt*"))


# ------------------------------------------------------------------ instir run: the pages and report.json


def _fake_papermill(monkeypatch):
    """papermill without a kernel: the notebook as it is, with papermill's metadata."""
    import nbformat
    import papermill

    def execute_notebook(source, output, **kwargs):
        notebook = nbformat.read(source, as_version=4)
        notebook.metadata["papermill"] = {"input_path": source, "output_path": output}
        nbformat.write(notebook, output)

    monkeypatch.setattr(papermill, "execute_notebook", execute_notebook)


def test_a_page_that_cannot_be_written_ends_the_run_failed_with_one_line_naming_it(tmp_path, monkeypatch, capsys):
    # before: 01_table.html truncated, report.json left at "running", a traceback
    _fake_papermill(monkeypatch)
    out = tmp_path / "reports" / "r"
    SimulatedDisk(monkeypatch, lambda path: path.name.startswith(".01_table.html."), free=4096)
    rc = cli(["run", "--out", str(out), "--notebooks", str(NOTEBOOKS)])
    err = capsys.readouterr().err
    assert rc == 2 and err == f"instir run: No space left on device: {out}/01_table.html\n"
    meta = json.loads((out / "report.json").read_text())
    assert meta["status"] == "failed" and meta["finished"]
    assert meta["error"] == f"01_table.ipynb: could not write {out}/01_table.html: No space left on device"
    assert [(n["name"], n["status"], n["html"]) for n in meta["notebooks"]] == [("01_table", "failed", None)]
    assert not (out / "01_table.html").exists() and _hidden(out) == []
    executed = json.loads((out / "01_table.ipynb").read_text())
    assert executed["metadata"]["papermill"]["output_path"] == str(out / "01_table.ipynb")
    assert '<span class="failed">failed</span>' in (out.parent / "index.html").read_text()


def test_instir_run_on_a_full_disk_leaves_no_truncated_page_and_a_failed_report(tmp_path):
    result, output = run_on_full_disk(tmp_path, f'''
        import contextlib, io, nbformat, papermill
        from instir.cli import main

        def execute_notebook(source, output, **kwargs):
            notebook = nbformat.read(source, as_version=4)
            notebook.metadata["papermill"] = {{"output_path": output}}
            nbformat.write(notebook, output)
        papermill.execute_notebook = execute_notebook
        out = DISK / "reports" / "r"
        fill(48 * 1024)  # the notebook, report.json and the index fit; a 260 KB page does not
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = main(["run", "--out", str(out), "--notebooks", {str(NOTEBOOKS)!r}])
        report(rc=rc, stderr=err.getvalue(), meta=json.loads((out / "report.json").read_text()),
               files=listing(out), hidden=sorted(p.name for p in out.glob(".*")))
    ''', size_kib=1024)
    out = f"{tmp_path}/disk/reports/r"
    assert result["rc"] == 2, output
    assert result["stderr"] == f"instir run: No space left on device: {out}/01_table.html\n"
    assert result["meta"]["status"] == "failed" and "could not write" in result["meta"]["error"]
    assert "01_table.html" not in result["files"] and result["hidden"] == [".instir-run.lock"]


# ------------------------------------------------------------------ SQLite caches


def _request():
    from instir.judge.rubrics import rubric_for
    from instir.judge.types import JudgeRequest

    return JudgeRequest("a query", "an instruction", "x" * 20_000, rubric_for("fiqa", 1))


def test_a_full_judgment_cache_is_an_error_naming_the_file(tmp_path):
    from instir.judge.cache import JudgmentCache
    from instir.judge.types import Judgment
    from instir.terminal import describe

    path = tmp_path / "judge" / "judgments.sqlite"
    with JudgmentCache(path) as cache:
        pages = cache._store.db.execute("PRAGMA page_count").fetchone()[0]
        cache._store.db.execute(f"PRAGMA max_page_count = {pages + 1}")  # SQLite's own "database or disk is full"
        with pytest.raises(OSError) as failed:
            cache.store("b", "m", _request(), Judgment(score=1, weighted=1.0, probs=None, weighting="parsed",
                                                       raw="y" * 50_000))
    assert failed.value.errno == errno.ENOSPC and failed.value.filename == str(path)
    assert describe(failed.value) == ("No space left on device (SQLite: database or disk is full): "
                                      f"{path}")


def test_a_full_rerank_score_cache_is_an_error_naming_the_file(tmp_path):
    from instir.retrieval.score_cache import ScoreCache

    cache = ScoreCache(tmp_path / "scores.sqlite")
    pages = cache._store.db.execute("PRAGMA page_count").fetchone()[0]
    cache._store.db.execute(f"PRAGMA max_page_count = {pages + 1}")
    with pytest.raises(OSError, match="database or disk is full") as failed:
        cache.put({"model": "m"}, [(f"{i:064d}", 0.5) for i in range(5000)])
    assert failed.value.errno == errno.ENOSPC and failed.value.filename == str(tmp_path / "scores.sqlite")
    assert isinstance(failed.value.__cause__, sqlite3.OperationalError)
    cache.close()


# ------------------------------------------------------------------ every write goes through instir.atomic

#: writes allowed outside instir/atomic.py, and why
ALLOWED = {("report/lock.py", "os.open"): "the run lock's holder line, rewritten in place while the lock is held",
           ("progress.py", "open"): "a batch kernel's bar appended to its run's temporary relay file, never a result",
           ("sqlite_store.py", "os.open"): "a store's lock file, made empty and only locked, never written"}

_WRITE_METHODS = {"write_text", "write_bytes", "savefig", "tofile", "dump"}
_FRAME_WRITERS = {"to_csv", "to_parquet", "to_json", "to_latex", "to_markdown", "to_excel", "to_pickle", "to_feather"}


def _write_mode(call: ast.Call, position: int) -> bool:
    mode = call.args[position] if len(call.args) > position else next(
        (k.value for k in call.keywords if k.arg == "mode"), None)
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and bool(set(mode.value) & set("wax+"))


def direct_writes(source: str) -> list[str]:
    """``line: call`` for every call in ``source`` that writes a file other than through
    :mod:`instir.atomic`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        dotted = ast.unparse(func)
        if dotted.startswith("atomic."):
            continue
        writes = (
            name in _WRITE_METHODS
            or (name in _FRAME_WRITERS and (node.args or any(k.arg in ("path", "path_or_buf") for k in node.keywords)))
            or dotted in ("np.save", "np.savez", "np.savez_compressed", "numpy.save", "json.dump", "pickle.dump",
                          "shutil.copy", "shutil.copyfile", "shutil.copy2", "shutil.move")
            or name in ("open_memmap", "memmap") and _write_mode(node, 1)
            or (dotted == "open" and _write_mode(node, 1))
            or (name == "open" and isinstance(func, ast.Attribute) and dotted != "os.open" and _write_mode(node, 0))
            or (dotted == "os.open" and "O_CREAT" in ast.unparse(node))
        )
        if writes:
            found.append((node.lineno, f"{node.lineno}: {dotted}"))
    return [use for _, use in sorted(found)]


def test_no_module_writes_a_file_except_through_the_atomic_writer():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = str(path.relative_to(PACKAGE))
        if module == "atomic.py":
            continue
        for use in direct_writes(path.read_text(encoding="utf-8")):
            if (module, use.split(": ", 1)[1]) not in ALLOWED:
                found.append(f"{module}:{use}")
    assert found == []


def test_the_write_check_finds_direct_writes():
    source = ("frame.to_csv(path, index=False)\ntext = frame.to_csv(index=False)\nPath(p).write_text('x')\n"
              "with open(p, 'w') as fh:\n    json.dump({}, fh)\nwith open(p) as fh:\n    pass\n"
              "np.lib.format.open_memmap(p, mode='w+', dtype='f4', shape=(2,))\nnp.load(p, mmap_mode='r')\n")
    assert direct_writes(source) == ["1: frame.to_csv", "3: Path(p).write_text", "4: open", "5: json.dump",
                                     "8: np.lib.format.open_memmap"]
