"""On-disk BM25 index cache: a corpus is tokenised and indexed once per BM25 setting and
document format, then memory-mapped by every later search (any ``k``, any query template).

An entry of the kit's one verified store (:mod:`instir.verified_store`: written whole or not at
all, verified on every load, removed with a warning when damaged; built by one process at a time,
another waiting for it and then loading its entry) is keyed by a SHA-256 over a
JSON description of everything that changes the index (:func:`entry_key` of
:meth:`instir.retrieval.lexical.BM25Retriever.index_description`). It holds what
:meth:`bm25s.BM25.save` writes (:data:`BM25S_FILES`) and ``doc_ids.json`` (document ids in index
order, which must be the corpus's on load). A cache folder that cannot be written only costs a
warning: the index is then kept in memory by the retriever that built it.

Layout: ``<root>/<key[:32]>/{manifest.json, doc_ids.json, *.index.npy, *.index.json}``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import bm25s

from instir import atomic
from instir.home import instir_home
from instir.stamps import json_sha256
from instir.verified_store import Damaged, Entry, VerifiedStore

#: Bumped when what the key describes changes (older entries are then never found).
FORMAT_VERSION = 1
DOC_IDS = "doc_ids.json"
#: What :meth:`bm25s.BM25.save` writes for the kit's methods (``lucene``, ``robertson``, ``atire``);
#: ``bm25l``/``bm25+`` add ``nonoccurrence_array.index.npy``, recorded in the manifest like the rest.
BM25S_FILES = ("data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy", "vocab.index.json",
               "params.index.json")


def default_cache_dir() -> Path:
    """``<instir home>/bm25`` (``$INSTIR_HOME``, default ``~/.cache/instir``)."""
    return instir_home() / "bm25"


def entry_key(description: dict) -> str:
    """The cache key of an index described by ``description`` (JSON-ready; see the module docstring)."""
    return json_sha256({"format": FORMAT_VERSION, **description})


@dataclass(frozen=True)
class CachedIndex:
    """A bm25s model from the cache (its score arrays memory-mapped) and its document ids."""

    model: bm25s.BM25
    doc_ids: list[str]
    path: Path
    seconds: float


class BM25IndexCache:
    """Verified, memory-mapped store of bm25s indexes under ``root`` (default :func:`default_cache_dir`)."""

    def __init__(self, root: str | Path | None = None):
        self.entries = VerifiedStore(root if root is not None else default_cache_dir(), "BM25 index cache")
        self.root = self.entries.root

    def load(self, key: str, doc_ids: Sequence[str]) -> CachedIndex | None:
        """The verified entry of ``key`` opened with ``bm25s.BM25.load(mmap=True)``, or None when
        there is none or it is damaged; ``doc_ids`` are the corpus's ids in order, which the
        entry's must equal."""
        return self.entries.read(key[:32], key, _opener(doc_ids), required=(*BM25S_FILES, DOC_IDS))

    def load_or_build(self, key: str, doc_ids: Sequence[str], build: Callable[[], object]) -> object:
        """:meth:`load`'s :class:`CachedIndex`, else what ``build()`` returns (it publishes the entry with
        :meth:`store`), built while holding the entry's lock (:meth:`instir.verified_store.VerifiedStore.build`):
        of two processes that want the same index at once, one builds it and the other waits, with one warning,
        then loads it."""
        return self.entries.build(key[:32], key, _opener(doc_ids), lambda _work: build(),
                                  required=(*BM25S_FILES, DOC_IDS))

    def scratch(self, key: str) -> AbstractContextManager[Path]:
        """A folder of this build's own beside the entry of ``key``, for its scratch files (removed on exit;
        :meth:`instir.verified_store.VerifiedStore.scratch`); ``OSError`` when the cache cannot be written."""
        return self.entries.scratch(key[:32])

    def store(self, key: str, description: dict, write: Callable[[Path], Mapping[str, str] | None],
              doc_ids: Sequence[str]) -> Path | None:
        """Publish the entry of ``key``: the files :meth:`bm25s.BM25.save` writes, made by ``write(folder)``
        (which may return their SHA-256 by name), and the index's ``doc_ids``; returns the entry's path, or
        None with a warning when the cache folder cannot be written (the caller keeps the index in memory)."""
        def write_entry(folder: Path) -> Mapping[str, str] | None:
            hashes = write(folder)
            atomic.write_text(folder / DOC_IDS, json.dumps(list(doc_ids), ensure_ascii=False))
            return hashes

        entry = self.entries.put(key[:32], key, write_entry, description=description,
                                 meta={"documents": len(doc_ids), "bm25s": bm25s.__version__})
        return None if entry is None else entry.path


def _opener(doc_ids: Sequence[str]) -> Callable[[Entry], CachedIndex]:
    """The loader of an entry (:meth:`instir.verified_store.VerifiedStore.read`): ``bm25s.BM25.load(mmap=True)``,
    its stored ids checked to be ``doc_ids`` (the corpus's, in order)."""
    start = time.perf_counter()

    def open_index(entry: Entry) -> CachedIndex:
        model = bm25s.BM25.load(entry.path, mmap=True, show_progress=False)
        path = entry.path / DOC_IDS
        stored = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(stored, list):
            raise Damaged(path, "holds no list of document ids")
        if stored != list(doc_ids) or model.scores["num_docs"] != len(stored):
            raise Damaged(path, f"holds {len(stored)} document ids that are not the corpus's "
                                f"{len(doc_ids)} in order")
        return CachedIndex(model, stored, entry.path, time.perf_counter() - start)

    return open_index
