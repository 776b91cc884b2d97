"""The one container of scores: what scoring a set of runs on one benchmark gives, under either
protocol (per query, per group, the tidy table, the run checks, the queries left out, notes)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from instir.metrics import table
from instir.retrieval.runs import RunIdCheck


@dataclass
class Evaluation:
    """Everything computed for a set of runs on one benchmark.

    ``per_query``: system, qid, measure, value; ``per_group``: system, group, measure (e.g.
    ``Robustness@10``), value, n_queries; ``table``: the tidy table
    (:data:`instir.metrics.table.COLUMNS`); ``excluded``: qrels queries without a relevant
    document (not averaged); ``checks``: per system, its run's :class:`~instir.retrieval.runs.RunIdCheck`
    (ids the benchmark lacks, queries left unanswered, depth); ``notes``: one line each, what the
    scoring left out and why (the ``mteb`` protocol's) and a run ranking fewer documents than a cutoff.
    """

    per_query: pd.DataFrame
    per_group: pd.DataFrame
    table: pd.DataFrame
    excluded: list[str] = field(default_factory=list)
    checks: dict[str, RunIdCheck] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @classmethod
    def collect(cls, per_query: list[pd.DataFrame], per_group: list[pd.DataFrame], tables: list[pd.DataFrame],
                **rest) -> "Evaluation":
        """An evaluation from the per-system pieces a scoring loop gathers (``rest``: ``excluded``,
        ``checks``, ``notes``)."""
        groups = ["system", "group", "measure", "value", "n_queries"]
        return cls(per_query=pd.concat(per_query, ignore_index=True)[["system", "qid", "measure", "value"]],
                   per_group=(pd.concat(per_group, ignore_index=True)[groups] if per_group
                              else pd.DataFrame(columns=groups)),
                   table=table.combine(tables), **rest)

    @classmethod
    def join(cls, evaluations: list["Evaluation"]) -> "Evaluation":
        """Several evaluations on one benchmark (one per run, say) as one, in the order given."""
        return cls.collect([e.per_query for e in evaluations], [e.per_group for e in evaluations if len(e.per_group)],
                           [e.table for e in evaluations],
                           excluded=evaluations[0].excluded if evaluations else [],
                           checks={k: v for e in evaluations for k, v in e.checks.items()},
                           notes=[n for e in evaluations for n in e.notes])
