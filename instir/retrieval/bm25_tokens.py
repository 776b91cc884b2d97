"""BM25 tokenisation as ``bm25s.tokenize`` splits a text (lower-cased :data:`TOKEN_PATTERN`
matches, stop words dropped before stemming, each word stemmed by PyStemmer), streamed one text
at a time into 32-bit token-id arrays over one vocabulary numbered in order of first occurrence.

A large corpus is tokenised in chunks by worker processes (forked, on systems that fork), each
chunk over its own vocabulary; the chunks are merged in corpus order, each chunk's words taking
the next free ids in its own order of first occurrence, which is exactly the numbering of one
pass over the whole corpus: the arrays and the vocabulary do not depend on the number of
workers. Ids only number tokens, they do not change scores (``tests/retrieval/test_bm25_cache.py``
checks scores and rankings against ``bm25s.tokenize``).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import re
import signal
import sys
import warnings
from array import array
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor

import numpy as np
import Stemmer
from bm25s.tokenization import Tokenizer

from instir.retrieval.embedding_cache import in_chunks

#: bm25s's token pattern (its default, named here so documents and queries provably share it).
TOKEN_PATTERN = r"(?u)\b\w\w+\b"
#: Documents from which a BM25 index build tokenises on worker processes (fewer: starting them costs more than they
#: save).
PARALLEL_MIN_TEXTS = 50_000
#: Texts per chunk a worker tokenises.
CHUNK_TEXTS = 20_000
#: Longest token stemmed and indexed (characters, Lucene's ``max_token_length``); a longer one is cut to this many.
MAX_TOKEN_CHARS = 255


class LongTokenWarning(UserWarning):
    """Tokens longer than :data:`MAX_TOKEN_CHARS` were cut before stemming (the message says how many)."""


def cut_long_tokens(text: str) -> str:
    """``text`` lower-cased with every token longer than :data:`MAX_TOKEN_CHARS` cut to its first
    :data:`MAX_TOKEN_CHARS` characters, as documents are cut when indexed: what a query's text is
    before ``bm25s.tokenize`` (which lower-cases again: a no-op). A text without such a token is
    returned as it is (lower-casing never lengthens a run of word characters)."""
    limit = MAX_TOKEN_CHARS
    if len(text) <= limit or not re.search(f"\\w{{{limit + 1}}}", text):
        return text
    return re.sub(TOKEN_PATTERN, lambda m: m.group()[:limit], text.lower())


def stop_words(stopwords: str | Sequence[str]) -> frozenset[str]:
    """The stop words bm25s would drop: a word list, or a language name it knows (``en``)."""
    return frozenset(Tokenizer(stopwords=stopwords).stopwords)


class _Splitter:
    """Token ids of one text after another over a vocabulary of its own (first occurrence first)."""

    def __init__(self, stopwords: str | Sequence[str], stemmer: str):
        self.findall = re.compile(TOKEN_PATTERN).findall
        self.stop = stop_words(stopwords)
        self.word_ids: dict[str, int] = {}  # word -> its (stem's) id
        stem = None if stemmer == "none" else Stemmer.Stemmer(stemmer).stemWord
        self.vocab = self.word_ids if stem is None else {}
        self.stem = stem
        self.cut = 0  # occurrences of tokens longer than MAX_TOKEN_CHARS (never kept in word_ids, so each is counted)

    def _new(self, word: str) -> int:
        if len(word) > MAX_TOKEN_CHARS:
            self.cut += 1
            word = word[:MAX_TOKEN_CHARS]
            if word in self.word_ids:
                return self.word_ids[word]
        if self.stem is None:
            self.word_ids[word] = n = len(self.word_ids)
        else:
            self.word_ids[word] = n = self.vocab.setdefault(self.stem(word), len(self.vocab))
        return n

    def ids(self, text: str) -> array:
        word_ids, new, stop = self.word_ids, self._new, self.stop
        return array("i", [word_ids[w] if w in word_ids else new(w) for w in self.findall(text.lower())
                           if w not in stop])


def _ids_of(splitter: _Splitter, texts: list[str]) -> tuple[np.ndarray, bytes]:
    """Tokens per text and every token id (int32 bytes) of ``texts`` through ``splitter``."""
    per_text = [splitter.ids(text) for text in texts]
    flat = array("i")
    for ids in per_text:
        flat.extend(ids)
    return np.fromiter(map(len, per_text), dtype=np.int64, count=len(per_text)), flat.tobytes()


def _chunk(texts: list[str], stopwords: str | Sequence[str],
           stemmer: str) -> tuple[list[str], np.ndarray, bytes, int]:
    """A worker's chunk: its vocabulary in id order, tokens per text, every token id (int32
    bytes) and the count of tokens cut."""
    splitter = _Splitter(stopwords, stemmer)
    lengths, flat = _ids_of(splitter, texts)
    return list(splitter.vocab), lengths, flat, splitter.cut


def _end_with_parent(parent: int) -> None:
    """A worker's start: on Linux, ask to be ended (SIGTERM) when the process that forked it ends, so a build
    killed with ``kill -9`` leaves no workers behind (they blocked for ever on a pipe no one read, holding their
    chunk's memory); a worker whose parent is already gone ends now."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(0)


def workers(n_jobs: int | None) -> int:
    """Worker processes for ``n_jobs`` (None: the CPUs this process may use); 1 where the system
    cannot fork (a fresh interpreter per worker would re-run an unguarded ``__main__``)."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    available = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(n_jobs or available, available))


def tokenized_chunks(texts: Iterable[str], stopwords: str | Sequence[str], stemmer: str, vocab: dict[str, int], *,
                     n_jobs: int = 1, chunk: int = CHUNK_TEXTS,
                     stats: dict | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The token ids of ``chunk`` texts at a time, in order: one flat int32 array and the tokens per text
    (int64), over one vocabulary that ``vocab`` (empty at the start: token → id) holds once the chunks are
    all read; ``stemmer`` is a PyStemmer algorithm or ``"none"``. With ``n_jobs`` above 1 the chunks go to
    that many forked workers, a few in flight, so the texts are never all held. Tokens longer than
    :data:`MAX_TOKEN_CHARS` are cut: ``stats["long_tokens_cut"]`` (when ``stats`` is given) and a
    :class:`LongTokenWarning` count them."""
    if n_jobs <= 1:
        splitter = _Splitter(stopwords, stemmer)
        for part in in_chunks(texts, chunk):
            lengths, flat = _ids_of(splitter, part)
            yield np.frombuffer(flat, dtype=np.int32), lengths
        vocab.update(splitter.vocab)
        _record_cuts(splitter.cut, stats)
        return
    cut = 0

    def merged(done: Future) -> tuple[np.ndarray, np.ndarray]:
        nonlocal cut
        words, lengths, flat, cuts = done.result()
        cut += cuts
        remap = np.fromiter((vocab.setdefault(w, len(vocab)) for w in words), dtype=np.int32, count=len(words))
        return remap[np.frombuffer(flat, dtype=np.int32)], lengths

    pending: deque[Future] = deque()
    with ProcessPoolExecutor(n_jobs, mp_context=multiprocessing.get_context("fork"), initializer=_end_with_parent,
                             initargs=(os.getpid(),)) as pool:
        for part in in_chunks(texts, chunk):
            pending.append(pool.submit(_chunk, part, stopwords, stemmer))
            if len(pending) > n_jobs:
                yield merged(pending.popleft())
        while pending:
            yield merged(pending.popleft())
    _record_cuts(cut, stats)


def _record_cuts(cut: int, stats: dict | None) -> None:
    if stats is not None:
        stats["long_tokens_cut"] = cut
    if cut:
        warnings.warn(f"{cut} tokens longer than {MAX_TOKEN_CHARS} characters were cut to their first "
                      f"{MAX_TOKEN_CHARS} before stemming and indexing (as Lucene's max_token_length)",
                      LongTokenWarning, stacklevel=3)
