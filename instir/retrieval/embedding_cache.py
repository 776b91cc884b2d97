"""On-disk embedding cache: a corpus is encoded once per model and input format.

A cache entry is one embedding matrix, keyed by a SHA-256 over a description of the encoder
(model identity and fingerprint, precision, window settings …) and over every model input
in order (so it changes with the corpus content, its order and the template). Encoding runs
in chunks of ``chunk_size`` inputs; each finished chunk is written atomically as its own
``.npy`` file (temporary name + :func:`os.replace`), so a crash mid-encode keeps the finished
chunks and a rerun encodes only the missing ones. When every chunk exists they are joined
into one ``embeddings.npy``, a small ``manifest.json`` is written last (its presence marks the
entry complete), the chunk files are removed, and the matrix is opened memory-mapped.

Integrity. Each chunk is written with its SHA-256 beside it (``<chunk>.npy.sha256``, written
first) and checked before it is reused; the manifest records the joined matrix's shape, size
and SHA-256. On a cache hit the matrix's size and ``.npy`` header are always checked against
the manifest, and its SHA-256 too when it is at most :data:`FULL_HASH_BYTES` (1 GiB). A chunk
or matrix that fails (truncated, zeroed, overwritten, not a ``.npy``) is never used: a warning
names the file, it is removed and rebuilt. Beyond 1 GiB the hash would add seconds to every hit
(``python -m perf.embedding_cache_verify`` measures it), so only size and header are checked
there (a same-size overwrite of the data goes unnoticed).

Layout: ``<root>/<label>-<key[:24]>/{manifest.json, embeddings.npy, chunk<size>-000000.npy[.sha256] …}``.
Deleting any entry (or the whole root) is always safe: it is rebuilt on the next run.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from instir import atomic
from instir.benchmarks.types import Corpus
from instir.home import instir_home
from instir.progress import tqdm

MANIFEST = "manifest.json"
MATRIX = "embeddings.npy"
DEFAULT_CHUNK_SIZE = 4096
#: ``embeddings.npy`` up to this size is checked against its SHA-256 on every cache hit;
#: larger ones by size and header only (see the module docstring).
FULL_HASH_BYTES = 1 << 30


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
        if (entry / MANIFEST).exists():
            matrix = self.verified_matrix(entry)
            if matrix is not None:
                return Embeddings(matrix, key, entry, 0)

        entry.mkdir(parents=True, exist_ok=True)
        chunk_files: list[Path] = []
        encoded = 0
        n_items = 0
        total = len(items) if isinstance(items, Sized) else None
        with tqdm(desc=desc, total=total, unit="input", disable=not self.progress) as bar:
            for i, chunk in enumerate(in_chunks(items, self.chunk_size)):
                chunk_files.append(self.chunk_path(entry, i))
                n_items += len(chunk)
                if self.write_chunk(entry, i, chunk, encode):
                    encoded += len(chunk)
                bar.update(len(chunk))
        if not chunk_files:
            raise ValueError("nothing to embed (no inputs)")

        matrix = self.join_chunks(entry, chunk_files, n_items)
        info = {"key": key, "encoder": encoder, "rows": n_items, "dim": matrix["shape"][1],
                "chunk_size": self.chunk_size, "matrix": matrix}
        atomic.write_text(entry / MANIFEST, json.dumps(info, indent=2, sort_keys=True, default=str))
        for path in entry.glob("chunk*"):  # this run's chunks (and checksums), and any of another chunk size
            path.unlink(missing_ok=True)
        return Embeddings(np.load(entry / MATRIX, mmap_mode="r"), key, entry, encoded)

    # ------------------------------------------------------------ chunks

    def chunk_path(self, entry: Path, index: int) -> Path:
        """File of chunk ``index`` (inputs ``index * chunk_size`` onwards) of an entry; the chunk
        size is in the name, so a size change never mixes chunks."""
        return entry / f"chunk{self.chunk_size}-{index:06d}.npy"

    def has_chunk(self, entry: Path, index: int, n_rows: int) -> bool:
        """Whether chunk ``index`` of ``entry`` is on disk, complete (``n_rows``) and matching its
        checksum; a chunk that fails the check is removed with a warning (see :meth:`checked_chunk_ok`)."""
        return self.checked_chunk_ok(self.chunk_path(entry, index), n_rows)

    def write_chunk(self, entry: Path, index: int, chunk: Sequence[Any],
                    encode: Callable[[list[Any]], np.ndarray]) -> bool:
        """Encode and write chunk ``index`` of ``entry`` (its inputs ``chunk``) with its checksum,
        unless a verified complete one is already there; True when it was written. :meth:`embed`
        calls this for every chunk; a sharded encoder (:mod:`instir.distributed.encode`) calls it
        for disjoint chunk indices, and :meth:`embed` then only joins them."""
        if self.has_chunk(entry, index, len(chunk)):
            return False
        path = self.chunk_path(entry, index)
        vectors = np.asarray(encode(list(chunk)), dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(chunk):
            raise ValueError(f"encode returned shape {vectors.shape} for {len(chunk)} inputs")
        entry.mkdir(parents=True, exist_ok=True)
        self.write_checked_chunk(path, vectors)
        return True

    @staticmethod
    def write_checked_chunk(path: Path, vectors: np.ndarray) -> None:
        """Write one chunk and its checksum (``<chunk>.sha256``), each atomically, the checksum
        first: a chunk file on disk always has the checksum it was written with."""
        data = atomic.array_bytes(np.asarray(vectors, dtype=np.float32))
        atomic.write_text(_checksum_path(path), hashlib.sha256(data).hexdigest() + "\n")
        atomic.write_bytes(path, data)

    @staticmethod
    def checked_chunk_ok(path: Path, n_rows: int) -> bool:
        """True when the chunk exists, matches its checksum and holds ``n_rows`` float32 rows.
        A chunk that exists but fails is removed with a warning naming it (it is re-encoded);
        a missing chunk is simply not done yet."""
        if not path.is_file():
            return False
        problem = None
        try:
            data = path.read_bytes()
            expected = _checksum_path(path).read_text(encoding="ascii").strip()
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
        warnings.warn(f"embedding cache chunk {path} {problem}: re-encoding it", stacklevel=3)
        path.unlink(missing_ok=True)
        _checksum_path(path).unlink(missing_ok=True)
        return False

    # ------------------------------------------------------------ the joined matrix

    def verified_matrix(self, entry: Path) -> np.ndarray | None:
        """The entry's matrix, memory-mapped, when its manifest and ``embeddings.npy`` agree:
        the file's size and ``.npy`` header always, its SHA-256 too when the file is at most
        :data:`FULL_HASH_BYTES` (see the module docstring for the cost). Otherwise a warning
        naming the failing file, the entry's matrix and manifest are removed, and None."""
        manifest, matrix = entry / MANIFEST, entry / MATRIX
        problem, failing = None, manifest
        try:
            info = json.loads(manifest.read_text(encoding="utf-8"))
            rows, dim = int(info["rows"]), int(info["dim"])
        except (OSError, ValueError, KeyError, TypeError):
            problem = "is unreadable"
        else:
            failing = matrix
            recorded = info.get("matrix") or {}  # entries written before checksums: size and header only
            try:
                size = matrix.stat().st_size
                with matrix.open("rb") as fh:
                    shape, dtype = npy_header(fh)
                    offset = fh.tell()
            except (OSError, ValueError):
                problem = "is missing or has no valid .npy header"
            else:
                if shape != (rows, dim) or dtype != np.float32:
                    problem = f"holds {shape} {dtype} where the manifest says ({rows}, {dim}) float32"
                elif size != offset + rows * dim * 4 or size != recorded.get("bytes", size):
                    problem = f"has {size} bytes where {offset + rows * dim * 4} are expected (truncated?)"
                elif ("sha256" in recorded and size <= FULL_HASH_BYTES
                      and atomic.file_sha256(matrix) != recorded["sha256"]):
                    problem = "does not match the checksum in its manifest"
        if problem is None:
            return np.load(matrix, mmap_mode="r")
        warnings.warn(f"embedding cache file {failing} {problem}: rebuilding the entry", stacklevel=3)
        manifest.unlink(missing_ok=True)
        matrix.unlink(missing_ok=True)
        return None

    @staticmethod
    def join_chunks(entry: Path, chunk_files: Sequence[Path], n_rows: int) -> dict:
        """Copy the (verified) chunks into one ``.npy`` (written under a temporary name, then
        renamed); returns what the manifest records of it: shape, size in bytes and SHA-256.

        The matrix is written with plain writes after its full size is reserved
        (:func:`instir.atomic.stream`), never through a memory map: on a full disk that is an
        ``OSError`` naming the file (and no temporary file is left), not a ``SIGBUS``."""
        dim = int(np.load(chunk_files[0], mmap_mode="r").shape[1])
        header = io.BytesIO()
        np.lib.format.write_array_header_1_0(header, {"descr": np.lib.format.dtype_to_descr(np.dtype("<f4")),
                                                      "fortran_order": False, "shape": (n_rows, dim)})
        size = len(header.getvalue()) + n_rows * dim * 4
        with atomic.stream(entry / MATRIX, size=size) as out:
            out.write(header.getvalue())
            rows = 0
            for path in chunk_files:
                part = np.load(path, mmap_mode="r")
                if part.ndim != 2 or part.shape[1] != dim or part.dtype != np.float32:
                    raise ValueError(f"{path} holds {part.shape} {part.dtype} where (rows, {dim}) float32 is expected")
                rows += part.shape[0]
                if rows > n_rows:
                    break
                out.write(np.ascontiguousarray(part, dtype="<f4"))
            if rows != n_rows:
                raise ValueError(f"the chunks of {entry} hold {rows} rows where {n_rows} are expected")
            record = {"shape": [n_rows, dim], "bytes": out.written, "sha256": out.hexdigest()}
        return record


def _checksum_path(chunk: Path) -> Path:
    return chunk.with_name(chunk.name + ".sha256")


def npy_header(fh) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from a C-ordered ``.npy`` header (the file position is left at the data);
    raises ValueError when there is no valid header. The caches check their matrices with it."""
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
