"""Probability weighting and answer parsing against hand-worked token distributions, and the
authors' score rule against an independent re-statement of their code."""

import math

import numpy as np
import pytest
from judge_fakes import chat_body

from instir.judge.rubrics import rubric_for
from instir.judge.scoring import (
    MAX_ANSWER_CHARS,
    checked_logprobs,
    expected_score,
    ifir_digit_probs,
    judgment_from_chat,
    parse_answer,
)

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
def test_parse_answer_finds_the_score(text, score):
    assert parse_answer(text, 3) == score


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


def test_top_logprobs_of_the_score_token_weight_the_score():
    tokens = [('{"', {}), ("score", {}), ('":', {}), (" ", {}),
              ("2", {"2": 0.6, "1": 0.3, "3": 0.095, "0": 0.004, "a": 0.001}), ("}", {})]
    j = judgment_from_chat('{"score": 2}', logprob_tokens(tokens), LEVEL3, latency_s=0.5, prompt_tokens=7)
    assert j.ok and j.weighting == "logprobs" and j.score == 2
    assert j.weighted == pytest.approx(1.785 / 0.995)
    assert j.probs == pytest.approx({"1": 0.3 / 0.995, "2": 0.6 / 0.995, "3": 0.095 / 0.995})
    assert j.latency_s == 0.5 and j.prompt_tokens == 7


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


@pytest.mark.parametrize("odd", ["²", "₃", "¹"])
def test_non_ascii_digit_among_alternatives_is_skipped_not_a_crash(odd):
    # str.isdigit() accepts these but int() refuses them; the authors skip them (isdecimal)
    tokens = [('{"score": ', {}), ("2", {"2": 0.6, odd: 0.2, "1": 0.2}), ("}", {})]
    j = judgment_from_chat('{"score": 2}', logprob_tokens(tokens), LEVEL3)
    assert j.ok and j.weighting == "logprobs"
    assert j.probs == pytest.approx({"1": 0.25, "2": 0.75})


def test_non_ascii_digit_score_is_a_malformed_answer_with_its_reason():
    with pytest.raises(ValueError, match="score is not an integer: '²'"):
        parse_answer('{"score": "²"}', 3)
    j = judgment_from_chat('{"score": "₃"}', None, LEVEL3)
    assert not j.ok and j.error == "malformed answer: score is not an integer: '₃'"


# --------------------------------------------------------------------------- the authors' rule


class _Alt:
    def __init__(self, entry):
        self.token, self.logprob = entry["token"], entry["logprob"]


class _Tok(_Alt):
    def __init__(self, entry):
        super().__init__(entry)
        self.top_logprobs = [_Alt(a) for a in entry["top_logprobs"]]


def authors_weighted(content, logprobs):
    """SighingSnow/IFIR src/utils/llm_metrics/GEval/geval.py, restated line by line:
    content2json, then openai_weighted_sum_score on OpenAI-style token objects."""
    import json
    from math import ceil

    start, end = content.find("{"), content.rfind("}") + 1
    try:
        response = json.loads(content[start:end] if start != -1 and end != 0 else "")
    except json.JSONDecodeError:
        response = {"score": 0, "reason": ""}
    if logprobs is None:
        return 0.0
    logprobs = [_Tok(e) for e in logprobs]
    if response.get("score") is None:
        response["score"] = 0
    if not str(response["score"]).isdigit():
        response["score"] = 0
    if str(response["score"]).isdigit() and not str(response["score"]).isdecimal():
        response["score"] = ceil(response["score"])
    score = response["score"]
    try:
        for token_logprobs in logprobs:
            if token_logprobs.token == str(score):
                score_logprobs = token_logprobs
                break
        min_logprob = np.log(0.01)
        token_prob_dict = {}
        for token_logprob in score_logprobs.top_logprobs:
            logprob = token_logprob.logprob
            if logprob < min_logprob:
                continue
            if not token_logprob.token.isdecimal():
                continue
            linear_prob = np.exp(logprob)
            score = int(token_logprob.token)
            if score > 5 or score < 0:
                continue
            token_prob_dict[score] = (linear_prob if score not in token_prob_dict
                                      else token_prob_dict[score] + linear_prob)
        total = 0.0
        for score, prob in token_prob_dict.items():
            total += prob * score
        return total / np.sum(list(token_prob_dict.values()))
    except Exception:
        return 0.0


SCORE_2 = [('{"', {}), ("score", {}), ('":', {}), (" ", {})]
AUTHORS_CASES = {
    "plain": (LEVEL3, SCORE_2 + [("2", {"2": 0.6, "1": 0.3, "3": 0.095, "0": 0.004, "a": 0.001}), ("}", {})]),
    "whitespace alternatives skipped": (LEVEL3, SCORE_2 + [("2", {"2": 0.5, " 3": 0.3, "3": 0.2}), ("}", {})]),
    "digits 4 and 5 kept on a level-1 rubric": (LEVEL1, [('{"score": ', {}), ("1", {"1": 0.5, "0": 0.2, "4": 0.2,
                                                                                    "5": 0.1}), ("}", {})]),
    "digits above 5 and numbers skipped": (LEVEL3, SCORE_2 + [("2", {"2": 0.5, "7": 0.2, "10": 0.2, "3": 0.1}),
                                                               ("}", {})]),
    "first token equal to the score, even in the reason": (LEVEL3, [('{"reason": "', {}), ("2", {"2": 0.5, "0": 0.5}),
                                                                    (' steps", "score": ', {}),
                                                                    ("2", {"2": 0.8, "3": 0.2}), ("}", {})]),
    "one-percent floor per alternative, before summing": (LEVEL3, SCORE_2 + [("3", {"3": 0.9, "2": 0.008, "٢": 0.008,
                                                                                    "1": 0.084}), ("}", {})]),
    "one digit spelled two ways is summed": (LEVEL3, SCORE_2 + [("3", {"3": 0.6, "٣": 0.2, "2": 0.2}), ("}", {})]),
    "non-ascii digits skipped": (LEVEL3, SCORE_2 + [("2", {"2": 0.6, "²": 0.2, "1": 0.2}), ("}", {})]),
    "an alternative at exactly 1 % kept": (LEVEL3, SCORE_2 + [("2", {"2": 0.99, "1": 0.01}), ("}", {})]),
}


@pytest.mark.parametrize("case", list(AUTHORS_CASES))
def test_ifir_rule_matches_the_authors_code(case):
    rubric, tokens = AUTHORS_CASES[case]
    content = "".join(t for t, _ in tokens)
    expected = authors_weighted(content, logprob_tokens(tokens))
    j = judgment_from_chat(content, logprob_tokens(tokens), rubric)
    assert j.ok and j.weighting == "logprobs"
    assert j.weighted == pytest.approx(expected, rel=1e-12)


def test_ifir_rule_keeps_digits_above_the_rubric_maximum_as_the_divergence_note_says():
    # level 1, weight on 4 and 5: the authors keep them (weighted 1.8 > the rubric's maximum 1)
    rubric, tokens = AUTHORS_CASES["digits 4 and 5 kept on a level-1 rubric"]
    content = "".join(t for t, _ in tokens)
    assert judgment_from_chat(content, logprob_tokens(tokens), rubric).weighted == pytest.approx(1.8)
    # the first "2" token is in the reason: the authors weight that one
    rubric, tokens = AUTHORS_CASES["first token equal to the score, even in the reason"]
    content = "".join(t for t, _ in tokens)
    assert judgment_from_chat(content, logprob_tokens(tokens), rubric).weighted == pytest.approx(1.0)


def test_ifir_rule_accepts_scores_up_to_five_as_the_authors_do():
    j = judgment_from_chat('{"score": 4}', None, LEVEL1)
    assert j.ok and j.score == 4
    assert not judgment_from_chat('{"score": 6}', None, LEVEL1).ok


@pytest.mark.parametrize(("case", "tokens"), [
    ("score token carries a space", [('{"score":', {}), (" 2", {" 2": 0.7, " 1": 0.3}), ("}", {})]),
    ("no decimal alternative above 1 %", [('{"score": ', {}), ("2", {"two": 0.99, "2": 0.005}), ("}", {})]),
])
def test_ifir_rule_falls_back_to_the_parsed_integer_where_the_authors_score_zero_or_nan(case, tokens):
    content = "".join(t for t, _ in tokens)
    j = judgment_from_chat(content, logprob_tokens(tokens), LEVEL3)
    assert j.ok and j.weighting == "parsed" and j.weighted == 2.0
    with np.errstate(invalid="ignore"):
        authors = authors_weighted(content, logprob_tokens(tokens))
    assert authors == 0.0 or math.isnan(authors)  # the "judge-fallbacks" divergence


def test_ifir_digit_probs_is_none_without_a_matching_token():
    assert ifir_digit_probs(logprob_tokens([("x", {}), (" 2", {" 2": 1.0})]), 2) is None


def test_ifir_rule_matches_the_score_token_exactly_not_after_stripping_spaces():
    # the authors compare token == str(score): " 2" is not "2", so no token matches (they score 0.0, the kit falls
    # back to the parsed integer) even though its alternative "2" is a decimal digit
    tokens = [('{"score":', {}), (" 2", {" 2": 0.6, "2": 0.4}), ("}", {})]
    content = "".join(t for t, _ in tokens)
    assert authors_weighted(content, logprob_tokens(tokens)) == 0.0
    assert ifir_digit_probs(logprob_tokens(tokens), 2) is None
    j = judgment_from_chat(content, logprob_tokens(tokens), LEVEL3)
    assert j.ok and j.weighting == "parsed" and j.weighted == 2.0


def test_a_log_probability_clearly_above_0_is_refused_and_one_within_float_rounding_read_as_0():
    # e^0.05 = 1.05: no probability; 1e-7 above 0 is a probability of 1 rounded in single precision
    with pytest.raises(ValueError, match="token 0: logprob 0.05 is not the log of a probability"):
        checked_logprobs([{"token": "2", "logprob": 0.05}])
    assert checked_logprobs([{"token": "2", "logprob": 1e-7}]) == [{"token": "2", "logprob": 0.0, "top_logprobs": []}]


def test_parse_answer_passes_over_objects_without_a_score_to_the_first_with_one():
    assert parse_answer('{"step": 1, "met": true} then {"score": 2, "reason": "x"}', 3) == 2
    assert parse_answer('{"verdict": {"score": 1, "reason": "x"}}', 3) == 1


def test_only_the_first_score_token_is_weighted_even_when_its_alternatives_hold_no_digit():
    # geval.py stops at the first token equal to str(score); no digit above 1 % there is 0/0 for the authors and the
    # parsed integer for the kit, never the weights of a later "2"
    tokens = [('{"reason": "', {}), ("2", {"two": 0.99, "2": 0.005}), (' steps", "score": ', {}),
              ("2", {"2": 0.8, "3": 0.2}), ("}", {})]
    content = "".join(t for t, _ in tokens)
    j = judgment_from_chat(content, logprob_tokens(tokens), LEVEL3)
    assert j.ok and (j.weighting, j.weighted) == ("parsed", 2.0)


def test_an_answer_of_exactly_the_longest_allowed_length_is_read():
    content = '{"score": 2, "reason": "' + "y" * (MAX_ANSWER_CHARS - 26) + '"}'
    assert len(content) == MAX_ANSWER_CHARS
    assert judgment_from_chat(content, None, LEVEL3).score == 2
    assert not judgment_from_chat(content + " ", None, LEVEL3).ok


def test_the_limits_docs_metrics_md_states_hold_an_answer_of_100_000_characters_and_a_log_probability_1e_6_above_0():
    # docs/metrics.md: an answer "longer than 100,000 characters" fails; "up to 1e-6 above 0 is read as 0"
    answer = '{"score": 2, "reason": "' + "y" * (100_000 - 26) + '"}'
    assert judgment_from_chat(answer, None, LEVEL3).ok
    assert not judgment_from_chat(answer + " ", None, LEVEL3).ok
    assert checked_logprobs([{"token": "2", "logprob": 1e-6}])[0]["logprob"] == 0.0
    with pytest.raises(ValueError, match="is not the log of a probability"):
        checked_logprobs([{"token": "2", "logprob": 2e-6}])


def test_expected_score_of_digits_that_all_have_probability_zero_is_none():
    assert expected_score({1: 0.0, 2: 0.0}, 3, min_prob=0.0) is None
