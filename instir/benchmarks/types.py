"""Plain types of the data layer: queries with their text parts kept apart, a streamed
corpus, qrels, and the Benchmark that holds them together with its provenance."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from instir.benchmarks import catalog
from instir.errors import UserError, quoted, shorten  # noqa: F401 - quoted: the loaders import it from here

if TYPE_CHECKING:
    import numpy as np

#: qrels as ``{query_id: {doc_id: grade}}`` (the shape ir-measures and pytrec_eval take).
Qrels = dict[str, dict[str, int]]

#: Characters of a whole problem text a :class:`FormatError` keeps (a guard for values quoted
#: without :func:`quoted`).
PROBLEM_LIMIT = 1000


class FormatError(UserError, ValueError):
    """Bad benchmark input: the message names the file, the line (or array index) and the field.

    ``problem`` is capped at :data:`PROBLEM_LIMIT` characters; values in it should be quoted
    with :func:`quoted`. In the message the place is capped too (``where`` at :data:`PROBLEM_LIMIT`, ``field``, which
    may be an id from the file, such as a prediction file's document id, at :data:`~instir.errors.QUOTE_LIMIT`);
    the attributes keep them whole."""

    def __init__(self, path: str | Path, where: str | int | None, field: str | None, problem: str):
        self.path = str(path)
        self.where = where
        self.field = field
        self.problem = problem = shorten(problem, PROBLEM_LIMIT)
        loc = self.path
        if where is not None:
            loc += f", line {where}" if isinstance(where, int) else f", {shorten(str(where), PROBLEM_LIMIT)}"
        if field:
            loc += f", field '{shorten(str(field))}'"
        super().__init__(f"{loc}: {problem}")


@dataclass(frozen=True)
class Query:
    """One query instance: the bare query and its instruction kept as separate parts.

    ``group`` ties instances of one information need together (InstructIR: the original
    MS MARCO query id; IFIR: the query id). ``level`` is IFIR's instruction level (0 for
    single-level subsets, 1-3 otherwise) and ``None`` where the benchmark has no levels.
    """

    id: str
    query: str
    instruction: str = ""
    group: str = ""
    level: int | None = None
    subset: str = ""


@dataclass(frozen=True)
class Doc:
    """One corpus document; ``title`` is empty where the source has none."""

    id: str
    text: str
    title: str = ""

    @property
    def indexed_text(self) -> str:
        """The text retrievers see: ``title + " " + text`` when a title exists (as IFIR indexes)."""
        return f"{self.title} {self.text}" if self.title else self.text


def add_to_content_hash(h: Any, doc: Doc) -> None:
    r"""Feed one document to a corpus content hash ``h`` (a :func:`hashlib.sha256` object): its
    id, ``b"\x00"``, its indexed text, ``b"\x01"``, in UTF-8 (a lone surrogate from a JSON
    escape is kept as its code point's bytes rather than failing). Shared by
    :meth:`Corpus.content_hash` and the corpus index, so both give the key that run files are
    stored under."""
    h.update(doc.id.encode("utf-8", "surrogatepass"))
    h.update(b"\x00")
    h.update(doc.indexed_text.encode("utf-8", "surrogatepass"))
    h.update(b"\x01")


class Corpus:
    """A corpus read lazily: iterating streams documents, so a 1 GB corpus is never held more
    than once (and only by whoever collects the texts).

    ``stream`` makes a fresh iterator over the documents each time it is called; ``paths``
    names the files behind it. This base class computes ids, hash and word counts with one pass
    each (then keeps them); corpora read from files are
    :class:`~instir.benchmarks.docstore.IndexedCorpus`, which use a cached index.
    """

    def __init__(self, stream: Callable[[], Iterator[Doc]], paths: Iterable[Path] = ()):
        self.paths = [Path(p) for p in paths]
        self._stream = stream
        self._ids: list[str] | None = None
        self._id_set: frozenset[str] | None = None
        self._hash: str | None = None
        self._word_counts: np.ndarray | None = None

    @classmethod
    def from_docs(cls, docs: Iterable[Doc]) -> "Corpus":
        """An in-memory corpus (tests, user-built benchmarks)."""
        held = list(docs)
        return cls(lambda: iter(held))

    def __iter__(self) -> Iterator[Doc]:
        return self._stream()

    def ids(self) -> list[str]:
        """Document ids in file order (read once, then kept: ids are small)."""
        if self._ids is None:
            self._ids = [d.id for d in self]
        return self._ids

    def __len__(self) -> int:
        return len(self.ids())

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self.id_set()

    def id_set(self) -> frozenset[str]:
        """Document ids as a set, for membership checks."""
        if self._id_set is None:
            self._id_set = frozenset(self.ids())
        return self._id_set

    def get(self, doc_ids: Iterable[str]) -> dict[str, Doc]:
        """The documents with these ids, in one streaming pass."""
        wanted = set(doc_ids)
        found: dict[str, Doc] = {}
        for doc in self:
            if doc.id in wanted:
                found[doc.id] = doc
                if len(found) == len(wanted):
                    break
        return found

    def content_hash(self) -> str:
        """SHA-256 over the id and indexed text of every document, in order: a cache key that
        changes whenever any document (or the order) changes. Computed once per Corpus (like
        :meth:`ids`, which the same pass fills in), since every run reuse check asks for it."""
        if self._hash is None:
            h = hashlib.sha256()
            ids = []
            for doc in self:
                ids.append(doc.id)
                add_to_content_hash(h, doc)
            self._hash = h.hexdigest()
            if self._ids is None:
                self._ids = ids
        return self._hash

    def word_counts(self) -> np.ndarray:
        """Whitespace word counts (``len(doc.indexed_text.split())``) of the documents in corpus
        order, as an int64 array: corpus length statistics without holding the texts."""
        if self._word_counts is None:
            import numpy as np

            self._word_counts = np.fromiter((len(d.indexed_text.split()) for d in self), dtype=np.int64)
        return self._word_counts


@dataclass
class Benchmark:
    """Corpus + query instances + qrels of one benchmark (or one IFIR subset) in one setting.

    ``name`` is the registry name (``instructir``, ``ifir/fiqa``, ``instructir-sample`` …),
    ``layout`` the file layout it was read from, ``revision`` the source revision (a
    Hugging Face commit hash, ``bundled-<version>`` for samples, ``local`` when unknown).
    ``family`` names the benchmark family whose spec applies: by default the catalog's family
    of ``name``; None for a benchmark a user built under a name of their own.
    """

    name: str
    layout: str
    revision: str
    setting: str
    corpus: Corpus
    queries: dict[str, Query]
    qrels: Qrels
    source: str = ""
    is_sample: bool = False
    meta: dict = field(default_factory=dict)
    family: str | None = None

    def __post_init__(self) -> None:
        if self.family is None:
            self.family = catalog.family_of(self.name)

    @property
    def spec(self) -> catalog.Family | None:
        """The family's spec (:mod:`instir.benchmarks.catalog`), None for a benchmark of no family."""
        return catalog.family(self.family) if self.family else None

    @property
    def shared_subset(self) -> str:
        """The subset every query belongs to, else ``""`` (queries of several subsets, or none): what fills a
        document format's ``{domain}`` for every retriever, and a table's subset. IFIR's authors format each
        subset's corpus apart, so a benchmark mixing subsets has no one domain word for its documents."""
        subsets = {q.subset for q in self.queries.values()}
        return subsets.pop() if len(subsets) == 1 else ""

    @property
    def label(self) -> str:
        """Name for display; samples always say so."""
        tag = " (bundled SAMPLE, not the benchmark)" if self.is_sample else ""
        return f"{self.name} [{self.setting}]{tag}"

    def rankable(self) -> int:
        """The most documents a run can rank for one query: the longest candidate list of a reranking task
        (FollowIR's ``top_ranked``), else the corpus less a self-hit. IFIR's ``candidates`` are no such lists: its
        runs search the whole corpus, the candidates are hard negatives for judge validation."""
        lists = self.meta.get("top_ranked")
        return max(map(len, lists.values()), default=0) if lists else len(self.corpus) - 1

    def groups(self) -> dict[str, list[str]]:
        """Query ids per group, in query order."""
        out: dict[str, list[str]] = {}
        for q in self.queries.values():
            out.setdefault(q.group, []).append(q.id)
        return out

    def describe(self) -> dict:
        """Counts for summaries and reports."""
        levels: dict[str, int] = {}
        for q in self.queries.values():
            key = "none" if q.level is None else str(q.level)
            levels[key] = levels.get(key, 0) + 1
        n_rel = [sum(1 for g in rel.values() if g > 0) for rel in self.qrels.values()]
        return {
            "benchmark": self.name,
            "setting": self.setting,
            "layout": self.layout,
            "revision": self.revision,
            "sample": self.is_sample,
            "queries": len(self.queries),
            "groups": len(self.groups()),
            "documents": len(self.corpus),
            "levels": json.dumps(levels, sort_keys=True),
            "avg_relevant": round(sum(n_rel) / len(n_rel), 2) if n_rel else 0.0,
        }
