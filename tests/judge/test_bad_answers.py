"""A judge answer can only become a judgment or a recorded failure (issue 24, item 2): every
backend reads what it is given inside its failure boundary, logprobs that are not the logs of
probabilities fail the judgment (never weighted, never cached as a success), stored answers are
capped, the model a server says answered is kept and a mismatch is a counted warning, and one
bad answer never ends ``instir judge`` or notebook 04's stage."""

import json
import math
import sqlite3
from types import SimpleNamespace

import pytest
from judge_fakes import FakeChatServer, Reply, chat_body, numbered_requests, scored_reply, stored_rows

from instir.cli import main
from instir.judge.cache import CachedJudge, request_key
from instir.judge.chat import RAW_BODY_CHARS, OpenAICompatibleJudge, model_mismatch
from instir.judge.rubrics import rubric_for
from instir.judge.scoring import MAX_ANSWER_CHARS, expected_score, judgment_from_chat
from instir.judge.types import MAX_MODEL_CHARS, MAX_RAW_CHARS, JudgeRequest

ANSWER = '{"score": 2, "reason": "ok"}'


def make_judge(url, **kw):
    return OpenAICompatibleJudge("fake-model", url, backoff_s=0.001, timeout_s=5.0, progress=False, **kw)


def with_logprobs(logprobs, content=ANSWER) -> dict:
    body = chat_body(content)
    body["choices"][0]["logprobs"] = logprobs
    return body


def score_token(logprob, alternatives) -> dict:
    """A logprobs block whose score token "2" has ``logprob`` and ``alternatives`` {token: logprob}."""
    return {"content": [
        {"token": '{"score": ', "logprob": 0.0, "top_logprobs": []},
        {"token": "2", "logprob": logprob,
         "top_logprobs": [{"token": t, "logprob": v} for t, v in alternatives.items()]},
        {"token": ', "reason": "ok"}', "logprob": 0.0, "top_logprobs": []}]}


#: Server bodies whose log-probabilities are not the logs of probabilities (issue 24's cases).
BROKEN = {
    "a list instead of an object": with_logprobs([{"token": "2", "logprob": -0.1}]),
    "strings instead of token objects": with_logprobs({"content": ["{", "2", "}"]}),
    "entries without logprob": with_logprobs({"content": [{"token": "2", "top_logprobs": [{"token": "2"}]}]}),
    "a string logprob": with_logprobs(score_token("-0.1", {"2": "-0.1", "3": -2.0})),
    "a logprob whose exp overflows": with_logprobs(score_token(0.0, {"2": 1e308, "3": -2.0})),
    "an integer logprob beyond any float": with_logprobs(score_token(0.0, {"2": 10**400, "3": -2.0})),
    # NaN, as Python's json (and many servers) write it; it weighted an answer of 2 to 5.0
    "NaN logprobs": with_logprobs(score_token(math.nan, {"2": math.nan, "5": -0.5})),
    # probabilities e^2 and e^1: weighted to 2.8 for an answer of 2
    "positive logprobs": with_logprobs(score_token(2.0, {"2": 2.0, "5": 1.0})),
    "an infinite logprob": with_logprobs(score_token(0.0, {"2": math.inf})),
    "top_logprobs an object": with_logprobs({"content": [{"token": "2", "logprob": 0.0, "top_logprobs": {"2": 0}}]}),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_broken_logprobs_are_a_stored_failure_never_a_score_or_a_traceback(case, tmp_path):
    with FakeChatServer([Reply(body=BROKEN[case])]) as server:
        judge = CachedJudge(make_judge(server.url), tmp_path / "j.sqlite")
        [j] = judge.judge(numbered_requests(1))
    assert not j.ok and j.score is None and j.weighted is None and j.weighting is None
    assert j.error.startswith("malformed log-probabilities: "), j.error
    assert j.raw == ANSWER and (j.prompt_tokens, j.completion_tokens) == (100, 10)
    [row] = stored_rows(tmp_path / "j.sqlite").to_dict("records")
    assert row["error"] == j.error and row["weighted"] is None and row["score"] is None  # not cached as a success
    assert judge.stats.failed == 1


def test_the_failure_says_which_token_and_value_broke_the_rule(tmp_path):
    with FakeChatServer([Reply(body=BROKEN["positive logprobs"]), Reply(body=BROKEN["a string logprob"]),
                         Reply(body=BROKEN["a list instead of an object"])]) as server:
        backend = make_judge(server.url, concurrency=1)
        errors = [backend.judge(numbered_requests(1, start=i))[0].error for i in range(3)]
    assert errors == [
        "malformed log-probabilities: token 1: logprob 2.0 is not the log of a probability (a number <= 0)",
        "malformed log-probabilities: token 1: logprob '-0.1' is not a number",
        "malformed log-probabilities: logprobs is a JSON list, not an object"]


def test_a_failed_judgment_from_broken_logprobs_is_judged_again_on_the_next_run(tmp_path):
    with FakeChatServer([Reply(body=BROKEN["NaN logprobs"])]) as server:
        judge = CachedJudge(make_judge(server.url), tmp_path / "j.sqlite")
        assert not judge.judge(numbered_requests(1))[0].ok
        [again] = CachedJudge(make_judge(server.url), tmp_path / "j.sqlite").judge(numbered_requests(1))
    assert again.ok and not again.from_cache and server.count == 2


def test_float_noise_above_zero_and_minus_infinity_are_probabilities():
    # 1.2e-7 is log(1) rounded in single precision; -inf is a probability of 0
    tokens = score_token(1.2e-7, {"2": 1.2e-7, "3": -math.inf})["content"]
    j = judgment_from_chat(ANSWER, tokens, rubric_for("fiqa", 3))
    assert j.ok and j.weighting == "logprobs" and j.weighted == 2.0 and j.probs == {"2": 1.0}


@pytest.mark.parametrize("probs", [{2: math.nan, 3: 0.5}, {2: math.inf}, {2: -0.1, 3: 0.5}, {2: 1.5}, {2: "0.5"}])
def test_expected_score_refuses_values_that_are_not_probabilities(probs):
    with pytest.raises(ValueError, match="not a number in 0..1"):
        expected_score(probs, 3)


# ------------------------------------------------------------------ the envelope and the answer


@pytest.mark.parametrize(("body", "problem"), [
    ({"choices": "none"}, "no choices[0] object"),
    ({"choices": [["not", "an", "object"]]}, "no choices[0] object"),
    ({"choices": [{"message": "text"}]}, "content is not a string"),
    ([1, 2, 3], "the body is a JSON list"),
])
def test_bodies_that_are_not_chat_completions_are_failures(body, problem):
    with FakeChatServer([Reply(body=json.dumps(body))]) as server:
        [j] = make_judge(server.url).judge(numbered_requests(1))
    assert not j.ok and j.error.startswith("malformed response body") and problem in j.error


def test_usage_of_the_wrong_shape_leaves_the_counts_unknown_not_a_traceback():
    for usage in ([100, 10], {"prompt_tokens": "100", "completion_tokens": -1}, "lots",
                  {"prompt_tokens": True, "completion_tokens": False}):
        body = {**scored_reply(2).body, "usage": usage}
        with FakeChatServer([Reply(body=body)]) as server:
            [j] = make_judge(server.url, price_per_1m=(1.0, 1.0)).judge(numbered_requests(1))
        assert j.ok and j.score == 2 and (j.prompt_tokens, j.completion_tokens, j.cost) == (None, None, None)


def test_an_answer_nested_deeper_than_python_recurses_is_a_malformed_answer():
    content = '{"a": ' * 10_000 + "1" + "}" * 10_000
    with FakeChatServer([Reply(body=chat_body(content))]) as server:
        [j] = make_judge(server.url).judge(numbered_requests(1))
    assert not j.ok and j.error == "malformed answer: no JSON object with a 'score' key in the answer"


def test_a_10_mb_answer_is_a_failure_and_stores_at_most_the_cap(tmp_path):
    content = '{"score": 2, "reason": "' + "x" * 10_000_000 + '"}'
    with FakeChatServer([Reply(body=chat_body(content))]) as server:
        judge = CachedJudge(make_judge(server.url), tmp_path / "j.sqlite")
        [j] = judge.judge(numbered_requests(1))
    assert not j.ok and j.error == (f"malformed answer: 10,000,026 characters, more than the {MAX_ANSWER_CHARS:,} a "
                                    "judge answer may have (the server did not keep to max_tokens)")
    assert len(j.raw) == MAX_RAW_CHARS and j.raw.startswith('{"score": 2') and j.raw.endswith(
        "… [cut: 10,000,026 characters]")
    judge.cache.close()
    stored = sum(p.stat().st_size for p in tmp_path.iterdir())
    assert stored < 200_000, stored  # was 10 MB per judgment


def test_the_judgment_cache_keeps_8000_characters_of_an_answer_as_docs_metrics_md_says(tmp_path):
    content = '{"score": 1, "reason": "' + "y" * 20_000 + '"}'
    with FakeChatServer([Reply(body=chat_body(content))]) as server:
        judge = CachedJudge(make_judge(server.url), tmp_path / "j.sqlite")
        [j] = judge.judge(numbered_requests(1))
    [row] = stored_rows(judge.cache.path).to_dict("records")
    judge.cache.close()
    assert j.ok and len(row["raw"]) == 8_000


def test_a_long_answer_within_the_limit_counts_and_is_stored_cut(tmp_path):
    content = '{"score": 1, "reason": "' + "y" * 50_000 + '"}'
    with FakeChatServer([Reply(body=chat_body(content))]) as server:
        judge = CachedJudge(make_judge(server.url), tmp_path / "j.sqlite")
        [j] = judge.judge(numbered_requests(1))
    assert j.ok and j.score == 1 and len(j.raw) == MAX_RAW_CHARS
    [row] = stored_rows(judge.cache.path).to_dict("records")
    assert row["raw"] == j.raw


# ------------------------------------------------------------------ the model that answered


def test_another_model_than_asked_is_stored_and_a_counted_warning(tmp_path):
    body = chat_body(ANSWER, model="other-model")
    with FakeChatServer(responder=lambda request: Reply(body=body)) as server:
        judge = CachedJudge(make_judge(server.url), tmp_path / "j.sqlite")
        out = judge.judge(numbered_requests(2))
    warning = "answered by model 'other-model', not 'fake-model' as asked"
    assert all(j.ok and j.served_model == "other-model" and j.warning == warning for j in out)
    rows = stored_rows(judge.cache.path)
    assert rows["served_model"].tolist() == ["other-model"] * 2 and rows["warning"].tolist() == [warning] * 2
    [cached] = CachedJudge(make_judge("http://127.0.0.1:1/v1"), tmp_path / "j.sqlite").judge(numbered_requests(1))
    assert cached.from_cache and cached.served_model == "other-model" and cached.warning == warning


def test_the_same_model_or_a_dated_snapshot_of_it_is_no_warning(tmp_path):
    with FakeChatServer([Reply(body=chat_body(ANSWER, model="fake-model-2024-07-18"))]) as server:
        [dated, same] = make_judge(server.url, concurrency=1).judge(numbered_requests(2))
    assert (dated.served_model, dated.warning) == ("fake-model-2024-07-18", None)
    assert (same.served_model, same.warning) == ("fake-model", None)
    assert model_mismatch("gpt-4o", "gpt-4o-mini") is not None  # a longer name is another model
    assert model_mismatch("gpt-4", "gpt-4-0613") is None and model_mismatch("llama3", "llama3:latest") is None
    assert model_mismatch("gpt-4o", None) is None  # a server that does not say


def test_a_cache_made_before_the_served_model_was_stored_is_set_aside_not_resealed(tmp_path):
    path = tmp_path / "old.sqlite"
    with FakeChatServer() as server:
        CachedJudge(make_judge(server.url), path).judge(numbered_requests(1))
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE judgments DROP COLUMN warning")
    db.execute("ALTER TABLE judgments DROP COLUMN served_model")
    db.execute("ALTER TABLE judgments DROP COLUMN checksum")  # a cache from before all three columns
    db.commit()
    db.close()
    set_aside = r"has tables other than the kit's \(an earlier version's, or edited\): set aside as"
    with FakeChatServer() as server, pytest.warns(UserWarning, match=set_aside):
        [j] = CachedJudge(make_judge(server.url), path).judge(numbered_requests(1))
    assert j.ok and not j.from_cache and server.count == 1  # judged again, never taken on trust
    assert {"served_model", "warning", "checksum"} <= set(stored_rows(path).columns)
    assert len(list(tmp_path.glob("old.sqlite.set-aside-*"))) == 1


# ------------------------------------------------------------------ the cache's and local backends' reading


def test_a_damaged_stored_row_is_judged_again_and_replaced_not_a_traceback(tmp_path):
    path = tmp_path / "j.sqlite"
    requests = numbered_requests(2)
    with FakeChatServer() as server:
        CachedJudge(make_judge(server.url), path).judge(requests)
        db = sqlite3.connect(path)
        keys = [request_key(r)[1] for r in requests]
        db.execute("UPDATE judgments SET probs = '{not json' WHERE text_sha256 = ?", (keys[0],))
        db.execute("UPDATE judgments SET weighted = 'lots' WHERE text_sha256 = ?", (keys[1],))
        db.commit()
        db.close()
        judge = CachedJudge(make_judge(server.url), path)
        with pytest.warns(UserWarning, match="2 stored judgment"):  # caught by the rows' checksums
            out = judge.judge(requests)
        assert all(j.ok and not j.from_cache for j in out) and judge.stats.judged == 2
        again = CachedJudge(make_judge(server.url), path).judge(requests)
    assert all(j.ok and j.from_cache for j in again)  # replaced, so read back as successes now


def test_local_lm_digit_probabilities_that_are_nan_or_zero_are_failures():
    import torch

    from instir.judge.local_lm import HFCausalLMJudge

    judge = HFCausalLMJudge("no-model-loaded", progress=False)
    request = numbered_requests(1)[0]
    for probs in (torch.full((10,), math.nan), torch.zeros(10)):
        j = judge._judgment(None, request, probs, list(range(10)), 0.1, 50)
        assert not j.ok and j.error.startswith("malformed answer: the model's probability of the score digits is")
        assert j.prompt_tokens == 50


@pytest.mark.parametrize("level", [1, 3])
def test_the_local_judge_weights_digits_by_the_authors_rule_as_a_chat_judge_reads_it(level):
    # before, the local judge kept the rubric's digits only and renormalised them before the 1 % floor
    import torch

    from instir.judge.local_lm import HFCausalLMJudge

    probs = torch.tensor([0.005, 0.2, 0.1, 0.004, 0.05, 0.02, 0.3, 0.0, 0.0, 0.0] + [0.321])  # + a non-digit token
    request = JudgeRequest("q", "i", "p", rubric_for("fiqa", level))
    tokenizer = SimpleNamespace(decode=lambda ids: str(ids[0]))
    local = HFCausalLMJudge("no-model-loaded", progress=False)._judgment(tokenizer, request, probs, list(range(10)),
                                                                         0.1, 5)
    tokens = [{"token": "1", "logprob": math.log(0.2), "top_logprobs": [
        {"token": str(d), "logprob": math.log(p)} for d, p in enumerate(probs.tolist()[:10]) if p > 0]}]
    chat = judgment_from_chat('{"score": 1, "reason": "r"}', tokens, rubric_for("fiqa", level))
    assert local.weighted == pytest.approx(chat.weighted) == pytest.approx((0.2 + 0.2 + 0.2 + 0.1) / 0.37)
    assert local.probs == pytest.approx(chat.probs) and local.score == chat.score == 1  # digit 6 is no score


def test_the_local_judge_in_bfloat16_on_a_gpu_is_another_model_in_the_cache_than_in_float32(monkeypatch, tmp_path):
    # before, both keyed as the GGUF file alone: judgments made on a GPU were served to a CPU run (0.047 apart)
    import torch

    from instir.judge.local_lm import HFCausalLMJudge

    on_cpu = HFCausalLMJudge("no-model-loaded", gguf_file="m.gguf", progress=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    on_gpu = HFCausalLMJudge("no-model-loaded", gguf_file="m.gguf", progress=False)
    assert on_cpu.model == "no-model-loaded/m.gguf [ifir]" and on_gpu.device == "cuda"
    assert CachedJudge(on_gpu, tmp_path / "c.sqlite").model != CachedJudge(on_cpu, tmp_path / "c.sqlite").model


def test_baseline_similarity_that_is_not_a_number_is_a_failure(monkeypatch):
    from instir.judge.baseline import BaselineJudge

    judge = BaselineJudge("lexical", progress=False)
    monkeypatch.setattr(judge, "_similarities", lambda batch: [math.nan, 0.5][:len(batch)])
    bad, good = judge.judge(numbered_requests(2))
    assert not bad.ok and bad.error == "similarity is nan"
    assert good.ok and good.weighted == pytest.approx(1.5)


# ------------------------------------------------------------------ instir judge and notebook 04's stage


@pytest.fixture(scope="module")
def fiqa_runs(tmp_path_factory):
    """BM25 runs on ifir-sample/fiqa: query + instruction, and the bare query."""
    from instir.benchmarks import load_benchmark
    from instir.retrieval import retrieve
    from instir.retrieval.lexical import BM25Retriever

    out = tmp_path_factory.mktemp("runs")
    benchmark, retriever = load_benchmark("ifir-sample/fiqa"), BM25Retriever(show_progress=False)
    return (retrieve(benchmark, retriever, k=20, out_dir=out).meta["path"],
            retrieve(benchmark, retriever, template="query-only", k=20, out_dir=out).meta["path"])


def alternating(request_body) -> Reply:
    """Every other answer broken (NaN logprobs), the rest good, in order of arrival."""
    alternating.n = getattr(alternating, "n", 0) + 1
    return Reply(body=BROKEN["NaN logprobs"]) if alternating.n % 2 else scored_reply(2)


def test_instir_judge_counts_broken_answers_as_failures_and_finishes(fiqa_runs, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeChatServer(responder=alternating) as server:
        code = main(["judge", "--benchmark", "ifir-sample/fiqa", "--run", fiqa_runs[0], "--query-only-run",
                     fiqa_runs[1], "--backend", "openai", "--model", "fake-model", "--base-url", server.url,
                     "--max-instances", "2", "--cache", str(tmp_path / "j.sqlite"), "--out", str(tmp_path / "report")])
    out = capsys.readouterr().out
    assert code == 1  # it finishes, and a batch notices the failures (it exited 0)
    failed = int(out.split(" failed, ")[0].rsplit(" ", 1)[1])
    assert 0 < failed < server.count and "0 with a warning" in out
    assert f"failed: {failed} distinct judgment(s): " in out


def test_instir_judge_validate_prints_the_warning_of_another_model(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    body = chat_body(ANSWER, model="other-model")
    with FakeChatServer(responder=lambda request: Reply(body=body)) as server:
        code = main(["judge-validate", "--benchmark", "ifir-sample/fiqa", "--backend", "openai", "--model",
                     "fake-model", "--base-url", server.url, "--per-stratum", "1",
                     "--cache", str(tmp_path / "j.sqlite")])
    out = capsys.readouterr().out
    assert code == 0 and f"0 failed, {server.count} with a warning" in out
    assert f"warning: {server.count} judgment(s) answered by model 'other-model', not 'fake-model' as asked" in out


def test_notebook_04s_stage_finishes_with_broken_answers_counted_and_mismatches_said(tmp_path, monkeypatch):
    from instir.stages import judge_runs, retrieve_runs, score_runs

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    retrieve_runs(tmp_path, ["ifir-sample/fiqa"], ["bm25"], k=20)
    score_runs(tmp_path)
    served = {"n": 0}

    def responder(request_body) -> Reply:
        served["n"] += 1
        if served["n"] % 3 == 0:
            return Reply(body=BROKEN["strings instead of token objects"])
        return Reply(body=chat_body(ANSWER, model="other-model")) if served["n"] % 3 == 1 else scored_reply(1)

    with FakeChatServer(responder=responder) as server:
        judging = judge_runs(tmp_path, ["ifir-sample/fiqa"], backend="openai", model="fake-model",
                             base_url=server.url, max_instances=1, repeats=1)
    positions = judging.instfol.positions
    assert positions["error"].str.startswith("malformed log-probabilities", na=False).any()
    assert positions["error"].isna().any() and positions["warning"].notna().any()
    assert judging.instfol.costs["warnings"].iloc[0] > 0
    said = judging.judged_statement()  # Markdown source: the served model's name escaped as text
    assert "carry a warning" in said and "answered by model &#x27;other\\-model&#x27;" in said
    written = (tmp_path / "judge" / "instfol_positions.csv").read_text()
    assert "other-model" in written and "malformed log-probabilities" in written


def test_judge_requests_are_judgments_in_the_order_asked_whatever_arrives():
    # bad and good answers interleaved across concurrent requests: every one answered, in order
    requests = [JudgeRequest("q", "i", f"passage [{i:02d}]", rubric_for("fiqa", 3)) for i in range(12)]
    cases = list(BROKEN)
    bodies = {f"[{i:02d}]": BROKEN[cases[i % len(cases)]] if i % 2 else scored_reply(i % 3).body for i in range(12)}

    def responder(request_body) -> Reply:
        text = json.dumps(request_body["messages"])
        return Reply(body=next(body for tag, body in bodies.items() if tag in text))

    with FakeChatServer(responder=responder) as server:
        out = make_judge(server.url, concurrency=4).judge(requests)
    assert [j.ok for j in out] == [i % 2 == 0 for i in range(12)]
    assert [j.score for j in out[::2]] == [i % 3 for i in range(0, 12, 2)]


def test_a_snapshot_is_a_date_or_version_suffix_alone_not_any_name_that_starts_with_one():
    assert model_mismatch("gpt-4", "gpt-4-1106-preview") == ("answered by model 'gpt-4-1106-preview', not 'gpt-4' "
                                                              "as asked")
    assert model_mismatch("gpt-4o-mini", "gpt-4o-mini-2024-07-18-ft") is not None


def test_a_long_served_model_name_is_kept_cut_to_its_cap():
    with FakeChatServer([Reply(body=chat_body(ANSWER, model="m" * 5000))]) as server:
        [j] = make_judge(server.url).judge(numbered_requests(1))
    assert j.ok and len(j.served_model) == MAX_MODEL_CHARS and j.served_model.endswith("[cut: 5,000 characters]")


def test_the_reason_of_a_failure_is_kept_cut_to_its_cap():
    # the reason quotes the score it could not read: a 5,000-character "score" is not stored whole
    content = '{"score": "' + "z" * 5000 + '"}'
    with FakeChatServer([Reply(body=chat_body(content))]) as server:
        [j] = make_judge(server.url).judge(numbered_requests(1))
    assert not j.ok and j.error.startswith("malformed answer: score is not an integer: 'zzz")
    assert len(j.error) == RAW_BODY_CHARS and j.error.endswith("[cut: 5,045 characters]")


def test_a_nan_log_probability_fails_the_answer_even_on_an_alternative_that_is_not_weighed():
    tokens = score_token(-0.1, {"2": -0.1, "3": -2.5, " two": math.nan})["content"]
    j = judgment_from_chat(ANSWER, tokens, rubric_for("fiqa", 3))
    assert not j.ok and j.error.startswith("malformed log-probabilities: token 1, alternative 2: logprob nan"), j.error
