"""Comparisons against a baseline: tests and CIs against independent computations."""

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats as sps

from instir.metrics.stats import holm, paired_comparison, paired_tests

X = np.array([0.61, 0.42, 0.90, 0.33, 0.75, 0.58, 0.47, 0.81])
Y = np.array([0.55, 0.40, 0.70, 0.35, 0.60, 0.58, 0.41, 0.62])


def test_paired_t_test_matches_the_textbook_formula():
    d = X - Y
    t = d.mean() / (d.std(ddof=1) / np.sqrt(len(d)))
    res = paired_comparison(X, Y, n_resamples=999)
    assert res["t"] == pytest.approx(t)
    assert res["p_ttest"] == pytest.approx(2 * sps.t.sf(abs(t), len(d) - 1))
    assert res["p_ttest"] == pytest.approx(sps.ttest_rel(X, Y).pvalue)


def test_permutation_test_is_exact_on_small_samples():
    # 2^8 = 256 sign flips < n_resamples: scipy enumerates them all; so do we, by hand
    d = X - Y
    flips = np.array(list(itertools.product([1, -1], repeat=len(d))))
    null = (flips * d).mean(axis=1)
    expected = np.mean(np.abs(null) >= abs(d.mean()) - 1e-12)
    assert paired_comparison(X, Y, n_resamples=999)["p_perm"] == pytest.approx(expected)


def test_counts_means_and_differences():
    res = paired_comparison(X, Y, n_resamples=999)
    assert (res["better"], res["worse"], res["equal"], res["n"]) == (6, 1, 1, 8)
    assert res["mean"] == pytest.approx(X.mean()) and res["baseline_mean"] == pytest.approx(Y.mean())
    assert res["diff"] == pytest.approx((X - Y).mean())
    assert res["ci_low"] < res["diff"] < res["ci_high"]


def test_results_are_reproducible_with_the_same_seed():
    assert paired_comparison(X, Y, n_resamples=500, seed=3) == paired_comparison(X, Y, n_resamples=500, seed=3)


def test_identical_systems_get_p_one_and_a_zero_interval():
    res = paired_comparison(X, X, n_resamples=99)
    assert (res["p_ttest"], res["p_perm"], res["ci_low"], res["ci_high"]) == (1.0, 1.0, 0.0, 0.0)


def test_a_constant_difference_is_certain_for_the_t_test_and_the_interval():
    res = paired_comparison(X + 0.25, X, n_resamples=999)  # > 2^8: the exact test
    assert (res["t"], res["p_ttest"]) == (np.inf, 0.0)
    assert (res["ci_low"], res["ci_high"]) == pytest.approx((0.25, 0.25))
    assert res["p_perm"] == pytest.approx(2 / 2 ** len(X))  # only the all-plus and all-minus flips


def test_a_constant_loss_is_certain_with_a_negative_t():
    # the system is 0.25 below the baseline on every query: t = -inf (the sign of the mean difference), p = 0
    res = paired_comparison(X, X + 0.25, n_resamples=999)
    assert (res["t"], res["p_ttest"]) == (-np.inf, 0.0)
    assert (res["worse"], res["better"]) == (len(X), 0)


def test_float_noise_differences_count_as_equal_so_the_counts_add_up_to_n():
    # 0.1 + 0.2 - 0.3 is 5.6e-17 and 0.3 - (0.1 + 0.2) is -5.6e-17, not 0: both queries are ties
    res = paired_comparison(np.array([0.1 + 0.2, 0.3, 0.5, 0.7]), np.array([0.3, 0.1 + 0.2, 0.4, 0.7]),
                            n_resamples=99)
    assert (res["better"], res["worse"], res["equal"]) == (1, 0, 3)


def test_a_comparison_on_one_query_is_refused():
    # one paired value has no variance: a t of +-inf and p = 0 would call one query's difference certain
    with pytest.raises(ValueError, match="at least 2"):
        paired_comparison(np.array([0.5]), np.array([0.25]), n_resamples=99)


def test_the_permutation_p_value_is_scipys_sign_flip_test_with_seed_0():
    # 20 units: 2^20 sign flips > 999 resamples, so the p-value is scipy's Monte Carlo one under the fixed seed 0
    rng = np.random.default_rng(5)
    x, y = rng.random(20), rng.random(20)
    expected = sps.permutation_test((x - y,), np.mean, permutation_type="samples", vectorized=True, n_resamples=999,
                                    rng=np.random.default_rng(0)).pvalue
    assert paired_comparison(x, y, n_resamples=999)["p_perm"] == pytest.approx(expected)


def test_an_exactly_constant_difference_gets_its_value_as_the_interval_without_a_warning():
    # every difference is exactly 0.25 (binary fractions): every resampled mean is 0.25, so the interval is [0.25, 0.25]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = paired_comparison(np.array([0.75, 0.5, 0.25, 1.0]), np.array([0.5, 0.25, 0.0, 0.75]), n_resamples=99)
    assert (res["ci_low"], res["ci_high"]) == (0.25, 0.25)


def test_bootstrap_interval_is_scipys_95_percent_bca_interval_of_the_differences():
    """The interval scipy.stats.bootstrap gives, called directly: BCa (its default), 95 %, the same seed."""
    ci = sps.bootstrap((X - Y,), np.mean, vectorized=True, n_resamples=999, confidence_level=0.95, method="BCa",
                       rng=np.random.default_rng(0)).confidence_interval
    res = paired_comparison(X, Y, n_resamples=999, seed=0)
    assert (res["ci_low"], res["ci_high"]) == pytest.approx((ci.low, ci.high), abs=1e-12)


def test_bootstrap_interval_covers_the_true_mean_difference_about_95_percent():
    rng = np.random.default_rng(11)
    hits = 0
    trials = 60
    for i in range(trials):
        base = rng.uniform(0, 1, 40)
        system = base + rng.normal(0.05, 0.2, 40)  # true mean difference 0.05
        res = paired_comparison(system, base, n_resamples=600, seed=i)
        hits += res["ci_low"] <= 0.05 <= res["ci_high"]
    assert 0.85 <= hits / trials <= 1.0


def test_holm_hand_worked():
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> monotone 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])


def test_holm_caps_at_one_and_skips_nan():
    out = holm([0.5, float("nan"), 0.2])
    assert out[0] == pytest.approx(0.5) and np.isnan(out[1]) and out[2] == pytest.approx(0.4)
    # 0.8 * 2 = 1.6 -> 1; 0.9 * 1 = 0.9, raised to the running maximum -> 1
    assert holm([0.9, 0.8]) == pytest.approx([1.0, 1.0])
    assert holm([]).size == 0


def _long(systems: dict[str, np.ndarray], measure: str = "nDCG@10") -> pd.DataFrame:
    return pd.concat([pd.DataFrame({"system": s, "qid": [f"q{i}" for i in range(len(v))], "measure": measure,
                                    "value": v}) for s, v in systems.items()], ignore_index=True)


def test_compare_applies_holm_across_the_systems_of_a_measure():
    rng = np.random.default_rng(0)
    base = rng.uniform(0, 1, 30)
    better = base + 0.2 + rng.normal(0, 0.01, 30)
    frame = _long({"base": base, "better": better, "same": base + rng.normal(0, 0.05, 30)})
    out = paired_tests(frame, "base", n_resamples=999).set_index("system")
    assert list(out.index) == ["better", "same"]
    assert out.loc["better", "significant"] and out.loc["better", "better"] == 30
    raw = out["p_ttest"].to_numpy()
    assert out["p_ttest_holm"].to_numpy() == pytest.approx(holm(raw))
    assert out.loc["better", "diff"] == pytest.approx((better - base).mean())


def test_significant_reads_the_holm_corrected_p_not_the_raw_one():
    i = np.arange(20)
    base = np.round(np.linspace(0.1, 0.9, 20), 3)
    a = np.round(base + 0.04 + 0.09 * np.sin(1.7 * i), 3)
    b = np.round(base + 0.1 * np.cos(2.3 * i), 3)
    p_a, p_b = sps.ttest_rel(a, base).pvalue, sps.ttest_rel(b, base).pvalue
    # Holm by hand: a's p (the smaller of two) doubled, b's kept: a is significant raw, not after Holm
    assert p_a <= 0.01 < 2 * p_a < p_b
    out = paired_tests(_long({"base": base, "a": a, "b": b}), "base", n_resamples=999).set_index("system")
    assert out.loc["a", "p_ttest"] == pytest.approx(p_a)
    assert out.loc["a", "p_ttest_holm"] == pytest.approx(2 * p_a)
    assert not out.loc["a", "significant"]
    assert (out["significant"] == (out["p_ttest_holm"] <= 0.01)).all()


def test_holm_corrects_across_the_systems_of_one_measure_not_across_measures():
    # one system per measure: Holm over one p-value leaves it as it is (scipy's ttest_rel p)
    frame = pd.concat([_long({"base": Y, "s": X}, "m1"), _long({"base": Y, "s": X + 0.001}, "m2")], ignore_index=True)
    out = paired_tests(frame, "base", n_resamples=999).set_index("measure")
    assert out.loc["m1", "p_ttest_holm"] == pytest.approx(sps.ttest_rel(X, Y).pvalue)
    assert out.loc["m2", "p_ttest_holm"] == pytest.approx(sps.ttest_rel(X + 0.001, Y).pvalue)
    assert (out["p_ttest_holm"] == out["p_ttest"]).all() and (out["p_perm_holm"] == out["p_perm"]).all()


def test_compare_works_on_group_units_and_refuses_unpaired_data():
    frame = _long({"a": X, "b": Y}).rename(columns={"qid": "group"})
    assert paired_tests(frame, "a", unit="group", n_resamples=99)["n"].iloc[0] == 8
    broken = frame[~((frame["system"] == "b") & (frame["group"] == "q0"))]
    with pytest.raises(ValueError, match="same groups"):
        paired_tests(broken, "a", unit="group", n_resamples=99)
    with pytest.raises(ValueError, match="baseline"):
        paired_tests(frame, "zzz", unit="group")


@pytest.mark.parametrize("n", [0, -1, 1, 98, 10**9, 2.5, True, "2000"])
def test_a_resample_count_out_of_bounds_is_one_line_not_hours_of_resampling(n, capsys, tmp_path):
    # instir evaluate --resamples 1000000000 sat at "significance tests 0/4" for hours; later, --resamples 1 printed
    # a one-point "confidence interval"
    from instir.cli import main
    from instir.errors import UsageError

    with pytest.raises(UsageError, match=r"resamples must be a whole number from 99 to 100,000, got"):
        paired_comparison(np.arange(6.0), np.zeros(6), n_resamples=n)
    if isinstance(n, int) and not isinstance(n, bool) and n > 0:
        assert main(["evaluate", "--benchmark", "instructir-sample", "--run", str(tmp_path / "none.trec"),
                     "--resamples", str(n)]) == 2  # refused before the run is read
        said = capsys.readouterr().err
        assert said == f"instir evaluate: resamples must be a whole number from 99 to 100,000, got {n}\n"


def test_a_holm_corrected_p_equal_to_alpha_is_significant():
    # a constant difference over 8 units: the exact sign-flip test's p is 2/2^8 (the all-plus and all-minus flips);
    # one system, so Holm leaves it; at alpha = 2/2^8 exactly it is significant ("at most alpha")
    per_unit = pd.DataFrame([(s, f"q{i}", "nDCG@10", v + (0.25 if s == "b" else 0.0))
                             for s in ("a", "b") for i, v in enumerate(X)],
                            columns=["system", "qid", "measure", "value"])
    row = paired_tests(per_unit, "a", n_resamples=999, alpha=2 / 2 ** 8, test="perm").iloc[0]
    assert row["p_perm_holm"] == 2 / 2 ** 8 and bool(row["significant"])


def test_the_default_is_2000_resamples_as_docs_metrics_md_says():
    rng = np.random.default_rng(7)
    x, y = rng.random(30), rng.random(30)
    default = paired_comparison(x, y)
    assert default == paired_comparison(x, y, n_resamples=2000)
    assert default != paired_comparison(x, y, n_resamples=1000)


@pytest.mark.parametrize("n", [0, 98, 100_001, True])
def test_a_resample_count_out_of_bounds_is_refused_also_where_no_system_differs(n):
    # on main: two equal systems returned at once, before the count was looked at: the same call passed or failed
    # with the data
    from instir.errors import UsageError

    with pytest.raises(UsageError, match=r"resamples must be a whole number from 99 to 100,000, got"):
        paired_comparison(np.zeros(6), np.zeros(6), n_resamples=n)
    per_unit = pd.DataFrame({"system": ["a"] * 3, "qid": ["1", "2", "3"], "measure": ["m"] * 3, "value": [0.1] * 3})
    with pytest.raises(UsageError, match=r"resamples must be a whole number from 99 to 100,000, got"):
        paired_tests(per_unit, "a", n_resamples=n)
