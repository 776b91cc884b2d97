"""Corpus index: what the stages ask of a corpus file (ids, size, content hash, length
statistics, a handful of passages) without parsing the whole file in every process.

:func:`build_index` makes one streaming pass with the validation of
:func:`~instir.benchmarks.readers.iter_corpus_docs`; :func:`load_index` keeps the result in the kit's
verified store (:mod:`instir.verified_store`) under ``instir_home() / "corpus-index"``, one entry per
file identity (paths, sizes, ``mtime_ns`` and ``ctime_ns``, options, :data:`INDEX_VERSION`). Besides the store's checks,
a cached entry must describe these corpus files and pass a spot check (the records of the first, the
last and a few seeded random documents re-read); one that fails warns (:class:`CorpusIndexWarning`)
and is rebuilt: never a crash, never wrong data. A file modified less than :data:`FRESH_NS` before the
build is not cached (a rewrite within the timestamp granularity could keep size and mtime, as git's
"racily clean" files); an unwritable cache keeps the index in memory; a new version of the files
replaces the entries of the earlier ones.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import re
import time
import unicodedata
import warnings
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from instir import atomic
from instir.benchmarks.readers import (
    check_file,
    check_unique,
    corpus_doc,
    decode_utf8,
    field_str,
    iter_corpus_docs,
    json_line,
    read_records,
    text_lines,
)
from instir.benchmarks.types import Corpus, Doc, FormatError, add_to_content_hash, quoted
from instir.errors import QUOTE_LIMIT
from instir.home import instir_home
from instir.verified_store import CacheWarning, Damaged, Entry, VerifiedStore

#: Version of the on-disk index format; part of every cache key (a new version builds anew).
INDEX_VERSION = 4
#: A corpus file modified this recently (ns) before the build is not cached (see the module docstring).
FRESH_NS = 2_000_000_000
#: Random documents (besides the first and the last) whose records are re-read when a cached index loads.
SPOT_CHECKS = 5

_FORMAT = "instir-corpus-index"
_INDEX_JSON = "index.json"
_RECORDS = "records.npy"
_PARQUET_COLUMNS = ("_id", "text", "title")
# the columns of records.npy: file number, byte offset (Parquet: row index), byte length, line, words
_FILE, _OFFSET, _LENGTH, _LINE, _WORDS = range(5)


class CorpusIndexWarning(CacheWarning):
    """A cached corpus index was damaged (it is removed and rebuilt), or the cache folder
    could not be written (an in-memory index is used instead)."""


class IdFormWarning(UserWarning):
    """Two document ids of a corpus are one text in two Unicode forms (NFC and NFD, e.g. ``é`` as
    one code point or as ``e`` + a combining accent): they look alike, a tool that normalizes
    merges them, and a qrels or run file must use the exact form of each."""


class StaleIndexError(FormatError):
    """A record is not where the index says (the corpus file changed since it was indexed)."""


@dataclass(frozen=True)
class FileStamp:
    """A corpus file's identity for the cache: resolved path, size in bytes, ``st_mtime_ns`` and ``st_ctime_ns``
    (which no one can set back: a file edited in place to its old size and given its old mtime back kept its stamp
    without it, and its old index served an old corpus)."""

    path: str
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, path: str | Path) -> FileStamp:
        """The stamp of ``path`` now; a missing file raises :class:`FormatError` as the readers do."""
        path = Path(path)
        check_file(path)
        st = path.stat()
        return cls(str(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ctime_ns)


@dataclass(eq=False)
class CorpusIndex:
    """Where every document of a corpus is and what the stages need to know of it, in corpus
    order. Arrays are int64 and read-only; ``offset`` is a byte offset into ``paths[file]``
    (JSON lines) or a row index (Parquet), ``length`` the record line's bytes (0 for Parquet),
    ``line`` its 1-based line (row) number."""

    paths: list[Path]
    files: tuple[FileStamp, ...]
    skip_empty: bool
    ids: list[str]
    skipped_ids: list[str]
    file: np.ndarray
    offset: np.ndarray
    length: np.ndarray
    line: np.ndarray
    word_counts: np.ndarray
    content_hash: str
    #: ``time.time_ns()`` when the build began (a file modified after it may not be in the index)
    built_ns: int = 0
    #: pairs of positions (into :attr:`ids`) of ids that differ but are equal once NFC-normalized
    id_clashes: tuple[tuple[int, int], ...] = ()

    def clash_text(self, limit: int = 3) -> str | None:
        """The id pairs of :attr:`id_clashes` as one message naming both files and lines and each
        non-ASCII id's code points (two forms look alike), the first ``limit`` pairs, then how
        many more; None when there are none."""
        if not self.id_clashes:
            return None

        def where(i: int) -> str:
            doc_id = self.ids[i]  # a form that looks like the other also shows its code points: 'K' = '\u212a'
            points = "" if doc_id.isascii() else f" = {ascii(doc_id[:QUOTE_LIMIT])}"  # the characters quoted() shows
            return f"{quoted(doc_id)}{points} ({self.paths[int(self.file[i])]}, line {int(self.line[i])})"

        pairs = "; ".join(f"{where(a)} and {where(b)}" for a, b in self.id_clashes[:limit])
        left = len(self.id_clashes) - limit
        more = f"; and {left} more pair{'s' if left > 1 else ''}" if left > 0 else ""
        return (f"document ids that differ only in Unicode normalization (NFC / NFD): {pairs}{more}; they look "
                "alike and a tool that normalizes merges them: qrels and runs must use each exact form")

    def __len__(self) -> int:
        return len(self.ids)

    def is_current(self) -> bool:
        """Whether every corpus file still has the :class:`FileStamp` (size, mtime, ctime) it had when indexed."""
        try:
            return tuple(FileStamp.of(p) for p in self.paths) == self.files
        except FormatError:
            return False

    def read(self, positions: Iterable[int]) -> list[Doc]:
        """The documents at these positions (indexes into :attr:`ids`), in corpus order, each
        read at its recorded place and validated as streaming does. Raises
        :class:`StaleIndexError` when a record there is not the indexed document."""
        wanted = sorted(set(int(i) for i in positions))
        by_file: dict[int, list[int]] = {}
        for i in wanted:
            by_file.setdefault(int(self.file[i]), []).append(i)
        found: dict[int, Doc] = {}
        for k, rows in by_file.items():
            path = self.paths[k]
            read = self._read_parquet if path.suffix == ".parquet" else self._read_jsonl
            for i, doc in read(path, rows):
                if doc is None or doc.id != self.ids[i]:
                    got = "no document" if doc is None else f"document {quoted(doc.id)}"
                    raise StaleIndexError(path, int(self.line[i]), "_id",
                                          f"{got} where the corpus index has {quoted(self.ids[i])} "
                                          "(the file changed since it was indexed)")
                found[i] = doc
        return [found[i] for i in wanted]

    def _read_jsonl(self, path: Path, rows: list[int]) -> Iterator[tuple[int, Doc | None]]:
        try:
            with open(path, "rb") as fh:
                for i in rows:
                    n, length = int(self.line[i]), int(self.length[i])
                    fh.seek(int(self.offset[i]))
                    raw = fh.read(length)
                    if len(raw) != length:
                        raise StaleIndexError(path, n, None, "the file ends before the indexed record")
                    record = json_line(decode_utf8(path, raw, n), path, n)
                    yield i, None if record is None else corpus_doc(record, path, n, skip_empty=self.skip_empty)
        except StaleIndexError:
            raise
        except (FormatError, OSError) as err:
            raise StaleIndexError(path, None, None, f"cannot read an indexed record ({err})") from None

    def _read_parquet(self, path: Path, rows: list[int]) -> Iterator[tuple[int, Doc | None]]:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(path)
            columns = [c for c in _PARQUET_COLUMNS if c in pf.schema_arrow.names]
            starts = np.cumsum([0] + [pf.metadata.row_group(g).num_rows for g in range(pf.num_row_groups)])
            by_group: dict[int, list[int]] = {}
            for i in rows:
                row = int(self.offset[i])
                if not 0 <= row < starts[-1]:
                    raise StaleIndexError(path, int(self.line[i]), None, "the file ends before the indexed row")
                by_group.setdefault(int(np.searchsorted(starts, row, side="right")) - 1, []).append(i)
            for g, members in by_group.items():
                table = pf.read_row_group(g, columns=columns)
                records = table.take([int(self.offset[i]) - int(starts[g]) for i in members]).to_pylist()
                for i, record in zip(members, records):
                    yield i, corpus_doc(record, path, int(self.line[i]), skip_empty=self.skip_empty)
        except StaleIndexError:
            raise
        except (FormatError, pa.ArrowException, OSError) as err:
            raise StaleIndexError(path, None, None, f"cannot read an indexed row ({err})") from None


# --- building -------------------------------------------------------------------------------

def build_index(paths: Iterable[str | Path], *, skip_empty: bool = False) -> CorpusIndex:
    """The index of a corpus made of these files (in order), in one streaming pass, without
    the cache. Raises the :class:`FormatError` that streaming the files raises."""
    paths = [Path(p) for p in paths]
    built_ns = time.time_ns()
    files = tuple(FileStamp.of(p) for p in paths)
    ids: list[str] = []
    skipped: list[str] = []
    columns = [array("q") for _ in range(5)]
    file_no, offsets, lengths, lines, words = columns
    h = hashlib.sha256()
    forms: dict[str, int] = {}  # NFC form -> position of the first non-ASCII id that has it (few, if any)
    clashes: list[tuple[int, int]] = []
    earlier: list[tuple[str, int]] = []  # (NFC form, position) of ids whose NFC form may come before them
    for k, path in enumerate(paths):
        seen: set[str] = set()
        for n, offset, length, record in _located_records(path):
            doc = corpus_doc(record, path, n, skip_empty=skip_empty)
            if doc is None:
                skipped.append(field_str(record, "_id", path, n))
                continue
            if doc.id in seen:
                raise FormatError(path, n, "_id", f"duplicate document id {quoted(doc.id)}")
            seen.add(doc.id)
            if forms and doc.id in forms and ids[forms[doc.id]] != doc.id:  # the NFC form after another form
                clashes.append((forms[doc.id], len(ids)))
            if not doc.id.isascii():
                form = unicodedata.normalize("NFC", doc.id)
                if form in forms and ids[forms[form]] != doc.id:
                    clashes.append((forms[form], len(ids)))
                elif form != doc.id:  # its NFC form may have come first (in any file): looked for once all are read
                    earlier.append((form, len(ids)))
                forms.setdefault(form, len(ids))
            ids.append(doc.id)
            add_to_content_hash(h, doc)
            file_no.append(k)
            offsets.append(offset)
            lengths.append(length)
            lines.append(n)
            words.append(len(doc.indexed_text.split()))
    if earlier:
        wanted, first = {form for form, _ in earlier}, {}
        for i, doc_id in enumerate(ids):
            if doc_id in wanted:
                first.setdefault(doc_id, i)
        clashes += [(first[form], i) for form, i in earlier if first.get(form, i) < i]
    arrays = [_frozen(np.frombuffer(column, dtype=np.int64)) if len(column) else _frozen(np.zeros(0, np.int64))
              for column in columns]
    return CorpusIndex(list(paths), files, skip_empty, ids, skipped, *arrays, content_hash=h.hexdigest(),
                       built_ns=built_ns, id_clashes=tuple(sorted(set(clashes))))


def _frozen(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a, dtype=np.int64)
    a.flags.writeable = False
    return a


def _located_records(path: Path) -> Iterator[tuple[int, int, int, dict[str, Any]]]:
    """``(line, byte offset, byte length, record)`` of each record of a corpus file, read with
    the readers' own line splitting and decoding (so messages are theirs); Parquet rows give
    ``(row number, row index, 0, record)``."""
    if path.suffix == ".parquet" or not path.is_file():
        for n, record in read_records(path):
            yield n, n - 1, 0, record
        return
    with open(path, "rb") as fh:
        offset = len(codecs.BOM_UTF8) if fh.read(len(codecs.BOM_UTF8)) == codecs.BOM_UTF8 else 0
    for n, line in text_lines(path):
        length = len(line) if line.isascii() else len(line.encode("utf-8"))  # the line's bytes, ending kept
        record = json_line(line, path, n)
        if record is not None:
            yield n, offset, length, record
        offset += length


# --- the cache --------------------------------------------------------------------------------

def cache_folder() -> Path:
    """Where cached corpus indexes live: ``instir_home() / "corpus-index"``."""
    return instir_home() / "corpus-index"


def load_index(paths: Iterable[str | Path], *, skip_empty: bool = False,
               cache_dir: str | Path | None = None) -> CorpusIndex:
    """The index of a corpus made of these files: the cached one when it verifies, else built
    by :func:`build_index` and cached (in ``cache_dir``, default :func:`cache_folder`). A
    damaged entry warns and is rebuilt; an unwritable cache warns and keeps the index in memory."""
    paths = [Path(p) for p in paths]
    files = tuple(FileStamp.of(p) for p in paths)
    store = _store_of(paths, cache_dir)
    name = _entry_name(files, skip_empty)
    index = store.read(name, _key(files, skip_empty), lambda entry: _verified(entry, paths, files, skip_empty),
                       required=(_INDEX_JSON, _RECORDS))
    if index is None:
        index = build_index(paths, skip_empty=skip_empty)
        _store(store, name, index)
    return index


def _store_of(paths: list[Path], cache_dir: str | Path | None) -> VerifiedStore:
    root = Path(cache_dir) if cache_dir is not None else cache_folder()
    return VerifiedStore(root, f"corpus index of {_corpus_name(paths)}", category=CorpusIndexWarning)


def _entry_name(files: Sequence[FileStamp], skip_empty: bool) -> str:
    """The cache folder name of an index: the first file's name, a hash of the paths, options
    and format version (the same for every version of the files), and a hash of their sizes
    and times."""
    slot = {"version": INDEX_VERSION, "paths": [f.path for f in files], "skip_empty": skip_empty}
    state = [[f.size, f.mtime_ns, f.ctime_ns] for f in files]
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(files[0].path).name if files else "empty")[:48]
    return f"{stem}-{_sha256(json.dumps(slot).encode())[:16]}-{_sha256(json.dumps(state).encode())[:16]}"


def _key(files: Sequence[FileStamp], skip_empty: bool) -> str:
    return _sha256(json.dumps({"format": _FORMAT, "version": INDEX_VERSION, "files": [asdict(f) for f in files],
                               "skip_empty": skip_empty}, sort_keys=True).encode())


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _verified(entry: Entry, paths: list[Path], files: tuple[FileStamp, ...], skip_empty: bool) -> CorpusIndex:
    """The index of a verified store entry after the checks of the module docstring; raises Damaged."""
    try:
        meta = json.loads((entry.path / _INDEX_JSON).read_bytes())
        table = np.load(entry.path / _RECORDS, allow_pickle=False)
        ids, skipped, content_hash = meta["ids"], meta["skipped_ids"], meta["content_hash"]
        clashes = tuple((int(a), int(b)) for a, b in meta["id_clashes"])
        ok = (isinstance(ids, list) and all(isinstance(i, str) for i in ids) and isinstance(skipped, list)
              and all(0 <= a < len(ids) and 0 <= b < len(ids) for a, b in clashes)
              and isinstance(content_hash, str) and table.dtype == np.int64 and table.shape == (len(ids), 5)
              and [FileStamp(**f) for f in meta["files"]] == list(files) and meta["skip_empty"] == skip_empty)
    except (ValueError, KeyError, TypeError, OSError, RecursionError) as err:
        raise Damaged(entry.path / _RECORDS, f"holds unreadable index data ({type(err).__name__}: {err})") from None
    if not ok:
        raise Damaged(entry.path / _INDEX_JSON, "holds contents that do not match each other or the corpus files")
    columns = [_frozen(table[:, c]) for c in range(5)]
    if len(ids) and (columns[_FILE].min() < 0 or columns[_FILE].max() >= len(files) or columns[_OFFSET].min() < 0
                     or columns[_LENGTH].min() < 0 or columns[_WORDS].min() < 0):
        raise Damaged(entry.path / _RECORDS, "holds negative or out-of-range values")
    ends = np.array([np.iinfo(np.int64).max if p.suffix == ".parquet" else f.size for p, f in zip(paths, files)])
    if len(ids) and np.any(columns[_OFFSET] + columns[_LENGTH] > ends[columns[_FILE]]):
        raise Damaged(entry.path / _RECORDS, "places a record beyond the end of its corpus file")
    index = CorpusIndex(paths, files, skip_empty, ids, skipped, *columns, content_hash=content_hash,
                        built_ns=int(entry.meta.get("built_ns", 0)), id_clashes=clashes)
    _spot_check(index, entry.path)
    return index


def _spot_check(index: CorpusIndex, entry: Path) -> None:
    """Re-read the first, the last and :data:`SPOT_CHECKS` seeded random documents."""
    n = len(index)
    if not n:
        return
    rng = np.random.default_rng(int(index.content_hash[:8], 16))
    positions = {0, n - 1, *(int(i) for i in rng.integers(0, n, size=min(SPOT_CHECKS, n)))}
    try:
        index.read(positions)
    except StaleIndexError as err:
        raise Damaged(entry / _RECORDS, f"fails a spot check: {err}") from None


def _corpus_name(paths: list[Path]) -> str:
    return str(paths[0]) + (f" (+{len(paths) - 1} more files)" if len(paths) > 1 else "")


def _store(store: VerifiedStore, name: str, index: CorpusIndex) -> None:
    """Publish ``index`` as the entry ``name`` unless a file changed during the build or is too fresh
    to trust its stamp; then remove the entries of earlier versions of the files."""
    if not index.is_current() or any(f.mtime_ns > index.built_ns - FRESH_NS for f in index.files):
        return
    meta = {"files": [asdict(f) for f in index.files], "skip_empty": index.skip_empty,
            "content_hash": index.content_hash, "ids": index.ids, "skipped_ids": index.skipped_ids,
            "id_clashes": [list(pair) for pair in index.id_clashes]}

    def write(folder: Path) -> None:
        atomic.write_bytes(folder / _INDEX_JSON, json.dumps(meta, separators=(",", ":")).encode())
        atomic.write_bytes(folder / _RECORDS, atomic.array_bytes(
            np.stack([index.file, index.offset, index.length, index.line, index.word_counts], axis=1)
            if len(index) else np.zeros((0, 5), np.int64)))

    if store.put(name, _key(index.files, index.skip_empty), write, description={"format": _FORMAT,
                 "version": INDEX_VERSION, "files": meta["files"], "skip_empty": index.skip_empty},
                 meta={"documents": len(index), "built_ns": index.built_ns}) is None:
        return
    slot = name.rsplit("-", 1)[0]
    for other in store.root.glob(f"{slot}-*"):
        if other.name != name and other.is_dir():
            store.remove(other.name)


# --- the corpus ---------------------------------------------------------------------------------

class IndexedCorpus(Corpus):
    """A :class:`Corpus` over JSON-lines or Parquet files (read in order) whose ids, length,
    content hash and word counts come from the cached :class:`CorpusIndex`, and whose
    :meth:`get` reads only the requested records. Iterating streams and validates the files
    as :func:`~instir.benchmarks.readers.iter_corpus_docs` does (documents with empty text
    dropped when ``skip_empty``)."""

    def __init__(self, paths: Iterable[str | Path], *, skip_empty: bool = False,
                 cache_dir: str | Path | None = None):
        paths = [Path(p) for p in paths]
        super().__init__(self._stream_files, paths)
        self.skip_empty = skip_empty
        self.cache_dir = cache_dir
        self._loaded: CorpusIndex | None = None
        self._where: dict[str, int] | None = None

    def _stream_files(self) -> Iterator[Doc]:
        return chain.from_iterable(iter_corpus_docs(p, skip_empty=self.skip_empty) for p in self.paths)

    def index(self) -> CorpusIndex:
        """The corpus index (loaded or built on first use, then kept); ids that differ only in
        Unicode normalization give an :class:`IdFormWarning` naming both lines, each time a
        corpus object loads its index (the pairs are kept in the cached index)."""
        if self._loaded is None:
            self._loaded = load_index(self.paths, skip_empty=self.skip_empty, cache_dir=self.cache_dir)
            clash = self._loaded.clash_text()
            if clash:
                warnings.warn(clash, IdFormWarning, stacklevel=2)
        return self._loaded

    def _reload(self, *, damaged: bool = False) -> CorpusIndex:
        """Forget the index (and, when ``damaged``, its cache entry) and load it again."""
        if damaged:
            _store_of(self.paths, self.cache_dir).remove(_entry_name(self.index().files, self.skip_empty))
        self._loaded = self._id_set = self._where = None
        return self.index()

    def ids(self) -> list[str]:
        """Document ids in corpus order (from the index)."""
        return self.index().ids

    def __len__(self) -> int:
        return len(self.index())

    def content_hash(self) -> str:
        """The content hash (as :meth:`Corpus.content_hash` computes it), from the index."""
        return self.index().content_hash

    def word_counts(self) -> np.ndarray:
        """Whitespace word counts of the documents' indexed texts in corpus order (read-only int64)."""
        return self.index().word_counts

    def get(self, doc_ids: Iterable[str]) -> dict[str, Doc]:
        """The documents with these ids (unknown ids are left out), in corpus order, reading
        only their records. A corpus file changed since the index was made is indexed again
        first; a record that is not where an unchanged file's index says is a damaged cache
        entry: it warns, is rebuilt, and the read is retried once."""
        wanted = set(doc_ids)
        index = self.index()
        if not index.is_current():
            index = self._reload()
        try:
            return self._read(index, wanted)
        except StaleIndexError as err:
            if not index.is_current():
                return self._read(self._reload(), wanted)
            warnings.warn(f"corpus index of {_corpus_name(self.paths)}: {err}; rebuilding it", CorpusIndexWarning,
                          stacklevel=2)
            return self._read(self._reload(damaged=True), wanted)

    def _read(self, index: CorpusIndex, wanted: set[str]) -> dict[str, Doc]:
        where = self._positions()
        return {doc.id: doc for doc in index.read(where[d] for d in wanted if d in where)}

    def _positions(self) -> dict[str, int]:
        """Position of each id in the index (the first, should files repeat an id)."""
        if self._where is None:
            ids = self.ids()
            where = dict(zip(ids, range(len(ids))))
            if len(where) != len(ids):
                where = {}
                for i, doc_id in enumerate(ids):
                    where.setdefault(doc_id, i)
            self._where = where
        return self._where


def jsonl_corpus(paths: str | Path | Sequence[str | Path], *, skip_empty: bool = False) -> IndexedCorpus:
    """A :class:`~instir.benchmarks.docstore.IndexedCorpus` over a corpus file or the files of one
    corpus in order (JSON lines or Parquet: a config's shards): ids, length and content hash come from
    its cached index, iterating streams. The one way every loader makes a corpus from files: raises
    at once if a file is missing or none holds a document, and, for several files, if one id is in
    two of them (at the second, naming the first: the index, which keeps per-file checks only,
    would read the first and hide the other)."""
    paths = [Path(paths)] if isinstance(paths, (str, Path)) else [Path(p) for p in paths]
    first = next(chain.from_iterable(iter_corpus_docs(p, skip_empty=skip_empty) for p in paths), None)
    if first is None:
        where = paths[0] if len(paths) == 1 else paths[0].parent
        files = "" if len(paths) == 1 else f" in its {len(paths)} files"
        raise FormatError(where, None, None, f"empty corpus (no documents{files})")
    corpus = IndexedCorpus(paths, skip_empty=skip_empty)
    if len(paths) > 1 and len(corpus.id_set()) != len(corpus):
        _refuse_repeated_id(corpus.index())
    return corpus


def _refuse_repeated_id(index: CorpusIndex) -> None:
    """Raise :class:`FormatError` at the first id of ``index`` that an earlier file holds too
    (:func:`~instir.benchmarks.readers.check_unique`, the readers' one rule for repeated ids)."""
    seen: dict[str, tuple[Path, int | str]] = {}
    for i, doc_id in enumerate(index.ids):
        check_unique(seen, doc_id, index.paths[int(index.file[i])], int(index.line[i]), "_id", "document id")
