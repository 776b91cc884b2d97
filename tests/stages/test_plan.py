"""The plan decides which runs exist and in which order, for the retrieve stage, the sweep and
the command line alike: benchmark by benchmark, then setting, system (as given) and variant; a
benchmark only in the settings and variants its family's spec has."""

import pytest

from instir.errors import UnknownNameError
from instir.stages.plan import PlannedRun, plan_runs
from instir.systems.specs import resolve_system


def test_the_plan_is_benchmark_major_then_setting_system_and_variant():
    plan = plan_runs(["ifir-sample/fiqa", "instructir-sample"], ["dense", "bm25"],
                     settings=["instructed", "order-sensitivity"])
    assert [(p.benchmark, p.setting, p.system.name, p.variant) for p in plan] == [
        (benchmark, setting, system, variant)
        for benchmark, settings in (("ifir-sample/fiqa", ["instructed"]),  # IFIR has no other setting
                                    ("instructir-sample", ["instructed", "order-sensitivity"]))
        for setting in settings for system in ("dense", "bm25") for variant in ("instructed", "query-only")]
    assert len(plan) == 12


def test_a_planned_run_is_labelled_as_every_table_names_it_and_has_a_file_name_id():
    bm25 = resolve_system("bm25")
    assert PlannedRun("instructir", "instructed", bm25, "instructed").label == "bm25"
    assert PlannedRun("instructir", "instructed", bm25, "query-only").label == "bm25 (query-only)"
    assert PlannedRun("instructir", "prompt-sensitivity", bm25, "query-only").label == \
        "bm25 (query-only) [prompt-sensitivity]"
    # a variant of a family registered from outside the package is named too: two runs never share a label
    assert PlannedRun("my-benchmark", "instructed", bm25, "instruction-only").label == "bm25 (instruction-only)"
    dense = PlannedRun("ifir/fiqa", "instructed", resolve_system("dense:~/org/model x"), "instructed")  # a folder
    assert dense.run_id == "ifir-fiqa__instructed__dense---org-model-x__instructed"


def test_systems_come_as_names_a_comma_separated_text_or_resolved_specs():
    assert [p.system.name for p in plan_runs(["instructir-sample"], "bm25,dense", variants=["instructed"])] == \
        ["bm25", "dense"]
    assert len(plan_runs(["instructir-sample"], [resolve_system("bm25")])) == 2


@pytest.mark.parametrize(("arguments", "message"), [
    ({"benchmarks": ["ifir-sample/fiq"]},
     "parameter 'benchmarks': unknown benchmark 'ifir-sample/fiq'; did you mean 'ifir-sample/fiqa'"),
    ({"settings": ["order"]}, "unknown setting 'order'"), ({"variants": ["instruct"]}, "unknown variant 'instruct'")])
def test_an_unknown_benchmark_setting_or_variant_is_refused(arguments, message):
    with pytest.raises(UnknownNameError, match=message):
        plan_runs(**{"benchmarks": ["instructir-sample"], "systems": ["bm25"], **arguments})


def test_a_run_is_as_deep_as_asked_else_its_familys_depth_else_100():
    # FollowIR's spec says 1000 (the authors' depth, which p-MRR depends on); InstructIR's and IFIR's say none
    plan = plan_runs(["instructir-sample", "ifir-sample/fiqa", "followir-sample/core17"], ["bm25"],
                     variants=["instructed"])
    assert [(p.benchmark, p.k) for p in plan] == [("instructir-sample", 100), ("ifir-sample/fiqa", 100),
                                                  ("followir-sample/core17", 1000)]
    assert {p.k for p in plan_runs(["instructir-sample", "followir-sample/core17"], ["bm25"], k=20)} == {20}


def test_a_benchmark_of_no_family_pairs_its_instructed_run_with_its_query_only_run():
    from instir.stages.plan import variant_pair

    assert variant_pair("my-own-benchmark") == ("instructed", "query-only")


def test_paired_runs_put_the_instructed_run_first_and_skip_other_settings_and_lone_runs():
    from instir.stages.plan import paired_runs

    runs = [("ifir-sample/fiqa", "instructed", "bm25", "query-only"), ("ifir-sample/fiqa", "instructed", "bm25",
                                                                      "instructed"),
            ("instructir-sample", "order-sensitivity", "bm25", "instructed"),
            ("instructir-sample", "order-sensitivity", "bm25", "query-only"),
            ("instructir-sample", "instructed", "dense", "instructed")]
    assert paired_runs(runs, lambda run: run) == [(runs[1], runs[0])]


def test_paired_runs_pair_each_system_apart_and_take_its_first_listed_run_of_a_variant():
    from instir.stages.plan import paired_runs

    # (benchmark, setting, system, variant, k): the same run listed again at another depth is not the pair's
    runs = [("ifir-sample/fiqa", "instructed", "bm25", "instructed", 10),
            ("ifir-sample/fiqa", "instructed", "dense", "instructed", 10),
            ("ifir-sample/fiqa", "instructed", "bm25", "query-only", 10),
            ("ifir-sample/fiqa", "instructed", "dense", "query-only", 10),
            ("ifir-sample/fiqa", "instructed", "bm25", "instructed", 20)]
    assert paired_runs(runs, lambda run: run[:4]) == [(runs[0], runs[2]), (runs[1], runs[3])]


@pytest.mark.parametrize("field", ["settings", "variants"])
def test_an_empty_list_of_settings_or_variants_is_refused_not_planned_as_no_run(field):
    from instir.errors import UsageError

    with pytest.raises(UsageError, match=f"parameter '{field}' is empty: name at least one of instructed"):
        plan_runs(["instructir-sample"], ["bm25"], **{field: []})
