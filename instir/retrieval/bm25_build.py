"""A BM25 index built as a stream, straight to disk, in the very arrays bm25s builds: IFIR's 634k-document
corpus indexed in bounded memory.

bm25s's ``BM25.index`` holds every document's token ids, three arrays of one entry per (document, term)
pair and the sparse matrix made from them, all at once (3.9 GB at IFIR's ``cds`` size). Here each chunk of
token ids (:func:`~instir.retrieval.bm25_tokens.tokenized_chunks`) is reduced at once to its (document,
term, count) triples, appended to a work file (:func:`spill`); the document lengths and frequencies are
all that stays in memory. The score matrix is then written column block by column block (at most
``block_pairs`` triples at a time) into the files ``bm25s.BM25.save`` writes (:func:`write_index`), which
the search memory-maps (:class:`~instir.retrieval.bm25_cache.BM25IndexCache`).

The arrays are bm25s's, bit for bit (``tests/retrieval/test_bm25_build.py`` compares them with
``bm25s.BM25.index`` for every method): the IDF of each term with ``math.log`` as bm25s's
``_score_idf_*``, the term-frequency component in the floating-point types bm25s's ``_score_tfc_*``
compute it in (counts float32, lengths and the mean length float64), scores stored as float32, columns
in bm25s's order (``_np_csc_python``: by term, then by document), the non-occurrence array of BM25L and
BM25+ (``_build_nonoccurrence_array``), and the vocabulary with bm25s's empty token (bm25s/__init__.py
``BM25.index``, ``BM25.save``; bm25s/scoring.py).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import bm25s
import numpy as np

from instir import atomic
from instir.progress import tqdm

#: One (document, term, count) triple of the work file.
TRIPLE = np.dtype([("doc", "<i4"), ("term", "<i4"), ("tf", "<i4")])
#: Triples scored at a time (each costs about 40 bytes while its block is scored and ordered).
BLOCK_PAIRS = 8_000_000
DATA, INDICES, INDPTR = "data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy"
VOCAB, PARAMS, NONOCCURRENCE = "vocab.index.json", "params.index.json", "nonoccurrence_array.index.npy"


@dataclass
class Spilled:
    """A corpus reduced to its (document, term, count) triples in ``path`` (in document order, terms
    ascending within a document), with what scoring needs in memory: each document's length in tokens,
    each term's document frequency, and where each chunk's triples start (``chunks``: triple offsets)."""

    path: Path
    lengths: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    df: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    chunks: list[int] = field(default_factory=lambda: [0])

    @property
    def pairs(self) -> int:
        """Triples in all (the score matrix's non-zeros)."""
        return self.chunks[-1]


def spill(chunks: Iterable[tuple[np.ndarray, np.ndarray]], path: Path) -> Spilled:
    """Reduce each chunk of ``(token ids, tokens per document)`` to its triples, appended to ``path``."""
    spilled = Spilled(path)
    lengths: list[np.ndarray] = []
    with atomic.stream(path) as out:
        for ids, per_doc in chunks:
            first_doc = sum(len(part) for part in lengths)
            lengths.append(np.asarray(per_doc, dtype=np.int64))
            if not len(ids):
                spilled.chunks.append(spilled.chunks[-1])
                continue
            width = np.int64(int(ids.max()) + 1)
            docs = np.repeat(np.arange(len(per_doc), dtype=np.int64), per_doc)
            keys, counts = np.unique(docs * width + ids, return_counts=True)
            triples = np.empty(len(keys), dtype=TRIPLE)
            triples["doc"] = keys // width + first_doc
            triples["term"] = keys % width
            triples["tf"] = counts
            out.write(triples.tobytes())
            frequency = np.bincount(triples["term"])
            if len(frequency) > len(spilled.df):
                spilled.df = np.concatenate([spilled.df, np.zeros(len(frequency) - len(spilled.df), dtype=np.int64)])
            spilled.df[:len(frequency)] += frequency
            spilled.chunks.append(spilled.chunks[-1] + len(triples))
    spilled.lengths = np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64)
    return spilled


def idf_values(df: np.ndarray, n_docs: int, method: str) -> list[float]:
    """Each term's IDF as bm25s's ``_score_idf_<method>`` computes it (Python floats, ``math.log``)."""
    log = math.log
    if method == "robertson":  # negative IDFs not allowed: the ratio floored at 1
        return [log(max((n_docs - d + 0.5) / (d + 0.5), 1)) for d in df.tolist()]
    formulas: dict[str, Callable[[int], float]] = {
        "lucene": lambda d: log(1 + (n_docs - d + 0.5) / (d + 0.5)),
        "atire": lambda d: log(n_docs / d),
        "bm25l": lambda d: log((n_docs + 1) / (d + 0.5)),
        "bm25+": lambda d: log((n_docs + 1) / d),
    }
    if method not in formulas:
        raise ValueError(f"unknown BM25 method {method!r}; use robertson, lucene, atire, bm25l or bm25+")
    return [formulas[method](d) for d in df.tolist()]


def term_frequency_component(tf, length, mean_length, k1: float, b: float, delta: float, method: str):
    """bm25s's ``_score_tfc_<method>``, one expression per method in bm25s's order of operations: ``tf``
    float32 counts, ``length`` the documents' token counts, ``mean_length`` a float64."""
    if method in ("robertson", "lucene"):
        return tf / (k1 * ((1 - b) + b * length / mean_length) + tf)
    if method == "atire":
        return (tf * (k1 + 1)) / (tf + k1 * (1 - b + b * length / mean_length))
    if method == "bm25l":
        c = tf / (1 - b + b * length / mean_length)
        return ((k1 + 1) * (c + delta)) / (k1 + c + delta)
    num = (k1 + 1) * tf
    return num / (k1 * (1 - b + b * length / mean_length) + tf) + delta


def _write_npy(path: Path, array: np.ndarray) -> str:
    """``array`` (one-dimensional) as ``np.save`` writes it; its SHA-256."""
    header = atomic.npy_prefix(array.dtype, (len(array),))
    with atomic.stream(path, size=len(header) + array.nbytes) as out:
        out.write(header)
        out.write(np.ascontiguousarray(array))
    return out.hexdigest()


def _blocks(df: np.ndarray, block_pairs: int) -> list[tuple[int, int]]:
    """Consecutive term ranges ``[start, end)`` of at most ``block_pairs`` triples each (a term with more
    documents is a block of its own)."""
    ends = np.cumsum(df)
    blocks, start, done = [], 0, 0
    while start < len(df):
        end = max(int(np.searchsorted(ends, done + block_pairs, side="right")), start + 1)
        blocks.append((start, end))
        done, start = int(ends[end - 1]), end
    return blocks


def write_index(folder: Path, spilled: Spilled, vocab: dict[str, int], *, k1: float, b: float, method: str,
                block_pairs: int = BLOCK_PAIRS, progress: bool = False) -> dict[str, str]:
    """The files ``bm25s.BM25(k1, b, method).index(…)`` then ``save(folder)`` would leave, written from
    ``spilled`` (whose term ids are ``vocab``'s); returns the SHA-256 of the arrays it wrote, by file name."""
    model = bm25s.BM25(k1=k1, b=b, method=method)
    n_docs, n_vocab = len(spilled.lengths), len(vocab)
    df = np.concatenate([spilled.df, np.zeros(n_vocab - len(spilled.df), dtype=np.int64)])
    idf = idf_values(df, n_docs, model.idf_method)
    idf32 = np.array(idf, dtype=np.float32)
    mean_length = spilled.lengths.mean() if n_docs else np.float64("nan")  # as bm25s: np.array(lengths).mean()
    nonoccurrence = None
    if method in ("bm25l", "bm25+"):  # idf × the tf component of a term absent from a document of mean length
        absent = term_frequency_component(0, mean_length, mean_length, model.k1, model.b, model.delta, method)
        nonoccurrence = (np.array(idf, dtype=np.float64) * absent).astype(np.float32)
    hashes = {INDPTR: _write_npy(folder / INDPTR, np.concatenate([[0], np.cumsum(df)]).astype(np.int64))}
    data_header, index_header = atomic.npy_prefix("<f4", (spilled.pairs,)), atomic.npy_prefix("<i4", (spilled.pairs,))
    with atomic.stream(folder / DATA, size=len(data_header) + 4 * spilled.pairs) as data, \
            atomic.stream(folder / INDICES, size=len(index_header) + 4 * spilled.pairs) as indices, \
            spilled.path.open("rb") as triples:
        data.write(data_header)
        indices.write(index_header)
        for start, end in tqdm(_blocks(df, block_pairs), desc="BM25 score matrix", unit="block", disable=not progress):
            parts = []
            for first, last in zip(spilled.chunks, spilled.chunks[1:]):
                chunk = np.fromfile(triples, dtype=TRIPLE, count=last - first, offset=0) if last > first else None
                if chunk is not None:
                    keep = chunk[(chunk["term"] >= start) & (chunk["term"] < end)]
                    parts.append(keep)
            triples.seek(0)
            block = np.concatenate(parts) if parts else np.zeros(0, dtype=TRIPLE)
            block = block[np.argsort(block["term"], kind="stable")]  # by term, documents ascending within one
            terms, docs = block["term"], block["doc"]
            tfc = term_frequency_component(block["tf"].astype(np.float32), spilled.lengths[docs], mean_length,
                                           model.k1, model.b, model.delta, method)
            scores = idf32[terms] * tfc
            if nonoccurrence is not None:
                scores -= nonoccurrence[terms]
            data.write(scores.astype(np.float32))
            indices.write(docs.astype(np.int32))
    hashes[DATA], hashes[INDICES] = data.hexdigest(), indices.hexdigest()
    if nonoccurrence is not None:
        hashes[NONOCCURRENCE] = _write_npy(folder / NONOCCURRENCE, nonoccurrence)
    full_vocab = dict(vocab)
    if "" not in full_vocab:  # bm25s's empty token, one past the last id (not a column of the matrix)
        full_vocab[""] = max(full_vocab.values(), default=-1) + 1
    atomic.write_text(folder / VOCAB, json.dumps(full_vocab, ensure_ascii=False))
    atomic.write_text(folder / PARAMS, json.dumps(
        {"k1": model.k1, "b": model.b, "delta": model.delta, "method": model.method, "idf_method": model.idf_method,
         "dtype": model.dtype, "int_dtype": model.int_dtype, "num_docs": n_docs, "version": bm25s.__version__,
         "backend": model.backend}, indent=4))
    return hashes
