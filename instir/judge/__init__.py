"""LLM judging for instruction following: rubrics, judge backends, the judgment cache and
InstFol (:mod:`instir.judge.following`)."""

from instir._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "baseline": ("BaselineJudge",),
    "chat": ("CALL_SETTINGS", "CallSettings", "OpenAICompatibleJudge"),
    "local_lm": ("HFCausalLMJudge", "default_gguf"),
    "scoring": ("expected_score",),
    "cache": ("CachedJudge", "CacheStats", "JudgmentCache"),
    "factory": ("make_judge",),
    "rubrics": ("INSTFOL_MAX", "RUBRICS", "Rubric", "rubric_for"),
    "types": ("Judge", "JudgeRequest", "Judgment"),
})
