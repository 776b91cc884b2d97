"""How a judge's answer becomes a score: probability-weighted as IFIR does, the expected score
under the judge's probabilities for the score digit (:func:`expected_score`). An answer whose
score token cannot be weighted is scored by the parsed integer (``weighting="parsed"``); a
malformed answer (:func:`judgment_from_chat`) is a failed judgment (``error`` set, no score),
never a score of 0. Broken log-probabilities make the whole answer malformed, not ``parsed``: a
server that sends them is not trusted with the rest of its answer, and a failure is counted and
shown where a quiet fallback would pass for an ordinary ``parsed`` judgment.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from instir.errors import quoted
from instir.judge.rubrics import IFIR_MAX_DIGIT, Rubric
from instir.judge.types import Judgment
from instir.progress import tqdm

#: Digits below this probability are dropped before renormalising (the official code skips
#: alternatives with logprob < log(0.01)).
MIN_DIGIT_PROB = 0.01

#: Longest answer a judge may give, in characters: one that is longer is a failed judgment, not read
#: (a judge asked for at most 512 tokens writes a few thousand characters; more means the server
#: ignored ``max_tokens``). What a judgment keeps of an answer is capped at
#: :data:`~instir.judge.types.MAX_RAW_CHARS`.
MAX_ANSWER_CHARS = 100_000

#: How far above 0 a log-probability may be and still be read as 0 (a probability of 1 rounded in
#: single precision); anything higher is not a probability and makes the answer malformed.
LOGPROB_SLACK = 1e-6


def expected_score(digit_probs: Mapping[int, float], max_score: int,
                   min_prob: float = MIN_DIGIT_PROB) -> tuple[float, dict[str, float]] | None:
    """Expected score under a digit distribution: digits 0..``max_score`` with probability
    >= ``min_prob`` are kept and renormalised. Returns ``(expected, kept distribution)``
    or ``None`` when no digit survives. Raises ``ValueError`` for a value that is not a
    probability (NaN, infinite, negative or above 1), which would otherwise be dropped or
    weighted without a word."""
    for d, p in digit_probs.items():
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0 + LOGPROB_SLACK:
            raise ValueError(f"the probability of digit {d} is {quoted(p, 40)}, not a number in 0..1")
    kept = {d: p for d, p in digit_probs.items() if 0 <= d <= max_score and p >= min_prob}
    total = sum(kept.values())
    if not kept or total <= 0:
        return None
    dist = {str(d): p / total for d, p in sorted(kept.items())}
    return sum(int(d) * p for d, p in dist.items()), dist


def parse_answer(text: str, max_score: int) -> int:
    """The score in a judge's answer.

    Finds the first JSON object with a ``score`` key anywhere in ``text`` (code fences and
    chatter around it are tolerated). A string score counts when it is a decimal number
    (``"2"``; not ``"²"``, which ``str.isdigit`` accepts but ``int`` refuses). Raises ``ValueError``
    saying what is wrong when there is no such object or the score is not an integer in
    0..``max_score``.
    """
    decoder = json.JSONDecoder()
    for start in (m.start() for m in re.finditer(r"\{", text)):
        try:
            obj, _ = decoder.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):  # not JSON, or nested deeper than Python recurses
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
        return value
    raise ValueError("no JSON object with a 'score' key in the answer")


def _logprob(value: Any, where: str) -> float:
    """``value`` as a log-probability (at most 0; -inf, a probability of 0, included), or
    ``ValueError`` saying what it is instead."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where}: logprob {quoted(value, 40)} is not a number")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond any float
        number = math.inf if value > 0 else -math.inf
    if math.isnan(number) or number > LOGPROB_SLACK:
        raise ValueError(f"{where}: logprob {quoted(value, 40)} is not the log of a probability (a number <= 0)")
    return min(number, 0.0)


def _token(entry: Any, where: str) -> str:
    if not isinstance(entry, Mapping):
        raise ValueError(f"{where} is {quoted(entry, 40)}, not an object with token and logprob")
    token = entry.get("token")
    if not isinstance(token, str):
        raise ValueError(f"{where} has no token text (token is {quoted(token, 40)})")
    if "logprob" not in entry:
        raise ValueError(f"{where} ({quoted(token, 40)}) has no logprob")
    return token


def checked_logprobs(tokens: Any) -> list[dict[str, Any]] | None:
    """The per-token log-probabilities of a chat answer (OpenAI ``logprobs.content``) checked
    and normalised, or ``None`` when there are none. Every entry must be an object with a
    ``token`` text and a ``logprob``, its ``top_logprobs`` (missing or null: none) a list of
    the same; every ``logprob`` a number at most 0 (:data:`LOGPROB_SLACK` above 0 is read as
    0; -inf is a probability of 0). Returns entries ``{"token", "logprob", "top_logprobs"}``
    with float log-probabilities; raises ``ValueError`` naming the first entry that breaks a rule."""
    if tokens is None:
        return None
    if isinstance(tokens, (str, bytes, Mapping)) or not isinstance(tokens, Sequence):
        raise ValueError(f"the token list is {type(tokens).__name__} {quoted(tokens, 40)}, not a list of tokens")
    out = []
    for i, entry in enumerate(tokens):
        where = f"token {i}"
        token = _token(entry, where)
        logprob = _logprob(entry["logprob"], where)
        alternatives = entry.get("top_logprobs")
        if alternatives is None:
            alternatives = []
        if isinstance(alternatives, (str, bytes, Mapping)) or not isinstance(alternatives, Sequence):
            raise ValueError(f"{where}: top_logprobs is {quoted(alternatives, 40)}, not a list")
        top = []
        for j, alt in enumerate(alternatives):
            alt_where = f"{where}, alternative {j}"
            text = _token(alt, alt_where)
            top.append({"token": text, "logprob": _logprob(alt["logprob"], alt_where)})
        out.append({"token": token, "logprob": logprob, "top_logprobs": top})
    return out


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
                       **usage: Any) -> Judgment:
    """Turn a chat answer (and its per-token log-probabilities, if any) into a judgment.

    The score is parsed from ``content`` and weighted by the score token's top
    log-probabilities under the authors' rule (:func:`ifir_digit_probs`; scores 0-5 are
    accepted and digits 0-5 kept on every rubric, as the authors do). Without usable
    log-probabilities the parsed integer is the score (``weighting="parsed"``). A malformed
    answer is a failure: no readable score, longer than :data:`MAX_ANSWER_CHARS`, or
    log-probabilities :func:`checked_logprobs` refuses (see the module docstring). Never raises
    for anything a server can send.
    """
    top = rubric.taken_top
    if len(content) > MAX_ANSWER_CHARS:
        return Judgment.failure(f"malformed answer: {len(content):,} characters, more than the {MAX_ANSWER_CHARS:,} "
                                "a judge answer may have (the server did not keep to max_tokens)", raw=content,
                                **usage)
    try:
        score = parse_answer(content, top)
    except ValueError as err:
        return Judgment.failure(f"malformed answer: {err}", raw=content, **usage)
    try:
        tokens = checked_logprobs(logprobs)
        probs = ifir_digit_probs(tokens, score) if tokens else None
        # each alternative already passed the 1 % floor; a sum of them is never dropped again
        weighted = expected_score(probs, top, min_prob=0.0) if probs else None
    except ValueError as err:
        return Judgment.failure(f"malformed log-probabilities: {err}", raw=content, **usage)
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


def progress_bar(total: int, name: str, enabled: bool) -> tqdm:
    """A progress bar for a judging loop (off when asked, or for a handful of requests)."""
    return tqdm(total=total, desc=f"judging ({name})", unit="judgment", disable=not enabled or total < 8)
