"""The one verified store behind the kit's caches of computed arrays: BM25 and Lucene indexes, embedding
and token matrices, corpus indexes, model descriptions, dequantised judges, a report's per-run scores. One
manifest format, one verification rule, one removal policy.

An entry is a folder ``<root>/<name>`` of files and a ``manifest.json`` that records the entry's key,
a random build id, what the caller describes (the encoder, the index settings), the caller's facts
(``meta``) and each file's size and SHA-256.

Writing (:meth:`VerifiedStore.put`). The files are written into a temporary folder beside the entry
(``.<name>.<pid>@<host>.<build>.tmp``), flushed, the manifest written last, and the folder renamed into
place: the last writer wins and a reader never sees a half-written entry. Work that takes hours is
resumable (:meth:`VerifiedStore.build`): its parts go to ``<name>.partial/`` (:meth:`VerifiedStore.work_dir`),
each ``.npy`` part with its SHA-256 beside it, written first (:func:`write_part`); a part is reused only when
it matches (:func:`part_ok`). One process at a time builds such an entry, holding its lock (``.<name>.lock``,
:func:`instir.atomic.exclusive`, released however the process ends): another one waits, then reads the
entry the first published instead of computing it again, and the next build after a crash resumes from
the parts. The work folder is removed, under the lock, once the entry is published (or found published).
A cache folder that cannot be written warns once and the caller keeps what it computed in memory, or
(``fallback=False``) raises the ``OSError`` naming the entry's file.

Verification (:meth:`VerifiedStore.read`), on every load: the manifest's format and key; each file's size,
and each ``.npy`` header against that size; the SHA-256 of the files, smallest first, up to
:data:`FULL_HASH_BYTES` (1 GiB) in all, beyond which only sizes and headers are checked (a same-size
overwrite of the data goes unnoticed there); then the caller's own checks (the ids are the corpus's, the
shape is the manifest's), raised as :class:`Damaged`. An entry replaced by another writer while it was
read is read again once.

Removal: an entry that fails any check is never used: one warning names the file and the problem, the
entry is renamed aside and deleted (one this account cannot remove, in another account's folder, stays, and the
warning says so), and the caller rebuilds it. What crashed writers left (temporaries of
a process of this host that no longer runs, or older than :data:`STALE_SECONDS`) goes at the next write.
Deleting any entry, or the whole root, is always safe.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import re
import shutil
import socket
import time
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from stat import S_ISREG
from typing import Any, TypeVar

import numpy as np

from instir import atomic
from instir.inputs import file_problem, read_head, read_json
from instir.stamps import utc_now

#: The manifest's format (the BM25 index cache's first one, which the store took over unchanged).
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
#: Files up to this many bytes in all (smallest first) are checked against their SHA-256 on every load.
FULL_HASH_BYTES = 1 << 30
#: A writer's temporary folder or an entry set aside older than this was left by a crashed process.
STALE_SECONDS = 6 * 3600
#: Who writes a temporary folder, as its name says: ``<pid>@<host>``.
WRITER = f"{os.getpid()}@{socket.gethostname()}"
PARTIAL = ".partial"

T = TypeVar("T")
_warned_unwritable: set[str] = set()


class CacheWarning(UserWarning):
    """A cache entry failed its check (removed and rebuilt), or a cache folder could not be written."""


class Damaged(Exception):
    """Raised by a caller's loader: ``file`` of an entry fails the caller's own check (``problem``)."""

    def __init__(self, file: Path, problem: str):
        super().__init__(f"{file} {problem}")
        self.file, self.problem = Path(file), problem


@dataclass(frozen=True)
class Entry:
    """A verified entry: its folder and its manifest (``info["meta"]`` holds the caller's facts)."""

    path: Path
    info: dict

    @property
    def meta(self) -> dict:
        return self.info.get("meta") or {}


class VerifiedStore:
    """Crash-safe, verified entries under ``root``; ``what`` names the cache in messages (``"embedding
    cache"``); ``category`` is the warning class of its messages."""

    def __init__(self, root: str | Path, what: str, *, category: type[Warning] = CacheWarning):
        self.root, self.what, self.category = Path(root), what, category

    def entry_dir(self, name: str) -> Path:
        """Folder of the entry ``name``."""
        return self.root / name

    def work_dir(self, name: str) -> Path:
        """Folder of the resumable parts of the entry ``name`` (kept across crashes until it is published)."""
        return self.root / f"{name}{PARTIAL}"

    # ------------------------------------------------------------ reading

    def read(self, name: str, key: str, load: Callable[[Entry], T], *,
             required: tuple[str, ...] = ()) -> T | None:
        """``load(entry)`` of the verified entry ``name`` (the manifest must name ``key`` and list the
        files of ``required``), or None when there is none or it fails a check: then a warning names the
        file and the entry is removed. ``load`` raises :class:`Damaged` for its own checks; an
        ``OSError``, ``ValueError``, ``KeyError`` or ``TypeError`` it raises counts as damage too."""
        entry = self.entry_dir(name)
        for _ in range(2):
            build = _build_id(entry)
            try:
                info = self._manifest(entry, key, required)
                if info is None:
                    return None
                self._verify(entry, info)
                try:
                    value = load(Entry(entry, info))
                except (Damaged, FileNotFoundError):
                    raise
                except (OSError, ValueError, KeyError, TypeError) as err:
                    raise Damaged(entry, f"cannot be loaded ({type(err).__name__}: {err})") from None
            except Damaged as damage:
                if _build_id(entry) != build:
                    continue  # another writer replaced the entry while it was read: read the new one
                self.discard(entry, damage)
                return None
            except FileNotFoundError:
                if _build_id(entry) != build:
                    continue
                return None
            if _build_id(entry) != build:
                continue
            return value
        return None

    def discard(self, entry: Path, damage: Damaged) -> None:
        """Warn that ``damage`` makes ``entry`` unusable, and remove the entry (one this account cannot remove, in
        another account's folder, is not used, and the warning says so)."""
        self.remove(entry.name)
        done = "removed, rebuilding it" if not entry.exists() else (
            f"not used, and left there: this account cannot remove {entry} (its owner, or one who can write "
            f"{entry.parent}, may delete it); computing it again")
        warnings.warn(f"{self.what}: {damage.file} {damage.problem}: {done}", self.category, stacklevel=4)

    @staticmethod
    def _manifest(entry: Path, key: str, required: tuple[str, ...]) -> dict | None:
        """The entry's manifest, None when there is no entry; raises :class:`Damaged`."""
        path = entry / MANIFEST
        problem = file_problem(path)  # a FIFO would block the read for ever
        if problem is not None and not problem.startswith("not found"):
            raise Damaged(path, problem)
        try:
            text = path.read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):
            if entry.is_dir() and any(entry.iterdir()):
                raise Damaged(path, "is missing") from None
            return None
        except (OSError, ValueError) as err:
            raise Damaged(path, f"is unreadable ({err})") from None
        try:
            info = json.loads(text)
            files = info["files"]
            ok = (info.get("key") == key and info.get("format") == FORMAT_VERSION and isinstance(files, dict)
                  and all(isinstance(f.get("bytes"), int) and isinstance(f.get("sha256"), str)
                          for f in files.values()))
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            ok = False
        if not ok:
            raise Damaged(path, "is not a complete manifest of this entry (truncated, zeroed or overwritten)")
        missing = [name for name in required if name not in files]
        if missing:
            raise Damaged(path, f"does not list {', '.join(missing)}")
        return info

    @staticmethod
    def _verify(entry: Path, info: dict) -> None:
        """Raise :class:`Damaged` for the first file that fails its manifest (see the module docstring)."""
        files = info["files"]
        for name, record in files.items():
            path = entry / name
            if not atomic.plain_name(name) or name == MANIFEST:
                raise Damaged(entry / MANIFEST, f"names a file outside its entry ({name!r})")
            try:
                found = path.stat()
            except OSError:
                raise Damaged(path, "is missing") from None
            if not S_ISREG(found.st_mode):  # reading a FIFO to hash it would block for ever
                raise Damaged(path, "is not a regular file")
            size = found.st_size
            if size != record["bytes"]:
                raise Damaged(path, f"has {size} bytes where the manifest says {record['bytes']} (truncated?)")
            if name.endswith(".npy"):
                try:
                    with path.open("rb") as fh:
                        expected = npy_bytes(fh)
                except (OSError, ValueError) as err:
                    raise Damaged(path, f"has no valid .npy header ({err})") from None
                if expected != size:
                    raise Damaged(path, f"has {size} bytes where its .npy header says {expected}")
        budget = FULL_HASH_BYTES
        for name, record in sorted(files.items(), key=lambda item: (item[1]["bytes"], item[0])):
            if record["bytes"] > budget:
                break
            budget -= record["bytes"]
            try:
                digest = atomic.file_sha256(entry / name)
            except OSError:
                raise Damaged(entry / name, "is unreadable") from None
            if digest != record["sha256"]:
                raise Damaged(entry / name, "does not match the checksum in its manifest (zeroed or overwritten)")

    # ------------------------------------------------------------ writing

    def put(self, name: str, key: str, write: Callable[[Path], Mapping[str, str] | None], *,
            description: Any = None, meta: Mapping[str, Any] | None = None, fallback: bool = True) -> Entry | None:
        """Publish the entry ``name`` whose files ``write(folder)`` makes in a temporary folder; ``write``
        may return the SHA-256 of files it hashed while writing (by name), the others are hashed here.
        A cache folder that cannot be written: a warning (once per folder) and None when ``fallback``, else
        the ``OSError`` naming the entry's file."""
        entry = self.entry_dir(name)
        build = uuid.uuid4().hex
        tmp = entry.with_name(f".{name}.{WRITER}.{build}.tmp")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self._sweep()
            tmp.mkdir()
            known = dict(write(tmp) or {})
            files = {}
            for path in sorted(tmp.iterdir()):
                with path.open("rb") as fh:
                    os.fsync(fh.fileno())
                digest = known.get(path.name) or atomic.file_sha256(path)
                files[path.name] = {"bytes": path.stat().st_size, "sha256": digest}
            info = {"format": FORMAT_VERSION, "key": key, "build": build, "description": description,
                    "meta": dict(meta or {}), "files": files, "created": utc_now()}
            atomic.write_text(tmp / MANIFEST, json.dumps(info, indent=2, sort_keys=True, default=str))
            atomic.fsync_folder(tmp)
            self._publish(tmp, entry)
        except OSError as err:
            shutil.rmtree(tmp, ignore_errors=True)
            if not fallback:
                if err.filename is not None and str(err.filename).startswith(str(tmp)):
                    raise atomic.named(err, str(entry) + str(err.filename)[len(str(tmp)):], err.filename) from err
                raise
            self._unwritable(err)
            return None
        return Entry(entry, info)

    def work_folder(self, name: str) -> Path | None:
        """The work folder of the entry ``name`` (:meth:`work_dir`), made when missing (another account's, which this
        one cannot write, and a symlink or a file in its place, are set aside with a warning); None, with the warning
        of a cache folder that cannot be written (once per folder), when it cannot be made there (a shared, read-only
        cache): the caller then keeps what it computes in memory."""
        work = self.work_dir(name)
        try:
            if work.is_symlink() or work.exists() and not work.is_dir():
                # not a folder the store made: a link to a folder elsewhere (its parts would be written, checked and
                # removed there) or a file; kept aside, never written into
                atomic.set_aside(work, f"{self.what}: {work} is not a work folder the kit made (a "
                                       f"{'symlink' if work.is_symlink() else 'file'})", "making its parts anew")
            work.mkdir(parents=True, exist_ok=True)
            if not os.access(work, os.W_OK | os.X_OK):
                if not os.access(self.root, os.W_OK | os.X_OK):
                    raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(work))
                # another account's parts (its umask 022) in a folder this one writes: set aside (and swept as
                # entries set aside are), so that this one publishes the entry instead of keeping it in memory
                os.rename(work, work.with_name(f".{work.name}.{uuid.uuid4().hex}.old"))
                warnings.warn(f"{self.what}: {work} holds parts this account cannot add to (another account's): "
                              "set aside, making them again", self.category, stacklevel=3)
                work.mkdir()
        except OSError as err:
            if err.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
                raise
            self._unwritable(err)
            return None
        return work

    def _unwritable(self, err: OSError) -> None:
        """Warn (once per folder) that the cache folder cannot be written, so what it would hold stays in memory."""
        if str(self.root) not in _warned_unwritable:
            _warned_unwritable.add(str(self.root))
            warnings.warn(f"{self.what}: folder {self.root} cannot be written ({type(err).__name__}: {err}): "
                          "what it would hold is kept in memory only", self.category, stacklevel=4)

    def build(self, name: str, key: str, load: Callable[[Entry], T], make: Callable[[Path], T], *,
              required: tuple[str, ...] = ()) -> T:
        """``load(entry)`` of the verified entry ``name`` (as :meth:`read`), else what ``make(work folder)``
        returns, made while holding the entry's lock: one process at a time builds it from its resumable parts,
        so another never removes parts in use, and one that waited loads what the first published instead of
        computing it again. ``make`` publishes with :meth:`put`; the work folder goes once the entry is there
        (a crashed builder's too), and stays when ``make`` raises, for the next build to resume."""
        work = self.work_dir(name)
        found = self.read(name, key, load, required=required)
        if found is not None and not work.exists():
            return found
        waiting = (f"{self.what}: another process is building {self.entry_dir(name)}; waiting for it to finish "
                   "(then its entry is read; if it stops first, the entry is made here, from any parts it kept)")
        with ExitStack() as held:
            try:
                self.root.mkdir(parents=True, exist_ok=True)
                held.enter_context(atomic.exclusive(self.root / f".{name}.lock", self.what, waiting,
                                                    category=self.category))
            except OSError:  # a cache folder that cannot be written (a shared, read-only one): no lock to take
                return found if found is not None else make(work)  # make's put warns and keeps it in memory
            found = self.read(name, key, load, required=required)  # published by the builder this one waited for
            if found is None:
                found = make(work)
            shutil.rmtree(work, ignore_errors=True)
            return found

    @contextmanager
    def scratch(self, name: str) -> Iterator[Path]:
        """A folder of this writer's own beside the entry ``name``, for files its build needs only while it
        runs (removed on exit; one a crashed writer left goes at a later write, as its temporaries do).
        Raises ``OSError`` when the cache folder cannot be written."""
        folder = self.entry_dir(name).with_name(f".{name}.{WRITER}.{uuid.uuid4().hex}.tmp")
        self.root.mkdir(parents=True, exist_ok=True)
        folder.mkdir()
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def remove(self, name: str) -> None:
        """Remove an entry: renamed aside first (one step for other readers), then deleted."""
        entry = self.entry_dir(name)
        trash = entry.with_name(f".{name}.{uuid.uuid4().hex}.old")
        try:
            os.rename(entry, trash)
        except OSError:
            shutil.rmtree(entry, ignore_errors=True)
        else:
            shutil.rmtree(trash, ignore_errors=True)

    def _sweep(self) -> None:
        """Remove what crashed writers of any entry left: temporaries of a process of this host that no
        longer runs, and anything older than :data:`STALE_SECONDS`; only names the store writes
        (:data:`_LEFT_BEHIND`), so a user's ``.thesis.old`` in a cache folder they chose stays."""
        cutoff = time.time() - STALE_SECONDS
        for left in self.root.glob(".*"):
            if not _LEFT_BEHIND.fullmatch(left.name):
                continue
            try:
                if _writer_gone(left.name) or left.stat().st_mtime < cutoff:
                    shutil.rmtree(left, ignore_errors=True)
            except OSError:
                pass

    def _publish(self, tmp: Path, entry: Path) -> None:
        """Rename the finished ``tmp`` to ``entry``; an entry already there is set aside and removed."""
        for attempt in range(3):
            try:
                os.rename(tmp, entry)
                return
            except OSError as err:
                if err.errno == errno.ENOTDIR and not os.path.isdir(entry):  # a file of the user's at its name
                    atomic.set_aside(entry, f"{self.what}: {entry} is not an entry the kit made (a "
                                            f"{'symlink' if entry.is_symlink() else 'file'})", "publishing the entry")
                    continue
                if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
            if attempt == 2:  # other writers keep replacing it: the entry that stopped this rename stands
                break
            self.remove(entry.name)  # always followed by a rename, so an entry is left either way
        shutil.rmtree(tmp, ignore_errors=True)


# ------------------------------------------------------------------ resumable parts


def write_part(path: Path, array: np.ndarray) -> None:
    """Write one part (a float32 ``.npy``) and its checksum ``<part>.sha256``, each atomically, the
    checksum first: a part on disk always has the checksum it was written with."""
    data = atomic.array_bytes(np.asarray(array, dtype=np.float32))
    atomic.write_text(_checksum_path(path), hashlib.sha256(data).hexdigest() + "\n")
    atomic.write_bytes(path, data)


def part_ok(path: Path, n_rows: int, *, what: str = "cache part") -> bool:
    """True when the part exists, matches its checksum and holds ``n_rows`` float32 rows. One that
    exists but fails is removed with a warning naming it; a missing part is simply not done yet."""
    if not path.is_file():
        return False
    problem = None
    try:
        data = path.read_bytes()
        checksum = read_head(_checksum_path(path), 1 << 10)  # a FIFO in its place would block a read for ever
        if checksum is None:
            raise ValueError("no regular file")
        expected = checksum.decode("ascii").strip()
    except (OSError, ValueError):
        problem = "has no readable checksum file"
    else:
        if hashlib.sha256(data).hexdigest() != expected:
            problem = "does not match its checksum (truncated, zeroed or overwritten)"
        else:
            shape, dtype = npy_header(io.BytesIO(data))
            if dtype != np.float32 or len(shape) != 2 or shape[0] != n_rows:
                problem = f"holds {shape} {dtype} where ({n_rows}, dim) float32 is expected"
    if problem is None:
        return True
    warnings.warn(f"{what} {path} {problem}: computing it again", CacheWarning, stacklevel=3)
    path.unlink(missing_ok=True)
    _checksum_path(path).unlink(missing_ok=True)
    return False


def _checksum_path(part: Path) -> Path:
    return part.with_name(part.name + ".sha256")


# ------------------------------------------------------------------ helpers


def npy_header(fh) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from a C-ordered ``.npy`` header (the file position is left at the data);
    raises ValueError when there is no valid header."""
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
    else:
        raise ValueError(f".npy format version {version} is not one numpy.save writes")
    if fortran:
        raise ValueError("Fortran-ordered array")
    return tuple(shape), dtype


def npy_bytes(fh) -> int:
    """The size in bytes a ``.npy`` file must have by its header (raises ValueError without one)."""
    shape, dtype = npy_header(fh)
    if dtype.hasobject:
        raise ValueError("object array")
    return fh.tell() + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize


def _build_id(entry: Path) -> str | None:
    manifest = read_json(entry / MANIFEST)
    return manifest.get("build") if isinstance(manifest, dict) else None


_TEMPORARY = re.compile(r"\.(?P<pid>\d+)@(?P<host>[^/]+)\.[0-9a-f]{32}\.tmp$")
#: The names of what a writer leaves beside the entries: its temporaries (:meth:`VerifiedStore.put`,
#: :meth:`VerifiedStore.scratch`) and entries set aside (:meth:`VerifiedStore.remove`).
_LEFT_BEHIND = re.compile(r"\..+\.(?:\d+@[^/]+\.[0-9a-f]{32}\.tmp|[0-9a-f]{32}\.old)")


def _writer_gone(name: str) -> bool:
    """Whether the temporary ``name`` was written by a process of this host that has ended (False when
    the name does not say, or names another host)."""
    named = _TEMPORARY.search(name)
    if named is None or named["host"] != socket.gethostname():
        return False
    try:
        os.kill(int(named["pid"]), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # it runs, under another user
    return False
