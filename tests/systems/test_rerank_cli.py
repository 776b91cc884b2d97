"""``instir rerank`` end to end on the bundled InstructIR sample with a tiny local monoT5."""

import json

import pytest

pytest.importorskip("transformers")

from tiny_models import build_t5  # noqa: E402

from instir.cli import main  # noqa: E402


def test_rerank_command_writes_a_run_and_reuses_it(tmp_path, capsys):
    model = build_t5(tmp_path / "t5", ["wine cabinet definition Query: Document: Relevant:"])
    assert main(["retrieve", "--benchmark", "instructir-sample", "--retriever", "bm25", "--k", "5",
                 "--out", str(tmp_path / "runs")]) == 0
    first = capsys.readouterr().out.strip().splitlines()[-1]
    args = ["rerank", "--run", first, "--benchmark", "instructir-sample", "--reranker", "monot5", "--model",
            str(model), "--depth", "3", "--out", str(tmp_path / "rr"), "--cache", str(tmp_path / "s.sqlite")]
    assert main(args) == 0
    out = capsys.readouterr().out
    path = out.strip().splitlines()[-1]
    side = json.loads(open(path + ".json").read())
    assert side["first_stage"]["path"] == first and side["depth"] == 3
    assert side["reranker"]["identity"]["template"] == "Query: {query} Document: {text} Relevant:"
    assert main(args) == 0
    assert "(reused)" in capsys.readouterr().out


def test_rerank_command_refuses_reranker_without_model(tmp_path, capsys):
    assert main(["rerank", "--run", "x.trec", "--benchmark", "instructir-sample", "--reranker", "monot5",
                 "--out", str(tmp_path)]) == 2
    assert "--reranker needs --model" in capsys.readouterr().err


def test_rerank_on_a_reranking_task_rescores_every_candidate_by_default(tmp_path, capsys):
    model = build_t5(tmp_path / "t5", ["endangered species Query: Document: Relevant:"])
    assert main(["retrieve", "--benchmark", "followir-sample/core17", "--retriever", "bm25",
                 "--out", str(tmp_path / "runs")]) == 0
    first = capsys.readouterr().out.strip().splitlines()[-1]
    assert main(["rerank", "--run", first, "--benchmark", "followir-sample/core17", "--reranker", "monot5",
                 "--model", str(model), "--out", str(tmp_path / "rr"), "--cache", str(tmp_path / "s.sqlite")]) == 0
    side = json.loads(open(capsys.readouterr().out.strip().splitlines()[-1] + ".json").read())
    assert side["depth"] == 6 and side["pairs"] == 36  # six candidates for each of the six instances


def test_rerank_system_keeps_its_cards_batch_size_unless_one_is_given(tmp_path, monkeypatch, capsys):
    # found by a review against the authors' code: --batch-size defaulted to 64 and always replaced the card's (the
    # FollowIR cards' 8, the authors' own), and batches change left-padded scores in bfloat16
    from instir.systems import rerankers

    asked = []

    def stop_here(name, **options):
        asked.append(options["batch_size"])
        raise SystemExit(0)

    monkeypatch.setattr(rerankers, "reranker_from_name", stop_here)
    run = tmp_path / "x.trec"  # read before the reranker is built
    run.write_text("q1 Q0 d1 1 1.0 first\n")
    argv = ["rerank", "--run", str(run), "--benchmark", "followir-sample/core17", "--system", "MonoT5-base (FollowIR)",
            "--out", str(tmp_path)]
    for extra in ([], ["--batch-size", "16"]):
        with pytest.raises(SystemExit):
            main([*argv, *extra])
    assert asked == [None, 16]


def test_rerank_command_scores_with_the_query_split_and_into_the_cache_it_is_given(tmp_path, capsys):
    model = build_t5(tmp_path / "t5", ["wine cabinet definition Query: Document: Relevant:"])
    assert main(["retrieve", "--benchmark", "instructir-sample", "--retriever", "bm25", "--k", "3",
                 "--out", str(tmp_path / "runs")]) == 0
    first = capsys.readouterr().out.strip().splitlines()[-1]
    cache = tmp_path / "scores" / "s.sqlite"
    cache.parent.mkdir()
    assert main(["rerank", "--run", first, "--benchmark", "instructir-sample", "--reranker", "monot5", "--model",
                 str(model), "--depth", "2", "--query-split", "fields", "--out", str(tmp_path / "rr"),
                 "--cache", str(cache)]) == 0
    side = json.loads(open(capsys.readouterr().out.strip().splitlines()[-1] + ".json").read())
    assert side["query_split"] == "fields" and side["score_cache"] == str(cache) and cache.is_file()


def test_rerank_command_refuses_a_model_beside_a_system(tmp_path, capsys):
    assert main(["rerank", "--run", "x.trec", "--benchmark", "instructir-sample", "--system", "monoT5-base",
                 "--model", "some/model", "--out", str(tmp_path / "rr")]) == 2
    assert "--model goes with --reranker, not --system" in capsys.readouterr().err
    assert not (tmp_path / "rr").exists()
