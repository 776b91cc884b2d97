"""LLM judging for instruction following: rubrics, judge backends and the judgment cache."""

from instir.judge.baseline import BaselineJudge
from instir.judge.cache import CachedJudge, CacheStats, JudgmentCache
from instir.judge.chat import CALL_SETTINGS, CallSettings, OpenAICompatibleJudge
from instir.judge.local_lm import HFCausalLMJudge, default_gguf
from instir.judge.rubrics import INSTFOL_MAX, RUBRICS, Rubric, rubric_for
from instir.judge.scoring import expected_score
from instir.judge.types import Judge, JudgeRequest, Judgment

__all__ = [
    "CALL_SETTINGS",
    "BaselineJudge",
    "CallSettings",
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
