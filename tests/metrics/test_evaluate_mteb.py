"""MTEB prediction files through ``instir evaluate`` and back out through ``instir mteb-export``.
The fixtures (tests/fixtures/mteb) were written by MTEB 2.26.24: its prediction files and the
TaskResult files it stored after scoring those very predictions."""

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from instir.cli import main

MTEB = Path(__file__).parents[1] / "fixtures" / "mteb"
RESULTS = MTEB / "results" / "instir__bm25s-sample" / "fixture"


def _stored(task: str) -> dict:
    """MTEB's own scores of the fixture predictions (its TaskResult file, rounded to 6 decimals)."""
    return json.loads((RESULTS / f"{task}.json").read_text())["scores"]["test"][0]


@pytest.mark.parametrize(("benchmark", "task"), [("instructir-sample", "InstructIR"), ("ifir-sample/fiqa", "IFIRFiQA")])
def test_the_mteb_protocol_gives_the_numbers_mteb_stored_for_the_same_predictions(tmp_path, benchmark, task,
                                                                                   capsys):
    predictions = shutil.copy(MTEB / "predictions" / f"{task}_predictions.json", tmp_path)
    measures = ["ndcg_at_10", "ndcg_at_20", "map_at_100", "recall_at_100", "precision_at_10", "mrr_at_10",
                "hit_rate_at_3", "main_score"] + (["robustness_at_10"] if task == "InstructIR" else [])
    assert main(["evaluate", "--benchmark", benchmark, "--run", str(predictions), "--protocol", "mteb",
                 "--measures", *measures, "--out", str(tmp_path / "report")]) == 0
    assert "protocol mteb" in capsys.readouterr().out
    table = pd.read_csv(tmp_path / "report" / "metrics" / "metrics.csv", dtype={"level": str})
    assert set(table["system"]) == {"instir/bm25s-sample"}  # named after mteb_model_meta.model_name
    stored = _stored(task)
    pooled = table[table["level"] == "all"].set_index("measure")["value"]
    assert {m: round(pooled[m], 6) for m in measures} == {m: stored[m] for m in measures}
    if task == "IFIRFiQA":
        levels = table[table["level"] != "all"].set_index("level")["value"]
        assert {f"level_{lv}": round(v, 6) for lv, v in levels.items()} == stored["level_scores"]


def test_a_query_missing_from_the_predictions_is_said_once_to_be_left_out_of_mtebs_mean(tmp_path, capsys):
    """Before, one line said the query scored 0 and the next that MTEB averaged over the others (which it did)."""
    data = json.loads((MTEB / "predictions" / "InstructIR_predictions.json").read_text())
    answered = data["default"]["test"]
    answered.pop(next(iter(answered)))
    predictions = tmp_path / "InstructIR_predictions.json"
    predictions.write_text(json.dumps(data))
    assert main(["evaluate", "--benchmark", "instructir-sample", "--run", str(predictions), "--protocol", "mteb",
                 "--out", str(tmp_path / "report")]) == 0
    said = [line for line in capsys.readouterr().out.splitlines() if "have no results" in line]
    assert len(said) == 1 and "score 0" not in said[0], said
    assert f"left out of MTEB's mean, which is over the {len(answered)} queries of the run" in said[0]
    table = pd.read_csv(tmp_path / "report" / "metrics" / "metrics.csv", dtype={"level": str})
    assert table.loc[table["measure"] == "ndcg_at_10", "n_queries"].tolist() == [len(answered)]


def test_the_authors_protocol_adds_robustness_native_ndcg_and_significance_to_mteb_runs(tmp_path, capsys):
    mine = shutil.copy(MTEB / "predictions" / "IFIRFiQA_predictions.json", tmp_path)
    other = tmp_path / "other" / "IFIRFiQA_predictions.json"
    other.parent.mkdir()
    data = json.loads(Path(mine).read_text())
    data["mteb_model_meta"]["model_name"] = "reversed"
    for docs in data["default"]["test"].values():  # the same documents in the opposite order
        for rank, doc in enumerate(sorted(docs, key=docs.get)):
            docs[doc] = float(rank)
    other.write_text(json.dumps(data))
    report = tmp_path / "report"
    assert main(["evaluate", "--benchmark", "ifir-sample/fiqa", "--run", str(mine), "--run", str(other),
                 "--resamples", "99", "--papers", "--mteb-results", str(MTEB / "results"), "--out", str(report)]) == 0
    out = capsys.readouterr().out
    assert "against baseline 'instir/bm25s-sample'" in out and "against the reported numbers" in out
    table = pd.read_csv(report / "metrics" / "metrics.csv", dtype={"level": str})
    assert {"nDCG@20", "nDCG@20[ifir-native]", "RR@20"} <= set(table["measure"])
    comparisons = pd.read_csv(report / "metrics" / "comparisons.csv")
    assert set(comparisons["system"]) == {"reversed"} and "p_perm_holm" in comparisons
    papers = pd.read_csv(report / "paper_tables" / "comparison.csv")
    row = papers[(papers["measure_reproduced"] == "nDCG@20") & papers["level"].isna()
                 & (papers["system"] == "instir/bm25s-sample")]
    assert row["reported"].item() == _stored("IFIRFiQA")["ndcg_at_20"] == pytest.approx(row["reproduced"].item(),
                                                                                      abs=5e-6)


def test_instructir_through_the_authors_protocol_gets_robustness(tmp_path):
    predictions = shutil.copy(MTEB / "predictions" / "InstructIR_predictions.json", tmp_path)
    assert main(["evaluate", "--benchmark", "instructir-sample", "--run", str(predictions),
                 "--out", str(tmp_path / "report")]) == 0
    table = pd.read_csv(tmp_path / "report" / "metrics" / "metrics.csv").set_index("measure")["value"]
    # no self-hits in the sample and every query answered: the two protocols agree here
    assert round(table["Robustness@10"], 6) == _stored("InstructIR")["robustness_at_10"]
    assert round(table["nDCG@10"], 5) == _stored("InstructIR")["ndcg_at_10"]


def test_an_exported_run_round_trips_through_evaluate(tmp_path, capsys):
    from instir.benchmarks import load_benchmark
    from instir.retrieval.mteb import read_predictions_run
    from instir.retrieval.runs import write_run

    fiqa = load_benchmark("ifir-sample/fiqa")
    run = read_predictions_run(MTEB / "predictions" / "IFIRFiQA_predictions.json", fiqa)
    trec = write_run(run, tmp_path / "bm25.trec")
    assert main(["mteb-export", "--benchmark", "ifir-sample/fiqa", "--run", str(trec), "--out", str(tmp_path / "x"),
                 "--model-name", "instir/bm25s-sample", "--dataset"]) == 0
    exported = tmp_path / "x" / "IFIRFiQA_predictions.json"
    assert len(list((tmp_path / "x").glob("ifir-sample-fiqa-instructed-*/queries.jsonl"))) == 1
    for path in (exported, MTEB / "predictions" / "IFIRFiQA_predictions.json"):
        shutil.copy(path, tmp_path / "x" / "again.json")
        assert main(["evaluate", "--benchmark", "ifir-sample/fiqa", "--run", str(tmp_path / "x" / "again.json"),
                     "--protocol", "mteb", "--out", str(tmp_path / path.parent.name)]) == 0
    capsys.readouterr()
    first, second = (pd.read_csv(tmp_path / name / "metrics" / "metrics.csv") for name in ("x", "predictions"))
    assert first.equals(second)


def test_bad_prediction_files_are_one_error_line_naming_file_and_field(tmp_path, capsys):
    bad = tmp_path / "IFIRFiQA_predictions.json"
    bad.write_text('{"default": {"test": {"sample-fiqa-q1_v1": {"sample-fiqa-d101": "x"}}}}')
    assert main(["evaluate", "--benchmark", "ifir-sample/fiqa", "--run", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith(f"instir evaluate: {bad}")
    assert "field 'sample-fiqa-d101': expected a finite number" in err
    bad.write_text('{"default": {"test": {"q-unknown": {"d": 1.0}}}}')
    assert main(["evaluate", "--benchmark", "ifir-sample/fiqa", "--run", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "field 'q-unknown': unknown query id" in err


def test_mteb_results_alone_line_the_scores_up_with_them_as_papers_does(tmp_path, capsys):
    predictions = shutil.copy(MTEB / "predictions" / "IFIRFiQA_predictions.json", tmp_path)
    report = tmp_path / "report"
    assert main(["evaluate", "--benchmark", "ifir-sample/fiqa", "--run", str(predictions), "--protocol", "mteb",
                 "--mteb-results", str(MTEB / "results"), "--out", str(report)]) == 0
    out = capsys.readouterr().out
    assert "against the reported numbers (×100):" in out and "paper_tables/comparison.csv" in out.splitlines()[-1]
    papers = pd.read_csv(report / "paper_tables" / "comparison.csv")
    row = papers[(papers["measure_reproduced"] == "nDCG@20") & papers["level"].isna()]
    assert row["reported"].item() == _stored("IFIRFiQA")["ndcg_at_20"]


def test_under_mtebs_protocol_the_scores_are_lined_up_with_mtebs_numbers_only(tmp_path, capsys):
    # the papers' numbers were measured under the authors' protocol: never set beside MTEB's measures
    predictions = shutil.copy(MTEB / "predictions" / "IFIRFiQA_predictions.json", tmp_path)
    report = tmp_path / "report"
    assert main(["evaluate", "--benchmark", "ifir-sample/fiqa", "--run", f"BM25={predictions}", "--protocol", "mteb",
                 "--papers", "--out", str(report)]) == 0
    papers = pd.read_csv(report / "paper_tables" / "comparison.csv")
    assert not papers["table"].astype(str).str.startswith("Table").any(), papers["table"].unique()


def test_an_mteb_predictions_files_sidecar_is_read_when_its_hash_vouches_for_the_file(tmp_path, capsys):
    """MTEB predictions have no sidecar of the kit's: none is said to disagree with the run. One placed beside the
    file with the file's hash is read, and its row count checked against the run, as a TREC run's is."""
    import hashlib

    from instir.retrieval.runs import sidecar_path

    predictions = tmp_path / "p.json"
    shutil.copy(MTEB / "predictions" / "IFIRFiQA_predictions.json", predictions)
    argv = ["evaluate", "--benchmark", "ifir-sample/fiqa", "--run", str(predictions), "--protocol", "mteb"]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 0
    assert "sidecar" not in capsys.readouterr().err
    digest = hashlib.sha256(predictions.read_bytes()).hexdigest()
    sidecar_path(predictions).write_text(json.dumps({"trec_sha256": digest, "rows": 1, "k": 7}))
    assert main([*argv, "--out", str(tmp_path / "b")]) == 0
    assert "p.json's sidecar says 1 rows, the run holds 18: its template and k are not used" in capsys.readouterr().err
