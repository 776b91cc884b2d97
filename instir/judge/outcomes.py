"""How a batch of judgments turned out, for reports: how many failed and why (the distinct
error messages, counted), and how each successful score was weighted.

Both read the per-judgment frames the judge stages write: :attr:`ValidationResult.pairs
<instir.judge.validation.ValidationResult>` and :attr:`InstFolResult.positions
<instir.judge.following.InstFolResult>`, which carry ``error`` (``None``/NaN for a success) and
``weighting`` (:data:`~instir.judge.types.Weighting`; empty for a failure).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import get_args

import pandas as pd

from instir.errors import UserError
from instir.judge.types import Judge, JudgeRequest, Judgment, Weighting

#: Weightings in the order reports list them.
WEIGHTINGS: tuple[str, ...] = get_args(Weighting)

#: What ``parsed`` means, in one sentence for readers of a report.
PARSED_MEANING = ("`parsed`: the score is the integer parsed from the judge's answer, because the answer came "
                  "without usable log-probabilities for the score (`logprobs` and `logits` take the expected score "
                  "under the judge's probabilities).")


#: What the per-judgment frames keep of each judgment, in their column order.
JUDGMENT_COLUMNS = ("score", "weighted", "weighting", "error", "warning", "served_model", "from_cache", "latency_s",
                    "cost")


def judge_each(judge: Judge, requests: Sequence[JudgeRequest | None],
               missing: str) -> tuple[list[Judgment], list[Judgment]]:
    """A judgment per request of ``requests``, in their order, each distinct request judged once (identical ones
    share its judgment); None (a document not in the corpus) is a failed judgment saying ``missing``. Returns those
    and the distinct judgments made (what :func:`judgment_counts` counts): InstFol's and judge validation's rule."""
    distinct: dict[JudgeRequest, int] = {}
    index = [None if request is None else distinct.setdefault(request, len(distinct)) for request in requests]
    judged = judge.judge(list(distinct)) if distinct else []
    failed = Judgment.failure(missing)
    return [failed if i is None else judged[i] for i in index], judged


def judgment_frame(rows: pd.DataFrame, judgments: Sequence[Judgment]) -> pd.DataFrame:
    """``rows`` (one per judgment) with :data:`JUDGMENT_COLUMNS` of ``judgments``: a failed judgment has no
    ``score`` (``Int64``) and no ``weighted`` (float, NaN)."""
    columns = {name: [getattr(j, name) for j in judgments] for name in JUDGMENT_COLUMNS}
    columns["score"] = pd.array([j.score if j.ok else None for j in judgments], dtype="Int64")
    columns["weighted"] = pd.array([j.weighted if j.ok else None for j in judgments], dtype="float64")
    return rows.assign(**columns)


def judgment_counts(judgments: Sequence[Judgment]) -> dict[str, object]:
    """How a batch of distinct judgments was made: ``judged`` now and ``from_cache``,
    ``failed_judgments``, ``parsed_judgments`` and ``warnings`` (successful judgments scored by
    the parsed integer alone, or with a warning), and the ``cost`` of those made now (None when
    the backend reports none)."""
    fresh = [j for j in judgments if not j.from_cache]
    costs = [j.cost for j in fresh if j.cost is not None]
    return {"judged": len(fresh), "from_cache": len(judgments) - len(fresh),
            "failed_judgments": sum(not j.ok for j in judgments),
            "parsed_judgments": sum(j.ok and j.weighting == "parsed" for j in judgments),
            "warnings": sum(j.ok and j.warning is not None for j in judgments), "cost": sum(costs) if costs else None}


def _shorten(text: str, max_chars: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= max_chars else text[: max_chars - 1] + "…"


def _failed(errors: Iterable[object]) -> pd.Series:
    """The error messages of the failed judgments (``None``/NaN = success)."""
    messages = pd.Series(list(errors), dtype="object")
    return messages[messages.notna()].astype("string")


def error_counts(errors: Iterable[object], limit: int = 5, max_chars: int = 200,
                 examples: Iterable[object] | None = None, per_error: int = 3) -> pd.DataFrame:
    """The distinct error messages among ``errors`` (``None``/NaN = success), most frequent first,
    as rows ``error, judgments``: at most ``limit`` messages, each cut to ``max_chars``
    characters (a server's error page can be long), and one last row counting the judgments
    behind the messages left out. ``examples``: what each judgment judged (e.g. ``qid/docid``),
    in the order of ``errors``; an ``examples`` column then names the first ``per_error`` of each
    message's (empty in the row of the messages left out), so a reader can look them up. ``limit`` (0 or more),
    ``max_chars`` and ``per_error`` (1 or more) are whole numbers, else a one-line
    :class:`~instir.errors.UsageError` (a ``limit`` of -1 showed all but one message, a ``max_chars`` of 0 two
    characters each, True or 2.5 a pandas TypeError)."""
    from instir.parameters import MAX_CUTOFF, count_within

    limit = count_within(limit, 0, MAX_CUTOFF, "error_counts' limit (the messages shown)")
    max_chars = count_within(max_chars, 1, MAX_CUTOFF, "error_counts' max_chars (the characters of a message)")
    per_error = count_within(per_error, 1, MAX_CUTOFF, "error_counts' per_error (the examples of a message)")
    failed = _failed(errors)
    counts = failed.value_counts(sort=True)
    rows = [(_shorten(message, max_chars), int(n)) for message, n in counts.head(limit).items()]
    rest = counts.iloc[limit:]
    if len(rest):
        rows.append((f"… {len(rest)} other message(s)", int(rest.sum())))
    table = pd.DataFrame(rows, columns=["error", "judgments"])
    if examples is not None:
        named = pd.Series(list(examples), dtype="object").loc[failed.index].astype(str)
        table["examples"] = [", ".join(named[failed == message].head(per_error)) for message in counts.index[:limit]
                             ] + [""] * len(rest[:1])
    return table


def lasting_failure() -> str:
    """The failure reasons a rerun meets again, as a pattern: what was sent is refused (a client error the requests
    do not retry, :data:`~instir.http_retry.RETRY_STATUSES`), longer than the model's context, or names a document
    the corpus lacks."""
    from instir.http_retry import RETRY_STATUSES

    retried = "|".join(str(status)[1:] for status in sorted(RETRY_STATUSES) if 400 <= status < 500)
    return rf"HTTP 4(?!{retried})\d\d|exceeds the model's|document not in the corpus"


def failure_lines(frame: pd.DataFrame, what: str) -> list[str]:
    """One line per distinct reason the failed judgments in ``frame`` (one row per judged pair or list position:
    columns qid, docid, error) failed, counted, each pair once, with a few of them as ``qid/docid``."""
    failed = frame[frame["error"].notna()] if "error" in frame else frame.iloc[:0]
    if failed.empty:
        return []
    failed = failed.drop_duplicates(["qid", "docid"])
    counts = error_counts(failed["error"], limit=3, max_chars=160,
                          examples=failed["qid"].astype(str) + "/" + failed["docid"].astype(str))
    return [f"failed: {row.judgments} {what}: {row.error}" + (f" (e.g. {row.examples})" if row.examples else "")
            for row in counts.itertuples(index=False)]


class AllJudgmentsFailed(UserError, RuntimeError):
    """Every judgment a result needed failed (a dead or misconfigured endpoint): no value exists, so the
    front end ends non-zero with the reasons counted rather than as a success."""


def require_judged(errors: Iterable[object], what: str) -> None:
    """Raise :class:`AllJudgmentsFailed`, the failures counted by reason, when there are judgments (one error
    each, ``None``/NaN = success) and every one failed; ``what`` says what then has no value. The front ends
    call it after showing and writing what failed."""
    errors = pd.Series(list(errors), dtype="object")
    if not len(errors) or errors.notna().sum() < len(errors):
        return
    counts = error_counts(errors, limit=3, max_chars=160)
    reasons = "; ".join(f"{row.judgments}x {row.error}" for row in counts.itertuples(index=False))
    raise AllJudgmentsFailed(f"all {len(errors)} judgments failed, so {what}: {reasons}")


def failure_statement(what: str, errors: Iterable[object]) -> str:
    """One Markdown sentence: how many of the judgments of ``what`` failed, in numbers and per
    cent, saying plainly when all of them did (then no statistic can be drawn from them)."""
    errors = list(errors)
    total, failed = len(errors), len(_failed(errors))
    if total == 0:
        return f"No judgments were needed for {what}."
    if failed == total:
        return (f"**All {total} judgments for {what} failed (100%)**: the judge answered none of them, so every "
                "figure that needs a judgment is left out. The errors are listed below.")
    if failed:
        return (f"{failed} of {total} judgments for {what} failed ({failed / total:.0%}); they are left out of the "
                "figures, never counted as a score of 0. The errors are listed below.")
    return f"All {total} judgments for {what} succeeded."


def weighting_counts(frames: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Judgments per weighting for each named frame (e.g. ``{"validation pairs": pairs,
    "InstFol positions": positions}``): one row per frame, a column per weighting in
    :data:`WEIGHTINGS` order, ``failed`` (no weighting: the judgment failed) and ``total``."""
    rows = []
    for name, frame in frames.items():
        weighting = frame["weighting"].astype("string")
        counts = {w: int((weighting == w).sum()) for w in WEIGHTINGS}
        rows.append({"judgments": name, **counts, "failed": int(weighting.isna().sum()), "total": len(frame)})
    return pd.DataFrame(rows, columns=["judgments", *WEIGHTINGS, "failed", "total"])
