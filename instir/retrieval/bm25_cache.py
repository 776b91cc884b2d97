"""On-disk BM25 index cache: a corpus is tokenised and indexed once per BM25 setting and
document format, then memory-mapped by every later search (any ``k``, any query template).

An entry is keyed by a SHA-256 over a JSON description of everything that changes the index
(:func:`entry_key` of :meth:`instir.retrieval.lexical.BM25Retriever.index_description`). It holds
what :meth:`bm25s.BM25.save` writes (:data:`BM25S_FILES`), ``doc_ids.json`` (document ids in
index order, checked against the corpus's ids on load) and ``manifest.json``, written last, with
the key, its description and every file's size and SHA-256.

Writing. An entry is built in a temporary folder beside it, its files flushed to disk, the
manifest written last, and the folder renamed into place: the last writer wins and a reader
never sees a half-written entry; a reader that finds the manifest changed under it (a swap
mid-load) starts over once. A cache folder that cannot be written only costs a warning: the
index is then kept in memory by the retriever that built it.

Verification. On every load each file's size is checked against the manifest, each ``.npy``
header against its size, and the files' SHA-256 too, smallest first, up to
:data:`FULL_HASH_BYTES` (1 GiB) in all; beyond that budget only sizes and headers are checked
(a same-size overwrite of the data goes unnoticed there). A file that fails (missing,
truncated, zeroed, overwritten, an unreadable manifest, ids that are not the corpus's) is
never used: a warning names the file and the problem, the entry is removed and the caller
rebuilds it.

Layout: ``<root>/<key[:32]>/{manifest.json, doc_ids.json, *.index.npy, *.index.json}``. Deleting
any entry (or the whole root) is always safe: it is rebuilt on the next search.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import socket
import time
import uuid
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import bm25s
import numpy as np

from instir import atomic
from instir.home import instir_home
from instir.retrieval.embedding_cache import FULL_HASH_BYTES, MANIFEST, npy_header

#: Bumped when the entry layout or what the key describes changes (older entries are then never found).
FORMAT_VERSION = 1
DOC_IDS = "doc_ids.json"
#: What :meth:`bm25s.BM25.save` writes for the kit's methods (``lucene``, ``robertson``, ``atire``);
#: ``bm25l``/``bm25+`` add ``nonoccurrence_array.index.npy``, recorded in the manifest like the rest.
BM25S_FILES = ("data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy", "vocab.index.json",
               "params.index.json")
#: A writer's temporary folder (``.<entry>.<pid>@<host>.<build>.tmp``) or an entry set aside
#: (``….old``) older than this was left by a crashed process, wherever it ran; one named for a
#: process of this host that no longer runs is removed at once. The next write of any entry does both.
STALE_SECONDS = 6 * 3600
#: Who writes a temporary folder, as its name says: ``<pid>@<host>``.
WRITER = f"{os.getpid()}@{socket.gethostname()}"


def default_cache_dir() -> Path:
    """``<instir home>/bm25`` (``$INSTIR_HOME``, default ``~/.cache/instir``)."""
    return instir_home() / "bm25"


def entry_key(description: dict) -> str:
    """The cache key of an index described by ``description`` (JSON-ready; see the module docstring)."""
    return hashlib.sha256(json.dumps({"format": FORMAT_VERSION, **description}, sort_keys=True,
                                     default=str).encode()).hexdigest()


@dataclass(frozen=True)
class CachedIndex:
    """A bm25s model from the cache (its score arrays memory-mapped) and its document ids."""

    model: bm25s.BM25
    doc_ids: list[str]
    path: Path
    seconds: float


class BM25IndexCache:
    """Crash-safe, verified, memory-mapped store of bm25s indexes under ``root``
    (default :func:`default_cache_dir`)."""

    def __init__(self, root: str | Path | None = None):
        self.root = Path(root) if root is not None else default_cache_dir()

    def entry_dir(self, key: str) -> Path:
        """Directory of one cache entry."""
        return self.root / key[:32]

    # ------------------------------------------------------------ loading

    def load(self, key: str, doc_ids: Sequence[str]) -> CachedIndex | None:
        """The verified entry of ``key`` opened with ``bm25s.BM25.load(mmap=True)``, or None when
        there is none or it is damaged (see the module docstring); ``doc_ids`` are the corpus's ids
        in order, which the entry's must equal."""
        entry = self.entry_dir(key)
        for _ in range(2):
            start = time.perf_counter()
            build = self._build_id(entry)
            info, problem = self._manifest(entry, key)
            if info is None and problem is None:
                return None
            if problem is None:
                problem = self._verify(entry, info)
            if problem is None:
                failing = entry
                try:
                    model = bm25s.BM25.load(entry, mmap=True, show_progress=False)
                    failing = entry / DOC_IDS
                    stored = json.loads(failing.read_text(encoding="utf-8"))
                except (OSError, ValueError, KeyError, TypeError) as err:
                    problem = (failing, f"cannot be loaded ({type(err).__name__}: {err})")
                else:
                    if not isinstance(stored, list):
                        problem = (failing, "holds no list of document ids")
                    elif stored != list(doc_ids) or model.scores["num_docs"] != len(stored):
                        problem = (failing, f"holds {len(stored)} document ids that are not the corpus's "
                                            f"{len(doc_ids)} in order")
            if self._build_id(entry) != build:
                continue  # another writer replaced the entry while it was read: read the new one
            if problem is None:
                return CachedIndex(model, stored, entry, time.perf_counter() - start)
            path, what = problem
            warnings.warn(f"BM25 index cache file {path} {what}: rebuilding the index", stacklevel=3)
            self._remove(entry)
            return None
        return None

    @staticmethod
    def _manifest(entry: Path, key: str) -> tuple[dict | None, tuple[Path, str] | None]:
        """The entry's manifest, or (None, None) when there is no entry, or (None, problem)."""
        path = entry / MANIFEST
        try:
            text = path.read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError):
            if entry.is_dir() and any(entry.iterdir()):
                return None, (path, "is missing")
            return None, None
        except OSError as err:
            return None, (path, f"is unreadable ({err})")
        try:
            info = json.loads(text)
            files = info["files"]
            ok = (info.get("key") == key and info.get("format") == FORMAT_VERSION and isinstance(files, dict)
                  and all(isinstance(f.get("bytes"), int) and isinstance(f.get("sha256"), str) for f in files.values()))
        except (ValueError, KeyError, TypeError, AttributeError):
            ok = False
        if not ok:
            return None, (path, "is not a complete manifest of this entry (truncated, zeroed or overwritten)")
        missing = [name for name in (*BM25S_FILES, DOC_IDS) if name not in files]
        if missing:
            return None, (path, f"does not list {', '.join(missing)}")
        return info, None

    @staticmethod
    def _verify(entry: Path, info: dict) -> tuple[Path, str] | None:
        """The first problem of the entry's files against its manifest (see the module docstring)."""
        files = info["files"]
        for name, record in files.items():
            path = entry / name
            try:
                size = path.stat().st_size
            except OSError:
                return path, "is missing"
            if size != record["bytes"]:
                return path, f"has {size} bytes where the manifest says {record['bytes']} (truncated?)"
            if name.endswith(".npy"):
                try:
                    with path.open("rb") as fh:
                        expected = _npy_bytes(fh)
                except (OSError, ValueError) as err:
                    return path, f"has no valid .npy header ({err})"
                if expected != size:
                    return path, f"has {size} bytes where its .npy header says {expected}"
        budget = FULL_HASH_BYTES
        for name, record in sorted(files.items(), key=lambda item: (item[1]["bytes"], item[0])):
            if record["bytes"] > budget:
                break
            budget -= record["bytes"]
            path = entry / name
            try:
                digest = atomic.file_sha256(path)
            except OSError:
                return path, "is unreadable"
            if digest != record["sha256"]:
                return path, "does not match the checksum in its manifest (zeroed or overwritten)"
        return None

    @staticmethod
    def _build_id(entry: Path) -> str | None:
        try:
            return json.loads((entry / MANIFEST).read_text(encoding="utf-8")).get("build")
        except (OSError, ValueError, AttributeError):
            return None

    def _remove(self, entry: Path) -> None:
        """Remove an entry: renamed aside first (one step for other readers), then deleted."""
        trash = entry.with_name(f".{entry.name}.{uuid.uuid4().hex}.old")
        try:
            os.rename(entry, trash)
        except OSError:
            shutil.rmtree(entry, ignore_errors=True)
        else:
            shutil.rmtree(trash, ignore_errors=True)

    # ------------------------------------------------------------ storing

    def store(self, key: str, description: dict, model: bm25s.BM25, doc_ids: Sequence[str]) -> Path | None:
        """Write ``model`` (a built bm25s index) and its ``doc_ids`` as the entry of ``key``; returns
        the entry's path, or None with a warning when the cache folder cannot be written (the
        caller keeps the index in memory)."""
        entry = self.entry_dir(key)
        build = uuid.uuid4().hex
        tmp = entry.with_name(f".{entry.name}.{WRITER}.{build}.tmp")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            self._sweep()
            tmp.mkdir()
            model.save(tmp, show_progress=False)
            atomic.write_text(tmp / DOC_IDS, json.dumps(list(doc_ids), ensure_ascii=False))
            files = {}
            for path in sorted(tmp.iterdir()):
                with path.open("rb") as fh:
                    os.fsync(fh.fileno())
                files[path.name] = {"bytes": path.stat().st_size, "sha256": atomic.file_sha256(path)}
            info = {"format": FORMAT_VERSION, "key": key, "build": build, "description": description,
                    "documents": len(doc_ids), "bm25s": bm25s.__version__, "files": files,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
            atomic.write_text(tmp / MANIFEST, json.dumps(info, indent=2, sort_keys=True, default=str))
            self._publish(tmp, entry)
        except OSError as err:
            shutil.rmtree(tmp, ignore_errors=True)
            warnings.warn(f"BM25 index cache {self.root} cannot be written ({type(err).__name__}: {err}): "
                          f"the index is kept in memory only", stacklevel=3)
            return None
        return entry

    def _sweep(self) -> None:
        """Remove what crashed writers of any entry left in the cache: temporaries of a process of
        this host that no longer runs, and anything older than :data:`STALE_SECONDS` (a live
        writer's folder is younger, or names a running process)."""
        cutoff = time.time() - STALE_SECONDS
        for left in [*self.root.glob(".*.tmp"), *self.root.glob(".*.old")]:
            try:
                if _writer_gone(left.name) or left.stat().st_mtime < cutoff:
                    shutil.rmtree(left, ignore_errors=True)
            except OSError:
                pass

    def _publish(self, tmp: Path, entry: Path) -> None:
        """Rename the finished ``tmp`` folder to ``entry``; an entry already there is renamed aside
        and removed (last writer wins)."""
        for attempt in range(3):
            try:
                os.rename(tmp, entry)
                return
            except OSError as err:
                if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
            if attempt == 2:  # other writers keep replacing it: the entry that stopped this rename stands
                break
            self._remove(entry)  # always followed by a rename, so an entry is left either way
        shutil.rmtree(tmp, ignore_errors=True)


_TEMPORARY = re.compile(r"\.(?P<pid>\d+)@(?P<host>[^/]+)\.[0-9a-f]{32}\.tmp$")


def _writer_gone(name: str) -> bool:
    """Whether the temporary ``name`` (``.<entry>.<pid>@<host>.<build>.tmp``) was written by a
    process of this host that has ended (False when the name does not say, or names another host)."""
    named = _TEMPORARY.search(name)
    if named is None or named["host"] != socket.gethostname():
        return False
    pid = named["pid"]
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # it runs, under another user
    return False


def _npy_bytes(fh) -> int:
    """The size in bytes a ``.npy`` file must have by its header (raises ValueError without one)."""
    shape, dtype = npy_header(fh)
    if dtype.hasobject:
        raise ValueError("object array")
    return fh.tell() + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
