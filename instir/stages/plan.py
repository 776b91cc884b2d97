"""The plan: which runs exist and in which order, decided in one place for the retrieve stage,
the sweep and the command line. A planned run is one (benchmark, setting, system, variant); the
order is benchmark by benchmark, then setting, system (as given) and variant, so the first
system's run of each benchmark is the later stages' baseline. Each benchmark takes only the
settings and variants its family's spec has (IFIR has no setting but ``instructed``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from instir.benchmarks import catalog
from instir.formatting import check_spec_templates
from instir.parameters import benchmark_names, choices, names
from instir.systems.specs import SystemSpec, resolve_system

#: The depth of a run (its ``k``) when neither the request nor the family's spec (``depth``) says one.
DEFAULT_DEPTH = 100
#: The variants InstFol compares on a benchmark of no family: the instructed run and the query-only run.
DEFAULT_PAIR = ("instructed", "query-only")

Run = TypeVar("Run")


@dataclass(frozen=True)
class PlannedRun:
    """One run of the plan: ``system`` on ``benchmark`` in ``setting`` with the ``variant``
    template, its top ``k`` (then its evaluation)."""

    benchmark: str
    setting: str
    system: SystemSpec
    variant: str
    k: int = DEFAULT_DEPTH

    @property
    def label(self) -> str:
        """The name the run has in every later table (``runs.csv``'s ``system``): the system's
        label, `` (<variant>)`` for another variant than ``instructed`` (`` (query-only)`` for the
        bare-query run), `` [setting]`` for another setting than ``instructed``."""
        name = self.system.label + ("" if self.variant == "instructed" else f" ({self.variant})")
        return name if self.setting == "instructed" else f"{name} [{self.setting}]"

    @property
    def run_id(self) -> str:
        """A file-name friendly id, unique within a plan (a sweep cell's name)."""
        parts = [self.benchmark, self.setting, self.system.name, self.variant]
        return "__".join(file_part(p) for p in parts)


def file_part(name: str) -> str:
    """A name as a run id holds it: anything but letters, digits and ``._-`` becomes ``-``."""
    return "".join(c if c.isalnum() or c in "._-" else "-" for c in name)


def depth_of(benchmark: str) -> int:
    """The depth of a run on ``benchmark`` (a catalog name) when none is asked: its family's (the spec's
    ``depth``: the authors' retrieval depth), else :data:`DEFAULT_DEPTH`."""
    family = catalog.family_of(benchmark)
    return (catalog.family(family).depth if family else None) or DEFAULT_DEPTH


def every_setting() -> list[str]:
    """The settings of every family, in the catalog's order."""
    return list(dict.fromkeys(s for name in catalog.families() for s in catalog.family(name).settings))


def every_variant() -> list[str]:
    """The variants of every family (the spec's ``[variants]``), in the catalog's order."""
    return list(dict.fromkeys(v for name in catalog.families() for v in catalog.family(name).variants))


def plan_runs(benchmarks: Sequence[str], systems: Sequence[str | SystemSpec], *,
              settings: Sequence[str] = ("instructed",), variants: Sequence[str] | None = None,
              k: int | None = None) -> list[PlannedRun]:
    """Every run of ``systems`` (names as :func:`instir.systems.specs.resolve_system` takes them,
    or resolved specs) on ``benchmarks`` in the plan's order (see the module docstring). A
    benchmark is planned in each of ``settings`` its family has, with each of ``variants`` (None:
    all of them) its family has, to depth ``k`` (None: its family's ``depth``, else
    :data:`DEFAULT_DEPTH`); an unknown benchmark, setting or variant, and a spec naming a template there is none
    of (:func:`~instir.formatting.check_spec_templates`), are refused."""
    listed = names(systems, "systems") if isinstance(systems, str) else systems
    specs = [s if isinstance(s, SystemSpec) else resolve_system(s) for s in listed]
    settings = choices(settings, every_setting(), "setting", where="parameter 'settings'")
    variants = choices(every_variant() if variants is None else variants, every_variant(), "variant",
                       where="parameter 'variants'")
    plan = []
    benchmarks = benchmark_names(benchmarks)
    for family in dict.fromkeys(catalog.entry(name).family.name for name in benchmarks):
        check_spec_templates(family)  # a misspelt template in its spec, before any run
    for name in benchmarks:
        family = catalog.entry(name).family
        for setting in (s for s in settings if s in family.settings):
            plan += [PlannedRun(name, setting, spec, variant, k or depth_of(name)) for spec in specs
                     for variant in variants if variant in family.variants]
    return plan


def variant_pair(benchmark: str) -> tuple[str, str] | None:
    """The two variants whose runs InstFol compares on ``benchmark`` (the instructed run, the query-only run): its
    family's spec's ``pair`` (None: a family that pairs none), :data:`DEFAULT_PAIR` for a benchmark of no family."""
    family = catalog.family_of(benchmark)
    return catalog.family(family).pair if family else DEFAULT_PAIR


def paired_runs(runs: Iterable[Run], key: Callable[[Run], tuple[str, str, str, str]]) -> list[tuple[Run, Run]]:
    """The (instructed, query-only) pairs InstFol judges among ``runs`` (``key``: a run's benchmark, setting, system
    and variant): per benchmark and system, in the runs' order, the instructed-setting runs of the two variants of
    :func:`variant_pair`; a system missing one of them has none. The one rule of what the judge stage judges
    (:func:`instir.stages.judge.run_pairs`) and of whether a grid with a judge plans anything to judge."""
    groups: dict[tuple[str, str], dict[str, Run]] = {}
    for run in runs:
        benchmark, setting, system, variant = key(run)
        if setting == "instructed":
            groups.setdefault((benchmark, system), {}).setdefault(variant, run)
    pairs = []
    for (benchmark, _), by_variant in groups.items():
        pair = variant_pair(benchmark)
        if pair is not None and set(pair) <= by_variant.keys():
            pairs.append((by_variant[pair[0]], by_variant[pair[1]]))
    return pairs
