"""The ``mteb`` protocol gives MTEB's numbers. MTEB's definitions are re-stated here from its
source (MTEB 2.26.24, ``mteb/_evaluators/retrieval_metrics.py``: ``calculate_retrieval_scores``,
``parse_metrics_from_scores``, ``mrr``, ``robustness_at_10``; ``mteb/tasks/instruction_retrieval/
eng/ifir_fi_qa_retrieval.py`` ``task_specific_scores``; ``retrieval_evaluator.py``
``RetrievalEvaluator.evaluate`` for ``ignore_identical_ids``) in plain Python, independently of
pytrec_eval, and the mode's numbers must equal them."""

import math

import pandas as pd
import pytest
from says import raises_saying

from instir.errors import UsageError
from instir.metrics.mteb import MTEB_K_VALUES, evaluation, mteb_measure, mteb_scores
from instir.metrics.scoring import evaluate_runs
from instir.retrieval.runs import Run


def ndcg_cut(ranking: list[str], judged: dict[str, int], k: int) -> float:
    """trec_eval's ``ndcg_cut_k`` (what MTEB's pytrec_eval computes): gains are the grades,
    discount 1/log2(rank + 1) over the top k; the ideal DCG orders all judged grades; 0 when
    the ideal is 0 (a query with no relevant document)."""
    dcg = sum(judged.get(d, 0) / math.log2(r + 1) for r, d in enumerate(ranking[:k], start=1))
    ideal = sum(g / math.log2(r + 1) for r, g in enumerate(sorted(judged.values(), reverse=True)[:k], start=1))
    return dcg / ideal if ideal > 0 else 0.0


def ranked(docs: dict[str, float]) -> list[str]:
    """A result list in trec_eval's order: score descending, ties by document id descending."""
    return [d for d, _ in sorted(docs.items(), key=lambda item: (item[1], item[0]), reverse=True)]


def mteb_ndcg_at(results: dict, qrels: dict, k: int) -> float:
    """MTEB's ``ndcg_at_k``: the mean over the queries in both results and qrels, rounded to 5."""
    scored = [q for q in results if q in qrels]
    return round(sum(ndcg_cut(ranked(results[q]), qrels[q], k) for q in scored) / len(scored), 5)


def mteb_robustness_at_10(results: dict, qrels: dict) -> float:
    """MTEB's ``robustness_at_10``: qrels ids grouped by ``id.split("_")[0]``; per group the
    lowest ``ndcg_cut_10``; the mean of the minima (not rounded)."""
    groups: dict[str, list[str]] = {}
    for q in qrels:
        groups.setdefault(q.split("_")[0], []).append(q)
    minima = [min(ndcg_cut(ranked(results[q]), qrels[q], 10) for q in members) for members in groups.values()]
    return sum(minima) / len(minima)


def mteb_mrr_at(results: dict, qrels: dict, k: int) -> float:
    """MTEB's own ``mrr_at_k``: 1/rank of the first document graded above 0 in the top k of the
    list sorted by (score, id) descending, 0 if none; the plain mean (not rounded)."""
    values = []
    for q, docs in results.items():
        top = ranked(docs)[:k]
        values.append(next((1 / r for r, d in enumerate(top, start=1) if qrels[q].get(d, 0) > 0), 0.0))
    return sum(values) / len(values)


def _results(benchmark, ranks: dict[str, int], self_hit: tuple[str, ...] = ()) -> dict[str, dict[str, float]]:
    """Each query: 12 documents, its relevant one at ``ranks[qid]`` (default 1); the queries in
    ``self_hit`` have a document named like the query id on top."""
    others = [f"x{i}" for i in range(1, 12)]
    out = {}
    for qid, rel in benchmark.qrels.items():
        docs = list(others)
        docs.insert(ranks.get(qid, 1) - 1, next(iter(rel)))
        if qid in self_hit:
            docs.insert(0, qid)
        out[qid] = {d: 20.0 - i for i, d in enumerate(docs)}
    return out


@pytest.fixture
def instructir(make_benchmark):
    """Three InstructIR-style groups of three instances, one relevant document each."""
    from instir.benchmarks.types import Query

    queries = [Query(id=f"{g}_{k}", query=f"query {g}", instruction=f"instruction {k}", group=g)
               for g in ("100", "200", "300") for k in (1, 2, 3)]
    qrels = {q.id: {f"p{q.id}": 1} for q in queries}
    return make_benchmark("instructir-sample", queries, qrels, extra_docs=tuple(f"x{i}" for i in range(1, 12)))


def test_ndcg_and_robustness_equal_mtebs_definitions(instructir):
    results = _results(instructir, {"100_2": 3, "200_1": 11, "200_3": 2, "300_1": 13}, self_hit=("300_2",))
    got = mteb_scores(results, instructir).scores
    for k in (1, 3, 5, 10, 20, 100, 1000):
        assert got[f"ndcg_at_{k}"] == mteb_ndcg_at(results, instructir.qrels, k)
    assert got["robustness_at_10"] == pytest.approx(mteb_robustness_at_10(results, instructir.qrels), abs=1e-15)
    assert got["main_score"] == got["robustness_at_10"]
    assert got["mrr_at_10"] == pytest.approx(mteb_mrr_at(results, instructir.qrels, 10), abs=1e-15)


def test_instructir_self_hits_count_in_mteb_but_not_for_the_authors(instructir):
    results = _results(instructir, {}, self_hit=("100_1",))
    mteb = mteb_scores(results, instructir).scores["ndcg_at_10"]
    authors = evaluate_runs({"s": Run.from_scores(results)}, instructir, ["nDCG@10"]).table
    authors_ndcg = authors.loc[authors["measure"] == "nDCG@10", "value"].item()
    assert authors_ndcg == 1.0  # the self-hit is dropped: every relevant document is first
    assert mteb == round((8 + 1 / math.log2(3)) / 9, 5) < 1.0  # InstructIR does not set ignore_identical_ids


def test_mteb_averages_over_the_queries_in_the_run_where_the_authors_score_missing_ones_zero(instructir):
    results = _results(instructir, {"100_2": 2})
    partial = {q: docs for q, docs in results.items() if q != "100_1"}
    scores = mteb_scores(partial, instructir)
    assert scores.scores["ndcg_at_10"] == mteb_ndcg_at(partial, instructir.qrels, 10) == round(
        (7 + 1 / math.log2(3)) / 8, 5)
    assert scores.n_scored == 8 and any("1 qrels queries have no results" in n for n in scores.notes)
    # robustness_at_10 looks every qrels query up among the scored ones: MTEB stops; the mode says so
    assert "robustness_at_10" not in scores.scores and any("robustness_at_10 is left out" in n for n in scores.notes)
    authors = evaluate_runs({"s": Run.from_scores(partial)}, instructir, ["nDCG@10"]).table
    assert authors.loc[authors["measure"] == "nDCG@10", "value"].item() == pytest.approx(
        (7 + 1 / math.log2(3)) / 9)


def test_mtebs_robustness_groups_are_the_id_before_its_first_underscore_the_authors_before_its_last(make_benchmark):
    # docs/mteb.md: MTEB groups qrels ids by id.split("_")[0], the kit by the id before its last "_"
    from instir.benchmarks.types import Query

    queries = [Query(id=f"a_{g}_{k}", query="query", instruction=f"instruction {k}", group=f"a_{g}")
               for g in ("x", "y") for k in (1, 2)]
    bench = make_benchmark("instructir-sample", queries, {q.id: {f"p{q.id}": 1} for q in queries},
                           extra_docs=tuple(f"x{i}" for i in range(1, 12)))
    results = _results(bench, {"a_y_1": 12})  # one instance of group a_y misses its document in the top 10
    assert mteb_scores(results, bench).scores["robustness_at_10"] == mteb_robustness_at_10(results, bench.qrels) == 0.0
    authors = evaluate_runs({"s": Run.from_scores(results)}, bench, ["nDCG@10"]).table
    assert authors.loc[authors["measure"] == "Robustness@10", "value"].item() == 0.5  # a_x: 1, a_y: 0


def test_means_are_rounded_to_five_decimals_and_mrr_is_not(instructir):
    results = _results(instructir, {"100_1": 3, "200_2": 7})
    scores = mteb_scores(results, instructir).scores
    for k in MTEB_K_VALUES:
        for prefix in ("ndcg", "map", "recall", "precision", "hit_rate"):
            assert scores[f"{prefix}_at_{k}"] == round(scores[f"{prefix}_at_{k}"], 5)
    assert scores["mrr_at_10"] == (7 + 1 / 3 + 1 / 7) / 9 != round(scores["mrr_at_10"], 5)


def test_mrr_counts_a_first_relevant_document_at_rank_exactly_k(instructir):
    # relevant documents at ranks 10, 3 and 5 (the others at 1): each is inside the top k from k = its rank on
    results = _results(instructir, {"100_1": 10, "200_1": 3, "300_1": 5})
    scores = mteb_scores(results, instructir).scores
    for k in MTEB_K_VALUES:
        assert scores[f"mrr_at_{k}"] == pytest.approx(mteb_mrr_at(results, instructir.qrels, k), abs=1e-15), k
    assert scores["mrr_at_10"] == pytest.approx((6 + 1 / 10 + 1 / 3 + 1 / 5) / 9)  # hand-worked


@pytest.fixture
def zero_graded(make_benchmark):
    """Four InstructIR-style instances: 100_1 judges x1 0 beside its relevant document, 200_2 is judged
    only 0 (as FollowIR's and BEIR's qrels files write non-relevant documents)."""
    from instir.benchmarks.types import Query

    queries = [Query(id=f"{g}_{k}", query=f"query {g}", instruction=f"instruction {k}", group=g)
               for g in ("100", "200") for k in (1, 2)]
    qrels = {"100_1": {"p100_1": 1, "x1": 0}, "100_2": {"p100_2": 1}, "200_1": {"p200_1": 1}, "200_2": {"x2": 0}}
    return make_benchmark("instructir-sample", queries, qrels, extra_docs=tuple(f"x{i}" for i in range(1, 12)))


ZERO_GRADED_RESULTS = {"100_1": {"x1": 2.0, "p100_1": 1.0}, "100_2": {"p100_2": 1.0}, "200_1": {"p200_1": 1.0},
                       "200_2": {"x2": 1.0}}


def test_mrr_does_not_count_a_document_judged_0_as_relevant(zero_graded):
    # MTEB's mrr keeps the documents graded above 0: 100_1 finds its relevant one at rank 2 (x1, graded 0, is
    # first), 200_2 none: (1/2 + 1 + 1 + 0) / 4
    scores = mteb_scores(ZERO_GRADED_RESULTS, zero_graded).scores
    assert scores["mrr_at_10"] == pytest.approx(mteb_mrr_at(ZERO_GRADED_RESULTS, zero_graded.qrels, 10)) == 0.625


def test_mteb_averages_in_a_query_judged_only_0(zero_graded):
    """MTEB drops only the queries with no judgment at all (mteb/abstasks/retrieval.py,
    ``_filter_queries_without_positives``: ``len(relevant_docs[idx]) == 0``); pytrec_eval scores a query
    judged only 0 with ndcg 0 and ``parse_metrics_from_scores`` divides by every scored query."""
    scores = mteb_scores(ZERO_GRADED_RESULTS, zero_graded)
    # 100_1: x1 (0) then p100_1 (1): 1/log2(3); 100_2, 200_1: 1; 200_2: 0
    assert scores.n_scored == 4
    assert scores.scores["ndcg_at_10"] == mteb_ndcg_at(ZERO_GRADED_RESULTS, zero_graded.qrels, 10) == round(
        (1 / math.log2(3) + 1 + 1 + 0) / 4, 5)


def test_mrr_breaks_ties_by_document_id_descending(instructir):
    """MTEB's ``mrr`` sorts by (score, doc id) descending (mteb/_evaluators/retrieval_metrics.py ``mrr``, since
    PR #5136, to match pytrec_eval): x9 sorts before every p<qid>, so each relevant document is second."""
    results = {qid: {f"p{qid}": 1.0, "x9": 1.0} for qid in instructir.qrels}
    scores = mteb_scores(results, instructir).scores
    assert scores["mrr_at_10"] == mteb_mrr_at(results, instructir.qrels, 10) == 0.5


def test_ifir_level_scores_are_ndcg_at_20(ifir_like):
    # MTEB's IFIR task_specific_scores (mteb/tasks/instruction_retrieval/eng/ifir_fi_qa_retrieval.py: metric =
    # "ndcg_cut_20") average ndcg_cut_20 per level: q1_3's one relevant document c is at
    # rank 13, inside the top 20 but not the top 10: 1/log2(14) (hand-worked; its ideal DCG is 1)
    fillers = {f"f{i:02d}": 30.0 - i for i in range(12)}
    results = {"q1_1": {"a": 9.0, "b": 8.0, "c": 7.0}, "q1_2": {"b": 9.0, "c": 8.0}, "q1_3": {**fillers, "c": 1.0}}
    levels = mteb_scores(results, ifir_like).level_scores
    assert levels["level_3"] == pytest.approx(ndcg_cut(ranked(results["q1_3"]), ifir_like.qrels["q1_3"], 20))
    assert levels["level_3"] == pytest.approx(1 / math.log2(14))
    assert levels["level_1"] == levels["level_2"] == 1.0


def test_ifir_levels_come_from_v_tokens_and_fiqa_drops_self_hits_under_mtebs_ids(ifir_like):
    # kit ids q1_1..q1_3 are MTEB's q1_v1..q1_v3 (IFIRFiQA sets ignore_identical_ids)
    results = {"q1_1": {"q1_v1": 9.0, "a": 8.0, "n1": 7.0, "b": 6.0, "c": 5.0},  # self-hit under MTEB's id
               "q1_2": {"q1_2": 9.0, "b": 8.0, "c": 7.0},                        # the kit's id: kept
               "q1_3": {"n1": 9.0, "n2": 8.0, "c": 7.0}}
    scores = mteb_scores(results, ifir_like)
    mteb_results = {"q1_v1": {"a": 8.0, "n1": 7.0, "b": 6.0, "c": 5.0}, "q1_v2": results["q1_2"],
                    "q1_v3": results["q1_3"]}
    mteb_qrels = {f"q1_v{n}": ifir_like.qrels[f"q1_{n}"] for n in (1, 2, 3)}
    levels = {f"level_{n}": ndcg_cut(ranked(mteb_results[f"q1_v{n}"]), mteb_qrels[f"q1_v{n}"], 20) for n in (1, 2, 3)}
    assert scores.level_scores == pytest.approx(levels, abs=1e-15)
    assert scores.scores["ndcg_at_20"] == mteb_ndcg_at(mteb_results, mteb_qrels, 20) == scores.scores["main_score"]


def test_evaluate_runs_with_the_mteb_protocol_names_measures_as_mteb_does(ifir_like):
    run = Run(pd.DataFrame({"qid": ["q1_1", "q1_2", "q1_3"], "docid": ["a", "b", "c"], "score": [1.0, 1.0, 1.0]}))
    result = evaluate_runs({"s": run}, ifir_like, protocol="mteb")
    table = result.table
    assert list(table.loc[table["level"] == "all", "measure"]) == ["ndcg_at_20", "mrr_at_20", "recall_at_20",
                                                                    "main_score"]
    levels = table[table["level"] != "all"]
    assert list(levels["level"]) == ["1", "2", "3"] and set(levels["measure"]) == {"ndcg_at_20"}
    assert set(result.per_query["measure"]) == {"ndcg_at_20", "mrr_at_20", "recall_at_20"}
    assert evaluation({"s": run}, ifir_like, ["nDCG@10"]).table["measure"].tolist() == ["ndcg_at_10", "ndcg_at_20",
                                                                                             "ndcg_at_20", "ndcg_at_20"]


def test_mteb_measures_are_its_names_at_its_cutoffs():
    assert [mteb_measure(m) for m in ("nDCG@10", "RR@20", "R@100", "P@10", "Robustness@10", "hit_rate_at_5")] == [
        "ndcg_at_10", "mrr_at_20", "recall_at_100", "precision_at_10", "robustness_at_10", "hit_rate_at_5"]
    with raises_saying(UsageError, "1, 3, 5, 10, 20, 100, 1000", "50"):
        mteb_measure("ndcg_at_50")
    with pytest.raises(UsageError, match="unknown MTEB measure 'nauc'"):
        mteb_measure("nauc")
    with pytest.raises(UsageError, match="unknown protocol 'trec'"):
        evaluate_runs({}, None, protocol="trec")
