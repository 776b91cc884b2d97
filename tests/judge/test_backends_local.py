"""Local backends: the in-process causal LM on SmolLM2 (logit weighting, batching) and the
no-LLM baselines."""

import pytest

from instir.judge.baseline import BaselineJudge
from instir.judge.local_lm import HFCausalLMJudge
from instir.judge.rubrics import rubric_for
from instir.judge.scoring import expected_score
from instir.judge.types import JudgeRequest

QUERY = "how should I save for retirement?"
INSTRUCTION = "I am 30, have student debt and want to retire early."
PASSAGES = [
    "Pay off high-interest student debt first, then put money into low-cost index funds in a retirement account.",
    "Bananas are rich in potassium.",
    "An early retirement needs a high savings rate.",
]


def requests_over_levels():
    """One request per level, passages of different lengths (so batches need padding)."""
    return [JudgeRequest(QUERY, INSTRUCTION, p, rubric_for("fiqa", level)) for level, p in zip((1, 2, 3), PASSAGES)]


@pytest.fixture(scope="module")
def batched(hf_judge):
    """Requests judged once in one padded batch, with the order ``on_result`` reported them."""
    requests = requests_over_levels()
    seen = []
    return requests, hf_judge.judge(requests, on_result=lambda i, j: seen.append(i)), seen


def test_in_process_judge_reads_a_digit_distribution_from_logits(batched):
    requests, out, seen = batched
    assert sorted(seen) == list(range(len(requests)))
    for request, j in zip(requests, out):
        top = request.rubric.taken_top
        assert j.ok and j.weighting == "logits" and j.completion_tokens == 0 and j.prompt_tokens > 100
        assert set(j.probs) <= {str(d) for d in range(top + 1)}
        assert sum(j.probs.values()) == pytest.approx(1.0)
        assert j.score == int(max(j.probs, key=j.probs.get))
        assert 0.0 <= j.weighted <= top
        assert j.weighted == pytest.approx(expected_score({int(d): p for d, p in j.probs.items()}, top)[0])


def test_batching_with_padding_gives_the_unbatched_scores(batched, hf_judge):
    requests, out, _ = batched
    single = HFCausalLMJudge(batch_size=1, progress=False).judge(requests)  # same loaded model
    assert len({j.prompt_tokens for j in single}) == len(requests)  # padding was really needed
    for a, b in zip(out, single):
        assert a.weighted == pytest.approx(b.weighted, abs=1e-3)
        assert a.probs == pytest.approx(b.probs, abs=1e-3)


def test_shared_prompt_prefix_gives_the_scores_of_whole_prompts(hf_judge):
    rubric = rubric_for("fiqa", 3)  # one rubric: the requests share its whole system prompt
    requests = [JudgeRequest(QUERY, INSTRUCTION, p, rubric) for p in PASSAGES]
    out = hf_judge.judge(requests)
    alone = [hf_judge.judge([request])[0] for request in requests]  # one request per call: no shared prefix
    for a, b in zip(out, alone):
        assert a.weighted == pytest.approx(b.weighted, abs=1e-3)
        assert a.probs == pytest.approx(b.probs, abs=1e-3)


def test_prompt_longer_than_the_context_is_a_failure(hf_judge):
    [j] = hf_judge.judge([JudgeRequest("q", "i", "word " * 9000, rubric_for("cds", 0))])
    assert not j.ok and j.score is None and "exceeds the model's" in j.error


def test_lexical_baseline_maps_term_overlap_onto_the_rubric_scale():
    rubric = rubric_for("", None)
    judge = BaselineJudge("lexical", progress=False)
    full, half, none = judge.judge([
        JudgeRequest("saving retirement", "", "We saved for our retirement.", rubric),
        JudgeRequest("saving retirement", "", "Retirement accounts.", rubric),
        JudgeRequest("saving retirement", "", "Bananas are yellow.", rubric),
    ])
    assert (full.weighted, full.score) == (3.0, 3)
    assert (half.weighted, half.score) == (1.5, 2)
    assert (none.weighted, none.score) == (0.0, 0)
    assert {j.weighting for j in (full, half, none)} == {"baseline"}
    assert judge.name == "baseline-lexical"


def test_embedding_baseline_ranks_a_relevant_passage_above_an_unrelated_one():
    rubric = rubric_for("fiqa", 2)
    judge = BaselineJudge("embedding", progress=False)
    relevant, unrelated, _ = judge.judge([JudgeRequest(QUERY, INSTRUCTION, p, rubric) for p in PASSAGES])
    assert judge.name == "baseline-embedding" and relevant.weighting == "baseline"
    assert 0.0 <= unrelated.weighted < relevant.weighted <= 2.0


def test_unknown_baseline_method_is_an_error():
    from instir.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="unknown baseline judge method 'bm25'.* known: lexical, embedding"):
        BaselineJudge("bm25")


def test_lexical_baseline_rounds_half_up_counts_the_instruction_and_leaves_out_stopwords():
    level1, generic = rubric_for("fiqa", 1), rubric_for("", None)
    judge = BaselineJudge("lexical", progress=False)
    half, instructed, stopwords, nothing = judge.judge([
        JudgeRequest("retirement savings", "", "Retirement.", level1),  # 1 of 2 terms: 0.5 on 0-1, score 1
        JudgeRequest("retirement", "savings", "Savings accounts.", generic),  # the instruction's term counts
        JudgeRequest("the retirement of them", "", "Retirement.", generic),  # "the", "of", "them" are no terms
        JudgeRequest("the of", "", "The of.", generic),  # no content term to look for: 0
    ])
    assert (half.weighted, half.score) == (0.5, 1)
    assert (instructed.weighted, instructed.score) == (1.5, 2)
    assert (stopwords.weighted, stopwords.score) == (3.0, 3)
    assert (nothing.weighted, nothing.score) == (0.0, 0)


def test_embedding_baseline_clips_a_negative_similarity_to_zero(monkeypatch):
    import numpy as np

    class Opposite:
        def encode(self, texts, batch_size=None, normalize_embeddings=None):
            return np.array([[1.0, 0.0] if t.startswith("need") else [-1.0, 0.0] for t in texts])

    judge = BaselineJudge("embedding", progress=False)
    monkeypatch.setattr(judge, "_encoder", Opposite)
    [j] = judge.judge([JudgeRequest("need", "", "passage", rubric_for("fiqa", 3))])
    assert j.ok and (j.weighted, j.score) == (0.0, 0)


def test_a_baseline_judgments_latency_is_its_share_of_its_batch(monkeypatch):
    import time

    judge = BaselineJudge("lexical", progress=False)
    monkeypatch.setattr(judge, "_similarities", lambda batch: time.sleep(0.4) or [0.5] * len(batch))
    out = judge.judge([JudgeRequest("q", "", f"p{i}", rubric_for("", None)) for i in range(4)])
    assert all(0.09 <= j.latency_s <= 0.3 for j in out), [j.latency_s for j in out]
