"""Scoring runs on a benchmark: the one call notebooks and the CLI use.

For each run: self-hits are dropped (as the InstructIR authors do), its ids are checked
against the benchmark, the standard measures are computed with one evaluator built for the
benchmark's qrels, then — depending on the benchmark — Robustness (InstructIR) and the
IFIR-native measures (IFIR). The result holds per-query values (for significance tests),
per-group minima (Robustness) and the tidy table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

from instir.benchmarks.catalog import family_of
from instir.benchmarks.types import Benchmark
from instir.errors import unknown
from instir.metrics import ifir, robustness, table
from instir.metrics.standard import Evaluator, RunLike, parse_measures, run_frame
from instir.progress import tqdm
from instir.retrieval.runs import RunIdCheck, check_run_ids, drop_self_hits

#: Measures reported by default, per benchmark family (the papers' headline measure first).
DEFAULT_MEASURES = {
    "instructir": ("nDCG@10", "RR@10", "R@100", "P@10"),
    "ifir": ("nDCG@20", "RR@20", "R@20"),
}


def default_measures(benchmark_name: str) -> tuple[str, ...]:
    """The measures reported for a benchmark when none are asked for."""
    return DEFAULT_MEASURES.get(family_of(benchmark_name), DEFAULT_MEASURES["instructir"])


def without_self_hits(run: RunLike) -> RunLike:
    """The run without documents whose id is the query id (``drop_self_hits``, as the
    InstructIR authors score), or the run itself when it has none: dropping re-sorts the
    whole run, which costs seconds at a million rows."""
    frame = run_frame(run)
    return drop_self_hits(run) if (frame["qid"] == frame["docid"]).any() else run


@dataclass
class Evaluation:
    """Everything computed for a set of runs on one benchmark.

    ``per_query``: system, qid, measure, value (standard and ``[ifir-native]`` measures);
    ``per_group``: system, group, measure (:func:`instir.metrics.robustness.label`, e.g.
    ``Robustness@10``), value, n_queries;
    ``table``: the tidy table (:data:`instir.metrics.table.COLUMNS`);
    ``excluded``: qrels queries without a relevant document (not averaged);
    ``checks``: per system, the ids its run has that the benchmark lacks;
    ``notes``: what the scoring left out and why (the ``mteb`` protocol's, one line each).
    """

    per_query: pd.DataFrame
    per_group: pd.DataFrame
    table: pd.DataFrame
    excluded: list[str] = field(default_factory=list)
    checks: dict[str, RunIdCheck] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


#: Scoring protocols: ``authors`` (the default: the papers' official code) and ``mteb``
#: (MTEB 2.26's task definitions, :mod:`instir.metrics.mteb`).
PROTOCOLS = ("authors", "mteb")


def evaluate_runs(runs: Mapping[str, RunLike], benchmark: Benchmark, measures: Sequence[str] | None = None, *,
                  with_robustness: bool | None = None, native: Sequence[str] | None = None,
                  protocol: str = "authors") -> Evaluation:
    """Score ``runs`` (``{system name: Run or DataFrame}``) on ``benchmark``.

    ``with_robustness`` defaults to True for InstructIR benchmarks (Robustness of every
    measure); ``native`` lists IFIR-native measures and defaults, on IFIR benchmarks, to the
    plain ``nDCG@k`` / ``RR@k`` among ``measures``. ``protocol="mteb"`` scores as MTEB does
    instead (:func:`instir.metrics.mteb.evaluate_mteb`: MTEB's measure names, averaging,
    rounding and self-hit rule; ``with_robustness`` and ``native`` do not apply).
    """
    if protocol not in PROTOCOLS:
        raise unknown("protocol", protocol, PROTOCOLS)
    if protocol == "mteb":
        from instir.metrics.mteb import evaluate_mteb

        return evaluate_mteb(runs, benchmark, measures)
    measures = list(measures or default_measures(benchmark.name))
    is_ifir = benchmark.family == "ifir"
    if with_robustness is None:
        with_robustness = benchmark.family == "instructir"
    if native is None:
        native = [str(m) for m in parse_measures(measures)
                  if is_ifir and m.NAME in ("nDCG", "RR") and set(m.params) == {"cutoff"}]
    evaluator = Evaluator(benchmark.qrels, measures)
    groups = robustness.query_groups(benchmark) if with_robustness else {}
    per_query, per_group, tables, checks = [], [], [], {}
    for system, run in tqdm(runs.items(), desc="scoring runs", disable=len(runs) < 2):
        checks[system] = check_run_ids(run, benchmark)
        run = without_self_hits(run)
        scores = evaluator.per_query(run)
        if native:
            scores = pd.concat([scores, ifir.native_per_query(run, benchmark.qrels, native)], ignore_index=True)
        tables.append(table.summarise(scores, benchmark, system))
        per_query.append(scores.assign(system=system))
        if with_robustness:
            minima = robustness.group_minima(scores, groups)
            tables.append(table.with_slice(robustness.average_minima(minima), benchmark, system))
            per_group.append(minima.assign(system=system))
    group_columns = ["system", "group", "measure", "value", "n_queries"]
    return Evaluation(
        per_query=pd.concat(per_query, ignore_index=True)[["system", "qid", "measure", "value"]],
        per_group=(pd.concat(per_group, ignore_index=True)[group_columns] if per_group
                   else pd.DataFrame(columns=group_columns)),
        table=table.combine(tables),
        excluded=evaluator.excluded,
        checks=checks,
    )
