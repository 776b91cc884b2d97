"""IFIR-native nDCG@k / MRR@k and the paper's aggregation (levels, subsets, Average)."""

import math

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from instir.metrics.measures import Native, parse_measure
from instir.metrics.native import native_per_query
from instir.metrics.scoring import evaluate_runs
from instir.metrics.standard import Evaluator, mean_by_measure
from instir.metrics.table import COLUMNS, subset_average

L2 = math.log2


def _run(order: list[str], qid: str = "q") -> pd.DataFrame:
    return pd.DataFrame({"qid": qid, "docid": order, "score": [float(len(order) - i) for i in range(len(order))]})


def test_native_ndcg_uses_the_retrieved_list_as_its_ideal_hand_worked():
    # 3 relevant docs, 2 retrieved at ranks 2 and 4 of the top 5
    qrels = {"q": {"r1": 1, "r2": 1, "r3": 1}}
    run = _run(["n1", "r1", "n2", "r2", "n3"])
    native = native_per_query(run, qrels, ["nDCG@5", "RR@5"]).set_index("measure")["value"]
    dcg = 1 / L2(3) + 1 / L2(5)
    assert native["nDCG@5[ifir-native]"] == pytest.approx(dcg / (1 + 1 / L2(3)))
    assert native["RR@5[ifir-native]"] == 0.5
    standard = mean_by_measure(Evaluator(qrels, ["nDCG@5"]).per_query(run))["nDCG@5"]
    assert standard == pytest.approx(dcg / (1 + 1 / L2(3) + 1 / L2(4)))


def test_native_values_are_zero_without_a_relevant_document_in_the_top_k():
    qrels = {"q": {"r1": 1}, "p": {"r2": 1}}
    run = pd.concat([_run(["n1", "n2", "r1"]), _run(["n1"], "p")])
    values = native_per_query(run, qrels, ["nDCG@2", "RR@2"])
    assert (values["value"] == 0).all() and len(values) == 4


def test_native_gains_are_binary():
    qrels = {"q": {"a": 3, "b": 1}}
    values = native_per_query(_run(["b", "x", "a"]), qrels, ["nDCG@3"])["value"]
    assert values.iloc[0] == pytest.approx((1 + 1 / L2(4)) / (1 + 1 / L2(3)))


def test_native_measures_treat_a_grade_0_judgment_as_not_relevant():
    # z (grade 0) at rank 1, a (grade 1) at rank 2: one relevant retrieved, so the ideal is 1/log2(2) = 1
    # and nDCG = (1/log2(3)) / 1; RR = 1/2 (hand-worked, as trec_eval reads grade 0)
    qrels = {"q": {"a": 1, "z": 0}}
    native = native_per_query(_run(["z", "a"]), qrels, ["nDCG@10", "RR@10"]).set_index("measure")["value"]
    assert native["nDCG@10[ifir-native]"] == pytest.approx(1 / L2(3))
    assert native["RR@10[ifir-native]"] == pytest.approx(0.5)


def test_native_measures_leave_out_queries_without_a_relevant_document():
    # p is judged only 0: not averaged (standard.py's rule); q retrieves its one relevant doc at rank 1 = 1.0
    qrels = {"q": {"a": 1}, "p": {"b": 0}}
    values = native_per_query(_run(["a"]), qrels, ["nDCG@10"])
    assert values[["qid", "value"]].values.tolist() == [["q", 1.0]]


def test_native_measures_with_mixed_cutoffs_each_read_their_own_depth():
    # r (the one relevant doc) at rank 8: nDCG@10 = (1/log2(9)) / 1 (hand-worked), RR@5 = 0 (r below rank 5)
    qrels = {"q": {"r": 1}}
    run = _run([f"n{i}" for i in range(7)] + ["r"])
    native = native_per_query(run, qrels, ["nDCG@10", "RR@5"]).set_index("measure")["value"]
    assert native["nDCG@10[ifir-native]"] == pytest.approx(1 / L2(9))
    assert native["RR@5[ifir-native]"] == 0.0


def test_native_ndcg_at_a_small_cutoff_counts_only_the_relevant_documents_within_it_for_its_ideal():
    # asked beside nDCG@5, nDCG@2 still re-sorts only its own top 2: n1, r1 -> one relevant retrieved,
    # ideal 1/log2(2) = 1, nDCG@2 = 1/log2(3) (hand-worked); r2 at rank 3 belongs to nDCG@5's ideal only
    qrels = {"q": {"r1": 1, "r2": 1}}
    native = native_per_query(_run(["n1", "r1", "r2"]), qrels, ["nDCG@2", "nDCG@5"]).set_index("measure")["value"]
    assert native["nDCG@2[ifir-native]"] == pytest.approx(1 / L2(3))
    assert native["nDCG@5[ifir-native]"] == pytest.approx((1 / L2(3) + 1 / L2(4)) / (1 + 1 / L2(3)))


def test_native_measures_are_labelled_and_limited_to_ndcg_and_rr():
    assert Native(parse_measure("nDCG@20")).name == "nDCG@20[ifir-native]"
    with pytest.raises(ValueError, match="nDCG@k and RR@k"):
        native_per_query(_run(["a"]), {"q": {"a": 1}}, ["P@10"])
    with pytest.raises(ValueError, match="nDCG@k and RR@k"):
        native_per_query(_run(["a"]), {"q": {"a": 1}}, ["nDCG"])


@st.composite
def _binary_run(draw, all_relevant_on_top: bool = False):
    """A run of 1-8 queries over up to 12 documents each, tied scores allowed, binary qrels,
    and one k (several queries per example keep the test fast)."""
    k = draw(st.integers(1, 15))
    frames, qrels = [], {}
    for q in range(draw(st.integers(1, 8))):
        docs = [f"d{i}" for i in range(draw(st.integers(1, 12)))]
        relevant = draw(st.sets(st.sampled_from(docs + ["unretrieved1", "unretrieved2"]), min_size=1))
        scores = draw(st.lists(st.integers(0, 4), min_size=len(docs), max_size=len(docs)))
        if all_relevant_on_top:  # every relevant doc retrieved, strictly above the others, within k
            relevant = {d for d in relevant if d in docs} or {docs[0]}
            relevant = set(sorted(relevant)[:k])
            scores = [10 + i if d in relevant else s for i, (d, s) in enumerate(zip(docs, scores))]
        frames.append(pd.DataFrame({"qid": f"q{q}", "docid": docs, "score": [float(s) for s in scores]}))
        qrels[f"q{q}"] = {d: 1 for d in relevant}
    return pd.concat(frames, ignore_index=True), qrels, k


def _both(run, qrels, measures):
    native = native_per_query(run, qrels, measures)
    standard = Evaluator(qrels, measures).per_query(run)
    return native.pivot(index="qid", columns="measure", values="value"), \
        standard.pivot(index="qid", columns="measure", values="value")


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(_binary_run())
def test_native_ndcg_is_never_below_standard(case):
    run, qrels, k = case
    native, standard = _both(run, qrels, [f"nDCG@{k}", f"RR@{k}"])
    assert (native[f"nDCG@{k}[ifir-native]"] >= standard[f"nDCG@{k}"] - 1e-12).all()
    pd.testing.assert_series_equal(native[f"RR@{k}[ifir-native]"], standard[f"RR@{k}"], check_names=False)


@settings(max_examples=30, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(_binary_run(all_relevant_on_top=True))
def test_native_equals_standard_when_every_relevant_document_is_in_the_top_k(case):
    run, qrels, k = case
    native, standard = _both(run, qrels, [f"nDCG@{k}"])
    assert native[f"nDCG@{k}[ifir-native]"].to_numpy() == pytest.approx(standard[f"nDCG@{k}"].to_numpy())
    assert native[f"nDCG@{k}[ifir-native]"].to_numpy() == pytest.approx(1.0)


def test_ifir_benchmarks_report_native_and_standard_pooled_and_per_level(ifir_like):
    # level 1 (a, b, c relevant) retrieves a at 1; level 2 (b, c) retrieves b at 2; level 3 (c) nothing
    run = pd.concat([_run(["a", "n1"], "q1_1"), _run(["n1", "b"], "q1_2"), _run(["n1", "n2"], "q1_3")])
    table = evaluate_runs({"s": run}, ifir_like, ["nDCG@20", "RR@20"]).table
    assert list(table.columns) == COLUMNS
    value = table.set_index(["level", "measure"])["value"]
    per_level_native = [1.0, 1 / L2(3), 0.0]
    per_level_standard = [1 / (1 + 1 / L2(3) + 1 / L2(4)), (1 / L2(3)) / (1 + 1 / L2(3)), 0.0]
    for level, nat, std in zip("123", per_level_native, per_level_standard):
        assert value[(level, "nDCG@20[ifir-native]")] == pytest.approx(nat)
        assert value[(level, "nDCG@20")] == pytest.approx(std)
    assert value[("all", "nDCG@20[ifir-native]")] == pytest.approx(sum(per_level_native) / 3)
    assert value[("all", "nDCG@20")] == pytest.approx(sum(per_level_standard) / 3)
    assert value[("all", "RR@20[ifir-native]")] == pytest.approx(0.5)
    assert set(table["subset"]) == {"fiqa"} and not any(table["measure"].str.startswith("Robustness"))


def _pooled(system: str, subset: str, value: float, n: int, measure: str = "nDCG@20") -> dict:
    return {"system": system, "benchmark": f"ifir/{subset}", "setting": "instructed", "subset": subset,
            "level": "all", "measure": measure, "value": value, "n_queries": n}


def test_average_is_the_unweighted_mean_over_subsets():
    table = pd.DataFrame([
        _pooled("bm25", "fiqa", 0.2, 1000), _pooled("bm25", "aila", 0.6, 10),
        _pooled("e5", "fiqa", 0.4, 1000), _pooled("e5", "aila", 0.8, 10),
        {**_pooled("bm25", "fiqa", 0.9, 300), "level": "1"},  # per-level rows are not averaged
    ])[COLUMNS]
    avg = subset_average(table).set_index("system")
    assert avg.loc["bm25", "value"] == pytest.approx(0.4)  # not the query-weighted 0.204
    assert avg.loc["e5", "value"] == pytest.approx(0.6)
    assert (avg["subset"] == "average").all() and (avg["benchmark"] == "ifir").all()
    assert avg.loc["bm25", "n_queries"] == 1010


def test_average_refuses_systems_missing_a_subset():
    table = pd.DataFrame([_pooled("bm25", "fiqa", 0.2, 1), _pooled("bm25", "aila", 0.6, 1),
                          _pooled("e5", "fiqa", 0.4, 1)])[COLUMNS]
    with pytest.raises(ValueError, match="subsets"):
        subset_average(table)


def test_the_sample_and_the_real_benchmark_are_averaged_over_their_own_subsets():
    sample = [{**_pooled("bm25", "fiqa", 0.5, 3), "benchmark": "ifir-sample/fiqa"}]
    table = pd.DataFrame([*sample, _pooled("bm25", "fiqa", 0.2, 10), _pooled("bm25", "fire", 0.6, 10)])[COLUMNS]
    avg = subset_average(table).set_index("benchmark")
    assert avg.loc["ifir-sample", "value"] == pytest.approx(0.5)  # its one subset, not refused for lacking fire
    assert avg.loc["ifir", "value"] == pytest.approx(0.4)


def test_an_average_over_named_subsets_leaves_the_other_subsets_out():
    table = pd.DataFrame([_pooled("bm25", "fiqa", 0.2, 10), _pooled("bm25", "aila", 0.6, 20),
                          _pooled("bm25", "fire", 0.9, 40)])[COLUMNS]
    avg = subset_average(table, subsets=["fiqa", "aila"]).iloc[0]
    assert avg["value"] == pytest.approx((0.2 + 0.6) / 2) and avg["n_queries"] == 10 + 20
