"""BM25 with bm25s (+ PyStemmer), configured as close to the authors' engines as bm25s allows.

Per-benchmark defaults (:func:`bm25_defaults`):

- InstructIR: the authors ran Pyserini/Anserini with its defaults: k1 = 0.9, b = 0.4,
  Lucene BM25, Anserini's English analyzer (Lucene's 33-word English stop set, Porter
  stemmer). Here: ``method="lucene"``, stop words :data:`LUCENE_ENGLISH_STOPWORDS`,
  PyStemmer's ``porter`` (the original Porter algorithm, as Lucene's PorterStemFilter).
- IFIR: the authors ran Elasticsearch 8.11 with its defaults: k1 = 1.2, b = 0.75, the
  ``standard`` analyzer (lower-casing only: no stop words, no stemming).

Where bm25s differs from Lucene/Elasticsearch (scores differ slightly, rankings mostly agree):
- tokens are lower-cased ``\\b\\w\\w+\\b`` regex matches, not Unicode UAX#29 words: one-character
  tokens are dropped ("x", "3"), "3.5" and "don't" are split (Lucene keeps them whole);
- Lucene stores document lengths lossily in one byte (SmallFloat norms); bm25s uses exact
  lengths; Lucene ≥ 8 also drops the constant (k1 + 1) factor (rank-equivalent);
- Anserini's possessive filter ("'s") has no counterpart; the regex split drops the "s".
A document that matches no query term is not returned (as with Lucene), so a query may
have fewer than k results.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import bm25s
import numpy as np
import Stemmer

from instir.benchmarks.catalog import family_of
from instir.benchmarks.types import Benchmark, Query
from instir.errors import UsageError
from instir.formatting import Template
from instir.progress import enabled as progress_enabled
from instir.progress import tqdm
from instir.retrieval.runs import Run

#: Lucene's ``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`` (Anserini's default English stop words).
LUCENE_ENGLISH_STOPWORDS = (
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not",
    "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was",
    "will", "with",
)

_DEFAULTS = {
    "instructir": {"k1": 0.9, "b": 0.4, "method": "lucene", "stemmer": "porter", "stopwords": "lucene",
                   "engine": "Pyserini/Anserini BM25 defaults (InstructIR authors)"},
    "ifir": {"k1": 1.2, "b": 0.75, "method": "lucene", "stemmer": "none", "stopwords": "none",
             "engine": "Elasticsearch 8.11 BM25 + standard analyzer defaults (IFIR authors)"},
}


def bm25_defaults(benchmark_name: str) -> dict:
    """BM25 settings the benchmark's authors used (see the module docstring); ``engine`` says whose."""
    family = family_of(benchmark_name)
    if family in _DEFAULTS:
        return dict(_DEFAULTS[family])
    raise ValueError(f"no BM25 defaults for benchmark {benchmark_name!r}; pass k1, b, stemmer and stopwords")


def _stopwords_arg(stopwords: str | Sequence[str]) -> str | list[str]:
    """What bm25s.tokenize takes: a word list, or a language name it knows (it checks the name)."""
    if stopwords == "none":
        return []
    if stopwords == "lucene":
        return list(LUCENE_ENGLISH_STOPWORDS)
    return stopwords if isinstance(stopwords, str) else list(stopwords)


def _require_text(template: Template) -> None:
    """Refuse, before any work, a template whose query or document is an [instruction, text]
    pair (a tuple format): BM25 takes one text."""
    if any(isinstance(fmt, tuple) for fmt in (template.query, template.bare_query, template.doc)):
        raise UsageError(f"template {template.name!r} produces [instruction, text] pairs, which BM25 cannot "
                         f"take; use a text template (e.g. instructir, ifir, mteb)")


class BM25Retriever:
    """BM25 over a benchmark's corpus with bm25s; every search indexes the corpus afresh
    (16k passages take well under a second) and scores all queries in one batched call.

    ``k1``, ``b``, ``stemmer`` and ``stopwords`` left as ``None`` take the benchmark's
    defaults (:func:`bm25_defaults`). ``stemmer``: a PyStemmer algorithm name or ``"none"``;
    ``stopwords``: ``"lucene"``, a bm25s language name (``"en"``), ``"none"`` or a list.
    ``n_threads`` is passed to bm25s (0: the calling thread only; -1: all cores).
    """

    name = "bm25"
    family = "bm25"

    def __init__(self, k1: float | None = None, b: float | None = None, *, method: str = "lucene",
                 stemmer: str | None = None, stopwords: str | Sequence[str] | None = None, n_threads: int = 0,
                 show_progress: bool | None = None):
        if stemmer not in (None, "none") and stemmer not in Stemmer.algorithms():
            raise ValueError(f"unknown stemmer {stemmer!r}; use 'none' or one of {Stemmer.algorithms()}")
        self.k1, self.b, self.method = k1, b, method
        self.stemmer = stemmer
        self.stopwords = stopwords if stopwords is None or isinstance(stopwords, str) else tuple(stopwords)
        self.n_threads = n_threads
        self.show_progress = progress_enabled() if show_progress is None else show_progress

    def params(self) -> dict:
        """Configured settings (``None`` = the benchmark's default, resolved in the run's meta)."""
        stopwords = list(self.stopwords) if isinstance(self.stopwords, tuple) else self.stopwords
        return {"k1": self.k1, "b": self.b, "method": self.method, "stemmer": self.stemmer, "stopwords": stopwords}

    def resolved(self, benchmark_name: str) -> dict:
        """The settings a search on this benchmark uses: configured values, defaults for the rest."""
        configured = self.params()
        if all(configured[key] is not None for key in ("k1", "b", "stemmer", "stopwords")):
            return configured
        defaults = bm25_defaults(benchmark_name)
        return {key: defaults[key] if value is None else value for key, value in configured.items()}

    def index(self, benchmark: Benchmark, template: Template) -> "BM25Index":
        """Tokenise and index the benchmark's corpus as ``template`` formats its documents."""
        _require_text(template)
        params = self.resolved(benchmark.name)
        subset = next(iter(benchmark.queries.values())).subset if benchmark.queries else ""
        doc_ids: list[str] = []
        texts: list[str] = []
        for doc in tqdm(benchmark.corpus, desc="BM25 read corpus", unit="doc", disable=not self.show_progress,
                        leave=False):
            doc_ids.append(doc.id)
            texts.append(template.format_doc(doc, subset))
        stemmer = None if params["stemmer"] == "none" else Stemmer.Stemmer(params["stemmer"])
        stopwords = _stopwords_arg(params["stopwords"])
        model = bm25s.BM25(k1=params["k1"], b=params["b"], method=params["method"])
        model.index(bm25s.tokenize(texts, stopwords=stopwords, stemmer=stemmer, show_progress=self.show_progress),
                    show_progress=self.show_progress)
        meta = {"name": self.name, "family": self.family, "params": params, "engine": f"bm25s {bm25s.__version__}"}
        return BM25Index(model, np.asarray(doc_ids, dtype=object), stemmer, stopwords, meta, self.n_threads,
                         self.show_progress)

    def search(self, benchmark: Benchmark, template: Template, k: int) -> Run:
        """Top-``k`` BM25 results for every query of ``benchmark`` (zero-score docs left out)."""
        return self.index(benchmark, template).search(benchmark.queries.values(), template, k)


class BM25Index:
    """A built bm25s index with the tokenisation it was built with (from :meth:`BM25Retriever.index`)."""

    def __init__(self, model: bm25s.BM25, doc_ids: np.ndarray, stemmer: Stemmer.Stemmer | None,
                 stopwords: str | list[str], meta: dict, n_threads: int, show_progress: bool):
        self.model, self.doc_ids = model, doc_ids
        self.stemmer, self.stopwords = stemmer, stopwords
        self.meta, self.n_threads, self.show_progress = meta, n_threads, show_progress

    def search(self, queries: Iterable[Query], template: Template, k: int) -> Run:
        """Top-``k`` results per query, all queries tokenised and scored in one batched call.

        A document whose id is the query id is dropped (as the official InstructIR code
        does); one more document is fetched then, so such a query still gets ``k``."""
        _require_text(template)
        queries = list(queries)
        qids = np.asarray([q.id for q in queries], dtype=object)
        texts = [template.format_query(q) for q in queries]
        tokens = bm25s.tokenize(texts, stopwords=self.stopwords, stemmer=self.stemmer, return_ids=False,
                                show_progress=self.show_progress)
        has_self = not set(qids.tolist()).isdisjoint(self.doc_ids.tolist())
        top, scores = self.model.retrieve(tokens, k=min(k + has_self, len(self.doc_ids)), n_threads=self.n_threads,
                                          show_progress=self.show_progress)
        not_self = self.doc_ids[top] != qids[:, None] if has_self else np.ones(top.shape, dtype=bool)
        keep = (scores > 0) & not_self & (np.cumsum(not_self, axis=1) <= k)
        meta = {"retriever": self.meta, "self_hits_dropped": int((~not_self & (scores > 0)).sum())}
        return Run.from_arrays(qids, self.doc_ids, top, scores, meta, keep=keep)
