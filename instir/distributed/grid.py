"""A sweep grid: benchmarks × systems × settings × variants (instructed / query-only), read
from YAML, and the ONE place that turns a grid's system string into a retriever factory and
its resource hints (:func:`resolve_system`).

Grid file (every key but ``benchmarks`` and ``systems`` optional)::

    benchmarks: [instructir-sample, ifir-sample/fiqa]
    systems: [bm25, dense, "dense:sentence-transformers/all-MiniLM-L6-v2", "hybrid:BAAI/bge-base-en-v1.5",
              "BM25 (IFIR)", "Promptriever-7B"]   # ... and any retriever system card name (instir systems)
    variants: [instructed, query-only]     # the instructed template, and the query-only template
    settings: [instructed]                 # InstructIR settings; IFIR has only "instructed"
    k: 100
    data_root: ""                          # real data; empty: the fetch cache
    cache_dir: ""                          # embedding cache; empty: <instir home>/embeddings
    shard_min_docs: 20000                  # corpora this large are encoded by Ray Data first
    judge: {backend: baseline, model: lexical, max_instances: 1}   # optional InstFol step
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from instir.benchmarks import catalog
from instir.errors import UserError
from instir.retrieval import Retriever, make_retriever, system_name

VARIANTS = ("instructed", "query-only")
#: Keys a grid file may hold.
GRID_KEYS = frozenset({"benchmarks", "systems", "variants", "settings", "k", "data_root", "cache_dir",
                       "shard_min_docs", "judge"})


class GridError(UserError, ValueError):
    """A grid file that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class SystemSpec:
    """A resolved grid system: ``name`` as the grid wrote it (the ``retriever`` column of
    ``runs.csv``), ``label`` as reports name it (:func:`instir.retrieval.system_name`, or the
    card's name), ``kind``/``model`` for :func:`instir.retrieval.make_retriever` (kind
    ``system`` for a card, built by :func:`instir.systems.registry.build_retriever` from
    ``card``), and Ray resource hints (``num_gpus``, ``memory_gb``) for the tasks and encoder
    actors that run it."""

    name: str
    label: str
    kind: str
    model: str | None
    resources: dict[str, float] = field(default_factory=dict)
    card: str = ""

    def factory(self, cache_dir: str | None = None) -> Callable[[], Retriever]:
        """A picklable zero-argument function that builds the retriever (on a worker)."""
        if self.kind == "system":
            return _CardFactory(self.card, cache_dir)
        return _Factory(self.kind, self.model, cache_dir)


@dataclass(frozen=True)
class _Factory:
    kind: str
    model: str | None
    cache_dir: str | None

    def __call__(self) -> Retriever:
        retriever = make_retriever(self.kind, self.model)
        if self.cache_dir:
            _set_cache_dir(retriever, self.cache_dir)
        return retriever


@dataclass(frozen=True)
class _CardFactory:
    card: str
    cache_dir: str | None

    def __call__(self) -> Retriever:
        from instir.systems.registry import build_retriever

        return build_retriever(self.card, cache_dir=self.cache_dir)


def _set_cache_dir(retriever: Any, cache_dir: str) -> None:
    """Point a dense retriever (or a hybrid's dense half) at ``cache_dir``."""
    from instir.retrieval.embedding_cache import EmbeddingCache

    for part in (retriever, getattr(retriever, "dense", None)):
        cache = getattr(part, "cache", None)
        if isinstance(cache, EmbeddingCache):
            part.cache = EmbeddingCache(cache_dir, chunk_size=cache.chunk_size, progress=cache.progress)


def resolve_system(name: str) -> SystemSpec:
    """The system a grid names: ``bm25``, ``dense`` / ``hybrid`` (bundled MiniLM),
    ``dense:MODEL`` / ``hybrid:MODEL``, or a retriever system card's name (as ``instir
    retrieve --system`` takes it). Resource hints: a GPU for any model but the bundled
    MiniLM, none for BM25; a card's own ``resources`` (``num_gpus``, ``memory_gb``) instead."""
    kind, _, model = name.partition(":")
    if kind not in ("bm25", "dense", "hybrid"):
        return _card_system(name)
    model = model.strip() or None
    if kind == "bm25" and model:
        raise ValueError(f"unknown system {name!r}; use bm25, dense, dense:MODEL, hybrid or hybrid:MODEL")
    label = system_name(kind, model)
    resources: dict[str, float] = {}
    if kind != "bm25" and model is not None:
        resources = {"num_gpus": 1}
    return SystemSpec(name=name, label=label, kind=kind, model=model, resources=resources)


def _card_system(name: str) -> SystemSpec:
    """A built-in retriever card by name (:func:`instir.systems.registry.retriever_card`)."""
    from instir.systems.cards import RESOURCE_KEYS, load_cards
    from instir.systems.registry import retriever_card

    try:
        card = retriever_card(name, load_cards())
    except UserError as e:  # no such card (or an ambiguous name), or a reranker card
        hint = "; besides cards: bm25, dense, dense:MODEL, hybrid, hybrid:MODEL" if isinstance(e, KeyError) else ""
        raise ValueError(f"{e}{hint}") from None
    resources = {key: float(card.resources[key]) for key in RESOURCE_KEYS if key in card.resources}
    return SystemSpec(name=name, label=card.name, kind="system", model=card.model or None, resources=resources,
                      card=card.name)


@dataclass(frozen=True)
class Cell:
    """One unit of a sweep: a run of ``system`` on ``benchmark`` in ``setting`` with the
    ``variant`` template, then its evaluation. ``cell_id`` is file-name friendly and unique."""

    benchmark: str
    setting: str
    system: SystemSpec
    variant: str

    @property
    def cell_id(self) -> str:
        parts = [self.benchmark, self.setting, self.system.name, self.variant]
        return "__".join("".join(c if c.isalnum() or c in "._-" else "-" for c in p) for p in parts)

    @property
    def run_label(self) -> str:
        """The ``system`` column of ``runs.csv`` (as notebook 02 names it)."""
        label = self.system.label + ("" if self.variant == "instructed" else " (query-only)")
        return label if self.setting == "instructed" else f"{label} [{self.setting}]"


@dataclass(frozen=True)
class Grid:
    """A parsed grid (see the module docstring)."""

    benchmarks: tuple[str, ...]
    systems: tuple[SystemSpec, ...]
    variants: tuple[str, ...] = VARIANTS
    settings: tuple[str, ...] = ("instructed",)
    k: int = 100
    data_root: str | None = None
    cache_dir: str | None = None
    shard_min_docs: int = 20000
    judge: dict[str, Any] | None = None

    def cells(self) -> list[Cell]:
        """Every cell, benchmark-major; IFIR benchmarks only in the ``instructed`` setting."""
        return [Cell(b, s, system, v) for b in self.benchmarks for s in self.settings
                if s == "instructed" or catalog.family_of(b) != "ifir"
                for system in self.systems for v in self.variants]


def parse_grid(data: Any, source: str = "<grid>") -> Grid:
    """A :class:`Grid` from the mapping a YAML file holds; every mistake is one
    :class:`GridError` naming ``source`` and the field."""
    if not isinstance(data, dict):
        raise GridError(f"{source}: a grid is a mapping with benchmarks and systems")
    unknown = sorted(set(data) - GRID_KEYS)
    if unknown:
        raise GridError(f"{source}: unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(GRID_KEYS))}")

    def names(key: str, default: tuple[str, ...] | None = None) -> tuple[str, ...]:
        value = data.get(key, default)
        if value is None:
            raise GridError(f"{source}: field {key!r} is required (a list of names)")
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) for v in value):
            raise GridError(f"{source}: field {key!r} must be a non-empty list of names, got {value!r}")
        return tuple(value)

    systems = []
    for name in names("systems"):
        try:
            systems.append(resolve_system(name))
        except ValueError as e:
            raise GridError(f"{source}: field 'systems': {e}") from None
    variants = names("variants", VARIANTS)
    bad = [v for v in variants if v not in VARIANTS]
    if bad:
        raise GridError(f"{source}: field 'variants': unknown {bad}; use {', '.join(VARIANTS)}")
    k = data.get("k", 100)
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise GridError(f"{source}: field 'k' must be a positive integer, got {k!r}")
    shard = data.get("shard_min_docs", 20000)
    if not isinstance(shard, int) or isinstance(shard, bool) or shard < 1:
        raise GridError(f"{source}: field 'shard_min_docs' must be a positive integer, got {shard!r}")
    judge = data.get("judge")
    if judge is not None and not (isinstance(judge, dict) and isinstance(judge.get("backend"), str)):
        raise GridError(f"{source}: field 'judge' must be a mapping with a backend (hf, openai or baseline)")
    return Grid(benchmarks=names("benchmarks"), systems=tuple(systems), variants=variants,
                settings=names("settings", ("instructed",)), k=k, data_root=data.get("data_root") or None,
                cache_dir=data.get("cache_dir") or None, shard_min_docs=shard, judge=judge)


def load_grid(path: str | Path) -> Grid:
    """Read a grid YAML file (see the module docstring)."""
    import yaml

    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise GridError(f"{path}: cannot read the grid file ({e.strerror})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise GridError(f"{path}{where}: not valid YAML ({getattr(e, 'problem', e)})") from None
    return parse_grid(data, str(path))
