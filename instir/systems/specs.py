"""Systems by name, as grids, notebooks and ``instir run`` name them: ``bm25``, ``dense`` /
``hybrid`` (the bundled MiniLM), ``dense:MODEL`` / ``hybrid:MODEL``, or a retriever system card's
name. :func:`resolve_system` turns such a name into what a plan holds of it (the name reports give
it, its kind and resource hints, a picklable factory); the retriever itself is built by
:func:`instir.systems.registry.build_system`, as every front end builds systems.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from instir.errors import UserError, quoted
from instir.parameters import names
from instir.retrieval import BUNDLED_MODEL_ID, Retriever, system_name
from instir.retrieval.model_files import model_name_problem


@dataclass(frozen=True)
class SystemSpec:
    """A resolved system: ``name`` as the user wrote it (the ``retriever`` column of
    ``runs.csv``), ``label`` as reports name it (:func:`instir.retrieval.system_name`, or the
    card's name), ``kind`` (``bm25``, ``dense``, ``hybrid``, or ``system`` for a ``card``) and
    ``model``, and Ray resource hints (``num_gpus``, ``memory_gb``) for the sweep's actors."""

    name: str
    label: str
    kind: str
    model: str | None
    resources: dict[str, float] = field(default_factory=dict)
    card: str = ""

    def factory(self, cache_dir: str | None = None) -> Callable[[], Retriever]:
        """A picklable zero-argument function that builds the retriever (on a worker), through
        :func:`instir.systems.registry.build_system` (embeddings cached in ``cache_dir``)."""
        from instir.systems.registry import build_system

        options = {"cache_dir": cache_dir} if cache_dir else {}
        return functools.partial(build_system, self.card or self.name, **options)


def resolve_system(name: str) -> SystemSpec:
    """The system a grid names: ``bm25``, ``dense`` / ``hybrid`` (bundled MiniLM),
    ``dense:MODEL`` / ``hybrid:MODEL``, or a retriever system card's name (as ``instir
    retrieve --system`` takes it). The bundled MiniLM by its id (``dense:`` :data:`~instir.retrieval.BUNDLED_MODEL_ID`)
    is the bundled MiniLM (its ``model`` None). Resource hints: a GPU for any model but the bundled
    MiniLM, none for BM25; a card's own ``resources`` (``num_gpus``, ``memory_gb``) instead."""
    kind, _, model = name.partition(":")
    if kind not in ("bm25", "dense", "hybrid"):
        return _card_system(name)
    model = model.strip() or None
    if kind == "bm25" and model:
        raise ValueError(f"unknown system {quoted(name)}; use bm25, dense, dense:MODEL, hybrid or hybrid:MODEL")
    why = model_name_problem(model or "")
    if why:
        raise ValueError(f"system {quoted(name)}: the model is {why}")
    model = None if model == BUNDLED_MODEL_ID else model
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
        raise ValueError(str(e)) from None
    resources = {key: float(card.resources[key]) for key in RESOURCE_KEYS if key in card.resources}
    return SystemSpec(name=name, label=card.name, kind="system", model=card.model or None, resources=resources,
                      card=card.name)


def notebook_systems(retrievers: str | Sequence[str], dense_model: str = "",
                     systems: str | Sequence[str] = ()) -> list[str]:
    """The system names the notebooks' parameters choose: each retriever kind (``dense`` and
    ``hybrid`` with ``dense_model`` when one is set: ``dense:MODEL``), then the card names (each
    list as :func:`instir.parameters.names` reads it: papermill's ``-p retrievers bm25`` is a string; a retriever
    given twice refused, as ``instir run`` refuses it)."""
    model = f":{dense_model}" if dense_model else ""
    return ([kind if kind == "bm25" else f"{kind}{model}" for kind in names(retrievers, "retrievers", unique=True)]
            + names(systems, "systems"))
