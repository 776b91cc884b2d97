"""The one SQLite store behind the kit's caches of paid or slow results (judgments, rerank scores), with one
set of rules: WAL mode with short write transactions under a busy timeout, so several processes share a file
and a killed run loses at most what was in flight; the schema checked on every opening; closed with its log
checkpointed into the file (when the last connection closes, SQLite removes the ``-wal`` and ``-shm``).

A store removes or replaces only what it can show it wrote. A file that shows no sign of being a store of its kind
(not an SQLite database, such as a TREC run named by mistake, or a database holding none of the store's tables, such
as the user's own) is refused in one line and left untouched, with nothing beside it moved.

What a store will not trust in a file of its kind is set aside beside it (renamed ``<name>.set-aside-<UTC time>``,
kept for inspection, never read or re-sealed), with a warning:

- a file holding anything but the tables its schema makes (a trigger, a view, another table or index, an
  earlier version's columns): a new store is started;
- a write-ahead log of another database: each store file carries a random id in its header
  (``PRAGMA user_version``), and every write transaction stamps it again, so every log the store writes holds
  its first page with that id. A ``-wal`` beside it whose frames do not (another database's, even one that
  rewrote only a table's page) is moved aside before SQLite could replay it over the store; the store's own
  log, left by a killed run, is replayed;
- a rollback ``-journal`` beside a store in WAL mode, which never writes one (SQLite would roll another database's
  pages into it).

A store named through a symlink has its logs checked, and its lock, beside the file the link leads to, where
SQLite keeps them (:attr:`SQLiteStore.file`).

A damaged file is :class:`CorruptStoreError` naming it and the command that moves it aside; a full disk or an
I/O error an ``OSError`` naming it (:func:`instir.atomic.sqlite_errors`); never a bare ``sqlite3`` error.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import shlex
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from instir import atomic
from instir.errors import UsageError, UserError
from instir.inputs import file_problem

#: The first bytes of every SQLite database file.
_SQLITE_MAGIC = b"SQLite format 3\x00"
#: SQLite's result codes for a file that is not a database or is damaged.
_CORRUPT = frozenset({"SQLITE_NOTADB", "SQLITE_CORRUPT"})


class CorruptStoreError(UserError, ValueError):
    """A store file is not a readable SQLite database. The message names the file and the command that moves
    it aside (the next run then starts a new store; the damaged file is kept and nothing else is touched)."""

    def __init__(self, path: Path, what: str, detail: str):
        self.path = path
        moved = path.with_name(path.name + ".corrupt")
        super().__init__(f"{path}: {what} is damaged ({detail}); move it aside to start a new one "
                         f"(what it holds will be made again): mv {shlex.quote(str(path))} {shlex.quote(str(moved))}")


class SQLiteStore:
    """One store file ``path`` of the tables ``schema`` makes (``what`` names it in messages, e.g. ``"judgment
    cache"``); ``functions`` are SQL functions (name, arity, function) registered on its connection. One
    connection for the store's life, shared by threads under :attr:`lock`; ``busy_timeout_s`` is how long a
    write waits for another process holding the lock."""

    def __init__(self, path: str | Path, schema: str, what: str, *, busy_timeout_s: float = 60.0,
                 functions: Sequence[tuple[str, int, Callable]] = ()):
        self.path, self.schema, self.what = Path(path), schema, what
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:  # a folder this account cannot make (another's, read-only): named, in one line
            if not isinstance(err, PermissionError) and err.errno != errno.EROFS:
                raise
            raise UserError(f"cannot open the {what} {self.path}: its folder cannot be made ({err.strerror}: "
                            f"{err.filename}); name a file in a folder this account can write") from err
        self.lock = threading.Lock()
        self._functions = functions
        self._expected = _made_by(schema)
        _refuse_other_file(self.path, what, self._expected)  # first: beside another file, nothing is moved
        _refuse_unwritable(self.file, what)
        _set_aside_foreign_log(self.file, what)
        _create(self.path, what)
        self._connect(busy_timeout_s)
        # Switching to WAL while another process writes fails at once (SQLite calls no busy
        # handler there), as when two processes open a new store together: wait as a write would.
        deadline = time.monotonic() + busy_timeout_s
        while True:
            try:
                with self.readable():
                    foreign = _foreign_schema(self.db, self._expected)
                    if foreign is not None:
                        self._closer()
                        atomic.set_aside(self.path, f"{what} {self.path} {foreign}", "starting a new one",
                                         suffixes=("", "-wal", "-shm"))
                        self._connect(busy_timeout_s)
                        continue
                    if self.db.execute("PRAGMA user_version").fetchone() == (0,):
                        # the file's id, which the log check reads: a new file gets it in its own header, before
                        # it has a log (an earlier store gets it through its log, and is checked once checkpointed)
                        with self.transaction():
                            pass
                    self.db.execute("PRAGMA journal_mode=WAL")
                    self.db.execute("PRAGMA synchronous=NORMAL")  # with WAL: a killed process loses nothing committed
                    self.db.executescript(schema)
                break
            except (CorruptStoreError, OSError):
                self._closer.detach()
                self.db.close()
                raise
            except sqlite3.OperationalError as err:  # e.g. a read-only file
                if getattr(err, "sqlite_errorname", "") == "SQLITE_BUSY" and time.monotonic() < deadline:
                    time.sleep(0.02)
                    continue
                self._closer.detach()
                self.db.close()
                raise UserError(f"cannot open the {what} {self.path}: {err}") from err

    def _connect(self, busy_timeout_s: float) -> None:
        try:
            self.db = sqlite3.connect(self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
        except sqlite3.OperationalError as err:  # cannot open: a folder, no permission
            raise UserError(f"cannot open the {self.what} {self.path}: {err}") from err
        for name, arity, function in self._functions:
            self.db.create_function(name, arity, function, deterministic=True)
        # Closed (and its log checkpointed) when close() is called, or when this object is
        # collected or the interpreter exits, whichever comes first.
        self._closer = weakref.finalize(self, _checkpoint_and_close, self.db, self.lock)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (``BEGIN IMMEDIATE``: it takes the write lock first, waiting up to the busy
        timeout), rolled back when anything in it fails; the caller holds :attr:`lock` and :meth:`readable`."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            # The store's id (a new one for a new file), read and written under the write lock: writing it puts
            # the first page into this transaction, so the log holds the id that :func:`_set_aside_foreign_log`
            # looks for.
            found = self.db.execute("PRAGMA user_version").fetchone()[0]
            self.db.execute(f"PRAGMA user_version = {found or secrets.randbits(31) or 1}")
            yield self.db
        except BaseException:
            if self.db.in_transaction:
                try:
                    self.db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass  # SQLite has already rolled back (e.g. a full disk); the first error says why
            raise
        self.db.execute("COMMIT")

    @contextlib.contextmanager
    def readable(self) -> Iterator[None]:
        """Turn SQLite's "not a database" / "malformed" errors into :class:`CorruptStoreError`, "database or
        disk is full" and disk I/O errors into an ``OSError`` naming the file; a busy database passes through."""
        with atomic.sqlite_errors(self.path):
            try:
                yield
            except sqlite3.DatabaseError as err:
                if getattr(err, "sqlite_errorname", None) in _CORRUPT:
                    raise CorruptStoreError(self.path, self.what, str(err)) from None
                raise

    @property
    def file(self) -> Path:
        """The file :attr:`path` names, a symlink followed: SQLite keeps its logs beside it, and its ``-lock`` lies
        there, so that stores opened through two links to one file check the same logs and share one lock."""
        return Path(os.path.realpath(self.path))

    def exclusive(self) -> contextlib.AbstractContextManager[None]:
        """Hold the store's ``-lock`` file (:func:`instir.atomic.exclusive`) for a whole piece of work, such as paid
        judgments: another process wanting it waits, with one warning, and then finds this one's results stored
        instead of paying for them again."""
        return atomic.exclusive(Path(f"{self.file}-lock"), self.what,
                                f"{self.what} {self.path}: another process is working with it; waiting for it to "
                                "finish (its results are then read, not made again)")

    def close(self) -> None:
        """Checkpoint the write-ahead log into the file and close the connection (twice: nothing)."""
        self._closer()


def _checkpoint_and_close(db: sqlite3.Connection, lock: threading.Lock) -> None:
    """Move the write-ahead log into the database file (``wal_checkpoint(TRUNCATE)``) and close
    ``db``. A checkpoint that cannot run (another process reading, a damaged file) is skipped:
    the log stays and the next opening replays it, so nothing is lost either way."""
    with lock:
        try:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except sqlite3.Error:
            pass
        finally:
            db.close()


def _made_by(schema: str) -> list[tuple[str, str, str]]:
    """What SQLite records for ``schema``: (type, name, SQL) of each object, sorted."""
    with contextlib.closing(sqlite3.connect(":memory:")) as db:
        db.executescript(schema)
        return db.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name").fetchall()


def _foreign_schema(db: sqlite3.Connection, expected: list[tuple[str, str, str]]) -> str | None:
    """What in ``db``'s schema its store did not make (None: nothing, or an empty file)."""
    objects = db.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name").fetchall()
    if not objects or objects == expected:
        return None
    ours = {(kind, name) for kind, name, _ in expected}
    others = [f"{kind} {name!r}" for kind, name, _ in objects if (kind, name) not in ours]
    if others:
        return f"holds what the kit does not make ({', '.join(others[:5])})"
    return "has tables other than the kit's (an earlier version's, or edited)"


def _refuse_other_file(path: Path, what: str, expected: list[tuple[str, str, str]]) -> None:
    """A :class:`~instir.errors.UsageError` naming ``path`` when it shows no sign of being a store of the tables
    ``expected`` lists: neither empty nor an SQLite database, or a database (read as it is on disk, no log replayed,
    nothing written) holding objects but none of those tables. A store of its kind that was edited, or is damaged,
    is the opening's to find (set aside, or :class:`CorruptStoreError`); a missing file, a folder or a FIFO its
    other checks'."""
    if file_problem(path) is not None:
        return
    try:
        with path.open("rb") as file:
            header = file.read(100)
    except OSError:  # gone meanwhile, or unreadable: the opening says so
        return
    if not header:  # empty: SQLite starts a store in it, as in a new file
        return
    hint = f"name a new file or an instir {what}"
    if not header.startswith(_SQLITE_MAGIC):
        raise UsageError(f"{path} is not a {what} (not an SQLite database): {hint}")
    try:
        with contextlib.closing(sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro&immutable=1", uri=True)) as db:
            objects = db.execute("SELECT type, name FROM sqlite_master").fetchall()
    except sqlite3.Error:  # damaged: the opening names it
        return
    tables = sorted(name for kind, name, _ in expected if kind == "table")
    if objects and not any(("table", name) in objects for name in tables):
        held = ", ".join(f"{kind} {name!r}" for kind, name in sorted(objects)[:5])
        raise UsageError(f"{path} is not a {what} (an SQLite database without its table "
                         f"{', '.join(map(repr, tables))}; it holds {held}): {hint}")


def _refuse_unwritable(path: Path, what: str) -> None:
    """A :class:`~instir.errors.UserError` naming the first of the store's files (the file, its ``-wal`` and ``-shm``)
    that this account cannot write, such as another account's store in a shared folder: refused when it is opened,
    before anything is computed (or paid for) that it could not keep."""
    for file in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        if file_problem(file) is None and not os.access(file, os.W_OK):
            raise UserError(f"cannot open the {what} {path}: {file} cannot be written by this account (another "
                            "account's, or read-only): make it writable for it (chmod g+w), or name a file of its own")


def _create(path: Path, what: str) -> None:
    """Create a missing store file with the mode a plain ``open`` gives (``0o666`` less the umask), not SQLite's
    ``0644``: in a folder a group shares (umask 002), each member can write the store, and its ``-wal`` and ``-shm``,
    which SQLite gives the database file's mode."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    except FileExistsError:
        pass
    except OSError as err:  # a folder, no permission: named in one line, as SQLite's own refusal is
        raise UserError(f"cannot open the {what} {path}: {err.strerror or err}") from err


def _header_id(page: bytes) -> int | None:
    """The id (``user_version``) in a database header (the first page), None when it is not one."""
    return int.from_bytes(page[60:64], "big") if page[:16] == _SQLITE_MAGIC and len(page) >= 100 else None


def _set_aside_foreign_log(path: Path, what: str) -> None:
    """Set aside the logs beside ``path`` that are not its own, before SQLite could replay them over it: a
    ``-journal`` beside a store in WAL mode, which never writes one (SQLite would roll another database's pages
    into it), and the ``-wal`` (with the ``-shm``) unless its frames of the first page hold a header with the
    database file's id, and only it: every transaction of the store writes the first page
    (:meth:`SQLiteStore.transaction`), so a log without it is another database's. A FIFO or a device in
    their place is refused (reading it would block or never end)."""
    for file in (path, Path(f"{path}-wal"), Path(f"{path}-journal")):
        problem = file_problem(file)
        if problem not in (None, "not found"):
            raise UserError(f"cannot open the {what} {path}: {file} {problem}")
    try:
        with path.open("rb") as db_file:
            header = db_file.read(100)
    except OSError:  # no file yet: SQLite makes it
        return
    own = _header_id(header)
    if own is not None and header[18:20] == b"\x02\x02" and Path(f"{path}-journal").exists():
        atomic.set_aside(path, f"{what} {path} has a rollback journal beside it, which a store in WAL mode never "
                               "writes (another database's)", "its own content is kept", suffixes=("-journal",))
    try:
        wal = Path(f"{path}-wal").read_bytes() if own else b""
    except OSError:  # none, or the last connection of another process removed it meanwhile
        wal = b""
    if not own or len(wal) < 32:  # no id yet (a store of an earlier version, before its first checkpoint)
        return
    page_size, salts, frame = int.from_bytes(wal[8:12], "big"), wal[16:24], 32
    ids = set()  # the ids in the log's frames of the first page
    while page_size and frame + 24 + page_size <= len(wal):
        header = wal[frame:frame + 24]
        if header[8:16] != salts:
            break  # the frames after this one are an earlier log's, which SQLite ignores
        if int.from_bytes(header[:4], "big") == 1:
            ids.add(_header_id(wal[frame + 24:frame + 24 + page_size]))
        frame += 24 + page_size
    if frame > 32 and ids != {own}:
        atomic.set_aside(path, f"{what} {path} has a write-ahead log beside it that is not its own (another "
                               "database's)", "its own content is kept", suffixes=("-wal", "-shm"))
