"""A resumable judgment cache: SQLite in WAL mode, one row per judged text.

Rows are keyed by backend name + model + rubric version + SHA-256 of the exact judged text (the
rendered prompt, :func:`instir.judge.types.judged_text`). :class:`CachedJudge` looks up a whole
batch at once, sends only what is missing to its backend, and writes every judgment as soon as it
is made, so a run killed at any point loses at most the judgments in flight and never pays twice
for a stored one. Failed judgments are stored as failures (with their error, never as a score)
and retried on the next run. Several processes may share one cache file: writes are short
transactions and a busy timeout makes them wait for each other. Two processes judging the *same*
missing item at the same moment may both pay for it; the first answer stored is kept.

Every row carries a checksum (:func:`row_checksum`: BLAKE2b over its key and every stored field
of the judgment, as SQLite holds them), written in the same transaction as the row. A row whose
checksum does not match (a value edited by hand, a damaged page that still reads) is never
served: one warning per lookup counts such rows and names the file, and each is judged again and
replaced. A stored judgment outside its rubric's range (a weighted score above the top step) is
judged again the same way. The checksum guards against accidents and careless edits, not against
someone who recomputes it. The bookkeeping columns (``attempts``, ``created_at``) are not covered.

The file holds the one table the kit makes and nothing else. On opening, a file whose schema differs (a
trigger, a view, another table or index, a column missing or added: a cache of an earlier version, or one
edited to rewrite what the kit stores) is set aside beside it (renamed ``<name>.set-aside-<time>``, never
read again, never re-sealed) with a warning, and a new cache is started. Each cache file carries a random
id in its header (``PRAGMA user_version``); a write-ahead log beside it whose copy of the header holds
another id is another database's log (copied or left beside it): it is set aside before SQLite could replay
it over the cache's judgments.

Closing a cache (:meth:`JudgmentCache.close`, its context manager, or at the latest when it is
garbage-collected or the interpreter exits) checkpoints the write-ahead log into the database
file, so when the last connection closes SQLite removes the ``-wal`` and ``-shm`` files and the
cache is one self-contained file again.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import secrets
import shlex
import sqlite3
import threading
import time
import warnings
import weakref
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from instir import atomic
from instir.errors import UserError
from instir.judge.types import Judge, JudgeRequest, Judgment, OnResult, capped, judged_text

_SCHEMA = """
CREATE TABLE IF NOT EXISTS judgments (
    backend TEXT NOT NULL,
    model TEXT NOT NULL,
    rubric_version TEXT NOT NULL,
    text_sha256 TEXT NOT NULL,
    rubric TEXT NOT NULL,
    score INTEGER,
    weighted REAL,
    probs TEXT,
    weighting TEXT,
    raw TEXT NOT NULL,
    error TEXT,
    latency_s REAL,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    cost REAL,
    served_model TEXT,
    warning TEXT,
    attempts INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL,
    checksum TEXT,
    PRIMARY KEY (backend, model, rubric_version, text_sha256)
) WITHOUT ROWID
"""

_FIELDS = ("score", "weighted", "probs", "weighting", "raw", "error", "latency_s", "prompt_tokens",
           "completion_tokens", "cost", "served_model", "warning")

#: The columns a row's checksum covers, in order: the key, the rubric's name and the judgment.
_CHECKED = ("backend", "model", "rubric_version", "text_sha256", "rubric", *_FIELDS)

#: The checksum of a row as an SQL function (registered on every connection the cache opens).
_CHECKSUM_SQL = "instir_row_checksum"

#: Give the rows matching a WHERE clause their checksum.
_SET_CHECKSUM = f"UPDATE judgments SET checksum = {_CHECKSUM_SQL}({', '.join(_CHECKED)})"
_KEY_WHERE = " WHERE backend = ? AND model = ? AND rubric_version = ? AND text_sha256 = ?"

# A stored success is never replaced; a stored failure is replaced by the next attempt, and so is a
# row that could not be read back (see _judgment and JudgmentCache.store).
_UPSERT_ALWAYS = f"""
INSERT INTO judgments (backend, model, rubric_version, text_sha256, rubric, {", ".join(_FIELDS)}, created_at)
VALUES ({", ".join("?" * (len(_FIELDS) + 6))})
ON CONFLICT (backend, model, rubric_version, text_sha256) DO UPDATE SET
    {", ".join(f"{f} = excluded.{f}" for f in _FIELDS)},
    attempts = judgments.attempts + 1, created_at = excluded.created_at
"""
_UPSERT = _UPSERT_ALWAYS + "WHERE judgments.error IS NOT NULL\n"

#: Keys per lookup query (well under SQLite's bound-parameter limit).
_LOOKUP_CHUNK = 500

#: (rubric version, SHA-256 of the judged text): a cache key within one backend and model.
Key = tuple[str, str]


def _plain(value: object) -> object:
    """A stored value JSON cannot write (a BLOB put in by hand) as something it can."""
    return {"blob": value.hex()} if isinstance(value, bytes) else repr(value)


def row_checksum(*values: object) -> str:
    """The checksum of one row from its :data:`_CHECKED` values as SQLite returns them: BLAKE2b
    (128 bits, hex) of a JSON object of the columns that are not NULL, keys sorted. JSON keeps
    what a hand edit changes: an integer is written apart from a real (``3`` vs ``3.0``), a text
    apart from a number, a value apart from NULL. Leaving NULLs out means a column added to
    :data:`_FIELDS` (and so to :data:`_CHECKED`) later keeps the checksums of existing rows."""
    row = {name: value for name, value in zip(_CHECKED, values, strict=True) if value is not None}
    text = json.dumps(row, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=_plain)
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def request_key(request: JudgeRequest, repeat: int = 0) -> Key:
    """Cache key of a request within one backend and model.

    ``repeat`` numbers independent judgments of the same text (:mod:`instir.judge.stability`):
    repeat 0 is the plain key, repeat r >= 1 is stored under rubric version ``<version>#repeat=r``."""
    if repeat < 0:
        raise ValueError(f"repeat must be 0 or more, got {repeat}")
    version = request.rubric.version if repeat == 0 else f"{request.rubric.version}#repeat={repeat}"
    return version, hashlib.sha256(judged_text(request).encode("utf-8")).hexdigest()


#: SQLite's result codes for a file that is not a database or is damaged.
_CORRUPT = frozenset({"SQLITE_NOTADB", "SQLITE_CORRUPT"})


class CorruptCacheError(UserError, ValueError):
    """The judgment cache file is not a readable SQLite database. The message names the file
    and the command that moves it aside (the next run then starts a new cache; the damaged
    file is kept for inspection and nothing else is touched)."""

    def __init__(self, path: Path, detail: str):
        self.path = path
        moved = path.with_name(path.name + ".corrupt")
        super().__init__(f"{path}: judgment cache is damaged ({detail}); move it aside to start a new one "
                         f"(its judgments will be made again): mv {shlex.quote(str(path))} {shlex.quote(str(moved))}")


class JudgmentCache:
    """The SQLite file behind :class:`CachedJudge` (created on first use, WAL mode).

    ``busy_timeout_s`` is how long a write waits for another process holding the lock.
    A damaged file raises :class:`CorruptCacheError` (on opening, or when a damaged page is
    first read), a file that cannot be opened a :class:`~instir.errors.UserError` naming it;
    never a bare ``sqlite3.DatabaseError``.
    """

    def __init__(self, path: str | Path, busy_timeout_s: float = 60.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._unreadable: set[tuple[str, str, str, str]] = set()  # stored "successes" read back as failures
        _set_aside_foreign_log(self.path)
        self._connect(busy_timeout_s)
        # Switching to WAL while another process writes fails at once (SQLite calls no busy
        # handler there), as when two processes open a new cache together: wait as a write would.
        deadline = time.monotonic() + busy_timeout_s
        while True:
            try:
                with self._readable():
                    foreign = _foreign_schema(self._db)
                    if foreign is not None:
                        self._closer()
                        _set_aside(self.path, foreign)
                        self._connect(busy_timeout_s)
                        continue
                    if self._db.execute("PRAGMA user_version").fetchone() == (0,):
                        # the file's id, which the log check reads: a new file gets it in its own header, before
                        # it has a log (an earlier cache gets it through its log, and is checked once checkpointed)
                        self._db.execute(f"PRAGMA user_version = {secrets.randbits(31) or 1}")
                    self._db.execute("PRAGMA journal_mode=WAL")
                    self._db.execute("PRAGMA synchronous=NORMAL")
                    self._db.execute(_SCHEMA)
                break
            except (CorruptCacheError, OSError):
                self._closer.detach()
                self._db.close()
                raise
            except sqlite3.OperationalError as err:  # e.g. a read-only file
                if getattr(err, "sqlite_errorname", "") == "SQLITE_BUSY" and time.monotonic() < deadline:
                    time.sleep(0.02)
                    continue
                self._closer.detach()
                self._db.close()
                raise UserError(f"cannot open the judgment cache {self.path}: {err}") from err

    def _connect(self, busy_timeout_s: float) -> None:
        try:
            self._db = sqlite3.connect(self.path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False)
        except sqlite3.OperationalError as err:  # cannot open: a folder, no permission
            raise UserError(f"cannot open the judgment cache {self.path}: {err}") from err
        self._db.create_function(_CHECKSUM_SQL, len(_CHECKED), row_checksum, deterministic=True)
        # Closed (and its log checkpointed) when close() is called, or when this object is
        # collected or the interpreter exits, whichever comes first.
        self._closer = weakref.finalize(self, _checkpoint_and_close, self._db, self._lock)

    def distrust(self, backend: str, model: str, key: Key) -> None:
        """Take the stored row of ``key`` as unreadable: the next :meth:`store` of it replaces it."""
        with self._lock:
            self._unreadable.add((backend, model, *key))

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One write transaction (``BEGIN IMMEDIATE``: it takes the write lock first, waiting up
        to the busy timeout), rolled back when anything in it fails."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if self._db.in_transaction:
                try:
                    self._db.execute("ROLLBACK")
                except sqlite3.Error:
                    pass  # SQLite has already rolled back (e.g. a full disk); the first error says why
            raise
        self._db.execute("COMMIT")

    @contextmanager
    def _readable(self) -> Iterator[None]:
        """Turn SQLite's "not a database" / "malformed" errors into :class:`CorruptCacheError`,
        "database or disk is full" and disk I/O errors into an ``OSError`` naming the file
        (:func:`instir.atomic.sqlite_errors`); a busy or locked database passes through."""
        with atomic.sqlite_errors(self.path):
            try:
                yield
            except sqlite3.DatabaseError as err:
                if getattr(err, "sqlite_errorname", None) in _CORRUPT:
                    raise CorruptCacheError(self.path, str(err)) from None
                raise

    def close(self) -> None:
        """Checkpoint the write-ahead log into the database file and close the connection; when
        no other connection has the file open, SQLite then removes its ``-wal`` and ``-shm``
        files. Closing twice does nothing."""
        self._closer()

    def __enter__(self) -> "JudgmentCache":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def lookup(self, backend: str, model: str, keys: Sequence[Key]) -> dict[Key, Judgment]:
        """Stored judgments (successes and failures) for these keys, in batched queries. A row
        whose checksum does not match is left out (a miss: the next :meth:`store` of its key
        replaces it), with one warning counting such rows."""
        found: dict[Key, Judgment] = {}
        mismatched = 0
        by_version: dict[str, list[str]] = {}
        for version, digest in set(keys):
            by_version.setdefault(version, []).append(digest)
        with self._lock, self._readable():
            # One query per rubric version and chunk, so SQLite walks the full primary key
            # (backend, model, rubric_version, text_sha256) instead of scanning a model's rows.
            for version, digests in by_version.items():
                digests.sort()
                for b in range(0, len(digests), _LOOKUP_CHUNK):
                    chunk = digests[b:b + _LOOKUP_CHUNK]
                    rows = self._db.execute(
                        f"SELECT text_sha256, rubric, checksum, {', '.join(_FIELDS)} FROM judgments WHERE backend = ? "
                        f"AND model = ? AND rubric_version = ? AND text_sha256 IN ({', '.join('?' * len(chunk))})",
                        (backend, model, version, *chunk)).fetchall()
                    for digest, rubric, checksum, *values in rows:
                        if checksum != row_checksum(backend, model, version, digest, rubric, *values):
                            mismatched += 1
                            self._unreadable.add((backend, model, version, digest))
                            continue
                        judgment = found[(version, digest)] = _judgment(values)
                        if judgment.error is not None and values[_FIELDS.index("error")] is None:
                            self._unreadable.add((backend, model, version, digest))
        if mismatched:
            warnings.warn(f"judgment cache {self.path}: {mismatched} stored judgment(s) do not match their checksum "
                          "(edited or damaged): judging them again", stacklevel=3)
        return found

    def store(self, backend: str, model: str, request: JudgeRequest, judgment: Judgment,
              key: Key | None = None) -> None:
        """Write one judgment at once, with its checksum (its own transaction). A stored success
        is kept (its checksum too); a stored failure, or a row that failed its checksum or could
        not be read back, is replaced and its attempt count raised. ``raw`` is stored cut to
        :data:`~instir.judge.types.MAX_RAW_CHARS` characters."""
        version, digest = key or request_key(request)
        values = [judgment.score, judgment.weighted, json.dumps(judgment.probs) if judgment.probs is not None else None,
                  judgment.weighting, capped(judgment.raw), judgment.error, judgment.latency_s, judgment.prompt_tokens,
                  judgment.completion_tokens, judgment.cost, judgment.served_model, judgment.warning]
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        with self._lock, self._readable():
            unreadable = (backend, model, version, digest) in self._unreadable
            with self._transaction():
                written = self._db.execute(_UPSERT_ALWAYS if unreadable else _UPSERT,
                                           (backend, model, version, digest, request.rubric.name, *values, now))
                if written.rowcount:  # the checksum of what SQLite holds now, not of a kept row
                    self._db.execute(_SET_CHECKSUM + _KEY_WHERE, (backend, model, version, digest))
            self._unreadable.discard((backend, model, version, digest))

    def judges(self) -> list[tuple[str, str]]:
        """The (backend, model) pairs with stored judgments, sorted."""
        with self._lock, self._readable():
            return [tuple(row) for row in self._db.execute(
                "SELECT DISTINCT backend, model FROM judgments ORDER BY backend, model").fetchall()]


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


def _expected_schema() -> str:
    """The SQL SQLite records for the kit's table (:data:`_SCHEMA` as SQLite writes it back)."""
    with closing(sqlite3.connect(":memory:")) as db:
        db.execute(_SCHEMA)
        return db.execute("SELECT sql FROM sqlite_master WHERE name = 'judgments'").fetchone()[0]


_EXPECTED = _expected_schema()


def _foreign_schema(db: sqlite3.Connection) -> str | None:
    """What in ``db``'s schema the kit did not make (None: nothing, or an empty file)."""
    objects = db.execute("SELECT type, name, sql FROM sqlite_master ORDER BY type, name").fetchall()
    others = [f"{kind} {name!r}" for kind, name, _ in objects if (kind, name) != ("table", "judgments")]
    if others:
        return f"holds what the kit does not make ({', '.join(others[:5])})"
    table = [sql for kind, name, sql in objects if (kind, name) == ("table", "judgments")]
    if table and table[0] != _EXPECTED:
        return "has a judgments table other than the kit's (an earlier version's, or one edited)"
    return None


def _set_aside(path: Path, why: str, suffixes: tuple[str, ...] = ("", "-wal", "-shm")) -> Path:
    """Rename ``path`` (and its ``-wal``/``-shm``; only those of ``suffixes``) to ``<name>.set-aside-<UTC
    time>``, with a warning saying why."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%f")
    aside = path.with_name(f"{path.name}.set-aside-{stamp}")
    for suffix in suffixes:
        with contextlib.suppress(FileNotFoundError):
            Path(f"{path}{suffix}").rename(f"{aside}{suffix}")
    what = "starting a new cache" if "" in suffixes else "the cache's own judgments are kept"
    warnings.warn(f"judgment cache {path} {why}: set aside as {aside}{'-wal' if '' not in suffixes else ''} "
                  f"(kept, never read); {what}", stacklevel=4)
    return aside


def _header_id(page: bytes) -> int | None:
    """The id (``user_version``) in a database header (the first page), None when it is not one."""
    return int.from_bytes(page[60:64], "big") if page[:16] == b"SQLite format 3\x00" and len(page) >= 100 else None


def _set_aside_foreign_log(path: Path) -> None:
    """Set aside (:func:`_set_aside`, the log and its index only) a ``-wal`` beside ``path`` whose frames of
    the first page hold a header with another id than the database file's: another database's log."""
    log = Path(f"{path}-wal")
    try:
        with path.open("rb") as db_file:
            own = _header_id(db_file.read(100))
        wal = log.read_bytes() if own is not None else b""
    except FileNotFoundError:
        return
    if not own or len(wal) < 32:  # no id yet (a cache of an earlier version, before its first checkpoint)
        return
    page_size = int.from_bytes(wal[8:12], "big")
    salts = wal[16:24]
    frame = 32
    while page_size and frame + 24 + page_size <= len(wal):
        header = wal[frame:frame + 24]
        if header[8:16] != salts:
            break  # the frames after this one are an earlier log's, which SQLite ignores
        if int.from_bytes(header[:4], "big") == 1 and _header_id(wal[frame + 24:frame + 24 + page_size]) != own:
            _set_aside(path, "has another database's write-ahead log beside it", suffixes=("-wal", "-shm"))
            return
        frame += 24 + page_size


def _within_rubric(judgment: Judgment, rubric) -> bool:
    """Whether a stored success lies on ``rubric``'s scale (0 to its top step)."""
    return 0 <= judgment.weighted <= rubric.max_score and (judgment.score is None or judgment.score in rubric.scores)


def _judgment(values: Sequence) -> Judgment:
    """A stored row as a judgment. A row stored as a success that cannot be one (its weighted
    score not a finite number, its distribution unreadable: a damaged or hand-edited file) comes
    back as a failure saying so, which the next judgment of its text replaces."""
    row = dict(zip(_FIELDS, values))
    if row["error"] is not None:
        return Judgment(**{**row, "probs": None}, from_cache=True)
    try:
        probs = json.loads(row["probs"]) if row["probs"] is not None else None
        if probs is not None and not (isinstance(probs, dict) and all(
                isinstance(p, (int, float)) and not isinstance(p, bool) and 0 <= p <= 1 for p in probs.values())):
            raise ValueError(f"probs is not a distribution: {str(row['probs'])[:80]}")
        weighted = row["weighted"]
        if isinstance(weighted, bool) or not isinstance(weighted, (int, float)) or not math.isfinite(weighted):
            raise ValueError(f"weighted is {str(weighted)[:80]!r}, not a finite number")
        return Judgment(**{**row, "probs": probs, "weighted": float(weighted)}, from_cache=True)
    except (ValueError, TypeError) as err:
        return Judgment.failure(f"stored judgment unreadable ({err}); judged again", raw=str(row["raw"] or ""),
                                from_cache=True)


@dataclass
class CacheStats:
    """Counts since a :class:`CachedJudge` was made: requests answered from the cache, sent to
    the backend, and of those, failed."""

    hits: int = 0
    judged: int = 0
    failed: int = 0


class CachedJudge:
    """Wraps a backend with a :class:`JudgmentCache`; itself a :class:`~instir.judge.types.Judge`.

    Only requests with no stored success go to the backend (each distinct judged text once per
    call), and each judgment is stored the moment the backend reports it. ``repeat`` (see
    :func:`request_key`) gives this judge its own cache entries, so repeat r of a text is judged
    afresh once and then read back like any other judgment.
    """

    def __init__(self, backend: Judge, cache: JudgmentCache | str | Path, repeat: int = 0):
        self.backend = backend
        self.repeat = repeat
        self.cache = cache if isinstance(cache, JudgmentCache) else JudgmentCache(cache)
        self.name = backend.name
        self.model = backend.model
        self.stats = CacheStats()

    def __repr__(self) -> str:
        extra = f", repeat={self.repeat}" if self.repeat else ""
        return f"CachedJudge({self.backend!r}, {str(self.cache.path)!r}{extra})"

    def close(self) -> None:
        """Close the cache (:meth:`JudgmentCache.close`), shared with the judges of
        :meth:`with_repeat`; it is closed at interpreter exit anyway."""
        self.cache.close()

    def __enter__(self) -> CachedJudge:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def with_repeat(self, repeat: int) -> CachedJudge:
        """The same backend and cache with the cache entries of ``repeat`` (its own judgments)."""
        return CachedJudge(self.backend, self.cache, repeat=repeat)

    @property
    def deterministic(self) -> bool:
        """Whether the backend answers a request the same way on every call, by construction:
        the in-process model (an expected score read from its next-token distribution, no
        sampling) and the baselines (no model, or an embedding model) do; an API judge does not."""
        from instir.judge.baseline import BaselineJudge
        from instir.judge.local_lm import HFCausalLMJudge

        return isinstance(self.backend, (HFCausalLMJudge, BaselineJudge))

    def judge(self, requests: Sequence[JudgeRequest], on_result: OnResult | None = None) -> list[Judgment]:
        """Judgments for every request, in input order: stored ones (``from_cache=True``) and
        fresh ones from the backend."""
        keys = [request_key(r, self.repeat) for r in requests]
        found = self.cache.lookup(self.name, self.model, keys)
        out: list[Judgment | None] = [None] * len(requests)
        missing: dict[Key, list[int]] = {}
        outside = {key for i, key in enumerate(keys)
                   if key in found and found[key].ok and not _within_rubric(found[key], requests[i].rubric)}
        for key in outside:
            self.cache.distrust(self.name, self.model, key)
            del found[key]
        if outside:
            warnings.warn(f"judgment cache {self.cache.path}: {len(outside)} stored judgment(s) outside their rubric's "
                          "range: judging them again", stacklevel=2)
        for i, key in enumerate(keys):
            hit = found.get(key)
            if hit is not None and hit.ok:
                out[i] = hit
                self.stats.hits += 1
                if on_result is not None:
                    on_result(i, hit)
            else:
                missing.setdefault(key, []).append(i)
        todo = list(missing)
        stored: set[int] = set()

        def store(u: int, judgment: Judgment) -> None:
            stored.add(u)
            key = todo[u]
            positions = missing[key]
            self.cache.store(self.name, self.model, requests[positions[0]], judgment, key)
            self.stats.judged += 1
            self.stats.failed += not judgment.ok
            for i in positions:
                out[i] = judgment
                if on_result is not None:
                    on_result(i, judgment)

        if todo:
            results = list(self.backend.judge([requests[missing[key][0]] for key in todo], on_result=store))
            for u in range(len(todo)):  # a backend that reports only at the end (or not at all)
                if u not in stored:
                    judgment = results[u] if u < len(results) else None
                    store(u, judgment if isinstance(judgment, Judgment) else
                          Judgment.failure(f"the {self.name} backend gave no judgment for this request"))
        return out  # type: ignore[return-value]
