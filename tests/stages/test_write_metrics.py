"""The evaluate stage's one aggregation (:func:`instir.stages.evaluate.write_metrics`), from evaluations built by
hand: each benchmark's systems against its first listed one on its headline measures, its paper table with Holm's
letters under the benchmark's label, each run's notes, and no table left from an earlier run."""

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
