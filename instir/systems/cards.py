"""System cards: one named, recorded recipe per paper row (data, not code branches).

A :class:`SystemCard` holds everything that changes a system's numbers: the adapter that
runs it, model id and revision, LoRA base weights, pooling, dtype, max lengths, long-document
windows, similarity, the query/document template and adapter-specific ``params`` (BM25
k1/b, hybrid components and weights, reranker depth, prompts), plus where in the authors'
code the recipe comes from. The built-in cards live as TOML files under
``instir/systems/cards/`` (one per paper, and ``mteb.toml``: the paper systems as MTEB 2.26's
model wrappers run them, ``paper = "mteb"``); users add their own TOML or YAML files with the
same layout::

    [[card]]
    name = "my-minilm"
    paper = "user"
    kind = "retriever"
    adapter = "sentence-transformers"
    model = "sentence-transformers/all-MiniLM-L6-v2"
    template = "ifir"

(YAML: a top-level ``card:`` list of mappings, read as YAML 1.2 reads it: ``normalize: on`` is the text
``on``, refused, not true). ``resources`` holds the hints a scale-out
run (``instir sweep``, a grid naming the card) gives Ray for the system's tasks:
``num_gpus`` (GPUs per task, may be fractional) and ``memory_gb`` (host memory per task);
e.g. ``resources = { num_gpus = 1, memory_gb = 20 }``. Every problem in a card file (unknown
adapter or template, missing or mistyped field, a field or param its adapter does not read (:data:`READS`),
duplicate name) is one
:class:`~instir.benchmarks.types.FormatError` naming the file, the line, the card and the field.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import re
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from instir.benchmarks import catalog
from instir.benchmarks.types import FormatError, quoted, shorten
from instir.errors import UnknownNameError, UsageError, closest, unknown
from instir.inputs import InputRefused, key_line, load_config, read_config
from instir.parameters import MAX_CUTOFF, depth
from instir.retrieval.search import KIND_NAMES
from instir.retrieval.windows import AUTHORS_CUT, WINDOWING_MODES
from instir.secrets import refuse_url_credentials, require_env_name
from instir.terminal import terminal_text

#: where a card's recipe comes from: a benchmark family's paper's code, MTEB's model wrappers (cards
#: labelled "MTEB-comparable, not paper-comparable", each a ``variant_of`` a paper card), or a user
PAPERS = (*catalog.families(), "mteb", "user")
KINDS = ("retriever", "reranker")
POOLINGS = ("mean", "cls", "last-token", "eos", "batch-last")
DTYPES = ("float32", "float16", "bfloat16")
SIMILARITIES = ("cosine", "dot")
#: keys of a card's ``resources`` (Ray hints for sweeps): GPUs and host memory (GiB) per task
RESOURCE_KEYS = ("num_gpus", "memory_gb")

#: the adapter of a card whose system the kit cannot run (see :data:`ADAPTERS`)
UNAVAILABLE = "unavailable"
#: Adapter names a card may use -> the kind of system they build (None: either) and the
#: ``"module:callable"`` (a function or a ``Class.from_card`` classmethod) that builds it from the card.
ADAPTERS = {
    "bm25": ("retriever", "instir.systems.adapters:bm25_from_card"),
    "paper-bm25": ("retriever", "instir.systems.adapters:paper_bm25_from_card"),
    "hybrid": ("retriever", "instir.systems.adapters:hybrid_from_card"),
    "sentence-transformers": ("retriever", "instir.systems.adapters:sentence_transformers_from_card"),
    "hf-mean-pool": ("retriever", "instir.systems.adapters:hf_mean_pool_from_card"),
    "peft-decoder": ("retriever", "instir.systems.decoder:DecoderRetriever.from_card"),
    "gritlm": ("retriever", "instir.systems.gritlm:GritLMRetriever.from_card"),
    "openai-embeddings": ("retriever", "instir.systems.openai_embeddings:OpenAIEmbeddingsRetriever.from_card"),
    "colbert-late": ("retriever", "instir.systems.colbert:ColBERTRetriever.from_card"),
    "monot5": ("reranker", "instir.systems.rerankers:MonoT5Reranker.from_card"),
    "cross-encoder": ("reranker", "instir.systems.rerankers:CrossEncoderReranker.from_card"),
    "llm-ptrue": ("reranker", "instir.systems.rerankers:CausalLMPTrueReranker.from_card"),
    # a paper row the kit has no adapter for (an API without a client here, a custom model class):
    # a card of either kind that records the recipe and why it cannot run (``params.reason``)
    UNAVAILABLE: (None, "instir.systems.registry:unavailable_from_card"),
}


@dataclass(frozen=True)
class SystemCard:
    """One system, as a paper ran it (see the module docstring).

    ``pooling`` ``batch-last`` is RepLLaMA's quirk in the InstructIR code: the embedding is
    ``last_hidden_state[:, -1]`` of the right-padded batch, a pad position for every input
    shorter than the longest in its batch. ``variant_of`` names the paper card a kit
    variant modifies (e.g. ``RepLLaMA-7B (fixed)``); such a card is not a paper row.
    """

    name: str
    paper: str
    kind: str
    adapter: str
    model: str = ""
    revision: str = ""
    base_model: str = ""
    pooling: str = ""
    dtype: str = ""
    query_max_length: int | None = None
    doc_max_length: int | None = None
    windowing: str = ""
    similarity: str = ""
    normalize: bool | None = None
    template: str = ""
    params: Mapping = field(default_factory=dict, hash=False)
    requires: tuple[str, ...] = ()
    resources: Mapping = field(default_factory=dict, hash=False)
    source: str = ""
    variant_of: str = ""

    def __post_init__(self) -> None:
        if self.adapter not in ADAPTERS:  # a card built in Python (card files are checked as they are read)
            raise unknown("adapter", self.adapter, ADAPTERS, where=f"of system {quoted(self.name)}")
        object.__setattr__(self, "params", MappingProxyType(dict(self.params)))
        object.__setattr__(self, "resources", MappingProxyType(dict(self.resources)))
        object.__setattr__(self, "requires", tuple(self.requires))

    def to_dict(self) -> dict:
        """JSON-ready dict of every field (what a run sidecar records)."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = _plain(value)
        return out


def _plain(value: Any) -> Any:
    """Mapping proxies and tuples as plain dicts and lists (recursively)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


_REQUIRED = ("name", "paper", "kind", "adapter")
_CHOICES = {"paper": PAPERS, "kind": KINDS, "pooling": POOLINGS, "dtype": DTYPES, "windowing": WINDOWING_MODES,
            "similarity": SIMILARITIES}


def _type_ok(name: str, value: Any) -> str | None:
    """None when ``value`` fits field ``name``, else what was expected."""
    if name in ("query_max_length", "doc_max_length"):  # a count, as the params' counts are (parameters.depth)
        return None if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_CUTOFF else (
            f"a whole number from 1 to {MAX_CUTOFF:,}")
    if name == "normalize":
        return None if isinstance(value, bool) else "true or false"
    if name == "params":
        return None if isinstance(value, Mapping) else "a table (mapping)"
    if name == "resources":
        ok = isinstance(value, Mapping) and all(
            key in RESOURCE_KEYS and isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0
            for key, v in value.items())
        return None if ok else f"a table of non-negative numbers with keys among {', '.join(RESOURCE_KEYS)}"
    if name == "requires":
        ok = isinstance(value, (list, tuple)) and all(isinstance(v, str) and v for v in value)
        return None if ok else "a list of python import names"
    return None if isinstance(value, str) else "a string"


#: A param's check: None when the value suits it, else the problem (``must be …, got …``).
Check = Callable[[Any], "str | None"]


def _must(test: Callable[[Any], bool], expected: str) -> Check:
    """The check that ``test(value)`` holds, else ``must be <expected>, got <value>``."""
    return lambda value: None if test(value) else f"must be {expected}, got {quoted(value)}"


def _one_of(*values: str) -> Check:
    """The check that the value is one of ``values`` (one value: the only way the adapter runs, as the card records)."""
    expected = f"one of {', '.join(values)}" if len(values) > 1 else f"{values[0]!r} (the one way the adapter runs)"
    return _must(lambda value: isinstance(value, str) and value in values, expected)


def _number(value: Any) -> bool:
    """A finite int or float (not a boolean)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _raised(check: Callable[[Any, str], Any]) -> Check:
    """A check from a function that raises a :class:`UsageError` (or ValueError) saying what is wrong."""
    def problem(value: Any) -> str | None:
        try:  # its client refuses it too; here the card's file and field are named
            check(value, "the value")
        except (UsageError, ValueError) as err:
            return str(err)
        return None
    return problem


def _concurrency(value: Any) -> str | None:
    """Requests in flight at once (:func:`instir.http_retry.check_concurrency`: a typo of 10,000 would start that
    many threads against a paid API)."""
    from instir.http_retry import check_concurrency

    return _raised(check_concurrency)(value)


def _stemmer(value: Any) -> str | None:
    """``none`` or a PyStemmer algorithm (BM25's ``stemmer``)."""
    import Stemmer

    return None if value == "none" or value in Stemmer.algorithms() else (
        f"must be 'none' or a PyStemmer algorithm, got {quoted(value)}")


def _stopwords(value: Any) -> str | None:
    """``none``, ``lucene``, a bm25s language or a list of words (BM25's ``stopwords``)."""
    if isinstance(value, list):
        return None if all(isinstance(word, str) for word in value) else f"must be a list of words, got {quoted(value)}"
    if value in ("none", "lucene"):
        return None
    if isinstance(value, str):
        import bm25s

        with contextlib.suppress(ValueError):  # a language bm25s does not know
            bm25s.tokenize(["a"], stopwords=value, show_progress=False)
            return None
    return f"must be 'none', 'lucene', a bm25s language such as 'en', or a list of words, got {quoted(value)}"


#: a count (batches, lengths, depth, vector size), by the one rule of counts (:func:`instir.parameters.depth`):
#: 0, -3, 1e9, 10**20 or "many" would fail late or oddly
_COUNT = _raised(lambda value, what: depth(value, where=""))
_TEXT = _must(lambda value: isinstance(value, str), "a string")
_FLAG = _must(lambda value: isinstance(value, bool), "true or false")
_SIDE = _one_of("left", "right")
#: BM25's k1 and b (a k1 of 1e308 overflowed every score into a run of no rows; a nan or a string failed in the
#: index cache), and rank_bm25's epsilon
_K1 = _must(lambda value: _number(value) and 0 <= value <= 100, "a number from 0 to 100")
_FRACTION = _must(lambda value: _number(value) and 0 <= value <= 1, "a number from 0 to 1")
_TEXT_TABLE = _must(lambda value: isinstance(value, Mapping) and all(
    isinstance(v, str) for v in value.values()), "a table of strings")
#: a hybrid's RRF weights (dense, lexical): one weight, or a string, ran both halves and then failed in the fusion
_WEIGHTS = _must(lambda value: isinstance(value, list) and len(value) == 2 and all(
    _number(v) and v >= 0 for v in value) and any(value), "two non-negative numbers (dense, lexical), not both 0")
#: bm25s' scoring methods
BM25_METHODS = ("robertson", "lucene", "atire", "bm25l", "bm25+")
#: what a peft-decoder card may pool by, and the orders it may encode documents in (:mod:`instir.systems.decoder`)
DECODER_POOLINGS = ("batch-last", "last-token", "eos")
DOC_ORDERS = ("", "length-desc")
#: GritLM's ``attn`` settings (``GritLM.__init__``): the first two letters are the embedding mode's
ATTN_MODES = ("bbcc", "cccc", "bb", "cc")
#: where a card's key must come from (its variable's name) and where it may not hide: checked for every adapter's
#: card (a key in a card file is refused before anything echoes it)
SECRET_PARAMS = {"api_key_env": _raised(require_env_name), "base_url": _raised(refuse_url_credentials)}


@dataclass(frozen=True)
class Reads:
    """What one adapter reads of a card besides :data:`COMMON_FIELDS`: its ``fields``, each with the values it takes
    (None: any the field allows), and its ``params``, each with its value's check. A card giving anything else is
    refused as it is read: the run's sidecar records the whole card, so a field the adapter ignored was reported as
    applied."""

    fields: Mapping[str, tuple[str, ...] | None]
    params: Mapping[str, Check]
    #: the params it cannot run without (a hybrid's two cards)
    needs: tuple[str, ...] = ()


#: the fields every card has, whatever its adapter (its identity, where it comes from, what a sweep gives it)
COMMON_FIELDS = ("name", "paper", "kind", "adapter", "params", "requires", "resources", "source", "variant_of")
#: the fields an embedding model's adapter reads (sentence-transformers, hf-mean-pool, peft-decoder, gritlm)
_ENCODER = {"model": None, "revision": None, "dtype": None, "query_max_length": None, "doc_max_length": None,
            "normalize": None, "similarity": None, "template": None}
_RERANKER_FIELDS = {"model": None, "revision": None, "dtype": None}
#: ``first_stage`` and ``depth``: the run a reranker row reranks and how deep, as its paper did (``instir rerank``
#: takes them as ``--run`` and ``--depth``; ``first_stage`` must name a card)
_RERANKER_PARAMS = {"batch_size": _COUNT, "max_length": _COUNT, "query_format": _TEXT, "first_stage": _TEXT,
                    "depth": _COUNT}
#: What each adapter of :data:`ADAPTERS` reads of a card (its code: ``card.<field>``, ``params.get``); None: all
#: (``unavailable`` runs nothing, it records the recipe of a row the kit cannot run).
READS: dict[str, Reads | None] = {
    "bm25": Reads({"template": None}, {"k1": _K1, "b": _FRACTION, "method": _one_of(*BM25_METHODS),
                                       "stemmer": _stemmer, "stopwords": _stopwords}),
    "paper-bm25": Reads({"template": None}, {"k1": _K1, "b": _FRACTION, "epsilon": _FRACTION}),
    "hybrid": Reads({"template": None}, {"dense": _TEXT, "lexical": _TEXT, "weights": _WEIGHTS, "rrf_k": _COUNT},
                    needs=("dense", "lexical")),
    "sentence-transformers": Reads(
        {**_ENCODER, "windowing": None, "pooling": ("mean", "cls", "last-token")},  # the model's own, when built
        {"batch_size": _COUNT, "trust_remote_code": _FLAG, "padding_side": _SIDE}),
    "hf-mean-pool": Reads({**_ENCODER, "windowing": None, "pooling": ("mean",)}, {"batch_size": _COUNT}),
    "peft-decoder": Reads({**_ENCODER, "base_model": None, "pooling": DECODER_POOLINGS},
                          {"batch_size": _COUNT, "padding_side": _SIDE, "pad_to_multiple_of": _COUNT,
                           "doc_order": _must(lambda value: value in DOC_ORDERS, "'length-desc' or empty"),
                           "tokenizer": _TEXT}),
    "gritlm": Reads({**_ENCODER, "pooling": ("mean",)},
                    {"batch_size": _COUNT, "attn": _one_of(*ATTN_MODES), "embed_eos": _TEXT, "instruction_end": _TEXT,
                     "mode": _one_of("embedding")}),
    "openai-embeddings": Reads({"model": None, "similarity": None, "template": None, "windowing": (AUTHORS_CUT,)},
                               {**SECRET_PARAMS, "auth_header": _TEXT, "query_params": _TEXT_TABLE,
                                "dimensions": _COUNT, "batch_size": _COUNT, "concurrency": _concurrency,
                                "tokenizer": _one_of("tiktoken")}),
    "colbert-late": Reads({"model": None, "revision": None, "query_max_length": None, "doc_max_length": None,
                           "template": None},
                          {"attend_to_mask_tokens": _FLAG, "mask_punctuation": _FLAG, "batch_size": _COUNT}),
    "monot5": Reads({**_RERANKER_FIELDS, "doc_max_length": None},
                    {**_RERANKER_PARAMS, "prompt": _TEXT, "false_token": _TEXT, "true_token": _TEXT}),
    "cross-encoder": Reads({**_RERANKER_FIELDS, "doc_max_length": None},
                           {**_RERANKER_PARAMS, "truncation": _one_of("only_second")}),
    "llm-ptrue": Reads(_RERANKER_FIELDS, {**_RERANKER_PARAMS, "prompt": _TEXT, "false_token": _one_of("false"),
                                          "true_token": _one_of("true"), "padding_side": _one_of("left")}),
    UNAVAILABLE: None,
}


def reads_problem(card: Mapping) -> tuple[str, str] | None:
    """``(field, problem)`` of the first field or param of ``card`` (a card file's mapping, or
    :meth:`SystemCard.to_dict`) that its adapter does not read or cannot take (:data:`READS`); None when all fit.
    Empty fields (``""``, none) are not given."""
    adapter = card["adapter"]
    params = card.get("params") or {}
    for key, check in SECRET_PARAMS.items():
        problem = check(params[key]) if key in params else None
        if problem:
            return f"params.{key}", problem
    reads = READS[adapter]
    if reads is None:
        return None
    for key, value in card.items():
        if key in COMMON_FIELDS or value in ("", None):
            continue
        if key not in reads.fields:
            return key, (f"the {adapter} adapter reads no {key}{_meant(key, reads.fields)}; it reads: "
                         f"{', '.join(reads.fields) or 'none'}")
        choices = reads.fields[key]
        if choices is not None and value not in choices:
            return key, f"the {adapter} adapter takes {' or '.join(map(repr, choices))}, got {quoted(value)}"
    for key, value in params.items():
        if key not in reads.params:
            return (f"params.{shorten(str(key))}", f"the {adapter} adapter reads no such param"
                                                  f"{_meant(key, reads.params)}; it reads: "
                                                  f"{', '.join(reads.params) or 'none'}")
        problem = reads.params[key](value)
        if problem:
            return f"params.{key}", problem
    for key in reads.needs:
        if key not in params:
            return f"params.{key}", f"the {adapter} adapter cannot run without it (a card's name)"
    return None


def _meant(name: object, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` after a mistyped ``name``, where a known one is close; empty otherwise."""
    close = closest(name, known)
    return f" (did you mean {close!r}?)" if close else ""


def card_from_mapping(data: Mapping, path: str | Path, index: int) -> SystemCard:
    """Build and check one card from a parsed mapping (``index``: its position in the file)."""
    from instir.formatting import list_templates

    label = f"card {quoted(data.get('name'))}" if isinstance(data.get("name"), str) else f"card #{index + 1}"
    known = {f.name for f in dataclasses.fields(SystemCard)}
    for key in data:
        if key not in known:
            raise FormatError(path, label, shorten(str(key)),
                              f"unknown field{_meant(key, known)}; known: {', '.join(sorted(known))}")
    for key in _REQUIRED:
        if key not in data or data[key] in ("", None):
            raise FormatError(path, label, key, "missing (required: name, paper, kind, adapter)")
    for key, value in data.items():
        expected = _type_ok(key, value)
        if expected is not None:
            raise FormatError(path, label, key, f"must be {expected}, got {quoted(value)}")
    if terminal_text(data["name"]) != data["name"]:  # the name of a system in every table, page and progress bar
        raise FormatError(path, label, "name", "holds a control character, a line break or an invisible mark, which a "
                                               "terminal acts on and a page shows as nothing or reordered; remove it")
    for key, choices in _CHOICES.items():
        value = data.get(key, "")
        if value and value not in choices:
            raise FormatError(path, label, key,
                              f"unknown value {quoted(value)}{_meant(value, choices)}; use one of {', '.join(choices)}")
    adapter = data["adapter"]
    if adapter not in ADAPTERS:
        raise FormatError(path, label, "adapter",
                          f"unknown adapter {quoted(adapter)}{_meant(adapter, ADAPTERS)}; known: {', '.join(ADAPTERS)}")
    if ADAPTERS[adapter][0] not in (None, data["kind"]):
        raise FormatError(path, label, "kind", f"adapter {adapter!r} builds a {ADAPTERS[adapter][0]}, "
                                               f"not a {data['kind']}")
    problem = reads_problem(data)
    if problem is not None:
        raise FormatError(path, label, *problem)
    template = data.get("template", "")
    if template and template not in list_templates():
        raise FormatError(path, label, "template", f"unknown template {quoted(template)}; known: "
                                                   f"{', '.join(list_templates())}")
    return SystemCard(**dict(data))


def _document(path: Path, text: str) -> Any:
    """The parsed TOML or YAML text of a card file (a :class:`FormatError` where it does not parse)."""
    if path.suffix not in (".toml", ".yaml", ".yml"):
        raise FormatError(path, None, None, "card files end in .toml, .yaml or .yml")
    try:
        return load_config(path, text) or {}
    except InputRefused as err:
        raise FormatError(path, err.line, None, err.problem) from None


def _parse(path: Path, text: str) -> list:
    """The list of card mappings in a TOML (``[[card]]``) or YAML (``card:``) file."""
    doc = _document(path, text)
    if not isinstance(doc, Mapping) or not isinstance(doc.get("card"), list):
        raise FormatError(path, None, "card", "expected a list of cards ([[card]] tables in TOML, 'card:' in YAML)")
    for i, item in enumerate(doc["card"]):
        if not isinstance(item, Mapping):
            raise FormatError(path, f"card #{i + 1}", None, "each card must be a table (mapping)")
    return doc["card"]


def builtin_card_files() -> list[tuple[str, str]]:
    """``(name, text)`` of every built-in card file (package data, sorted by name)."""
    folder = resources.files("instir.systems").joinpath("cards")
    return sorted((entry.name, entry.read_text(encoding="utf-8")) for entry in folder.iterdir()
                  if entry.name.endswith(".toml"))


def load_cards(paths: Iterable[str | Path] = ()) -> dict[str, SystemCard]:
    """Built-in cards plus the cards in ``paths`` (TOML/YAML files), by name.

    Names are unique case-insensitively across all files (a user card cannot shadow a
    built-in one); hybrid components and reranker first stages must name existing cards.
    """
    sources = [(Path("instir/systems/cards") / name, text) for name, text in builtin_card_files()]
    for p in paths:
        try:
            text = read_config(p, "card file")
        except InputRefused as err:
            problem = "no such card file" if err.problem == "card file not found" else err.problem
            raise FormatError(p, err.line, None, problem) from None
        sources.append((Path(p), text))
    cards: dict[str, SystemCard] = {}
    origin: dict[str, tuple[Path, str, int]] = {}
    for path, text in sources:
        for i, data in enumerate(_parse(path, text)):
            with _on_its_line(path, text, i):
                card = card_from_mapping(data, path, i)
                low = card.name.lower()
                if low in origin:
                    raise FormatError(path, f"card {quoted(card.name)}", "name",
                                      f"duplicate name (already defined in {origin[low][0]})")
            cards[card.name] = card
            origin[low] = (path, text, i)
    known = set(origin)  # every card's name in lower case, once (made again per card: 13,500 cards took 37 s)
    for card in cards.values():
        path, text, i = origin[card.name.lower()]
        with _on_its_line(path, text, i):
            _check_references(card, known, path)
    return cards


@contextlib.contextmanager
def _on_its_line(path: Path, text: str, index: int) -> Iterator[None]:
    """Add to a card's :class:`FormatError` the line of its field in the file (``text``; ``index``: the card)."""
    try:
        yield
    except FormatError as err:
        keys = ["card", index, *(err.field.split(".") if err.field else ())]
        line = key_line(text, lambda prefix: _document(path, prefix), keys) if isinstance(err.where, str) else None
        if line is None:
            raise
        raise FormatError(err.path, f"line {line}, {err.where}", err.field, err.problem) from None


def _check_references(card: SystemCard, names: Container[str], path: Path) -> None:
    """Cards named inside a card (hybrid parts, first stage, variant_of) must exist (``names``: every card's, in
    lower case)."""
    refs = [("variant_of", card.variant_of)] if card.variant_of else []
    refs += [(f"params.{key}", card.params.get(key)) for key in ("dense", "lexical", "first_stage")
             if key in card.params]
    for fld, ref in refs:
        if not isinstance(ref, str) or ref.lower() not in names:
            raise FormatError(path, f"card {quoted(card.name)}", fld, f"names no card: {quoted(ref)}")


def base_name(name: str) -> str:
    """``BM25 (IFIR)`` -> ``bm25``: the printed name without a trailing parenthesis."""
    return re.sub(r"\s*\([^)]*\)\s*$", "", name).strip().lower()


def get_card(name: str, cards: Mapping[str, SystemCard] | None = None, *, paper: str | None = None) -> SystemCard:
    """A card by name (case-insensitive), else by model id where only one card has it, else by the name a paper
    prints for its model (``RepLLaMA``, ``E5-mistral-7b-inst``: :func:`instir.papers.loader.model_key`).

    A name without its ``(…)`` suffix finds the one card that has it (``ColBERT`` ->
    ``ColBERT (IFIR, mean-pooled)``); when several do (``BM25`` -> ``BM25 (IFIR)``,
    ``BM25 (InstructIR)``) it is refused with the candidates listed. With ``paper`` (``ifir``: the family of
    the benchmark a system runs on), that paper's cards are asked first, so every name its tables print finds
    its card (``GTR-XL`` on IFIR is ``GTR-XL (IFIR)``), after a user's own card of exactly that name (one of no
    built-in file, whatever its paper: a card ``bm25`` is never replaced by a paper's ``BM25 (…)``).
    """
    cards = load_cards() if cards is None else cards
    mine = _named(name, cards)
    if mine is not None and mine.name.lower() not in _builtin_names():
        return mine
    if paper is not None:
        own = {key: card for key, card in cards.items() if card.paper == paper and not card.variant_of}
        try:
            return _find_card(name, own)
        except UnknownNameError:
            pass
    return _find_card(name, cards)


@functools.cache
def _builtin_names() -> frozenset[str]:
    """The lower-case names of the built-in cards: a user's card (from ``--cards``) is any other."""
    return frozenset(str(item.get("name", "")).lower() for name, text in builtin_card_files()
                     for item in _parse(Path(name), text) if isinstance(item, Mapping))


def _named(name: str, cards: Mapping[str, SystemCard]) -> SystemCard | None:
    """The card named ``name`` (case and outer spaces aside), None when there is none."""
    low = name.strip().lower()
    return next((card for card in cards.values() if card.name.lower() == low), None)


def _resolving(candidates: Sequence[str], cards: Mapping[str, SystemCard]) -> str:
    """What resolves an ambiguous name: one of the ``candidates``, or, where they are cards of several papers, that
    paper (``--paper`` of ``instir systems``, ``paper=`` of :func:`get_card`): a name as a paper prints it finds that
    paper's card."""
    papers = sorted({cards[c].paper for c in candidates if cards[c].paper})
    named = ", ".join(candidates)
    by_paper = (f"; or name the paper that prints it: `instir systems NAME --paper PAPER`, get_card(name, "
                f"paper=PAPER) (PAPER one of {', '.join(papers)})") if len(papers) > 1 else ""
    return f"use one of: {named}{by_paper}"


def _find_card(name: str, cards: Mapping[str, SystemCard]) -> SystemCard:
    """:func:`get_card` among ``cards``."""
    low = name.strip().lower()
    exact = _named(name, cards)
    if exact is not None:
        return exact
    by_model = [c for c in cards.values() if c.model.lower() == low and not c.variant_of]
    if len(by_model) == 1:
        return by_model[0]
    candidates = [c.name for c in cards.values() if base_name(c.name) == low] or [c.name for c in by_model]
    if not candidates:
        from instir.papers.loader import model_key

        key = model_key(name)
        candidates = [c.name for c in cards.values() if not c.variant_of and key and
                      (key == "bm25" if c.adapter in ("bm25", "paper-bm25") else model_key(c.model) == key)]
    if len(candidates) == 1:
        return cards[candidates[0]]
    if candidates:
        raise UnknownNameError(f"system {quoted(name)} is ambiguous; {_resolving(sorted(candidates), cards)}")
    raise unknown("system", name, [*KIND_NAMES, *sorted(cards)], listed=False,
                  more=f" (known: {', '.join(KIND_NAMES)} and {len(cards)} cards, which `instir systems` lists)")
