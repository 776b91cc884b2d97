"""A resumable judgment cache: SQLite in WAL mode, one row per judged text.

Rows are keyed by backend name + model + rubric version + SHA-256 of the exact judged text (the
rendered prompt, :func:`instir.judge.types.judged_text`). :class:`CachedJudge` looks up a whole
batch at once, sends only what is missing to its backend, and writes every judgment as soon as it
is made, so a run killed at any point loses at most the judgments in flight and never pays twice
for a stored one. Failed judgments are stored as failures (with their error, never as a score)
and retried on the next run. Several processes may share one cache file: writes are short
transactions and a busy timeout makes them wait for each other. One judging holds the cache at a time
(:meth:`JudgmentCache.exclusive`): a second process waits, then reads the first one's judgments instead of paying
for them again; a stored success is never replaced.

Every row carries a checksum (:func:`row_checksum`: BLAKE2b over its key and every stored field
of the judgment, as SQLite holds them), written in the same transaction as the row. A row whose
checksum does not match (a value edited by hand, a damaged page that still reads) is never
served: one warning per lookup counts such rows and names the file, and each is judged again and
replaced. A stored judgment outside the range a judgment on its rubric is taken with (:func:`within_rubric`) is
judged again the same way. The checksum guards against accidents and careless edits, not against
someone who recomputes it. The bookkeeping columns (``attempts``, ``created_at``) are not covered.

The file is an :class:`~instir.sqlite_store.SQLiteStore`: its schema is checked on opening (a file that is no
judgment cache, such as the user's own database, is refused and left untouched; a judgment cache holding anything
but the one table the kit makes is set aside, never re-sealed), another database's write-ahead log
beside it is set aside before SQLite could replay it, and closing it (:meth:`JudgmentCache.close`, its context
manager, or at the latest at exit) checkpoints its log into the file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from instir.judge.rubrics import Rubric
from instir.judge.types import Judge, JudgeRequest, Judgment, OnResult, capped, judged_text
from instir.sqlite_store import SQLiteStore
from instir.stamps import utc_now

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


class JudgmentCache:
    """The SQLite file behind :class:`CachedJudge`: an :class:`~instir.sqlite_store.SQLiteStore` (created on
    first use, WAL mode, its schema checked on opening; a damaged file raises
    :class:`~instir.sqlite_store.CorruptStoreError` naming it, never a bare ``sqlite3.DatabaseError``).
    ``busy_timeout_s`` is how long a write waits for another process holding the lock."""

    def __init__(self, path: str | Path, busy_timeout_s: float = 60.0):
        self._store = SQLiteStore(path, _SCHEMA, "judgment cache", busy_timeout_s=busy_timeout_s,
                                  functions=[(_CHECKSUM_SQL, len(_CHECKED), row_checksum)])
        self.path = self._store.path
        self._unreadable: set[tuple[str, str, str, str]] = set()  # stored "successes" read back as failures

    def distrust(self, backend: str, model: str, key: Key) -> None:
        """Take the stored row of ``key`` as unreadable: the next :meth:`store` of it replaces it."""
        with self._store.lock:
            self._unreadable.add((backend, model, *key))

    def exclusive(self) -> contextlib.AbstractContextManager[None]:
        """The cache held for a whole judging (:meth:`instir.sqlite_store.SQLiteStore.exclusive`)."""
        return self._store.exclusive()

    def close(self) -> None:
        """Checkpoint the write-ahead log into the database file and close the connection; when
        no other connection has the file open, SQLite then removes its ``-wal`` and ``-shm``
        files. Closing twice does nothing."""
        self._store.close()

    def __enter__(self) -> "JudgmentCache":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def lookup(self, backend: str, model: str, keys: Sequence[Key]) -> dict[Key, Judgment]:
        """Stored judgments (successes and failures) for these keys, in batched queries. A row
        whose checksum does not match is left out (a miss: the next :meth:`store` of its key
        replaces it), with one warning counting such rows; a success that cannot be one comes back as a failure that
        the next :meth:`store` replaces, with one warning counting those."""
        found: dict[Key, Judgment] = {}
        mismatched = unreadable = 0
        by_version: dict[str, list[str]] = {}
        for version, digest in set(keys):
            by_version.setdefault(version, []).append(digest)
        with self._store.lock, self._store.readable():
            # One query per rubric version and chunk, so SQLite walks the full primary key
            # (backend, model, rubric_version, text_sha256) instead of scanning a model's rows.
            for version, digests in by_version.items():
                digests.sort()
                for b in range(0, len(digests), _LOOKUP_CHUNK):
                    chunk = digests[b:b + _LOOKUP_CHUNK]
                    rows = self._store.db.execute(
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
                            unreadable += 1
                            self._unreadable.add((backend, model, version, digest))
        if mismatched:
            warnings.warn(f"judgment cache {self.path}: {mismatched} stored judgment(s) do not match their checksum "
                          "(edited or damaged): judging them again", stacklevel=3)
        if unreadable:
            warnings.warn(f"judgment cache {self.path}: {unreadable} stored judgment(s) unreadable as one (a weighted "
                          "score that is no finite number, a distribution that is none): judging them again",
                          stacklevel=3)
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
        now = utc_now()
        with self._store.lock, self._store.readable():
            unreadable = (backend, model, version, digest) in self._unreadable
            with self._store.transaction():
                written = self._store.db.execute(_UPSERT_ALWAYS if unreadable else _UPSERT,
                                           (backend, model, version, digest, request.rubric.name, *values, now))
                if written.rowcount:  # the checksum of what SQLite holds now, not of a kept row
                    self._store.db.execute(_SET_CHECKSUM + _KEY_WHERE, (backend, model, version, digest))
            self._unreadable.discard((backend, model, version, digest))

    def judges(self) -> list[tuple[str, str]]:
        """The (backend, model) pairs with stored judgments, sorted."""
        with self._store.lock, self._store.readable():
            return [tuple(row) for row in self._store.db.execute(
                "SELECT DISTINCT backend, model FROM judgments ORDER BY backend, model").fetchall()]


def within_rubric(judgment: Judgment, rubric: Rubric) -> bool:
    """Whether a stored success lies in the range a judgment on ``rubric`` is taken with (0 to
    :attr:`~instir.judge.rubrics.Rubric.taken_top`, as an answer is: a stored one the backend would take is kept)."""
    return 0 <= judgment.weighted <= rubric.taken_top and (
        judgment.score is None or judgment.score in range(rubric.taken_top + 1))


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
    """Counts since a :class:`CachedJudge` was made (its :meth:`~CachedJudge.with_repeat` judges' included):
    requests answered from the cache, sent to the backend, and of those, failed."""

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
        """The same backend and cache with the cache entries of ``repeat`` (its own judgments), counting in this
        judge's ``stats``, so a stage's counts hold every repeat's requests."""
        judge = CachedJudge(self.backend, self.cache, repeat=repeat)
        judge.stats = self.stats
        return judge

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
        fresh ones from the backend. One process judges into a cache at a time (:meth:`JudgmentCache.exclusive`):
        two sharing it paid for the same judgments twice."""
        with self.cache.exclusive():
            return self._judge(requests, on_result)

    def _judge(self, requests: Sequence[JudgeRequest], on_result: OnResult | None) -> list[Judgment]:
        keys = [request_key(r, self.repeat) for r in requests]
        found = self.cache.lookup(self.name, self.model, keys)
        out: list[Judgment | None] = [None] * len(requests)
        missing: dict[Key, list[int]] = {}
        outside = {key for i, key in enumerate(keys)
                   if key in found and found[key].ok and not within_rubric(found[key], requests[i].rubric)}
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
