"""On-disk embedding cache: a corpus is encoded once per model and input format.

A cache entry is one embedding matrix in the kit's one verified store (:mod:`instir.verified_store`:
published whole, verified on every load, removed with a warning when damaged), keyed by a SHA-256
over a description of the encoder (model identity and fingerprint, precision, window settings …)
and over every model input in order (so it changes with the corpus content, its order and the
template). Encoding runs in chunks of ``chunk_size`` inputs; each finished chunk is a checksummed
part in the entry's work folder (:func:`~instir.verified_store.write_part`), so a crash mid-encode
keeps the finished chunks and a rerun encodes only the missing ones; one process at a time encodes an
entry (:meth:`~instir.verified_store.VerifiedStore.build`: another waits, then reads it). When every chunk
exists they are joined into one ``embeddings.npy`` (its SHA-256 computed while it is written), the entry is
published, the chunks removed, and the matrix is opened memory-mapped. On a load the matrix must be
float32 with the number of rows its manifest records.

An entry written by an earlier kit (its ``manifest.json`` records the matrix but no file list) is
checked as before and taken over, not encoded again.

Layout: ``<root>/<label>-<key[:24]>/{manifest.json, embeddings.npy}``, chunks in
``<root>/<label>-<key[:24]>.partial/chunk<size>-000000.npy[.sha256] …`` until the entry is complete.
Deleting any entry (or the whole root) is always safe: it is rebuilt on the next run.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from instir import atomic, verified_store
from instir.benchmarks.types import Corpus
from instir.home import instir_home
from instir.inputs import read_json
from instir.progress import tqdm
from instir.verified_store import Damaged, Entry, VerifiedStore, npy_header, part_ok, write_part

MANIFEST = verified_store.MANIFEST
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


class CorpusTexts:
    """The re-iterable ``[title, text]`` items of a corpus, in corpus order: what a document
    cache entry's key hashes and what document encoders receive chunk by chunk."""

    def __init__(self, corpus: Corpus):
        self.corpus = corpus

    def __iter__(self) -> Iterator[list[str]]:
        return ([doc.title, doc.text] for doc in self.corpus)

    def __len__(self) -> int:
        return len(self.corpus)


def in_chunks(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """``items`` as consecutive lists of ``size`` (the last one shorter)."""
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", label).strip("-.")[-48:] or "model"


class EmbeddingCache:
    """Chunked, crash-safe, memory-mapped store of embedding matrices under ``root``
    (default :func:`default_cache_dir`)."""

    def __init__(self, root: str | Path | None = None, *, chunk_size: int = DEFAULT_CHUNK_SIZE,
                 progress: bool = True):
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be positive, got {chunk_size}")
        self.entries = VerifiedStore(root if root is not None else default_cache_dir(), "embedding cache")
        self.root = self.entries.root
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
        return self.entries.entry_dir(f"{_slug(label)}-{key[:24]}")

    def work_dir(self, entry: Path) -> Path:
        """Folder of the chunks of ``entry`` until it is complete."""
        return self.entries.work_dir(entry.name)

    def embed(self, encoder: dict, items: Iterable[Any], encode: Callable[[list[Any]], np.ndarray], *,
              label: str = "", desc: str = "encoding") -> Embeddings:
        """Embeddings of ``items`` from the cache, encoding (chunk by chunk) only what is missing.

        ``items`` must be re-iterable (a list, or an object whose ``__iter__`` starts over,
        such as a streamed corpus view): it is read once to compute the key and once more
        to encode. ``encode`` maps a list of items to a 2-D float array, one row each.
        ``encoder`` describes everything besides the items that changes the vectors; it is
        kept in the manifest. ``label`` (the model's name) starts the entry's directory name.
        """
        key, entry = self.entry_of(encoder, items, label)
        _take_over_earlier_entry(entry, key)

        def make(_work: Path) -> Embeddings:
            if self.entries.work_folder(entry.name) is None:  # a cache folder that cannot be written: in memory
                matrix = np.concatenate([self.vectors(chunk, encode) for _, chunk in self.chunks(items, desc)])
                return Embeddings(matrix, key, entry, len(matrix))
            chunk_files: list[Path] = []
            encoded = n_items = 0
            for i, chunk in self.chunks(items, desc):
                chunk_files.append(self.chunk_path(entry, i))
                n_items += len(chunk)
                encoded += len(chunk) if self.write_chunk(entry, i, chunk, encode) else 0
            published = self.entries.put(entry.name, key, lambda folder: join_chunks(folder / MATRIX, chunk_files,
                                                                                     n_items),
                                         description=encoder, meta={"rows": n_items, "chunk_size": self.chunk_size},
                                         fallback=False)
            return Embeddings(np.load(published.path / MATRIX, mmap_mode="r"), key, entry, encoded)

        return self.entries.build(entry.name, key, lambda found: Embeddings(_open_matrix(found), key, entry, 0), make,
                                  required=(MATRIX,))

    # ------------------------------------------------------------ chunks

    def entry_of(self, encoder: dict, items: Iterable[Any], label: str = "") -> tuple[str, Path]:
        """The key and the entry folder of ``items`` under ``encoder`` (``label``, else the encoder's model, starts
        its name). ``items`` must be re-iterable: they are read here for the key and again to encode."""
        if iter(items) is items:
            raise TypeError("items must be re-iterable (a list or a re-iterable view), not a one-shot iterator")
        key = self.key(encoder, items)
        return key, self.entry_dir(label or str(encoder.get("model", "")), key)

    def chunks(self, items: Iterable[Any], desc: str) -> Iterator[tuple[int, list[Any]]]:
        """``items`` as numbered lists of :attr:`chunk_size`, under a progress bar counting inputs; none at all is
        a ``ValueError``. The chunk loop of every matrix this cache holds (vectors here, token matrices in
        :mod:`instir.retrieval.token_cache`)."""
        total = len(items) if isinstance(items, Sized) else None
        with tqdm(desc=desc, total=total, unit="input", disable=not self.progress) as bar:
            i = -1
            for i, chunk in enumerate(in_chunks(items, self.chunk_size)):
                yield i, chunk
                bar.update(len(chunk))
        if i < 0:
            raise ValueError("nothing to embed (no inputs)")

    def chunk_path(self, entry: Path, index: int) -> Path:
        """File of chunk ``index`` (inputs ``index * chunk_size`` onwards) of an entry; the chunk
        size is in the name, so a size change never mixes chunks."""
        return self.work_dir(entry) / f"chunk{self.chunk_size}-{index:06d}.npy"

    def has_chunk(self, entry: Path, index: int, n_rows: int) -> bool:
        """Whether chunk ``index`` of ``entry`` is on disk, complete (``n_rows``) and matching its
        checksum; a chunk that fails the check is removed with a warning."""
        return part_ok(self.chunk_path(entry, index), n_rows, what="embedding cache chunk")

    def write_chunk(self, entry: Path, index: int, chunk: Sequence[Any],
                    encode: Callable[[list[Any]], np.ndarray]) -> bool:
        """Encode and write chunk ``index`` of ``entry`` (its inputs ``chunk``) with its checksum,
        unless a verified complete one is already there; True when it was written. :meth:`embed`
        calls this for every chunk; a sharded encoder (:mod:`instir.distributed.encode`) calls it
        for disjoint chunk indices, and :meth:`embed` then only joins them."""
        if self.has_chunk(entry, index, len(chunk)):
            return False
        vectors = self.vectors(chunk, encode)
        path = self.chunk_path(entry, index)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_part(path, vectors)
        return True

    @staticmethod
    def vectors(chunk: Sequence[Any], encode: Callable[[list[Any]], np.ndarray]) -> np.ndarray:
        """``encode(chunk)`` as float32, one row per input (else a ``ValueError``)."""
        vectors = np.asarray(encode(list(chunk)), dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(chunk):
            raise ValueError(f"encode returned shape {vectors.shape} for {len(chunk)} inputs")
        return vectors

    # ------------------------------------------------------------ the joined matrix

    def verified_matrix(self, entry: Path, key: str) -> np.ndarray | None:
        """The entry's matrix, memory-mapped, when it passes the store's checks and its shape is the
        manifest's; else None (a damaged entry is removed with a warning naming the file)."""
        _take_over_earlier_entry(entry, key)
        return self.entries.read(entry.name, key, _open_matrix, required=(MATRIX,))


def _open_matrix(entry: Entry) -> np.ndarray:
    """The memory-mapped matrix of a verified entry whose shape is the one its manifest records."""
    path = entry.path / MATRIX
    matrix = np.load(path, mmap_mode="r")
    rows = entry.meta.get("rows")
    if matrix.dtype != np.float32 or matrix.ndim != 2 or matrix.shape[0] != rows:
        raise Damaged(path, f"holds {matrix.shape} {matrix.dtype} where ({rows}, dim) float32 is expected")
    return matrix


#: A chunk (or its checksum) that an earlier kit's encoding wrote in its entry's own folder, before the store's
#: ``<entry>.partial/`` work folder held them.
_EARLIER_CHUNK = re.compile(r"chunk\d+-\d{6}\.npy(\.sha256)?")


def _take_over_earlier_chunks(entry: Path) -> None:
    """Move the chunks an earlier kit's interrupted encoding left in the entry's own folder (no manifest yet, each
    chunk with its checksum) into the entry's work folder, where the next encoding resumes from each that matches its
    checksum and row count (:func:`~instir.verified_store.part_ok`), and remove the emptied folder. A folder holding
    anything else is left for the store to judge."""
    try:
        if entry.is_symlink() or not entry.is_dir() or (entry / MANIFEST).exists():
            return
        names = [path.name for path in entry.iterdir()]
        if not names or not all(_EARLIER_CHUNK.fullmatch(name) for name in names):
            return
        work = entry.with_name(entry.name + verified_store.PARTIAL)
        work.mkdir(exist_ok=True)
        for name in sorted(names, key=lambda name: not name.endswith(".sha256")):  # each checksum before its chunk
            if not (work / name).exists():
                os.replace(entry / name, work / name)
        shutil.rmtree(entry)  # what is left: chunks the work folder already held
    except OSError:
        return


def _take_over_earlier_entry(entry: Path, key: str) -> None:
    """Rewrite the manifest of an entry written by an earlier kit (the matrix recorded under
    ``matrix``, no file list) in the store's format, once its matrix has the recorded shape and size
    (and checksum, when recorded); an earlier kit's interrupted encoding resumes from its chunks
    (:func:`_take_over_earlier_chunks`); anything else is left for the store to judge."""
    _take_over_earlier_chunks(entry)
    try:
        info = read_json(entry / MANIFEST)  # a FIFO in its place would block a read for ever
        if not isinstance(info, dict) or "files" in info or info.get("key") != key:
            return
        rows, dim = int(info["rows"]), int(info["dim"])
        path = entry / MATRIX
        with path.open("rb") as fh:
            shape, dtype = npy_header(fh)
            size = fh.tell() + rows * dim * 4
        recorded = info.get("matrix") or {}
        if shape != (rows, dim) or dtype != np.float32 or path.stat().st_size != size:
            return
        digest = atomic.file_sha256(path)
        if recorded.get("sha256", digest) != digest:
            return
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return
    atomic.write_text(entry / MANIFEST, json.dumps(
        {"format": verified_store.FORMAT_VERSION, "key": key, "build": info.get("build", "earlier kit"),
         "description": info.get("encoder"), "meta": {"rows": rows, "chunk_size": info.get("chunk_size")},
         "files": {MATRIX: {"bytes": size, "sha256": digest}}}, indent=2, sort_keys=True, default=str))


def join_chunks(path: Path, chunk_files: Sequence[Path], n_rows: int) -> dict[str, str]:
    """Copy the (verified) chunks into one ``.npy`` at ``path`` (written under a temporary name, then
    renamed); returns its SHA-256 by file name, computed while writing.

    The matrix is written with plain writes after its full size is reserved
    (:func:`instir.atomic.stream`), never through a memory map: on a full disk that is an
    ``OSError`` naming the file (and no temporary file is left), not a ``SIGBUS``."""
    dim = int(np.load(chunk_files[0], mmap_mode="r").shape[1])
    header = atomic.npy_prefix("<f4", (n_rows, dim))
    with atomic.stream(path, size=len(header) + n_rows * dim * 4) as out:
        out.write(header)
        rows = 0
        for chunk in chunk_files:
            part = np.load(chunk, mmap_mode="r")
            if part.ndim != 2 or part.shape[1] != dim or part.dtype != np.float32:
                raise ValueError(f"{chunk} holds {part.shape} {part.dtype} where (rows, {dim}) float32 is expected")
            rows += part.shape[0]
            if rows > n_rows:
                break
            out.write(np.ascontiguousarray(part, dtype="<f4"))
        if rows != n_rows:
            raise ValueError(f"the chunks in {chunk_files[0].parent} hold {rows} rows where {n_rows} are expected")
    return {path.name: out.hexdigest()}
