"""The kit's benchmarks as ir_datasets datasets: after :func:`register_ir_datasets`,
``ir_datasets.load("instir/<name>[/<setting>]")`` serves every benchmark, IFIR subset and setting
that :func:`instir.load_benchmark` loads, bundled samples included (:func:`dataset_ids` lists them).

Each dataset reads nothing until asked; ``docs_iter()`` slices as ir_datasets' own does
(``docs_iter()[:3]``). Its records and the ways in from PyTerrier are in docs/interop.md. No
``from __future__ import annotations`` in this module: PyTerrier's text loader reads the field
types of the record classes.
"""

import itertools
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple, Optional, Union

from instir.benchmarks import catalog
from instir.benchmarks.registry import benchmark_settings, list_benchmarks, load_benchmark
from instir.benchmarks.types import Benchmark, Doc
from instir.extras import require
from instir.formatting import default_template

ir_datasets = require("ir_datasets")

from ir_datasets.datasets.base import Dataset  # noqa: E402  (after the check that ir_datasets is there)
from ir_datasets.formats import BaseDocs, BaseQrels, BaseQueries, BaseScoredDocs, GenericScoredDoc, TrecQrel  # noqa: E402
from ir_datasets.indices import Docstore  # noqa: E402

#: the first part of every id registered here
PREFIX = "instir"

#: what a grade means (InstructIR and IFIR judge relevant passages only)
QRELS_DEFS = {0: "not relevant", 1: "relevant to the query instance (the query under its instruction)"}


class InstirDoc(NamedTuple):
    """A corpus document; ``title`` is empty where the source has none."""

    doc_id: str
    text: str
    title: str

    def default_text(self) -> str:
        """What the kit's retrievers index (:meth:`instir.benchmarks.types.Doc.indexed_text`)."""
        return Doc(self.doc_id, self.text, self.title).indexed_text


class InstirQuery(NamedTuple):
    """A query instance: ``text`` as the kit formats it for BM25 and plain encoders, and its raw
    parts (``group`` ties the instances of one information need; ``level`` is IFIR's instruction
    level, None for InstructIR; ``subset`` the IFIR subset, empty for InstructIR)."""

    query_id: str
    text: str
    query: str
    instruction: str
    group: str
    level: Optional[int]
    subset: str

    def default_text(self) -> str:
        """The instance as the kit formats it (``text``)."""
        return self.text


class _Registration:
    """Where the registered datasets read from, and the benchmarks they loaded (per root)."""

    def __init__(self) -> None:
        self.root: Optional[Path] = None
        self.loaded: dict[tuple[str, str, Optional[Path]], Benchmark] = {}
        self.registered: set[str] = set()

    def benchmark(self, name: str, setting: str) -> Benchmark:
        key = (name, setting, self.root)
        if key not in self.loaded:
            self.loaded[key] = load_benchmark(name, setting, root=self.root)
        return self.loaded[key]


_STATE = _Registration()


def dataset_ids() -> dict[str, tuple[str, str]]:
    """Every id :func:`register_ir_datasets` registers, with the ``(benchmark name, setting)``
    it loads: ``instir/<name>`` for the default setting, ``instir/<name>/<setting>`` for the others."""
    ids = {}
    for name in list_benchmarks():
        for setting in benchmark_settings(name):
            suffix = "" if setting == "instructed" else f"/{setting}"
            ids[f"{PREFIX}/{name}{suffix}"] = (name, setting)
    return ids


def register_ir_datasets(root: Union[str, Path, None] = None) -> list[str]:
    """Register every benchmark, subset and setting as an ir_datasets dataset (ids of
    :func:`dataset_ids`) and return the ids, so that ``ir_datasets.load("instir/ifir/fiqa")`` and
    PyTerrier's ``pt.get_dataset("irds:instir/ifir/fiqa")`` work.

    The one call it must be: ir_datasets 0.6 has no plugin hook (no entry-point group; its
    datasets are the modules it imports itself), so nothing is registered by installing the kit.
    Call it once per process before ``ir_datasets.load``; for the command line,
    ``python -m instir.interop export instir/ifir/fiqa docs`` is ``ir_datasets export …`` with the
    kit's ids registered. (PyTerrier's ``pt.get_dataset("instir:ifir/fiqa")`` needs no call.)

    ``root`` is where real benchmarks are read from, as :func:`instir.load_benchmark` takes it
    (None: the fetch cache). Calling again registers nothing twice and only changes the root for
    what is loaded from then on."""
    _STATE.root = Path(root) if root is not None else None
    return ensure_registered()


def ensure_registered() -> list[str]:
    """Register the ids of :func:`dataset_ids` not registered yet, keeping the root of an earlier
    :func:`register_ir_datasets` call (the fetch cache without one); return all the ids."""
    ids = dataset_ids()
    docs: dict[str, _Docs] = {}
    for dataset_id, (name, setting) in ids.items():
        if dataset_id in _STATE.registered:
            continue
        handler = docs.setdefault(name, _Docs(name))
        parts = [handler, _Queries(name, setting), _Qrels(name, setting)]
        family = catalog.family_of(name)
        if family and catalog.family(family).rerank:  # a reranking task: its candidate lists are part of it
            parts.append(_Candidates(name, setting))
        ir_datasets.registry.register(dataset_id, Dataset(*parts))
        _STATE.registered.add(dataset_id)
    return list(ids)


def _doc(doc: Doc) -> InstirDoc:
    return InstirDoc(doc.id, doc.text, doc.title)


class _Store(Docstore):
    """Single documents by id, read through the kit's corpus (its cached index seeks to them)."""

    def __init__(self, docs: "_Docs"):
        super().__init__(InstirDoc, "doc_id")
        self.docs = docs

    def get_many_iter(self, doc_ids: Iterable[str]) -> Iterator[InstirDoc]:
        for doc in self.docs.corpus().get(doc_ids).values():
            yield _doc(doc)


class _DocsIter:
    """The documents in corpus order, sliceable as ir_datasets' own ``docs_iter()`` is once its
    docstore is built (``Lz4PickleIter``): ``it[:3]``, ``it[10:-5:2]``, ``it[-1]``, ``it[:0.5]``,
    slices of slices, positions counted from what is consumed; the slice arithmetic is
    ir_datasets' own (``apply_sub_slice``, ``slice_idx``). Reading streams the corpus from its
    start; only a slice needs the count."""

    def __init__(self, docs: "_Docs", window: Optional[slice] = None):
        self.docs, self._window = docs, window
        self._stream: Optional[Iterator[Doc]] = None
        self._consumed = 0

    def _slice(self) -> slice:
        """What is left: ``start`` to ``stop`` by ``step`` (every document when not sliced)."""
        if self._window is None:
            return slice(self._consumed, self.docs.docs_count(), 1)
        return self._window

    def __iter__(self) -> "_DocsIter":
        return self

    def __next__(self) -> InstirDoc:
        if self._window is None:
            self._stream = self._stream or iter(self.docs.corpus())
            doc = next(self._stream)
            self._consumed += 1
            return _doc(doc)
        start, stop, step = self._window.start, self._window.stop, self._window.step or 1
        if start >= stop:
            raise StopIteration
        self._stream = self._stream or itertools.islice(iter(self.docs.corpus()), start, None, step)
        doc = next(self._stream)
        self._window = slice(start + step, stop, self._window.step)
        return _doc(doc)

    def __getitem__(self, key: Union[int, slice]) -> Union[InstirDoc, "_DocsIter"]:
        if isinstance(key, slice):
            return _DocsIter(self.docs, ir_datasets.util.apply_sub_slice(self._slice(), key))
        if isinstance(key, int):
            found = next(_DocsIter(self.docs, ir_datasets.util.slice_idx(self._slice(), key)), None)
            if found is None:
                raise IndexError(f"document {key} of {self._slice()}")
            return found
        raise TypeError("key must be int or slice")


class _Docs(BaseDocs):
    """The corpus of one benchmark (shared by its settings)."""

    def __init__(self, name: str):
        self.name = name

    def corpus(self):
        return _STATE.benchmark(self.name, "instructed").corpus

    def docs_iter(self) -> "_DocsIter":
        return _DocsIter(self)

    def docs_count(self) -> int:
        return len(self.corpus())

    def docs_cls(self) -> type:
        return InstirDoc

    def docs_store(self, field: str = "doc_id") -> Docstore:
        if field != "doc_id":
            raise ValueError(f"the instir docstore looks documents up by doc_id, not {field!r}")
        return _Store(self)

    def docs_namespace(self) -> str:
        return f"{PREFIX}/{self.name}"

    def docs_lang(self) -> str:
        return "en"


class _Queries(BaseQueries):
    """The query instances of one benchmark in one setting."""

    def __init__(self, name: str, setting: str):
        self.name, self.setting = name, setting

    def queries_iter(self) -> Iterator[InstirQuery]:
        benchmark = _STATE.benchmark(self.name, self.setting)
        template = default_template("bm25", benchmark)
        for q in benchmark.queries.values():
            yield InstirQuery(q.id, str(template.format_query(q)), q.query, q.instruction, q.group, q.level, q.subset)

    def queries_count(self) -> int:
        return len(_STATE.benchmark(self.name, self.setting).queries)

    def queries_store(self) -> "_QueryStore":
        """The query instances by id, for ``ir_datasets lookup --qid``."""
        return _QueryStore({q.query_id: q for q in self.queries_iter()})

    def queries_cls(self) -> type:
        return InstirQuery

    def queries_namespace(self) -> str:
        return f"{PREFIX}/{self.name}"

    def queries_lang(self) -> str:
        return "en"


class _QueryStore:
    """Query instances by id, as ir_datasets' stores give them: ``get`` raises a ``KeyError`` for an unknown id."""

    def __init__(self, queries: dict[str, InstirQuery]):
        self._queries = queries

    def get(self, query_id: str) -> InstirQuery:
        return self._queries[query_id]


class _Qrels(BaseQrels):
    """The judgments of one benchmark in one setting, in query order."""

    def __init__(self, name: str, setting: str):
        self.name, self.setting = name, setting

    def qrels_iter(self) -> Iterator[TrecQrel]:
        for qid, docs in _STATE.benchmark(self.name, self.setting).qrels.items():
            for doc_id, grade in docs.items():
                yield TrecQrel(qid, doc_id, grade, "0")

    def qrels_count(self) -> int:
        return sum(len(docs) for docs in _STATE.benchmark(self.name, self.setting).qrels.values())

    def qrels_cls(self) -> type:
        return TrecQrel

    def qrels_defs(self) -> dict[int, str]:
        """Every grade the judgments hold: 0 and 1 as InstructIR and IFIR judge, and a grade above 1 (FollowIR's
        TREC judgments grade 2) as relevance of that degree, so no grade a dataset gives is left undefined."""
        grades = {grade for docs in _STATE.benchmark(self.name, self.setting).qrels.values() for grade in docs.values()}
        return {**QRELS_DEFS, **{grade: f"relevant, grade {grade} (a higher grade is more relevant)" if grade > 1
                                 else f"not relevant (grade {grade})" for grade in sorted(grades - set(QRELS_DEFS))}}


class _Candidates(BaseScoredDocs):
    """A reranking task's candidate lists (FollowIR's ``top_ranked``) as scoreddocs, so a system run through
    ir_datasets or PyTerrier ranks what the task ranks: each list in its order, scored from its length down to 1
    (the lists carry no first-stage scores)."""

    def __init__(self, name: str, setting: str):
        self.name, self.setting = name, setting

    def scoreddocs_iter(self) -> Iterator[GenericScoredDoc]:
        for qid, doc_ids in _STATE.benchmark(self.name, self.setting).meta["top_ranked"].items():
            for place, doc_id in enumerate(doc_ids):
                yield GenericScoredDoc(qid, doc_id, float(len(doc_ids) - place))

    def scoreddocs_cls(self) -> type:
        return GenericScoredDoc
