"""FollowIR under the mteb protocol: p-MRR as MTEB's task_specific_scores (evaluate_p_mrr_change)
reports it, with the og / changed halves scored on their own, and an MTEB dataset export that
the kit's own loader reads back as it loaded the benchmark."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import instir
from instir.benchmarks import followir, load_benchmark
from instir.errors import UsageError
from instir.metrics.mteb import evaluation, mteb_measure, mteb_scores
from instir.retrieval import make_retriever, retrieve
from instir.retrieval.mteb import read_mteb_predictions, write_mteb_dataset, write_mteb_predictions


@pytest.fixture(scope="module")
def core17():
    bench = load_benchmark("followir-sample/core17")
    return bench, retrieve(bench, make_retriever("bm25"))


def test_the_mteb_protocol_reports_p_mrr_and_both_halves_as_mteb_does(core17):
    bench, run = core17
    scores = mteb_scores(run, bench).scores
    assert scores["main_score"] == scores["p-MRR"] == pytest.approx(instir.evaluate(bench, run, "p-MRR"), abs=1e-12)
    for half in ("og", "changed"):
        kit = instir.evaluate(bench, run, [f"AP@1000[{half}]", f"nDCG@5[{half}]"])
        assert scores[f"{half}.map_at_1000"] == round(kit[f"AP@1000[{half}]"], 5)
        assert scores[f"{half}.ndcg_at_5"] == round(kit[f"nDCG@5[{half}]"], 5)
    # the top-level scores mix both halves, as MTEB's do
    assert scores["map_at_1000"] == round(instir.evaluate(bench, run, "AP@1000"), 5)


def test_the_mteb_evaluation_has_one_p_mrr_value_per_topic_for_the_paired_tests(core17):
    bench, run = core17
    result = evaluation({"bm25": run}, bench)
    assert list(result.table["measure"]) == ["p-MRR", "og.map_at_1000", "og.ndcg_at_5", "main_score"]
    assert sorted(result.per_group["group"]) == ["sample-301", "sample-302", "sample-303"]
    assert set(result.per_query["measure"]) == {"og.map_at_1000", "og.ndcg_at_5"}
    assert all(q.endswith("-og") for q in result.per_query["qid"])


def test_the_mteb_protocols_p_mrr_breaks_ties_by_document_id_as_mteb_does():
    """mteb's get_rank_from_dict sorts by (score, doc id) descending (mteb/_evaluators/retrieval_metrics.py, since
    PR #5241); the expected value is test_pmrr's independent re-statement of it, not the insertion rule's."""
    from tests.metrics.test_pmrr import mteb_pmrr

    bench = load_benchmark("followir-sample/news21")
    lists, changed = bench.meta["top_ranked"], bench.meta["changed"]
    frame = pd.DataFrame([(q, d, 2.0 if i == 0 and q.endswith("-og") else 1.0) for q, docs in lists.items()
                          for i, d in enumerate(docs)], columns=["qid", "docid", "score"])
    by_candidates = {q: dict(zip(part["docid"], part["score"])) for q, part in frame.groupby("qid", sort=False)}
    expected, _ = mteb_pmrr(by_candidates, changed)
    assert expected != mteb_pmrr(by_candidates, changed, old_ties=True)[0]  # the two tie rules differ here
    assert mteb_scores(frame, bench).scores["p-MRR"] == pytest.approx(expected, abs=1e-12)
    assert expected == pytest.approx(-0.225)


def test_p_mrr_is_refused_on_a_task_without_pairs():
    assert mteb_measure("p-MRR") == "p-MRR" and mteb_measure("og.nDCG@5") == "og.ndcg_at_5"
    bench = load_benchmark("ifir-sample/nfcorpus")
    run = retrieve(bench, make_retriever("bm25"))
    with pytest.raises(UsageError, match="-og/-changed pairs"):
        evaluation({"bm25": run}, bench, ["p-MRR"])


def test_predictions_written_for_mteb_read_back_to_the_same_scores(core17, tmp_path):
    bench, run = core17
    path = write_mteb_predictions(run, bench, tmp_path, model_name="bm25")
    assert path.name == "Core17InstructionRetrieval_predictions.json"
    assert set(json.loads(path.read_text())["default"]["test"]) == set(bench.queries)
    predictions = read_mteb_predictions(path)
    assert mteb_scores(predictions.scores, bench).scores == mteb_scores(run, bench).scores


def test_an_exported_mteb_dataset_loads_back_as_the_benchmark(tmp_path):
    bench = load_benchmark("followir-sample/news21")
    folder = write_mteb_dataset(bench, tmp_path / "dataset", template=None)
    readme = (folder / "README.md").read_text()
    assert "config_name: top_ranked" in readme and "split: qrel_diff" in readme
    back = followir.load(folder, subset="news21", setting="instructed", name="followir/news21", revision="local",
                         is_sample=False)
    assert back.layout == "mteb" and back.queries == bench.queries and back.qrels == bench.qrels
    assert back.meta["top_ranked"] == bench.meta["top_ranked"] and back.meta["changed"] == bench.meta["changed"]
