"""LLM judging for instruction following: rubrics, judge backends and the judgment cache."""

from instir.judge.backends import (
    BaselineJudge,
    HFCausalLMJudge,
    OpenAICompatibleJudge,
    default_gguf,
    expected_score,
)
from instir.judge.cache import CachedJudge, CacheStats, JudgmentCache
from instir.judge.rubrics import INSTFOL_MAX, RUBRICS, Rubric, rubric_for
from instir.judge.types import Judge, JudgeRequest, Judgment

__all__ = [
    "BaselineJudge",
    "CacheStats",
    "CachedJudge",
    "HFCausalLMJudge",
    "INSTFOL_MAX",
    "Judge",
    "JudgeRequest",
    "Judgment",
    "JudgmentCache",
    "OpenAICompatibleJudge",
    "RUBRICS",
    "Rubric",
    "default_gguf",
    "expected_score",
    "rubric_for",
]
