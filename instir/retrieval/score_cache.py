"""A resumable cache of reranker scores: SQLite in WAL mode, one row per scored model input.

A row is keyed by the SHA-256 of the reranker's identity (model, revision, dtype, prompt
template, truncation, label tokens — everything that changes a score) and the SHA-256 of the
exact model input (the rendered prompt, or the [query, passage] pair of a cross-encoder). The
rerank stage looks up a whole batch, scores only what is missing and stores each scored batch
in its own short transaction, so a rerun scores nothing and a killed run loses at most the
batch in flight. Several processes may share the file (busy timeout, first answer kept). The file
is an :class:`~instir.sqlite_store.SQLiteStore`, under the judgment cache's rules (its schema checked
on opening, another database's log set aside, closed with its log checkpointed); a stored score that
is not a finite number is scored again. Scores stored under a reranker's ``local_files_sha256`` (an earlier kit's
digest of its files, which a checkpoint rewritten in its middle kept, or None: a Hub id whose files were not on disk)
are not served under its weights' ``fingerprint``: the first lookup that finds none of its inputs says so once,
counting them.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from instir.home import instir_home
from instir.sqlite_store import SQLiteStore
from instir.stamps import json_sha256

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

#: The keys of an identity that name its model's weights: today's fingerprint, an earlier kit's files' digest.
WEIGHTS_KEYS = ("fingerprint", "local_files_sha256")


def default_score_cache_path() -> Path:
    """``<instir home>/rerank-scores.sqlite`` (``$INSTIR_HOME``, default ``~/.cache/instir``)."""
    return instir_home() / "rerank-scores.sqlite"


class ScoreCache:
    """Stored scores of one or more rerankers in the SQLite file ``path``."""

    def __init__(self, path: str | Path | None = None):
        # one connection for the cache's life: opening, committing and closing per batch costs
        # an fsync and a WAL checkpoint each time
        self._store = SQLiteStore(path if path is not None else default_score_cache_path(), _SCHEMA, "score cache")
        self.path = self._store.path
        self._looked_back: set[str] = set()  # rerankers whose earlier-kit scores were looked for

    def close(self) -> None:
        """Checkpoint the log into the file and close the connection."""
        self._store.close()

    @staticmethod
    def reranker_key(identity: Mapping) -> str:
        """SHA-256 of a reranker identity (JSON, keys sorted)."""
        return json_sha256(dict(identity), ensure_ascii=False)

    @staticmethod
    def input_key(model_input) -> str:
        """SHA-256 of one exact model input (a string or a list of strings)."""
        return json_sha256(model_input, ensure_ascii=False)

    def get(self, identity: Mapping, input_keys: Sequence[str]) -> dict[str, float]:
        """Stored scores of ``input_keys`` under ``identity`` (missing keys are absent)."""
        rkey = self.reranker_key(identity)
        found: dict[str, float] = {}
        with self._store.lock, self._store.readable():
            for start in range(0, len(input_keys), 500):
                chunk = list(input_keys[start:start + 500])
                marks = ",".join("?" * len(chunk))
                rows = self._store.db.execute(f"SELECT input_sha256, score FROM scores WHERE reranker_sha256 = ? "
                                              f"AND input_sha256 IN ({marks})", [rkey, *chunk])
                found.update((key, score) for key, score in rows
                             if isinstance(score, float) and math.isfinite(score))  # else: scored again
            if input_keys and not found and rkey not in self._looked_back:
                self._looked_back.add(rkey)
                self._say_earlier_kit(identity, rkey)
        return found

    def _say_earlier_kit(self, identity: Mapping, rkey: str) -> None:
        """One warning where the file holds scores of this reranker (the same settings) under its files' digest or
        its Hub id alone (``local_files_sha256``) while ``identity`` names its weights' fingerprint."""
        def settings(value: Mapping) -> dict:
            return json.loads(json.dumps({k: v for k, v in value.items() if k not in WEIGHTS_KEYS},
                                         sort_keys=True, default=str))

        if not identity.get("fingerprint"):
            return
        ours, earlier = settings(identity), 0
        rows = self._store.db.execute("SELECT r.identity, COUNT(*) FROM rerankers r JOIN scores s "
                                      "ON s.reranker_sha256 = r.reranker_sha256 WHERE r.reranker_sha256 != ? "
                                      "GROUP BY r.reranker_sha256", [rkey])
        for text, count in rows:
            try:
                other = json.loads(text)
            except (TypeError, ValueError, RecursionError):
                continue
            if isinstance(other, dict) and "local_files_sha256" in other and settings(other) == ours:
                earlier += count
        if earlier:
            warnings.warn(f"score cache {self.path}: {earlier} score(s) of {identity.get('model')} stored by an "
                          "earlier kit under its files' digest or its Hub id alone, not its weights' fingerprint, "
                          "are not reused: they are scored again", stacklevel=3)

    def put(self, identity: Mapping, scored: Iterable[tuple[str, float]]) -> None:
        """Store ``(input_key, score)`` pairs in one transaction (an existing row is kept, unless its score
        is not a finite number; a score that is not a finite number is not stored)."""
        rkey = self.reranker_key(identity)
        with self._store.lock, self._store.readable(), self._store.transaction() as con:
            con.execute("INSERT OR IGNORE INTO rerankers VALUES (?, ?)",
                        (rkey, json.dumps(dict(identity), sort_keys=True, default=str)))
            con.executemany("INSERT INTO scores VALUES (?, ?, ?) ON CONFLICT DO UPDATE SET score = excluded.score "
                            "WHERE typeof(scores.score) != 'real' OR abs(scores.score) > 1.7976931348623157e308",
                            [(rkey, key, float(score)) for key, score in scored
                             if math.isfinite(float(score))])  # else: not kept, scored again
