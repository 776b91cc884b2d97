"""Robustness@k as the InstructIR authors compute it: per query group, the minimum of the
per-instance metric; the minima averaged over groups (``…_min`` in their output).

Inputs are per-query frames (``qid``, ``measure``, ``value``) from
:class:`instir.metrics.standard.Evaluator`, scored on a run whose self-hits (document id ==
query id) were dropped first, as the official code does; any measure works. The group of an
instance is its ``Query.group`` (InstructIR: the original MS MARCO query id).
"""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from instir.benchmarks.types import Benchmark
from instir.metrics.measures import Robustness, parse_measure


def label(measure: str) -> str:
    """Name of the robustness value of a measure in result frames, spelled one way everywhere
    (:class:`instir.metrics.measures.Robustness`): nDCG@k gives ``Robustness@k``, the name
    InstructIR prints (their Robustness is defined on nDCG); any other measure, for which no
    paper has a name, keeps it in parentheses: ``RR@10`` -> ``Robustness(RR@10)``.
    :func:`instir.papers.canonical_measure` reads both."""
    return Robustness(parse_measure(measure)).name


def query_groups(benchmark: Benchmark) -> dict[str, str]:
    """``{query id: group}`` of a benchmark's query instances."""
    return {qid: q.group for qid, q in benchmark.queries.items()}


def group_minima(per_query: pd.DataFrame, groups: Mapping[str, str]) -> pd.DataFrame:
    """Per group and measure, the minimum over the group's instances: columns ``group``,
    ``measure`` (the robustness label), ``value``, ``n_queries``. Raises ``KeyError`` for a
    query without a group (a silent drop would raise the score)."""
    missing = sorted(set(per_query["qid"].unique()) - set(groups))
    if missing:
        raise KeyError(f"{len(missing)} queries have no group, e.g. {missing[:3]}")
    frame = per_query.assign(group=per_query["qid"].map(groups))
    out = (frame.groupby(["measure", "group"], sort=False)["value"]
           .agg(value="min", n_queries="size").reset_index())
    out["measure"] = out["measure"].map({measure: label(measure) for measure in out["measure"].unique()})
    return out[["group", "measure", "value", "n_queries"]]


def average_minima(minima: pd.DataFrame) -> pd.DataFrame:
    """Robustness from :func:`group_minima`' output: per measure, the mean over groups.
    Columns ``measure``, ``value``, ``n_groups``, ``n_queries``."""
    return (minima.groupby("measure", sort=False)
            .agg(value=("value", "mean"), n_groups=("group", "size"), n_queries=("n_queries", "sum"))
            .reset_index())


def robustness(per_query: pd.DataFrame, groups: Mapping[str, str]) -> pd.DataFrame:
    """Robustness of every measure in ``per_query``: the mean over groups of the group
    minimum. Columns ``measure`` (:func:`label`), ``value``, ``n_groups``,
    ``n_queries``."""
    return average_minima(group_minima(per_query, groups))
