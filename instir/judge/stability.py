"""How much of InstFol is the judge's noise: judge the same stratified sample R times and set
the spread the judge alone causes next to the spread the query sample causes.

InstFol rests on one probability-weighted judgment per passage. A chat API answers the same
prompt differently from call to call (even at temperature 0), so one run of the judge is one
draw. :func:`judge_repeats` calls :func:`instir.judge.following.instfol` once per repeat, each
time through a :class:`~instir.judge.cache.CachedJudge` with its own ``repeat`` (distinct cache
entries; repeat 0 is the ordinary judgment, so an existing cache is reused, and every rerun is
free; the judge stage hands its InstFol over as repeat 0, judged once). :func:`stability` then
reports, per level, subset and Average (:func:`instir.judge.following.aggregate` rows):

- **judge spread** (instances fixed, judge redrawn): a bootstrap over repeats. Each draw takes,
  for every instance independently, the InstFol of one repeat picked at random and aggregates
  them: the distribution of a single run's value when only the judge's answers change. The
  R values of an instance are first spread by sqrt(R / (R - 1)) around their mean, so the draw's
  variance is the unbiased estimate from R repeats (a plain resample of R values understates it
  by (R - 1) / R, a third at R = 3).
- **query-sample spread** (judge averaged over repeats, instances redrawn): a bootstrap over
  instances, resampled with replacement within each (subset, level) stratum, as the sample
  was drawn (:func:`~instir.judge.following.select_instances`).

Both give mean, standard deviation and 95% percentile interval; ``dominant`` names the larger
standard deviation. A deterministic judge (:func:`deterministic_note`) has a judge spread of
exactly zero, which says nothing about an API's noise.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from instir.benchmarks.types import Benchmark
from instir.judge.cache import CachedJudge
from instir.judge.following import InstFolResult, K, aggregate, instfol
from instir.parameters import count_within
from instir.progress import tqdm
from instir.retrieval.runs import Run

#: Bootstrap draws per spread.
N_BOOT = 1000
#: The most repeats a sample is judged: 100 resolve the judge's spread far past the query sample's; each
#: more is another judgment of every instance (paid, with an API), and even a judge judged once (its copies)
#: holds every repeat's rows in memory.
MAX_REPEATS = 100

_KEYS = ["scope", "subset", "level"]

STABILITY_COLUMNS = [
    "scope", "subset", "level", "instances", "repeats", "judged_repeats", "instfol",
    "judge_mean", "judge_sd", "judge_low", "judge_high",
    "sample_mean", "sample_sd", "sample_low", "sample_high",
    "identical_repeats", "dominant",
]


def check_repeats(repeats: object) -> int:
    """``repeats`` when it is a whole number from 1 to :data:`MAX_REPEATS`, else a :class:`UsageError`."""
    return count_within(repeats, 1, MAX_REPEATS, "repeats")


def judge_repeats(instructed: Run | pd.DataFrame, query_only: Run | pd.DataFrame, benchmark: Benchmark,
                  judge: CachedJudge, repeats: int, *, k: int = K, max_instances: int | None = None,
                  seed: int = 0, first: InstFolResult | None = None) -> pd.DataFrame:
    """Per-instance InstFol of ``repeats`` independent judgments of the same sample.

    Repeat r judges through ``judge.with_repeat(r)`` (its own cache entries); every repeat
    sees the same instances (same ``max_instances`` and ``seed``). ``first``: this sample's
    InstFol judged already through ``judge`` (the judge stage's), which is repeat 0 (request
    counts with ``from_instfol``): judging it again would send its failed judgments twice and
    make repeat 0 another judgment than that InstFol. A ``judge.deterministic``
    backend is judged once: its repeats r > 0 are repeat 0's values (``judged`` false; request
    counts with ``copied_from`` 0). Returns :attr:`InstFolResult.instances
    <instir.judge.following.InstFolResult>` of every repeat with ``repeat`` and ``judged``
    columns, and each repeat's request counts in ``attrs["meta"]``. ``judge`` is a
    :class:`~instir.judge.cache.CachedJudge` or anything with its ``with_repeat`` and
    ``deterministic`` (the sweep's :class:`~instir.distributed.judge.RemoteJudge`).
    """
    check_repeats(repeats)
    frames, metas = [], []
    fixed = judge.deterministic
    for r in tqdm(range(repeats), desc="judge repeats", disable=repeats < 2 or fixed):
        if fixed and r > 0:
            frames.append(frames[0].assign(repeat=r, judged=False))
            metas.append({**metas[0], "repeat": r, "judged": 0, "from_cache": 0, "cost": None, "copied_from": 0})
            continue
        reused = r == 0 and first is not None
        result = first if reused else instfol(instructed, query_only, benchmark, judge.with_repeat(r), k=k,
                                              max_instances=max_instances, seed=seed)
        frames.append(result.instances.assign(repeat=r, judged=True))
        metas.append({"repeat": r, **{key: result.meta[key] for key in (
            "unique_requests", "judged", "from_cache", "failed_judgments", "cost")},
                      **({"from_instfol": True} if reused else {})})
    out = pd.concat(frames, ignore_index=True)
    out.attrs["meta"] = metas
    return out


_SEP = "\x1f"


def _aggregate_draws(draws: pd.DataFrame, n_draws: int) -> pd.DataFrame:
    """:func:`aggregate` of many bootstrap draws in one call: each draw's subsets are renamed
    ``<draw><SEP><subset>`` so its level and subset rows come out separately; a draw's Average is
    the mean of its subset rows, none when one has none (aggregate's own rule; its pooled average row is dropped).
    Returns one column per draw, indexed by (scope, subset, level)."""
    summary = aggregate(draws)
    summary = summary[summary["scope"] != "average"]
    parts = summary["subset"].str.partition(_SEP)
    summary = summary.assign(draw=parts[0].astype(int), subset=parts[2])
    subsets = summary[summary["scope"] == "subset"]
    gaps = subsets["instfol"].isna().groupby(subsets["draw"]).any()
    average = (subsets.groupby("draw")["instfol"].mean().mask(gaps).reset_index()
               .assign(scope="average", subset="average", level=pd.NA))
    rows = pd.concat([summary[["draw", "scope", "subset", "level", "instfol"]], average], ignore_index=True)
    rows["level"] = rows["level"].astype("string").fillna("")
    return rows.pivot_table(index=["scope", "subset", "level"], columns="draw", values="instfol", dropna=False,
                            aggfunc="first").reindex(columns=range(n_draws))


def _spread(draws: pd.DataFrame, prefix: str) -> pd.DataFrame:
    """Mean, sd and 95% percentile interval of bootstrap draws (one column per draw)."""
    return pd.DataFrame({f"{prefix}_mean": draws.mean(axis=1), f"{prefix}_sd": draws.std(axis=1, ddof=1),
                         f"{prefix}_low": draws.quantile(0.025, axis=1),
                         f"{prefix}_high": draws.quantile(0.975, axis=1)})


def _stacked(base: pd.DataFrame, values: np.ndarray, rows: np.ndarray) -> pd.DataFrame:
    """Draws as one frame for :func:`_aggregate_draws`: ``values`` (draws x picked rows) of the
    ``base`` rows ``rows`` (draws x picked rows)."""
    n_draws, width = rows.shape
    picked = base.iloc[rows.ravel()]
    draw = np.repeat(np.arange(n_draws), width).astype(str)
    return picked.assign(instfol=values.ravel(), subset=np.char.add(np.char.add(draw, _SEP),
                                                                     picked["subset"].astype(str).to_numpy()),
                         qid=np.arange(len(picked)))


def stability(instances: pd.DataFrame, *, n_boot: int = N_BOOT, seed: int = 0) -> pd.DataFrame:
    """Judge spread and query-sample spread of InstFol per level, subset and Average.

    ``instances``: :func:`judge_repeats` output (one system; per-instance InstFol with a
    ``repeat`` column). ``instfol`` is the value of the per-instance means over repeats;
    ``judge_*`` and ``sample_*`` summarise the two bootstraps (module docstring);
    ``identical_repeats`` is true where every repeat gave every instance the same value (the
    judge spread is then exactly 0, not an estimate), ``judged_repeats`` counts the repeats
    really judged (:func:`judge_repeats`), and ``dominant`` is ``judge``, ``query sample`` or
    ``neither`` (both zero). With one repeat the judge spread is unknown (NaN), with one instance in every
    (subset, level) stratum the query-sample spread (NaN), and ``dominant`` is empty.
    """
    repeats = int(instances["repeat"].nunique())
    keys = ["subset", "qid"]  # ids are unique within a subset (several IFIR subsets may be pooled)
    wide = instances.set_index([*keys, "repeat"])["instfol"].unstack("repeat")
    judged = (instances.groupby("repeat")["judged"].all().sum() if "judged" in instances else repeats)
    base = (instances[instances["repeat"] == instances["repeat"].min()]
            .drop(columns=["repeat", "judged"], errors="ignore").set_index(keys).loc[wide.index].reset_index())
    values = wide.to_numpy(dtype=float)
    means = wide.mean(axis=1).to_numpy(dtype=float)  # NaN-skipping; NaN where no repeat scored the instance
    point = aggregate(base.assign(instfol=means))
    index = pd.MultiIndex.from_frame(point[_KEYS].astype({"level": "string"}).fillna({"level": ""}))
    out = point[["scope", "subset", "level", "instances", "instfol"]].set_index(index)
    out["repeats"] = repeats
    out["judged_repeats"] = int(judged)
    rng = np.random.default_rng(seed)
    n = len(base)

    same = bool(np.all((values == values[:, :1]) | (np.isnan(values) & np.isnan(values[:, :1]))))
    if repeats > 1 and same:  # a deterministic judge: no estimate, the spread is exactly zero
        out = out.assign(judge_mean=out["instfol"], judge_sd=0.0, judge_low=out["instfol"], judge_high=out["instfol"])
    elif repeats > 1:
        spread = means[:, None] + np.sqrt(repeats / (repeats - 1)) * (values - means[:, None])
        pick = rng.integers(0, repeats, (n_boot, n))
        rows = np.broadcast_to(np.arange(n), (n_boot, n))
        out = out.join(_spread(_aggregate_draws(_stacked(base, spread[rows, pick], rows), n_boot), "judge"))
    else:
        out = out.assign(judge_mean=np.nan, judge_sd=np.nan, judge_low=np.nan, judge_high=np.nan)

    codes = base.groupby(["subset", "level"], dropna=False, sort=False).ngroup().to_numpy()
    strata = [np.flatnonzero(codes == code) for code in np.unique(codes)]
    rows = np.concatenate([idx[rng.integers(0, len(idx), (n_boot, len(idx)))] for idx in strata], axis=1)
    out = out.join(_spread(_aggregate_draws(_stacked(base, means[rows], rows), n_boot), "sample"))
    if strata and max(len(idx) for idx in strata) < 2:  # one instance a stratum: each draw is the sample, no spread
        out[["sample_mean", "sample_sd", "sample_low", "sample_high"]] = np.nan

    out["identical_repeats"] = same if repeats > 1 else pd.NA
    out["dominant"] = [_dominant(j, s) for j, s in zip(out["judge_sd"], out["sample_sd"])]
    out = out.reset_index(drop=True)[STABILITY_COLUMNS]
    out["level"] = out["level"].astype("Int64")
    out["identical_repeats"] = out["identical_repeats"].astype("boolean")
    return out


def _dominant(judge_sd: float, sample_sd: float) -> str:
    if pd.isna(judge_sd) or pd.isna(sample_sd):
        return ""
    if judge_sd < 1e-12 and sample_sd < 1e-12:  # bootstrap draws of one value: 0 but for rounding
        return "neither"
    return "judge" if judge_sd > sample_sd else "query sample"


def deterministic_note(repeats: int) -> str:
    """What the judge spread of a deterministic judge (``CachedJudge.deterministic``) is, said
    once for every system it judged ``repeats`` times."""
    return (f"This judge is deterministic (the in-process and baseline judges always are): it was judged once and "
            f"that judgment stands for all {repeats} repeats, as judging again could only repeat it. Its spread is "
            "exactly 0 by construction and says nothing about an API judge's noise.")


def deterministic_once_note() -> str:
    """What the spread of a deterministic judge judged once is: 0 by construction, so no repeat is missing (the
    verdict on one repeat, ``judge again with more repeats``, is for a judge that varies)."""
    return ("This judge is deterministic (the in-process and baseline judges always are): its spread is exactly 0 by "
            "construction, so more repeats would only repeat its judgments, and it says nothing about an API judge's "
            "noise.")


def verdict(table: pd.DataFrame) -> str:
    """One plain sentence on which spread dominates the Average, or the only subset's value (or
    why that is unknown). A deterministic backend's repeats are not judged again; its verdict
    leaves that to :func:`deterministic_note`."""
    top = table[table["scope"] == "average"]
    avg = (top if len(top) else table[table["scope"] == "subset"]).iloc[0]  # one subset: no Average row
    what = "Average InstFol" if len(top) else f"InstFol of {avg['subset']}"
    if avg["repeats"] < 2:
        return ("One repeat per judgment: the judge's own spread is unknown. Judge again with more repeats "
                "(instir judge --repeats R) to measure it.")
    judge = f"judge sd {avg['judge_sd'] * 100:.2f}"
    sample = f"query-sample sd {avg['sample_sd'] * 100:.2f}"
    lead = ""
    if bool(avg["identical_repeats"]) and avg.get("judged_repeats", avg["repeats"]) == avg["repeats"]:
        lead = (f"All {int(avg['repeats'])} repeats gave identical judgments: this judge is deterministic, so its "
                "spread is exactly 0 and says nothing about an API judge's noise. ")
    if pd.isna(avg["sample_sd"]):
        return (lead + f"{what} x100: {judge}; the query-sample spread is unknown: every subset and level holds "
                "one instance (raise judge_max_instances to measure it).")
    if avg["dominant"] == "neither":
        return lead + f"{what} x100: {judge}, {sample}; neither varies."
    return (lead + f"{what} x100: {judge}, {sample} over {int(avg['instances'])} instances: "
            f"the {avg['dominant']} dominates.")


def tolerance_widening(table: pd.DataFrame) -> pd.DataFrame:
    """Rows for :func:`instir.papers.compare_to_papers`'s ``widen``: the half-width of the judge's
    95% interval per level, subset and Average (unit scale), keyed by ``system``, ``benchmark``,
    ``subset``, ``level`` and ``measure`` (``InstFol@20``). ``table`` is one or several
    :func:`stability` tables with ``system`` and ``benchmark`` columns; rows without a judge
    spread (one repeat) are left out."""
    rows = table[table["judge_sd"].notna()].copy()
    rows["widen"] = (rows["judge_high"] - rows["judge_low"]) / 2
    rows["measure"] = "InstFol@20"
    return rows[["system", "benchmark", "subset", "level", "measure", "widen"]].reset_index(drop=True)
