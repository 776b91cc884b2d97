"""On-disk cache of per-token embeddings (late interaction: one ragged matrix per input).

Built from the pieces of :class:`~instir.retrieval.embedding_cache.EmbeddingCache`, with the
same key, crash safety and integrity checks, in a *packed* layout: all inputs' token vectors
stacked into one ``(total tokens, dim)`` matrix, plus one length per input (``doclens``), so
input ``i`` owns rows ``offsets[i]:offsets[i + 1]`` with ``offsets = [0, cumsum(doclens)]``.

A finished chunk is two checksummed ``.npy`` files, its token rows written first, then its
lengths: the lengths file is the chunk's commit mark, so a chunk is reused only when both check
out and the token rows number ``sum(lengths)``. A complete entry holds two sub-entries in
:class:`EmbeddingCache`'s layout (``tokens/`` and ``doclens/``) under a top ``manifest.json``
written last; lengths are stored as float32 (exact below 2**24 tokens per input).

Layout: ``<root>/<label>-<key[:24]>/{manifest.json, tokens/, doclens/,
chunk<size>-NNNNNN.{tokens,doclens}.npy[.sha256]}``.
Deleting any entry (or the whole root) is always safe: it is rebuilt on the next run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence, Sized
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from instir import atomic
from instir.progress import tqdm
from instir.retrieval.embedding_cache import (
    DEFAULT_CHUNK_SIZE,
    MANIFEST,
    MATRIX,
    EmbeddingCache,
    in_chunks,
)

TOKENS, DOCLENS = "tokens", "doclens"


@dataclass(frozen=True)
class TokenEmbeddings:
    """Packed token vectors from the cache: ``tokens`` (memory-mapped, ``(total, dim)``),
    ``doclens`` (tokens per input, int64) and ``offsets`` (``len + 1`` row starts);
    ``encoded`` counts the inputs encoded by this call (0 on a full cache hit)."""

    tokens: np.ndarray
    doclens: np.ndarray
    key: str
    path: Path
    encoded: int

    @cached_property
    def offsets(self) -> np.ndarray:
        return np.r_[0, np.cumsum(self.doclens)]

    def __len__(self) -> int:
        return len(self.doclens)

    def __getitem__(self, i: int) -> np.ndarray:
        """The token matrix of input ``i``."""
        return self.tokens[self.offsets[i]:self.offsets[i + 1]]


class TokenEmbeddingCache:
    """Chunked, crash-safe store of ragged per-token embeddings under ``root`` (default: the
    embedding cache's root, :func:`~instir.retrieval.embedding_cache.default_cache_dir`)."""

    def __init__(self, root: str | Path | None = None, *, chunk_size: int = DEFAULT_CHUNK_SIZE,
                 progress: bool = True):
        self._store = EmbeddingCache(root, chunk_size=chunk_size, progress=progress)
        self.root, self.chunk_size, self.progress = self._store.root, chunk_size, progress

    def embed(self, encoder: dict, items: Iterable[Any], encode: Callable[[list[Any]], Sequence[np.ndarray]], *,
              label: str = "", desc: str = "encoding") -> TokenEmbeddings:
        """Token embeddings of ``items`` from the cache, encoding (chunk by chunk) only what is
        missing. ``encode`` maps a list of items to one ``(n_tokens, dim)`` array each (at least
        one token per input). ``items`` must be re-iterable, as for :meth:`EmbeddingCache.embed`."""
        if iter(items) is items:
            raise TypeError("items must be re-iterable (a list or a re-iterable view), not a one-shot iterator")
        key = EmbeddingCache.key(encoder, items)
        entry = self._store.entry_dir(label or str(encoder.get("model", "")), key)
        if (entry / MANIFEST).exists():
            found = self._verified(entry, key)
            if found is not None:
                return found
            (entry / MANIFEST).unlink(missing_ok=True)

        entry.mkdir(parents=True, exist_ok=True)
        token_files: list[Path] = []
        length_files: list[Path] = []
        encoded = n_items = n_tokens = 0
        total = len(items) if isinstance(items, Sized) else None
        with tqdm(desc=desc, total=total, unit="input", disable=not self.progress) as bar:
            for i, chunk in enumerate(in_chunks(items, self.chunk_size)):
                tok_path, len_path = self._chunk_paths(entry, i)
                token_files.append(tok_path)
                length_files.append(len_path)
                n_items += len(chunk)
                lengths = self._done_chunk(tok_path, len_path, len(chunk))
                if lengths is None:
                    mats = [np.asarray(m, dtype=np.float32) for m in encode(chunk)]
                    if len(mats) != len(chunk) or any(m.ndim != 2 or m.shape[0] < 1 for m in mats):
                        raise ValueError(f"encode returned {len(mats)} matrices for {len(chunk)} inputs, each must "
                                         "be (n_tokens >= 1, dim)")
                    lengths = np.array([m.shape[0] for m in mats], dtype=np.int64)
                    EmbeddingCache.write_checked_chunk(tok_path, np.concatenate(mats))
                    EmbeddingCache.write_checked_chunk(len_path, lengths[:, None].astype(np.float32))
                    encoded += len(chunk)
                n_tokens += int(lengths.sum())
                bar.update(len(chunk))
        if not token_files:
            raise ValueError("nothing to embed (no inputs)")

        parts = {}
        for name, files, rows in ((TOKENS, token_files, n_tokens), (DOCLENS, length_files, n_items)):
            (entry / name).mkdir(exist_ok=True)
            record = EmbeddingCache.join_chunks(entry / name, files, rows)
            atomic.write_text(entry / name / MANIFEST, json.dumps(
                {"key": key, "rows": rows, "dim": record["shape"][1], "matrix": record}, indent=2, sort_keys=True))
            parts[name] = record
        info = {"key": key, "encoder": encoder, "inputs": n_items, "tokens": n_tokens, "dim": parts[TOKENS]["shape"][1],
                "chunk_size": self.chunk_size, "layout": "packed tokens + doclens", "parts": parts}
        atomic.write_text(entry / MANIFEST, json.dumps(info, indent=2, sort_keys=True, default=str))
        for path in entry.glob("chunk*"):
            path.unlink(missing_ok=True)
        found = self._verified(entry, key, encoded)
        if found is None:
            raise RuntimeError(f"token cache entry {entry} failed its own check right after it was written")
        return found

    def _chunk_paths(self, entry: Path, i: int) -> tuple[Path, Path]:
        stem = f"chunk{self.chunk_size}-{i:06d}"
        return entry / f"{stem}.{TOKENS}.npy", entry / f"{stem}.{DOCLENS}.npy"

    @staticmethod
    def _done_chunk(tok_path: Path, len_path: Path, n_inputs: int) -> np.ndarray | None:
        """The lengths of a finished chunk, or None when it must be (re-)encoded."""
        if not EmbeddingCache.checked_chunk_ok(len_path, n_inputs):
            return None
        lengths = np.load(len_path)[:, 0].astype(np.int64)
        if EmbeddingCache.checked_chunk_ok(tok_path, int(lengths.sum())):
            return lengths
        len_path.unlink(missing_ok=True)
        return None

    def _verified(self, entry: Path, key: str, encoded: int = 0) -> TokenEmbeddings | None:
        """The entry when both sub-entries pass :class:`EmbeddingCache`'s checks and the
        lengths add up to the token rows; else None (failing files are removed)."""
        tokens = self._store.verified_matrix(entry / TOKENS)
        lengths = self._store.verified_matrix(entry / DOCLENS)
        if tokens is None or lengths is None:
            return None
        doclens = np.asarray(lengths[:, 0], dtype=np.int64)
        if int(doclens.sum()) != tokens.shape[0] or (doclens < 1).any():
            (entry / TOKENS / MATRIX).unlink(missing_ok=True)
            return None
        return TokenEmbeddings(tokens, doclens, key, entry, encoded)
