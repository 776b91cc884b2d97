"""Comparing systems against a baseline, per measure, on paired per-query (or per-group)
values — in the spirit of PyTerrier's ``pt.Experiment`` and ranx's ``compare`` (what is computed:
docs/metrics.md; scipy's ``ttest_rel``, ``permutation_test`` and BCa ``bootstrap``, fixed seeds).
Degenerate samples, where scipy returns NaN or warns (differences equal within
:data:`TOLERANCE`): every difference 0 → p = 1 and a CI of [0, 0]; the same non-zero difference
d everywhere → t = ±inf, t-test p = 0, CI [d, d]. scipy is imported by the tests themselves, so
scoring a single run never loads it.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from instir.errors import UsageError
from instir.parameters import count_within
from instir.progress import tqdm

#: Resamples for the permutation test and the bootstrap (p-values resolve to 1/2001), and the
#: batch size that bounds their memory.
N_RESAMPLES = 2_000
#: The kit's one significance level: a Holm-corrected p at most this is significant, against a baseline
#: (:func:`paired_tests`) and between every two systems (:func:`instir.metrics.latex.pairwise_tests`); ranx's
#: ``compare`` default (``max_p=0.01``).
SIGNIFICANCE_LEVEL = 0.01
#: The most resamples a test draws: p-values then resolve to 1/100,001, far finer than any level tested;
#: more only take longer (10^9 would take about 3 hours per comparison: 100,000 took 1.15 s on 86 queries).
MAX_RESAMPLES = 100_000
#: The fewest: a p-value then resolves to 1/100 (the usual least for a Monte Carlo test at the 5 % level).
MIN_RESAMPLES = 99
_BATCH = 200
#: Differences within this of each other count as equal (float noise, e.g. (x + c) - x).
TOLERANCE = 1e-12


def check_resamples(n_resamples: object) -> int:
    """``n_resamples`` when it is a whole number from :data:`MIN_RESAMPLES` to :data:`MAX_RESAMPLES`, else a
    :class:`UsageError` (one resample gave a "confidence interval" of one point and a p-value of 0.5 or 1)."""
    return count_within(n_resamples, MIN_RESAMPLES, MAX_RESAMPLES, "resamples")


def holm(pvalues: Sequence[float]) -> np.ndarray:
    """Holm–Bonferroni adjusted p-values, in the input order: the i-th smallest of m is
    multiplied by (m − i + 1), made monotone non-decreasing, capped at 1. NaNs stay NaN
    and do not count towards m."""
    p = np.asarray(pvalues, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    m = len(ok)
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    scaled = p[order] * (m - np.arange(m))
    out[order] = np.minimum(np.maximum.accumulate(scaled), 1.0)
    return out


def paired_ttest(system: np.ndarray, baseline: np.ndarray) -> tuple[float, float]:
    """The two-sided paired t-test of ``system`` against ``baseline``: ``(t, p)``, with the
    module's rules for degenerate samples (every difference 0: t = 0, p = 1; one non-zero
    difference d everywhere: t = ±inf, p = 0), where scipy returns NaN."""
    from scipy import stats

    x, y = np.asarray(system, dtype=float), np.asarray(baseline, dtype=float)
    d = x - y
    if np.abs(d).max() <= TOLERANCE:
        return 0.0, 1.0
    if np.ptp(d) <= TOLERANCE:
        return float(np.copysign(np.inf, d.mean())), 0.0
    test = stats.ttest_rel(x, y)
    return float(test.statistic), float(test.pvalue)


def paired_permutation_p(system: np.ndarray, baseline: np.ndarray, *, n_resamples: int = N_RESAMPLES,
                         seed: int = 0) -> float:
    """The two-sided p-value of the paired permutation (randomisation) test: the signs of the
    per-unit differences flipped at random (``n_resamples`` times, fixed ``seed``); 1 when every
    difference is 0."""
    from scipy import stats

    d = np.asarray(system, dtype=float) - np.asarray(baseline, dtype=float)
    if np.abs(d).max() <= TOLERANCE:
        return 1.0
    # one paired sample of differences: "samples" permutations flip the signs of the differences
    perm = stats.permutation_test((d,), np.mean, permutation_type="samples", vectorized=True, batch=_BATCH,
                                  n_resamples=check_resamples(n_resamples), rng=np.random.default_rng(seed))
    return float(perm.pvalue)


def paired_values(per_unit: pd.DataFrame, measure: str, systems: Sequence[str], unit: str = "qid") -> pd.DataFrame:
    """The values of ``measure`` in ``per_unit``, a row per unit and a column per system of
    ``systems``; a :class:`UsageError` (a ``ValueError``) when a system has none or they are not scored on the
    same units (under MTEB's protocol a run is averaged over the queries it answers, so two runs that answer
    different queries cannot be paired)."""
    wide = per_unit[per_unit["measure"] == measure].pivot(index=unit, columns="system", values="value")
    absent = [s for s in systems if s not in wide.columns]
    if absent:
        raise UsageError(f"{measure}: no values for systems {absent}")
    wide = wide[list(systems)]
    gaps = wide.isna().any(axis=1)
    if gaps.any():
        raise UsageError(f"{measure}: systems are not scored on the same {unit}s (e.g. {list(wide.index[gaps][:3])}), "
                         "so they cannot be compared unit by unit; under MTEB's protocol a run counts only the "
                         "queries it answers: give runs that answer the same queries, or score with the authors' "
                         "protocol, where a missing query scores 0")
    return wide


def paired_comparison(system: np.ndarray, baseline: np.ndarray, *, n_resamples: int = N_RESAMPLES,
                      seed: int = 0, confidence: float = 0.95) -> dict[str, float]:
    """Paired statistics of ``system`` against ``baseline`` (same units, same order); ``n_resamples`` checked
    (:func:`check_resamples`) whether or not the two differ."""
    from scipy import stats

    check_resamples(n_resamples)
    x, y = np.asarray(system, dtype=float), np.asarray(baseline, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or len(x) < 2:
        raise ValueError("paired comparison needs two 1-d arrays of the same length (at least 2)")
    d = x - y
    out = {
        "n": len(x), "mean": x.mean(), "baseline_mean": y.mean(), "diff": d.mean(),
        "better": int((d > TOLERANCE).sum()), "worse": int((d < -TOLERANCE).sum()),
        "equal": int((np.abs(d) <= TOLERANCE).sum()),
    }
    if np.abs(d).max() <= TOLERANCE:
        return {**out, "t": 0.0, "p_ttest": 1.0, "p_perm": 1.0, "ci_low": 0.0, "ci_high": 0.0}
    p_perm = paired_permutation_p(x, y, n_resamples=n_resamples, seed=seed)
    t, p_t = paired_ttest(x, y)
    if np.ptp(d) <= TOLERANCE:  # a constant difference: every resampled mean equals it
        low = high = float(d.mean())
    else:
        # resampling units with both of their values = resampling the differences (half the work)
        ci = stats.bootstrap((d,), np.mean, vectorized=True, n_resamples=check_resamples(n_resamples), batch=_BATCH,
                             confidence_level=confidence, rng=np.random.default_rng(seed)).confidence_interval
        low, high = float(ci.low), float(ci.high)
    return {**out, "t": t, "p_ttest": p_t, "p_perm": p_perm, "ci_low": low, "ci_high": high}


def paired_tests(per_unit: pd.DataFrame, baseline: str, *, unit: str = "qid", measures: Sequence[str] | None = None,
            n_resamples: int = N_RESAMPLES, seed: int = 0, alpha: float = SIGNIFICANCE_LEVEL,
            test: str = "ttest") -> pd.DataFrame:
    """Every system of ``per_unit`` (columns ``system``, ``unit``, ``measure``, ``value``)
    against ``baseline``, per measure. One row per measure × system with the columns of
    :func:`paired_comparison`, ``p_ttest_holm``, ``p_perm_holm`` (Holm across the systems of
    that measure) and ``significant`` (the Holm-corrected p of ``test`` — ``ttest`` as in
    pt.Experiment, or ``perm`` — at most ``alpha``, the rule of the pairs' letters). Every system must have a value
    for the same units as the baseline."""
    if test not in ("ttest", "perm"):
        raise ValueError(f"test must be 'ttest' or 'perm', got {test!r}")
    check_resamples(n_resamples)  # also where no system differs from the baseline and nothing is resampled
    needed = {"system", unit, "measure", "value"}
    if not isinstance(per_unit, pd.DataFrame) or not needed <= set(per_unit.columns):
        raise UsageError(f"paired_tests takes per-{unit} scores (columns system, {unit}, measure, value: "
                         "evaluate_runs(runs, benchmark).per_query), not runs; got "
                         + (f"columns {', '.join(map(str, per_unit.columns))}" if isinstance(per_unit, pd.DataFrame)
                            else type(per_unit).__name__))
    systems = per_unit["system"].unique().tolist()
    if baseline not in systems:
        raise ValueError(f"baseline {baseline!r} is not among the systems {systems}")
    others = [s for s in systems if s != baseline]
    measures = list(measures) if measures is not None else per_unit["measure"].unique().tolist()
    rows = []
    with tqdm(total=len(measures) * len(others), desc="significance tests",
              disable=len(others) * len(measures) < 4) as bar:
        for measure in measures:
            wide = paired_values(per_unit, measure, [baseline, *others], unit)
            for system in others:
                res = paired_comparison(wide[system].to_numpy(), wide[baseline].to_numpy(),
                                        n_resamples=n_resamples, seed=seed)
                rows.append({"measure": measure, "system": system, "baseline": baseline, **res})
                bar.update()
    columns = ["measure", "system", "baseline", "n", "mean", "baseline_mean", "diff", "ci_low", "ci_high",
               "better", "worse", "equal", "t", "p_ttest", "p_perm"]
    out = pd.DataFrame(rows, columns=columns)
    for p in ("p_ttest", "p_perm"):
        out[f"{p}_holm"] = out.groupby("measure", sort=False)[p].transform(lambda s: holm(s.to_numpy()))
    out["significant"] = out[f"p_{test}_holm"] <= alpha
    return out
