"""A judge whose answers are scripted per passage text, counting what it is asked, and a toy
in-memory benchmark builder (documents whose text is their id, so scripts are keyed by id)."""

from __future__ import annotations

from instir.benchmarks.types import Benchmark, Corpus, Doc, Query
from instir.judge.types import Judgment


class ScriptedJudge:
    """Answers ``scores[passage]`` (a weighted score, or ``None`` for a failed judgment with
    ``error``); a passage missing from the script fails. Passages in ``parsed`` are answered with
    ``weighting="parsed"`` (no log-probabilities), the others with ``"logprobs"``.
    ``requests`` records every request."""

    name = "scripted"
    model = "script-v1"

    def __init__(self, scores: dict[str, float | None], error: str = "malformed answer: no JSON",
                 parsed: set[str] = frozenset()):
        self.scores = scores
        self.error = error
        self.parsed = parsed
        self.requests = []

    def judge(self, requests, on_result=None):
        self.requests.extend(requests)
        out = []
        for i, r in enumerate(requests):
            value = self.scores.get(r.passage)
            if value is None:
                j = Judgment.failure(self.error, raw="???")
            else:
                weighting = "parsed" if r.passage in self.parsed else "logprobs"
                j = Judgment(score=round(value), weighted=value, probs=None, weighting=weighting, raw=str(value),
                             latency_s=0.5, cost=0.001)
            out.append(j)
            if on_result is not None:
                on_result(i, j)
        return out


def toy_benchmark(queries: list[Query], qrels: dict[str, dict[str, int]], doc_ids: list[str],
                  meta: dict | None = None) -> Benchmark:
    """An in-memory benchmark whose documents' text is their id."""
    return Benchmark(name="toy", layout="memory", revision="local", setting="instructed",
                     corpus=Corpus.from_docs(Doc(d, d) for d in doc_ids), queries={q.id: q for q in queries},
                     qrels=qrels, meta=meta or {})
