"""The one verified store under the array caches: an entry is published whole, checked on every
read, and removed with a warning naming the file when it fails; crashed writers' leftovers go,
live writers' stay; resumable parts are reused only when they match their checksum."""

import errno
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from says import warns_saying

from instir import verified_store
from instir.verified_store import MANIFEST, CacheWarning, Damaged, VerifiedStore, part_ok, write_part

KEY = "k" * 64


def write_two(folder: Path) -> None:
    np.save(folder / "vectors.npy", np.arange(12, dtype=np.float32).reshape(4, 3))
    (folder / "ids.json").write_text(json.dumps(["a", "b", "c", "d"]))


def load_ids(entry) -> list[str]:
    return json.loads((entry.path / "ids.json").read_text())


def test_a_published_entry_reads_back_with_its_manifest(tmp_path):
    store = VerifiedStore(tmp_path, "test cache")
    entry = store.put("e", KEY, write_two, description={"model": "m"}, meta={"rows": 4})
    assert sorted(p.name for p in entry.path.iterdir()) == ["ids.json", MANIFEST, "vectors.npy"]
    info = json.loads((entry.path / MANIFEST).read_text())
    assert info["key"] == KEY and info["meta"] == {"rows": 4} and set(info["files"]) == {"ids.json", "vectors.npy"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert store.read("e", KEY, load_ids, required=("ids.json",)) == ["a", "b", "c", "d"]
        assert store.read("other", KEY, load_ids) is None  # no entry: nothing to say
    assert [p.name for p in tmp_path.iterdir()] == ["e"]  # no temporary left


def _truncate(entry: Path) -> tuple[str, str]:
    path = entry / "vectors.npy"
    path.write_bytes(path.read_bytes()[:-4])
    return "vectors.npy", "bytes where the manifest says"


def _same_size_overwrite(entry: Path) -> tuple[str, str]:
    path = entry / "ids.json"
    path.write_bytes(b"\0" * path.stat().st_size)
    return "ids.json", "does not match the checksum"


def _foreign_key(entry: Path) -> tuple[str, str]:
    info = json.loads((entry / MANIFEST).read_text())
    (entry / MANIFEST).write_text(json.dumps({**info, "key": "another"}))
    return MANIFEST, "not a complete manifest"


def _file_outside_the_entry(entry: Path) -> tuple[str, str]:
    info = json.loads((entry / MANIFEST).read_text())
    info["files"]["../victim"] = {"bytes": 4, "sha256": "0" * 64}
    (entry / MANIFEST).write_text(json.dumps(info))
    return MANIFEST, "outside its entry"


def _manifest_nested_too_deep(entry: Path) -> tuple[str, str]:
    (entry / MANIFEST).write_text("[" * 200_000)  # json.loads raises RecursionError, not ValueError
    return MANIFEST, "not a complete manifest"


def _required_file_unlisted(entry: Path) -> tuple[str, str]:
    info = json.loads((entry / MANIFEST).read_text())
    del info["files"]["ids.json"]
    (entry / MANIFEST).write_text(json.dumps(info))
    return MANIFEST, "does not list ids.json"


def _manifest_gone(entry: Path) -> tuple[str, str]:
    (entry / MANIFEST).unlink()
    return MANIFEST, "is missing"


def _callers_check(entry: Path) -> tuple[str, str]:
    return "ids.json", "holds the wrong ids"


@pytest.mark.parametrize("damage", [_truncate, _same_size_overwrite, _foreign_key, _file_outside_the_entry,
                                    _manifest_nested_too_deep, _required_file_unlisted, _manifest_gone,
                                    _callers_check],
                         ids=lambda f: f.__name__.strip("_"))
def test_an_entry_that_fails_a_check_warns_naming_the_file_and_is_removed(tmp_path, damage):
    (tmp_path / "victim").write_text("kept")
    store = VerifiedStore(tmp_path / "cache", "test cache")
    entry = store.put("e", KEY, write_two).path
    name, problem = damage(entry)

    def load(found):
        if damage is _callers_check:
            raise Damaged(found.path / "ids.json", "holds the wrong ids")
        return load_ids(found)

    with pytest.warns(CacheWarning, match=rf"^test cache: {re.escape(str(entry / name))} .*{problem}.*removed"):
        assert store.read("e", KEY, load, required=("ids.json",)) is None
    assert not entry.exists() and (tmp_path / "victim").read_text() == "kept"


def test_beyond_the_hash_budget_sizes_and_npy_headers_are_still_checked(tmp_path, monkeypatch):
    monkeypatch.setattr(verified_store, "FULL_HASH_BYTES", 0)
    store = VerifiedStore(tmp_path, "test cache")
    entry = store.put("e", KEY, write_two).path
    (entry / "ids.json").write_bytes(b"[]" + b" " * ((entry / "ids.json").stat().st_size - 2))
    assert store.read("e", KEY, load_ids) == []  # a same-size overwrite goes unnoticed without hashes
    data = bytearray((entry / "vectors.npy").read_bytes())
    data[:6] = b"\0" * 6  # the .npy magic gone, same size
    (entry / "vectors.npy").write_bytes(bytes(data))
    with pytest.warns(CacheWarning, match="vectors.npy has no valid .npy header"):
        assert store.read("e", KEY, lambda e: True) is None



def test_beyond_the_hash_budget_a_npy_header_whose_shape_disagrees_with_the_files_size_is_damage(tmp_path,
                                                                                                   monkeypatch):
    """A header rewritten to a smaller shape of the same length (the file's size unchanged, so its manifest's size
    still matches) would serve the wrong rows or dimensions: the size the header gives is checked too."""
    monkeypatch.setattr(verified_store, "FULL_HASH_BYTES", 0)
    store = VerifiedStore(tmp_path, "test cache")
    entry = store.put("e", KEY, write_two).path
    data = (entry / "vectors.npy").read_bytes()
    assert data.count(b"(4, 3)") == 1
    (entry / "vectors.npy").write_bytes(data.replace(b"(4, 3)", b"(4, 2)"))
    with pytest.warns(CacheWarning, match="vectors.npy has 176 bytes where its .npy header says 160"):
        assert store.read("e", KEY, lambda e: np.load(e.path / "vectors.npy")) is None

def test_a_loader_error_counts_as_damage(tmp_path):
    store = VerifiedStore(tmp_path, "test cache")
    store.put("e", KEY, write_two)

    def broken(entry):
        raise ValueError("cannot parse")

    with warns_saying(CacheWarning, "cannot be loaded", "cannot parse"):
        assert store.read("e", KEY, broken) is None


def test_an_entry_replaced_while_it_is_read_is_read_again_not_removed(tmp_path):
    store = VerifiedStore(tmp_path, "test cache")
    store.put("e", KEY, write_two)
    calls = []

    def load(entry):
        calls.append(entry.info["build"])
        if len(calls) == 1:  # another process publishes the entry again while this one reads it
            store.put("e", KEY, write_two)
            raise Damaged(entry.path / "ids.json", "changed under the reader")
        return load_ids(entry)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert store.read("e", KEY, load) == ["a", "b", "c", "d"]
    assert len(calls) == 2 and calls[0] != calls[1]


def test_the_last_writer_wins_and_a_rename_that_keeps_meeting_others_leaves_theirs(tmp_path, monkeypatch):
    store = VerifiedStore(tmp_path, "test cache")
    entry = store.entry_dir("entry")
    real_rename = os.rename

    def publish(blocked_renames: int) -> Path:
        entry.mkdir(exist_ok=True)
        (entry / "theirs").write_text("other writer\n")
        tmp = tmp_path / f"mine-{blocked_renames}"
        tmp.mkdir()
        (tmp / "mine").write_text("this writer\n")
        calls = []

        def rename(src, dst):
            if Path(src) != tmp:  # the entry renamed aside to be removed
                return real_rename(src, dst)
            calls.append(src)
            if len(calls) <= blocked_renames:
                entry.mkdir(exist_ok=True)  # the other writer published (again) in between
                (entry / "theirs").write_text("other writer\n")
                raise OSError(errno.ENOTEMPTY, "Directory not empty", str(dst))
            return real_rename(src, dst)

        monkeypatch.setattr(os, "rename", rename)
        store._publish(tmp, entry)
        monkeypatch.setattr(os, "rename", real_rename)
        assert not tmp.exists()
        return entry

    assert sorted(p.name for p in publish(1).iterdir()) == ["mine"]  # replaced: last writer wins
    assert sorted(p.name for p in publish(3).iterdir()) == ["theirs"]  # blocked thrice: theirs stands


def test_crashed_writers_leftovers_go_at_the_next_write_live_remote_and_other_ones_stay(tmp_path):
    """kill -9 during a cache write left its ``.tmp`` folders (hundreds of MB); the next write of any
    entry removes those of ended processes of this host, and any the store names that are older than
    STALE_SECONDS. A folder of the user's whose name only looks alike (``.thesis.old``, in a cache folder
    they chose) stays, however old: on the commit before, it was deleted."""
    store = VerifiedStore(tmp_path, "test cache")
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    here, build = socket.gethostname(), "0" * 32
    killed = tmp_path / f".other.{ended.stdout.strip()}@{here}.{build}.tmp"
    live = tmp_path / f".other.{os.getpid()}@{here}.{build}.tmp"
    remote = tmp_path / f".other.{ended.stdout.strip()}@elsewhere.example.{build}.tmp"
    stale = tmp_path / f".other.{build}.old"  # an entry set aside by a writer killed before deleting it
    users = [tmp_path / ".thesis.old", tmp_path / ".drafts.tmp", tmp_path / ".other.unnamed.tmp"]
    for folder in (killed, live, remote, stale, *users):
        folder.mkdir()
        (folder / "vectors.npy").write_bytes(b"half")
    long_ago = time.time() - verified_store.STALE_SECONDS - 60
    for folder in (stale, *users):
        os.utime(folder, (long_ago, long_ago))
    store.put("e", KEY, write_two)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["e", live.name, remote.name,
                                                                 *(u.name for u in users)])



def test_a_temporary_of_a_live_writer_of_another_user_stays_at_the_next_write(tmp_path, monkeypatch):
    """A writer of another user on a shared cache answers the liveness probe with EPERM: it runs, and its
    temporary folder is left to it (deleted under it, its publish would fail)."""
    here, build, pid = socket.gethostname(), "0" * 32, 999_999_937
    theirs = tmp_path / f".other.{pid}@{here}.{build}.tmp"
    theirs.mkdir()
    (theirs / "vectors.npy").write_bytes(b"half")
    kill = os.kill

    def another_users(target, signal):
        if target == pid:
            raise PermissionError(errno.EPERM, "Operation not permitted")
        return kill(target, signal)

    monkeypatch.setattr(verified_store.os, "kill", another_users)
    VerifiedStore(tmp_path, "test cache").put("e", KEY, write_two)
    assert (theirs / "vectors.npy").read_bytes() == b"half"


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names a descriptor's file through /proc")
def test_every_file_of_an_entry_is_flushed_before_the_entry_is_renamed_into_place(tmp_path, monkeypatch):
    """Not observable without a crash: an entry published before its files reach the disk may, after a power cut,
    hold empty files under a manifest that lists them (read as damage at best, a rebuild)."""
    events = []
    fsync, rename = os.fsync, os.rename

    def flushing(fd):
        events.append(("fsync", os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))))
        return fsync(fd)

    def renaming(src, dst):
        events.append(("rename", os.path.basename(dst)))
        return rename(src, dst)

    monkeypatch.setattr(verified_store.os, "fsync", flushing)
    monkeypatch.setattr(verified_store.os, "rename", renaming)
    VerifiedStore(tmp_path, "test cache").put("e", KEY, write_two)
    published = events.index(("rename", "e"))
    assert {("fsync", "vectors.npy"), ("fsync", "ids.json")} <= set(events[:published])

def test_a_failed_write_names_the_entrys_file_or_keeps_the_value_in_memory(tmp_path):
    store = VerifiedStore(tmp_path, "test cache")
    entry = store.entry_dir("e")

    def no_room(folder: Path) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(folder / "vectors.npy"))

    with pytest.raises(OSError) as failed:
        store.put("e", KEY, no_room, fallback=False)
    assert failed.value.errno == errno.ENOSPC and failed.value.filename == str(entry / "vectors.npy")
    assert list(tmp_path.iterdir()) == []
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    unwritable = VerifiedStore(blocker / "cache", "test cache")
    with pytest.warns(CacheWarning, match="cannot be written.*kept in memory only") as caught:
        assert unwritable.put("e", KEY, write_two) is None
        assert unwritable.put("f", KEY, write_two) is None
    assert len(caught) == 1  # once per folder


def test_the_work_folder_survives_a_crash_and_goes_when_the_entry_is_published(tmp_path):
    store = VerifiedStore(tmp_path, "test cache")
    part = store.work_dir("e") / "part-0.npy"

    def crash(work: Path) -> list[str]:
        work.mkdir()
        write_part(part, np.ones((2, 3)))
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        store.build("e", KEY, load_ids, crash)
    assert part_ok(part, 2)
    assert store.build("e", KEY, load_ids, lambda work: load_ids(store.put("e", KEY, write_two))) == list("abcd")
    assert [p.name for p in tmp_path.iterdir()] == ["e"]  # no work folder, no lock file left


def test_a_second_builder_of_an_entry_waits_and_reads_the_first_ones_not_building_it_again(tmp_path):
    """Two processes encoding one corpus into one cache: the first removed the shared work folder on publishing,
    and the second, still encoding into it, failed on a missing part and left its own parts there for ever."""
    store = VerifiedStore(tmp_path, "test cache")
    building, made, first = threading.Event(), [], []

    def make(work: Path) -> list[str]:
        made.append(work)
        building.set()
        work.mkdir()
        write_part(work / "part-0.npy", np.ones((2, 3)))
        time.sleep(0.3)  # the second builder comes meanwhile
        return load_ids(store.put("e", KEY, write_two))

    thread = threading.Thread(target=lambda: first.append(store.build("e", KEY, load_ids, make)))
    thread.start()
    assert building.wait(10)
    with warns_saying(CacheWarning, "another process is building", str(tmp_path / "e"), "waiting",
                      "if it stops first, the entry is made here, from any parts it kept"):
        second = store.build("e", KEY, load_ids, make)
    thread.join(10)
    assert first == [second] == [list("abcd")] and len(made) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["e"]


@pytest.mark.processes
def test_a_builder_killed_mid_way_holds_no_lock_and_its_parts_are_resumed(tmp_path):
    store = VerifiedStore(tmp_path, "test cache")
    part = store.work_dir("e") / "part-0.npy"
    script = (f"import time, numpy as np\nfrom instir.verified_store import VerifiedStore, write_part\n"
              f"def make(work):\n    work.mkdir(); write_part(work / 'part-0.npy', np.ones((2, 3))); time.sleep(60)\n"
              f"VerifiedStore({str(tmp_path)!r}, 'test cache').build('e', {KEY!r}, lambda e: e, make)\n")
    killed = subprocess.Popen([sys.executable, "-c", script])
    deadline = time.monotonic() + 60
    while killed.poll() is None and not part_ok(part, 2) and time.monotonic() < deadline:
        time.sleep(0.02)
    killed.kill()
    killed.wait()
    resumed = []

    def make(work: Path) -> list[str]:
        resumed.append(part_ok(work / "part-0.npy", 2))
        return load_ids(store.put("e", KEY, write_two))

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no wait for the killed builder
        assert store.build("e", KEY, load_ids, make) == list("abcd")
    assert resumed == [True] and [p.name for p in tmp_path.iterdir()] == ["e"]


@pytest.mark.parametrize("how", ["truncated", "zeroed", "checksum gone", "other rows"])
def test_a_part_that_fails_its_checksum_or_shape_is_removed_with_a_warning(tmp_path, how):
    part = tmp_path / "part-0.npy"
    write_part(part, np.ones((4, 3)))
    rows = 4
    if how == "truncated":
        part.write_bytes(part.read_bytes()[:-4])
    elif how == "zeroed":
        part.write_bytes(b"\0" * part.stat().st_size)
    elif how == "checksum gone":
        Path(str(part) + ".sha256").unlink()
    else:
        rows = 5
    with pytest.warns(CacheWarning, match=re.escape(str(part))):
        assert not part_ok(part, rows)
    assert not part.exists() and not part_ok(part, 4)  # missing: simply not done, no warning


@pytest.mark.parametrize("version", [(1, 0), (2, 0)])
def test_a_npy_header_of_either_version_numpy_writes_gives_shape_dtype_and_size(tmp_path, version):
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    with (tmp_path / "a.npy").open("wb") as fh:
        np.lib.format.write_array(fh, array, version=version)
    with (tmp_path / "a.npy").open("rb") as fh:
        assert verified_store.npy_header(fh) == ((3, 4), np.dtype(np.float32))
    with (tmp_path / "a.npy").open("rb") as fh:
        assert verified_store.npy_bytes(fh) == (tmp_path / "a.npy").stat().st_size


@pytest.mark.parametrize("write, problem", [
    (lambda fh: np.lib.format.write_array(fh, np.asfortranarray(np.ones((3, 4), np.float32))), "Fortran-ordered"),
    (lambda fh: np.lib.format.write_array(fh, np.array([{"a": 1}], dtype=object)), "object array"),
    (lambda fh: fh.write(np.lib.format.magic(9, 0) + b"\x00" * 64), "version (9, 0)"),
])
def test_a_npy_file_numpy_would_not_write_for_a_cache_has_no_valid_header(tmp_path, write, problem):
    with (tmp_path / "a.npy").open("wb") as fh:
        write(fh)
    with (tmp_path / "a.npy").open("rb") as fh, pytest.raises(ValueError, match=re.escape(problem)):
        verified_store.npy_bytes(fh)


@pytest.mark.parametrize("name", ["manifest.json", "ids.json"])
def test_a_fifo_in_an_entry_is_damage_not_a_read_that_blocks(tmp_path, name):
    # on the commit before, reading the manifest (or hashing the file) blocked for ever
    store = VerifiedStore(tmp_path, "test cache")
    store.put("e", KEY, write_two)
    (tmp_path / "e" / name).unlink()
    os.mkfifo(tmp_path / "e" / name)
    with pytest.warns(CacheWarning, match=rf"e/{re.escape(name)} is .*not a regular file: removed, rebuilding it"):
        assert store.read("e", KEY, load_ids) is None
    assert not (tmp_path / "e").exists()


def test_a_cache_folder_that_cannot_be_written_is_read_or_computed_without_its_lock(tmp_path, monkeypatch):
    # the build took the entry's lock first: a read-only shared cache failed with PermissionError on a hit beside
    # leftover parts, and on a miss (before the lock, the miss was computed and kept in memory with a warning)
    from instir import atomic
    from instir.verified_store import VerifiedStore

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(tmp_path / ".x.lock"))

    store = VerifiedStore(tmp_path / "store", "test store")
    monkeypatch.setattr(atomic, "exclusive", refused)
    made = store.build("x", "key", lambda entry: "read", lambda work: "computed")
    assert made == "computed"


def test_a_damaged_entry_this_account_cannot_remove_is_not_used_and_the_warning_says_it_stays(tmp_path, monkeypatch):
    # another account's entry (its folder 0755) in a shared cache: the warning said "removed, rebuilding it" on every
    # run while the damaged entry stayed where it was
    import shutil

    store = VerifiedStore(tmp_path, "test cache")
    store.put("e", KEY, write_two)
    entry = tmp_path / "e"
    (entry / "ids.json").write_text("[]")
    real_rename, real_rmtree = os.rename, shutil.rmtree

    def rename(src, dst, *args, **kwargs):
        if str(src) == str(entry):
            raise PermissionError(13, "Permission denied", str(src))
        return real_rename(src, dst, *args, **kwargs)

    def rmtree(path, ignore_errors=False, *args, **kwargs):
        if str(path) != str(entry):  # the entry's files are another account's: left, as ignore_errors leaves them
            real_rmtree(path, ignore_errors, *args, **kwargs)

    monkeypatch.setattr(os, "rename", rename)
    monkeypatch.setattr(shutil, "rmtree", rmtree)
    with warns_saying(CacheWarning, str(entry / "ids.json"), "not used", f"cannot remove {entry} ",
                      f"one who can write {tmp_path}, may delete it") as record:
        assert store.read("e", KEY, load_ids) is None
    assert entry.is_dir() and "removed" not in str(record[0].message)


def test_another_accounts_parts_this_one_cannot_add_to_are_set_aside_so_the_entry_is_published(tmp_path, monkeypatch):
    # a build another account (umask 022) left half done in a group's cache folder: its parts' folder was read-only to
    # this account, which then kept the entry in memory on every run (encoding it again each time), never publishing
    store = VerifiedStore(tmp_path, "test cache")
    work = store.work_dir("e")
    work.mkdir()
    (work / "part.npy").write_bytes(b"theirs")
    real_access = os.access

    def access(path, mode, **kwargs):
        return str(path) != str(work) and real_access(path, mode, **kwargs)

    monkeypatch.setattr(os, "access", access)
    monkeypatch.setattr(verified_store, "_warned_unwritable", set())
    with warns_saying(CacheWarning, str(work), "another account's", "set aside"):
        assert store.work_folder("e") == work
    assert list(work.iterdir()) == []
    (aside,) = [p for p in tmp_path.iterdir() if p.name.endswith(".old")]
    assert (aside / "part.npy").read_bytes() == b"theirs" and verified_store._LEFT_BEHIND.fullmatch(aside.name)


@pytest.mark.parametrize("code", [errno.EACCES, errno.EPERM, errno.EROFS])
def test_a_work_folder_that_cannot_be_made_leaves_the_caller_to_keep_its_work_in_memory(tmp_path, monkeypatch, code):
    # a shared cache read-only to this account, or on a read-only file system: one warning, nothing raised
    store = VerifiedStore(tmp_path, "test cache")
    real_mkdir = os.mkdir

    def mkdir(path, *args, **kwargs):
        if str(path) == str(store.work_dir("e")):
            raise OSError(code, os.strerror(code), str(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)
    monkeypatch.setattr(verified_store, "_warned_unwritable", set())
    with warns_saying(CacheWarning, f"folder {tmp_path} cannot be written", "kept in memory only"):
        assert store.work_folder("e") is None


@pytest.mark.parametrize("kind", ["symlink", "file"])
def test_a_work_folder_that_is_a_link_or_a_file_is_set_aside_and_nothing_is_written_or_removed_through_it(
        tmp_path, kind):
    # a cache a group shares: a work folder linking to a folder elsewhere had the build's parts written there, and a
    # file there of a part's name without its checksum removed; a file in its place ended in NotADirectoryError
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "chunk-000000.npy").write_text("my data")
    store = VerifiedStore(tmp_path / "cache", "test cache")
    store.root.mkdir()
    work = store.work_dir("e")
    work.symlink_to(mine, target_is_directory=True) if kind == "symlink" else work.write_text("my notes")
    with warns_saying(UserWarning, str(work), f"not a work folder the kit made (a {kind})", "set aside"):
        assert store.work_folder("e") == work
    assert work.is_dir() and not work.is_symlink() and not part_ok(work / "chunk-000000.npy", 2)
    write_part(work / "chunk-000000.npy", np.ones((2, 3)))
    assert sorted(p.name for p in mine.iterdir()) == ["chunk-000000.npy"]
    assert (mine / "chunk-000000.npy").read_text() == "my data"
    (aside,) = store.root.glob("e.partial.set-aside-*")
    assert aside.is_symlink() if kind == "symlink" else aside.read_text() == "my notes"


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_a_file_of_the_users_at_an_entrys_name_is_set_aside_and_the_entry_published(tmp_path, kind):
    # was: "folder … cannot be written (NotADirectoryError …): kept in memory only", and computed again on every run
    store = VerifiedStore(tmp_path / "cache", "test cache")
    store.root.mkdir()
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes")
    entry_path = store.root / "e"
    entry_path.symlink_to(notes) if kind == "symlink" else entry_path.write_text("my notes")
    with warns_saying(UserWarning, str(entry_path), f"not an entry the kit made (a {kind})", "set aside"):
        entry = store.put("e", KEY, write_two)
    assert entry is not None and store.read("e", KEY, load_ids) == ["a", "b", "c", "d"]
    (aside,) = store.root.glob("e.set-aside-*")
    assert aside.read_text() == "my notes" and notes.read_text() == "my notes"


_PART_CHECK = """
import sys, warnings
from pathlib import Path
from instir.verified_store import part_ok
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    print(part_ok(Path(sys.argv[1]), 2), *[str(w.message) for w in caught], sep="\\n")
"""


def test_a_parts_checksum_file_that_is_a_fifo_is_no_checksum_not_a_read_that_blocks(tmp_path):
    # planted in a group's cache, it blocked the next build for ever (in a process of its own here, so that a
    # regression fails rather than hanging the suite)
    part = tmp_path / "chunk-000000.npy"
    write_part(part, np.ones((2, 3)))
    checksum = tmp_path / "chunk-000000.npy.sha256"
    checksum.unlink()
    os.mkfifo(checksum)
    checked = subprocess.run([sys.executable, "-c", _PART_CHECK, str(part)], capture_output=True, text=True,
                             timeout=20)
    assert checked.returncode == 0, checked.stderr
    assert checked.stdout.split("\n")[:2] == ["False", f"cache part {part} has no readable checksum file: computing "
                                                        "it again"]
