"""Probability weighting and answer parsing against hand-worked token distributions."""

import math

import pytest
from judge_fakes import chat_body

from instir.judge.backends import digit_probs_at, expected_score, judgment_from_chat, parse_answer
from instir.judge.rubrics import rubric_for

LEVEL3 = rubric_for("fiqa", 3)
LEVEL1 = rubric_for("fiqa", 1)


def logprob_tokens(tokens):
    return chat_body("".join(t for t, _ in tokens), tokens)["choices"][0]["logprobs"]["content"]


def test_expected_score_drops_digits_below_one_percent_and_renormalises():
    value, dist = expected_score({0: 0.005, 1: 0.3, 2: 0.6, 3: 0.095}, 3)
    assert dist == pytest.approx({"1": 0.3 / 0.995, "2": 0.6 / 0.995, "3": 0.095 / 0.995})
    assert value == pytest.approx((0.3 + 1.2 + 0.285) / 0.995)  # 1.79397


def test_expected_score_ignores_digits_outside_the_rubric_range():
    value, dist = expected_score({0: 0.2, 1: 0.4, 2: 0.3, 5: 0.1}, 1)
    assert dist == pytest.approx({"0": 1 / 3, "1": 2 / 3})
    assert value == pytest.approx(2 / 3)


def test_expected_score_is_none_when_no_digit_survives():
    assert expected_score({0: 0.009, 2: 0.5}, 1) is None


@pytest.mark.parametrize(("text", "score"), [
    ('{"score": 2, "reason": "x"}', 2),
    ('```json\n{"score": 3, "reason": "x"}\n```', 3),
    ('Sure! {"reason": "meets 1 step", "score": 1}', 1),
    ('{"score": "2", "reason": "x"}', 2),
    ('{"score": 2.0}', 2),
])
def test_parse_answer_finds_score_and_its_digit(text, score):
    value, offset = parse_answer(text, 3)
    assert value == score
    assert text[offset] == str(score)


@pytest.mark.parametrize(("text", "problem"), [
    ("The passage is relevant.", "no JSON object"),
    ('{"score": 2', "no JSON object"),
    ('{"reason": "no score"}', "no JSON object"),
    ('{"score": 4, "reason": "x"}', "outside 0..3"),
    ('{"score": -1}', "outside"),
    ('{"score": 1.5}', "not an integer"),
    ('{"score": true}', "not an integer"),
    ('{"score": null}', "not an integer"),
])
def test_parse_answer_rejects_malformed_answers(text, problem):
    with pytest.raises(ValueError, match=problem):
        parse_answer(text, 3)


def test_weighting_uses_top_logprobs_of_the_score_token():
    tokens = [('{"', {}), ("score", {}), ('":', {}), (" ", {}),
              ("2", {"2": 0.6, "1": 0.3, "3": 0.095, "0": 0.004, "a": 0.001}), ("}", {})]
    j = judgment_from_chat('{"score": 2}', logprob_tokens(tokens), LEVEL3, latency_s=0.5, prompt_tokens=7)
    assert j.ok and j.weighting == "logprobs" and j.score == 2
    assert j.weighted == pytest.approx(1.785 / 0.995)
    assert j.probs == pytest.approx({"1": 0.3 / 0.995, "2": 0.6 / 0.995, "3": 0.095 / 0.995})
    assert j.latency_s == 0.5 and j.prompt_tokens == 7


def test_weighting_handles_space_merged_into_the_digit_token():
    # Alternatives " 0"/" 1" compete with " 1"; a bare "0" also counts as 0.
    tokens = [('{"score":', {}), (" 1", {" 1": 0.5, " 0": 0.3, "0": 0.1, " 7": 0.1}), ("}", {})]
    j = judgment_from_chat('{"score": 1}', logprob_tokens(tokens), LEVEL1)
    assert j.probs == pytest.approx({"0": 0.4 / 0.9, "1": 0.5 / 0.9})
    assert j.weighted == pytest.approx(0.5 / 0.9)


def test_weighting_reads_the_score_token_not_an_earlier_digit():
    tokens = [('{"reason": "', {}), ("1", {"1": 0.5, "3": 0.5}), (' step", "score": ', {}),
              ("2", {"2": 0.8, "3": 0.2}), ("}", {})]
    content = "".join(t for t, _ in tokens)
    j = judgment_from_chat(content, logprob_tokens(tokens), LEVEL3)
    assert j.score == 2 and j.weighted == pytest.approx(2.2)


def test_digit_probs_at_sums_alternatives_that_map_to_one_digit():
    tokens = logprob_tokens([("ab", {}), ("3", {"3": 0.5, " 3": 0.25, "2": 0.25})])
    assert digit_probs_at(tokens, 2) == pytest.approx({3: 0.75, 2: 0.25})
    assert digit_probs_at(tokens, 9) is None


def test_no_logprobs_falls_back_to_the_parsed_score():
    j = judgment_from_chat('{"score": 3, "reason": "x"}', None, LEVEL3)
    assert j.ok and (j.score, j.weighted, j.weighting, j.probs) == (3, 3.0, "parsed", None)


def test_score_token_without_alternatives_falls_back_to_the_parsed_score():
    tokens = logprob_tokens([('{"score": ', {}), ("2", {}), ("}", {})])
    for entry in tokens:
        entry["top_logprobs"] = []
    j = judgment_from_chat('{"score": 2}', tokens, LEVEL3)
    assert j.weighting == "parsed" and j.weighted == 2.0


def test_malformed_answer_is_a_failure_not_zero():
    j = judgment_from_chat("I think it is relevant", None, LEVEL3, prompt_tokens=12)
    assert not j.ok
    assert j.score is None and j.weighted is None and j.weighting is None
    assert "malformed answer" in j.error and j.raw == "I think it is relevant"
    assert j.prompt_tokens == 12


def test_log_of_one_percent_threshold_matches_the_official_cutoff():
    # The official code keeps logprob >= log(0.01); a digit exactly at 1 % is kept.
    value, dist = expected_score({1: 0.01, 0: 0.99}, 1)
    assert "1" in dist and value == pytest.approx(0.01)
    assert math.isclose(sum(dist.values()), 1.0)
