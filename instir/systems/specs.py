"""Systems by name, as grids, notebooks and ``instir run`` name them: ``bm25``, ``dense`` /
``hybrid`` (the bundled MiniLM), ``dense:MODEL`` / ``hybrid:MODEL``, or a retriever system card's
name. :func:`resolve_system` is the one place that turns such a name into a picklable retriever
factory, the name reports give it and its resource hints; the retrieve stage, the sweep's cells
and its actors all build retrievers through it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from instir.errors import UserError, quoted
from instir.parameters import names
from instir.retrieval import Retriever, make_retriever, system_name


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
        raise ValueError(f"unknown system {quoted(name)}; use bm25, dense, dense:MODEL, hybrid or hybrid:MODEL")
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


def run_label(label: str, variant: str, setting: str = "instructed") -> str:
    """The name a run has in every later table: the system's label, `` (query-only)`` for the
    bare-query run, `` [setting]`` for an InstructIR setting other than ``instructed``."""
    name = label + ("" if variant == "instructed" else " (query-only)")
    return name if setting == "instructed" else f"{name} [{setting}]"


def notebook_systems(retrievers: str | Sequence[str], dense_model: str = "",
                     systems: str | Sequence[str] = ()) -> list[str]:
    """The system names the notebooks' parameters choose: each retriever kind (``dense`` and
    ``hybrid`` with ``dense_model`` when one is set: ``dense:MODEL``), then the card names (each
    list as :func:`instir.parameters.names` reads it: papermill's ``-p retrievers bm25`` is a string)."""
    model = f":{dense_model}" if dense_model else ""
    return ([kind if kind == "bm25" else f"{kind}{model}" for kind in names(retrievers, "retrievers")]
            + names(systems, "systems"))
