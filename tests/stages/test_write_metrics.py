"""The evaluate stage's one aggregation (:func:`instir.stages.evaluate.write_metrics`), from evaluations built by
hand: each benchmark's systems against its first listed one on its headline measures, its paper table with Holm's
letters under the benchmark's label, each run's notes, and no table left from an earlier run."""

import math

import pandas as pd
import pytest

from instir.metrics.evaluation import Evaluation
from instir.metrics.table import COLUMNS
from instir.report.layout import ReportLayout
from instir.retrieval.runs import RunIdCheck
from instir.stages.evaluate import TEX_MARK, write_metrics

BENCH = "instructir-sample"


def _evaluation(system, ndcg, rr, robust, qids=("q0", "q1", "q2", "q3"), notes=()):
    per_query = pd.DataFrame({"system": system, "qid": list(qids) * 2, "measure": ["nDCG@10"] * 4 + ["RR@10"] * 4,
                              "value": [*ndcg, *rr]})
    per_group = pd.DataFrame({"system": system, "group": ["g0", "g1"], "measure": "Robustness@10", "value": robust,
                              "n_queries": 2})
    table = pd.DataFrame([{"system": system, "benchmark": BENCH, "setting": "instructed", "subset": "all",
                           "level": "all", "measure": m, "value": sum(v) / len(v), "n_queries": len(v)}
                          for m, v in (("nDCG@10", ndcg), ("RR@10", rr), ("Robustness@10", robust))])[COLUMNS]
    check = RunIdCheck(unknown_qids=[], unknown_docids=[], rows_with_unknown_qid=0, rows_with_unknown_docid=0,
                       missing_qids=[])
    return Evaluation(per_query, per_group, table, checks={system: check}, notes=list(notes))


def _runs(*systems):
    return pd.DataFrame({"benchmark": BENCH, "system": list(systems), "run_file": [f"runs/{s}.trec" for s in systems]})


def _write(tmp_path, evaluations, systems, **options):
    return write_metrics(ReportLayout(tmp_path), _runs(*systems), evaluations, n_resamples=99,
                         labels={BENCH: "InstructIR (sample)"}, **options)


A = dict(ndcg=[0.2, 0.3, 0.4, 0.5], rr=[0.5, 0.5, 1.0, 1.0], robust=[0.2, 0.4])
B = dict(ndcg=[0.6, 0.8, 0.7, 0.9], rr=[1.0, 1.0, 1.0, 0.5], robust=[0.6, 0.7])


def test_every_system_is_compared_with_the_benchmarks_first_listed_one_on_its_headline_measures(tmp_path):
    metrics = _write(tmp_path, [_evaluation("a", **A), _evaluation("b", **B, notes=["b: one note"])], ["a", "b"])
    comparisons = metrics.comparisons
    assert set(comparisons["baseline"]) == {"a"} and set(comparisons["system"]) == {"b"}
    assert sorted(zip(comparisons["measure"], comparisons["unit"])) == [("Robustness@10", "group"),
                                                                        ("nDCG@10", "query")]
    ndcg = comparisons.set_index("measure").loc["nDCG@10"]
    assert ndcg["diff"] == pytest.approx((0.6 + 0.8 + 0.7 + 0.9 - 0.2 - 0.3 - 0.4 - 0.5) / 4) and ndcg["n"] == 4
    assert metrics.run_checks["notes"].tolist() == ["", "b: one note"]
    everything = _write(tmp_path, [_evaluation("a", **A), _evaluation("b", **B)], ["a", "b"], compare="all")
    assert set(everything.comparisons["measure"]) == {"nDCG@10", "RR@10", "Robustness@10"}


def test_the_benchmarks_latex_table_is_captioned_with_its_label_and_holm_corrected(tmp_path):
    metrics = _write(tmp_path, [_evaluation("a", **A), _evaluation("b", **B)], ["a", "b"])
    tex = (tmp_path / "metrics" / f"{BENCH}.tex").read_text()
    assert tex.startswith(TEX_MARK) and "InstructIR (sample), scores $\\times 100$." in tex
    assert "Holm-corrected across the pairs" in tex and set(metrics.compared[BENCH].marks["correction"]) == {"holm"}


def test_a_paper_table_written_earlier_is_removed_when_the_benchmark_no_longer_has_several_systems(tmp_path):
    _write(tmp_path, [_evaluation("a", **A), _evaluation("b", **B)], ["a", "b"])
    tex = tmp_path / "metrics" / f"{BENCH}.tex"
    assert tex.is_file()
    mine = tmp_path / "metrics" / "mine.tex"
    mine.write_text("% a table of one's own\n")
    metrics = _write(tmp_path, [_evaluation("a", **A)], ["a"])
    assert metrics.compared == {} and not tex.exists() and mine.is_file()



def _toy(qrels: dict[str, int], docs=("d1", "d2", "d3")):
    """A one-query benchmark ``q`` in memory with these qrels."""
    from instir.benchmarks.types import Benchmark, Corpus, Doc, Query

    return Benchmark(name="toy", layout="memory", revision="local", setting="instructed",
                     corpus=Corpus.from_docs(Doc(d, d) for d in docs), queries={"q": Query("q", "q", "i", group="q")},
                     qrels={"q": qrels}, meta={})


def _scored(tmp_path, benchmark, ranked: list[str]) -> tuple[float, bool]:
    """nDCG@10 of a run ranking ``ranked`` for ``q``, scored by the evaluate stage, and whether it was stored."""
    from instir.retrieval.runs import Run, write_run
    from instir.stages.evaluate import run_scores

    run = tmp_path / "runs" / "r.trec"
    if not run.is_file():
        write_run(Run(pd.DataFrame({"qid": "q", "docid": ranked, "score": [float(len(ranked) - i)
                                                                         for i in range(len(ranked))]})), run)
    evaluation, stored = run_scores(ReportLayout(tmp_path), benchmark, "runs/r.trec", "r")
    return evaluation.per_query.set_index("measure").loc["nDCG@10", "value"], stored


def test_stored_scores_are_computed_again_when_the_qrels_grades_change(tmp_path):
    # a rerun reads a run's scores back only for the same qrels, grades included: d1 and d2 relevant at ranks 1 and 2,
    # graded 1 and 2 (nDCG@10 = (1 + 2/log2 3) / (2 + 1/log2 3)), then 2 and 1 (the ideal order: 1.0)
    third = 1 / math.log2(3)
    got = [_scored(tmp_path, _toy(grades), ["d1", "d2", "d3"])
           for grades in ({"d1": 1, "d2": 2}, {"d1": 2, "d2": 1}, {"d1": 2, "d2": 1})]
    assert got == [(pytest.approx((1 + 2 * third) / (2 + third)), False), (pytest.approx(1.0), False),
                   (pytest.approx(1.0), True)]


def test_the_evaluate_stage_drops_a_document_carrying_the_querys_id_before_scoring(tmp_path):
    # InstructIR's authors drop it: d1, relevant, ranked second after the document 'q', is first (1.0, not 1/log2 3)
    assert _scored(tmp_path, _toy({"d1": 1}, docs=("q", "d1", "d2")), ["q", "d1", "d2"]) == (1.0, False)



def test_a_subsets_paper_table_is_named_after_the_benchmark_with_its_slash_replaced(tmp_path):
    runs = _runs("a", "b").assign(benchmark="ifir-sample/fiqa")
    write_metrics(ReportLayout(tmp_path), runs, [_evaluation("a", **A), _evaluation("b", **B)], compare="all",
                  n_resamples=99, labels={"ifir-sample/fiqa": "IFIR FiQA (sample)"})
    (tex,) = (tmp_path / "metrics").glob("*.tex")
    assert tex.name == "ifir-sample_fiqa.tex" and "IFIR FiQA (sample), scores" in tex.read_text()


def test_the_evaluate_stage_captions_a_benchmarks_paper_table_with_its_label(tmp_path):
    # runs listed by hand: two systems ranking three instances' relevant documents in two orders
    from instir.benchmarks import load_benchmark
    from instir.retrieval.runs import Run, write_run
    from instir.stages import score_runs

    bench = load_benchmark("instructir-sample")
    qids = list(bench.qrels)[:3]
    docs = [d for q in qids for d in bench.qrels[q]]
    for system, order in (("a", docs), ("b", docs[::-1])):
        write_run(Run(pd.DataFrame([(q, d, float(len(order) - i)) for q in qids for i, d in enumerate(order)],
                                   columns=["qid", "docid", "score"])), tmp_path / "runs" / f"{system}.trec")
    pd.DataFrame({"benchmark": BENCH, "setting": "instructed", "system": ["a", "b"],
                  "run_file": ["runs/a.trec", "runs/b.trec"]}).to_csv(tmp_path / "runs" / "runs.csv", index=False)
    score_runs(tmp_path, n_resamples=99)
    tex = (tmp_path / "metrics" / f"{BENCH}.tex").read_text()
    assert "(bundled SAMPLE, not the benchmark), scores $\\times 100$." in tex


def test_scoring_one_run_again_keeps_the_stored_scores_of_the_others(tmp_path):
    from instir.retrieval.runs import Run, write_run
    from instir.stages.evaluate import run_scores

    bench = _toy({"d1": 1})
    for name, ranked in (("r1", ["d1", "d2"]), ("r2", ["d2", "d1"])):
        write_run(Run(pd.DataFrame({"qid": "q", "docid": ranked, "score": [2.0, 1.0]})),
                  tmp_path / "runs" / f"{name}.trec")
    layout = ReportLayout(tmp_path)
    stored = [run_scores(layout, bench, f"runs/{name}.trec", name)[1] for name in ("r1", "r2", "r1", "r2")]
    assert stored == [False, False, True, True]
