"""On-disk cache of per-token embeddings (late interaction: one ragged matrix per input).

The same store, key, resumable chunks and checks as
:class:`~instir.retrieval.embedding_cache.EmbeddingCache`, in a *packed* layout: all inputs' token
vectors stacked into one ``(total tokens, dim)`` matrix, plus one length per input (``doclens``), so
input ``i`` owns rows ``offsets[i]:offsets[i + 1]`` with ``offsets = [0, cumsum(doclens)]``.

A finished chunk is two checksummed parts, its token rows written first, then its lengths: the
lengths part is the chunk's commit mark, so a chunk is reused only when both check out and the
token rows number ``sum(lengths)``. A complete entry holds ``tokens.npy`` and ``doclens.npy``
(lengths as float32, exact below 2**24 tokens per input); on a load the lengths must add up to the
token rows.

Layout: ``<root>/<label>-<key[:24]>/{manifest.json, tokens.npy, doclens.npy}``, chunks in
``….partial/chunk<size>-NNNNNN.{tokens,doclens}.npy[.sha256]`` until the entry is complete.
Deleting any entry (or the whole root) is always safe: it is rebuilt on the next run.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from instir import atomic, verified_store
from instir.inputs import read_json
from instir.retrieval.embedding_cache import DEFAULT_CHUNK_SIZE, MANIFEST, EmbeddingCache, join_chunks
from instir.verified_store import Damaged, Entry, npy_header, part_ok, write_part

TOKENS, DOCLENS = "tokens.npy", "doclens.npy"


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
        self._cache = EmbeddingCache(root, chunk_size=chunk_size, progress=progress)
        self.root, self.chunk_size, self.progress = self._cache.root, chunk_size, progress

    def embed(self, encoder: dict, items: Iterable[Any], encode: Callable[[list[Any]], Sequence[np.ndarray]], *,
              label: str = "", desc: str = "encoding") -> TokenEmbeddings:
        """Token embeddings of ``items`` from the cache, encoding (chunk by chunk) only what is
        missing. ``encode`` maps a list of items to one ``(n_tokens, dim)`` array each (at least
        one token per input). ``items`` must be re-iterable, as for :meth:`EmbeddingCache.embed`."""
        key, entry = self._cache.entry_of(encoder, items, label)
        _take_over_earlier_entry(entry, key)
        store = self._cache.entries

        def open_packed(found: Entry, encoded: int = 0) -> TokenEmbeddings:
            tokens = np.load(found.path / TOKENS, mmap_mode="r")
            doclens = np.asarray(np.load(found.path / DOCLENS, mmap_mode="r")[:, 0], dtype=np.int64)
            if (doclens < 1).any():
                raise Damaged(found.path / DOCLENS, "holds a length below 1 (every input has a token)")
            if int(doclens.sum()) != tokens.shape[0]:
                raise Damaged(found.path / DOCLENS, f"holds lengths that do not add up to the {tokens.shape[0]} "
                                                    "token rows")
            return TokenEmbeddings(tokens, doclens, key, found.path, encoded)

        def make(work: Path) -> TokenEmbeddings:
            token_files: list[Path] = []
            length_files: list[Path] = []
            encoded = n_items = n_tokens = 0
            if store.work_folder(entry.name) is None:  # a cache folder that cannot be written: kept in memory
                chunks = [_encoded(chunk, encode) for _, chunk in self._cache.chunks(items, desc)]
                doclens = np.concatenate([lengths for _, lengths in chunks])
                return TokenEmbeddings(np.concatenate([tokens for tokens, _ in chunks]), doclens, key, entry,
                                       len(doclens))
            for i, chunk in self._cache.chunks(items, desc):
                stem = work / f"chunk{self.chunk_size}-{i:06d}"
                tok_path, len_path = stem.with_name(f"{stem.name}.{TOKENS}"), stem.with_name(f"{stem.name}.{DOCLENS}")
                token_files.append(tok_path)
                length_files.append(len_path)
                n_items += len(chunk)
                lengths = _done_chunk(tok_path, len_path, len(chunk))
                if lengths is None:
                    tokens, lengths = _encoded(chunk, encode)
                    work.mkdir(parents=True, exist_ok=True)
                    write_part(tok_path, tokens)
                    write_part(len_path, lengths[:, None].astype(np.float32))
                    encoded += len(chunk)
                n_tokens += int(lengths.sum())

            def write(folder: Path) -> dict[str, str]:
                return {**join_chunks(folder / TOKENS, token_files, n_tokens),
                        **join_chunks(folder / DOCLENS, length_files, n_items)}

            published = store.put(entry.name, key, write, description=encoder, fallback=False,
                                  meta={"inputs": n_items, "tokens": n_tokens, "chunk_size": self.chunk_size,
                                        "layout": "packed tokens + doclens"})
            return open_packed(published, encoded)

        return store.build(entry.name, key, open_packed, make, required=(TOKENS, DOCLENS))


def _take_over_earlier_entry(entry: Path, key: str) -> None:
    """Lay out an entry an earlier kit wrote (``tokens/`` and ``doclens/``, each holding ``embeddings.npy``, the
    manifest recording both under ``parts``) as the store's, once each matrix has its recorded shape, size and
    SHA-256; anything else is left for the store to judge (as the embedding cache takes over its earlier entries)."""
    try:
        info = read_json(entry / MANIFEST)  # a FIFO in its place would block a read for ever
        if (not isinstance(info, dict) or "files" in info or info.get("key") != key
                or not isinstance(info.get("parts"), dict)):
            return
        files = {}
        for name in (TOKENS, DOCLENS):
            part = name.removesuffix(".npy")
            recorded, path = info["parts"][part], entry / part / "embeddings.npy"
            with path.open("rb") as fh:
                shape, dtype = npy_header(fh)
            size = path.stat().st_size
            if list(shape) != list(recorded["shape"]) or dtype != np.float32 or size != recorded["bytes"]:
                return
            if atomic.file_sha256(path) != recorded["sha256"]:
                return
            files[name] = {"bytes": recorded["bytes"], "sha256": recorded["sha256"]}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return
    for name in files:
        os.replace(entry / name.removesuffix(".npy") / "embeddings.npy", entry / name)
    atomic.write_text(entry / MANIFEST, json.dumps(
        {"format": verified_store.FORMAT_VERSION, "key": key, "build": info.get("build", "earlier kit"),
         "description": info.get("encoder"), "meta": {"inputs": info.get("inputs"), "tokens": info.get("tokens"),
                                                       "chunk_size": info.get("chunk_size"),
                                                       "layout": "packed tokens + doclens"},
         "files": files}, indent=2, sort_keys=True, default=str))
    for name in files:
        shutil.rmtree(entry / name.removesuffix(".npy"), ignore_errors=True)


def _done_chunk(tok_path: Path, len_path: Path, n_inputs: int) -> np.ndarray | None:
    """The lengths of a finished chunk, or None when it must be (re-)encoded."""
    if not part_ok(len_path, n_inputs, what="token cache chunk"):
        return None
    lengths = np.load(len_path)[:, 0].astype(np.int64)
    if part_ok(tok_path, int(lengths.sum()), what="token cache chunk"):
        return lengths
    len_path.unlink(missing_ok=True)
    return None


def _encoded(chunk: list[Any], encode: Callable[[list[Any]], Sequence[np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The token rows of ``encode(chunk)`` packed as float32, and each input's number of rows (int64)."""
    mats = [np.asarray(m, dtype=np.float32) for m in encode(chunk)]
    if len(mats) != len(chunk) or any(m.ndim != 2 or m.shape[0] < 1 for m in mats):
        raise ValueError(f"encode returned {len(mats)} matrices for {len(chunk)} inputs, each must "
                         "be (n_tokens >= 1, dim)")
    return np.concatenate(mats), np.array([m.shape[0] for m in mats], dtype=np.int64)
