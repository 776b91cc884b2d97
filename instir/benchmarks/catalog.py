"""The one home of benchmark facts: each benchmark family is one spec kept as data
(``families/<name>.toml``: its loader, sample, sources, counts, settings, variants and pairing,
measures and headline, BM25 defaults, templates per model family, MTEB tasks, reported numbers
and report views). Every stage, command, notebook and the sweep asks this module; names resolve
through it (:func:`entry`), never by their shape.

A family with ``subsets`` names its benchmarks ``<family>/<subset>`` (its sample
``<sample>/<subset>`` for the subsets the sample holds); one without names itself (its sample
by the sample's name). Adding a family is a spec file here, a loader module, its measures and
its reported numbers (docs/layout.md). A family may also come from outside the package: a spec
named by an installed package's ``instir.families`` entry point, or found in a folder that
:data:`FAMILIES_VAR` names; each is read and checked as the bundled ones are.
"""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import os
import re
import sys
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache, wraps
from importlib import resources
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Annotated, Any, Literal, TypeVar

import Stemmer
from pydantic import ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError
from typing_extensions import Required, TypedDict

from instir.benchmarks.forms import Forms
from instir.errors import UnknownNameError, UsageError, quoted, unknown
from instir.inputs import InputRefused, key_line, read_config

#: Folder of the bundled sample benchmarks (package data).
SAMPLE_ROOT = Path(__file__).resolve().parent / "sample"
#: The entry-point group through which an installed package adds benchmark families: each entry point's
#: object is the path of one family's spec file (``<family>.toml``, the family's name its stem).
ENTRY_POINT_GROUP = "instir.families"
#: Folders of family specs to add (``<family>.toml`` each, beside its loader), separated by ``os.pathsep``:
#: a family for a notebook user without a package.
FAMILIES_VAR = "INSTIR_FAMILIES"
#: A variant's template in a spec's ``[variants]``: the family's template for the system's model family.
FAMILY_TEMPLATE = "family"


@dataclass(frozen=True)
class Source:
    """Where one layout of a benchmark comes from: a Hub dataset repo at a revision. For a
    benchmark published as one repo per subset, ``repo`` holds ``{subset}`` (or ``{mteb_task}``,
    the subset's MTEB task name, from ``tasks``) and ``revision`` maps subsets to revisions."""

    repo: str
    revision: str | Mapping[str, str]
    tasks: Mapping[str, str] = field(default_factory=dict)

    def pinned(self, subset: str | None) -> tuple[str, str]:
        """(repo, revision) for one subset (``subset`` is ignored by single-repo sources)."""
        if isinstance(self.revision, Mapping):
            return self.repo.format(subset=subset, mteb_task=self.tasks.get(subset, "")), self.revision[subset]
        return self.repo, self.revision


@dataclass(frozen=True)
class Subset:
    """One subset of a family as its paper describes it (IFIR's seven); the published counts and the
    MTEB task are optional (a family of one's own may have neither)."""

    id: str
    printed: str
    domain: str = ""
    levels: tuple[int, ...] = (0,)
    mteb_task: str = ""
    mteb_revision: str = ""
    queries: int | None = None
    documents: int | None = None
    mteb_queries: int | None = None
    mteb_ignore_identical_ids: bool = False

    @property
    def multi_level(self) -> bool:
        """Whether the subset has cumulative instruction levels 1-3 (else one level 0)."""
        return self.levels != (0,)


@dataclass(frozen=True)
class MtebTask:
    """How MTEB 2.26 defines the task of one benchmark (``mteb/tasks/instruction_retrieval/eng/``):
    its ``name`` (``InstructIR``, ``IFIRFiQA`` …, also the stem of its ``<name>_predictions.json``
    and ``<name>.json`` result files), family, subset and ``main_score``; whether it drops
    self-hits (``ignore_identical_ids``), reads levels from ``v1``/``v2``/``v3`` in the query ids
    (``level_scores``), computes ``robustness_at_10`` or p-MRR over ``-og``/``-changed`` pairs
    (``pairwise``); how query ids are spelt (``ids``: ``same`` or ``levels``,
    :mod:`instir.benchmarks.mteb`); the ``mteb`` protocol's default
    measures; how an MTEB-ready copy is written (``dataset_template``, ``origin_query``); the dataset
    ``revision`` the kit's ``mteb`` layout pins ("" when it has none)."""

    name: str
    family: str
    subset: str
    main_score: str
    ignore_identical_ids: bool
    level_scores: bool
    robustness: bool
    ids: str = "same"
    measures: tuple[str, ...] = ()
    dataset_template: str | None = None
    origin_query: bool = False
    pairwise: bool = False
    revision: str = ""


@dataclass(frozen=True)
class Family:
    """A benchmark family's spec (see the module docstring and ``families/*.toml``)."""

    name: str
    printed: str
    paper: str
    loader: str
    sample: str
    settings: tuple[str, ...]
    variants: tuple[str, ...]
    pair: tuple[str, str] | None
    measures: tuple[str, ...]
    headline: tuple[str, ...]
    derived: tuple[str, ...]
    sources: Mapping[str, Source]
    local_layouts: tuple[str, ...] = ()
    rerank: bool = False
    counts: Mapping[str, int] = field(default_factory=dict)
    subsets: Mapping[str, Subset] = field(default_factory=dict)
    average: bool = False
    bm25: Mapping[str, Any] = field(default_factory=dict)
    templates: Mapping[str, str] = field(default_factory=dict)
    setting_templates: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    template_formats: tuple[Mapping[str, Any], ...] = ()
    template_source: str = ""
    mteb: Mapping[str, Any] = field(default_factory=dict)
    papers: Mapping[str, Any] = field(default_factory=dict)
    report: Mapping[str, Any] = field(default_factory=dict)
    forms: Forms | None = None
    group_measures: tuple[str, ...] = ()
    spec_file: Path | None = None
    order: int = 99
    depth: int | None = None
    #: what the family measures and how its queries come, in a few sentences of text (notebook 01's list)
    about: str = ""
    variant_templates: Mapping[str, str] = field(default_factory=dict)

    def at(self, *keys: str | int) -> str:
        """Where the value at ``keys`` stands in the family's spec, ``<file>:<line>``: for an error about a value a
        stage reads later (a template's format, a loader file) to point at it as the spec's own checks do."""
        return spec_at(self.spec_file, *keys)

    @property
    def bundled(self) -> bool:
        """Whether the spec ships in the package (else an entry point or :data:`FAMILIES_VAR` added it)."""
        return self.spec_file is None or self.spec_file.parent == Path(__file__).resolve().parent / "families"

    @property
    def sample_root(self) -> Path:
        """The sample's folder: under the package's samples for a bundled family, else beside the spec."""
        return (SAMPLE_ROOT if self.bundled else self.spec_file.parent) / self.sample

    def subset(self, subset_id: str) -> Subset:
        """One subset's entry by its id (``fiqa``, ``scifact_open``, …)."""
        if subset_id not in self.subsets:
            raise unknown(f"{self.printed} subset", subset_id, tuple(self.subsets))
        return self.subsets[subset_id]

    def loader_module(self) -> ModuleType:
        """The family's loader module (imported on first use): a module name, or for a family from
        outside the package a ``.py`` file beside its spec. Its ``load`` is checked to take what the kit passes
        (docs/layout.md), so a loader written to another signature is one line naming the spec, not a TypeError."""
        module = _module(self.loader, self.spec_file)
        try:
            inspect.signature(module.load).bind(Path(), subset=None, setting="", name="", revision="", is_sample=False)
        except (AttributeError, TypeError, ValueError) as err:
            raise UsageError(f"{spec_at(self.spec_file, 'loader')}: field 'loader': {quoted(self.loader)} should "
                             f"define load(root, *, subset, setting, name, revision, is_sample): {err}") from None
        return module

    def group_measure_classes(self) -> list[type]:
        """The group measures the family brings (``group_measures``: ``module:Class`` each, imported on first
        use), which :func:`instir.metrics.measures.parse_measure` asks to read a name."""
        return [getattr(_module(module, self.spec_file, "group_measures"), name)
                for module, _, name in (path.partition(":") for path in self.group_measures)]

    def measure_code(self) -> str:
        """The sha256 of the files of the family's group measures (their modules' source), which stored scores are
        keyed by: an edited measure (a plugin's, or the kit's in another version) scores every run anew."""
        digest = hashlib.sha256()
        for i, item in enumerate(self.group_measures):
            digest.update(_source(item.partition(":")[0], self.spec_file, "group_measures", i).read_bytes())
        return digest.hexdigest()

    def benchmarks(self) -> list[str]:
        """The real benchmarks' names: one per subset, or the family's own name."""
        return [f"{self.name}/{s}" for s in self.subsets] if self.subsets else [self.name]

    def sample_benchmarks(self) -> list[str]:
        """The bundled sample's names: one per subset the sample holds (in the family's order),
        or the sample's own name; none when the package has no sample folder."""
        folder = self.sample_root
        if not self.sample or not folder.is_dir():
            return []
        if not self.subsets:
            return [self.sample]
        return [f"{self.sample}/{s}" for s in self.subsets if (folder / s).is_dir()]

    def variant_template(self, variant: str) -> str | None:
        """The template of a variant's runs (the spec's ``[variants]``): a template's name, or None for the
        family's template for the system's model family (:data:`FAMILY_TEMPLATE`)."""
        if variant not in self.variant_templates:
            raise unknown(f"{self.printed} variant", variant, self.variants)
        template = self.variant_templates[variant]
        return None if template == FAMILY_TEMPLATE else template

    def template_for(self, model_family: str, setting: str = "instructed") -> str | None:
        """The template the authors used for ``model_family`` in ``setting`` (a setting with
        templates of its own has only those), or None when they used none."""
        if setting in self.setting_templates:
            return self.setting_templates[setting].get(model_family)
        return self.templates.get(model_family)


@dataclass(frozen=True)
class Entry:
    """One benchmark name of the catalog: its family, its subset (None for a family without
    subsets) and whether it is the bundled sample."""

    name: str
    family: Family
    subset: Subset | None
    sample: bool

    @property
    def collection(self) -> str:
        """The name without the subset (``ifir-sample``, ``ifir``, ``instructir``): what a
        family's subsets are averaged and summarised under."""
        return self.name.partition("/")[0]

    def expected_counts(self, layout: str | None = None) -> dict[str, int]:
        """The published record counts (of the subset, else the family); MTEB's copy of a
        subset may hold fewer queries (``layout="mteb"``)."""
        if self.subset is None:
            return dict(self.family.counts)
        queries = self.subset.mteb_queries if layout == "mteb" else self.subset.queries
        return {key: n for key, n in (("queries", queries), ("documents", self.subset.documents)) if n is not None}

    def mteb_task(self) -> MtebTask:
        """The MTEB task of this benchmark (the family's, or its subset's)."""
        spec, sub = self.family.mteb, self.subset
        level_scores = bool(sub is not None and sub.multi_level and spec.get("ids") == "levels")
        source = self.family.sources.get("mteb")  # a subset's revision is its own; the family's is its source's
        revision = sub.mteb_revision if sub else source.revision if source and isinstance(source.revision, str) else ""
        return MtebTask(sub.mteb_task if sub else spec["task"], self.family.name, sub.id if sub else "",
                        spec["main_score"], bool(sub and sub.mteb_ignore_identical_ids), level_scores,
                        bool(spec.get("robustness")), spec.get("ids", "same"), tuple(spec.get("measures", ())),
                        spec.get("dataset_template"), bool(spec.get("origin_query")), bool(spec.get("pairwise")),
                        revision)


#: The engines a family spec's ``[bm25] engine`` may name: the one its authors ran, which the paper's BM25 card
#: runs (:func:`instir.systems.adapters.paper_bm25_from_card`).
BM25_ENGINES = ("anserini", "elasticsearch", "rank_bm25")


def spec_at(spec_file: Path | None, *keys: str | int, text: str | None = None) -> str:
    """``<spec file>:<line>`` of the value at ``keys`` in a family spec (its ``text``, else the file read again;
    :func:`instir.inputs.key_line`), the file alone where the line is not found."""
    if spec_file is None:
        return "<family spec>"
    if text is None:
        try:
            text = spec_file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            text = ""
    line = key_line(text, tomllib.loads, keys) if text else None
    return f"{spec_file}:{line}" if line else str(spec_file)


def _module(name: str, spec_file: Path | None, field: str = "loader") -> ModuleType:
    """A module by name, or a ``.py`` file beside ``spec_file`` (imported once, under a name of its own); a missing
    module, or one that fails to import (left out of ``sys.modules``, to import again once fixed), is one line naming
    the spec and its ``field``."""
    path = _source(name, spec_file, field)
    key = f"instir_family_{path.stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:12]}" if name.endswith(
        ".py") else name
    if key not in sys.modules:
        try:
            if key == name:
                importlib.import_module(name)
            else:
                found = importlib.util.spec_from_file_location(key, path)
                sys.modules[key] = importlib.util.module_from_spec(found)
                found.loader.exec_module(sys.modules[key])
        except Exception as err:
            sys.modules.pop(key, None)
            raise UsageError(f"{spec_at(spec_file, field)}: field {field!r}: {quoted(name)} fails to import: "
                             f"{type(err).__name__}: {err}") from err
    return sys.modules[key]


def _source(name: str, spec_file: Path | None, *keys: str | int) -> Path:
    """The file of a module a spec's value at ``keys`` names (a module's name, or a ``.py`` file beside the spec),
    found without running it; none is one line naming the spec's line and field."""
    path = (spec_file.parent if spec_file else Path.cwd()) / name
    if not name.endswith(".py"):
        try:
            found = importlib.util.find_spec(name)
        except (ImportError, ValueError):  # a missing parent package, a name such as ".x"
            found = None
        path = Path(found.origin) if found and found.origin else None
    if path is None or not path.is_file():
        said = f"no module file {quoted(name)} beside the spec" if name.endswith(".py") else f"no module {quoted(name)}"
        raise UsageError(f"{spec_at(spec_file, *keys)}: field {keys[0]!r}: {said}")
    return path.resolve()


def _defines(path: Path) -> set[str] | None:
    """The names a module's file binds at its top level (classes, functions, imports, assignments, also inside a
    ``try`` or an ``if``), read without running it; None where that cannot be told so (a star import, a file Python
    cannot parse: importing it then says why)."""
    try:
        stack, names = list(ast.parse(path.read_bytes()).body), set()
    except (SyntaxError, ValueError):
        return None
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(alias.name == "*" for alias in node.names):
                return None
            names |= {alias.asname or alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {name.id for target in targets for name in ast.walk(target) if isinstance(name, ast.Name)}
        else:  # a try, an if, a with: what their bodies bind is bound at the top level too
            stack.extend(child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt))
    return names


#: A non-empty text, a whole number of 0 or more, of 1 or more (a spec's values, strictly typed: TOML's 1 is no
#: text, ``true`` no number).
Name = Annotated[str, StringConstraints(min_length=1)]
Count = Annotated[int, Field(ge=0)]
_STRICT = ConfigDict(strict=True, extra="forbid")


class _SubsetSpec(TypedDict, total=False):
    """One ``[[subsets]]`` table (:class:`Subset`)."""

    __pydantic_config__ = _STRICT
    id: Required[Name]
    printed: Required[Name]
    domain: str
    levels: Annotated[list[Count], Field(min_length=1)]
    mteb_task: str
    mteb_revision: str
    queries: Count
    documents: Count
    mteb_queries: Count
    mteb_ignore_identical_ids: bool


class _SourceSpec(TypedDict):
    """One ``[[sources]]`` table (:class:`Source`): a revision, or one per subset (``"per-subset"``: the subsets'
    own ``mteb_revision``)."""

    __pydantic_config__ = _STRICT
    layout: Name
    repo: Name
    revision: Name | dict[str, Name]


class _MtebSpec(TypedDict, total=False):
    """The ``[mteb]`` table (:class:`MtebTask`)."""

    __pydantic_config__ = _STRICT
    task: Name
    main_score: Required[Name]
    measures: list[Name]
    ids: Literal["same", "levels"]
    robustness: bool
    pairwise: bool
    dataset_template: Name
    origin_query: bool


#: What a spec's ``[bm25] stopwords`` may name besides its own words: none, Lucene's English set, or a language
#: bm25s knows (its code or its name, as bm25s reads either); ``stemmer``: "none" or a PyStemmer algorithm (checked
#: as the spec is read, not when BM25 first runs).
BM25_STOPWORDS = ("none", "lucene", "en", "english", "en_plus", "english_plus", "da", "danish", "de", "german", "es",
                  "spanish", "fr", "french", "it", "italian", "ko", "korean", "nl", "dutch", "no", "norwegian", "pt",
                  "portuguese", "ru", "russian", "sv", "swedish", "tr", "turkish", "zh", "chinese")


class _Bm25Spec(TypedDict, total=False):
    """The ``[bm25]`` table: the family's BM25 as its authors ran it."""

    __pydantic_config__ = _STRICT
    k1: Required[Annotated[float, Field(ge=0, allow_inf_nan=False)]]
    b: Required[Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]]
    method: Name
    stemmer: Required[Literal[("none", *Stemmer.algorithms())]]  # type: ignore[valid-type]
    stopwords: Required[Literal[BM25_STOPWORDS] | list[Name]]  # type: ignore[valid-type]
    engine: Literal[BM25_ENGINES]  # type: ignore[valid-type]
    template_source: str


#: A template's format: a string, or an [instruction, text] pair (:mod:`instir.formatting` checks its fields).
Format = Name | Annotated[list[str], Field(min_length=2, max_length=2)]


class _TemplateSpec(TypedDict, total=False):
    """One ``[[template]]`` table (:class:`instir.formatting.Template`)."""

    __pydantic_config__ = _STRICT
    name: Required[Name]
    family: Required[Name]
    description: Required[str]
    query: Required[Format]
    doc: Format
    bare_query: Format
    domains: dict[Name, str]


class _PapersSpec(TypedDict, total=False):
    """The ``[papers]`` table: the file of the papers' numbers and how its tables are read (:mod:`instir.papers`)."""

    __pydantic_config__ = _STRICT
    file: Name
    judge: Name
    tables: Name
    curves: Name
    statistics: Name
    listed: bool
    protocol: dict[Name, Name]
    names: dict[Name, Name]


class _ReportSpec(TypedDict, total=False):
    """The ``[report]`` table: how notebook 03 titles and explains the family's numbers (:mod:`instir.report`)."""

    __pydantic_config__ = _STRICT
    title: str
    per: Literal["family", "benchmark"]
    note: str
    agree: Annotated[list[Name], Field(min_length=2, max_length=2)]
    agree_why: str
    group_minima: Name
    missed: str
    missed_why: str


class _RequiredSpec(TypedDict):
    """The keys every spec holds."""

    __pydantic_config__ = _STRICT
    printed: Name
    paper: Name
    loader: Name
    settings: Annotated[list[Name], Field(min_length=1)]
    variants: Annotated[dict[Name, Name], Field(min_length=1)]
    measures: Annotated[list[Name], Field(min_length=1)]
    headline: Annotated[list[Name], Field(min_length=1)]


class _Spec(_RequiredSpec, total=False):
    """A family spec's keys and the type of each, down to its tables' (docs/layout.md): checked as the spec is
    read, so a mistake is one line naming file, line and field, never a traceback when a stage reads it."""

    order: int
    sample: str
    about: str
    counts: dict[Name, Count]
    pair: Annotated[list[Name], Field(min_length=2, max_length=2)]
    derived: list[Name]
    average: bool
    local_layouts: list[Name]
    rerank: bool
    template_source: str
    sources: list[_SourceSpec]
    bm25: _Bm25Spec
    templates: dict[Name, Name]
    setting_templates: dict[Name, dict[Name, Name]]
    template: list[_TemplateSpec]
    mteb: _MtebSpec
    papers: _PapersSpec
    report: _ReportSpec
    subsets: list[_SubsetSpec]
    forms: list[Name]
    reference_form: Name
    group_measures: list[Name]
    depth: Annotated[int, Field(ge=1)]


#: The keys a spec may hold; any other is refused (a misspelt key would otherwise be silently ignored).
SPEC_KEYS = frozenset(_Spec.__annotations__) | frozenset(_RequiredSpec.__annotations__)
#: The keys every spec must hold.
REQUIRED_KEYS = tuple(_RequiredSpec.__annotations__)


@cache
def _spec_shape() -> TypeAdapter:
    return TypeAdapter(_Spec)


def _shape_problem(raw: dict, err: ValidationError) -> tuple[list[str | int], str]:
    """The keys (from the top) of the deepest value ``err`` finds wrong in ``raw`` and what it should be: the
    problems of one value (each form a union allows) said together."""
    found = []
    for error in err.errors(include_url=False):
        node, keys = raw, []
        for part in error["loc"]:  # a union's member names stand in loc too: keep the spec's own keys
            if isinstance(node, dict) and part in node or (
                    isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)):
                node = node[part]
                keys.append(part)
        if error["type"] == "missing":
            keys.append(error["loc"][-1])
        found.append((keys, error))
    deepest = max(len(keys) for keys, _ in found)
    keys = next(keys for keys, _ in found if len(keys) == deepest)
    said = [error for k, error in found if k == keys]
    if said[0]["type"] in ("missing", "extra_forbidden"):
        return keys, "required, and missing" if said[0]["type"] == "missing" else "no key of its table (misspelt?)"
    should = list(dict.fromkeys(error["msg"].removeprefix("Input should be ") for error in said))
    if all(error["msg"].startswith("Input should be ") for error in said):
        return keys, f"should be {' or '.join(should)}, got {quoted(said[0]['input'])}"
    return keys, f"{'; '.join(msg[0].lower() + msg[1:] for msg in should)}, got {quoted(said[0]['input'])}"


def _family(name: str, raw: dict, spec_file: Path | None = None, text: str = "") -> Family:
    """The family a spec's parsed ``raw`` (of ``text``, the spec file's) describes; every mistake one
    :class:`UsageError` naming the file, the line (:func:`instir.inputs.key_line`) and the field."""
    file = spec_file or Path(f"families/{name}.toml")

    def at(*keys: str | int) -> str:
        return spec_at(file, *keys, text=text)

    stray = sorted(set(raw) - SPEC_KEYS)
    if stray:
        raise unknown("spec key", stray[0], sorted(SPEC_KEYS), where=f"in {at(stray[0])}")
    missing = [key for key in REQUIRED_KEYS if key not in raw]
    if missing:
        raise UsageError(f"{file}: no key {quoted(missing[0])} (a family spec holds {', '.join(REQUIRED_KEYS)})")
    try:
        _spec_shape().validate_python(raw)
    except ValidationError as err:
        keys, problem = _shape_problem(raw, err)
        field = ".".join(key for key in keys if isinstance(key, str))
        raise UsageError(f"{at(*keys)}: field {field!r}: {problem}") from None
    if "mteb" in raw:  # each benchmark of the family is one MTEB task, named: no task "" standing for several
        named: dict[str, str] = {}
        for i, item in enumerate(raw.get("subsets", ())):
            task = item.get("mteb_task", "")
            if not task or task in named:
                raise UsageError(f"{at('subsets', i)}: field 'subsets.mteb_task': the spec has an [mteb] table, so "
                                 "each subset names its own MTEB task"
                                 + (f" ({quoted(task)} is subset {quoted(named[task])}'s)" if task else ""))
            named[task] = item["id"]
        if not raw.get("subsets") and "task" not in raw["mteb"]:
            raise UsageError(f"{at('mteb')}: field 'mteb.task': required, and missing (the family's MTEB task)")
    forms = None
    if "forms" in raw:
        try:
            forms = Forms(tuple(raw["forms"]), raw.get("reference_form", raw["forms"][0]))
        except (UsageError, IndexError) as err:
            raise UsageError(f"{at('forms')}: field 'forms': {err}") from None
    variants = raw["variants"]
    pair = tuple(raw["pair"]) if "pair" in raw else None
    if pair is not None and (not set(pair) <= set(variants) or len(set(pair)) != 2):
        raise UsageError(f"{at('pair')}: field 'pair': two of the variants ({', '.join(variants)}), got "
                         f"{quoted(raw['pair'])}")
    if raw.get("average") and not raw.get("subsets"):
        raise UsageError(f"{at('average')}: field 'average': an Average is over subsets, and the spec has none")
    _source(raw["loader"], spec_file, "loader")
    if "file" in raw.get("papers", {}) and spec_file is not None and spec_file.parent != BUNDLED:
        raise UsageError(f"{at('papers', 'file')}: field 'papers.file': a family from outside the package brings no "
                         "reported numbers (their file and the function that shapes it live in instir/papers/)")
    for i, item in enumerate(raw.get("group_measures", ())):  # checked now: a name read later asks every family's
        module, _, kind = item.partition(":")
        defined = _defines(_source(module, spec_file, "group_measures", i))
        if not kind.isidentifier() or (defined is not None and kind not in defined):
            raise UsageError(f"{at('group_measures', i)}: field 'group_measures': should be 'module:Class' of a class "
                             f"the module defines, got {quoted(item)}")
    if "forms" in raw.get("derived", ()) and forms is None:
        raise UsageError(f"{at('derived')}: field 'derived': 'forms' needs the spec's forms")
    subsets = {}
    for i, item in enumerate(raw.get("subsets", [])):
        if not SUBSET_ID.fullmatch(item["id"]):  # a folder's name: `a/b` or `..` would reach another folder
            raise UsageError(f"{at('subsets', i, 'id')}: field 'subsets.id': should be letters, digits, '_', '-' "
                             f"or '.', starting with a letter or a digit (it names a folder), got {quoted(item['id'])}")
        if item["id"] in subsets:  # one would silently stand for both
            raise UsageError(f"{at('subsets', i, 'id')}: field 'subsets.id': {quoted(item['id'])} is already a "
                             "subset's")
        item = dict(item)
        item.setdefault("mteb_queries", item.get("queries"))
        item["levels"] = tuple(item.get("levels", (0,)))
        subsets[item["id"]] = Subset(**item)
    per_subset = MappingProxyType({s.id: s.mteb_revision for s in subsets.values()})
    tasks = MappingProxyType({s.id: s.mteb_task for s in subsets.values()})

    def revision(value: str | dict) -> str | Mapping[str, str]:
        return per_subset if value == "per-subset" else MappingProxyType(value) if isinstance(value, dict) else value

    sources = {s["layout"]: Source(s["repo"], revision(s["revision"]), tasks) for s in raw.get("sources", ())}
    frozen = {key: MappingProxyType(dict(raw.get(key, {}))) for key in ("counts", "bm25", "templates", "mteb",
                                                                        "papers", "report")}
    return Family(
        name=name, printed=raw["printed"], paper=raw["paper"], loader=raw["loader"], sample=raw.get("sample", ""),
        settings=tuple(raw["settings"]), variants=tuple(variants), pair=pair,
        variant_templates=MappingProxyType(dict(variants)),
        measures=tuple(raw["measures"]), headline=tuple(raw["headline"]), derived=tuple(raw.get("derived", ())),
        sources=MappingProxyType(sources),
        local_layouts=tuple(raw.get("local_layouts", ())), rerank=bool(raw.get("rerank", False)),
        subsets=MappingProxyType(subsets),
        average=bool(raw.get("average", False)),
        setting_templates=MappingProxyType({k: MappingProxyType(v) for k, v in raw.get("setting_templates",
                                                                                       {}).items()}),
        template_formats=tuple(MappingProxyType(t) for t in raw.get("template", [])),
        template_source=raw.get("template_source", ""), forms=forms,
        group_measures=tuple(raw.get("group_measures", ())), spec_file=spec_file, order=raw.get("order", 99),
        depth=raw.get("depth"), about=" ".join(raw.get("about", "").split()), **frozen)


#: The folder of the package's own family specs.
BUNDLED = Path(str(resources.files("instir.benchmarks").joinpath("families"))).resolve()


def _spec_files() -> list[Path]:
    """The spec files: the bundled ones, then each entry point's, then each :data:`FAMILIES_VAR` folder's."""
    files = sorted(BUNDLED.glob("*.toml"))
    for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            files.append(Path(point.load()))
        except Exception as err:  # a broken plug-in is named, not a traceback in every command
            raise UsageError(f"entry point {point.name} = {point.value} ({ENTRY_POINT_GROUP}): {err}") from None
    for folder in filter(None, families_var().split(os.pathsep)):
        if not Path(folder).is_dir():
            raise UsageError(f"{FAMILIES_VAR}: {quoted(folder)} is not a folder")
        files += sorted(Path(folder).glob("*.toml"))
    return list(dict.fromkeys(path.resolve() for path in files))  # a folder named twice is read once


def families_var() -> str:
    """:data:`FAMILIES_VAR`'s folders made absolute: what the catalog reads, and what a process that starts elsewhere
    (a kernel in the report's folder, a Ray worker) is handed, so a relative folder names the same one there."""
    return os.pathsep.join(str(Path(folder).absolute()) for folder in os.environ.get(FAMILIES_VAR, "").split(
        os.pathsep) if folder)


@cache
def _spec(path: Path, text: str) -> Family:
    """The family of one spec file's text (the same object for the same text: :func:`reload` keeps an unchanged
    spec's family)."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise UsageError(f"{path}: not a readable family spec: {err}") from None
    except RecursionError:
        raise UsageError(f"{path}: not a readable family spec: nested too deeply") from None
    except ValueError:  # Python's limit on the digits of an int (4300), which tomllib meets as a bare ValueError
        raise UsageError(f"{path}: not a readable family spec: a number of more than 4300 digits") from None
    return _family(path.stem, raw, path, text)


#: A family's name (its spec file's, a link's target's): a name on a command line, in a path and in a report.
FAMILY_NAME = re.compile(r"[a-z][a-z0-9_-]*")
#: what a subset's id may be: the name of its folder in the family's data, never a path
SUBSET_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@cache
def _families() -> dict[str, Family]:
    loaded: dict[str, Family] = {}
    taken: dict[str, Path] = {}  # every family's and sample's name, in lower case: a name of the catalog once
    for path in _spec_files():
        if not FAMILY_NAME.fullmatch(path.stem):
            raise UsageError(f"{path}: a family's name (its file's) is lower-case ASCII letters, digits, '-' and '_' "
                             f"from a letter on, got {ascii(path.stem)}")
        if path.stem in taken:
            raise UsageError(f"{path}: a benchmark family {quoted(path.stem)} is already defined by {taken[path.stem]}")
        try:  # as a grid or a card file: a regular file (a FIFO blocked every command), at most MAX_CONFIG_BYTES
            text = read_config(path, "family spec")
        except InputRefused as err:
            raise UsageError(f"{path}{f':{err.line}' if err.line else ''}: not a readable family spec: {err.problem}") \
                from None
        except OSError as err:
            raise UsageError(f"{path}: not a readable family spec: {err}") from None
        fam = loaded[path.stem] = _spec(path, text)
        if fam.sample and fam.sample.lower() in (*taken, fam.name):
            raise UsageError(f"{spec_at(path, 'sample')}: the sample {quoted(fam.sample)} is already defined by "
                             f"{taken.get(fam.sample.lower(), path)}")
        taken.update({key: path for key in (fam.name, fam.sample.lower()) if key})
    order = sorted(loaded, key=lambda name: (loaded[name].order, name))
    return {name: loaded[name] for name in order}


def reload() -> None:
    """Read the family specs again (after installing a family's package or changing :data:`FAMILIES_VAR`); the
    family of a spec whose text is unchanged stays the same object."""
    _families.cache_clear()
    _entries.cache_clear()


@cache
def _entries() -> dict[str, Entry]:
    samples, real = {}, {}
    for fam in _families().values():
        for names, is_sample in ((fam.sample_benchmarks(), True), (fam.benchmarks(), False)):
            for name in names:
                sub = fam.subsets[name.partition("/")[2]] if fam.subsets else None
                (samples if is_sample else real)[name] = Entry(name, fam, sub, is_sample)
    return {**samples, **real}


T = TypeVar("T")


def remembered(make: Callable[..., T]) -> Callable[..., T]:
    """``make`` remembered per argument tuple while the catalog's families stay the same objects (:func:`reload`
    keeps an unchanged spec's family; a changed spec or a family from outside makes it anew): the one rule for what
    is derived from the specs and asked for many times per page (the templates, the papers' shaped tables). The
    result is shared: a caller that changes it takes a copy."""
    kept: dict[tuple, tuple[tuple[Family, ...], T]] = {}

    @wraps(make)
    def get(*args: Any) -> T:
        current = tuple(_families().values())
        hit = kept.get(args)
        if hit is None or len(hit[0]) != len(current) or any(a is not b for a, b in zip(hit[0], current)):
            hit = kept[args] = (current, make(*args))
        return hit[1]

    return get


def families() -> tuple[str, ...]:
    """The benchmark families, in the catalog's order."""
    return tuple(_families())


def family(name: str) -> Family:
    """A family's spec by its name."""
    found = _families()
    if name not in found:
        raise unknown("benchmark family", name, tuple(found))
    return found[name]


def entries() -> dict[str, Entry]:
    """Every benchmark name :func:`instir.benchmarks.load_benchmark` accepts, the bundled
    samples first, then the real benchmarks, each family in its spec's order."""
    return dict(_entries())


def sample_benchmarks() -> list[str]:
    """The bundled sample names (offline demos and tests)."""
    return [name for name, found in _entries().items() if found.sample]


def entry(name: str) -> Entry:
    """The catalog's entry of a benchmark name; refused in one line: a name that is no str (a Path: a name is not a
    folder), a collection's (it names several benchmarks) and an unknown one (with the closest)."""
    if not isinstance(name, str):
        raise UsageError(f"a benchmark's name is a str, got {quoted(name)} (a {type(name).__name__}): pass the name "
                         "as text, a folder as root=")
    found = _entries().get(name)
    members = expand([name]) if found is None else []
    if members not in ([], [name]):
        raise UnknownNameError(f"{quoted(name)} is a collection of {len(members)} benchmarks "
                               f"({', '.join(members)}): this takes one of them")
    if found is None:
        raise unknown("benchmark", name, _entries())
    return found


def _collections() -> dict[str, Entry]:
    """The first entry of every collection name (``ifir-sample``, ``ifir``) and of every name."""
    out: dict[str, Entry] = {}
    for found in _entries().values():
        out.setdefault(found.collection, found)
    return {**out, **_entries()}


def known_names() -> list[str]:
    """Every name a ``benchmarks`` list may hold: each collection (``ifir-sample``, ``ifir``) and
    each benchmark of the catalog."""
    return list(_collections())


def expand(names: list[str] | tuple[str, ...]) -> list[str]:
    """Benchmark names with every collection name (``followir-sample``, ``ifir``) replaced by its
    benchmarks in the catalog's order; other names (unknown ones included, for the caller to
    refuse) unchanged, and none twice."""
    found = _entries()
    out: list[str] = []
    for name in names:
        members = [n for n, e in found.items() if e.collection == name and n != name] if name not in found else []
        out += members or [name]
    return list(dict.fromkeys(out))


def family_of(name: str) -> str | None:
    """The family of a benchmark or collection name of the catalog (``ifir/fiqa``,
    ``ifir-sample``), None for any other name (a benchmark a user built)."""
    found = _collections().get(str(name))
    return found.family.name if found else None


def collection_of(name: str) -> str:
    """The collection a benchmark name belongs to (:attr:`Entry.collection`: ``ifir-sample`` for
    ``ifir-sample/fiqa``); a name outside the catalog is its own collection."""
    found = _entries().get(str(name))
    return found.collection if found else str(name)


def unsampled(name: str) -> str:
    """The name a bundled sample's benchmark or collection stands for (``ifir-sample/fiqa`` ->
    ``ifir/fiqa``, ``ifir-sample`` -> ``ifir``); any other name unchanged."""
    found = _collections().get(str(name))
    if not found or not found.sample:
        return str(name)
    if str(name) == found.collection and found.subset is not None:
        return found.family.name
    return found.family.name + (f"/{found.subset.id}" if found.subset else "")


def is_sample(name: str) -> bool:
    """Whether a benchmark or collection name of the catalog is a bundled sample."""
    found = _collections().get(str(name))
    return bool(found and found.sample)


def mteb_tasks() -> dict[str, MtebTask]:
    """Every MTEB task the catalog knows, by task name, in the catalog's order."""
    tasks = [entry(name).mteb_task() for fam in _families().values() if fam.mteb for name in fam.benchmarks()]
    return {t.name: t for t in tasks}
