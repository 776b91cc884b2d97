"""InstFol@k (IFIR, arXiv:2503.04644 §4.1): how much an instruction improves what a retriever
returns, as judged by an LLM against that instruction.

Both top-k lists of an instance, C_q (the query-only run: bare query, same instance ids) and
C_inst (the instructed run), are judged against the same query + instruction on the rubric of
the instance's subset and level. A rank where either judgment failed is dropped from both lists
and counted (a failure is never a score of 0). With S_q and S_inst the mean weighted scores left,

    InstFol = (S_inst - S_q) / (3 - S_q);   0 when S_inst == S_q;   S_inst - S_q when S_q == 3.

The constant is 3 for every rubric, as in the official code, so a value is at most 1 but not
bounded below while both S are at most 3; a judge may answer up to 5 on any rubric (the official code
takes it, :data:`~instir.judge.rubrics.IFIR_MAX_DIGIT`), and an instance whose S_q passes 3 gets a value the
formula turns over (:func:`instfol` warns). :func:`aggregate` averages the instances as IFIR's Table 3 does,
each value with its failed and parsed judgment counts; a subset with a level left without a value has none (nor
has the Average), and :func:`instfol` says which instances and levels are missing (:class:`UnscoredWarning`).

Where the kit departs from the official release, the reason is kept once, as data, in
:data:`instir.papers.divergences.DIVERGENCES`: ``aila-judge-prompt``, ``query-only-overwrite``,
``judge-fallbacks``, ``same-level-instructions`` and ``judge-call-settings``.
"""

from __future__ import annotations

import math
import warnings
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from instir import parameters
from instir.benchmarks.types import Benchmark, Query
from instir.errors import UsageError, expect, quoted
from instir.formatting import reads_instruction
from instir.judge.outcomes import judge_each, judgment_counts, judgment_frame
from instir.judge.rubrics import IFIR_MAX_DIGIT, INSTFOL_MAX, rubric_for
from instir.judge.types import Judge, JudgeRequest
from instir.retrieval.runs import (
    Run,
    ShallowRunsWarning,
    as_run,
    ranked_depth,
    ranked_phrase,
    refuse_unanswered,
    same_rankings,
    shallowest_query,
)

#: List cut-off of IFIR's InstFol@20.
K = 20
#: The most instances a sample may ask for: more than any benchmark holds.
MAX_INSTANCES = 1_000_000

#: Differences below this are float noise: S_inst == S_q and S_q == 3 are tested with it.
_EPS = 1e-12

_LISTS = ("query", "instructed")


class UnscoredWarning(UserWarning):
    """Instances of an InstFol left without a value (every rank of a list failed, or a run lacks them): a level
    with none has no value, nor has its subset or the Average (:func:`unscored_note` says which); or levels of a
    subset left out of a sample too small to hold one instance a level."""


def instfol_score(s_q: float, s_inst: float, max_score: float = INSTFOL_MAX) -> float:
    """IFIR's relative gain of S_inst over S_q: ``(s_inst - s_q) / (max_score - s_q)``, 0 when
    the two are equal, ``s_inst - s_q`` when ``s_q`` is already ``max_score``."""
    diff = s_inst - s_q
    if abs(diff) <= _EPS:
        return 0.0
    if abs(max_score - s_q) <= _EPS:
        return diff
    return diff / (max_score - s_q)


@dataclass(frozen=True)
class ListPairScore:
    """InstFol of one instance from its two rank-aligned lists of weighted scores.

    ``n_q`` and ``n_inst`` are the passages averaged in each list; ``dropped`` the ranks left
    out of both lists because a judgment there failed in either; ``failed`` the failed
    judgments themselves (up to two per rank); ``parsed`` the averaged judgments scored by the
    parsed integer alone (``weighting="parsed"``: no usable log-probabilities). With an empty
    list the S values and InstFol are NaN.
    """

    s_q: float
    s_inst: float
    instfol: float
    n_q: int
    n_inst: int
    dropped: int
    failed: int
    parsed: int = 0


def score_list_pair(query_scores: Sequence[float | None], instructed_scores: Sequence[float | None],
                    max_score: float = INSTFOL_MAX, *, query_weighting: Sequence[str | None] = (),
                    instructed_weighting: Sequence[str | None] = ()) -> ListPairScore:
    """InstFol from the weighted scores of C_q and C_inst by rank (``None`` = failed judgment).

    A rank where either judgment failed is dropped from both lists (a failure is never a score;
    the official code has no such case, as it scores every answer it cannot read 0.0); a list
    shorter than the other (a retriever that returned fewer than k passages) is averaged over
    what it has. The ``*_weighting`` lists (:data:`instir.judge.types.Weighting` by rank, optional)
    let ``parsed`` count the averaged judgments that had no usable log-probabilities.
    """
    bad = {r for scores in (query_scores, instructed_scores) for r, s in enumerate(scores) if s is None}
    failed = sum(s is None for s in query_scores) + sum(s is None for s in instructed_scores)
    kept_q = [s for r, s in enumerate(query_scores) if r not in bad]
    kept_i = [s for r, s in enumerate(instructed_scores) if r not in bad]
    parsed = sum(w == "parsed" for weighting in (query_weighting, instructed_weighting)
                 for r, w in enumerate(weighting) if r not in bad)
    if not kept_q or not kept_i:
        return ListPairScore(math.nan, math.nan, math.nan, len(kept_q), len(kept_i), len(bad), failed, parsed)
    s_q, s_inst = float(np.mean(kept_q)), float(np.mean(kept_i))
    return ListPairScore(s_q, s_inst, instfol_score(s_q, s_inst, max_score), len(kept_q), len(kept_i), len(bad),
                         failed, parsed)


def stratum_rng(seed: int, key: tuple) -> np.random.Generator:
    """A seeded generator for one sampling stratum that does not depend on which other strata
    exist (so adding a subset leaves the draws of the others unchanged)."""
    return np.random.default_rng([seed, zlib.crc32(repr(key).encode())])


def check_max_instances(value: int | None) -> int | None:
    """``value`` (None: every instance) when it is a whole number from 1 to :data:`MAX_INSTANCES`, else a
    :class:`~instir.errors.UsageError`: what a stage asks before any judgment is paid for."""
    return None if value is None else parameters.count_within(value, 1, MAX_INSTANCES, "max_instances")


def select_instances(queries: Sequence[Query], max_instances: int | None,
                     seed: int = 0) -> tuple[list[str], pd.DataFrame]:
    """Pick at most ``max_instances`` instances, stratified by (subset, level), with a fixed seed.

    The budget is shared as evenly as the strata allow (a small stratum gives its unused share to
    the others); within a stratum the instances are a seeded random choice. Returns the chosen
    ids in input order and a frame ``subset, level, available, selected`` per stratum.
    ``None`` selects everything. (The release, when asked to sample, draws a tenth of fiqa and a
    fifth of the other subsets without a fixed seed.)
    """
    strata: dict[tuple, list[str]] = {}
    for q in queries:
        strata.setdefault((q.subset, q.level), []).append(q.id)
    check_max_instances(max_instances)
    chosen: set[str] = set()
    counts: dict[tuple, int] = {}
    remaining = sum(map(len, strata.values())) if max_instances is None else max_instances
    order = sorted(strata, key=lambda key: (len(strata[key]), str(key)))
    for n, key in enumerate(order):
        ids = strata[key]
        take = min(len(ids), remaining // (len(order) - n))
        if take == len(ids):
            chosen.update(ids)
        else:
            chosen.update(ids[j] for j in stratum_rng(seed, key).choice(len(ids), take, replace=False))
        counts[key] = take
        remaining -= take
    table = pd.DataFrame([(key[0], key[1], len(strata[key]), counts[key]) for key in sorted(strata, key=str)],
                         columns=["subset", "level", "available", "selected"])
    table["level"] = table["level"].astype("Int64")
    return [q.id for q in queries if q.id in chosen], table


@dataclass
class InstFolResult:
    """Everything one InstFol computation produced.

    ``instances``: one row per judged instance (qid, group, subset, level, rubric, s_q, s_inst,
    instfol, n_q, n_inst, dropped, failed, parsed: see :class:`ListPairScore`). ``positions``: one row
    per judged list position (qid, list ``query``/``instructed``, rank, docid and
    :data:`~instir.judge.outcomes.JUDGMENT_COLUMNS`). ``selection``: available and selected
    instances per (subset, level). ``meta``: k, seed, max_instances, the selected ids, judge name
    and model, the distinct requests' counts (:func:`~instir.judge.outcomes.judgment_counts`),
    ``weighting``, how each list position was weighted, and ``same_passages``: whether every candidate list holds at
    most k documents, both lists of every instance hold the same ones and no judgment failed (a failed rank is dropped
    from both lists), so InstFol is 0 by construction (:func:`same_passages_note`).
    """

    instances: pd.DataFrame
    positions: pd.DataFrame
    selection: pd.DataFrame
    meta: dict = field(default_factory=dict)

    def summary(self) -> pd.DataFrame:
        """Level, subset and Average rows (:func:`aggregate`)."""
        return aggregate(self.instances)


def _top_lists(run: Run, qids: set[str], k: int) -> dict[str, list[str]]:
    """Document ids of the top ``k`` of every wanted query, in rank order."""
    df = run.df
    df = df[df["qid"].isin(qids) & (df["rank"] <= k)]
    out: dict[str, list[str]] = {}
    for qid, docid in zip(df["qid"].tolist(), df["docid"].tolist()):
        out.setdefault(qid, []).append(docid)
    return out


def instfol(instructed: Run | pd.DataFrame, query_only: Run | pd.DataFrame, benchmark: Benchmark, judge: Judge | str, *,
            k: int = K, max_instances: int | None = None, seed: int = 0) -> InstFolResult:
    """InstFol@k of an instructed run against a query-only run on ``benchmark``.

    Both runs must answer the same instance ids (the query-only run retrieves every instance
    with its bare query). Every passage of both top-k lists is judged against the instance's
    query + instruction on ``rubric_for(subset, level)`` (the generic rubric for InstructIR and
    user benchmarks); identical requests are judged once. Pass a
    :class:`~instir.judge.cache.CachedJudge` to make reruns free and resumable. A passage whose
    id is not in the corpus is a failed judgment. ``max_instances`` judges a stratified, seeded
    sample (:func:`select_instances`). ``judge`` may be a backend name (``"baseline"``: :func:`make_judge`'s).
    """
    k, max_instances = parameters.depth(k), check_max_instances(max_instances)  # before the judge loads
    expect(benchmark, Benchmark, "instfol(instructed, query_only, benchmark, judge)")
    from instir.judge.factory import as_judge

    judge = as_judge(judge)
    instructed, query_only = as_run(instructed), as_run(query_only)
    answered = answered_instances(benchmark, instructed, query_only)
    in_inst, in_q = set(instructed.df["qid"].unique()), set(query_only.df["qid"].unique())
    selected, selection = select_instances(answered, max_instances, seed)
    selection["subset"] = selection["subset"].replace("", benchmark.name)
    unsampled = selection[(selection["selected"] == 0) & (selection["level"].fillna(0) > 0)
                          & selection["subset"].isin(selection.loc[selection["selected"] > 0, "subset"])]
    if len(unsampled):
        levels = ", ".join(f"{subset} level {level}" for subset, level in zip(unsampled["subset"], unsampled["level"]))
        warnings.warn(f"max_instances = {max_instances} leaves {levels} out of the sample: such a subset's InstFol is "
                      "the mean of the levels sampled, not of all its levels as IFIR's Table 3 (give max_instances "
                      f"of at least {len(selection)}, one instance a level)", UnscoredWarning)
    wanted = set(selected)
    lists = {"query": _top_lists(query_only, wanted, k), "instructed": _top_lists(instructed, wanted, k)}
    same = 0 < benchmark.rankable() <= k and all(set(lists["query"].get(q, ())) == set(lists["instructed"].get(q, ()))
                                                 for q in selected)  # S_inst = S_q whatever the judge says …
    runs = (instructed, query_only)
    depths = [ranked_depth(run, run.meta.get("k"), benchmark.queries) for run in runs]
    depth = min(depths)  # a verdict's depth, and the note's: the shallower run's
    if 0 < depth < min(k, benchmark.rankable()):
        shallower = runs[depths.index(depth)]
        shallowest = None if shallower.meta.get("k") else shallowest_query(shallower, benchmark.queries)
        name = "instructed" if shallower is instructed else "query-only"
        warnings.warn(f"the {name} run {ranked_phrase(depth, shallowest, 'passages', 'instance')}, fewer than k = "
                      f"{k}: each list of this InstFol@{k} is averaged over the passages it holds, so S_q and S_inst "
                      f"may average different depths (retrieve both runs at k = {k} for InstFol@{k})",
                      ShallowRunsWarning)
    where, requests = _list_positions(benchmark, selected, lists)
    picked, judgments = judge_each(judge, requests, "document not in the corpus")
    positions = judgment_frame(where, picked)
    instances = _instances(benchmark, selected, positions)
    note = unscored_note(instances)
    if note:
        warnings.warn(note, UnscoredWarning, stacklevel=2)
    above = instances[(instances["s_q"] > INSTFOL_MAX) | (instances["s_inst"] > INSTFOL_MAX)]
    if len(above):
        warnings.warn(f"{len(above)} instance(s) (first {quoted(above['qid'].iloc[0])}) have S_q or S_inst above "
                      f"{INSTFOL_MAX}: the judge scored passages above its rubric's top step, which the official code "
                      f"takes (to {IFIR_MAX_DIGIT}); (S_inst - S_q) / ({INSTFOL_MAX} - S_q) is then no relative gain "
                      "(its sign turns over once S_q passes 3): read those instances' InstFol as the judge's mistake",
                      UserWarning)
    meta = {
        "k": k, "depth": depth, "seed": seed, "max_instances": max_instances, "benchmark": benchmark.name,
        "sample": benchmark.is_sample, "selected": selected,
        "judge": {"name": judge.name, "model": judge.model},
        "instfol_max": INSTFOL_MAX,
        "requests": len(requests), "unique_requests": len(judgments), **judgment_counts(judgments),
        "missing_from_query_only_run": sorted(wanted - in_q),
        "missing_from_instructed_run": sorted(wanted - in_inst),
        "runs": {name: {"path": run.meta.get("path"), "template": (run.meta.get("template") or {}).get("name")}
                 for name, run in (("instructed", instructed), ("query_only", query_only))},
        "weighting": positions["weighting"].value_counts().to_dict(),
        "same_passages": same and not instances["failed"].sum(),  # … unless a failure drops a rank from both lists
    }
    return InstFolResult(instances=instances, positions=positions, selection=selection, meta=meta)


def same_passages_note(benchmarks: Sequence[str], k: int = K) -> str:
    """What an InstFol table says of ``benchmarks`` whose runs' two lists hold the same passages (``same_passages`` in
    :attr:`InstFolResult.meta`, e.g. FollowIR's sample, 6 candidates an instance): its 0 is no finding. Empty for
    none."""
    return (f"InstFol@{k} is 0 by construction on {', '.join(benchmarks)}: every instance's candidate list holds at "
            f"most {k} documents, so both runs rank the same passages (S_inst = S_q)") if benchmarks else ""


def answered_instances(benchmark: Benchmark, instructed: Run, query_only: Run,
                       names: tuple[str, str] = ("instructed", "query_only")) -> list[Query]:
    """The benchmark's instances either run answers; refuses one run given as both (the same object or file:
    InstFol would be 0 by construction), runs whose sidecars say they are swapped (the instructed one's
    ``template`` leaves the instruction out and the query-only one's reads it,
    :func:`~instir.formatting.reads_instruction`: InstFol would come out with its sign flipped; a run without a
    sidecar says nothing), an instructed run that answers none of the benchmark's instances (a run of another
    benchmark) and runs that share no instance, and warns when two runs rank alike
    (:func:`~instir.retrieval.runs.same_rankings`): a copy handed over by mistake, or a system that never sees the
    instruction (a query cut to its first tokens), whose InstFol is truly 0. ``names``: the two runs as the
    refusals name them (the command line's options)."""
    paths = [run.meta.get("path") for run in (instructed, query_only)]
    if instructed is query_only or (None not in paths and Path(paths[0]).resolve() == Path(paths[1]).resolve()):
        raise UsageError(f"the instructed and the query-only run are one run ({paths[0] or 'the same object'}): "
                         "InstFol is the gain of one over the other, 0 by construction here; give the query-only "
                         "run (the bare query's) as the second")
    templates = [run.meta.get("template") for run in (instructed, query_only)]
    if [reads_instruction(template) for template in templates] == [False, True]:
        bare, read = (quoted(str(template.get("name", "?"))) for template in templates)
        raise UsageError(f"{names[0]}'s sidecar records the template {bare} (its \"template\" field), which leaves "
                         f"the instruction out, and {names[1]}'s records {read}, which reads it: the two runs are "
                         f"swapped, and InstFol would come out with its sign flipped; give the instructed run as "
                         f"{names[0]} and the bare query's as {names[1]}")
    refuse_unanswered(instructed, instructed.df["qid"].unique(), benchmark.queries, benchmark.name)
    if same_rankings(instructed, query_only):
        warnings.warn("the instructed and the query-only run rank the same documents with the same scores for every "
                      "query: InstFol is 0 on every instance. If the second is a copy of the first, give the "
                      "query-only run (the bare query's); if the system never sees the instruction (a query cut to its "
                      "first tokens), 0 is its answer", UserWarning, stacklevel=3)
    in_inst, in_q = set(instructed.df["qid"].unique()), set(query_only.df["qid"].unique())
    answered = [q for q in benchmark.queries.values() if q.id in in_inst or q.id in in_q]
    if not any(q.id in in_inst and q.id in in_q for q in answered):
        raise UsageError(f"the instructed and query-only runs share no instance of {benchmark.name}: the query-only "
                         "run must retrieve the same instance ids with the bare query (the query-only template), "
                         "not come from a query-only setting with its own ids")
    return answered


def _list_positions(benchmark: Benchmark, selected: Sequence[str],
                    lists: dict[str, dict[str, list[str]]]) -> tuple[pd.DataFrame, list[JudgeRequest | None]]:
    """Every list position to judge (``qid``, ``list``, ``rank``, ``docid``) and its judge request (None: a document
    not in the corpus)."""
    docs = benchmark.corpus.get({d for per_list in lists.values() for ids in per_list.values() for d in ids})
    where = [(qid, name, rank, docid) for qid in selected for name in _LISTS
             for rank, docid in enumerate(lists[name].get(qid, []), start=1)]
    requests = [None if docs.get(docid) is None else JudgeRequest.for_instance(benchmark.queries[qid], docs[docid])
                for qid, _, _, docid in where]
    return pd.DataFrame(where, columns=["qid", "list", "rank", "docid"]), requests


def _instances(benchmark: Benchmark, selected: Sequence[str], positions: pd.DataFrame) -> pd.DataFrame:
    """One row per selected instance: its two lists' rank-aligned scores (:func:`score_list_pair`)."""
    per_list, weightings = {}, {}
    for (qid, name), part in positions.groupby(["qid", "list"], sort=False):
        part = part.sort_values("rank")
        per_list[qid, name] = [None if pd.isna(w) else float(w) for w in part["weighted"]]
        weightings[qid, name] = [None if pd.isna(w) else w for w in part["weighting"]]
    rows = []
    for qid in selected:
        q = benchmark.queries[qid]
        pair = score_list_pair(per_list.get((qid, "query"), []), per_list.get((qid, "instructed"), []),
                               query_weighting=weightings.get((qid, "query"), []),
                               instructed_weighting=weightings.get((qid, "instructed"), []))
        rows.append({"qid": qid, "group": q.group, "subset": q.subset or benchmark.name, "level": q.level,
                     "rubric": rubric_for(q.subset, q.level).name, "s_q": pair.s_q, "s_inst": pair.s_inst,
                     "instfol": pair.instfol, "n_q": pair.n_q, "n_inst": pair.n_inst, "dropped": pair.dropped,
                     "failed": pair.failed, "parsed": pair.parsed})
    instances = pd.DataFrame(rows, columns=["qid", "group", "subset", "level", "rubric", "s_q", "s_inst",
                                            "instfol", "n_q", "n_inst", "dropped", "failed", "parsed"])
    instances["level"] = instances["level"].astype("Int64")
    return instances


def unscored_note(instances: pd.DataFrame, examples: int = 3) -> str:
    """What :func:`aggregate` of ``instances`` (:attr:`InstFolResult.instances`) lacks, in a few plain sentences;
    empty when every instance has a value, or none has (no figure then to take for a whole one; the front ends say
    that every judgment failed, :func:`~instir.judge.outcomes.require_judged`): how many instances have no InstFol,
    per subset and level with the first ``examples`` ids, the levels left with none (their subset, and the Average,
    then have no value: IFIR's subset value is the mean of all its levels, not of those left), and that failed
    judgments are judged again by a rerun, which the judgment cache makes pay for nothing else."""
    unscored = instances[instances["instfol"].isna()]
    if len(unscored) in (0, len(instances)):
        return ""
    per_level, empty = [], []
    for (subset, level), part in unscored.groupby(["subset", "level"], dropna=False, sort=True):
        where = f"{subset}" if pd.isna(level) or level == 0 else f"{subset} level {level}"
        of = instances[(instances["subset"] == subset) & (instances["level"].isna() if pd.isna(level)
                                                           else instances["level"] == level)]
        ids = ", ".join(quoted(q) for q in part["qid"].head(examples)) + (", …" if len(part) > examples else "")
        per_level.append(f"{where}: {ids}" if len(part) == len(of) else f"{where}: {len(part)} of {len(of)}, {ids}")
        if len(part) == len(of):
            empty.append((where, subset))
    text = (f"{len(unscored)} of {len(instances)} instance(s) have no InstFol ({'; '.join(per_level)}): every rank "
            "of a list failed, or a run lacks them.")
    for where, subset in empty:
        text += (f" {where} has no scored instance, so {'it' if where == subset else subset} has no value"
                 f"{' (nor has the Average)' if instances['subset'].nunique() > 1 else ''}.")
    if unscored["failed"].sum():
        text += (" Their failed judgments are judged again when you run again; the judgment cache keeps every "
                 "success, so nothing else is paid twice.")
    return text


_SUMMARY_COLUMNS = ["scope", "subset", "level", "instfol", "s_q", "s_inst", "instances", "scored", "failed",
                    "dropped", "parsed"]
_COUNTS = ("failed", "dropped", "parsed")


def aggregate(instances: pd.DataFrame) -> pd.DataFrame:
    """Table 3 aggregation of per-instance InstFol (one or several subsets, e.g. concatenated
    :attr:`InstFolResult.instances`).

    Rows with ``scope`` ``level`` (mean over a subset's scored instances of one level),
    ``subset`` (unweighted mean of its level values) and ``average`` (mean over subsets). A level
    without a scored instance has no value, and neither has its subset nor the Average: a mean of
    the levels or subsets left would be another quantity than Table 3's (:func:`unscored_note`
    says what is missing).
    Only rows that say something of their own are made, as the metrics table does: ``level``
    rows for instruction levels 1-3 (a level-0 subset has one instruction per query, and
    InstructIR has no levels, so their subset row is the value) and the ``average`` row when
    there are several subsets. InstructIR thus gets one row, its mean over instances.
    ``instances`` counts judged instances, ``scored`` those with at least one usable position;
    ``failed`` (failed judgments), ``dropped`` (positions left out) and ``parsed`` (averaged
    judgments scored by the parsed integer alone, without log-probability weighting) are summed
    upwards, so every value has its failures and unweighted scores beside it.
    """
    df = instances.copy()
    df["scored"] = df["instfol"].notna()
    sums = {col: (col, "sum") for col in _COUNTS}
    levels = (df.groupby(["subset", "level"], dropna=False, sort=True)
              .agg(instfol=("instfol", "mean"), s_q=("s_q", "mean"), s_inst=("s_inst", "mean"),
                   instances=("qid", "size"), scored=("scored", "sum"), **sums)
              .reset_index().assign(scope="level"))
    subsets = (levels.groupby("subset", sort=True)
               .agg(instfol=("instfol", "mean"), s_q=("s_q", "mean"), s_inst=("s_inst", "mean"),
                    instances=("instances", "sum"), scored=("scored", "sum"), **sums)
               .reset_index().assign(scope="subset", level=pd.NA))
    values = ["instfol", "s_q", "s_inst"]
    gaps = levels[values].isna().groupby(levels["subset"], sort=True).any()  # a level without a value
    subsets[values] = subsets[values].mask(gaps.loc[subsets["subset"]].to_numpy())
    average = pd.DataFrame([{
        "scope": "average", "subset": "average", "level": pd.NA,
        **{col: subsets[col].mean(skipna=False) for col in values},
        **{col: int(subsets[col].sum()) for col in ("instances", "scored", *_COUNTS)},
    }])
    levelled = levels[levels["level"].notna() & (levels["level"] > 0)]
    parts = [levelled, subsets] + ([average] if len(subsets) > 1 else [])
    out = pd.concat([part[_SUMMARY_COLUMNS] for part in parts], ignore_index=True)
    out["level"] = out["level"].astype("Int64")
    for col in ("instances", "scored", *_COUNTS):
        out[col] = out[col].astype("int64")
    return out


def overall(summary: pd.DataFrame, by: Sequence[str] = ("benchmark", "system")) -> pd.DataFrame:
    """The one row that sums up each summary of :func:`aggregate` in ``summary`` (several may be
    concatenated, told apart by the ``by`` columns present): its ``average`` row when it has
    several subsets, else its only ``subset`` row (InstructIR, or one IFIR subset)."""
    keys = [key for key in by if key in summary.columns]
    rank = summary["scope"].map({"average": 0, "subset": 1, "level": 2})
    ordered = summary.assign(_rank=rank).sort_values("_rank", kind="stable")
    top = ordered.drop_duplicates(keys) if keys else ordered.head(1)
    return top.drop(columns="_rank").sort_index()


def printable(summary: pd.DataFrame, digits: int = 1) -> pd.DataFrame:
    """A summary for display: InstFol ×100 as the paper prints it, S values on the 0-3 scale."""
    out = summary.copy()
    out["level"] = out["level"].astype("string").fillna("")
    out["instfol"] = (out["instfol"] * 100).round(digits)
    out[["s_q", "s_inst"]] = out[["s_q", "s_inst"]].round(3)
    return out.rename(columns={"instfol": "InstFol x100"})
