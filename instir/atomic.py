"""Atomic file writes: the content goes to a temporary file in the same folder, is flushed to
disk, then renamed over the target, so a crash leaves either the old file or the new one —
never a half-written file that looks complete (runs, embedding chunks, manifests).

Sets of files (:func:`write_files`, finished by :func:`settle` after a crash), large files
(:func:`stream`) and the errors are described in docs/layout.md, "How the kit writes files".
Besides: files get the mode a plain ``open(path, "w")`` would give them (``0o666`` less the
umask), not the ``0600`` of a bare :func:`tempfile.mkstemp`, so a team can share a reports
folder; a writer holds a lock on its journal while it renames, so a reader never finishes the
work of a writer that is still alive; :func:`stream` reserves the full size first, so a full
disk is an ``OSError``, never the ``SIGBUS`` of a memory-mapped file.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import io
import json
import os
import tempfile
import warnings
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from instir.errors import UserError
from instir.inputs import file_problem

if TYPE_CHECKING:
    import numpy as np

#: bytes handed to one ``write(2)``
BLOCK = 1 << 20

#: the name a set's journal starts with (``.instir-set-<random>.json``, in the set's folder)
JOURNAL_PREFIX = ".instir-set-"


def _umask() -> int:
    """The process umask, read without changing it where Linux reports it; elsewhere by
    setting and restoring it (the only portable way)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode a newly created file gets from ``open``: ``0o666`` less the umask."""
    return 0o666 & ~_umask()


#: errno values of a device that cannot take a write: no space, no quota left, an I/O error, a
#: file-size limit, a read-only file system
DEVICE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG, errno.EROFS})


def device_error(err: BaseException) -> bool:
    """Whether ``err`` is an ``OSError`` of :data:`DEVICE_ERRNOS` (the disk, not the program)."""
    return isinstance(err, OSError) and err.errno in DEVICE_ERRNOS


def named(err: OSError, path: str | Path, temporary: str | Path | None = None) -> OSError:
    """``err`` naming ``path``: the same error when it already names another file, else an
    ``OSError`` of the same errno (and subclass) whose ``filename`` is ``path`` — for a failed
    ``write(2)``, which names no file, and for one that names the temporary file the user
    never asked for."""
    if err.filename is not None and (temporary is None or str(err.filename) != str(temporary)):
        return err
    if err.errno is None:
        return err
    return OSError(err.errno, err.strerror or os.strerror(err.errno), str(path))


def sqlite_device_error(err: BaseException | None, path: str | Path) -> OSError | None:
    """For SQLite's ``database or disk is full`` and ``disk I/O error`` (an ``sqlite3`` error,
    which names no file): the ``OSError`` (``ENOSPC``, ``EIO``) naming the database ``path``,
    to raise instead; None for any other error."""
    name = str(getattr(err, "sqlite_errorname", "") or "")
    if name == "SQLITE_FULL":
        return OSError(errno.ENOSPC, f"{os.strerror(errno.ENOSPC)} (SQLite: {err})", str(path))
    if name.startswith("SQLITE_IOERR"):
        return OSError(errno.EIO, f"{os.strerror(errno.EIO)} (SQLite: {err})", str(path))
    return None


@contextmanager
def sqlite_errors(path: str | Path) -> Iterator[None]:
    """Raise :func:`sqlite_device_error`'s ``OSError`` naming ``path`` for a full disk or an I/O
    error inside the block; other errors pass unchanged."""
    try:
        yield
    except Exception as err:
        device = sqlite_device_error(err if hasattr(err, "sqlite_errorname") else err.__cause__, path)
        if device is not None:
            raise device from err
        raise


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """Write every byte of ``data`` to the file descriptor ``fd`` (``os.write`` may write less)."""
    view = memoryview(data).cast("B")
    while view:
        view = view[os.write(fd, view[:BLOCK]):]


def fsync_folder(folder: str | Path) -> None:
    """Flush a folder's entries (the renames into it) to disk, where the platform allows."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # a file system that cannot sync a folder: the renames are still made
    finally:
        os.close(fd)


def reserve(fd: int, size: int, path: str | Path) -> None:
    """Allocate ``size`` bytes of the file behind ``fd`` before it is written, so a full disk
    fails now with an ``OSError`` naming ``path``; a file system that cannot preallocate is
    skipped (its writes still fail cleanly)."""
    if size <= 0 or not hasattr(os, "posix_fallocate"):
        return
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as err:
        if err.errno in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
            return
        raise named(err, path) from err


def _new_temporary(path: Path) -> tuple[int, Path]:
    """An open, empty temporary file beside ``path`` (mode from :func:`file_mode`)."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as err:  # it names the temporary it tried to make
        raise named(err, path, err.filename) from err
    try:
        os.fchmod(fd, file_mode())
    except BaseException:
        os.close(fd)
        Path(tmp).unlink(missing_ok=True)
        raise
    return fd, Path(tmp)


@contextmanager
def _removed_on_failure(tmp: Path, path: Path) -> Iterator[None]:
    """Remove the temporary ``tmp`` when the block fails; an ``OSError`` is raised naming ``path``."""
    try:
        yield
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise named(err, path, tmp) from err
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _written_temporary(path: Path, data: bytes) -> Path:
    """A temporary beside ``path`` holding ``data``, flushed to disk; removed on any failure."""
    fd, tmp = _new_temporary(path)
    with _removed_on_failure(tmp, path):
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
    return tmp


class Stream:
    """The writer :func:`stream` yields: :meth:`write` appends bytes; ``written`` counts them and
    :meth:`hexdigest` is their SHA-256 (so a large file needs no second read to be checksummed)."""

    def __init__(self, fd: int):
        self._fd = fd
        self._hash = hashlib.sha256()
        self.written = 0

    def write(self, data) -> None:
        view = memoryview(data).cast("B")
        write_all(self._fd, view)
        self._hash.update(view)
        self.written += len(view)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


@contextmanager
def stream(path: str | Path, size: int | None = None) -> Iterator[Stream]:
    """Write ``path`` piece by piece through a :class:`Stream`, replacing it atomically on a
    clean exit. ``size`` (the final size, when known) is reserved first (:func:`reserve`), so a
    disk without room fails before the copy starts; it must then match what was written. Any
    failure removes the temporary file; an ``OSError`` names ``path``."""
    path = Path(path)
    fd, tmp = _new_temporary(path)
    with _removed_on_failure(tmp, path):
        try:
            if size:
                reserve(fd, size, path)
            out = Stream(fd)
            yield out
            if size is not None and out.written != size:
                raise ValueError(f"{path}: {out.written} bytes written where {size} were announced")
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)


def write_bytes(path: str | Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically."""
    path = Path(path)
    tmp = _written_temporary(path, data)
    with _removed_on_failure(tmp, path):
        os.replace(tmp, path)


def write_text(path: str | Path, text: str) -> None:
    """Replace ``path`` with UTF-8 ``text`` atomically."""
    write_bytes(path, text.encode("utf-8"))


def array_bytes(array: np.ndarray) -> bytes:
    """``array`` as the bytes of a ``.npy`` file."""
    import numpy as np  # numpy only where arrays are written: every command imports this module at start

    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def npy_prefix(dtype: str | np.dtype, shape: tuple[int, ...]) -> bytes:
    """The bytes ``np.save`` writes before the data of a C-ordered array of ``dtype`` and ``shape``: a ``.npy``
    file can then be streamed (:func:`stream`) without the array in memory."""
    import numpy as np

    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
                                                  "fortran_order": False, "shape": tuple(shape)})
    return header.getvalue()


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes, read in blocks (checksums of downloads, caches, runs)."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def frame_bytes(path: str | Path, frame) -> bytes:
    """A pandas DataFrame as the bytes of a CSV or Parquet file, by ``path``'s suffix, without
    its index (the tables stages hand each other)."""
    path = Path(path)
    if path.suffix == ".csv":
        return frame.to_csv(index=False).encode("utf-8")
    if path.suffix == ".parquet":
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        return buffer.getvalue()
    raise ValueError(f"{path}: write_frame writes .csv or .parquet files")


def write_frame(path: str | Path, frame) -> None:
    """Write a pandas DataFrame atomically, as CSV or Parquet by the file's suffix, without its
    index (the tables stages hand each other)."""
    write_bytes(path, frame_bytes(path, frame))


def write_frames(frames: Mapping[str | Path, object], *, remove: Iterable[str | Path] = ()) -> list[Path]:
    """Write DataFrames that belong together as one set (:func:`write_files`), each as CSV or
    Parquet by its suffix."""
    return write_files({path: frame_bytes(path, frame) for path, frame in frames.items()}, remove=remove)


# ------------------------------------------------------------------ sets of files


def write_files(files: Mapping[str | Path, bytes | str], *, remove: Iterable[str | Path] = ()) -> list[Path]:
    """Replace ``files`` (path → bytes, or text written as UTF-8), all in one folder, as one set:
    a reader sees the old set or the new one, never a mix. The files of ``remove`` (of the same
    folder) belong to the old set only and are removed with the renames (a comparison table a
    run with one system no longer has). Every file is written and flushed before the first
    rename, so a full disk fails with nothing replaced and no temporary left; the error names
    the file. Returns the written paths."""
    items = [(Path(p), data.encode("utf-8") if isinstance(data, str) else bytes(data)) for p, data in files.items()]
    removed = [Path(p) for p in remove]
    if not items:
        raise ValueError("write_files needs at least one file")
    folders = {p.parent for p, _ in items} | {p.parent for p in removed}
    if len(folders) != 1:
        raise ValueError(f"write_files writes one folder's files, got {sorted(map(str, folders))}")
    names = [p.name for p, _ in items] + [p.name for p in removed]
    if len(set(names)) != len(names):
        raise ValueError(f"write_files got a file twice: {names}")
    folder = folders.pop()
    settle(folder)
    temporaries: list[Path] = []
    try:
        for path, data in items:
            temporaries.append(_written_temporary(path, data))
        plan = {"replace": [[tmp.name, path.name] for tmp, (path, _) in zip(temporaries, items)],
                "remove": [p.name for p in removed]}
        fd, journal = _write_journal(folder, plan)
    except BaseException:
        for tmp in temporaries:
            tmp.unlink(missing_ok=True)
        raise
    try:  # from here on the new set is complete on disk: an interrupted commit is finished by settle()
        _apply(folder, plan)
        journal.unlink(missing_ok=True)
        fsync_folder(folder)
    finally:
        os.close(fd)  # releases the journal's lock
    return [path for path, _ in items]


def _write_journal(folder: Path, plan: dict) -> tuple[int, Path]:
    """Write the set's journal (flushed, renamed into place, folder flushed) and return it open
    and locked, with its path."""
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=JOURNAL_PREFIX, suffix=".tmp")
    except OSError as err:  # it names the journal it tried to make
        raise named(err, folder, err.filename) from err
    tmp = Path(name)
    journal = tmp.with_suffix(".json")
    try:
        os.fchmod(fd, file_mode())  # not mkstemp's 0600: another account of a group's folder can finish the set
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            write_all(fd, json.dumps(plan).encode("utf-8"))
            os.fsync(fd)
            os.replace(tmp, journal)
        except OSError as err:
            raise named(err, folder, tmp) from err
        fsync_folder(folder)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        journal.unlink(missing_ok=True)
        raise
    return fd, journal


#: the descriptors of the locks this process holds (:func:`exclusive`'s, a report folder's), each added as it is
#: opened and removed before it is closed: a forked child closes them (:func:`_unheld`)
HELD_LOCKS: set[int] = set()


def _unheld() -> None:
    """In a child just forked (a worker of a pool): close the parent's lock descriptors, so a lock is the holder's
    alone and goes with it, even where its workers outlive it (a ``flock`` lasts while any copy stays open)."""
    for fd in list(HELD_LOCKS):
        with contextlib.suppress(OSError):
            os.close(fd)
    HELD_LOCKS.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_unheld)


def close_lock(fd: int) -> None:
    """Close a lock's descriptor (letting the lock go, when it is its last copy), no longer listed in
    :data:`HELD_LOCKS`."""
    HELD_LOCKS.discard(fd)
    os.close(fd)


@contextmanager
def exclusive(path: Path, what: str, waiting: str, *, category: type[Warning] = UserWarning) -> Iterator[None]:
    """Hold the lock file ``path`` (an advisory ``flock``) for a whole piece of work on ``what``: another process or
    thread wanting it waits, warning ``waiting`` once, and is let in when the holder ends, however it ends (worker
    processes it forked, which may outlive a killed holder, do not keep it). The holder removes the file as it lets
    go (so none is left behind), which is why a lock is held only on the file found at ``path``. A ``path`` that is
    not a regular file is a :class:`~instir.errors.UserError` naming it."""
    problem = file_problem(path)
    if problem not in (None, "not found"):
        raise UserError(f"{path} {problem}: the kit keeps the lock of the {what}'s writers there; remove it")
    warned = False
    while True:
        try:  # the mode a plain open gives: in a group's folder (umask 002), each member can open it
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NONBLOCK, 0o666)
        except PermissionError as refused:  # another account's lock file (0644): a lock holds on a file opened to read
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            except OSError:
                raise refused from None
        HELD_LOCKS.add(fd)  # a worker forked from now on (by another thread too) has no copy of it
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not warned:
                warnings.warn(waiting, category, stacklevel=4)
                warned = True
            fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            found, held = os.stat(path), os.fstat(fd)
            if (found.st_dev, found.st_ino) == (held.st_dev, held.st_ino):
                break
        except FileNotFoundError:
            pass
        close_lock(fd)  # the holder removed this file as it let go: take the one at ``path`` now
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)
        close_lock(fd)  # releases the lock


#: what names a file the kit kept aside (:func:`aside_path`)
ASIDE = ".set-aside-"


def aside_path(path: Path) -> Path:
    """``<name>.set-aside-<UTC time>`` beside ``path``: where the kit keeps a file it cannot show it wrote."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")  # the name cut so the new one fits in 255 bytes
    return path.with_name(f"{path.name.encode()[:200].decode(errors='ignore')}{ASIDE}{stamp}")


def set_aside(path: Path, why: str, then: str, suffixes: tuple[str, ...] = ("",)) -> Path:
    """Rename ``path``'s files of ``suffixes`` (a store's logs, a run's sidecar) to :func:`aside_path`, with a
    warning saying why and what happens ``then``: what the kit cannot show it wrote is kept, never replaced."""
    aside = aside_path(path)
    for suffix in suffixes:
        with contextlib.suppress(FileNotFoundError):
            Path(f"{path}{suffix}").rename(f"{aside}{suffix}")
    warnings.warn(f"{why}: set aside as {aside}{suffixes[0]} (kept, never read); {then}", stacklevel=4)
    return aside


def set_aside_other(path: Path, what: str) -> bool:
    """Set aside (:func:`set_aside`) what is at ``path`` where the kit keeps its own ``what``, when it cannot be a file
    the kit wrote: a folder, a FIFO, a device, or a symlink (the kit writes by rename, never through a link). Returns
    whether it did."""
    found = f"a symlink to {os.readlink(path)}" if os.path.islink(path) else file_problem(path)
    if found in (None, "not found"):
        return False
    set_aside(path, f"{path} is not {what} ({found})", f"the kit writes {what} there")
    return True


@contextmanager
def keeping(paths: Iterable[Path], why: str) -> Iterator[None]:
    """Run a block keeping each of ``paths`` that it replaces or removes at :func:`aside_path`, with a warning
    saying ``why``: a hard link made before, dropped after where the name still holds the same file (where no
    link can be made, the file is set aside before). What the kit cannot show it wrote is never lost to a
    rewrite, nor moved when the rewrite leaves it alone."""
    kept = {}
    for path in paths:
        try:
            os.link(path, aside := aside_path(path), follow_symlinks=False)
            kept[path] = aside
        except OSError:
            set_aside(path, why, "the kit writes its own")
    try:
        yield
    finally:
        for path, aside in kept.items():
            try:
                same = os.path.samestat(os.lstat(path), os.lstat(aside))
            except OSError:
                same = False
            if same:
                aside.unlink(missing_ok=True)
            else:
                warnings.warn(f"{why}: kept as {aside} (never read); the kit replaced or removed it", stacklevel=3)


def plain_name(name: object) -> bool:
    """Whether ``name`` is one file name in a folder (no path, not ``.`` or ``..``): what a plan or a manifest
    written in a folder may name."""
    return isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\\" not in name


def _apply(folder: Path, plan: dict) -> None:
    """Make a journal's renames and removals (each may already be done)."""
    for tmp, name in plan["replace"]:
        try:
            os.replace(folder / tmp, folder / name)
        except FileNotFoundError:
            if (folder / tmp).exists():
                raise
        except OSError as err:
            raise named(err, folder / name, folder / tmp) from err
    for name in plan["remove"]:
        (folder / name).unlink(missing_ok=True)
    fsync_folder(folder)


def settle(folder: str | Path) -> int:
    """Finish every set of files a killed :func:`write_files` left half-renamed in ``folder``
    (its journal is there and no live writer holds it) and return how many. Readers of a set
    call this before reading; it never raises for a folder it cannot fix (a read-only copy):
    it warns that the files there may disagree."""
    folder = Path(folder)
    try:
        journals = sorted(folder.glob(f"{JOURNAL_PREFIX}*.json"))
    except OSError:
        return 0
    finished = 0
    for journal in journals:
        try:  # a FIFO would block the opening for ever, a folder fail the read; neither is a journal the kit wrote
            if set_aside_other(journal, "the journal of an interrupted write"):
                continue
        except OSError as err:
            warnings.warn(f"{journal} is not a journal of the kit's and cannot be set aside ({err.strerror}): the "
                          f"files in {folder} may disagree", stacklevel=2)
            continue
        try:
            fd = os.open(journal, os.O_RDONLY | os.O_NONBLOCK)
        except PermissionError as err:  # another account's journal (an earlier kit's 0600)
            warnings.warn(f"{journal}: the journal of an interrupted write cannot be read by this account "
                          f"({err.strerror}): the files in {folder} may disagree", stacklevel=2)
            continue
        except OSError:
            continue  # finished meanwhile
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # its writer is alive and finishes it
            try:
                if os.stat(journal).st_ino != os.fstat(fd).st_ino:
                    continue
                with os.fdopen(os.dup(fd), "rb") as fh:
                    plan = json.loads(fh.read().decode("utf-8"))
                pairs = plan["replace"]
                if not (all(len(p) == 2 and all(map(plain_name, p)) for p in pairs)
                        and all(map(plain_name, plan["remove"]))):
                    raise ValueError("names outside its folder")
            except FileNotFoundError:
                continue
            except (ValueError, KeyError, TypeError) as err:
                warnings.warn(f"{journal}: unreadable journal of an interrupted write ({err}); removed, the files "
                              f"in {folder} may disagree", stacklevel=2)
                journal.unlink(missing_ok=True)
                continue
            try:
                _apply(folder, plan)
                journal.unlink(missing_ok=True)
                fsync_folder(folder)
            except OSError as err:
                warnings.warn(f"{folder}: an interrupted write of {', '.join(n for _, n in pairs)} cannot be "
                              f"finished ({err.strerror or err}): these files may disagree", stacklevel=2)
                continue
            finished += 1
        finally:
            os.close(fd)
    return finished
