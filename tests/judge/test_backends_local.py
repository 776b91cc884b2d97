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


# --------------------------------------------- the in-process judge on a tiny random Llama (no SmolLM2 load)

TINY_CHAT_TEMPLATE = ("{% for m in messages %}{{ m['role'] }} : {{ m['content'] }} \n{% endfor %}"
                      "{% if add_generation_prompt %}assistant : {% endif %}")


@pytest.fixture(scope="module")
def tiny_judge_model(tmp_path_factory):
    """A tiny random Llama with a plain chat template, whose vocabulary holds the digits and a few
    passage words (everything else is <unk>), so each digit keeps about 1/30 of the next-token mass;
    its query and key weights are scaled up so that attention, hence the result, depends on positions."""
    import json

    import torch
    from tiny_models import build_llama
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = build_llama(tmp_path_factory.mktemp("tiny-judge"),
                         [" ".join(str(d) for d in range(10)), "Bananas potassium early savings rate index funds"])
    lm = AutoModelForCausalLM.from_pretrained(folder)
    with torch.no_grad():
        for layer in lm.model.layers:
            layer.self_attn.q_proj.weight.mul_(30)
            layer.self_attn.k_proj.weight.mul_(30)
    lm.save_pretrained(folder)
    tok = AutoTokenizer.from_pretrained(folder)
    tok.chat_template = TINY_CHAT_TEMPLATE
    tok.save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 4096}))
    return folder


def _tiny_reference(folder, request):
    """What the judge must read for ``request``, step by step: the whole prompt (chat template, then
    '{"score": '), one unbatched forward pass, the softmax at its last position, digits 0..top with
    1 % or more renormalised; with the prompt's length and the digits' whole mass."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    lm = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    text = tok.apply_chat_template(request.messages, add_generation_prompt=True, tokenize=False) + '{"score": '
    ids = tok(text, add_special_tokens=False).input_ids
    with torch.no_grad():
        probs = torch.softmax(lm(input_ids=torch.tensor([ids])).logits[0, -1].float(), dim=-1)
    mass = {d: float(probs[tok.convert_tokens_to_ids(str(d))]) for d in range(request.rubric.taken_top + 1)}
    kept = {d: p for d, p in mass.items() if p >= 0.01}
    return {str(d): p / sum(kept.values()) for d, p in kept.items()}, len(ids), mass


def test_batched_judgments_with_a_shared_prefix_read_each_prompts_own_last_token(tiny_judge_model):
    import json

    judge = HFCausalLMJudge(str(tiny_judge_model), batch_size=2, progress=False)
    if judge.device != "cpu":
        pytest.skip("the reference is float32 on the CPU")
    level3 = rubric_for("fiqa", 3)
    requests = [JudgeRequest(QUERY, INSTRUCTION, p, level3) for p in PASSAGES]  # one rubric: a shared prefix
    requests += [JudgeRequest(QUERY, INSTRUCTION, "Bananas potassium", rubric_for("fiqa", 1)),
                 JudgeRequest(QUERY, "", "early savings rate", level3)]
    seen = []
    out = judge.judge(requests, on_result=lambda i, j: seen.append(i))
    assert sorted(seen) == list(range(len(requests)))
    for request, j in zip(requests, out):
        probs, n_tokens, mass = _tiny_reference(tiny_judge_model, request)
        assert j.ok, j.error
        assert j.prompt_tokens == n_tokens
        assert j.probs == pytest.approx(probs, abs=1e-5)
        assert j.weighted == pytest.approx(sum(int(d) * p for d, p in probs.items()), abs=1e-5)
        assert j.score == max(mass, key=mass.get)
        assert json.loads(j.raw)["digit_mass"] == pytest.approx(sum(mass.values()), abs=1e-5)


def test_a_prompt_of_exactly_the_models_context_is_judged_and_one_token_more_is_a_failure(tiny_judge_model, tmp_path):
    import json
    import shutil

    rubric = rubric_for("fiqa", 3)
    fits, longer = (JudgeRequest(QUERY, INSTRUCTION, p, rubric) for p in ("Bananas", "Bananas potassium"))
    _, n_tokens, _ = _tiny_reference(tiny_judge_model, fits)
    assert _tiny_reference(tiny_judge_model, longer)[1] == n_tokens + 1
    folder = shutil.copytree(tiny_judge_model, tmp_path / "short-context")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "max_position_embeddings": n_tokens}))
    seen = []
    ok, failed = HFCausalLMJudge(str(folder), progress=False).judge([fits, longer],
                                                                   on_result=lambda i, j: seen.append(i))
    assert ok.ok and ok.prompt_tokens == n_tokens
    assert not failed.ok and failed.prompt_tokens == n_tokens + 1
    assert f"prompt of {n_tokens + 1} tokens exceeds the model's {n_tokens}" in failed.error
    assert sorted(seen) == [0, 1]


def test_the_same_request_twice_and_a_batch_size_of_0_judge_as_one_request_alone(tiny_judge_model):
    request = JudgeRequest(QUERY, INSTRUCTION, "Bananas potassium", rubric_for("fiqa", 2))
    probs, _, _ = _tiny_reference(tiny_judge_model, request)
    judge = HFCausalLMJudge(str(tiny_judge_model), batch_size=0, progress=False)
    if judge.device != "cpu":
        pytest.skip("the reference is float32 on the CPU")
    for j in judge.judge([request, request]):  # whole prompts alike: each keeps its last token of its own
        assert j.ok, j.error
        assert j.probs == pytest.approx(probs, abs=1e-5)


def test_a_batch_the_model_fails_on_fails_its_judgments_and_the_next_batch_is_judged(tiny_judge_model, monkeypatch):
    import torch

    judge = HFCausalLMJudge(str(tiny_judge_model), batch_size=1, progress=False)
    softmax, calls = torch.softmax, []

    def out_of_memory_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("CUDA out of memory")
        return softmax(*args, **kwargs)

    monkeypatch.setattr(torch, "softmax", out_of_memory_once)
    rubric = rubric_for("fiqa", 3)
    requests = [JudgeRequest(QUERY, INSTRUCTION, p, rubric) for p in ("Bananas", "Bananas potassium")]
    failed, judged = judge.judge(requests)
    assert not failed.ok and "the model failed on this batch (RuntimeError: CUDA out of memory)" in failed.error
    assert judged.ok and len(calls) == 2


@pytest.fixture(scope="module")
def tiny_metaspace_judge_model(tmp_path_factory):
    """A tiny random Llama whose tokenizer (Metaspace, SentencePiece-like) merges the space before a digit into
    the digit's token ('▁3'), while the answer prefix alone ends with a lone '▁'."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-metaspace-judge")
    vocab = {t: i for i, t in enumerate(["<unk>", "<s>", "</s>", "▁", *(f"▁{d}" for d in range(10)), "▁Bananas"])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    fast.chat_template = TINY_CHAT_TEMPLATE
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=4096)
    LlamaForCausalLM(config).eval().save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def test_a_digit_token_that_holds_the_space_before_it_is_read_after_the_prompt_without_that_space(
        tiny_metaspace_judge_model):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    request = JudgeRequest(QUERY, INSTRUCTION, "Bananas", rubric_for("fiqa", 3))
    judge = HFCausalLMJudge(str(tiny_metaspace_judge_model), progress=False)
    if judge.device != "cpu":
        pytest.skip("the reference is float32 on the CPU")
    [j] = judge.judge([request])
    tok = AutoTokenizer.from_pretrained(tiny_metaspace_judge_model)
    lm = AutoModelForCausalLM.from_pretrained(tiny_metaspace_judge_model, dtype=torch.float32).eval()
    text = tok.apply_chat_template(request.messages, add_generation_prompt=True, tokenize=False) + '{"score":'
    ids = tok(text, add_special_tokens=False).input_ids  # the prompt up to the space, which the digit token holds
    assert tok.convert_ids_to_tokens(ids[-1]) != "▁"
    with torch.no_grad():
        probs = torch.softmax(lm(input_ids=torch.tensor([ids])).logits[0, -1], dim=-1)
    mass = {d: float(probs[tok.convert_tokens_to_ids(f"▁{d}")]) for d in range(request.rubric.taken_top + 1)}
    kept = {d: p for d, p in mass.items() if p >= 0.01}
    assert j.ok and j.prompt_tokens == len(ids)
    assert j.probs == pytest.approx({str(d): p / sum(kept.values()) for d, p in kept.items()}, abs=1e-5)
