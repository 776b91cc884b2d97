"""Plain types shared by the judge module: what is asked of a judge (:class:`JudgeRequest`),
what it answers (:class:`Judgment`), and the protocol every judge backend follows (:class:`Judge`).

A judgment either succeeded (``error is None``; ``score`` and ``weighted`` set) or failed
(``error`` set; ``score`` and ``weighted`` are ``None``). A failure is never a score of 0:
InstFol drops failed positions from both lists and counts them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from instir.judge.rubrics import rubric_for

if TYPE_CHECKING:
    from instir.benchmarks.types import Doc, Query
    from instir.judge.rubrics import Rubric

#: The validation's gold labels in grade order (grade = position: 0 not relevant, 1 sibling,
#: 2 relevant).
LABELS = ("not_relevant", "sibling", "relevant")

#: How ``Judgment.weighted`` was obtained: from the score token's top log-probabilities
#: (chat API), from next-token logits over the allowed digits (in-process LM), from the parsed
#: integer alone (server gave no usable log-probabilities), or by a no-LLM baseline.
Weighting = Literal["logprobs", "logits", "parsed", "baseline"]

#: Called by a backend as each judgment is made, with the request's index in the input list,
#: so a cache can store it at once (a kill then loses at most the judgments in flight).
OnResult = Callable[[int, "Judgment"], None]

#: Characters of a judge's answer a judgment keeps in ``raw`` (and so in the judgment cache);
#: a longer answer is cut to this many and marked (:func:`capped`). A normal answer (512 tokens at
#: most) is a few thousand characters.
MAX_RAW_CHARS = 8000

#: The name of the authors' call settings and score rule, a chat judge's default
#: (:data:`instir.judge.chat.CALL_SETTINGS`).
AUTHORS_RULE = "ifir"

#: Characters of the model name a server says answered (``Judgment.served_model``) that are kept.
MAX_MODEL_CHARS = 200


def capped(text: str, limit: int = MAX_RAW_CHARS) -> str:
    """``text`` cut to ``limit`` characters, the cut marked with how long the whole was."""
    if len(text) <= limit:
        return text
    mark = f" … [cut: {len(text):,} characters]"
    return text[:max(0, limit - len(mark))] + mark


@dataclass(frozen=True)
class JudgeRequest:
    """One (query, instruction, passage) triple to be scored with ``rubric``.

    The query and the instruction stay separate so every rubric can show both; for a
    query-only retrieval run the judge still sees the instance's instruction (InstFol judges
    both lists against the same instruction).
    """

    query: str
    instruction: str
    passage: str
    rubric: Rubric

    @classmethod
    def for_instance(cls, query: Query, doc: Doc) -> JudgeRequest:
        """Passage ``doc`` judged against instance ``query`` on the rubric of its subset and level."""
        return cls(query.query, query.instruction, doc.indexed_text, rubric_for(query.subset, query.level))

    @property
    def messages(self) -> list[dict[str, str]]:
        """The chat messages a judge is sent for this request (:meth:`Rubric.render`)."""
        return self.rubric.render(self.query, self.instruction, self.passage)


def judged_text(request: JudgeRequest) -> str:
    """The exact text a judge sees for a request (its rendered messages as canonical JSON);
    the judgment cache keys on its hash."""
    return json.dumps(request.messages, ensure_ascii=False, separators=(",", ":"))


@dataclass(frozen=True)
class Judgment:
    """A judge's answer for one request.

    ``score`` is the integer the judge gave (argmax for logit-based backends), ``weighted`` the
    expected score under the judge's probabilities (equal to ``score`` when ``weighting`` is
    ``"parsed"``), ``probs`` the renormalised distribution over the allowed digits (keys are
    the digits as strings) where one exists. A chat judge reads digits 0-5 on every rubric, so
    ``score`` and ``weighted`` can exceed the rubric's maximum, as in the authors' code. ``raw``
    keeps the backend's answer text (at most :data:`MAX_RAW_CHARS` characters where it is
    stored); ``error`` says why a judgment failed. Token counts and cost are ``None`` where a
    backend cannot tell. ``served_model`` is the model a server says answered (chat APIs),
    ``warning`` what is doubtful about a judgment that still counts (e.g. answered by another
    model than asked for); both are ``None`` where there is nothing to say.
    """

    score: int | None
    weighted: float | None
    probs: dict[str, float] | None
    weighting: Weighting | None
    raw: str
    error: str | None = None
    latency_s: float = 0.0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost: float | None = None
    served_model: str | None = None
    warning: str | None = None
    from_cache: bool = False

    @property
    def ok(self) -> bool:
        """True for a usable judgment (no error and a weighted score)."""
        return self.error is None and self.weighted is not None

    @classmethod
    def failure(cls, error: str, raw: str = "", **usage) -> "Judgment":
        """A failed judgment: no score, the reason in ``error`` (never a score of 0)."""
        return cls(score=None, weighted=None, probs=None, weighting=None, raw=raw, error=error, **usage)


class Judge(Protocol):
    """What every judge backend offers.

    ``name`` identifies the backend kind (``openai-compatible``, ``hf-causal-lm``,
    ``baseline-lexical`` …) and ``model`` the model behind it; together with the rubric version
    and the judged text they key the judgment cache. ``judge`` returns one judgment per
    request, in input order, and calls ``on_result`` (from the calling thread) as each one is made.
    """

    name: str
    model: str

    def judge(self, requests: Sequence[JudgeRequest], on_result: OnResult | None = None) -> list[Judgment]:
        """Judge every request; failures come back as failed judgments, not exceptions."""
        ...
