"""MTEB's query ids for the kit's benchmarks, both ways.

A run or a prediction file crosses between the kit and MTEB only if every query id is
translated (docs/mteb.md, "Query ids"): InstructIR's are the same in both; an IFIR instance
``<query id>_<level>`` is written ``<query id>_v<level>`` in the multi-level subsets (MTEB reads
the level from a ``v<level>`` substring) and as the bare ``<query id>`` in the single-level ones.
A benchmark read from MTEB's own files keeps their ids. Reading back (:meth:`MtebIds.kit_id`)
takes the exact table first, then any id whose ``v<digit>`` token and query id name an instance
(:func:`level_from_mteb_id`): ``4102_v1``, ``4102-v1`` and ``v1_4102`` all read as ``4102_1``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from instir.benchmarks import catalog
from instir.benchmarks.types import Benchmark, Query
from instir.errors import UsageError

# A "v<digit>" level token not preceded by a letter ("q7_v2", "7v2", "v2-q7"), with the
# separator before it, so that removing the match leaves the query id.
_MTEB_LEVEL = re.compile(r"[_\-.:]?(?<![A-Za-z])v([0-9])(?![0-9])")


def level_from_mteb_id(qid: str) -> tuple[str, int | None]:
    """(group, level) of an MTEB query id: the last ``v<digit>`` token is the level."""
    matches = list(_MTEB_LEVEL.finditer(qid))
    if not matches:
        return qid, None
    m = matches[-1]
    group = (qid[:m.start()] + qid[m.end():]).strip("_-.: ")
    return group, int(m.group(1))


@dataclass(frozen=True)
class MtebIds:
    """The query ids of one benchmark in MTEB's spelling: ``to_mteb`` (kit id → MTEB id) and
    ``to_kit`` (MTEB id → kit id), one entry per query instance; ``task`` is the MTEB task."""

    task: catalog.MtebTask
    to_mteb: Mapping[str, str]
    to_kit: Mapping[str, str]

    def mteb_id(self, kit_id: str) -> str:
        """The MTEB id of a kit query id (``KeyError`` for an id the benchmark lacks)."""
        return self.to_mteb[kit_id]

    def kit_id(self, mteb_id: str) -> str | None:
        """The kit id of an MTEB query id, or None when it names no instance of the benchmark:
        the exact table, else the query id and ``v<level>`` token read from the id (see the
        module docstring)."""
        found = self.to_kit.get(mteb_id)
        if found is not None or self.task.ids != "levels":
            return found
        group, level = level_from_mteb_id(mteb_id)
        if not self.task.level_scores:
            group, level = mteb_id, 0
        if level is None:
            return None
        candidate = f"{group}_{level}"
        return candidate if candidate in self.to_mteb else None


def mteb_task(benchmark_name: str) -> catalog.MtebTask:
    """The MTEB task of a benchmark name of the catalog (its sample's included)."""
    found = catalog.entry(benchmark_name)
    if not found.family.mteb:
        raise UsageError(f"MTEB has no task for {benchmark_name} (tasks: {', '.join(catalog.mteb_tasks())})")
    return found.mteb_task()


def _level_id(query: Query, repeat: int, multi_level: bool) -> str:
    """``<query id>_v<level>`` (multi-level) or ``<query id>`` (single level), ``.<n>`` for the
    n-th instance of one level, as the kit's own ids carry it."""
    base = f"{query.group}_v{query.level}" if multi_level else query.group
    return base if repeat == 1 else f"{base}.{repeat}"


def mteb_ids(benchmark: Benchmark) -> MtebIds:
    """The MTEB spelling of every query id of ``benchmark`` (see the module docstring). Only
    the instructed setting is an MTEB task (InstructIR's other settings have other ids and
    qrels); any other raises :class:`~instir.errors.UsageError`."""
    task = mteb_task(benchmark.name)
    if benchmark.setting != "instructed":
        raise UsageError(f"MTEB's {task.name} task is the instructed setting; "
                         f"{benchmark.label} is the {benchmark.setting!r} setting")
    to_mteb: dict[str, str] = {}
    if task.ids == "same" or benchmark.layout == "mteb":
        source = benchmark.meta.get("source_ids", {}) if benchmark.layout == "mteb" else {}
        to_mteb = {qid: source.get(qid, qid) for qid in benchmark.queries}
    else:
        seen: dict[str, Counter] = {}
        for qid, query in benchmark.queries.items():
            counts = seen.setdefault(query.group, Counter())
            counts[query.level] += 1
            to_mteb[qid] = _level_id(query, counts[query.level], task.level_scores)
    to_kit = {m: k for k, m in to_mteb.items()}
    if len(to_kit) != len(to_mteb):
        clash = next(m for m, n in Counter(to_mteb.values()).items() if n > 1)
        raise UsageError(f"{benchmark.label}: two queries would have the MTEB id {clash!r}")
    return MtebIds(task, MappingProxyType(to_mteb), MappingProxyType(to_kit))
