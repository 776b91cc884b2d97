"""Measures as value objects: read from the kit's, ir-measures' and ranx's names and from
ir_measures objects; every front end takes either; a family's spec derives what each measure
brings along; a judged measure is refused by the scoring path."""

import ir_measures
import pandas as pd
import pytest
from says import raises_saying

import instir
from instir.benchmarks import load_benchmark
from instir.benchmarks.forms import Forms
from instir.errors import UsageError
from instir.metrics.measures import (
    InstFol,
    Native,
    Robustness,
    Standard,
    parse_measure,
    parse_measures,
    split_cutoff,
    with_derived,
)
from instir.metrics.scoring import scored_measures


@pytest.fixture(scope="module")
def run(instructir_sample):
    rows = [(qid, doc, 2.0) for qid, docs in instructir_sample.qrels.items() for doc in docs
            if qid.endswith(("_1", "_2"))]
    rows += [(qid, "9000043", 1.0) for qid in instructir_sample.qrels]
    return pd.DataFrame(rows, columns=["qid", "docid", "score"])


@pytest.mark.parametrize(("given", "kind", "name"), [
    ("nDCG@10", Standard, "nDCG@10"), ("ndcg@10", Standard, "nDCG@10"), ("mrr@10", Standard, "RR@10"),
    ("recall@100", Standard, "R@100"), (ir_measures.nDCG @ 10, Standard, "nDCG@10"),
    ("ndcg_at_10", Standard, "nDCG@10"), ("map_at_1000", Standard, "AP@1000"),  # MTEB's names
    ("NDCG_AT_10", Standard, "nDCG@10"), ("hit_rate_at_10", Standard, "Success@10"),
    ("p@10", Standard, "P@10"), ("rr_at_10", Standard, "RR@10"), ("ap@1000", Standard, "AP@1000"),  # papers' short
    ("Robustness@10", Robustness, "Robustness@10"), ("Robustness(RR@10)", Robustness, "Robustness(RR@10)"),
    ("robustness(nDCG@10)", Robustness, "Robustness@10"), ("nDCG@20[ifir-native]", Native, "nDCG@20[ifir-native]"),
    ("InstFol@20", InstFol, "InstFol@20"), ("r-precision", Standard, "Rprec"),  # ranx's R-precision
])
def test_a_measure_reads_from_every_spelling_and_names_itself_one_way(given, kind, name):
    measure = parse_measure(given)
    assert isinstance(measure, kind) and str(measure) == name and parse_measure(measure) is measure
    assert measure == parse_measure(name) and measure.source


def test_a_measure_is_a_value_with_a_unit_and_a_base():
    robust = parse_measure("Robustness(RR@10)")
    assert robust.unit == "group" and robust.base == parse_measure("RR@10") and hash(robust) == hash(
        parse_measure("Robustness(RR@10)"))
    assert parse_measure("nDCG@20[ifir-native]").cutoff == 20 and InstFol().unit == "instance"


def test_a_measure_that_cannot_be_is_refused_in_one_line():
    for bad, message in (("ERR@10", "not supported by the pytrec_eval provider"),
                         ("nDCG@@10", "'nDCG@@10': the cutoff takes a whole number"),
                         ("nDGC@10", "unknown measure 'nDGC'"),
                         ("P@10[ifir-native]", "IFIR-native measures are nDCG@k and RR@k"), (3, "got 3")):
        with pytest.raises(UsageError, match=message):
            parse_measure(bad)
    with pytest.raises(UsageError, match="no measures given"):
        parse_measures([])


@pytest.mark.parametrize(("bad", "said"), [
    # before, ir-measures' parser's words: "problem parsing measure invalid decimal literal (<unknown>, line 1) …"
    ("nDCG@1O", "measure 'nDCG@1O': the cutoff takes a whole number of at least 1 (at most 2,147,483,647), got '1O'"),
    ("R@\u0661\u0660", "got '\u0661\u0660'"),  # Arabic-Indic 10
    ("nDCG@10,R@100", "got '10,R@100'; measures are given apart: nDCG@10 R@100"),
    ("nDCG@-5", "measure 'nDCG@-5': the cutoff takes a whole number of at least 1 (at most 2,147,483,647), got -5"),
])
def test_a_cutoff_that_is_no_whole_number_is_said_so_by_the_depth_rule(bad, said):
    with raises_saying(UsageError, said):
        parse_measure(bad)


@pytest.mark.parametrize("bad", ["ndcg_at_10@5", "ndcg@ten", "foo_at_10"])
def test_a_measure_that_cannot_be_is_quoted_as_the_user_wrote_it(bad):
    # before, the message quoted the name the kit had rewritten it to ('nDCG@10@5', 'foo@10'): a name the user
    # never wrote, which a search of their command or notebook does not find
    with pytest.raises(UsageError, match=f"{bad!r}"):
        parse_measure(bad)


@pytest.mark.parametrize("bad", ["nDCG@0", "ndcg_cut_0", "Robustness@0", "P@10.5", "nDCG@1e9", "RR@0",
                                 "R@100000000000000000000", "nDCG@2147483648", "nDCG@-1"])
def test_a_cutoff_that_is_no_whole_number_of_at_least_1_is_one_line_not_an_abort(bad):
    # nDCG@0 reached pytrec_eval, whose failed C assertion killed the process (no message, no exit status of ours),
    # P@10.5 was an AssertionError traceback, and a cutoff past a C int a KeyError (pytrec_eval names it otherwise)
    # (and nDCG@-1 ir-measures' own words: "values must be str, float, int, bool, etc.")
    with raises_saying(UsageError, "the cutoff takes a whole number of at least 1 (at most 2,147,483,647)"):
        parse_measure(bad)
    if bad.startswith("Robustness"):  # named as given
        with raises_saying(UsageError, f"'{bad}': measure nDCG@0"):
            parse_measure(bad)


def test_a_group_measure_of_another_family_is_refused_not_scored_as_no_group(instructir_sample):
    # on the commit before, p-MRR on InstructIR was a ValueError traceback (no group to concatenate)
    from instir.metrics.scoring import Scorer

    with raises_saying(UsageError, "measure p-MRR is not instructir-sample's"):
        Scorer.for_benchmark(instructir_sample, [parse_measure("p-MRR")])


def test_a_spec_derives_robustness_of_every_measure_or_the_native_form_of_plain_ndcg_and_rr():
    plain = parse_measures(["nDCG@10", "RR@10", "P@10"])
    assert [str(m) for m in with_derived(plain, ["Robustness"])] == [
        "nDCG@10", "RR@10", "P@10", "Robustness@10", "Robustness(RR@10)", "Robustness(P@10)"]
    assert [str(m) for m in with_derived(parse_measures(["nDCG@20", "R@20", "nDCG(gains={0:0,1:1,2:3})@20"]),
                                         ["ifir-native"])] == [
        "nDCG@20", "R@20", "nDCG(gains={2:3})@20", "nDCG@20[ifir-native]"]


def test_the_scored_measures_of_a_benchmark_are_its_familys_and_their_derivations(instructir_sample):
    assert [str(m) for m in scored_measures(instructir_sample)] == [
        "nDCG@10", "RR@10", "R@100", "P@10", "Robustness@10", "Robustness(RR@10)", "Robustness(R@100)",
        "Robustness(P@10)"]
    assert [str(m) for m in scored_measures(instructir_sample, ["nDCG@10"], derived=False)] == ["nDCG@10"]
    fiqa = load_benchmark("ifir-sample/fiqa")
    assert [str(m) for m in scored_measures(fiqa, [ir_measures.RR @ 20])] == ["RR@20", "RR@20[ifir-native]"]


def test_evaluate_takes_ir_measures_objects_a_single_one_and_keys_them_as_given(instructir_sample, run):
    by_name = instir.evaluate(instructir_sample, run, ["nDCG@10", "RR@10"])
    by_object = instir.evaluate(instructir_sample, run, [ir_measures.nDCG @ 10, ir_measures.RR @ 10])
    assert by_object == {ir_measures.nDCG @ 10: by_name["nDCG@10"], ir_measures.RR @ 10: by_name["RR@10"]}
    assert instir.evaluate(instructir_sample, run, ir_measures.nDCG @ 10) == by_name["nDCG@10"]  # one object: a float
    assert instir.evaluate(instructir_sample, run, ("nDCG@10",)) == {"nDCG@10": by_name["nDCG@10"]}  # a tuple: a dict
    assert instir.evaluate(instructir_sample, run, [parse_measure("Robustness@10")])[parse_measure("Robustness@10")] < \
        by_name["nDCG@10"]


def test_evaluate_runs_takes_objects_and_names_alike(instructir_sample, run):
    names = instir.evaluate_runs({"s": run}, instructir_sample, ["nDCG@10"]).table
    objects = instir.evaluate_runs({"s": run}, instructir_sample, [ir_measures.nDCG @ 10]).table
    pd.testing.assert_frame_equal(names, objects)
    assert set(names["measure"]) == {"nDCG@10", "Robustness@10"}  # InstructIR's spec derives Robustness


def test_a_judged_measure_is_not_computed_from_a_run(instructir_sample, run):
    with pytest.raises(UsageError, match="InstFol@20 is judged"):
        instir.evaluate(instructir_sample, run, "InstFol@20")


def test_robustness_and_forms_derive_from_per_query_measures_only_and_never_twice():
    # InstFol is one value per judged instance, not per query: no Robustness of it; a form's measure gets no form
    assert with_derived([InstFol(20)], ["Robustness"]) == [InstFol(20)]
    ndcg = parse_measure("nDCG@5")
    derived = with_derived([ndcg], ["forms"], Forms(("og", "changed"), "og"))
    assert [str(m) for m in derived] == ["nDCG@5", "nDCG@5[og]", "nDCG@5[changed]"]


def test_a_later_derivation_applies_to_the_measures_an_earlier_one_added():
    # derived = ["ifir-native", "Robustness"]: the native nDCG@20 is a per-query measure too, so it gets its Robustness
    derived = with_derived([parse_measure("nDCG@20")], ["ifir-native", "Robustness"])
    assert [str(m) for m in derived] == ["nDCG@20", "nDCG@20[ifir-native]", "Robustness@20",
                                         "Robustness(nDCG@20[ifir-native])"]


def test_a_cutoff_mark_is_at_or_an_underscore_at_before_a_digit_only():
    assert split_cutoff("ndcg_at_10") == ("ndcg", "10") and split_cutoff("nDCG@10") == ("nDCG", "10")
    assert split_cutoff("recall_at_k") == ("recall_at_k", None)
