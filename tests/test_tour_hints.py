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


def test_every_numeric_exercise_takes_the_x100_scale_and_names_a_known_mistake_there():
    # before, exercise 6 answered 60 (0.6 on the x100 scale p-MRR is printed in) with "60 is not it", while exercises
    # 1 and 3 took 50 for 0.5, and its hints matched only unrounded answers
    assert tour.check_pmrr_change(60).ok and tour.check_pmrr_change(0.6).ok
    assert "wrong sign" in tour.check_pmrr_change(-60).message and not tour.check_pmrr_change(-0.6).ok
    assert "moved-up formula" in tour.check_pmrr_change(1.5).message


@pytest.mark.parametrize("answer", ["1/log2(4)", "abc", [0.5], float("nan"), True])
def test_an_answer_that_is_no_number_is_said_so_not_taken_for_an_empty_cell(answer):
    # before, each got "put your answer in answer_1 and run this cell again", as if the cell held none
    for verdict in (tour.check_ndcg_single_target(answer, rank=3), tour.check_pmrr_change(answer),
                    tour.check_robustness(answer, tour.robustness_exercise())):
        assert verdict.ok is False and "is not a number" in verdict.message and "put your answer" not in verdict.message
    assert tour.check_ndcg_single_target(None, rank=3).ok is None  # the placeholder: not answered yet


def test_the_template_exercise_takes_the_name_in_any_case():
    # before, "Instructir-E5-Mistral" was not the template while exercise 5 took "B" for "b"
    assert tour.check_template("Instructir-E5-Mistral").ok and tour.check_template(" instructir-e5-mistral ").ok


def test_exercise_1_counts_a_target_at_rank_k_itself():
    assert tour.check_ndcg_single_target(0.2891, rank=10, k=10).ok  # 1/log2(11)
    assert tour.check_ndcg_single_target(0, rank=11, k=10).ok


def test_exercise_1_at_rank_1_answers_a_wrong_number_without_raising():
    verdict = tour.check_ndcg_single_target(0.5, rank=1)
    assert verdict.ok is False and "Discount at rank r" in verdict.message
