"""Atomic writes leave the old file or the new one, never a torn one or a stray temp file."""

import os

import numpy as np
import pytest

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

