"""The ``mteb`` protocol: runs scored as MTEB 2.26 scores its InstructIR, IFIR and FollowIR tasks, so
the kit and MTEB give the same numbers for the same run (what differs from the authors'
protocol, and where in MTEB's source, is in docs/mteb.md).

Queries are scored under MTEB's ids (:func:`instir.benchmarks.mteb.mteb_ids`), so the groups and
levels are MTEB's own; per-query values come back under the kit's ids. MTEB's ``nAUC`` measures
and ``accuracy`` (= ``recall_at_1``) are not computed; values are those before MTEB's result
files round them to 6 decimals. On FollowIR's tasks, ``p-MRR`` (the main score) and the ``og.*`` /
``changed.*`` scores of each half, as ``evaluate_p_mrr_change`` reports them.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import pandas as pd
import pytrec_eval

from instir.benchmarks import catalog
from instir.benchmarks.mteb import MtebIds, mteb_ids, mteb_task
from instir.benchmarks.types import Benchmark
from instir.errors import UsageError, unknown
from instir.metrics import pmrr, table
from instir.metrics.evaluation import Evaluation
from instir.metrics.measures import LOWER_CASE_NAMES
from instir.metrics.standard import RunLike, run_dict
from instir.progress import tqdm
from instir.retrieval.runs import Run, check_run_ids

#: MTEB's ``AbsTaskRetrieval.k_values``: the only cutoffs MTEB computes.
MTEB_K_VALUES = (1, 3, 5, 10, 20, 100, 1000)
#: decimals of MTEB's means from pytrec_eval (``parse_metrics_from_scores``)
ROUNDING = 5
#: MTEB's measure prefix -> the pytrec_eval measure it is read from (``calculate_retrieval_scores``)
TREC_MEASURES = {"ndcg": "ndcg_cut", "map": "map_cut", "recall": "recall", "precision": "P", "hit_rate": "success"}
#: MTEB's two halves of a paired task's instances (``evaluate_p_mrr_change``: ``og`` for ids ending ``-og``,
#: ``changed`` for every other id), the prefixes of their scores
HALVES = ("og", "changed")


def half_of(qid: str) -> str:
    """The half MTEB scores an instance id in (:data:`HALVES`: ``mteb/_evaluators/retrieval_metrics.py``,
    ``evaluate_p_mrr_change``)."""
    return "og" if qid.endswith("-og") else "changed"


#: the kit's measure names (ir-measures style) -> MTEB's prefix, for ``--measures nDCG@10`` in either protocol
_KIT_NAMES = {kit: lower for lower, kit in reversed(LOWER_CASE_NAMES.items())}  # MTEB's, listed first
_MEASURE = re.compile(r"(ndcg|map|recall|precision|mrr|hit_rate)_at_(\d+)")
#: the measure MTEB's robustness and level scores are built on
_ROBUSTNESS_BASE, _LEVEL_BASE = "ndcg_cut_10", "ndcg_cut_20"


def mteb_measure(name: str) -> str:
    """MTEB's name of a measure: ``ndcg_at_10`` as is, the kit's ``nDCG@10`` → ``ndcg_at_10``,
    ``RR@10`` → ``mrr_at_10``, ``Robustness@10`` → ``robustness_at_10``; ``main_score``. A
    cutoff outside :data:`MTEB_K_VALUES` or a measure MTEB does not compute is a
    :class:`~instir.errors.UsageError`."""
    text = str(name).strip()
    half, dot, rest = text.partition(".")
    if dot and half in HALVES:
        return f"{half}.{mteb_measure(rest)}"
    if text.lower() in ("p-mrr", "pmrr"):
        return "p-MRR"
    kit = re.fullmatch(r"(nDCG|AP|R|P|RR|Success|Robustness)@(\d+)", text)
    if kit:
        prefix = "robustness" if kit.group(1) == "Robustness" else _KIT_NAMES[kit.group(1)]
        text = f"{prefix}_at_{kit.group(2)}"
    if text in ("main_score", "robustness_at_10"):
        return text
    match = _MEASURE.fullmatch(text)
    if not match:
        raise unknown("MTEB measure", name, [*(f"{p}_at_10" for p in (*TREC_MEASURES, "mrr")), "robustness_at_10",
                                             "p-MRR", "og.map_at_1000", "main_score"],
                      more=" (or the kit's nDCG@10, RR@10, R@100, P@10 …)")
    if int(match.group(2)) not in MTEB_K_VALUES:
        raise UsageError(f"MTEB computes {match.group(1)} only at k = {', '.join(map(str, MTEB_K_VALUES))}, "
                         f"not {match.group(2)}")
    return text


def default_mteb_measures(benchmark_name: str) -> tuple[str, ...]:
    """The MTEB-named measures reported for a benchmark when none are asked for (its family
    spec's ``[mteb] measures``, the task's main score last)."""
    return mteb_task(benchmark_name).measures


@dataclass
class MtebScores:
    """One run scored as MTEB scores it (see the module docstring).

    ``scores``: MTEB's flat scores dict at every k of :data:`MTEB_K_VALUES` (MTEB's rounding),
    ``robustness_at_10`` on InstructIR and ``main_score``; ``level_scores``: ``level_1`` …
    ``level_3`` on the multi-level IFIR tasks; ``per_query``: ``qid`` (the kit's id),
    ``measure`` (MTEB's name), unrounded ``value``; ``groups``: per robustness group (``group``,
    ``value`` = its lowest ``ndcg_cut_10``, ``n_queries``), or per FollowIR query pair its p-MRR;
    ``level_counts``; ``n_scored`` (queries averaged); ``notes``: what was left out and why."""

    task: catalog.MtebTask
    scores: dict[str, float]
    level_scores: dict[str, float]
    per_query: pd.DataFrame
    groups: pd.DataFrame
    level_counts: dict[str, int]
    n_scored: int
    notes: list[str] = field(default_factory=list)


#: How :func:`mteb_scores` notes the qrels queries a run leaves out (:func:`evaluation` says them by the run's check).
_UNANSWERED = "qrels queries have no results"


def _results(run: RunLike | Mapping[str, Mapping[str, float]]) -> dict[str, dict[str, float]]:
    """``{qid: {docid: score}}`` of a run given as a Run, a frame or already as that dict."""
    if isinstance(run, Mapping):
        return {str(q): {str(d): float(s) for d, s in docs.items()} for q, docs in run.items()}
    return run_dict(run)


def _mrr(results: Mapping[str, Mapping[str, float]],
         qrels: Mapping[str, Mapping[str, int]]) -> dict[str, dict[int, float]]:
    """Per result list, MTEB's reciprocal rank at every k (``retrieval_metrics.mrr``): the list
    sorted by (score, document id) descending, cut at the largest k; 1/rank of the first
    document whose grade is above 0 within the top k, else 0."""
    k_max = max(MTEB_K_VALUES)
    out = {}
    for qid, docs in results.items():
        top = sorted(docs.items(), key=lambda item: (item[1], item[0]), reverse=True)[:k_max]
        relevant = {d for d, g in qrels[qid].items() if g > 0}
        first = next((rank for rank, (d, _) in enumerate(top, start=1) if d in relevant), None)
        out[qid] = {k: (1.0 / first if first is not None and first <= k else 0.0) for k in MTEB_K_VALUES}
    return out


def _means(scored: Mapping[str, Mapping[str, float]], reciprocal: Mapping[str, Mapping[int, float]]) -> dict:
    """MTEB's means over the scored queries: every trec measure at every k (MTEB's rounding) and
    the reciprocal rank (unrounded, as ``calculate_retrieval_scores`` leaves it)."""
    out: dict[str, float] = {}
    for prefix, trec in TREC_MEASURES.items():
        for k in MTEB_K_VALUES:
            values = [per[f"{trec}_{k}"] for per in scored.values()]
            out[f"{prefix}_at_{k}"] = round(sum(values) / len(scored), ROUNDING) if scored else float("nan")
    for k in MTEB_K_VALUES:
        values = [rr[k] for rr in reciprocal.values()]
        out[f"mrr_at_{k}"] = sum(values) / len(values) if values else float("nan")
    return out


def mteb_scores(run: RunLike | Mapping[str, Mapping[str, float]], benchmark: Benchmark,
                ids: MtebIds | None = None) -> MtebScores:
    """Score one run (kit query ids: a :class:`~instir.retrieval.runs.Run`, a frame, or
    ``{qid: {docid: score}}`` as read from a predictions file) on ``benchmark`` as MTEB's task
    does (see the module docstring). ``ids`` (:func:`instir.benchmarks.mteb.mteb_ids`) may be
    passed when scoring many runs."""
    ids = ids or mteb_ids(benchmark)
    task = ids.task
    notes: list[str] = []
    qrels = {ids.mteb_id(q): {d: int(g) for d, g in docs.items()} for q, docs in benchmark.qrels.items() if docs}
    results: dict[str, dict[str, float]] = {}
    outside = []
    for qid, docs in _results(run).items():
        mid = ids.to_mteb.get(qid)
        if mid is None or mid not in qrels:
            outside.append(qid)
            continue
        results[mid] = {d: s for d, s in docs.items() if not (task.ignore_identical_ids and d == mid)}
    if outside:
        notes.append(f"{len(outside)} queries of the run are not in the qrels and are left out (MTEB's own mrr "
                     f"would stop on them), e.g. {outside[:3]}")
    missing = [q for q in qrels if q not in results]
    if missing:
        notes.append(f"{len(missing)} {_UNANSWERED}: MTEB averages over the {len(results)} "
                     f"queries of the run (the authors' protocol scores them 0)")
    measures = {f"{trec}.{','.join(map(str, MTEB_K_VALUES))}" for trec in TREC_MEASURES.values()}
    scored = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(results) if results else {}
    reciprocal = _mrr(results, qrels)
    kit_id = ids.to_kit
    out = _means(scored, reciprocal)
    rows = [(kit_id[q], f"{prefix}_at_{k}", per[f"{trec}_{k}"]) for prefix, trec in TREC_MEASURES.items()
            for k in MTEB_K_VALUES for q, per in scored.items()]
    rows += [(kit_id[q], f"mrr_at_{k}", rr[k]) for k in MTEB_K_VALUES for q, rr in reciprocal.items()]
    groups = pd.DataFrame(columns=["group", "value", "n_queries"])
    if task.robustness:
        by_group: dict[str, list[str]] = defaultdict(list)
        for qid in qrels:
            by_group[qid.split("_")[0]].append(qid)
        lacking = [q for q in qrels if q not in scored]
        if lacking:
            notes.append(f"robustness_at_10 is left out: MTEB's definition needs every qrels query scored and "
                         f"{len(lacking)} are not (e.g. {lacking[:3]}); MTEB itself stops there")
        else:
            minima = {g: min(scored[q][_ROBUSTNESS_BASE] for q in members) for g, members in by_group.items()}
            out["robustness_at_10"] = sum(minima.values()) / len(minima)
            groups = pd.DataFrame({"group": list(minima), "value": list(minima.values()),
                                   "n_queries": [len(by_group[g]) for g in minima]})
    if task.pairwise:  # evaluate_p_mrr_change: p-MRR, then each half scored on its own
        changed = benchmark.meta.get("changed") or pmrr.PAIRED.regraded(benchmark.qrels)
        frame = pd.DataFrame([(kit_id[q], d, v) for q, docs in results.items() for d, v in docs.items()],
                             columns=["qid", "docid", "score"])
        pairs = pmrr.per_query(frame, changed, "mteb")
        out["p-MRR"] = float(pairs["value"].mean()) if len(pairs) else float("nan")
        groups = pairs[["group", "value"]].assign(n_queries=2)
        rows += [(q, f"{half_of(q)}.{m}", v) for q, m, v in rows]
        for half in HALVES:
            keep = {q for q in results if half_of(kit_id[q]) == half}
            out.update({f"{half}.{name}": value for name, value in _means(
                {q: v for q, v in scored.items() if q in keep}, {q: v for q, v in reciprocal.items() if q in keep}
            ).items()})
    level_scores: dict[str, float] = {}
    level_counts: dict[str, int] = {}
    if task.level_scores:
        per_level: dict[str, list[float]] = {"level_1": [], "level_2": [], "level_3": []}
        for qid, per in scored.items():
            level = next((f"level_{n}" for n in (1, 2, 3) if f"v{n}" in qid), None)
            if level is not None:
                per_level[level].append(per[_LEVEL_BASE])
        for level, values in per_level.items():
            level_counts[level] = len(values)
            if values:
                level_scores[level] = sum(values) / len(values)
            else:
                notes.append(f"level_scores.{level} is left out: no scored query id contains "
                             f"'v{level[-1]}' (a division by zero in MTEB)")
    main = out.get(task.main_score)
    if main is not None:
        out["main_score"] = main
    per_query = pd.DataFrame(rows, columns=["qid", "measure", "value"])
    return MtebScores(task, out, level_scores, per_query, groups, level_counts, len(scored), notes)


def evaluation(runs: Mapping[str, RunLike | Mapping[str, Mapping[str, float]]], benchmark: Benchmark,
               measures: Sequence[object] | None = None) -> Evaluation:
    """Score ``runs`` (``{system: run}``) on ``benchmark`` with the ``mteb`` protocol, in the
    kit's result layout (:class:`~instir.metrics.scoring.Evaluation`): ``table`` with MTEB's
    measure names and values (its rounding), and, on the multi-level IFIR tasks, one
    ``ndcg_at_20`` row per level (MTEB's ``level_scores``); ``per_query`` with MTEB's
    per-query values of the asked measures (for the paired tests); ``per_group`` with the
    ``robustness_at_10`` group minima (FollowIR: each pair's ``p-MRR``). ``notes`` say what was left out and why."""
    asked = [mteb_measure(str(m)) for m in (measures or default_mteb_measures(benchmark.name))]
    asked = list(dict.fromkeys(asked))
    ids = mteb_ids(benchmark)
    task = ids.task
    if "robustness_at_10" in asked and not task.robustness:
        raise UsageError(f"robustness_at_10 is InstructIR's measure; MTEB's {task.name} does not compute it")
    paired = next((m for m in asked if m == "p-MRR" or m.partition(".")[0] in HALVES), None)
    if paired and not task.pairwise:
        raise UsageError(f"{paired} is scored on FollowIR's -og/-changed pairs; MTEB's {task.name} does not compute it")
    subset = task.subset or "all"
    tables, per_query, per_group, checks, notes = [], [], [], {}, []
    for system, run in tqdm(runs.items(), desc="scoring runs (mteb)", disable=len(runs) < 2):
        result = mteb_scores(run, benchmark, ids)
        checks[system] = replace(check_run_ids(run if not isinstance(run, Mapping) else Run.from_scores(run),
                                               benchmark), mean_of=result.n_scored)
        # the queries the run leaves out: said once, by its check's summary (with their ids)
        notes += [f"{system}: {note}" for note in result.notes if _UNANSWERED not in note]
        rows = []
        for measure in asked:
            if measure not in result.scores:
                continue
            count = len(result.groups) if measure in ("robustness_at_10", "p-MRR") else result.n_scored
            rows.append({"measure": measure, "value": result.scores[measure], "n_queries": count,
                         "subset": subset, "level": "all"})
        for level, value in result.level_scores.items():
            rows.append({"measure": "ndcg_at_20", "value": value, "n_queries": result.level_counts[level],
                         "subset": subset, "level": level.removeprefix("level_")})
        tables.append(table.with_slice(pd.DataFrame(rows, columns=["measure", "value", "n_queries", "subset", "level"]),
                                       benchmark, system))
        values = result.per_query[result.per_query["measure"].isin(asked)]
        per_query.append(values.assign(system=system))
        grouped = "p-MRR" if task.pairwise else "robustness_at_10"
        if grouped in asked and len(result.groups):
            per_group.append(result.groups.assign(system=system, measure=grouped))
    return Evaluation.collect(per_query, per_group, tables, checks=checks, notes=notes)
