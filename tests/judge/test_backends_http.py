"""OpenAICompatibleJudge against a real HTTP server on 127.0.0.1: retries, Retry-After,
timeouts, garbage, authentication, key masking, call settings, concurrency, usage and cost."""

import json
import re
import socket
import time

import pytest
from judge_fakes import (
    ECHO_AUTH,
    FakeChatServer,
    Reply,
    chat_body,
    numbered_requests,
    scored_reply,
    stored_rows,
)
from says import raises_saying

from instir.http_retry import ERROR_BODY_CHARS
from instir.judge.cache import CachedJudge, request_key
from instir.judge.chat import RAW_BODY_CHARS, OpenAICompatibleJudge


def make_judge(url, **kw):
    kw.setdefault("backoff_s", 0.001)
    kw.setdefault("timeout_s", 5.0)
    kw.setdefault("progress", False)
    return OpenAICompatibleJudge("fake-model", url, **kw)


def test_429_with_retry_after_is_retried_after_the_stated_wait():
    with FakeChatServer([Reply(429, '{"error": "slow down"}', {"Retry-After": "1"})]) as server:
        start = time.perf_counter()
        [j] = make_judge(server.url).judge(numbered_requests(1))
        elapsed = time.perf_counter() - start
    assert j.ok and j.weighting == "logprobs"
    assert server.count == 2
    assert elapsed >= 0.95  # the header's 1 s, not the 1 ms backoff
    assert j.latency_s >= 0.95


def test_server_errors_are_retried_with_backoff():
    with FakeChatServer([Reply(500, "boom"), Reply(503, "busy")]) as server:
        [j] = make_judge(server.url).judge(numbered_requests(1))
    assert j.ok and server.count == 3


def test_timeout_is_retried():
    with FakeChatServer([Reply(body=scored_reply(2).body, delay_s=1.5)]) as server:
        [j] = make_judge(server.url, timeout_s=0.3).judge(numbered_requests(1))
    assert j.ok and j.score == 1  # the second (default) reply, not the late one
    assert server.count == 2


def test_persistent_errors_give_a_failed_judgment_after_max_retries():
    with FakeChatServer(responder=lambda body: Reply(502, "bad gateway")) as server:
        [j] = make_judge(server.url, max_retries=2).judge(numbered_requests(1))
    assert not j.ok and j.score is None and j.weighted is None
    assert "gave up after 3 attempts" in j.error and "HTTP 502" in j.error
    assert server.count == 3


def test_client_error_is_not_retried():
    with FakeChatServer([Reply(400, '{"error": "context too long"}')]) as server:
        [j] = make_judge(server.url).judge(numbered_requests(1))
    assert not j.ok and j.error.startswith("HTTP 400") and server.count == 1


def test_garbage_body_is_a_failed_judgment_not_zero():
    with FakeChatServer([Reply(200, "<html>gateway</html>")]) as server:
        [j] = make_judge(server.url).judge(numbered_requests(1))
    assert not j.ok and j.score is None and "malformed response body" in j.error
    assert "<html>" in j.raw and server.count == 1


def test_garbage_answer_text_is_a_failed_judgment_not_zero():
    with FakeChatServer([Reply(body=chat_body("Relevant, I'd say."))]) as server:
        [j] = make_judge(server.url).judge(numbered_requests(1))
    assert not j.ok and j.score is None and "malformed answer" in j.error
    assert (j.prompt_tokens, j.completion_tokens) == (100, 10)  # a paid failure still records its tokens


def test_connection_refused_is_a_failed_judgment():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    [j] = make_judge(f"http://127.0.0.1:{port}/v1", max_retries=1).judge(numbered_requests(1))
    assert not j.ok and "connection error" in j.error


def test_a_server_gone_fails_the_rest_unsent_after_a_few_requests_in_a_row_gave_up(monkeypatch):
    # before, every request went through every retry (about 48 s each at the defaults), twice in the judge stage
    from instir import http_retry

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    waits = []
    monkeypatch.setattr(http_retry.time, "sleep", waits.append)
    out = make_judge(f"http://127.0.0.1:{port}/v1", max_retries=2, concurrency=1).judge(numbered_requests(10))
    assert all(not j.ok and "connection error" in j.error for j in out)
    assert sum("not sent" in j.error for j in out) == 10 - http_retry.DOWN_AFTER
    assert len(waits) == http_retry.DOWN_AFTER * 2  # the retries of the requests that were sent


def test_a_server_behind_a_proxy_is_always_sent_to_after_requests_gave_up(monkeypatch):
    # found by this stop's regression review: the breaker probed the host itself, which only the proxy can reach, so
    # three dropped requests stopped every later one for good
    from instir import http_retry

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{port}")  # a proxy that is down: every request fails
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.setattr(http_retry.time, "sleep", lambda s: None)
    assert http_retry.through_proxy("http://judge.invalid/v1")
    out = make_judge("http://judge.invalid/v1", max_retries=0, concurrency=1).judge(numbered_requests(6))
    assert all("gave up after 1 attempts" in j.error for j in out)  # each sent, none refused unsent


def test_a_host_behind_a_proxy_is_never_called_unreachable_before_a_run_either(monkeypatch):
    # the check before a run (require_reachable, the Hub's online test) shares the breaker's probe: a host only the
    # proxy resolves was "unreachable" there too
    from instir.http_retry import unreachable

    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert unreachable("https://judge.invalid/v1", 1.0) is None
    monkeypatch.setenv("NO_PROXY", "judge.invalid")
    assert unreachable("https://judge.invalid/v1", 1.0) is not None


def test_a_server_back_after_requests_gave_up_is_sent_to_again():
    judge = make_judge("http://127.0.0.1:9/v1", max_retries=0)
    judge.judge(numbered_requests(3))  # port 9: nothing answers
    with FakeChatServer(script=[scored_reply(2)] * 2) as server:
        judge.endpoint.base_url = server.url  # the same client, its server back (here: on another port)
        out = judge.judge(numbered_requests(2))
    assert [j.score for j in out] == [2, 2]


def test_results_come_back_in_input_order_with_bounded_concurrency():
    def by_passage(body):
        number = int(re.search(r"passage number (\d+)", body["messages"][1]["content"]).group(1))
        reply = scored_reply(number % 4)
        reply.delay_s = 0.1
        return reply

    seen = []
    with FakeChatServer(responder=by_passage) as server:
        out = make_judge(server.url, concurrency=3).judge(numbered_requests(12), on_result=lambda i, j: seen.append(i))
    assert [j.score for j in out] == [i % 4 for i in range(12)]
    assert sorted(seen) == list(range(12))
    assert server.max_in_flight == 3


def _paced(judge, per_minute):
    """``judge`` with its endpoint's pace on a clock that stands still at 100 s, recording the waits it asks for."""
    from instir.http_retry import Pace

    waits = []
    judge.endpoint.pace = Pace(per_minute, clock=lambda: 100.0, sleep=waits.append)
    return judge, waits


def test_a_rate_limit_spreads_every_attempt_of_one_call_over_the_minute_whatever_the_concurrency():
    # before, the limit (the Ray sweep's alone) let a whole call's requests start at once: 200 requests of one call
    # under a limit of 60 a minute all began within seconds, and their retries were not counted
    with FakeChatServer([Reply(500, "boom")]) as server:  # the first attempt fails: its retry is a request too
        judge, waits = _paced(make_judge(server.url, concurrency=4, requests_per_minute=60), 60)
        out = judge.judge(numbered_requests(5))
    assert all(j.ok for j in out) and server.count == 6
    assert sorted(waits) == [1.0, 2.0, 3.0, 4.0, 5.0]  # one start a second: never two within one 60/60 s


def test_the_pace_starts_at_most_the_rate_in_any_minute():
    from instir.http_retry import Pace

    now, starts = [0.0], []

    def sleep(seconds):
        now[0] += seconds

    pace = Pace(7, clock=lambda: now[0], sleep=sleep)
    for step in [0.0] * 20 + [3.0, 50.0, 0.0, 0.0, 120.0] + [0.0] * 10:  # bursts and pauses between requests
        now[0] += step
        pace.wait()
        starts.append(now[0])
    assert max(sum(t <= s < t + 60 - 1e-9 for s in starts) for t in starts) == 7  # (60 / 7) * 7 is 59.999…
    assert Pace(None).interval == 0.0


def test_judgments_the_cache_holds_are_not_paced(tmp_path):
    with FakeChatServer() as server:
        judge, waits = _paced(make_judge(server.url, requests_per_minute=30), 30)
        cached = CachedJudge(judge, tmp_path / "j.sqlite")
        cached.judge(numbered_requests(3))
        cached.judge(numbered_requests(3))
    assert waits == [2.0, 4.0] and server.count == 3


@pytest.mark.parametrize("value", [0, -1, float("inf"), "fast", True, 1e-300])  # 1e-300: a wait no clock holds
def test_a_rate_limit_that_is_no_positive_number_is_refused(value):
    with raises_saying(ValueError, "requests_per_minute takes a positive number"):
        make_judge("http://127.0.0.1:1/v1", requests_per_minute=value)


def test_default_call_settings_are_the_authors():
    # SighingSnow/IFIR src/utils/llm_metrics/evaluator.py, OpenAIEvaluator.score
    with FakeChatServer() as server:
        judge = make_judge(server.url)
        judge.judge(numbered_requests(1))
    _, body = server.received[0]
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["logprobs"], body["top_logprobs"]) == (
        0, 0.7, 512, True, 10)
    assert "response_format" not in body  # no JSON mode
    assert body["model"] == "fake-model" and judge.model == "fake-model [ifir]"
    assert [m["role"] for m in body["messages"]] == ["system", "user"]


def test_the_default_judges_cache_key_is_unchanged():
    """The model string and request key every existing cache holds for the default judge."""
    assert make_judge("http://127.0.0.1:1/v1").model == "fake-model [ifir]"
    assert make_judge("http://127.0.0.1:1/v1", max_tokens=64).model == "fake-model [ifir+max_tokens=64]"
    assert request_key(numbered_requests(1)[0]) == (
        "f4c80c95e31a81df", "d8f249719c184bd5264b53de064079118ef76ab2df3d82bad9ec290b4e8410c4")


def test_call_settings_are_part_of_the_model_string_so_cached_judgments_never_mix(tmp_path):
    with FakeChatServer() as server:
        CachedJudge(make_judge(server.url), tmp_path / "j.sqlite").judge(numbered_requests(2))
        changed = CachedJudge(make_judge(server.url, max_tokens=64), tmp_path / "j.sqlite")
        changed.judge(numbered_requests(2))
        again = CachedJudge(make_judge(server.url, max_tokens=64), tmp_path / "j.sqlite")
        again.judge(numbered_requests(2))
    (_, default), (_, sixty_four) = server.received[0], server.received[2]
    assert (default["max_tokens"], sixty_four["max_tokens"]) == (512, 64)
    assert (changed.stats.judged, again.stats.hits) == (2, 2)
    assert server.count == 4
    assert set(stored_rows(tmp_path / "j.sqlite")["model"]) == {"fake-model [ifir]", "fake-model [ifir+max_tokens=64]"}


def test_unknown_call_settings_are_refused_with_the_choices():
    with raises_saying(ValueError, "'kit'", "ifir"):
        make_judge("http://127.0.0.1:1/v1", call_settings="kit")
    with pytest.raises(ValueError, match="unknown call setting.*top_k"):
        make_judge("http://127.0.0.1:1/v1", top_k=5)


def test_schema_response_formats_carry_the_rubric_score_range():
    with FakeChatServer() as server:
        make_judge(server.url, response_format="json_schema").judge(numbered_requests(1, level=2))
        make_judge(server.url, response_format="json_object_schema").judge(numbered_requests(1, level=1))
        make_judge(server.url, response_format="json_object").judge(numbered_requests(1))
    structured, llama, json_mode = (body for _, body in server.received)
    assert structured["response_format"]["type"] == "json_schema"
    assert structured["response_format"]["json_schema"]["schema"]["properties"]["score"]["enum"] == [0, 1, 2]
    assert llama["response_format"]["type"] == "json_object"
    assert llama["response_format"]["schema"]["properties"]["score"]["enum"] == [0, 1]
    assert json_mode["response_format"] == {"type": "json_object"}


def test_api_key_comes_from_the_named_environment_variable(monkeypatch):
    monkeypatch.setenv("MY_JUDGE_KEY", "sk-test-123")
    with FakeChatServer() as server:
        make_judge(server.url, api_key_env="MY_JUDGE_KEY").judge(numbered_requests(1))
        make_judge(server.url, api_key_env="MY_JUDGE_KEY", auth_header="api-key",
                   query_params={"api-version": "2024-10-21"}).judge(numbered_requests(1))
        make_judge(server.url, api_key_env="UNSET_JUDGE_KEY").judge(numbered_requests(1))
    openai, azure, none = (headers for headers, _ in server.received)
    assert openai["Authorization"] == "Bearer sk-test-123"
    assert azure["api-key"] == "sk-test-123" and "Authorization" not in azure
    assert "Authorization" not in none and "api-key" not in none
    judge = make_judge("http://127.0.0.1:1/v1", api_key_env="MY_JUDGE_KEY")
    assert "sk-test-123" not in repr(judge) and "sk-test-123" not in repr(vars(judge))


def test_tokens_latency_and_cost_are_recorded():
    with FakeChatServer() as server:
        [j] = make_judge(server.url, price_per_1m=(0.15, 0.60)).judge(numbered_requests(1))
    assert (j.prompt_tokens, j.completion_tokens) == (100, 10)
    assert j.cost == pytest.approx((100 * 0.15 + 10 * 0.60) / 1e6)
    assert j.latency_s > 0
    assert j.probs == pytest.approx({"0": 0.3, "1": 0.7})
    assert j.weighted == pytest.approx(0.7)


def test_answer_without_logprobs_is_scored_by_the_parsed_integer():
    with FakeChatServer([Reply(body=chat_body('{"score": 2, "reason": "x"}'))]) as server:
        [j] = make_judge(server.url).judge(numbered_requests(1))
    assert j.ok and j.weighting == "parsed" and j.weighted == 2.0


def test_timeout_and_max_retries_bound_a_hung_server():
    with FakeChatServer(responder=lambda body: Reply(body=scored_reply(2).body, delay_s=1.0)) as server:
        [j] = make_judge(server.url, timeout_s=0.1, max_retries=1).judge(numbered_requests(1))
    assert not j.ok and "gave up after 2 attempts" in j.error and "timeout" in j.error
    assert server.count == 2
    assert j.latency_s >= 0.2  # a failure's latency is the time spent on it (two attempts of 0.1 s), not 0


@pytest.mark.parametrize(("option", "value", "problem"), [
    ("timeout_s", 0, "timeout must be a positive number"),
    ("timeout_s", -1.0, "timeout must be a positive number"),
    ("timeout_s", 1e300, r"at most 86,400 \(a day\)"),  # every attempt failed: "timestamp out of range"
    ("timeout_s", True, "timeout must be a positive number"),  # not a timeout of 1 s
    ("max_retries", -1, "max_retries must be a whole number"),
    ("max_retries", 1.5, "max_retries must be a whole number"),
    ("max_retries", True, "max_retries must be a whole number"),
])
def test_timeout_and_retry_counts_out_of_range_are_refused(option, value, problem):
    with pytest.raises(ValueError, match=problem):
        make_judge("http://127.0.0.1:1/v1", **{option: value})


def test_a_timeout_of_a_day_is_taken():
    assert make_judge("http://127.0.0.1:1/v1", timeout_s=86_400).endpoint.timeout_s == 86_400


def test_a_key_pasted_as_the_variable_name_is_refused(monkeypatch):
    with raises_saying(ValueError, "api_key_env", "environment variable"):
        make_judge("http://127.0.0.1:1/v1", api_key_env="sk_live_51HxYzAbCdEfGhIjKlMnOpQr")


#: a key of the OpenAI project shape; the tests check that no 8-character piece of it is stored
SECRET = "sk-proj-Q7vX2mN9pL4kR8tW1yB6cD3fG5hJ0zA"


def pieces(secret: str, size: int = 8) -> set[str]:
    return {secret[i:i + size] for i in range(len(secret) - size + 1)}


def assert_secret_absent(folder, judgments):
    for j in judgments:
        for value in (j.raw, j.error):
            assert not any(p in (value or "") for p in pieces(SECRET)), value
    stored = b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file())  # the database and its WAL
    assert stored, "nothing was stored"
    assert not any(p.encode() in stored for p in pieces(SECRET))


def straddling(cut: int) -> str:
    """A body echoing the Authorization header so that character ``cut`` falls inside the key."""
    return "x" * (cut - len("Bearer ") - len(SECRET) // 2) + ECHO_AUTH + " and the rest of the echo"


def test_the_key_is_masked_before_an_echoing_error_body_is_cut(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_JUDGE_KEY", SECRET)
    body = straddling(ERROR_BODY_CHARS)
    with FakeChatServer([Reply(401, body)]) as server:
        judge = CachedJudge(make_judge(server.url, api_key_env="MY_JUDGE_KEY"), tmp_path / "j.sqlite")
        out = judge.judge(numbered_requests(1))
    assert server.received[0][0]["Authorization"] == f"Bearer {SECRET}"
    assert not out[0].ok and out[0].error.startswith("HTTP 401: xxx") and "Bearer ***" in out[0].error
    assert_secret_absent(tmp_path, out)


def test_the_key_is_masked_before_an_echoing_malformed_body_is_cut(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_JUDGE_KEY", SECRET)
    body = straddling(RAW_BODY_CHARS)
    with FakeChatServer([Reply(200, body)]) as server:
        judge = CachedJudge(make_judge(server.url, api_key_env="MY_JUDGE_KEY"), tmp_path / "j.sqlite")
        out = judge.judge(numbered_requests(1))
    assert not out[0].ok and "malformed response body" in out[0].error and "Bearer ***" in out[0].raw
    assert_secret_absent(tmp_path, out)


def test_the_key_is_masked_in_a_completion_that_echoes_it(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_JUDGE_KEY", SECRET)
    content = '{"score": 1, "reason": "the header was %s"}' % ECHO_AUTH
    with FakeChatServer([Reply(body=chat_body(content))]) as server:
        judge = CachedJudge(make_judge(server.url, api_key_env="MY_JUDGE_KEY"), tmp_path / "j.sqlite")
        out = judge.judge(numbered_requests(1))
    assert out[0].ok and out[0].score == 1 and out[0].raw == '{"score": 1, "reason": "the header was Bearer ***"}'
    assert_secret_absent(tmp_path, out)


def test_a_top_p_of_none_is_left_out_of_the_request():
    # CallSettings: top_p=None leaves it out (OpenAI refuses a null top_p: every request would be a 400)
    with FakeChatServer() as server:
        judge = make_judge(server.url, top_p=None)
        [j] = judge.judge(numbered_requests(1))
    _, body = server.received[0]
    assert j.ok and "top_p" not in body and judge.model == "fake-model [ifir+top_p=None]"


def test_usage_without_completion_tokens_leaves_the_cost_unknown_and_the_judgment_counts():
    body = chat_body('{"score": 2, "reason": "x"}')
    body["usage"] = {"prompt_tokens": 100}
    with FakeChatServer([Reply(body=body)]) as server:
        [j] = make_judge(server.url, price_per_1m=(0.15, 0.60)).judge(numbered_requests(1))
    assert j.ok and j.score == 2 and (j.prompt_tokens, j.completion_tokens, j.cost) == (100, None, None)


def test_a_count_of_zero_tokens_is_a_count_and_costs_nothing_for_its_side():
    with FakeChatServer([Reply(body=chat_body('{"score": 2, "reason": "x"}', usage=(100, 0)))]) as server:
        [j] = make_judge(server.url, price_per_1m=(0.15, 0.60)).judge(numbered_requests(1))
    assert (j.prompt_tokens, j.completion_tokens) == (100, 0) and j.cost == pytest.approx(100 * 0.15 / 1e6)


def test_request_timeouts_and_conflicts_are_retried():
    with FakeChatServer([Reply(408, "request timeout"), Reply(409, "conflict")]) as server:
        [j] = make_judge(server.url).judge(numbered_requests(1))
    assert j.ok and server.count == 3


def test_a_server_error_with_a_long_body_is_retried_not_taken_for_an_oversized_answer():
    with FakeChatServer([Reply(503, "<html>" + "busy " * 20_000 + "</html>")]) as server:
        [j] = make_judge(server.url).judge(numbered_requests(1))
    assert j.ok and server.count == 2


def test_a_success_starts_the_count_of_requests_in_a_row_that_gave_up_again(monkeypatch):
    # a server that was down, came back and answered: a later outage retries each request again, as the first did
    from instir import http_retry

    monkeypatch.setattr(http_retry.time, "sleep", lambda s: None)
    judge = make_judge("http://127.0.0.1:9/v1", max_retries=1, concurrency=1)
    judge.judge(numbered_requests(3))  # port 9: nothing answers
    with FakeChatServer(script=[scored_reply(2)]) as server:
        judge.endpoint.base_url = server.url
        assert judge.judge(numbered_requests(1))[0].ok
    judge.endpoint.base_url = "http://127.0.0.1:9/v1"
    [j] = judge.judge(numbered_requests(1, start=5))
    assert j.error.startswith("gave up after 2 attempts; last: connection error"), j.error


def test_retry_waits_double_per_attempt_up_to_the_cap_and_a_retry_after_is_capped_too():
    import email.utils
    from datetime import datetime, timedelta, timezone

    import httpx

    from instir.http_retry import RetryPolicy

    policy = RetryPolicy(max_retries=6, backoff_s=1.0, max_backoff_s=10.0)
    for attempt, full in enumerate([1, 2, 4, 8, 10, 10]):
        assert full / 2 <= policy.backoff(attempt) <= full, attempt  # jittered in [half, all] of the wait

    def waits(value):
        return policy.retry_after(httpx.Response(429, headers={"Retry-After": value}))

    assert (waits("3"), waits("86400"), waits("-5"), waits("soon")) == (3.0, 10.0, 0.0, None)
    in_8_s = email.utils.format_datetime(datetime.now(timezone.utc) + timedelta(seconds=8), usegmt=True)
    assert 6.0 <= waits(in_8_s) <= 8.0  # an HTTP date: the seconds until then
    assert waits(email.utils.format_datetime(datetime.now(timezone.utc) + timedelta(days=1), usegmt=True)) == 10.0


def test_the_wait_before_a_late_retry_stays_at_its_cap():
    # before, 2 ** 1024 met a float at the 1025th retry: OverflowError, where the wait is capped at max_backoff_s
    from instir.http_retry import RetryPolicy

    policy = RetryPolicy(max_retries=5000, backoff_s=1.0, max_backoff_s=60.0)
    assert all(30.0 <= policy.backoff(attempt) <= 60.0 for attempt in (6, 1024, 4999))


def test_a_concurrency_past_the_bound_is_refused():
    with raises_saying(ValueError, "concurrency"):
        make_judge("http://127.0.0.1:1/v1", concurrency=65)
    assert make_judge("http://127.0.0.1:1/v1", concurrency=64).concurrency == 64


def test_the_default_port_of_a_url_without_one_is_the_schemes(monkeypatch):
    from instir import http_retry

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    tried = []

    def connect(address, timeout):
        tried.append(address)
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(http_retry.socket, "create_connection", connect)
    refused = "(Connection refused)"
    assert http_retry.unreachable("https://judge.example/v1") == f"nothing answers at judge.example:443 {refused}"
    assert http_retry.unreachable("http://judge.example/v1") == f"nothing answers at judge.example:80 {refused}"
    assert tried == [("judge.example", 443), ("judge.example", 80)]


def test_an_answer_of_exactly_the_byte_cap_is_read(monkeypatch):
    from instir.judge import chat

    body = json.dumps(chat_body('{"score": 2, "reason": "x"}', model="fake-model"))
    monkeypatch.setattr(chat, "MAX_ANSWER_BYTES", len(body.encode()))
    with FakeChatServer([Reply(body=body)]) as server:
        [j] = make_judge(server.url).judge(numbered_requests(1))
    assert j.ok and j.score == 2
    monkeypatch.setattr(chat, "MAX_ANSWER_BYTES", len(body.encode()) - 1)
    with FakeChatServer([Reply(body=body)]) as server:
        [j] = make_judge(server.url).judge(numbered_requests(1))
    assert not j.ok and j.error.startswith("the answer is larger than")


@pytest.mark.parametrize(("status", "cut", "field"), [(401, ERROR_BODY_CHARS, "error"), (200, RAW_BODY_CHARS, "raw")],
                         ids=["error body", "malformed body"])
def test_a_key_the_cut_falls_a_few_characters_into_is_masked_whole_before_the_cut(monkeypatch, status, cut, field):
    # five characters of the key before the cut: too few to be found as an echo once cut, so masking must come first
    monkeypatch.setenv("MY_JUDGE_KEY", SECRET)
    body = "x" * (cut - len("Bearer ") - 5) + ECHO_AUTH + " and the rest of the echo"
    with FakeChatServer([Reply(status, body)]) as server:
        [j] = make_judge(server.url, api_key_env="MY_JUDGE_KEY").judge(numbered_requests(1))
    text = getattr(j, field)
    assert not j.ok and "Bearer ***" in text and SECRET[:5] not in text, text[-40:]


def test_a_redirect_to_a_location_holding_the_key_is_named_masked_by_the_endpoint_itself(monkeypatch):
    # the embeddings backend raises the endpoint's error as it is: no judgment masks it afterwards
    from instir.http_retry import Endpoint, RequestFailed, RetryPolicy

    monkeypatch.setenv("MY_JUDGE_KEY", SECRET)
    target = f"https://elsewhere.example/v1/embeddings?key={SECRET}"
    with FakeChatServer([Reply(302, "", {"Location": target})]) as server:
        endpoint = Endpoint(server.url, api_key_env="MY_JUDGE_KEY")
        with endpoint.client() as http, pytest.raises(RequestFailed) as err:
            endpoint.post(http, "/embeddings", {"input": ["x"]}, policy=RetryPolicy(max_retries=0), what="embedding")
    assert str(err.value).startswith("HTTP 302 redirect to https://elsewhere.example/v1/embeddings?key=*** (not")
    assert not any(p in str(err.value) for p in pieces(SECRET))
