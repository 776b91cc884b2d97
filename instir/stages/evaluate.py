"""The evaluate stage (notebook 03, ``instir evaluate``, ``instir sweep``'s cells and collect
step): every run of ``runs/runs.csv`` scored on its benchmark, the tidy table, per-query values,
Robustness group minima and the paired comparisons against each benchmark's baseline (its
first system), written under ``metrics/``.

One run is scored by :func:`score_run` (a sweep cell calls it on its own run); the tables of
all runs are joined and compared by :func:`write_metrics`, the one aggregation every front end
uses, so a sweep folder and a notebook folder hold the same bytes. Benchmarks are loaded for
their queries and qrels only: the corpus is never parsed here (its ids come from the corpus
index).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from instir import atomic
from instir.benchmarks import catalog
from instir.benchmarks.registry import load_benchmark
from instir.benchmarks.types import Benchmark
from instir.metrics import robustness, stats
from instir.metrics.ifir import ifir_average, native_label
from instir.metrics.scoring import default_measures, evaluate_runs
from instir.metrics.table import combine, wide
from instir.parameters import names
from instir.report.explain import explain_instructir
from instir.report.layout import ReportLayout, report_layout, user_path
from instir.report.manifest import record_dataset
from instir.retrieval.runs import Run, RunIdCheck, read_run
from instir.stages.retrieve import read_runs_table

#: The measures compared against the baseline: the papers' headline measures.
HEADLINE = ("nDCG@10", robustness.label("nDCG@10"), "nDCG@20", native_label("nDCG@20"))
GROUP_COLUMNS = ["benchmark", "system", "group", "measure", "value", "n_queries"]


@dataclass
class RunScores:
    """One run scored on its benchmark: its rows of the tidy table, its per-query values and
    group minima (both with ``benchmark`` and ``system``), and the check of its ids."""

    table: pd.DataFrame
    per_query: pd.DataFrame
    per_group: pd.DataFrame
    check: RunIdCheck


def score_run(benchmark: Benchmark, run: Run, system: str) -> RunScores:
    """Score one run as ``system`` on ``benchmark`` (:func:`instir.metrics.evaluate_runs`:
    standard measures, Robustness on InstructIR, IFIR-native nDCG/MRR on IFIR)."""
    ev = evaluate_runs({system: run}, benchmark)
    per_group = ev.per_group.assign(benchmark=benchmark.name)
    return RunScores(ev.table, ev.per_query.assign(benchmark=benchmark.name)[["benchmark", "system", "qid", "measure",
                                                                             "value"]],
                     per_group.reindex(columns=GROUP_COLUMNS), ev.checks[system])


def compare_to_baseline(per_query: pd.DataFrame, per_group: pd.DataFrame, baseline: str,
                        measures: Sequence[str] | None = HEADLINE, **options) -> pd.DataFrame:
    """Every system against ``baseline`` on one benchmark (:func:`instir.metrics.paired_tests`):
    per query, and per query group for Robustness; ``measures`` None compares every measure.
    ``options`` go to the tests (``n_resamples``, ``seed``)."""
    frames = []
    for unit, values in (("query", per_query), ("group", per_group)):
        if measures is not None:
            values = values[values["measure"].isin(measures)]
        if len(values):
            frames.append(stats.paired_tests(values, baseline, **({"unit": "group"} if unit == "group" else {}),
                                             **options).assign(unit=unit))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


@dataclass
class Metrics:
    """What the evaluate stage wrote: ``table`` (``metrics/metrics.csv``), ``per_query``,
    ``per_group``, ``comparisons`` (against each benchmark's first system), ``checks`` (each
    run's ids against its benchmark) and ``runs`` (the runs.csv rows scored)."""

    table: pd.DataFrame
    per_query: pd.DataFrame
    per_group: pd.DataFrame
    comparisons: pd.DataFrame
    checks: pd.DataFrame
    runs: pd.DataFrame

    @property
    def samples(self) -> list[str]:
        """The bundled sample benchmarks among the scored ones (their numbers are no results)."""
        return sorted({b for b in self.table["benchmark"] if catalog.is_sample(b)})

    def instructir(self) -> list[tuple[str, pd.DataFrame, str]]:
        """Per InstructIR benchmark: its name, nDCG@10 and Robustness@10 by system (×100) and the
        sentences that say what they show."""
        family = self.table["benchmark"].map(catalog.family_of)
        rows = self.table[(family == "instructir") & self.table["measure"].isin(["nDCG@10", "Robustness@10"])]
        views = []
        for name, part in rows.groupby("benchmark", sort=False):
            per_query = self.per_query[(self.per_query["benchmark"] == name) & (self.per_query["measure"] == "nDCG@10")]
            views.append((name, wide(part), explain_instructir(part, per_query)))
        return views

    def ifir(self) -> tuple[pd.DataFrame, pd.DataFrame] | None:
        """IFIR's nDCG@20, standard and IFIR-native (×100): per subset with levels pooled (and the
        Average), and per level of the multi-level subsets (empty without one); None without IFIR.
        The benchmark heads the columns when there are several (``ifir/fiqa`` and ``ifir-sample/fiqa``)."""
        family = self.table["benchmark"].map(catalog.family_of)
        rows = self.table[(family == "ifir") & self.table["measure"].isin(["nDCG@20", native_label("nDCG@20")])]
        if not len(rows):
            return None
        by_level = rows[rows["level"] != "all"]
        levels = (wide(by_level.assign(level="level " + by_level["level"]),
                       columns=("benchmark", "subset", "level", "measure")) if len(by_level) else pd.DataFrame())
        return wide(rows[rows["level"] == "all"], columns=("benchmark", "subset", "measure")), levels

    def group_minima(self, benchmark: str) -> list[tuple[str, pd.Series, pd.Series]]:
        """Per system of an InstructIR benchmark: its Robustness@10 group minima and its nDCG@10
        per instance (the values whose mean and minimum-mean the tables show)."""
        groups = self.per_group[(self.per_group["benchmark"] == benchmark)
                                & (self.per_group["measure"] == "Robustness@10")]
        queries = self.per_query[(self.per_query["benchmark"] == benchmark) & (self.per_query["measure"] == "nDCG@10")]
        return [(system, groups.loc[groups["system"] == system, "value"],
                 queries.loc[queries["system"] == system, "value"]) for system in dict.fromkeys(groups["system"])]

    def instructed_vs_query_only(self, benchmark: str) -> tuple[str, list[tuple[str, pd.Series, pd.Series]]]:
        """The benchmark's headline measure and, per retriever, its query-only and instructed
        values per instance (×100, aligned on the instance ids)."""
        measure = default_measures(benchmark)[0]
        values = self.per_query[(self.per_query["benchmark"] == benchmark) & (self.per_query["measure"] == measure)]
        wide_values = values.pivot(index="qid", columns="system", values="value") * 100
        runs = self.runs[self.runs["benchmark"] == benchmark]
        pairs = []
        for retriever, part in runs.groupby("retriever", sort=False):
            by_variant = dict(zip(part["variant"], part["system"]))
            if {"instructed", "query-only"} <= by_variant.keys():
                pairs.append((retriever, wide_values[by_variant["query-only"]], wide_values[by_variant["instructed"]]))
        return measure, pairs


def write_metrics(layout: ReportLayout, runs: pd.DataFrame, scores: Sequence[RunScores]) -> Metrics:
    """Join the scores of ``runs`` (one :class:`RunScores` per row, in the rows' order) into
    ``metrics/``: the tidy table with IFIR's Average, per-query values, group minima, and every
    benchmark's systems against its first one, written as one set (:func:`instir.atomic.write_files`:
    a reader sees the last evaluation's files or this one's, never a mix)."""
    table = combine([s.table for s in scores])
    ifir_rows = table[table["benchmark"].map(catalog.family_of) == "ifir"]
    if len(ifir_rows):
        table = combine([table, ifir_average(ifir_rows)])
    per_query = pd.concat([s.per_query for s in scores], ignore_index=True)
    groups = [s.per_group for s in scores if len(s.per_group)]
    per_group = pd.concat(groups, ignore_index=True) if groups else pd.DataFrame(columns=GROUP_COLUMNS)
    comparisons = []
    for name in dict.fromkeys(runs["benchmark"]):
        baseline = runs.loc[runs["benchmark"] == name, "system"].iloc[0]
        compared = compare_to_baseline(per_query[per_query["benchmark"] == name].drop(columns="benchmark"),
                                       per_group[per_group["benchmark"] == name].drop(columns="benchmark"), baseline)
        comparisons.append(compared.assign(benchmark=name))
    comparisons = pd.concat(comparisons, ignore_index=True)
    checks = pd.DataFrame({"benchmark": runs["benchmark"].tolist(), "system": runs["system"].tolist(),
                           "run ids": [s.check.summary() for s in scores]})
    layout.metrics.mkdir(parents=True, exist_ok=True)
    atomic.write_frames({layout.metrics_table: table, layout.metrics / "metrics.parquet": table,
                         layout.per_query: per_query, layout.per_group: per_group, layout.comparisons: comparisons})
    return Metrics(table, per_query, per_group, comparisons, checks, runs)


def score_runs(out_dir: str | Path, benchmarks: Sequence[str] | None = None, *,
               data_root: str | None = None) -> Metrics:
    """The evaluate stage: every run ``runs/runs.csv`` lists (of ``benchmarks`` only, when
    given) scored on its benchmark and written under ``metrics/`` (:func:`write_metrics`)."""
    layout = report_layout(out_dir)
    runs = read_runs_table(layout, None if benchmarks is None else names(benchmarks, "benchmarks"))
    loaded: dict[tuple[str, str], Benchmark] = {}
    scores = []
    for row in runs.itertuples(index=False):
        key = (row.benchmark, row.setting)
        if key not in loaded:
            loaded[key] = load_benchmark(row.benchmark, row.setting, root=user_path(data_root) if data_root else None)
            record_dataset(layout.root, loaded[key])
        scores.append(score_run(loaded[key], read_run(layout.root / row.run_file), row.system))
    return write_metrics(layout, runs, scores)
