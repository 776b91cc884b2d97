"""``instir.evaluate(qrels, run, measures)``: ranx's argument order, every input shape read
alike, Robustness and IFIR-native nDCG only when asked, the same numbers as ``evaluate_runs``."""

import math
from collections import namedtuple

import numpy as np
import pandas as pd
import pytest
from says import raises_saying

import instir
from instir.benchmarks import load_benchmark
from instir.benchmarks.types import FormatError
from instir.errors import UsageError
from instir.metrics import evaluate_runs, qrels_of
from instir.retrieval import retrieve, write_run
from instir.retrieval.lexical import BM25Retriever

L2 = math.log2
# two groups of InstructIR-style ids; one relevant document each
QRELS = {"a_1": {"d1": 1}, "a_2": {"d2": 1}, "b_1": {"d3": 1}}
RUN = {"a_1": {"d1": 3.0, "d2": 2.0}, "a_2": {"d1": 3.0, "d2": 2.0}, "b_1": {"d9": 5.0, "d8": 4.0, "d3": 1.0}}
NDCG = {"a_1": 1.0, "a_2": 1 / L2(3), "b_1": 1 / L2(4)}  # hand-worked: 1/log2(rank + 1)


@pytest.fixture(scope="module")
def sample_run():
    bench = load_benchmark("instructir-sample")
    return bench, retrieve(bench, BM25Retriever(show_progress=False), k=20)


def test_one_measure_is_a_float_and_a_list_a_dict_keyed_as_asked():
    assert instir.evaluate(QRELS, RUN, "nDCG@10") == pytest.approx(sum(NDCG.values()) / 3)
    values = instir.evaluate(QRELS, RUN, ["nDCG@10", "RR@10"])
    assert list(values) == ["nDCG@10", "RR@10"] and values["RR@10"] == pytest.approx((1 + 1 / 2 + 1 / 3) / 3)


def test_ranx_names_mean_the_ir_measures_ones():
    ours = instir.evaluate(QRELS, RUN, ["nDCG@10", "RR@10", "R@2", "P@2"])
    ranx_named = instir.evaluate(QRELS, RUN, ["ndcg@10", "mrr@10", "recall@2", "precision@2"])
    assert list(ranx_named.values()) == pytest.approx(list(ours.values()))


def test_robustness_is_the_mean_of_group_minima_and_only_there_when_asked():
    values = instir.evaluate(QRELS, RUN, ["nDCG@10", "Robustness@10"])
    assert set(values) == {"nDCG@10", "Robustness@10"}
    assert values["Robustness@10"] == pytest.approx((min(NDCG["a_1"], NDCG["a_2"]) + NDCG["b_1"]) / 2)
    assert instir.evaluate(QRELS, RUN, "robustness@10") == pytest.approx(values["Robustness@10"])
    one_group = instir.evaluate(QRELS, RUN, "Robustness@10", groups={"a_1": "g", "a_2": "g", "b_1": "g"})
    assert one_group == pytest.approx(NDCG["b_1"])
    with pytest.raises(UsageError, match="no '<group>_<n>' id"):
        instir.evaluate({"q": {"d1": 1}}, {"q": {"d1": 1.0}}, "Robustness@10")


def test_robustness_groups_plain_qrels_by_the_id_before_its_last_underscore():
    # METRICS.md: the group key is the id before the last "_": x_y_1 and x_y_2 form group x_y, x_z_1 group x_z.
    # x_y_1 finds a (nDCG 1), x_y_2 nothing (0), x_z_1 finds c (1): (min(1, 0) + 1) / 2 = 0.5
    qrels = {"x_y_1": {"a": 1}, "x_y_2": {"b": 1}, "x_z_1": {"c": 1}}
    run = {"x_y_1": {"a": 1.0}, "x_y_2": {"n": 1.0}, "x_z_1": {"c": 1.0}}
    assert instir.evaluate(qrels, run, "Robustness@10") == pytest.approx(0.5)


def test_every_input_shape_gives_the_same_numbers(tmp_path):
    Qrel = namedtuple("Qrel", "query_id doc_id relevance")
    ScoredDoc = namedtuple("ScoredDoc", "query_id doc_id score")
    rows = [(q, d, g) for q, docs in QRELS.items() for d, g in docs.items()]
    scored = [(q, d, s) for q, docs in RUN.items() for d, s in docs.items()]
    (tmp_path / "qrels.txt").write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in rows))
    run_file = write_run(instir.Run.from_scores(RUN), tmp_path / "run.trec")
    qrels_shapes = [QRELS, pd.DataFrame(rows, columns=["qid", "docno", "label"]), tmp_path / "qrels.txt",
                    str(tmp_path / "qrels.txt"), [Qrel(*r) for r in rows]]
    run_shapes = [RUN, instir.Run.from_scores(RUN), pd.DataFrame(scored, columns=["qid", "docno", "score"]),
                  run_file, [ScoredDoc(*r) for r in scored]]
    want = instir.evaluate(QRELS, RUN, ["nDCG@10", "Robustness@10"])
    for qrels in qrels_shapes:
        for run in run_shapes:
            assert instir.evaluate(qrels, run, ["nDCG@10", "Robustness@10"]) == pytest.approx(want), (qrels, run)


def test_qrels_in_every_shape_refuse_a_fractional_grade_or_a_document_judged_twice():
    # before, a DataFrame, a dict and ir_measures rows cut 0.5 to 0 (a relevant document made non-relevant, silently)
    # and kept the last of two judgments, where a qrels file refuses both
    Qrel = namedtuple("Qrel", "query_id doc_id relevance")
    fractional = [{"q": {"d": 0.5}}, pd.DataFrame({"qid": ["q"], "docno": ["d"], "label": [0.5]}),
                  [Qrel("q", "d", 0.5)]]
    for qrels in fractional:
        with pytest.raises(FormatError, match="query 'q', document 'd', field 'relevance'.*whole numbers"):
            instir.evaluate(qrels, RUN, "nDCG@10")
    twice = [pd.DataFrame({"qid": ["q", "q"], "docno": ["d", "d"], "label": [1, 0]}), [Qrel("q", "d", 1)] * 2]
    for qrels in twice:
        with pytest.raises(FormatError, match="judged twice"):
            qrels_of(qrels)
    assert qrels_of({"q": {"d": np.int64(2), "e": 1.0}, "unjudged": {}}) == {"q": {"d": 2, "e": 1}, "unjudged": {}}


@pytest.mark.filterwarnings("error::RuntimeWarning")  # float16's overflow in the check (review)
@pytest.mark.parametrize("grades", [[2, 0, -1], [2.0, 0.0, -1.0], np.array([2, 0, 1], dtype=np.uint8),
                                    np.array([2, 0, 1], dtype=np.float16)])
def test_a_frame_of_whole_grades_in_any_numeric_column_reads_as_plain_ints_and_a_bad_one_is_named_at_its_row(grades):
    # a column of numpy ints or floats is checked at once (500k judgments: 0.37 s, 1.3-2.8 s one by one); the first
    # grade that breaks the rule is still named by its query and document
    frame = pd.DataFrame({"qid": ["q", "q", "r"], "docno": ["a", "b", "c"], "label": grades})
    got = qrels_of(frame)
    assert got == {"q": {"a": 2, "b": 0}, "r": {"c": int(grades[2])}}
    assert {type(g) for docs in got.values() for g in docs.values()} == {int}
    for bad, shown in ((0.5, "0.5"), (float("nan"), "nan"), (2.0**40, "1099511627776")):
        broken = frame.assign(label=[2.0, bad, 1.0])
        with pytest.raises(FormatError, match=f"query 'q', document 'b', field 'relevance'.*{shown}"):
            qrels_of(broken)


def test_a_benchmark_gives_evaluate_runs_numbers(sample_run):
    bench, run = sample_run
    table = evaluate_runs({"bm25": run}, bench).table
    want = table[(table.level == "all")].set_index("measure")["value"]
    got = instir.evaluate(bench, run, ["nDCG@10", "Robustness@10", "RR@10"])
    assert got == pytest.approx({m: float(want[m]) for m in got})


def test_evaluate_on_a_benchmark_drops_the_self_hits_as_evaluate_runs_does(make_benchmark):
    # every query retrieves a document carrying its own id first, then its relevant one: the official InstructIR
    # code drops the self-hit (METRICS.md), leaving the relevant document first: nDCG@10 = Robustness@10 = 1.0
    from instir.benchmarks.types import Query

    queries = [Query(id=f"{g}_{k}", query=f"query {g}", instruction=f"instruction {k}", group=g)
               for g in ("100", "200") for k in (1, 2, 3)]
    bench = make_benchmark("instructir-sample", queries, {q.id: {f"p{q.id}": 1} for q in queries},
                           extra_docs=tuple(q.id for q in queries))
    run = pd.DataFrame([r for q in bench.queries for r in ((q, q, 3.0), (q, f"p{q}", 2.0))],
                       columns=["qid", "docid", "score"])
    assert instir.evaluate(bench, run, ["nDCG@10", "Robustness@10"]) == {"nDCG@10": 1.0, "Robustness@10": 1.0}
    table = evaluate_runs({"s": run}, bench, ["nDCG@10"]).table.set_index("measure")["value"]
    assert table["nDCG@10"] == table["Robustness@10"] == 1.0


def test_a_benchmark_of_no_family_is_scored_with_trec_evals_staples(make_benchmark):
    """nDCG@10, RR@10, R@100 and P@10 when no measure is asked (scoring.GENERIC_MEASURES), each as
    pytrec_eval computes it: b, relevant, at rank 15 counts for R@100 (1.0), not at 10."""
    import pytrec_eval

    from instir.benchmarks.types import Query

    bench = make_benchmark("my-own-bench", [Query(id="q", query="query")], {"q": {"a": 1, "b": 1}},
                           extra_docs=tuple(f"n{i:02d}" for i in range(13)))
    assert bench.family is None
    docs = ["a", *(f"n{i:02d}" for i in range(13)), "b"]
    run = {"q": {d: float(len(docs) - i) for i, d in enumerate(docs)}}
    table = evaluate_runs({"s": instir.Run.from_scores(run)}, bench).table.set_index("measure")["value"]
    assert list(table.index) == ["nDCG@10", "RR@10", "R@100", "P@10"]
    direct = pytrec_eval.RelevanceEvaluator(bench.qrels, {"ndcg_cut.10", "recip_rank", "recall.100", "P.10"}
                                            ).evaluate(run)["q"]
    assert direct["recall_100"] == 1.0
    assert table.to_dict() == pytest.approx({"nDCG@10": direct["ndcg_cut_10"], "RR@10": direct["recip_rank"],
                                             "R@100": direct["recall_100"], "P@10": direct["P_10"]})


def test_ifir_native_ndcg_only_by_name_and_as_evaluate_runs_computes_it():
    bench = load_benchmark("ifir-sample/fiqa")
    run = retrieve(bench, BM25Retriever(show_progress=False), k=20)
    table = evaluate_runs({"bm25": run}, bench).table
    want = table[table.level == "all"].set_index("measure")["value"]  # one subset: fiqa
    got = instir.evaluate(bench, run, ["nDCG@20", "nDCG@20[ifir-native]"])
    assert got == pytest.approx({"nDCG@20": want["nDCG@20"], "nDCG@20[ifir-native]": want["nDCG@20[ifir-native]"]})
    assert got["nDCG@20[ifir-native]"] >= got["nDCG@20"]


def test_per_query_gives_one_row_per_query():
    frame = instir.evaluate(QRELS, RUN, ["nDCG@10", "ndcg@10"], per_query=True)
    assert list(frame.columns) == ["nDCG@10", "ndcg@10"] and frame["nDCG@10"].to_dict() == pytest.approx(NDCG)
    with pytest.raises(UsageError, match="one value per query group"):
        instir.evaluate(QRELS, RUN, ["Robustness@10"], per_query=True)


def test_the_old_argument_order_still_scores_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match="evaluate\\(qrels, run, measures\\)"):
        old = instir.evaluate(instir.Run.from_scores(RUN), QRELS, "nDCG@10")
    assert old == pytest.approx(instir.evaluate(QRELS, RUN, "nDCG@10"))


@pytest.mark.interop
def test_a_ranx_run_and_qrels_are_read_as_they_are(ranx):
    got = instir.evaluate(ranx.Qrels(QRELS), ranx.Run(RUN), ["nDCG@10", "RR@10"])
    assert got == pytest.approx(instir.evaluate(QRELS, RUN, ["nDCG@10", "RR@10"]))
    assert got["nDCG@10"] == pytest.approx(ranx.evaluate(ranx.Qrels(QRELS), ranx.Run(RUN), "ndcg@10"))


def test_what_is_neither_qrels_nor_a_run_is_named():
    with pytest.raises(UsageError, match="cannot read qrels from a int"):
        instir.evaluate(3, RUN, "nDCG@10")
    with pytest.raises(UsageError, match="has no document id column"):
        instir.evaluate(QRELS, pd.DataFrame({"qid": ["a_1"], "score": [1.0]}), "nDCG@10")


def test_groups_or_changed_given_in_another_shape_or_leaving_queries_out_are_one_line():
    # on the commit before: a bare KeyError for a list or partial groups, an AttributeError for a list as changed
    with raises_saying(UsageError, "evaluate(…, groups)", "{query id: group}", "list"):
        instir.evaluate(QRELS, RUN, "Robustness@10", groups=list(QRELS))
    with raises_saying(UsageError, "evaluate(…, groups)", "no group to 1 scored queries", "'b_1'"):
        instir.evaluate(QRELS, RUN, "Robustness@10", groups={"a_1": "a", "a_2": "a"})
    pmrr_qrels = {"q-og": {"a": 1}, "q-changed": {"a": 0}}
    pmrr_run = {"q-og": {"a": 2.0, "b": 1.0}, "q-changed": {"b": 2.0, "a": 1.0}}
    assert instir.evaluate(pmrr_qrels, pmrr_run, "p-MRR", changed={"q": ["a"]}) == pytest.approx(0.5)
    # an array or a Series of ids (df.groupby("qid").docid.unique().to_dict()) is a list of ids too
    for ids in (np.array(["a"], dtype=object), pd.Series(["a"]), {"a"}):
        assert instir.evaluate(pmrr_qrels, pmrr_run, "p-MRR", changed={"q": ids}) == pytest.approx(0.5)
    with raises_saying(UsageError, "evaluate(…, changed)", "{query id: [changed document ids]}", "list"):
        instir.evaluate(pmrr_qrels, pmrr_run, "p-MRR", changed=["a"])
    with raises_saying(UsageError, "evaluate(…, changed)", "query 'q'", "'a'", "not a list"):
        instir.evaluate(pmrr_qrels, pmrr_run, "p-MRR", changed={"q": "a"})


def test_a_benchmarks_name_in_place_of_the_qrels_says_to_load_it(tmp_path, monkeypatch, sample_run):
    # on the commit before: "FormatError: instructir-sample: file not found", the name read as a qrels path
    bench, run = sample_run
    monkeypatch.chdir(tmp_path)
    with raises_saying(UsageError, "'instructir-sample'", "benchmark", "instir.load_benchmark('instructir-sample')"):
        instir.evaluate("instructir-sample", run, "nDCG@10")
    with raises_saying(FormatError, "nope-sample", "not found"):  # any other missing file is one, as before
        instir.evaluate("nope-sample", run, "nDCG@10")


def test_a_pyterrier_frame_is_read_by_its_docno_and_two_grade_columns_are_refused():
    # before, PyTerrier's internal docid (a number) was taken over its docno: every document unknown, nDCG 0
    frame = pd.DataFrame({"qid": ["q1"], "docid": [10], "docno": ["d1"], "label": [1]})
    assert qrels_of(frame) == {"q1": {"d1": 1}}
    results = pd.DataFrame({"qid": ["q1"], "docid": [10], "docno": ["d1"], "score": [1.0]})
    assert instir.evaluate({"q1": {"d1": 1}}, results, "nDCG@10") == pytest.approx(1.0)
    with pytest.raises(UsageError, match="2 relevance columns"):
        qrels_of(frame.assign(relevance=0))
    assert qrels_of(frame.assign(query_id="other")) == {"q1": {"d1": 1}}  # the kit's and PyTerrier's qid first
    with pytest.raises(FormatError, match="query id"):
        qrels_of({"q1": {"d1": 1}, "q\x00": {}})


def test_evaluate_runs_keeps_the_queries_left_out_and_every_runs_notes(instructir_like):
    # 200_3 is judged only 0: not averaged, and listed; the second run ranks one document per query, fewer than
    # nDCG@10's cutoff and than the 9 a query can have ranked: its note is kept beside the first run's (none)
    bench = instructir_like
    bench.qrels["200_3"] = {"p200_3": 0}
    docs = sorted(bench.corpus.ids())
    full = pd.DataFrame([(q, d, float(-i)) for q in bench.queries for i, d in enumerate(docs)],
                        columns=["qid", "docid", "score"])
    shallow = full.groupby("qid").head(1)
    with pytest.warns(Warning):
        evaluation = evaluate_runs({"full": full, "shallow": shallow}, bench, ["nDCG@10"])
    assert evaluation.excluded == ["200_3"]
    assert len(evaluation.notes) == 1 and evaluation.notes[0].startswith("shallow:")
