"""On-disk embedding cache: a corpus is encoded once per model and input format.

A cache entry is one embedding matrix, keyed by a SHA-256 over a description of the encoder
(model identity and fingerprint, precision, window settings …) and over every model input
in order (so it changes with the corpus content, its order and the template). Encoding runs
in chunks of ``chunk_size`` inputs; each finished chunk is written atomically as its own
``.npy`` file (temporary name + :func:`os.replace`), so a crash mid-encode keeps the finished
chunks and a rerun encodes only the missing ones. When every chunk exists they are joined
into one ``embeddings.npy``, a small ``manifest.json`` is written last (its presence marks the
entry complete), the chunk files are removed, and the matrix is opened memory-mapped.

Layout: ``<root>/<label>-<key[:24]>/{manifest.json, embeddings.npy, chunk<size>-000000.npy …}``.
Deleting any entry (or the whole root) is always safe: it is rebuilt on the next run.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
from instir import atomic
from instir.progress import tqdm

from instir.benchmarks.fetch import instir_home

MANIFEST = "manifest.json"
MATRIX = "embeddings.npy"
DEFAULT_CHUNK_SIZE = 4096


def default_cache_dir() -> Path:
    """``<instir home>/embeddings`` (``$INSTIR_HOME``, default ``~/.cache/instir``)."""
    return instir_home() / "embeddings"


@dataclass(frozen=True)
class Embeddings:
    """An embedding matrix from the cache: ``matrix`` is memory-mapped (rows in input order);
    ``encoded`` counts the inputs encoded by this call (0 on a full cache hit)."""

    matrix: np.ndarray
    key: str
    path: Path
    encoded: int

    def __len__(self) -> int:
        return self.matrix.shape[0]


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", label).strip("-.")[-48:] or "model"


def _chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


class EmbeddingCache:
    """Chunked, crash-safe, memory-mapped store of embedding matrices under ``root``
    (default :func:`default_cache_dir`)."""

    def __init__(self, root: str | Path | None = None, *, chunk_size: int = DEFAULT_CHUNK_SIZE,
                 progress: bool = True):
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be positive, got {chunk_size}")
        self.root = Path(root) if root is not None else default_cache_dir()
        self.chunk_size = chunk_size
        self.progress = progress

    @staticmethod
    def key(encoder: dict, items: Iterable[Any]) -> str:
        """The cache key of ``items`` (JSON-serialisable model inputs) under ``encoder``."""
        h = hashlib.sha256(json.dumps(encoder, sort_keys=True, default=str).encode())
        for item in items:
            h.update(b"\x1e")
            h.update(json.dumps(item, ensure_ascii=False).encode())
        return h.hexdigest()

    def entry_dir(self, label: str, key: str) -> Path:
        """Directory of one cache entry."""
        return self.root / f"{_slug(label)}-{key[:24]}"

    def embed(self, encoder: dict, items: Iterable[Any], encode: Callable[[list[Any]], np.ndarray], *,
              label: str = "", desc: str = "encoding") -> Embeddings:
        """Embeddings of ``items`` from the cache, encoding (chunk by chunk) only what is missing.

        ``items`` must be re-iterable (a list, or an object whose ``__iter__`` starts over,
        such as a streamed corpus view): it is read once to compute the key and once more
        to encode. ``encode`` maps a list of items to a 2-D float array, one row each.
        ``encoder`` describes everything besides the items that changes the vectors; it is
        kept in the manifest. ``label`` (the model's name) starts the entry's directory name.
        """
        if iter(items) is items:
            raise TypeError("items must be re-iterable (a list or a re-iterable view), not a one-shot iterator")
        key = self.key(encoder, items)
        entry = self.entry_dir(label or str(encoder.get("model", "")), key)
        manifest = entry / MANIFEST
        if manifest.is_file() and (entry / MATRIX).is_file():
            return Embeddings(np.load(entry / MATRIX, mmap_mode="r"), key, entry, 0)

        entry.mkdir(parents=True, exist_ok=True)
        chunk_files: list[Path] = []
        encoded = 0
        n_items = 0
        total = len(items) if isinstance(items, Sized) else None
        with tqdm(desc=desc, total=total, unit="input", disable=not self.progress) as bar:
            for i, chunk in enumerate(_chunks(items, self.chunk_size)):
                chunk_files.append(self.chunk_path(entry, i))
                n_items += len(chunk)
                if self.write_chunk(entry, i, chunk, encode):
                    encoded += len(chunk)
                bar.update(len(chunk))
        if not chunk_files:
            raise ValueError("nothing to embed (no inputs)")

        dim = self._join(entry, chunk_files, n_items)
        info = {"key": key, "encoder": encoder, "rows": n_items, "dim": dim,
                "chunk_size": self.chunk_size}
        atomic.write_text(manifest, json.dumps(info, indent=2, sort_keys=True, default=str))
        for path in entry.glob("chunk*.npy"):  # this run's chunks and any left by another chunk size
            path.unlink(missing_ok=True)
        return Embeddings(np.load(entry / MATRIX, mmap_mode="r"), key, entry, encoded)

    def chunk_path(self, entry: Path, index: int) -> Path:
        """File of chunk ``index`` (inputs ``index * chunk_size`` onwards) of an entry; the chunk
        size is in the name, so a size change never mixes chunks."""
        return entry / f"chunk{self.chunk_size}-{index:06d}.npy"

    def write_chunk(self, entry: Path, index: int, chunk: Sequence[Any],
                    encode: Callable[[list[Any]], np.ndarray]) -> bool:
        """Encode and atomically write chunk ``index`` of ``entry`` (its inputs ``chunk``) unless a
        complete one is already there; True when it was written. :meth:`embed` calls this for
        every chunk; a sharded encoder (:mod:`instir.distributed.encode`) calls it from many
        workers for disjoint chunk indices, and :meth:`embed` then only joins them."""
        path = self.chunk_path(entry, index)
        if path.is_file() and np.load(path, mmap_mode="r").shape[0] == len(chunk):
            return False
        vectors = np.asarray(encode(list(chunk)), dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(chunk):
            raise ValueError(f"encode returned shape {vectors.shape} for {len(chunk)} inputs")
        entry.mkdir(parents=True, exist_ok=True)
        atomic.save_array(path, vectors)
        return True

    @staticmethod
    def _join(entry: Path, chunk_files: Sequence[Path], n_rows: int) -> int:
        """Copy the chunks into one ``.npy`` (written under a temporary name, then renamed);
        returns the embedding dimension."""
        first = np.load(chunk_files[0], mmap_mode="r")
        fd, tmp = tempfile.mkstemp(dir=entry, prefix=f".{MATRIX}.", suffix=".tmp")
        os.close(fd)
        try:
            out = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float32, shape=(n_rows, first.shape[1]))
            row = 0
            for path in chunk_files:
                part = np.load(path, mmap_mode="r")
                out[row:row + part.shape[0]] = part
                row += part.shape[0]
            out.flush()
            del out
            os.replace(tmp, entry / MATRIX)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return int(first.shape[1])
