"""FollowIR's p-MRR: equal to an independent re-statement of mteb's code on seeded random runs
(ties, absent documents, missing queries), the older insertion-order tie rule, the changed
documents derived from the qrels, mteb's own unit-test example, the [og] / [changed] halves and
what p-MRR refuses."""

import random
import warnings

import ir_measures
import pandas as pd
import pytest
from says import warns_saying

import instir
from instir.errors import UsageError
from instir.metrics import pmrr
from instir.metrics.measures import parse_measure
from instir.metrics.pmrr import PAIRED

# ---------------------------------------------------------------------------------------------
# mteb's p-MRR, re-stated step by step on plain dicts (not imported: mteb is not a dependency).
# mteb 2.26.24, mteb/_evaluators/retrieval_metrics.py:
#   evaluate_p_mrr_change: ids ending "-og" form the original run, every other id the new run;
#   calculate_pmrr: per changed query, skip it (logger.warning) unless "<q>-og" is in the original
#     run and "<q>-changed" in the new run; per changed document its rank in both; the mean of
#     rank_score per query (groupby("qid")), then the mean over queries;
#   get_rank_from_dict: sorted(items, key=(score, doc_id), reverse=True), 1-based position;
#     a document absent from the results ranks len + 1;
#   rank_score: (1/og)/(1/new) - 1 when og >= new, else 1 - (1/new)/(1/og).
# mteb 1.12.94, mteb/evaluation/evaluators/utils.py, get_rank_from_dict: the old tie rule,
#   sorted(items, key=score, reverse=True): a stable sort, so ties keep dict insertion order.
# ---------------------------------------------------------------------------------------------


def mteb_rank(results: dict[str, float], doc_id: str, old_ties: bool = False) -> int:
    key = (lambda x: x[1]) if old_ties else (lambda x: (x[1], x[0]))
    for i, (cur, _score) in enumerate(sorted(results.items(), key=key, reverse=True)):
        if cur == doc_id:
            return i + 1
    return len(results) + 1


def mteb_rank_score(og_rank: int, new_rank: int) -> float:
    if og_rank >= new_rank:
        return ((1 / og_rank) / (1 / new_rank)) - 1
    return 1 - ((1 / new_rank) / (1 / og_rank))


def mteb_pmrr(results: dict[str, dict[str, float]], changed: dict[str, list[str]],
              old_ties: bool = False) -> tuple[float, list[str]]:
    """p-MRR as mteb computes it, and the queries it skips (with a warning)."""
    original = {q: docs for q, docs in results.items() if q.endswith("-og")}
    new = {q: docs for q, docs in results.items() if not q.endswith("-og")}
    per_query: dict[str, list[float]] = {}
    skipped = []
    for qid, docs in changed.items():
        if qid + "-og" not in original or qid + "-changed" not in new:
            skipped.append(qid)
            continue
        for doc in docs:
            og = mteb_rank(original[qid + "-og"], doc, old_ties)
            now = mteb_rank(new[qid + "-changed"], doc, old_ties)
            per_query.setdefault(qid, []).append(mteb_rank_score(og, now))
    means = [sum(v) / len(v) for v in per_query.values()]
    return sum(means) / len(means), skipped


# ---------------------------------------------------------------------------------------------

SCORES = (0.0, 0.5, 1.0, 2.0, 3.0)  # few values, exact in float32: many ties


def random_case(seed: int, n_topics: int = 12, n_docs: int = 15, drop: bool = True):
    """Qrels, a run with ties (and with changed documents absent from some instances), the changed
    documents, and (with ``drop``) one topic without its -changed and one without its -og instance."""
    rng = random.Random(seed)
    docs = [f"d{i:02d}" for i in range(n_docs)]
    run, qrels, changed = {}, {}, {}
    for t in range(n_topics):
        topic = f"t{t}"
        relevant = rng.sample(docs, rng.randint(2, 6))
        changed[topic] = rng.sample(relevant, rng.randint(1, len(relevant)))
        qrels[topic + "-og"] = {d: 1 for d in relevant}
        qrels[topic + "-changed"] = {d: 0 if d in changed[topic] else 1 for d in relevant}
        for suffix in ("-og", "-changed"):
            retrieved = rng.sample(docs, rng.randint(3, n_docs - 2))  # insertion order is random too
            run[topic + suffix] = {d: rng.choice(SCORES) for d in retrieved}
    if drop:
        del run["t3-changed"], run["t7-og"]
    return qrels, run, changed


def frame_of(run: dict[str, dict[str, float]]) -> pd.DataFrame:
    """The run as a frame whose row order is the dicts' insertion order."""
    return pd.DataFrame([(q, d, s) for q, docs in run.items() for d, s in docs.items()],
                        columns=["qid", "docid", "score"])


def evaluate_quietly(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return instir.evaluate(*args, **kwargs)


@pytest.mark.parametrize("seed", range(8))
def test_pmrr_equals_mteb_on_random_runs_with_ties_absent_documents_and_missing_queries(seed):
    qrels, run, changed = random_case(seed)
    expected, skipped = mteb_pmrr(run, changed)
    assert skipped == ["t3", "t7"]
    with pytest.warns(UserWarning) as caught:
        got = instir.evaluate(qrels, run, "p-MRR", changed=changed)
    assert got == pytest.approx(expected, abs=1e-12)
    warned = [str(w.message) for w in caught if "p-MRR" in str(w.message)]
    assert len(warned) == 2
    assert warned[0].startswith("query t3 not found") and warned[1].startswith("query t7 not found")


def test_random_runs_do_hold_ties_and_absent_changed_documents():
    # the cases above exercise both rules they claim to: ties among scores, changed docs not retrieved
    _, run, changed = random_case(0)
    assert any(len(set(docs.values())) < len(docs) for docs in run.values())
    assert any(d not in run.get(t + suffix, {}) for t, ds in changed.items() for d in ds
               for suffix in ("-og", "-changed") if t + suffix in run)


def test_the_mteb_tie_rule_differs_from_the_old_one_on_random_runs():
    qrels, run, changed = random_case(1, drop=False)
    assert abs(mteb_pmrr(run, changed)[0] - mteb_pmrr(run, changed, old_ties=True)[0]) > 1e-3


def test_query_missing_both_instances_is_skipped_with_a_warning():
    qrels = {"a-og": {"x": 1}, "a-changed": {"x": 0}, "b-og": {"y": 1}, "b-changed": {"y": 0}}
    run = {"a-og": {"x": 2.0, "z": 1.0}, "a-changed": {"z": 2.0, "x": 1.0}}
    with warns_saying(UserWarning, "query b", "p-MRR"):
        assert instir.evaluate(qrels, run, "p-MRR") == 0.5  # a only: rank 1 -> 2, 1 - 1/2


def test_a_topic_without_changed_documents_adds_nothing():
    # docs/metrics.md: "a topic without changed documents adds nothing" (b keeps y's grade: no changed document)
    qrels = {"a-og": {"x": 1}, "a-changed": {"x": 0}, "b-og": {"y": 1}, "b-changed": {"y": 1}}
    run = {"a-og": {"x": 2.0, "z": 1.0}, "a-changed": {"z": 2.0, "x": 1.0},
           "b-og": {"y": 2.0, "z": 1.0}, "b-changed": {"z": 2.0, "y": 1.0}}
    assert instir.evaluate(qrels, run, "p-MRR") == 0.5  # a alone: rank 1 -> 2, 1 - 1/2; b is no 0 beside it
    assert instir.evaluate(qrels, run, "p-MRR", changed={"a": ["x"], "b": []}) == 0.5


# ------------------------------------------------------------------------- the old tie rule


@pytest.mark.parametrize("seed", range(4))
def test_insertion_ties_equal_the_old_mteb_rule_on_the_frame_in_row_order(seed):
    _, run, changed = random_case(seed, drop=False)
    expected, _ = mteb_pmrr(run, changed, old_ties=True)
    got = pmrr.per_query(frame_of(run), changed, "insertion")["value"].mean()
    assert got == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_evaluate_insertion_ties_equal_the_old_mteb_rule_on_random_runs(seed):
    qrels, run, changed = random_case(seed, drop=False)
    expected, _ = mteb_pmrr(run, changed, old_ties=True)
    got = instir.evaluate(qrels, frame_of(run), "p-MRR[insertion-ties]", changed=changed)
    assert got == pytest.approx(expected, abs=1e-12)


# one changed document b, every score tied: mteb 2.26 ranks by doc id descending (c, b, a in both
# halves: no move), the old rule by insertion (og: b first; changed: b last of three)
TIED_QRELS = {"q-og": {"a": 1, "b": 1}, "q-changed": {"a": 1, "b": 0}}
TIED_RUN = {"q-og": {"b": 1.0, "a": 1.0, "c": 1.0}, "q-changed": {"c": 1.0, "a": 1.0, "b": 1.0}}


def test_the_two_tie_rules_differ_by_two_thirds_on_a_hand_worked_tie():
    assert mteb_pmrr(TIED_RUN, {"q": ["b"]}) == (0.0, [])
    assert mteb_pmrr(TIED_RUN, {"q": ["b"]}, old_ties=True) == (pytest.approx(2 / 3), [])  # 1 - 1/3
    frame = frame_of(TIED_RUN)
    assert pmrr.per_query(frame, {"q": ["b"]}, "mteb")["value"].tolist() == [0.0]
    assert pmrr.per_query(frame, {"q": ["b"]}, "insertion")["value"].tolist() == [pytest.approx(2 / 3)]


@pytest.mark.parametrize("as_frame", [True, False], ids=["frame", "dict"])
def test_evaluate_ranks_insertion_ties_in_the_given_order(as_frame):
    run = frame_of(TIED_RUN) if as_frame else TIED_RUN
    got = instir.evaluate(TIED_QRELS, run, ["p-MRR", "p-MRR[insertion-ties]"])
    assert got == {"p-MRR": 0.0, "p-MRR[insertion-ties]": pytest.approx(2 / 3)}


@pytest.mark.parametrize("way", ["Run", "kit's file", "file of equal scores"])
def test_a_run_on_a_benchmark_keeps_its_ties_for_the_insertion_rule_in_candidate_order(way, tmp_path):
    # before, a Run (and so every TREC file and the evaluate stage) broke its ties by document id before p-MRR saw
    # them: p-MRR[insertion-ties] was p-MRR (-0.225 here, where the candidate lists' order gives 0.0)
    from instir.retrieval.runs import read_run, write_run

    bench = instir.load_benchmark("followir-sample/news21")
    lists, changed = bench.meta["top_ranked"], bench.meta["changed"]
    frame = pd.DataFrame([(q, d, 2.0 if i == 0 and q.endswith("-og") else 1.0) for q, docs in lists.items()
                          for i, d in enumerate(docs)], columns=["qid", "docid", "score"])
    by_candidates = {q: {d: s for d, s in zip(part["docid"], part["score"])}  # the lists' order, as mteb 1.x held it
                     for q, part in frame.groupby("qid", sort=False)}
    expected, _ = mteb_pmrr(by_candidates, changed, old_ties=True)
    assert expected != mteb_pmrr(by_candidates, changed)[0]  # the two rules differ on this run
    path = tmp_path / "tied.trec"
    if way == "Run":
        run = instir.Run(frame)
    elif way == "kit's file":
        run = read_run(write_run(instir.Run(frame), path))
    else:
        path.write_text("".join(f"{q} Q0 {d} 0 {s} ext\n" for q, d, s in frame.itertuples(index=False)))
        run = read_run(path)
    got = evaluate_quietly(bench, run, ["p-MRR", "p-MRR[insertion-ties]"])
    assert got["p-MRR[insertion-ties]"] == pytest.approx(expected, abs=1e-12)
    assert got["p-MRR"] == pytest.approx(mteb_pmrr(by_candidates, changed)[0], abs=1e-12)


def _news21_tied_frame(bench) -> pd.DataFrame:
    """Every candidate scored 1.0 but the first of each -og list (2.0): ties everywhere else."""
    return pd.DataFrame([(q, d, 2.0 if i == 0 and q.endswith("-og") else 1.0)
                         for q, docs in bench.meta["top_ranked"].items() for i, d in enumerate(docs)],
                        columns=["qid", "docid", "score"])


def test_evaluate_runs_table_holds_the_p_mrr_of_the_query_pairs_and_counts_both_instances():
    """The table's p-MRR row: mteb's p-MRR (re-stated above) of the run; n_queries counts both instances of
    each of news21's 2 query pairs (4)."""
    from instir.metrics.scoring import evaluate_runs

    bench = instir.load_benchmark("followir-sample/news21")
    frame = _news21_tied_frame(bench)
    by_candidates = {q: dict(zip(part["docid"], part["score"])) for q, part in frame.groupby("qid", sort=False)}
    expected, _ = mteb_pmrr(by_candidates, bench.meta["changed"])
    assert expected < 0  # the pairs' values are negative
    table = evaluate_runs({"s": frame}, bench, ["p-MRR"]).table
    row = table[(table["measure"] == "p-MRR") & (table["level"] == "all")]
    assert row["value"].tolist() == [pytest.approx(expected, abs=1e-12)]
    assert row["n_queries"].tolist() == [4] == [len(bench.queries)]


def test_a_document_outside_the_candidate_list_ranks_after_the_listed_ones_for_the_insertion_rule():
    """The insertion rule follows the candidate lists (mteb 1.x scored only those, in their order); a document
    outside them comes after every listed one. Each -og instance gains a tied unlisted document on the frame's first
    row: the old rule on the lists' order with it last gives 0 (both halves' lists are identical: nothing moves)."""
    bench = instir.load_benchmark("followir-sample/news21")
    lists = bench.meta["top_ranked"]
    rows = []
    for q, docs in lists.items():
        if q.endswith("-og"):
            rows.append((q, "unlisted-doc", 1.0))
        rows += [(q, d, 1.0) for d in docs]
    frame = pd.DataFrame(rows, columns=["qid", "docid", "score"])
    in_list_order = {q: {**dict.fromkeys(docs, 1.0), **({"unlisted-doc": 1.0} if q.endswith("-og") else {})}
                     for q, docs in lists.items()}
    expected, _ = mteb_pmrr(in_list_order, bench.meta["changed"], old_ties=True)
    assert expected == 0.0
    assert evaluate_quietly(bench, frame, "p-MRR[insertion-ties]") == pytest.approx(expected, abs=1e-12)


def test_scores_one_float32_step_apart_are_no_tie_for_the_insertion_rule():
    # found by this stop's regression review: reading any one-step chain as a broken tie gave 0.425 on a run that
    # ranks every candidate alike in both instances (0.0 under either rule, as its frame gives)
    import numpy as np

    bench = instir.load_benchmark("followir-sample/core17")
    base, rows = np.float32(0.8), []
    for instance, docs in bench.meta["top_ranked"].items():
        for i, doc in enumerate(sorted(docs, reverse=True)):  # trec_eval's order, with no tie
            score = base - np.float32(i) * np.spacing(base) if instance.endswith("-og") else len(docs) - i
            rows.append((instance, doc, float(score)))
    frame = pd.DataFrame(rows, columns=["qid", "docid", "score"])
    for run in (frame, instir.Run(frame)):
        assert evaluate_quietly(bench, run, ["p-MRR", "p-MRR[insertion-ties]"]) == {"p-MRR": 0.0,
                                                                                   "p-MRR[insertion-ties]": 0.0}


def test_scores_that_differ_beyond_float32_precision_rank_as_mteb_ranks_them():
    """A run given as a dict or frame is ranked at its own precision, as mteb ranks it (a Run, and
    so a TREC file, holds trec_eval's float32 scores)."""
    run = {"q-og": {"b": 1.0, "a": 1.0 + 1e-9}, "q-changed": {"b": 1.0 + 1e-9, "a": 1.0}}
    expected, _ = mteb_pmrr(run, {"q": ["a"]})
    assert expected == 0.5  # a: rank 1 -> 2
    assert instir.evaluate(TIED_QRELS, run, "p-MRR", changed={"q": ["a"]}) == expected


def test_scores_of_a_frame_that_differ_beyond_float32_precision_rank_as_mteb_ranks_them():
    """The case above given as a DataFrame: its scores are read at their own (float64) precision too."""
    run = {"q-og": {"b": 1.0, "a": 1.0 + 1e-9}, "q-changed": {"b": 1.0 + 1e-9, "a": 1.0}}
    expected, _ = mteb_pmrr(run, {"q": ["a"]})
    assert expected == 0.5  # a: rank 1 -> 2, 1 - (1/2)/(1/1)
    assert instir.evaluate(TIED_QRELS, frame_of(run), "p-MRR", changed={"q": ["a"]}) == expected


# ------------------------------------------------------------------ changed documents derived


def test_changed_documents_are_the_og_judgments_graded_otherwise_after():
    """mteb 1.x ``create_qrel_diff``: every document of the og qrels whose grade differs after."""
    qrels = {"q-og": {"a": 1, "b": 2, "c": 0, "d": 1, "e": 2},
             "q-changed": {"a": 1, "b": 0, "c": 1, "e": 1},  # d unjudged after: grade 0
             "r-og": {"x": 1}, "r-changed": {"x": 1}}
    assert PAIRED.regraded(qrels) == {"q": ["b", "c", "d", "e"], "r": []}


def test_changed_omitted_is_derived_from_the_two_qrels():
    qrels = {"q-og": {"a": 1, "b": 2, "c": 0, "d": 1}, "q-changed": {"a": 1, "b": 0, "c": 1}}
    run = {"q-og": {"a": 4.0, "b": 3.0, "c": 2.0, "d": 1.0}, "q-changed": {"b": 4.0, "a": 3.0, "c": 2.0}}
    # changed: b, c (0 -> 1), d. b: rank 2 -> 1, (1/2)/(1/1) - 1 = -0.5; c: rank 3 -> 3, 0;
    # d: rank 4 -> absent from 3 results = 4, 0
    assert instir.evaluate(qrels, run, "p-MRR") == pytest.approx(-0.5 / 3, abs=1e-15)
    assert instir.evaluate(qrels, run, "p-MRR", changed={"q": ["b", "d"]}) == pytest.approx(-0.25, abs=1e-15)
    assert instir.evaluate(qrels, run, "p-MRR", changed={"q": ["d"]}) == 0.0


# -------------------------------------------------------- mteb's unit test (test_p_mrr), by hand
# mteb 1.12.94 tests/test_evaluators/test_InstructionRetrievalEvaluator.py, with the ids as the
# FollowIR runs spell them


MTEB_QRELS = {"a-og": {"0": 1}, "a-changed": {"0": 0}}
ORIGINAL = {"0": 1, "1": 2, "2": 3, "3": 4}
CHANGED_RUN = {"0": 4, "1": 1, "2": 2, "3": 3}


@pytest.mark.parametrize(("og", "new", "expected"), [(ORIGINAL, ORIGINAL, 0.0), (ORIGINAL, CHANGED_RUN, -0.75),
                                                     (CHANGED_RUN, ORIGINAL, 0.75)],
                         ids=["unchanged", "moved-up", "moved-down"])
def test_mteb_unit_test_example(og, new, expected):
    # doc 0: rank 4 with the original scores, rank 1 with the changed ones; (1/4)/(1/1) - 1 = -0.75
    run = {"a-og": og, "a-changed": new}
    assert instir.evaluate(MTEB_QRELS, run, "p-MRR", changed={"a": ["0"]}) == expected
    assert mteb_pmrr(run, {"a": ["0"]})[0] == expected


def test_a_p_mrr_measure_made_without_a_tie_rule_is_the_one_named_p_mrr():
    # pmrr.PMRR() and the name "p-MRR" are one measure: mteb 2.26's ties (doc id descending)
    measure = pmrr.PMRR()
    assert measure == parse_measure("p-MRR") and measure.name == "p-MRR" and measure.ties == "mteb"


# ----------------------------------------------------------------------- halves and refusals


def graded_case(seed: int):
    rng = random.Random(seed)
    docs = [f"d{i:02d}" for i in range(20)]
    qrels, run = {}, {}
    for t in range(6):
        for suffix in ("-og", "-changed"):
            judged = rng.sample(docs, 8)
            qrels[f"t{t}{suffix}"] = {d: (rng.choice((1, 2)) if i < 2 else rng.choice((0, 1, 2)))
                                      for i, d in enumerate(judged)}
            run[f"t{t}{suffix}"] = {d: rng.choice(SCORES) for d in rng.sample(docs, 12)}
    return qrels, run


@pytest.mark.parametrize("half", ["og", "changed"])
def test_half_measure_equals_ir_measures_on_that_half_only(half):
    qrels, run = graded_case(3)
    part = {q for q in qrels if q.endswith(f"-{half}")}
    measure = ir_measures.parse_measure("AP@1000")
    expected = ir_measures.calc_aggregate([measure], {q: qrels[q] for q in part}, {q: run[q] for q in part})[measure]
    assert instir.evaluate(qrels, run, f"AP@1000[{half}]") == pytest.approx(expected, abs=1e-12)
    whole = instir.evaluate(qrels, run, "AP@1000")
    assert whole == pytest.approx(ir_measures.calc_aggregate([measure], qrels, run)[measure], abs=1e-12)
    assert instir.evaluate(qrels, run, f"AP@1000[{half}]") != pytest.approx(whole)  # not the whole run


def test_pmrr_is_refused_per_query():
    qrels, run, changed = random_case(0, drop=False)
    with pytest.raises(UsageError, match="p-MRR"):
        instir.evaluate(qrels, run, ["p-MRR", "AP@1000"], changed=changed, per_query=True)
    with pytest.raises(UsageError, match="p-MRR"):
        instir.evaluate(qrels, run, "p-MRR[insertion-ties]", per_query=True)


@pytest.mark.parametrize("measure", ["p-MRR", "p-MRR[insertion-ties]"])
def test_query_only_run_with_identical_halves_gives_exactly_zero(measure):
    qrels, run, changed = random_case(5, drop=False)
    # the instruction ignored: both halves of a topic get the one ranking of its -og instance
    same = {q: run[q.removesuffix("-changed").removesuffix("-og") + "-og"] for q in run}
    assert instir.evaluate(qrels, same, measure, changed=changed) == 0.0
    assert evaluate_quietly(qrels, same, measure) == 0.0  # changed documents derived


def test_a_run_missing_many_queries_names_the_first_few_and_counts_the_rest():
    from instir.metrics import pmrr

    run = pd.DataFrame({"qid": ["q0-og", "q0-changed"], "docid": ["a", "a"], "score": [1.0, 1.0]})
    changed = {f"q{i}": ["a"] for i in range(10)}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert pmrr.per_query(run, changed)["group"].tolist() == ["q0"]
    messages = [str(w.message) for w in caught]
    assert len(messages) == pmrr.WARNED + 1 and messages[0].startswith("query q1 not found")
    assert messages[-1].startswith(f"{9 - pmrr.WARNED} more queries not found")
