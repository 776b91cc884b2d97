"""Scoring runs on a benchmark: the one call notebooks and the CLI use (:func:`evaluate_runs`),
and :func:`evaluate`, one run in ranx's argument order for a Python session.

For each run: self-hits are dropped (as the InstructIR authors do), its ids are checked
against the benchmark, the standard measures are computed with one evaluator built for the
benchmark's qrels, then — depending on the benchmark — Robustness (InstructIR) and the
IFIR-native measures (IFIR). The result holds per-query values (for significance tests),
per-group minima (Robustness) and the tidy table.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping, Sequence

import pandas as pd

from instir.benchmarks.catalog import family_of
from instir.benchmarks.instructir import group_of
from instir.benchmarks.types import Benchmark
from instir.errors import UsageError, quoted, unknown
from instir.metrics import ifir, robustness, table
from instir.metrics.evaluation import Evaluation
from instir.metrics.inputs import qrels_of, run_of
from instir.metrics.measures import PROTOCOLS
from instir.metrics.standard import LOWER_CASE_NAMES, Evaluator, RunLike, mean_by_measure, parse_measures, run_frame
from instir.progress import tqdm
from instir.retrieval.runs import check_run_ids, drop_self_hits

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
    return Evaluation.collect(per_query, per_group, tables, excluded=evaluator.excluded, checks=checks)


_ROBUSTNESS = re.compile(r"robustness(?:@(\d+)|\((.+)\))$", re.IGNORECASE)
_NATIVE = re.compile(r"(.+)\[ifir-native\]$", re.IGNORECASE)


def _base_measure(name: str) -> str:
    """The ir-measures name of ``name`` (its own spelling, or ranx's: ``ndcg@10`` → ``nDCG@10``)."""
    head, at, cutoff = name.strip().partition("@")
    head = LOWER_CASE_NAMES.get(head.lower(), head)
    return str(parse_measures([head + at + cutoff])[0])


def _asked(name: str) -> tuple[str, str]:
    """(kind, base measure) of one asked name: ``standard``, ``robustness`` (``Robustness@10`` is
    Robustness of nDCG@10, ``Robustness(RR@10)`` of RR@10) or ``native`` (``nDCG@20[ifir-native]``)."""
    if not isinstance(name, str):
        raise UsageError(f"a measure is a name such as 'nDCG@10', got {quoted(name)}")
    robust = _ROBUSTNESS.match(name.strip())
    if robust:
        return "robustness", _base_measure(f"nDCG@{robust[1]}" if robust[1] else robust[2])
    native = _NATIVE.match(name.strip())
    if native:
        return "native", _base_measure(native[1])
    return "standard", _base_measure(name)


def instance_groups(qids: Sequence[str]) -> dict[str, str]:
    """``{qid: group}`` from ids of the form ``<group>_<n>`` (InstructIR's ``<query>_<n>``, the
    kit's IFIR ``<query>_<level>``): what Robustness needs when no Benchmark says the groups."""
    lone = [q for q in qids if "_" not in q]
    if lone:
        raise UsageError(f"Robustness needs query groups, and query {quoted(lone[0])} has no '<group>_<n>' id: pass a "
                         "Benchmark as qrels, or groups={qid: group}")
    return {q: group_of(q) for q in qids}


def _looks_like_run(value: object) -> bool:
    """A Run, or a frame with a score column: what an old ``evaluate(run, qrels, …)`` call passes first."""
    from instir.retrieval.runs import Run

    return isinstance(value, Run) or (isinstance(value, pd.DataFrame) and "score" in value.columns)


def evaluate(qrels: object, run: object, measures: str | Sequence[str], *, groups: Mapping[str, str] | None = None,
             per_query: bool = False) -> float | dict[str, float] | pd.DataFrame:
    """Score one run in ranx's argument order (``ranx.evaluate(qrels, run, metrics)``): the mean of
    one measure as a float, or ``{name: mean}`` for a list, keyed by the names as given.

    ``qrels``: a :class:`~instir.benchmarks.types.Benchmark` (its self-hits rule and query groups
    apply, as in :func:`evaluate_runs`, whose numbers these are) or any qrels shape
    :func:`instir.metrics.inputs.qrels_of` reads (dicts, DataFrames, files, ranx, ir_measures);
    ``run``: any run shape :func:`~instir.metrics.inputs.run_of` reads. ``measures``: ir-measures
    names (``nDCG@10``, ``RR@10``, ``R@100``) or ranx's (``ndcg@10``, ``mrr@10``, ``recall@100``);
    ``Robustness@10`` (the minimum nDCG@10 per query group, averaged over groups; groups from the
    Benchmark, ``groups``, or ``<group>_<n>`` ids) and ``nDCG@20[ifir-native]`` (the IFIR authors'
    nDCG) only when asked by name. Averaged like every kit table: over the queries with a relevant
    document, a query the run misses scoring 0. ``per_query=True``: a DataFrame, one row per
    query and one column per measure (not for Robustness, which has one value per group)."""
    if _looks_like_run(qrels) and not _looks_like_run(run):
        warnings.warn("evaluate(run, qrels, measures) is the old argument order; the order is now "
                      "evaluate(qrels, run, measures), as in ranx", DeprecationWarning, stacklevel=2)
        qrels, run = run, qrels
    benchmark = qrels if isinstance(qrels, Benchmark) else None
    judged = qrels_of(qrels)
    the_run = run_of(run)
    if benchmark is not None:
        the_run = without_self_hits(the_run)
    names = [measures] if isinstance(measures, str) else list(measures)
    asked = {name: _asked(name) for name in names}
    if per_query and any(kind == "robustness" for kind, _ in asked.values()):
        raise UsageError("Robustness has one value per query group, not per query: leave it out of per_query")
    standard = list(dict.fromkeys(base for kind, base in asked.values() if kind != "native"))
    native = list(dict.fromkeys(base for kind, base in asked.values() if kind == "native"))
    frames = [Evaluator(judged, standard).per_query(the_run)] if standard else []
    if native:
        frames.append(ifir.native_per_query(the_run, judged, native))
    scores = pd.concat(frames, ignore_index=True)
    column = {name: (ifir.native_label(base) if kind == "native" else base) for name, (kind, base) in asked.items()}
    if per_query:
        wide = scores.pivot(index="qid", columns="measure", values="value")
        return pd.DataFrame({name: wide[label] for name, label in column.items()})
    means = mean_by_measure(scores)
    if any(kind == "robustness" for kind, _ in asked.values()):
        if groups is None:
            groups = (robustness.query_groups(benchmark) if benchmark is not None
                      else instance_groups(sorted(set(scores["qid"]))))
        robust = robustness.robustness(scores, groups)
        means.update(dict(zip(robust["measure"], robust["value"].astype(float))))
        column.update({name: robustness.label(base) for name, (kind, base) in asked.items() if kind == "robustness"})
    values = {name: float(means[label]) for name, label in column.items()}
    return values[names[0]] if isinstance(measures, str) else values
