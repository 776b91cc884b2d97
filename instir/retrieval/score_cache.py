"""A resumable cache of reranker scores: SQLite in WAL mode, one row per scored model input.

A row is keyed by the SHA-256 of the reranker's identity (model, revision, dtype, prompt
template, truncation, label tokens — everything that changes a score) and the SHA-256 of the
exact model input (the rendered prompt, or the [query, passage] pair of a cross-encoder). The
rerank stage looks up a whole batch, scores only what is missing and stores each scored batch
in its own short transaction, so a rerun scores nothing and a killed run loses at most the
batch in flight. Several processes may share the file (busy timeout, first answer kept).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from instir import atomic
from instir.home import instir_home

_SCHEMA = """
CREATE TABLE IF NOT EXISTS scores (
    reranker_sha256 TEXT NOT NULL,
    input_sha256 TEXT NOT NULL,
    score REAL NOT NULL,
    PRIMARY KEY (reranker_sha256, input_sha256)
);
CREATE TABLE IF NOT EXISTS rerankers (
    reranker_sha256 TEXT PRIMARY KEY,
    identity TEXT NOT NULL
);
"""


def default_score_cache_path() -> Path:
    """``<instir home>/rerank-scores.sqlite`` (``$INSTIR_HOME``, default ``~/.cache/instir``)."""
    return instir_home() / "rerank-scores.sqlite"


def _sha256_json(value) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


class ScoreCache:
    """Stored scores of one or more rerankers in the SQLite file ``path``."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else default_score_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # one connection for the cache's life: opening, committing and closing per batch costs
        # an fsync and a WAL checkpoint each time
        with atomic.sqlite_errors(self.path):
            self._db = sqlite3.connect(self.path, timeout=60.0, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL: a crashed process loses nothing committed
        with self._transaction() as con:
            con.executescript(_SCHEMA)

    def close(self) -> None:
        """Close the database connection."""
        self._db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """The connection inside one transaction (committed on success, rolled back on error); a
        full disk or an I/O error is an ``OSError`` naming the file."""
        with atomic.sqlite_errors(self.path), self._db:
            yield self._db

    @staticmethod
    def reranker_key(identity: Mapping) -> str:
        """SHA-256 of a reranker identity (JSON, keys sorted)."""
        return _sha256_json(dict(identity))

    @staticmethod
    def input_key(model_input) -> str:
        """SHA-256 of one exact model input (a string or a list of strings)."""
        return _sha256_json(model_input)

    def get(self, identity: Mapping, input_keys: Sequence[str]) -> dict[str, float]:
        """Stored scores of ``input_keys`` under ``identity`` (missing keys are absent)."""
        rkey = self.reranker_key(identity)
        found: dict[str, float] = {}
        with self._transaction() as con:
            for start in range(0, len(input_keys), 500):
                chunk = list(input_keys[start:start + 500])
                marks = ",".join("?" * len(chunk))
                rows = con.execute(f"SELECT input_sha256, score FROM scores WHERE reranker_sha256 = ? "
                                   f"AND input_sha256 IN ({marks})", [rkey, *chunk])
                found.update(rows)
        return found

    def put(self, identity: Mapping, scored: Iterable[tuple[str, float]]) -> None:
        """Store ``(input_key, score)`` pairs in one transaction (an existing row is kept)."""
        rkey = self.reranker_key(identity)
        with self._transaction() as con:
            con.execute("INSERT OR IGNORE INTO rerankers VALUES (?, ?)",
                        (rkey, json.dumps(dict(identity), sort_keys=True, default=str)))
            con.executemany("INSERT OR IGNORE INTO scores VALUES (?, ?, ?)",
                            [(rkey, key, float(score)) for key, score in scored])
