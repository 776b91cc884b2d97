"""BM25 with bm25s (+ PyStemmer), configured as close to the authors' engines as bm25s allows.

Per-benchmark defaults (:func:`bm25_defaults`: the family spec's ``[bm25]``) are the authors'
engines' defaults: InstructIR's Pyserini/Anserini and IFIR's Elasticsearch 8.11
(``docs/bm25-vs-lucene.md`` has the settings and where bm25s differs from Lucene); InstructIR's
Porter stemmer is PyStemmer's ``porter``, the original algorithm, as Lucene's PorterStemFilter.
A document that matches no query term is not returned (as with Lucene), so a query may have
fewer than k results.

Indexes are built once per corpus, BM25 setting and document format and kept on disk
(:mod:`instir.retrieval.bm25_cache`, memory-mapped on load) and in the retriever (its last
:attr:`BM25Retriever.keep_indexes` indexes), so a new ``k`` or another query template never
re-indexes.
"""

from __future__ import annotations

import hashlib
import os
import string
import tempfile
import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, nullcontext
from importlib.metadata import version as package_version
from pathlib import Path

import bm25s
import numpy as np
import Stemmer

from instir.benchmarks import catalog
from instir.benchmarks.catalog import family_of
from instir.benchmarks.types import Benchmark, Query
from instir.errors import UsageError
from instir.formatting import Template, require_text
from instir.progress import enabled as progress_enabled
from instir.progress import tqdm
from instir.retrieval import bm25_build, bm25_tokens
from instir.retrieval.bm25_cache import BM25IndexCache
from instir.retrieval.bm25_cache import entry_key as cache_key
from instir.retrieval.bm25_tokens import PARALLEL_MIN_TEXTS, TOKEN_PATTERN, cut_long_tokens, tokenized_chunks, workers
from instir.retrieval.runs import Run, tie_ranks
from instir.retrieval.topk import top_k_row

#: Progress bars (the kit's and bm25s') only from these sizes on: below them indexing or searching
#: takes under a second or two, and a short script would print a screen of finished bars.
PROGRESS_MIN_DOCS = 20_000
PROGRESS_MIN_QUERIES = 2_000
#: Lucene's ``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`` (Anserini's default English stop words).
LUCENE_ENGLISH_STOPWORDS = (
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it", "no", "not",
    "of", "on", "or", "such", "that", "the", "their", "then", "there", "these", "they", "this", "to", "was",
    "will", "with",
)

#: bm25s's scoring variant where neither the retriever nor the family's spec names one
DEFAULT_METHOD = "lucene"


def bm25_defaults(benchmark: Benchmark | str) -> dict:
    """BM25 settings the benchmark family's authors used (its spec's ``[bm25]``, see the module
    docstring; ``engine`` says whose): of a Benchmark's family, or of a benchmark name's."""
    family = benchmark.family if isinstance(benchmark, Benchmark) else family_of(benchmark)
    name = benchmark.name if isinstance(benchmark, Benchmark) else benchmark
    defaults = catalog.family(family).bm25 if family else None
    if not defaults:  # a benchmark of one's own, or a family whose spec has no [bm25]
        spec = f"{catalog.family(family).spec_file} has no [bm25]: " if family else ""
        raise UsageError(f"{spec}no BM25 defaults for benchmark {name!r}; pass k1, b, stemmer and stopwords")
    return dict(defaults)


def _stopwords_arg(stopwords: str | Sequence[str]) -> str | list[str]:
    """What bm25s.tokenize takes: a word list, or a language name it knows (it checks the name)."""
    if stopwords == "none":
        return []
    if stopwords == "lucene":
        return list(LUCENE_ENGLISH_STOPWORDS)
    return stopwords if isinstance(stopwords, str) else list(stopwords)


def _doc_fields(template: Template) -> set[str]:
    """The fields the template's document format uses (``text``, ``title``, ``domain``)."""
    return {name for _, name, _, _ in string.Formatter().parse(template.doc) if name is not None}


class BM25Retriever:
    """BM25 over a benchmark's corpus with bm25s; the corpus is indexed once per BM25 setting
    and document format (kept on disk under ``cache_dir`` and in this object, see the module
    docstring); bm25s scores each query and :func:`~instir.retrieval.topk.top_k_row` cuts its list, so tied
    documents are kept in trec_eval's order, also at the cut.

    ``k1``, ``b``, ``method``, ``stemmer`` and ``stopwords`` left as ``None`` take the benchmark's
    defaults (:func:`bm25_defaults`; ``method``: bm25s's ``lucene`` where the family's spec names none).
    ``stemmer``: a PyStemmer algorithm name or ``"none"``; ``stopwords``: ``"lucene"``, a bm25s language name
    (``"en"``), ``"none"`` or a list.
    ``n_threads`` threads score queries (0: the calling thread only; -1: all cores); ``n_jobs``
    worker processes tokenise a large corpus (:func:`~instir.retrieval.bm25_tokens.tokenized_chunks`;
    None: one per CPU this process may use; 1: none).
    ``cache_dir`` defaults to ``<instir home>/bm25``; ``cache=False`` keeps indexes in memory
    only (throw-away corpora). ``keep_indexes`` bounds the indexes this object holds (the most
    recently used ones; an index from the cache is memory-mapped, one held in memory only, for a
    634k-document corpus, about 0.8 GB). None of these change results, so none is in :meth:`params`.
    """

    name = "bm25"
    family = "bm25"

    def __init__(self, k1: float | None = None, b: float | None = None, *, method: str | None = None,
                 stemmer: str | None = None, stopwords: str | Sequence[str] | None = None, n_threads: int = 0,
                 show_progress: bool | None = None, cache_dir: str | Path | None = None, cache: bool = True,
                 keep_indexes: int = 1, n_jobs: int | None = None):
        if stemmer not in (None, "none") and stemmer not in Stemmer.algorithms():
            raise ValueError(f"unknown stemmer {stemmer!r}; use 'none' or one of {Stemmer.algorithms()}")
        if keep_indexes < 1:
            raise ValueError(f"keep_indexes must be at least 1, got {keep_indexes}")
        self.k1, self.b, self.method = k1, b, method
        self.stemmer = stemmer
        self.stopwords = stopwords if stopwords is None or isinstance(stopwords, str) else tuple(stopwords)
        self.n_threads = n_threads
        self.n_jobs = n_jobs
        self.show_progress = progress_enabled() if show_progress is None else show_progress
        self.cache = BM25IndexCache(cache_dir) if cache else None
        self.keep_indexes = keep_indexes
        self._held: OrderedDict[str, _Held] = OrderedDict()

    def __getstate__(self) -> dict:
        """Pickled (sent to another process) without the indexes it holds: they are reloaded there."""
        return {**self.__dict__, "_held": OrderedDict()}

    def params(self) -> dict:
        """Configured settings (``None`` = the benchmark's default, resolved in the run's meta)."""
        stopwords = list(self.stopwords) if isinstance(self.stopwords, tuple) else self.stopwords
        return {"k1": self.k1, "b": self.b, "method": self.method, "stemmer": self.stemmer, "stopwords": stopwords}

    def resolved(self, benchmark: Benchmark) -> dict:
        """The settings a search on this benchmark uses: configured values, the family's defaults for the rest (a
        benchmark of no family needs all but ``method``, which is then bm25s's ``lucene``)."""
        configured = self.params()
        if all(configured[key] is not None for key in ("k1", "b", "stemmer", "stopwords")):
            spec = catalog.family(benchmark.family).bm25 if benchmark.family else {}
            return {**configured, "method": configured["method"] or spec.get("method", DEFAULT_METHOD)}
        defaults = {"method": DEFAULT_METHOD, **bm25_defaults(benchmark)}
        return {key: defaults[key] if value is None else value for key, value in configured.items()}

    def index_description(self, benchmark: Benchmark, template: Template) -> dict:
        """Everything that changes the index of ``benchmark`` formatted by ``template`` (what its
        cache key hashes): the corpus content, the resolved settings and stop-word list, the
        document format (and the subset's domain word or the titles where the format uses them)
        and the tokeniser. Query formats, ``k`` and the queries are not in it."""
        require_text(template, "BM25")
        params = self.resolved(benchmark)
        subset = benchmark.shared_subset
        fields = _doc_fields(template)
        doc = {"format": template.doc, "domain": template.describe()["domains"].get(subset, "")
               if "domain" in fields else ""}
        if "title" in fields:  # the content hash covers "title text" joined, not the title apart
            doc["titles_sha256"] = _titles_sha256(benchmark)
        stemmed = params["stemmer"] != "none"
        return {
            "corpus_sha256": benchmark.corpus.content_hash(),
            "bm25": {**params, "stopword_list": _stopwords_arg(params["stopwords"])},
            "doc": doc,
            "tokenizer": {"bm25s": bm25s.__version__, "token_pattern": TOKEN_PATTERN, "lower": True,
                          "max_token_chars": bm25_tokens.MAX_TOKEN_CHARS,
                          "pystemmer": package_version("PyStemmer") if stemmed else None},
            "numpy": np.__version__,
        }

    def index(self, benchmark: Benchmark, template: Template) -> "BM25Index":
        """The index of the benchmark's corpus as ``template`` formats its documents: one this
        retriever holds, else the verified cache entry, else built (and stored in the cache).
        Its ``source`` says which (recorded in the search meta as ``index``)."""
        description = self.index_description(benchmark, template)
        key = cache_key(description)
        held = self._held.get(key)
        if held is not None:
            self._held.move_to_end(key)
            return self._wrap(held, reused=True)
        while len(self._held) >= self.keep_indexes:  # room first: never two large indexes where one is kept
            self._held.popitem(last=False)
        params = description["bm25"]
        doc_ids = benchmark.corpus.ids()
        start = time.perf_counter()
        stats: dict[str, int] = {}
        built: list[tuple[bm25s.BM25, Path | None]] = []

        def build() -> tuple[bm25s.BM25, Path | None]:
            built.append(self._build(benchmark, template, params, key, description, stats))
            return built[0]

        # one process builds an index at a time; another waits for it and loads its entry
        found = self.cache.load_or_build(key, doc_ids, build) if self.cache is not None else build()
        if not built:  # the cache's entry (a CachedIndex)
            model = found.model
            source = {"origin": "loaded", "cache_entry": str(found.path), "seconds": round(found.seconds, 3)}
        else:
            model, path = built[0]
            source = {"origin": "built", "cache_entry": None if path is None else str(path),
                      "seconds": round(time.perf_counter() - start, 3), "store_seconds": stats["store_seconds"],
                      **({"long_tokens_cut": stats["long_tokens_cut"]} if stats.get("long_tokens_cut") else {})}
        held = _Held(model, np.asarray(doc_ids, dtype=object), params, {**source, "cache_key": key})
        self._held[key] = held
        return self._wrap(held, reused=False)

    def _build(self, benchmark: Benchmark, template: Template, params: dict, key: str, description: dict,
               stats: dict) -> tuple[bm25s.BM25, Path | None]:
        """Tokenise the corpus as a stream (a chunk of documents at a time), reduce it to its (document,
        term, count) triples in a work file and write the index from them (:mod:`~instir.retrieval.bm25_build`)
        into the cache: the index memory-mapped from its entry, and the entry's path. Without a cache (or
        one that cannot be written) the index is read into memory and the path is None. ``stats`` receives
        the tokenizer's counts."""
        subset = benchmark.shared_subset
        bars = self.show_progress and len(benchmark.corpus) >= PROGRESS_MIN_DOCS
        texts = (template.format_doc(doc, subset) for doc in tqdm(
            benchmark.corpus, desc="BM25 tokenise corpus", unit="doc", disable=not bars, leave=False))
        jobs = workers(self.n_jobs) if len(benchmark.corpus) >= PARALLEL_MIN_TEXTS else 1
        vocab: dict[str, int] = {}
        with ExitStack() as stack:
            work = self._scratch(stack, key)
            chunks = tokenized_chunks(texts, _stopwords_arg(params["stopwords"]), params["stemmer"], vocab,
                                      n_jobs=jobs, stats=stats)
            spilled = bm25_build.spill(chunks, work / "triples.bin")

            opened: list[bm25s.BM25] = []

            def write(folder: Path) -> dict[str, str]:
                hashes = bm25_build.write_index(folder, spilled, vocab, k1=params["k1"], b=params["b"],
                                                method=params["method"], progress=bars)
                # opened here, memory-mapped: the same files once published (a rename keeps them), and still
                # readable if another builder of the same entry replaces it (the last writer wins)
                opened.append(bm25s.BM25.load(folder, mmap=True, show_progress=False))
                return hashes

            start = time.perf_counter()
            path = self.cache.store(key, description, write, benchmark.corpus.ids()) if self.cache is not None else None
            stats["store_seconds"] = round(time.perf_counter() - start, 3)
            if path is not None:
                return opened[0], path
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="instir-bm25-")))
            bm25_build.write_index(folder, spilled, vocab, k1=params["k1"], b=params["b"], method=params["method"],
                                   progress=bars)
            return bm25s.BM25.load(folder, mmap=False, show_progress=False), None

    def _scratch(self, stack: ExitStack, key: str) -> Path:
        """A folder for the build's work files, gone with ``stack``: beside the cache's entries (same disk),
        else (no cache, or one that cannot be written) the system's temporary folder."""
        if self.cache is not None:
            try:
                return stack.enter_context(self.cache.scratch(key))
            except OSError:
                pass
        return Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="instir-bm25-")))

    def _wrap(self, held: "_Held", reused: bool) -> "BM25Index":
        params = {key: value for key, value in held.params.items() if key != "stopword_list"}
        meta = {"name": self.name, "family": self.family, "params": params, "engine": f"bm25s {bm25s.__version__}"}
        return BM25Index(held.model, held.doc_ids, _stemmer(params["stemmer"]), _stopwords_arg(params["stopwords"]),
                         meta, self.n_threads, self.show_progress, source={**held.source, "reused_in_memory": reused})

    def search(self, benchmark: Benchmark, template: Template, k: int) -> Run:
        """Top-``k`` BM25 results for every query of ``benchmark`` (zero-score docs left out)."""
        return self.index(benchmark, template).search(benchmark.queries.values(), template, k)


class _Held:
    """An index a retriever keeps: the bm25s model, its document ids, settings and where it came from."""

    def __init__(self, model: bm25s.BM25, doc_ids: np.ndarray, params: dict, source: dict):
        self.model, self.doc_ids, self.params, self.source = model, doc_ids, params, source


def _stemmer(name: str) -> Stemmer.Stemmer | None:
    return None if name == "none" else Stemmer.Stemmer(name)


def _titles_sha256(benchmark: Benchmark) -> str:
    h = hashlib.sha256()
    for doc in benchmark.corpus:
        h.update(doc.title.encode())
        h.update(b"\x00")
    return h.hexdigest()


class BM25Index:
    """A bm25s index with the tokenisation it was built with (from :meth:`BM25Retriever.index`).
    ``source`` says whether it was ``built`` or ``loaded`` (``origin``), its cache entry (None
    when it is in memory only), its cache key, the seconds that took, and whether the
    retriever already held it (``reused_in_memory``)."""

    def __init__(self, model: bm25s.BM25, doc_ids: np.ndarray, stemmer: Stemmer.Stemmer | None,
                 stopwords: str | list[str], meta: dict, n_threads: int, show_progress: bool,
                 source: dict | None = None):
        self.model, self.doc_ids = model, doc_ids
        self.stemmer, self.stopwords = stemmer, stopwords
        self.meta, self.n_threads, self.show_progress = meta, n_threads, show_progress
        self.source = dict(source or {})
        self._ranks: np.ndarray | None = None

    def search(self, queries: Iterable[Query], template: Template, k: int) -> Run:
        """Top-``k`` results per query, all queries tokenised in one batched call, then scored one by one by
        bm25s and cut in trec_eval's order (:func:`~instir.retrieval.topk.top_k_row`), so a run cut at k holds the
        top k of a deeper run.

        A document whose id is the query id is dropped (as the official InstructIR code
        does); one more document is fetched then, so such a query still gets ``k``."""
        require_text(template, "BM25")
        queries = list(queries)
        qids = np.asarray([q.id for q in queries], dtype=object)
        texts = [cut_long_tokens(template.format_query(q)) for q in queries]  # as the documents were cut
        bars = self.show_progress and len(texts) >= PROGRESS_MIN_QUERIES
        tokens = bm25s.tokenize(texts, token_pattern=TOKEN_PATTERN, stopwords=self.stopwords, stemmer=self.stemmer,
                                return_ids=False, show_progress=bars)
        has_self = not set(qids.tolist()).isdisjoint(self.doc_ids.tolist())
        depth = min(k + has_self, len(self.doc_ids))
        if self._ranks is None:
            self._ranks = tie_ranks(self.doc_ids)
        top = np.zeros((len(qids), depth), dtype=np.int64)
        scores = np.zeros((len(qids), depth), dtype=np.float32)

        def search_one(row: int) -> None:  # bm25s's scores, the kit's cut (a document scoring 0 matches no term)
            full = self.model.get_scores(tokens[row]) if tokens[row] else np.zeros(len(self.doc_ids), np.float32)
            found = top_k_row(full, depth, self._ranks, above=0.0)
            top[row, :len(found)], scores[row, :len(found)] = found, full[found]

        workers = os.cpu_count() if self.n_threads == -1 else self.n_threads
        with ThreadPoolExecutor(max_workers=workers) if workers else nullcontext() as pool:
            for _ in tqdm((pool.map if pool else map)(search_one, range(len(qids))), total=len(qids),
                          desc="BM25 search", unit="query", disable=not bars):
                pass
        not_self = self.doc_ids[top] != qids[:, None] if has_self else np.ones(top.shape, dtype=bool)
        keep = (scores > 0) & not_self & (np.cumsum(not_self, axis=1) <= k)
        meta = {"retriever": self.meta, "self_hits_dropped": int((~not_self & (scores > 0)).sum()),
                "index": self.source}
        return Run.from_arrays(qids, self.doc_ids, top, scores, meta, keep=keep)
