"""BM25 as FollowIR's authors ran it: rank_bm25's ``BM25Okapi`` built over each query's candidates only, with
their cleaning (orionw/FollowIR ``models/bm25/evaluate_bm25.py``, ``BM25Reranker.clean`` and ``predict``):
lower-case, split on single spaces, NLTK's English stop words dropped, NLTK's Porter stemmer, punctuation
(``string.punctuation``) removed after stemming; the query is the cleaned query and the cleaned instruction
joined by a space, so a benchmark's candidate lists (``meta["top_ranked"]``, a reranking task) are required.

NLTK's English stop words are its 179-word list, the one bm25s ships as ``STOPWORDS_EN_PLUS`` (so no NLTK data is
downloaded); the stemmer is NLTK's ``PorterStemmer`` (pure Python, its default mode). Documents are cleaned once
each and shared by every query that lists them. Installed by ``pip install 'instir[engines]'``.
"""

from __future__ import annotations

import string
import time
from functools import cache

import pandas as pd

from instir.benchmarks.types import Benchmark
from instir.errors import UsageError
from instir.formatting import Template, require_text
from instir.progress import enabled as progress_enabled
from instir.progress import tqdm
from instir.retrieval.runs import Run

_PUNCTUATION = str.maketrans("", "", string.punctuation)


class CandidateOkapiRetriever:
    """rank_bm25's ``BM25Okapi`` (``k1``, ``b``, ``epsilon``) over each query's candidates, the FollowIR
    authors' cleaning (see the module docstring)."""

    name = "bm25-rank_bm25"
    family = "bm25"

    def __init__(self, k1: float = 1.5, b: float = 0.75, epsilon: float = 0.25, *, show_progress: bool | None = None):
        from bm25s.stopwords import STOPWORDS_EN_PLUS
        from nltk.stem import PorterStemmer

        self.k1, self.b, self.epsilon = float(k1), float(b), float(epsilon)
        self.show_progress = progress_enabled() if show_progress is None else show_progress
        stop_words, stem = frozenset(STOPWORDS_EN_PLUS), cache(PorterStemmer().stem)

        def clean(text: str) -> str:  # BM25Reranker.clean, step by step
            text = " ".join(stem(word) for word in text.lower().split(" ") if word not in stop_words)
            return text.translate(_PUNCTUATION).strip()

        self._clean = clean

    def params(self) -> dict:
        """The settings that change results."""
        return {"engine": "rank_bm25", "k1": self.k1, "b": self.b, "epsilon": self.epsilon,
                "stopwords": "nltk-english-179", "stemmer": "nltk-porter"}

    def tokens(self, text: str) -> list[str]:
        """A text as the authors' ``predict`` tokenises it: cleaned, split on spaces, empty pieces dropped."""
        return [token for token in self._clean(text).split(" ") if token]

    def search(self, benchmark: Benchmark, template: Template, k: int) -> Run:
        """Every candidate of every query scored by a ``BM25Okapi`` over that query's candidates (``k`` is
        not a cut: a reranking task keeps each query's candidates)."""
        from rank_bm25 import BM25Okapi

        require_text(template, "rank_bm25's BM25")
        candidates = benchmark.meta.get("top_ranked")
        if not candidates:
            raise UsageError(f"{benchmark.name}: this BM25 (the FollowIR authors') scores each query's candidate "
                             "list, and the benchmark has none; use bm25 for a search of the whole corpus")
        start = time.perf_counter()
        subset = benchmark.shared_subset
        listed = {doc for docs in candidates.values() for doc in docs}
        texts = {doc.id: doc for doc in benchmark.corpus.get(listed).values()}
        cleaned: dict[str, list[str]] = {}
        rows = []
        for query in tqdm(benchmark.queries.values(), desc="rank_bm25 per query", unit="query",
                          disable=not self.show_progress):
            docs = [doc for doc in candidates.get(query.id, ()) if doc in texts]
            if not docs:
                continue
            for doc in docs:
                if doc not in cleaned:
                    cleaned[doc] = self.tokens(template.format_doc(texts[doc], subset))
            model = BM25Okapi([cleaned[doc] for doc in docs], k1=self.k1, b=self.b, epsilon=self.epsilon)
            scores = model.get_scores(self.tokens(template.format_query(query)))
            rows += [(query.id, doc, float(score)) for doc, score in zip(docs, scores)]
        frame = pd.DataFrame(rows, columns=["qid", "docid", "score"])
        from importlib.metadata import version

        meta = {"retriever": {"name": self.name, "family": self.family, "params": self.params(),
                              "engine": f"rank_bm25 {version('rank-bm25')}"},
                "search_seconds": round(time.perf_counter() - start, 3)}
        return Run(frame, meta)
