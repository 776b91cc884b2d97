"""The tour's checks meet a student where the reports are: an answer on the ×100 scale the
reports print, a right or known-wrong number rounded to two decimals, and a near miss each get
a specific word, not a bare "not it"."""

import pytest

from instir import build_system
from instir.benchmarks.registry import load_benchmark
from instir.report import tour


def test_exercise_3_on_the_reports_x100_scale_is_correct_and_says_so():
    verdict = tour.check_robustness(50, tour.robustness_exercise())
    assert verdict.ok and "×100 scale" in verdict.message


@pytest.mark.parametrize(("answer", "hint"), [
    (0.63, "off by one"), (63, "off by one"), (0.33, "reciprocal rank"),
    (0.504, "rounded too far: it is 0.5000"), (49.6, "rounded too far"),
])
def test_exercise_1_names_the_mistake_also_when_the_answer_is_rounded(answer, hint):
    verdict = tour.check_ndcg_single_target(answer, rank=3)
    assert verdict.ok is False and hint in verdict.message


def test_exercise_3_rounded_too_far_gets_the_rounding_hint():
    verdict = tour.check_robustness(0.505, tour.robustness_exercise())
    assert verdict.ok is False and "rounded too far" in verdict.message


def test_exercise_2_names_a_near_miss_instead_of_calling_it_the_target():
    sample = load_benchmark("instructir-sample")
    query = sample.queries[tour.GROUP + "_2"]
    verdict = tour.check_top_document("I am a homeowner with a small dining area", sample, build_system("bm25"), query)
    assert verdict.ok and "A near miss" in verdict.message and "9000043" in verdict.message
    right = tour.check_top_document(tour.TOP_DOCUMENT_EXAMPLE, sample, build_system("bm25"), query)
    assert right.ok and f"It is the target of {query.id}" in right.message and "near miss" not in right.message
