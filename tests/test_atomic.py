"""Atomic writes leave the old file or the new one, never a torn one or a stray temp file."""

import errno
import json
import os
import re
import warnings

import numpy as np
import pytest
from denied import refuse_open

from instir import atomic


def test_a_crash_before_the_rename_keeps_the_old_content_and_no_temp_file(tmp_path, monkeypatch):
    target = tmp_path / "run.trec"
    target.write_text("old")

    def crash(src, dst):
        raise KeyboardInterrupt("simulated crash")

    monkeypatch.setattr(atomic.os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        atomic.write_text(target, "new")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["run.trec"]


def test_arrays_round_trip_through_an_atomic_npy_write(tmp_path):
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    atomic.write_bytes(tmp_path / "chunk.npy", atomic.array_bytes(array))
    assert np.array_equal(np.load(tmp_path / "chunk.npy"), array)


@pytest.mark.parametrize("array", [np.arange(5, dtype="<i4"), np.ones((3, 4), dtype="<f4"), np.zeros(0, "<f4")])
def test_a_streamed_npy_is_the_file_np_save_writes(array):
    assert atomic.npy_prefix(array.dtype, array.shape) + array.tobytes() == atomic.array_bytes(array)


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_written_files_get_the_mode_a_plain_open_gives_under_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        (tmp_path / "plain.txt").write_text("x")
        atomic.write_text(tmp_path / "atomic.txt", "x")
        atomic.write_bytes(tmp_path / "atomic.npy", atomic.array_bytes(np.zeros(2)))
        atomic.write_files({tmp_path / "set.bin": b"x"})
    finally:
        os.umask(old)
    expected = 0o666 & ~umask
    assert (tmp_path / "plain.txt").stat().st_mode & 0o777 == expected
    for name in ("atomic.txt", "atomic.npy", "set.bin"):
        assert (tmp_path / name).stat().st_mode & 0o777 == expected, name


def test_a_stream_removes_its_temporary_file_when_the_writer_fails(tmp_path):
    with pytest.raises(RuntimeError):
        with atomic.stream(tmp_path / "out.bin") as out:
            out.write(b"half")
            raise RuntimeError("writer failed")
    assert os.listdir(tmp_path) == []


def test_a_stream_shorter_than_announced_replaces_nothing_and_leaves_no_temporary(tmp_path):
    (tmp_path / "out.bin").write_bytes(b"the earlier file")
    with pytest.raises(ValueError, match="4 bytes written where 10"):
        with atomic.stream(tmp_path / "out.bin", size=10) as out:
            out.write(b"half")
    assert os.listdir(tmp_path) == ["out.bin"] and (tmp_path / "out.bin").read_bytes() == b"the earlier file"


def test_a_table_is_written_as_csv_or_parquet_by_its_suffix_and_as_nothing_else(tmp_path):
    import pandas as pd

    frame = pd.DataFrame({"qid": ["q1"], "value": [0.5]})
    atomic.write_frame(tmp_path / "t.csv", frame)
    atomic.write_frame(tmp_path / "t.parquet", frame)
    assert pd.read_csv(tmp_path / "t.csv").equals(frame) and pd.read_parquet(tmp_path / "t.parquet").equals(frame)
    with pytest.raises(ValueError, match="t.json"):
        atomic.write_frame(tmp_path / "t.json", frame)
    assert sorted(os.listdir(tmp_path)) == ["t.csv", "t.parquet"]


@pytest.mark.parametrize("files, remove, named", [
    ({}, (), "at least one file"),
    ({"a/x.csv": "1", "b/y.csv": "2"}, (), "one folder"),
    ({"a/x.csv": "1"}, ("b/old.csv",), "one folder"),
    ({"a/x.csv": "1"}, ("a/x.csv",), "x.csv"),
])
def test_a_set_of_files_is_one_folders_each_named_once(tmp_path, files, remove, named):
    with pytest.raises(ValueError, match=named):
        atomic.write_files({tmp_path / p: data for p, data in files.items()}, remove=[tmp_path / p for p in remove])
    assert not any(p.is_file() for p in tmp_path.rglob("*"))


def test_a_file_with_a_name_near_the_limit_is_set_aside_with_its_companion_under_a_name_that_fits(tmp_path):
    path = tmp_path / ("é" * 120 + ".trec")  # 245 bytes: "<name>.set-aside-<time>.json" would pass 255
    path.write_text("run")
    (tmp_path / f"{path.name}.json").write_text("{}")
    with pytest.warns(UserWarning, match="kept, never read"):
        aside = atomic.set_aside(path, "not the kit's", "made anew", suffixes=("", ".json"))
    assert aside.read_text() == "run" and (tmp_path / f"{aside.name}.json").read_text() == "{}"
    assert not path.exists() and len(f"{aside.name}.json".encode()) <= 255


def test_a_file_kept_around_a_rewrite_is_set_aside_where_no_hard_link_can_be_made(tmp_path, monkeypatch):
    """On a file system without hard links (vfat, exFAT, some FUSE or SMB mounts) the user's file is renamed aside
    before the block, not lost to it."""
    import errno

    path = tmp_path / "metrics.csv"
    path.write_text("the user's own")

    def no_links(*args, **kwargs):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(atomic.os, "link", no_links)
    with pytest.warns(UserWarning, match="kept, never read"):
        with atomic.keeping([path], "not the kit's"):
            path.unlink(missing_ok=True)
            path.write_text("the kit's")
    (aside,) = tmp_path.glob("metrics.csv.set-aside-*")
    assert aside.read_text() == "the user's own" and path.read_text() == "the kit's"


def _flushed_before_renamed(monkeypatch) -> list[tuple]:
    """Record, in order, each ``os.fsync`` (by the path its descriptor names) and each ``os.replace``/``os.rename``
    (source, target) the kit makes."""
    events: list[tuple] = []
    fsync, replace, rename = os.fsync, os.replace, os.rename

    def flushing(fd):
        events.append(("fsync", os.path.realpath(f"/proc/self/fd/{fd}")))
        return fsync(fd)

    def replacing(src, dst, *args, **kwargs):
        events.append(("rename", os.path.realpath(src), os.path.realpath(dst)))
        return replace(src, dst, *args, **kwargs)

    def renaming(src, dst, *args, **kwargs):
        events.append(("rename", os.path.realpath(src), os.path.realpath(dst)))
        return rename(src, dst, *args, **kwargs)

    monkeypatch.setattr(atomic.os, "fsync", flushing)
    monkeypatch.setattr(atomic.os, "replace", replacing)
    monkeypatch.setattr(atomic.os, "rename", renaming)
    return events


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names a descriptor's file through /proc")
def test_an_atomic_write_flushes_its_temporary_before_renaming_it_into_place(tmp_path, monkeypatch):
    """Not observable without a crash: a rename that reaches the disk before the data leaves an empty or torn file
    under the name after a power cut, the old content gone."""
    events = _flushed_before_renamed(monkeypatch)
    atomic.write_text(tmp_path / "run.trec", "new")
    (rename,) = [e for e in events if e[0] == "rename" and e[2] == str(tmp_path / "run.trec")]
    assert ("fsync", rename[1]) in events[:events.index(rename)]


def test_a_waiter_that_gets_the_lock_of_a_file_its_holder_removed_waits_for_the_one_at_the_path(tmp_path,
                                                                                                 monkeypatch):
    """The holder removes the lock file as it lets go. A waiter blocked on that file gets its lock then, while a
    third caller may already hold the new file at the path: the waiter must wait for that one, or two hold the lock
    at once (two processes judging into one cache, paying twice)."""
    import threading
    import types

    path = tmp_path / "c.sqlite-lock"
    inside, most, guard = [0], [0], threading.Lock()
    b_waits, c_in = threading.Event(), threading.Event()

    def hold(seconds: float, entered: threading.Event | None = None) -> None:
        with atomic.exclusive(path, "test", "waiting"):
            with guard:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            if entered is not None:
                entered.set()
            threading.Event().wait(seconds)
            with guard:
                inside[0] -= 1

    real_unlink = os.unlink
    third = threading.Thread(target=hold, args=(0.5, c_in))

    def unlink_then_a_third_takes_the_path(target, *args, **kwargs):
        real_unlink(target, *args, **kwargs)
        if str(target) == str(path) and not third.is_alive() and not c_in.is_set():
            third.start()  # between the holder's unlink and its letting go: a new file, held
            assert c_in.wait(10)

    monkeypatch.setattr(atomic, "warnings", types.SimpleNamespace(warn=lambda *a, **k: b_waits.set()))
    waiter = threading.Thread(target=hold, args=(0,))
    with atomic.exclusive(path, "test", "waiting"):
        waiter.start()
        assert b_waits.wait(10)  # the waiter has opened the file and waits for its lock
        monkeypatch.setattr(atomic.os, "unlink", unlink_then_a_third_takes_the_path)
    waiter.join(20)
    third.join(20)
    assert not waiter.is_alive() and not third.is_alive()
    assert most[0] == 1


def test_an_error_creating_the_temporary_names_the_file_asked_for_not_the_temporary(tmp_path):
    target = tmp_path / "no such folder" / "metrics.csv"
    for write in (lambda: atomic.write_text(target, "x"), lambda: atomic.write_files({target: "x"}),
                  lambda: atomic.stream(target).__enter__()):
        with pytest.raises(FileNotFoundError) as failed:
            write()
        assert failed.value.filename == str(target)


# ------------------------------------------------------------------ review72z: bounds, flushes and errors a user meets


def test_a_stream_without_room_for_its_announced_size_fails_before_the_writer_runs(tmp_path, monkeypatch):
    """The size is reserved first: a disk without room fails at once, naming the file, before a long copy starts."""
    from full_disk import SimulatedDisk

    (tmp_path / "matrix.npy").write_bytes(b"the earlier file")
    disk = SimulatedDisk.under(monkeypatch, tmp_path, free=100)
    ran = []
    with pytest.raises(OSError) as failed:
        with atomic.stream(tmp_path / "matrix.npy", size=1000) as out:
            ran.append(True)
            out.write(b"x" * 1000)
    assert failed.value.errno == errno.ENOSPC and failed.value.filename == str(tmp_path / "matrix.npy")
    assert ran == [] and disk.refused
    assert os.listdir(tmp_path) == ["matrix.npy"] and (tmp_path / "matrix.npy").read_bytes() == b"the earlier file"


@pytest.mark.parametrize("size, written", [(2, b"more"), (0, b"x")])
def test_a_stream_longer_than_announced_replaces_nothing(tmp_path, size, written):
    (tmp_path / "out.bin").write_bytes(b"the earlier file")
    with pytest.raises(ValueError, match=f"{len(written)} bytes written where {size} were announced"):
        with atomic.stream(tmp_path / "out.bin", size=size) as out:
            out.write(written)
    assert os.listdir(tmp_path) == ["out.bin"] and (tmp_path / "out.bin").read_bytes() == b"the earlier file"


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names a descriptor's file through /proc")
def test_a_streamed_file_is_flushed_before_it_is_renamed_into_place(tmp_path, monkeypatch):
    events = _flushed_before_renamed(monkeypatch)
    with atomic.stream(tmp_path / "matrix.npy", size=3) as out:
        out.write(b"abc")
    (rename,) = [e for e in events if e[0] == "rename" and e[2] == str(tmp_path / "matrix.npy")]
    assert ("fsync", rename[1]) in events[:events.index(rename)]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names a descriptor's file through /proc")
def test_a_sets_journal_and_its_folder_entry_are_flushed_before_the_first_file_is_replaced(tmp_path, monkeypatch):
    """A set is finished after a crash only if its journal reached the disk before any of its files was renamed."""
    (tmp_path / "a.csv").write_text("old")
    events = _flushed_before_renamed(monkeypatch)
    atomic.write_files({tmp_path / "a.csv": "new a", tmp_path / "b.csv": "new b"})
    renames = [e for e in events if e[0] == "rename"]
    journal = next(e for e in renames if os.path.basename(e[2]).startswith(atomic.JOURNAL_PREFIX))
    first = next(e for e in renames if e[2] in (str(tmp_path / "a.csv"), str(tmp_path / "b.csv")))
    between = events[events.index(journal):events.index(first)]
    assert ("fsync", journal[1]) in events[:events.index(journal)]  # the journal's bytes
    assert ("fsync", str(tmp_path)) in between  # its name in the folder


def test_a_temporary_whose_mode_cannot_be_set_is_removed(tmp_path, monkeypatch):
    def refused(fd, mode):
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(atomic.os, "fchmod", refused)
    with pytest.raises(PermissionError):
        atomic.write_text(tmp_path / "run.trec", "new")
    assert os.listdir(tmp_path) == []


def test_text_that_is_no_utf8_is_refused_not_written_with_question_marks(tmp_path):
    with pytest.raises(UnicodeEncodeError):
        atomic.write_text(tmp_path / "run.trec", "d\udcff")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG, errno.EROFS])
def test_a_full_or_failing_device_is_the_disks_error(code):
    assert atomic.device_error(OSError(code, os.strerror(code)))


@pytest.mark.parametrize("err", [OSError(errno.ENOENT, "No such file"), OSError(errno.EACCES, "Permission denied"),
                                 ValueError("no OSError")])
def test_a_missing_file_or_a_refused_permission_is_no_device_error(err):
    assert not atomic.device_error(err)


class _SQLiteError(Exception):
    """What ``sqlite3`` raises: its error name in ``sqlite_errorname``, no file named."""

    def __init__(self, name: str):
        super().__init__("disk I/O error" if "IOERR" in name else "database or disk is full")
        self.sqlite_errorname = name


@pytest.mark.parametrize("name, code", [("SQLITE_FULL", errno.ENOSPC), ("SQLITE_IOERR", errno.EIO),
                                        ("SQLITE_IOERR_WRITE", errno.EIO), ("SQLITE_IOERR_FSYNC", errno.EIO)])
def test_a_full_or_failing_disk_under_sqlite_is_an_oserror_naming_the_database(tmp_path, name, code):
    database = tmp_path / "judgments.sqlite"
    with pytest.raises(OSError) as failed:
        with atomic.sqlite_errors(database):
            raise _SQLiteError(name)
    assert failed.value.errno == code and failed.value.filename == str(database)


def test_a_sqlite_full_disk_wrapped_by_a_library_is_still_an_oserror_naming_the_database(tmp_path):
    database = tmp_path / "judgments.sqlite"
    with pytest.raises(OSError) as failed:
        with atomic.sqlite_errors(database):
            try:
                raise _SQLiteError("SQLITE_FULL")
            except _SQLiteError as err:
                raise RuntimeError("the cache could not store a judgment") from err
    assert failed.value.errno == errno.ENOSPC and failed.value.filename == str(database)


def test_another_sqlite_error_passes_unchanged(tmp_path):
    with pytest.raises(_SQLiteError):
        with atomic.sqlite_errors(tmp_path / "judgments.sqlite"):
            raise _SQLiteError("SQLITE_CONSTRAINT")


@pytest.mark.parametrize("name", ["t.csv", "t.parquet"])
def test_a_filtered_table_is_written_without_its_index(tmp_path, name):
    import pandas as pd

    frame = pd.DataFrame({"qid": ["q1", "q2"], "value": [0.0, 0.5]})
    atomic.write_frame(tmp_path / name, frame[frame.value > 0])
    read = pd.read_csv if name.endswith(".csv") else pd.read_parquet
    assert read(tmp_path / name).equals(pd.DataFrame({"qid": ["q2"], "value": [0.5]}))


@pytest.mark.parametrize("name", ["t.txt", "t.tsv", "t.CSV"])
def test_a_table_named_for_another_format_is_refused_and_nothing_written(tmp_path, name):
    import pandas as pd

    with pytest.raises(ValueError, match=name):
        atomic.write_frame(tmp_path / name, pd.DataFrame({"qid": ["q1"]}))
    assert os.listdir(tmp_path) == []


def test_a_reader_leaves_a_set_to_its_writer_while_the_writer_renames(tmp_path, monkeypatch):
    """The writer holds its journal's lock until its last rename: a reader settling the folder meanwhile finishes
    nothing (two processes renaming one set at once)."""
    (tmp_path / "a.csv").write_text("old a")
    real, settled = os.replace, []

    def replace(src, dst):
        if str(dst) == str(tmp_path / "b.csv"):
            settled.append(atomic.settle(tmp_path))  # a reader, between the writer's renames
        return real(src, dst)

    monkeypatch.setattr(atomic.os, "replace", replace)
    atomic.write_files({tmp_path / "a.csv": "new a", tmp_path / "b.csv": "new b"})
    assert settled == [0]
    assert (tmp_path / "a.csv").read_text() == "new a" and (tmp_path / "b.csv").read_text() == "new b"
    assert sorted(os.listdir(tmp_path)) == ["a.csv", "b.csv"]


def test_a_fifo_where_a_lock_file_goes_is_refused_naming_it_and_left_alone(tmp_path):
    from instir.errors import UserError

    path = tmp_path / "judgments.sqlite-lock"
    os.mkfifo(path)
    with pytest.raises(UserError, match=f"{path} is a FIFO"):
        with atomic.exclusive(path, "judgment cache", "waiting"):
            pass
    assert os.listdir(tmp_path) == ["judgments.sqlite-lock"]


def test_two_files_set_aside_one_after_the_other_are_both_kept(tmp_path):
    path = tmp_path / "metrics.csv"
    for content in ("the first edit", "the second edit"):
        path.write_text(content)
        with pytest.warns(UserWarning, match="kept, never read"):
            atomic.set_aside(path, "not the kit's", "made anew")
    kept = sorted(p.read_text() for p in tmp_path.glob("metrics.csv.set-aside-*"))
    assert kept == ["the first edit", "the second edit"] and not path.exists()


def test_a_file_that_cannot_be_set_aside_is_an_error_not_a_warning_that_it_was(tmp_path, monkeypatch):
    import pathlib

    path = tmp_path / "metrics.csv"
    path.write_text("the user's own")

    def refused(self, target):
        raise PermissionError(errno.EACCES, "Permission denied", str(self))

    monkeypatch.setattr(pathlib.Path, "rename", refused)
    with pytest.raises(PermissionError):
        atomic.set_aside(path, "not the kit's", "made anew")
    assert path.read_text() == "the user's own"


def test_a_file_a_rewrite_removes_is_kept_aside_with_a_warning_and_one_it_leaves_alone_stays(tmp_path):
    removed, left = tmp_path / "compared.csv", tmp_path / "metrics.csv"
    removed.write_text("the user's comparison")
    left.write_text("the user's metrics")
    with pytest.warns(UserWarning, match="kept as .*compared.csv.set-aside-.*the kit replaced or removed it") as said:
        with atomic.keeping([removed, left], "not the kit's"):
            removed.unlink()
    (aside,) = tmp_path.glob("*.set-aside-*")
    assert aside.name.startswith("compared.csv") and aside.read_text() == "the user's comparison"
    assert left.read_text() == "the user's metrics" and len(said) == 1


@pytest.mark.parametrize("plan", [{"replace": [], "remove": [".."]}, {"replace": [["..", "a.csv"]], "remove": []}],
                         ids=["remove the parent", "rename the parent"])
def test_a_journal_naming_the_parent_folder_is_not_followed(tmp_path, plan):
    inner = tmp_path / "set"
    inner.mkdir()
    journal = inner / f"{atomic.JOURNAL_PREFIX}x.json"
    journal.write_text(json.dumps(plan))
    with pytest.warns(UserWarning, match="unreadable journal"):
        assert atomic.settle(inner) == 0
    assert inner.is_dir() and os.listdir(inner) == []


def test_a_set_whose_rename_fails_names_the_file_not_its_temporary(tmp_path):
    (tmp_path / "metrics.csv").mkdir()  # a folder where the set's file goes
    (tmp_path / "metrics.csv" / "kept").write_text("x")
    with pytest.raises(OSError) as failed:
        atomic.write_files({tmp_path / "metrics.csv": "new"})
    assert failed.value.filename == str(tmp_path / "metrics.csv")


@pytest.mark.parametrize("plan", [{"replace": 5, "remove": []}, {"replace": [], "remove": None}, ["replace"]],
                         ids=["replace no list", "remove no list", "no mapping"])
def test_a_journal_of_the_wrong_shape_is_removed_with_a_warning_never_raised_into_a_reader(tmp_path, plan):
    journal = tmp_path / f"{atomic.JOURNAL_PREFIX}x.json"
    journal.write_text(json.dumps(plan))
    with pytest.warns(UserWarning, match="unreadable journal"):
        assert atomic.settle(tmp_path) == 0
    assert os.listdir(tmp_path) == []


_KILLED_HOLDER = """
import multiprocessing, os, signal, sys
from pathlib import Path
from instir import atomic
with atomic.exclusive(Path(sys.argv[1]), "BM25 index cache", "waiting"):
    context = multiprocessing.get_context("fork")  # as the BM25 tokeniser's pool
    worker = context.Process(target=context.Event().wait)  # blocked for ever, as a worker whose parent died
    worker.start()
    print(worker.pid, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_lock_whose_holder_was_killed_is_free_while_a_worker_it_forked_still_runs(tmp_path):
    """kill -9 of a BM25 build left its tokenising workers running (blocked on a pipe no one reads), each with a copy
    of the entry's lock: the next build of that index waited for ever for a holder that was gone."""
    import fcntl
    import signal
    import subprocess
    import sys

    path, said = tmp_path / ".entry.lock", tmp_path / "worker.pid"
    with said.open("w") as out:  # a file, not a pipe: the worker outlives the holder and keeps its stdout open
        holder = subprocess.run([sys.executable, "-c", _KILLED_HOLDER, str(path)], stdout=out, timeout=120)
    worker = int(said.read_text().split()[0])
    try:
        assert holder.returncode == -signal.SIGKILL and path.exists()
        fd = os.open(path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError while the worker holds a copy
        finally:
            os.close(fd)
    finally:
        os.kill(worker, signal.SIGKILL)


def test_exclusive_holds_another_accounts_lock_file_it_cannot_write(tmp_path, monkeypatch):
    # a lock file another account left (0644, after a kill -9) in a group's cache folder: opened for writing, it was
    # a PermissionError (the store then built without its lock); a lock is held on a file opened to read just as well
    import fcntl

    path = tmp_path / ".x.lock"
    path.write_text("")
    refuse_open(monkeypatch, path, os.O_RDWR | os.O_WRONLY)

    def held() -> bool:
        fd = os.open(path, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    with atomic.exclusive(path, "test cache", "waiting"):
        assert held()
    assert not path.exists()


def test_a_sets_journal_another_account_of_the_group_can_read_to_finish_it(tmp_path, monkeypatch):
    # mkstemp's 0600 journal left by a killed writer in a group's report folder: every other account skipped it
    # without a word ("finished meanwhile") and read a half-renamed set
    def killed(folder, plan):
        raise KeyboardInterrupt

    monkeypatch.setattr(atomic, "_apply", killed)
    old = os.umask(0o002)
    try:
        with pytest.raises(KeyboardInterrupt):
            atomic.write_files({tmp_path / "a.csv": "new a", tmp_path / "b.csv": "new b"})
        (journal,) = tmp_path.glob(f"{atomic.JOURNAL_PREFIX}*.json")
        assert journal.stat().st_mode & 0o777 == 0o664
    finally:
        os.umask(old)


def test_a_journal_this_account_cannot_read_is_named_not_skipped_in_silence(tmp_path, monkeypatch):
    # on the commit before, another account's journal it could not open was skipped in silence ("finished meanwhile")
    journal = tmp_path / f"{atomic.JOURNAL_PREFIX}x.json"
    journal.write_text(json.dumps({"replace": [], "remove": []}))
    refuse_open(monkeypatch, journal)
    with pytest.warns(UserWarning, match=rf"{re.escape(str(journal))}: .*cannot be read by this account.*"
                      rf"the files in {re.escape(str(tmp_path))} may disagree$"):
        assert atomic.settle(tmp_path) == 0


def test_a_lock_file_made_in_a_groups_folder_can_be_opened_for_writing_by_the_group(tmp_path):
    # exclusive's lock file was 0644: another account of the group could only open it to read
    path = tmp_path / ".entry.lock"
    old = os.umask(0o002)
    try:
        with atomic.exclusive(path, "test cache", "waiting"):
            mode = path.stat().st_mode & 0o777
    finally:
        os.umask(old)
    assert mode == 0o664


@pytest.mark.parametrize("waited", [False, True], ids=["taken at once", "taken after waiting"])
def test_a_descriptor_opened_after_a_lock_is_let_go_stays_open_in_a_worker_forked_later(tmp_path, monkeypatch,
                                                                                         waited):
    # a lock's descriptor is closed in a forked worker while held; once let go, its number (reused by the next file
    # the process opens, such as a pool's pipe) must not be closed in the workers forked after
    import multiprocessing
    import threading
    import types

    path = tmp_path / ".entry.lock"
    before = set(atomic.HELD_LOCKS)
    if waited:  # the waiter's first descriptor is on the file the holder removes as it lets go: it takes the new one
        waits = threading.Event()
        monkeypatch.setattr(atomic, "warnings", types.SimpleNamespace(warn=lambda *a, **k: waits.set()))

        def second() -> None:
            with atomic.exclusive(path, "test cache", "waiting"):
                pass

        other = threading.Thread(target=second)
        with atomic.exclusive(path, "test cache", "waiting"):
            other.start()
            assert waits.wait(10)  # the second has opened the file and waits for its lock
        other.join(20)
        assert not other.is_alive()
    else:
        with atomic.exclusive(path, "test cache", "waiting"):
            pass
    assert atomic.HELD_LOCKS == before
    fd = os.open(tmp_path / "data", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        context = multiprocessing.get_context("fork")
        worker = context.Process(target=os.fstat, args=(fd,))  # an OSError (exit code 1) where the copy was closed
        worker.start()
        worker.join(30)
        assert worker.exitcode == 0
    finally:
        os.close(fd)


_SETTLE = """
import sys, warnings
from instir import atomic
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    print(atomic.settle(sys.argv[1]), *[str(w.message) for w in caught], sep="\\n")
"""


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_journal_that_is_a_fifo_or_a_folder_is_set_aside_never_opened(tmp_path, kind):
    # a FIFO named as a set's journal blocked every reader of the folder for ever (in a process of its own here, so
    # that a regression fails rather than hanging the suite); a folder stopped every one with "Is a directory: 7"
    import subprocess
    import sys

    journal = tmp_path / f"{atomic.JOURNAL_PREFIX}abc.json"
    os.mkfifo(journal) if kind == "fifo" else journal.mkdir()
    settled = subprocess.run([sys.executable, "-c", _SETTLE, str(tmp_path)], capture_output=True, text=True,
                             timeout=20)
    assert settled.returncode == 0, settled.stderr
    count, said = settled.stdout.split("\n", 1)
    assert count == "0" and re.match(rf"{journal} is not the journal of an interrupted write .*set aside as", said)
    assert not os.path.lexists(journal) and len(list(tmp_path.glob("*.set-aside-*"))) == 1
    atomic.write_files({tmp_path / "a.csv": "x\n"})  # and the next set is written
    assert (tmp_path / "a.csv").read_text() == "x\n"


def test_a_journal_that_cannot_be_set_aside_is_named_in_a_warning_and_the_next_is_still_set_aside(tmp_path,
                                                                                                  monkeypatch):
    # a read-only folder, or another account's: the first not to be moved is said (not a PermissionError out of every
    # reader of the folder), and the journals after it are still looked at
    first, second = (tmp_path / f"{atomic.JOURNAL_PREFIX}{name}.json" for name in ("a", "b"))
    first.mkdir()
    second.mkdir()
    real_set_aside = atomic.set_aside

    def set_aside(path, *args, **kwargs):
        if path == first:
            raise PermissionError(13, "Permission denied", str(path))
        return real_set_aside(path, *args, **kwargs)

    monkeypatch.setattr(atomic, "set_aside", set_aside)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert atomic.settle(tmp_path) == 0
    said = [str(w.message) for w in caught]
    assert any(m.startswith(f"{first} is not a journal of the kit's and cannot be set aside (Permission denied)")
               for m in said), said
    assert first.is_dir() and not os.path.lexists(second) and len(list(tmp_path.glob("*.set-aside-*"))) == 1
