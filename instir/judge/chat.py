"""A judge over any OpenAI-compatible chat API, called as the IFIR authors call theirs.

The call settings (:data:`CALL_SETTINGS`) are checked against the authors' code (SighingSnow/IFIR
``src/utils/llm_metrics/evaluator.py`` ``OpenAIEvaluator.score`` and
``src/utils/llm_metrics/GEval/geval.py`` ``openai_weighted_sum_score``): temperature 0, top_p 0.7,
max_tokens 512, top_logprobs 10, no JSON mode, and the authors' score rule
(:func:`instir.judge.scoring.ifir_digit_probs`). The settings are part of the judge's ``model``
string (``"gpt-4o-mini [ifir]"``), hence of every cache key, so judgments made under different
settings never mix. Where the kit still departs from the authors, see
:data:`instir.papers.divergences.DIVERGENCES` (``judge-fallbacks``).

The API key is read from an environment variable at request time and sent only in the request
header, never stored on the object or logged; every text field of a judgment has it masked
*before* it is cut to length, so no piece of it reaches the judgment cache.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from instir.errors import UsageError
from instir.http_retry import Endpoint, RequestFailed, RetryPolicy, check_concurrency
from instir.judge.scoring import answer_schema, judgment_from_chat, progress_bar
from instir.judge.types import AUTHORS_RULE, MAX_MODEL_CHARS, JudgeRequest, Judgment, OnResult, capped

#: How a chat request asks for JSON: ``json_object`` (JSON mode, widely supported), ``json_schema``
#: (OpenAI structured outputs with the rubric's schema; OpenAI, vLLM) or ``json_object_schema``
#: (llama.cpp server's JSON mode with a schema, which it enforces by grammar).
ResponseFormat = Literal["json_object", "json_schema", "json_object_schema"]

#: Characters of a malformed response body kept in a failed judgment's ``raw``.
RAW_BODY_CHARS = 2000

#: Bytes of a chat completion read at most: 512 tokens with 10 log-probabilities each take
#: about 0.4 MB; a longer answer is a failed judgment, read no further.
MAX_ANSWER_BYTES = 16 << 20

#: What may follow the asked-for model name in the name a server says answered without it being
#: another model: a dated snapshot (OpenAI's ``gpt-4o-mini-2024-07-18``, ``gpt-4-0613``) or
#: Ollama's default tag (``:latest``).
_SNAPSHOT = re.compile(r"(-\d{4}-\d{2}-\d{2}|-\d{4}|-\d{8}|:latest)")


def model_mismatch(asked: str, served: str | None) -> str | None:
    """The warning a judgment carries when the server says another model answered than ``asked``
    (``None`` when it is the same model, a dated snapshot of it, or the server does not say)."""
    if served is None or served == asked or (served.startswith(asked) and _SNAPSHOT.fullmatch(served[len(asked):])):
        return None
    return f"answered by model {served!r}, not {asked!r} as asked"


@dataclass(frozen=True)
class CallSettings:
    """How a chat judge is called; presets in :data:`CALL_SETTINGS`. ``top_p=None`` leaves it
    out of the request; ``response_format=None`` asks for no JSON mode."""

    name: str
    top_p: float | None
    max_tokens: int
    top_logprobs: int
    response_format: ResponseFormat | None
    temperature: float = 0.0

    def __post_init__(self):
        if self.response_format not in (None, "json_object", "json_schema", "json_object_schema"):
            raise ValueError(f"unknown response_format {self.response_format!r}")

    @property
    def label(self) -> str:
        """The preset's name, followed by every field that differs from that preset
        (``"ifir+max_tokens=64"``); part of the judge's model string and so of the cache key."""
        preset = CALL_SETTINGS.get(self.name)
        changed = [f"{f.name}={getattr(self, f.name)}" for f in dataclasses.fields(self)
                   if f.name != "name" and (preset is None or getattr(self, f.name) != getattr(preset, f.name))]
        return "+".join([self.name, *changed])


#: Named call settings: the authors', the default.
CALL_SETTINGS: dict[str, CallSettings] = {
    AUTHORS_RULE: CallSettings(AUTHORS_RULE, top_p=0.7, max_tokens=512, top_logprobs=10, response_format=None),
}


def resolve_call_settings(name: str | CallSettings = AUTHORS_RULE, **changes: Any) -> CallSettings:
    """The preset ``name`` (or the given settings) with single fields changed, e.g.
    ``resolve_call_settings("ifir", max_tokens=64)``. Raises ``ValueError`` for an unknown preset or field."""
    if isinstance(name, CallSettings):
        base = name
    elif name in CALL_SETTINGS:
        base = CALL_SETTINGS[name]
    else:
        raise UsageError(f"unknown call settings {name!r}: choose one of {', '.join(CALL_SETTINGS)}")
    fields = {f.name for f in dataclasses.fields(CallSettings)} - {"name"}
    unknown = sorted(set(changes) - fields)
    if unknown:
        raise UsageError(f"unknown call setting(s) {', '.join(unknown)}: choose from {', '.join(sorted(fields))}")
    return dataclasses.replace(base, **changes) if changes else base


class OpenAICompatibleJudge:
    """Judge over any OpenAI-compatible ``/chat/completions`` endpoint (OpenAI, Azure OpenAI's
    v1 API, vLLM, Ollama, llama.cpp server, LM Studio).

    ``base_url`` ends before ``/chat/completions``; it, ``api_key_env``, ``auth_header`` (Azure: ``"api-key"``),
    ``query_params`` (Azure's ``api-version``), ``timeout_s`` and ``requests_per_minute`` (the provider's rate
    limit, kept by pacing every attempt: :class:`~instir.http_retry.Pace`) make the :attr:`endpoint`
    (:class:`~instir.http_retry.Endpoint`: the key read from the environment variable so named at request
    time, no header when it is unset, as local servers need none). ``call_settings`` is a preset
    name of :data:`CALL_SETTINGS` or a :class:`CallSettings`; keyword ``overrides`` change single
    fields (``max_tokens=64``, ``response_format="json_object_schema"``). The judge's ``model``
    string is ``"<model> [<settings label>]"`` (:attr:`CallSettings.label`); ``served_model`` is
    the name sent to the server.

    Requests run ``concurrency`` at a time, each retried as
    :meth:`instir.http_retry.Endpoint.post` says (``max_retries``, ``backoff_s``,
    ``max_backoff_s``); every attempt ends within ``timeout_s`` seconds of wall clock, connect,
    headers and body together, and reads at most :data:`MAX_ANSWER_BYTES`. ``price_per_1m`` = (input, output) price
    per million tokens fills ``Judgment.cost``. Whatever a server answers becomes a judgment or a
    failed judgment with the reason, never an exception; another model than asked for
    (:func:`model_mismatch`) is a ``Judgment.warning``.
    """

    name = "openai-compatible"

    def __init__(self, model: str, base_url: str = "https://api.openai.com/v1", *,
                 call_settings: str | CallSettings = AUTHORS_RULE, api_key_env: str = "OPENAI_API_KEY",
                 auth_header: str = "Authorization", query_params: Mapping[str, str] | None = None,
                 concurrency: int = 4, timeout_s: float = 60.0, max_retries: int = 6, backoff_s: float = 1.0,
                 max_backoff_s: float = 60.0, price_per_1m: tuple[float, float] | None = None,
                 requests_per_minute: float | None = None, progress: bool = True, **overrides: Any):
        self.endpoint = Endpoint(base_url, api_key_env=api_key_env, auth_header=auth_header,
                                 query_params=query_params, timeout_s=timeout_s,
                                 requests_per_minute=requests_per_minute)
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise UsageError(f"max_retries must be a whole number >= 0, got {max_retries!r}")
        self.settings = resolve_call_settings(call_settings, **overrides)
        self.served_model = model
        self.model = f"{model} [{self.settings.label}]"
        self.concurrency = check_concurrency(concurrency)
        self.policy = RetryPolicy(max_retries, backoff_s, max_backoff_s)
        self.price_per_1m = price_per_1m
        self.progress = progress

    def __repr__(self) -> str:
        return (f"OpenAICompatibleJudge(model={self.model!r}, base_url={self.endpoint.base_url!r}, "
                f"api_key_env={self.endpoint.api_key_env!r})")

    def judge(self, requests: Sequence[JudgeRequest], on_result: OnResult | None = None) -> list[Judgment]:
        """Judge every request concurrently; results in input order, ``on_result`` called from
        this thread as each one arrives."""
        if not requests:
            return []
        out: list[Judgment | None] = [None] * len(requests)
        with self.endpoint.client() as http, \
                ThreadPoolExecutor(max_workers=self.concurrency) as pool, \
                progress_bar(len(requests), self.name, self.progress) as bar:
            futures = {pool.submit(self._judgment, http, r): i for i, r in enumerate(requests)}
            try:
                for fut in as_completed(futures):
                    i = futures[fut]
                    try:
                        judgment = fut.result()
                    except Exception as err:  # noqa: BLE001 - one request's error is its judgment's, not the batch's
                        judgment = Judgment.failure(f"judge request failed ({type(err).__name__}: {err})")
                    out[i] = self._stored(judgment)
                    if on_result is not None:
                        on_result(i, out[i])
                    bar.update(1)
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
        return out  # type: ignore[return-value]

    def _stored(self, judgment: Judgment) -> Judgment:
        """``judgment`` as it may be stored: the API key masked in every text field, then ``raw``
        cut to :data:`~instir.judge.types.MAX_RAW_CHARS` (masking first, so no piece of a key
        survives a cut) and ``error`` to :data:`RAW_BODY_CHARS`."""
        changes = {f.name: self.endpoint.scrub(getattr(judgment, f.name)) for f in dataclasses.fields(judgment)
                   if isinstance(getattr(judgment, f.name), str)}
        changes["raw"] = capped(changes["raw"])
        if changes.get("error") is not None:
            changes["error"] = capped(changes["error"], RAW_BODY_CHARS)
        return dataclasses.replace(judgment, **changes)

    def _body(self, request: JudgeRequest) -> dict[str, Any]:
        settings = self.settings
        body: dict[str, Any] = {
            "model": self.served_model,
            "messages": request.messages,
            "temperature": settings.temperature,
            "max_tokens": settings.max_tokens,
            "logprobs": True,
            "top_logprobs": settings.top_logprobs,
        }
        if settings.top_p is not None:
            body["top_p"] = settings.top_p
        if settings.response_format == "json_object":
            body["response_format"] = {"type": "json_object"}
        elif settings.response_format == "json_schema":
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": "judgment", "strict": True, "schema": answer_schema(request.rubric)}}
        elif settings.response_format == "json_object_schema":
            body["response_format"] = {"type": "json_object", "schema": answer_schema(request.rubric)}
        return body

    def _judgment(self, client: httpx.Client, request: JudgeRequest) -> Judgment:
        start = time.perf_counter()
        try:
            response = self.endpoint.post(client, "/chat/completions", self._body(request), policy=self.policy,
                                          what="judge request", max_bytes=MAX_ANSWER_BYTES)
        except RequestFailed as err:
            return Judgment.failure(str(err), latency_s=time.perf_counter() - start)
        latency = time.perf_counter() - start
        try:
            return self._read(response, request, latency)
        except Exception as err:  # noqa: BLE001 - the failure boundary: nothing a server sends escapes it
            return Judgment.failure(f"malformed response body ({type(err).__name__}: {err})",
                                    raw=self.endpoint.scrub(response.text)[:RAW_BODY_CHARS], latency_s=latency)

    def _read(self, response: httpx.Response, request: JudgeRequest, latency: float) -> Judgment:
        """The judgment in a successful response. Raises for a body that is not a chat
        completion (:meth:`_judgment` makes that a failed judgment); an answer it cannot score
        is a failed judgment already (:func:`~instir.judge.scoring.judgment_from_chat`)."""
        payload = response.json()
        if not isinstance(payload, dict):
            raise TypeError(f"the body is a JSON {type(payload).__name__}, not an object")
        choices = payload.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise TypeError("no choices[0] object")
        choice = choices[0]
        message = choice.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise TypeError("choices[0].message.content is not a string")
        served = payload.get("model")
        served = capped(served, MAX_MODEL_CHARS) if isinstance(served, str) else None
        usage = payload.get("usage")
        usage = usage if isinstance(usage, dict) else {}
        prompt_tokens, completion_tokens = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
        cost = None
        if self.price_per_1m is not None and prompt_tokens is not None and completion_tokens is not None:
            cost = (prompt_tokens * self.price_per_1m[0] + completion_tokens * self.price_per_1m[1]) / 1e6
        details = {"latency_s": latency, "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                   "cost": cost, "served_model": served, "warning": model_mismatch(self.served_model, served)}
        logprobs = choice.get("logprobs")
        if logprobs is not None and not isinstance(logprobs, dict):
            return Judgment.failure(f"malformed log-probabilities: logprobs is a JSON {type(logprobs).__name__}, "
                                    "not an object", raw=content, **details)
        tokens = logprobs.get("content") if logprobs is not None else None
        return judgment_from_chat(content, tokens, request.rubric, **details)


def _count(value: object) -> int | None:
    """A token count from a response's usage, ``None`` unless it is a whole number >= 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
