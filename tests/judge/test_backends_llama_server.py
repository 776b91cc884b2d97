"""OpenAICompatibleJudge against llama-cpp-python's OpenAI-compatible server running the
offline SmolLM2 GGUF on loopback (real HTTP, real log-probabilities)."""

from instir.judge.cache import CachedJudge
from instir.judge.chat import OpenAICompatibleJudge
from instir.judge.rubrics import rubric_for
from instir.judge.types import JudgeRequest


def test_llama_server_judgments_are_logprob_weighted_and_cached(llama_server, tmp_path):
    rubric = rubric_for("fiqa", 2)
    requests = [
        JudgeRequest("how should I save for retirement?", "I am 30 and have student debt.",
                       "Pay off the debt first, then invest in index funds.", rubric),
        JudgeRequest("how should I save for retirement?", "I am 30 and have student debt.",
                       "Bananas are rich in potassium.", rubric),
    ]
    backend = OpenAICompatibleJudge("smollm2-135m-instruct-q4_1", llama_server,
                                    response_format="json_object_schema", max_tokens=64, concurrency=2, progress=False)
    judge = CachedJudge(backend, tmp_path / "judgments.sqlite")
    out = judge.judge(requests)
    for j in out:
        assert j.ok, j.error
        assert j.weighting == "logprobs" and j.raw.lstrip().startswith("{")
        # the authors' rule keeps digits 0-5 on every rubric
        assert set(j.probs) <= set("012345") and abs(sum(j.probs.values()) - 1) < 1e-9
        assert 0.0 <= j.weighted <= 5 and j.score in (0, 1, 2)
        assert j.prompt_tokens > 100 and j.completion_tokens > 0
    again = CachedJudge(backend, tmp_path / "judgments.sqlite")
    assert [j.weighted for j in again.judge(requests)] == [j.weighted for j in out]
    assert again.stats.judged == 0 and again.stats.hits == 2
