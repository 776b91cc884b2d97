"""The one home of benchmark facts: families, pinned sources, published counts and the IFIR
subsets (printed names, domains, levels, MTEB tasks and revisions), read from the package data
file ``catalog.toml``. Every other module asks this one instead of parsing benchmark names."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from types import MappingProxyType

from instir.errors import unknown


@dataclass(frozen=True)
class Source:
    """Where one layout of a benchmark comes from: a Hub dataset repo at a revision. For a
    benchmark published as one repo per subset, ``repo`` holds ``{subset}`` and ``revision``
    maps subsets to revisions."""

    repo: str
    revision: str | Mapping[str, str]

    def pinned(self, subset: str | None) -> tuple[str, str]:
        """(repo, revision) for one subset (``subset`` is ignored by single-repo sources)."""
        if isinstance(self.revision, Mapping):
            return self.repo.format(subset=subset), self.revision[subset]
        return self.repo, self.revision


@dataclass(frozen=True)
class Subset:
    """One IFIR subset as the paper describes it."""

    id: str
    printed: str
    domain: str
    levels: tuple[int, ...]
    mteb_task: str
    mteb_revision: str
    queries: int
    documents: int
    mteb_queries: int
    mteb_ignore_identical_ids: bool = False

    @property
    def multi_level(self) -> bool:
        """Whether the subset has cumulative instruction levels 1-3 (else one level 0)."""
        return self.levels != (0,)


@dataclass(frozen=True)
class Family:
    """A benchmark family (``instructir``, ``ifir``): printed name, paper, sources per layout
    (default first) and, for a single-dataset family, its published counts."""

    name: str
    printed: str
    paper: str
    sources: Mapping[str, Source]
    counts: Mapping[str, int]
    mteb_task: str = ""
    mteb_main_score: str = ""


@dataclass(frozen=True)
class MtebTask:
    """How MTEB 2.26 defines the task of one benchmark (``mteb/tasks/instruction_retrieval/eng/``):
    its ``name`` (``InstructIR``, ``IFIRFiQA`` …, also the stem of its ``<name>_predictions.json``
    and ``<name>.json`` result files), its ``main_score``, whether the task class sets
    ``ignore_identical_ids`` (drop documents whose id is the query id before scoring; only
    ``IFIRFiQA`` does), and whether its ``task_specific_scores`` reads instruction levels from
    ``v1``/``v2``/``v3`` in the query ids (the multi-level IFIR subsets) or computes
    ``robustness_at_10`` (InstructIR)."""

    name: str
    family: str
    subset: str
    main_score: str
    ignore_identical_ids: bool
    level_scores: bool
    robustness: bool


@cache
def _data() -> tuple[dict[str, Family], dict[str, Subset]]:
    raw = tomllib.loads(resources.files("instir.benchmarks").joinpath("catalog.toml").read_text(encoding="utf-8"))
    subsets = {}
    for entry in raw["ifir_subsets"]:
        entry = dict(entry)
        entry.setdefault("mteb_queries", entry["queries"])
        entry["levels"] = tuple(entry["levels"])
        subsets[entry["id"]] = Subset(**entry)
    per_subset = MappingProxyType({s.id: s.mteb_revision for s in subsets.values()})
    families = {}
    for name, entry in raw["families"].items():
        sources = {s["layout"]: Source(s["repo"], per_subset if s["revision"] == "per-subset" else s["revision"])
                   for s in entry["sources"]}
        families[name] = Family(name, entry["printed"], entry["paper"], MappingProxyType(sources),
                                MappingProxyType(dict(entry.get("counts", {}))), entry.get("mteb_task", ""),
                                entry.get("mteb_main_score", ""))
    return families, subsets


def families() -> tuple[str, ...]:
    """The benchmark families, ``("instructir", "ifir")``."""
    return tuple(_data()[0])


def family(name: str) -> Family:
    """A family's entry by its name (``instructir`` or ``ifir``)."""
    found = _data()[0]
    if name not in found:
        raise unknown("benchmark family", name, tuple(found))
    return found[name]


def family_of(benchmark_name: str) -> str | None:
    """The family of a benchmark name, or None for a name outside the catalog. The part before
    ``/`` is the family or the family followed by ``-<tag>``: ``ifir/fiqa``, ``ifir-sample/fiqa``
    → ``ifir``; ``instructir-sample`` → ``instructir``."""
    head = str(benchmark_name).partition("/")[0]
    for name in _data()[0]:
        if head == name or head.startswith(f"{name}-"):
            return name
    return None


def is_sample(benchmark_name: str) -> bool:
    """Whether a benchmark name is one of the bundled samples (``instructir-sample``,
    ``ifir-sample/<subset>``)."""
    return str(benchmark_name).partition("/")[0].endswith("-sample")


def ifir_subsets() -> tuple[str, ...]:
    """The IFIR subset ids in the paper's column order."""
    return tuple(_data()[1])


def multi_level_subsets() -> tuple[str, ...]:
    """The IFIR subsets with instruction levels 1-3, in the paper's order."""
    return tuple(s.id for s in _data()[1].values() if s.multi_level)


def single_level_subsets() -> tuple[str, ...]:
    """The IFIR subsets with one instruction (level 0), in the paper's order."""
    return tuple(s.id for s in _data()[1].values() if not s.multi_level)


def subset(subset_id: str) -> Subset:
    """One IFIR subset's entry by its id (``fiqa``, ``scifact_open``, …)."""
    found = _data()[1]
    if subset_id not in found:
        raise unknown("IFIR subset", subset_id, tuple(found))
    return found[subset_id]


def subset_by_printed_name() -> dict[str, str]:
    """The paper's printed subset names → subset ids (``TREC-PM`` → ``pm``)."""
    return {s.printed: s.id for s in _data()[1].values()}


def subset_by_mteb_task() -> dict[str, str]:
    """MTEB task names → subset ids (``IFIRPm`` → ``pm``)."""
    return {s.mteb_task: s.id for s in _data()[1].values()}


def expected_counts(family_name: str, subset_id: str | None = None, layout: str | None = None) -> dict[str, int]:
    """The published record counts of a family (InstructIR) or of one IFIR subset; MTEB's copy
    of a subset may hold fewer queries (``layout="mteb"``)."""
    if subset_id is None:
        return dict(family(family_name).counts)
    entry = subset(subset_id)
    queries = entry.mteb_queries if layout == "mteb" else entry.queries
    return {"queries": queries, "documents": entry.documents}


def mteb_task(benchmark_name: str) -> MtebTask:
    """The MTEB task of a benchmark name: ``instructir`` (and its sample) → ``InstructIR``,
    ``ifir/<subset>`` (and ``ifir-sample/<subset>``) → that subset's task (``IFIRFiQA`` …)."""
    name = family_of(benchmark_name)
    if name is None:
        raise unknown("benchmark", benchmark_name, families(), more=" (MTEB has tasks for InstructIR and IFIR)")
    entry = family(name)
    if name == "ifir":
        sub = subset(str(benchmark_name).partition("/")[2])
        return MtebTask(sub.mteb_task, name, sub.id, entry.mteb_main_score, sub.mteb_ignore_identical_ids,
                        level_scores=sub.multi_level, robustness=False)
    return MtebTask(entry.mteb_task, name, "", entry.mteb_main_score, False, level_scores=False, robustness=True)


def mteb_tasks() -> dict[str, MtebTask]:
    """Every MTEB task the catalog knows, by task name (InstructIR first, then IFIR's seven)."""
    tasks = [mteb_task("instructir"), *(mteb_task(f"ifir/{s}") for s in ifir_subsets())]
    return {t.name: t for t in tasks}
