"""compare_to_papers() aligns reproduced with reported numbers, computes deltas and verdicts in the
paper's printed units, attaches known divergences, and refuses sample data."""

import pandas as pd
import pytest
from says import says

from instir.benchmarks import catalog
from instir.papers import (
    DIVERGENCES,
    NotComparableError,
    compare_to_papers,
    comparison_view,
    known_divergences,
    load_reported,
    match_systems,
    not_comparable_reason,
    tolerance_statement,
)


@pytest.fixture(scope="module")
def reported():
    return pd.concat([load_reported(p) for p in ("ifir", "instructir", "mteb")], ignore_index=True)


def table(rows):
    """Reproduced rows in the metrics-table layout (system, benchmark, setting, subset, level, measure, value)."""
    return pd.DataFrame(rows, columns=["system", "benchmark", "setting", "subset", "level", "measure", "value"])


#: every real benchmark's data verified as the paper's
VERIFIED = {name: None for family in catalog.families() for name in catalog.family(family).benchmarks()}
#: the paper's judge, as the judge stage names it in ``judge/instfol.csv``
PAPERS_JUDGE = {"judge_backend": "openai-compatible", "judge_model": "gpt-4o-mini [ifir]"}


def every_instance(benchmark, subset):
    """How many instances the slice has (the published count; an Average's: of every subset), as the judge stage's
    ``instances`` says when it judged them all."""
    if subset in ("average", "avg"):
        return sum(catalog.entry(b).expected_counts().get("queries", 0) for b in catalog.family(benchmark).benchmarks())
    return catalog.entry(benchmark).expected_counts().get("queries")


def grounded(ours, reported, **options):
    """:func:`compare_to_papers` where every verdict's grounds hold: verified data, each BM25 run by its paper's
    engine (``runs``), long texts windowed as IFIR's code windows them, runs 1,000 deep, InstFol by the paper's
    judge (when ``ours`` names none) on two runs as deep (the judge stage's ``depth``), on every instance of its slice
    (when ``ours`` does not say how many were judged)."""
    runs = ours[["benchmark", "system"]].drop_duplicates().assign(windowing="ifir", k=1000)
    runs["engine"] = [catalog.family(catalog.family_of(b)).bm25.get("engine") for b in runs["benchmark"]]
    if "judge_model" not in ours:
        ours = ours.assign(**PAPERS_JUDGE)
    if "depth" not in ours:
        ours = ours.assign(depth=[1000 if str(m).startswith("InstFol") else None for m in ours["measure"]])
    if "instances" not in ours:
        ours = ours.assign(instances=[every_instance(b, s) for b, s in zip(ours["benchmark"], ours["subset"])])
    return compare_to_papers(ours, reported, runs=runs, data=VERIFIED, **options)


def test_delta_and_verdict_in_printed_units(reported):
    ours = table([("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "nDCG@20[ifir-native]", 0.262)])
    out = grounded(ours, reported[reported["table"] == "Table 3"])
    row = out.iloc[0]
    # Table 3 prints BM25 FiQA nDCG@20 = 0.25; tolerance 0.02 + rounding 0.005
    assert (row["reported"], row["reproduced"]) == (0.25, pytest.approx(0.262))
    assert row["delta"] == pytest.approx(0.012) and row["tolerance"] == pytest.approx(0.025)
    assert bool(row["within_tolerance"]) and row["measure_reproduced"] == "nDCG@20[ifir-native]"
    assert len(out) == 1


def test_outside_tolerance_is_flagged(reported):
    ours = table([("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "nDCG@20[ifir-native]", 0.20)])
    row = grounded(ours, reported[reported["table"] == "Table 3"], tolerance=0.01).iloc[0]
    assert row["delta"] == pytest.approx(-0.05) and row["tolerance"] == pytest.approx(0.015)
    assert not bool(row["within_tolerance"]) and row["verdict"] == "outside tolerance"


def test_instfol_is_compared_in_percent(reported):
    ours = table([("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "InstFol@20", 0.02)])
    row = grounded(ours, reported[reported["table"] == "Table 3"]).iloc[0]
    # printed 1.10 (%); reproduced 0.02 -> 2.00 %; tolerance 0.03 x 100 + 0.005
    assert row["reproduced"] == pytest.approx(2.0) and row["delta"] == pytest.approx(0.9)
    assert row["tolerance"] == pytest.approx(3.005) and bool(row["within_tolerance"])


def test_instructir_robustness_aligns_with_the_secondary_table(reported):
    ours = table([("bm25", "instructir", "instructed", "all", "all", "Robustness@10", 0.25),
                  ("bm25", "instructir", "instructed", "all", "all", "nDCG@10", 0.80)])
    out = compare_to_papers(ours, reported[reported["paper"] == "instructir"]).set_index("metric")
    assert out.loc["Robustness@10", "reported"] == 26.9 and out.loc["Robustness@10", "delta"] == pytest.approx(-1.9)
    assert out.loc["nDCG@10", "delta"] == pytest.approx(4.0)
    assert out["secondary"].all() and out["reasons"].str.contains("secondary-source").all()


def test_levels_align_with_the_per_level_table(reported):
    ours = table([("bm25", "ifir/aila", "instructed", "aila", "2", "nDCG@20", 0.1),
                  ("bm25", "ifir/aila", "instructed", "aila", "all", "nDCG@20", 0.1)])
    out = compare_to_papers(ours, reported[reported["table"].isin(["Table 3", "Table 10"])])
    assert sorted(zip(out["table"], out["level"].fillna(0))) == [("Table 10", 2), ("Table 3", 0)]


def test_single_level_subsets_treat_level_zero_as_pooled(reported):
    ours = table([("bm25", "ifir/nfcorpus", "instructed", "nfcorpus", 0, "nDCG@20", 0.43)])
    out = compare_to_papers(ours, reported[reported["table"] == "Table 3"])
    assert len(out) == 1 and out.iloc[0]["delta"] == pytest.approx(0.0)


SEVEN = ("fiqa", "scifact_open", "nfcorpus", "aila", "fire", "pm", "cds")


def test_average_over_the_seven_subsets_aligns_with_the_average_column(reported):
    ours = table([("bm25", "ifir", "instructed", "average", "all", "nDCG@20", 0.34)]
                 + [("bm25", f"ifir/{s}", "instructed", s, "all", "nDCG@20", 0.3) for s in SEVEN])
    out = compare_to_papers(ours, reported[reported["table"] == "Table 3"])
    average = out[out["subset_id"] == "avg"]
    assert len(average) == 1 and average.iloc[0]["delta"] == pytest.approx(0.0)


def test_an_average_over_fewer_subsets_is_not_compared_with_the_papers_average(reported):
    ours = table([("bm25", "ifir", "instructed", "average", "all", "nDCG@20", 0.34),
                  ("bm25", "ifir", "instructed", "average", "all", "InstFol@20", 0.01)]
                 + [("bm25", f"ifir/{s}", "instructed", s, "all", "nDCG@20", 0.3) for s in SEVEN[:2]]
                 + [("bm25", f"ifir/{s}", "instructed", s, "all", "InstFol@20", 0.01) for s in SEVEN])
    out = compare_to_papers(ours, reported[reported["table"] == "Table 3"])
    assert set(out["subset_id"]) == {*SEVEN, "avg"}
    assert out.loc[out["subset_id"] == "avg", "metric"].tolist() == ["InstFol@20"]  # nDCG@20 has 2 of 7 subsets


def test_hybrid_rows_need_an_explicit_hybrid_system(reported):
    hybrid = reported[reported["table"] == "Table 8 (hybrid retrieval with BM25)"]
    plain = table([("GritLM/GritLM-7B", "ifir/fiqa", "instructed", "fiqa", "all", "nDCG@20", 0.59)])
    assert compare_to_papers(plain, hybrid).empty
    named = table([("my-hybrid", "ifir/fiqa", "instructed", "fiqa", "all", "nDCG@20", 0.59)])
    out = compare_to_papers(named, hybrid, model_map={"my-hybrid": "hybrid:gritlm/gritlm-7b+bm25"})
    assert len(out) == 1 and out.iloc[0]["reported"] == 0.59


def test_query_only_rows_do_not_align_with_instructed_numbers(reported):
    ours = table([("sentence-transformers/all-MiniLM-L6-v2", "instructir", "query-only", "all", "all", "nDCG@10", 0.5)])
    out = compare_to_papers(ours, reported[reported["paper"] == "mteb"])
    assert list(out["setting"]) == ["query-only"] and out.iloc[0]["reported"] == 0.4828


def test_known_reasons_are_attached_to_the_numbers_they_affect(reported):
    ours = table([("bm25", "ifir/aila", "instructed", "aila", "2", "InstFol@20", 0.0),
                  ("bm25", "ifir/aila", "instructed", "aila", "1", "InstFol@20", 0.0)])
    out = compare_to_papers(ours, reported[reported["table"] == "Table 11"]).set_index("level")
    assert "aila-judge-prompt" in out.loc[2, "reasons"].split("; ")
    assert "aila-judge-prompt" not in out.loc[1, "reasons"].split("; ")
    assert {"judge-model", "query-only-overwrite", "bm25-engine"} <= set(out.loc[1, "reasons"].split("; "))


def test_known_divergences_have_unique_keys_and_text():
    frame = known_divergences()
    assert len(frame) == len(DIVERGENCES) and frame["key"].is_unique
    assert {"ifir-native-ndcg", "aila-judge-prompt", "query-order", "bm25-engine"} <= set(frame["key"])
    assert (frame["explanation"].str.len() > 40).all()


@pytest.mark.parametrize("benchmark", ["instructir-sample", "ifir-sample/fiqa"])
def test_sample_numbers_are_refused(reported, benchmark):
    ours = table([("bm25", benchmark, "instructed", "fiqa", "all", "nDCG@20", 0.25)])
    assert "SAMPLE" in not_comparable_reason(ours)
    with pytest.raises(NotComparableError, match="not comparable"):
        compare_to_papers(ours, reported)


def test_a_table_without_benchmark_names_is_refused(reported):
    ours = pd.DataFrame({"system": ["bm25"], "measure": ["nDCG@20"], "value": [0.25]})
    with pytest.raises(NotComparableError, match="no 'benchmark' column"):
        compare_to_papers(ours, reported)


def test_full_benchmark_numbers_are_comparable():
    assert not_comparable_reason(table([("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "nDCG@20", 0.2)])) is None


def test_two_values_for_one_slice_are_an_error(reported):
    ours = table([("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "nDCG@20", 0.2),
                  ("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "nDCG@20", 0.3)])
    with pytest.raises(ValueError, match="several values"):
        compare_to_papers(ours, reported)


def test_judge_fidelity_reasons_attach_to_ifir_instfol_only():
    from instir.papers.divergences import reasons_for

    row = {"paper": "ifir", "benchmark": "ifir", "subset_id": "fiqa", "level": 1, "model_key": "bm25",
           "secondary": False}
    judge_reasons = {"judge-fallbacks", "judge-call-settings", "same-level-instructions", "query-only-overwrite"}
    assert judge_reasons <= set(reasons_for({**row, "measure": "InstFol@20"}))
    assert not judge_reasons & set(reasons_for({**row, "measure": "nDCG@20"}))
    assert "query-only-overwrite" not in reasons_for({**row, "subset_id": "nfcorpus", "level": 0,
                                                      "measure": "InstFol@20"})


def test_claims_about_the_released_judge_code_match_that_code():
    """SighingSnow/IFIR src/llm_eval_pre.py exports copies made before judging (no score survives,
    llm_eval.py raises KeyError: 'score'); each level's query-only list is judged with that level's
    prompt (never reused across levels); get_problem_ids never fires (no score is negative)."""
    import instir.judge.following as following

    explanation = {d.key: d.explanation for d in DIVERGENCES}
    overwrite = explanation["query-only-overwrite"]
    assert "reused" not in overwrite and "KeyError: 'score'" in overwrite
    assert "never drops a rank" in explanation["judge-fallbacks"]
    assert "keeps only the last" in explanation["same-level-instructions"]
    assert "as the official code drops it" not in following.score_list_pair.__doc__


def test_judge_modules_cite_the_divergences_they_depart_by_key():
    import instir.judge.following as following
    import instir.judge.rubrics as rubrics

    keys = {d.key for d in DIVERGENCES}
    for module, cited in ((following, ("aila-judge-prompt", "query-only-overwrite", "judge-fallbacks",
                                       "same-level-instructions", "judge-call-settings")),
                          (rubrics, ("aila-judge-prompt", "judge-call-settings"))):
        assert set(cited) <= keys
        assert all(f"``{key}``" in module.__doc__ for key in cited), module.__name__


def test_long_doc_windows_note_follows_each_runs_windowing_mode(reported):
    systems = {"contriever": "dense:facebook/contriever", "gtr": "dense:sentence-transformers/gtr-t5-base",
               "instructor": "dense:hkunlp/instructor-base", "colbert": "dense:colbert-ir/colbertv2.0"}
    ours = table([(systems[name], "ifir/fiqa", "instructed", "fiqa", "all", "nDCG@20", 0.3)
                  for name in ("contriever", "gtr", "instructor")]
                 + [(systems["colbert"], f"ifir/{s}", "instructed", s, "all", "nDCG@20", 0.3)
                    for s in catalog.family("ifir").subsets]
                 + [(systems["colbert"], "ifir", "instructed", "average", "all", "nDCG@20", 0.3)])
    runs = pd.DataFrame([("ifir/fiqa", systems["contriever"], "clean"), ("ifir/fiqa", systems["gtr"], "ifir"),
                         ("ifir/fiqa", systems["instructor"], "none"), ("ifir/fiqa", systems["colbert"], "ifir"),
                         ("ifir/nfcorpus", systems["colbert"], "clean")], columns=["benchmark", "system", "windowing"])
    out = compare_to_papers(ours, reported[reported["table"] == "Table 3"], runs=runs)
    out = out[(out["system"] != systems["colbert"]) | (out["subset_id"] == "avg")].set_index("system")
    assert out["windowing"].to_dict() == {systems["contriever"]: "clean", systems["gtr"]: "ifir",
                                          systems["instructor"]: "none", systems["colbert"]: "mixed"}
    noted = {s for s, reasons in out["reasons"].items() if "long-doc-windows" in reasons.split("; ")}
    assert noted == {systems["contriever"], systems["instructor"], systems["colbert"]}
    unknown = compare_to_papers(ours, reported[reported["table"] == "Table 3"])
    assert set(unknown["windowing"]) == {"unknown"} and unknown["reasons"].str.contains("long-doc-windows").all()


def test_long_doc_windows_note_spares_models_ifir_encoded_whole_and_bm25(reported):
    ours = table([("dense:GritLM/GritLM-7B", "ifir/fiqa", "instructed", "fiqa", "all", "nDCG@20", 0.5),
                  ("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "nDCG@20", 0.25)])
    out = compare_to_papers(ours, reported[reported["table"] == "Table 3"])
    assert len(out) == 2 and not out["reasons"].str.contains("long-doc-windows").any()


def test_a_widen_column_widens_that_rows_tolerance_in_printed_units(reported):
    ours = table([("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "InstFol@20", 0.05),
                  ("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "nDCG@20", 0.20)]).assign(widen=[0.02, None])
    out = grounded(ours, reported[reported["table"] == "Table 3"]).set_index("metric")
    # InstFol: printed 1.10 %, reproduced 5.00 %: outside 3.005 alone, inside once widened by 2 points
    assert out.loc["InstFol@20", "widened_by"] == pytest.approx(2.0)
    assert out.loc["InstFol@20", "tolerance"] == pytest.approx(5.005)
    assert bool(out.loc["InstFol@20", "within_tolerance"])
    assert out.loc["nDCG@20", "widened_by"] == 0 and out.loc["nDCG@20", "tolerance"] == pytest.approx(0.025)
    plain = grounded(ours.drop(columns="widen"), reported[reported["table"] == "Table 3"]).set_index("metric")
    assert not bool(plain.loc["InstFol@20", "within_tolerance"]) and (plain["widened_by"] == 0).all()


@pytest.mark.parametrize("benchmark", ["instructir-sample", "ifir-sample/fiqa"])
def test_sample_numbers_align_with_a_not_comparable_verdict_when_asked(reported, benchmark):
    measure, subset = ("nDCG@10", "all") if benchmark.startswith("instructir") else ("nDCG@20", "fiqa")
    ours = table([("bm25", benchmark, "instructed", subset, "all", measure, 0.25)])
    out = compare_to_papers(ours, reported, sample_ok=True)
    assert len(out) and set(out["verdict"]) == {"not comparable (SAMPLE)"}
    assert out["within_tolerance"].isna().all() and out["delta"].notna().all()
    assert set(out["benchmark"]) == {benchmark.split("/")[0].removesuffix("-sample")}


def test_one_verdict_per_paper_number_in_the_papers_protocol_with_the_other_beside_it(reported):
    ours = table([("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "nDCG@20[ifir-native]", 0.262),
                  ("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "nDCG@20", 0.20)])
    out = grounded(ours, reported[reported["table"] == "Table 3"])
    assert len(out) == 1  # IFIR's Table 3 prints one BM25 FiQA nDCG@20: one verdict, in its (native) protocol
    row = out.iloc[0]
    assert (row["measure_reproduced"], row["verdict"]) == ("nDCG@20[ifir-native]", "within tolerance")
    assert (row["other_measure"], row["other_reproduced"]) == ("nDCG@20", pytest.approx(0.20))
    view = comparison_view(out)
    assert view.loc[0, "other protocol"] == "nDCG@20" and view.loc[0, "reproduced (other)"] == pytest.approx(0.20)
    gritlm = ours.assign(system="GritLM/GritLM-7B")
    mteb = grounded(gritlm, reported[(reported["paper"] == "mteb") & reported["level"].isna()])
    assert len(mteb) == 1  # MTEB scores the standard nDCG@20: that one gives its verdict
    assert (mteb.loc[0, "measure_reproduced"], mteb.loc[0, "other_measure"]) == ("nDCG@20", "nDCG@20[ifir-native]")


def test_a_number_in_another_protocol_than_the_papers_gets_no_verdict(reported):
    ours = table([("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "nDCG@20", 0.25)])
    (verdict,) = grounded(ours, reported[reported["table"] == "Table 3"])["verdict"]
    assert verdict == "not comparable (the paper's nDCG@20 is ifir-native, not standard)"


def test_a_verdict_needs_verified_data_the_papers_engine_and_the_papers_judge(reported):
    """Each ground alone turns a within-tolerance number into 'not comparable', naming that ground."""
    table3 = reported[reported["table"] == "Table 3"]
    ndcg = table([("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "nDCG@20[ifir-native]", 0.25)])
    instfol = table([("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "InstFol@20", 0.011)])
    instfol = instfol.assign(depth=100, instances=1718)
    runs = pd.DataFrame({"benchmark": ["ifir/fiqa"], "system": ["bm25"], "windowing": ["n/a"],
                         "engine": ["elasticsearch"], "k": [100]})
    assert grounded(ndcg, table3)["verdict"].tolist() == ["within tolerance"]
    unverified = {**VERIFIED, "ifir/fiqa": "180 queries where the paper has 1,718"}
    (verdict,) = compare_to_papers(ndcg, table3, runs=runs, data=unverified)["verdict"]
    assert says(verdict, "not comparable", "ifir/fiqa", "180 queries", "1,718")
    (verdict,) = compare_to_papers(ndcg, table3, runs=runs)["verdict"]  # nothing says the data was checked
    assert says(verdict, "not comparable", "ifir/fiqa", "not checked")
    fast = runs.assign(engine="bm25s")
    (verdict,) = compare_to_papers(ndcg, table3, runs=fast, data=VERIFIED)["verdict"]
    assert says(verdict, "not comparable", "bm25s", "elasticsearch")
    (verdict,) = compare_to_papers(ndcg, table3, data=VERIFIED)["verdict"]  # no run says which engine
    assert says(verdict, "not comparable", "unknown", "elasticsearch")
    baseline = instfol.assign(judge_backend="baseline-lexical", judge_model="lexical")
    (row,) = compare_to_papers(baseline, table3, runs=runs, data=VERIFIED).to_dict("records")
    says(row["verdict"], "not comparable", "baseline-lexical", "gpt-4o-mini")
    assert pd.isna(row["within_tolerance"])
    dated = instfol.assign(judge_backend="openai-compatible", judge_model="gpt-4o-mini-2024-07-18 [ifir]")
    assert compare_to_papers(dated, table3, runs=runs, data=VERIFIED)["verdict"].tolist() == ["within tolerance"]


def test_a_number_from_a_run_shallower_than_its_cutoff_earns_no_verdict(reported):
    """A run cut at 10 scores nDCG@20 and InstFol@20 with the ranks past 10 as non-relevant: that number is not the
    paper's, even where it happens to lie within tolerance; an average takes its shallowest subset's run."""
    table3 = reported[reported["table"] == "Table 3"]
    ndcg = table([("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "nDCG@20[ifir-native]", 0.25)])
    instfol = table([("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "InstFol@20", 0.011)])
    instfol = instfol.assign(**PAPERS_JUDGE, instances=1718)
    runs = pd.DataFrame({"benchmark": ["ifir/fiqa"], "system": ["bm25"], "windowing": ["n/a"],
                         "engine": ["elasticsearch"], "k": [10]})
    for ours in (ndcg, instfol.assign(depth=10)):  # an InstFol's depth: both its runs', as the judge stage writes it
        (verdict,) = compare_to_papers(ours, table3, runs=runs, data=VERIFIED)["verdict"]
        assert says(verdict, "not comparable", "ranks 10 documents a query", "@20", "k = 20")
    for ours in (ndcg, instfol.assign(depth=20)):
        (verdict,) = compare_to_papers(ours, table3, runs=runs.assign(k=20), data=VERIFIED)["verdict"]
        assert verdict == "within tolerance"
    subsets = list(catalog.family("ifir").subsets)
    ours = table([("bm25", f"ifir/{s}", "instructed", s, "all", "nDCG@20[ifir-native]", 0.3) for s in subsets]
                 + [("bm25", "ifir", "instructed", "average", "all", "nDCG@20[ifir-native]", 0.3)])
    average = reported[(reported["table"] == "Table 3") & (reported["subset_id"] == "avg")]
    runs = ours[ours["subset"] != "average"][["benchmark", "system"]].assign(windowing="n/a", engine="elasticsearch",
                                                                           k=[100] * (len(subsets) - 1) + [5])
    (verdict,) = compare_to_papers(ours, average, runs=runs, data=VERIFIED)["verdict"]
    assert says(verdict, "not comparable", "ranks 5 documents")
    # one subset's run not listed: on the commit before, the average earned a verdict its subset's row did not
    (verdict,) = compare_to_papers(ours, average, runs=runs.assign(k=100).iloc[1:], data=VERIFIED)["verdict"]
    assert says(verdict, "not comparable", "depth of its run is unknown")


@pytest.mark.parametrize("k", [None, "abc", "\u00b2", -5, True, "[10]", 0])
def test_a_number_whose_runs_depth_is_unknown_earns_no_verdict(reported, k):
    """No k for the run (an external run without a sidecar), or one that is no whole number from 1: on the commit
    before, such a number earned its verdict (and a k of '\u00b2' was a ValueError)."""
    table3 = reported[reported["table"] == "Table 3"]
    ours = table([("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "nDCG@20[ifir-native]", 0.25)])
    runs = pd.DataFrame({"benchmark": ["ifir/fiqa"], "system": ["bm25"], "windowing": ["n/a"],
                         "engine": ["elasticsearch"], "k": [k]})
    (verdict,) = compare_to_papers(ours, table3, runs=runs, data=VERIFIED)["verdict"]
    assert says(verdict, "not comparable", "depth of its run is unknown")
    (verdict,) = compare_to_papers(ours, table3, runs=runs.assign(k="20.0"), data=VERIFIED)["verdict"]
    assert verdict == "within tolerance"  # as a CSV gives it


def test_a_followir_number_needs_a_run_as_deep_as_its_cutoff(reported):
    # the paper's measures are AP@1000[og] and nDCG@5[og]: on the commit before, a run cut at 3 earned both verdicts
    followir = load_reported("followir")
    followir = followir[followir["measure"].isin(["AP@1000[og]", "nDCG@5[og]"])]
    row = followir.iloc[0]
    ours = pd.DataFrame([{"system": row["model_key"], "benchmark": f"followir/{row['subset_id']}",
                          "setting": row["setting"], "subset": row["subset_id"], "level": "all",
                          "measure": row["measure"], "value": row["value"] / row["scale"]}])
    runs = ours[["benchmark", "system"]].assign(windowing="n/a", engine="n/a", k=3)
    (verdict,) = compare_to_papers(ours, followir, runs=runs, data=VERIFIED)["verdict"]
    assert says(verdict, "not comparable", "ranks 3 documents", row["measure"])
    assert compare_to_papers(ours, followir, runs=runs.assign(k=1000), data=VERIFIED)["verdict"].tolist() == [
        "within tolerance"]


def test_a_p_mrr_needs_a_run_as_deep_as_the_authors_retrieval(reported):
    # p-MRR has no cutoff, but a document missing from a run ranks one below its last: a run cut at 10 moves every
    # changed document past it. On the commit before, such a run earned p-MRR's verdict beside FollowIR's
    followir = load_reported("followir")
    row = followir[followir["measure"] == "p-MRR"].iloc[0]
    ours = pd.DataFrame([{"system": row["model_key"], "benchmark": f"followir/{row['subset_id']}",
                          "setting": row["setting"], "subset": row["subset_id"], "level": "all",
                          "measure": "p-MRR[insertion-ties]", "value": row["value"] / row["scale"]}])
    runs = ours[["benchmark", "system"]].assign(windowing="n/a", engine="n/a", k=10)
    (verdict,) = compare_to_papers(ours, followir, runs=runs, data=VERIFIED)["verdict"]
    assert says(verdict, "not comparable", "ranks 10 documents", "1000", "p-MRR")
    assert compare_to_papers(ours, followir, runs=runs.assign(k=1000), data=VERIFIED)["verdict"].tolist() == [
        "within tolerance"]


def test_an_average_gets_a_verdict_only_when_every_subsets_data_is_verified(reported):
    subsets = list(catalog.family("ifir").subsets)
    ours = table([("bm25", f"ifir/{s}", "instructed", s, "all", "nDCG@20[ifir-native]", 0.3) for s in subsets]
                 + [("bm25", "ifir", "instructed", "average", "all", "nDCG@20[ifir-native]", 0.3)])
    average = reported[(reported["table"] == "Table 3") & (reported["subset_id"] == "avg")]
    assert grounded(ours, average)["verdict"].str.endswith("tolerance").all()
    one_off = {**VERIFIED, f"ifir/{subsets[-1]}": "files changed since instir fetch at 0123456789ab"}
    runs = ours[["benchmark", "system"]].assign(windowing="n/a", engine="elasticsearch", k=100)
    (verdict,) = compare_to_papers(ours, average, runs=runs, data=one_off)["verdict"]
    assert says(verdict, "not comparable", f"ifir/{subsets[-1]}", "changed since instir fetch")


def test_comparison_view_puts_every_number_on_the_unit_scale(reported):
    ours = table([("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "nDCG@20", 0.262)])
    ifir = compare_to_papers(ours, reported[reported["table"] == "Table 3"])
    view = comparison_view(ifir)
    assert view.loc[0, "reported"] == pytest.approx(0.25) and view.loc[0, "reproduced"] == pytest.approx(0.262)
    assert list(view.columns[:4]) == ["paper", "table", "paper model", "system"]
    robust = table([("bm25", "instructir", "instructed", "all", "all", "Robustness@10", 0.2)])
    view = comparison_view(compare_to_papers(robust, reported))
    assert (view["reported"] < 1).all() and view["reproduced"].eq(0.2).all()  # InstructIR prints ×100


def test_system_names_are_matched_to_the_names_the_papers_print():
    matched = match_systems(["bm25", "dense:sentence-transformers/gtr-t5-xl", "my-model"]).set_index("system")
    assert matched.loc["bm25", "IFIR name"] == "BM25"
    assert "GTR-XL" in matched.loc["dense:sentence-transformers/gtr-t5-xl", "IFIR name"]
    assert matched.loc["my-model", "IFIR name"] == "" and matched.loc["my-model", "InstructIR name"] == ""


def test_the_tolerance_rule_is_stated_in_points():
    text = tolerance_statement()
    assert "2 points" in text and "InstFol: 3" in text and "rounding" in text


def test_a_reproduced_number_gets_one_verdict_from_the_row_of_the_setup_it_ran(reported):
    # on the commit before, one Instructor-Base TREC-PM nDCG@20 of 0.17 was within tolerance of Table 3, of Table 8's
    # copy of it and of Table 9's no-model-prompt row, and outside that of Table 9's run with the model's own prompt
    ours = table([("hkunlp/instructor-base", "ifir/pm", "instructed", "pm", "all", "nDCG@20[ifir-native]", 0.17)])
    out = grounded(ours, reported[reported["paper"] == "ifir"]).set_index("table")
    judged = out[~out["verdict"].str.startswith("not comparable")]
    assert judged.index.tolist() == ["Table 3"] and judged["verdict"].tolist() == ["within tolerance"]
    assert "Table 8 (end-to-end retrieval)" in out.loc["Table 3", "reference"]  # the same printed number, one row
    says(out.loc["Table 9 (with model's own task prompt)", "verdict"], "not comparable", "own task prompt")
    says(out.loc["Table 9 (no model prompt)", "verdict"], "not comparable", "no model prompt", "Table 3")
    assert len(out) == 3


@pytest.mark.parametrize("windowing", ["none", "clean", "mixed", "unknown"])
def test_a_model_ifir_encoded_in_windows_earns_a_verdict_only_from_a_run_windowed_as_ifirs_code(reported, windowing):
    # on the commit before, a run that let the model truncate long texts (windowing 'none') earned Table 3's verdict,
    # the long-doc-windows divergence only listed among its reasons, while a BM25 run of another engine earned none
    ours = table([("dense:hkunlp/instructor-base", "ifir/pm", "instructed", "pm", "all", "nDCG@20[ifir-native]", 0.17)])
    table3 = reported[reported["table"] == "Table 3"]
    runs = pd.DataFrame({"benchmark": ["ifir/pm"], "system": ["dense:hkunlp/instructor-base"], "engine": ["n/a"],
                         "k": [100], "windowing": [windowing]})
    (verdict,) = compare_to_papers(ours, table3, runs=runs, data=VERIFIED)["verdict"]
    says(verdict, "not comparable", "windows", windowing)
    assert compare_to_papers(ours, table3, runs=runs.assign(windowing="ifir"), data=VERIFIED)["verdict"].tolist() == [
        "within tolerance"]


@pytest.mark.parametrize("sample_first", [False, True])
def test_a_sample_and_the_benchmark_it_samples_keep_a_row_each_whatever_their_order(reported, sample_first):
    # on the commit before, one row per reported number and system was kept: the real number vanished when the sample
    # came first, or the sample's standard nDCG@20 stood as the real row's other protocol
    real = [("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "nDCG@20[ifir-native]", 0.255),
            ("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "nDCG@20", 0.21)]
    sample = [("bm25", "ifir-sample/fiqa", *row[2:-1], value) for row, value in zip(real, (0.95, 0.90))]
    ours = table(sample + real if sample_first else real + sample)
    runs = pd.DataFrame({"benchmark": ["ifir/fiqa", "ifir-sample/fiqa"], "system": "bm25", "windowing": "n/a",
                         "engine": "elasticsearch", "k": 100})
    out = compare_to_papers(ours, reported[reported["table"] == "Table 3"], runs=runs, data=VERIFIED, sample_ok=True)
    by_verdict = out.set_index("verdict")
    assert sorted(out["verdict"]) == ["not comparable (SAMPLE)", "within tolerance"]
    assert by_verdict.loc["within tolerance", "reproduced"] == pytest.approx(0.255)
    assert by_verdict.loc["within tolerance", "other_reproduced"] == pytest.approx(0.21)
    assert by_verdict.loc["not comparable (SAMPLE)", "other_reproduced"] == pytest.approx(0.90)


def test_a_samples_rows_carry_the_engine_windowing_and_depth_its_runs_record(reported):
    # on the commit before, the runs were looked up under the sample's name while the rows were renamed after the
    # benchmark it samples: every sample row said engine 'unknown' (with the bm25-engine reason) and had no depth
    ours = table([("bm25", "ifir-sample/fiqa", "instructed", "fiqa", "all", "nDCG@20[ifir-native]", 0.3),
                  ("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "nDCG@20[ifir-native]", 0.3)])
    runs = pd.DataFrame({"benchmark": ["ifir-sample/fiqa", "ifir/fiqa"], "system": "bm25", "windowing": "n/a",
                         "engine": ["elasticsearch", "bm25s"], "k": [100, 10]})
    out = compare_to_papers(ours, reported[reported["table"] == "Table 3"], runs=runs, data=VERIFIED,
                            sample_ok=True).set_index("verdict")
    sample = out.loc["not comparable (SAMPLE)"]
    assert (sample["engine"], sample["windowing"]) == ("elasticsearch", "n/a")
    assert "bm25-engine" not in sample["reasons"]
    (real_verdict,) = [v for v in out.index if v != "not comparable (SAMPLE)"]
    says(real_verdict, "not comparable", "bm25s")  # the real run's own engine, not mixed with the sample's


def test_a_number_the_paper_prints_is_judged_by_its_row_and_a_secondary_rerun_shown_beside_it(reported):
    # on the commit before, RepLLaMA's 88.62 was within tolerance of the InstructIR paper's 87.62 and outside that of
    # the Promptriever paper's rerun (85.70): one number, two opposite verdicts
    ours = table([("repllama", "instructir", "instructed", "all", "all", "nDCG@10", 0.8862),
                  ("bm25", "instructir", "instructed", "all", "all", "nDCG@10", 0.80)])
    runs = pd.DataFrame({"benchmark": "instructir", "system": ["repllama", "bm25"], "windowing": "n/a",
                         "engine": ["n/a", "anserini"], "k": 100})
    out = compare_to_papers(ours, reported[reported["paper"] == "instructir"], runs=runs, data=VERIFIED,
                            model_map={"repllama": "castorini/repllama-v1-7b-lora-passage"})
    repllama = out[out["system"] == "repllama"].set_index("secondary")
    assert repllama.loc[False, "verdict"] == "within tolerance" and repllama.loc[False, "reported"] == 87.62
    says(repllama.loc[True, "verdict"], "not comparable", "secondary source", "paper's row")
    assert repllama.loc[True, "reported"] == 85.7 and "secondary-beside-paper" in repllama.loc[True, "reasons"]
    # where only a secondary source prints the number (InstructIR's BM25), it is judged, said to be that source's rerun
    (bm25,) = out[out["system"] == "bm25"].to_dict("records")
    assert bm25["verdict"] == "outside tolerance" and "secondary-source" in bm25["reasons"]
    secondary = {d.key: d for d in DIVERGENCES}["secondary-source"]
    assert says(secondary.title + " " + secondary.explanation, "own rerun", "not the benchmark's paper")


def test_an_instfol_judged_on_a_sample_of_its_instances_earns_no_verdict(reported):
    # on the commit before, InstFol judged on 5 of FiQA's 1,718 instances (judge_max_instances' default) earned
    # "within tolerance" of Table 3's value, which is the mean over all of them
    ours = table([("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "InstFol@20", 0.015),
                  ("bm25", "ifir/fiqa", "instructed", "fiqa", "1", "InstFol@20", -0.0376)])
    ifir = reported[reported["table"].isin(["Table 3", "Table 11"])]
    sampled = grounded(ours.assign(instances=[5, 2]), ifir).set_index("table")
    says(sampled.loc["Table 3", "verdict"], "not comparable", "judged on 5 of the 1,718 instances of ifir/fiqa",
         "judge_max_instances=1718", "--max-instances")
    says(sampled.loc["Table 11", "verdict"], "not comparable", "5 of the 1,718 instances of ifir/fiqa")
    assert sampled["within_tolerance"].isna().all()
    whole = grounded(ours.assign(instances=[1718, 600]), ifir).set_index("table")
    assert set(whole["verdict"]) == {"within tolerance"}
    runs = pd.DataFrame({"benchmark": ["ifir/fiqa"], "system": "bm25", "windowing": "n/a", "engine": "elasticsearch",
                         "k": 100})
    (unknown,) = compare_to_papers(ours.drop(index=1).assign(**PAPERS_JUDGE, depth=100),
                                   ifir[ifir["table"] == "Table 3"], runs=runs, data=VERIFIED)["verdict"]
    says(unknown, "not comparable", "how many", "instances", "judge again")


@pytest.mark.parametrize("template, verdict", [
    ("mteb", "not comparable (its run's template is 'mteb', the paper's card runs 'followir-e5')"),
    ("followir-e5", "within tolerance"), ("unknown", "within tolerance")])
def test_a_run_formatted_otherwise_than_the_papers_card_earns_no_verdict(template, verdict):
    # before, a run of E5-base-v2 without the authors' 'query: ' prefix (FollowIR's default for a dense run of no card,
    # or a card's run given --template) was judged against the paper's row like the card's own run
    reported = load_reported("followir")
    ours = table([("dense:intfloat/e5-base-v2", "followir/core17", "instructed", "", "", "AP@1000[og]", 0.1402)])
    runs = pd.DataFrame([{"benchmark": "followir/core17", "system": "dense:intfloat/e5-base-v2", "k": 1000,
                          "windowing": "none", "engine": "n/a", "template": template}])
    compared = compare_to_papers(ours, reported, runs=runs, data=VERIFIED)
    assert list(compared["verdict"]) == [verdict] and list(compared["template"]) == [template]


# ---- the mutation review's tests (each verdict rule at its edge)

FIQA_NATIVE = ("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "nDCG@20[ifir-native]")


@pytest.mark.parametrize(("value", "verdict"), [(0.275, "within tolerance"), (0.2751, "outside tolerance")])
def test_a_delta_exactly_at_the_tolerance_is_within_and_one_past_it_outside(reported, value, verdict):
    # Table 3 prints BM25's FiQA nDCG@20 as 0.25: tolerance 0.02 + the rounding 0.005 = 0.025, so 0.275 is on the
    # edge (|delta| <= tolerance, whatever the float arithmetic's last bit) and 0.2751 past it
    (row,) = grounded(table([(*FIQA_NATIVE, value)]), reported[reported["table"] == "Table 3"]).to_dict("records")
    assert row["verdict"] == verdict


def test_a_tolerance_prefix_matches_the_start_of_a_measure_name_only(reported):
    # "DCG" is no prefix of nDCG@20: the row takes the default (0 + the rounding 0.005), not DCG's 0.5
    (row,) = grounded(table([(*FIQA_NATIVE, 0.262)]), reported[reported["table"] == "Table 3"],
                      tolerance={"default": 0.0, "DCG": 0.5}).to_dict("records")
    assert row["tolerance"] == pytest.approx(0.005) and row["verdict"] == "outside tolerance"


def test_rows_flagged_is_sample_are_samples_whatever_their_benchmark_is_named(reported):
    ours = table([(*FIQA_NATIVE, 0.25)]).assign(is_sample=True)
    assert says(not_comparable_reason(ours), "SAMPLE", "ifir/fiqa")
    with pytest.raises(NotComparableError):
        grounded(ours, reported[reported["table"] == "Table 3"])
    (row,) = grounded(ours, reported[reported["table"] == "Table 3"], sample_ok=True).to_dict("records")
    assert row["verdict"] == "not comparable (SAMPLE)" and pd.isna(row["within_tolerance"])


def test_a_table_without_benchmark_names_is_refused_even_with_sample_ok(reported):
    ours = table([(*FIQA_NATIVE, 0.25)]).drop(columns="benchmark")
    with pytest.raises(NotComparableError, match="no 'benchmark' column"):
        compare_to_papers(ours, reported, sample_ok=True)


def test_a_hybrid_row_run_by_another_bm25_engine_than_the_papers_earns_no_verdict(reported):
    hybrid = reported[reported["table"] == "Table 8 (hybrid retrieval with BM25)"]
    ours = table([("my-hybrid", "ifir/fiqa", "instructed", "fiqa", "all", "nDCG@20[ifir-native]", 0.59)])
    runs = pd.DataFrame({"benchmark": ["ifir/fiqa"], "system": ["my-hybrid"], "windowing": ["ifir"], "k": [100]})
    mapped = {"my-hybrid": "hybrid:gritlm/gritlm-7b+bm25"}
    for engine, verdict in (("elasticsearch", "within tolerance"), ("bm25s", "not comparable")):
        (said,) = compare_to_papers(ours, hybrid, model_map=mapped, runs=runs.assign(engine=engine),
                                    data=VERIFIED)["verdict"]
        assert said.startswith(verdict), said
    assert says(said, "bm25s", "elasticsearch")


@pytest.mark.parametrize(("backend", "model"), [("hf", "gpt-4o-mini"), ("openai-compatible", "gpt-4o-mini2 [ifir]")])
def test_an_instfol_needs_the_papers_judge_model_through_the_papers_backend(reported, backend, model):
    # gpt-4o-mini's name on another backend (a local model so named, without its log-probabilities) is not the
    # paper's judge; nor is a model whose name merely begins with it (a dated one is: gpt-4o-mini-2024-07-18)
    table3 = reported[reported["table"] == "Table 3"]
    instfol = table([("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "InstFol@20", 0.011)])
    (verdict,) = grounded(instfol.assign(judge_backend=backend, judge_model=model), table3)["verdict"]
    assert says(verdict, "not comparable", "judged by", "gpt-4o-mini")


@pytest.mark.parametrize(("k", "verdict"), [(19, "not comparable"), (20, "within tolerance")])
def test_a_run_one_document_short_of_the_cutoff_earns_no_verdict(reported, k, verdict):
    runs = pd.DataFrame({"benchmark": ["ifir/fiqa"], "system": ["bm25"], "windowing": ["n/a"],
                         "engine": ["elasticsearch"], "k": [k]})
    (said,) = compare_to_papers(table([(*FIQA_NATIVE, 0.25)]), reported[reported["table"] == "Table 3"], runs=runs,
                                data=VERIFIED)["verdict"]
    assert said.startswith(verdict), said


def test_a_run_depth_that_is_no_whole_number_is_unknown(reported):
    runs = pd.DataFrame({"benchmark": ["ifir/fiqa"], "system": ["bm25"], "windowing": ["n/a"],
                         "engine": ["elasticsearch"], "k": ["100.5"]})
    (verdict,) = compare_to_papers(table([(*FIQA_NATIVE, 0.25)]), reported[reported["table"] == "Table 3"],
                                   runs=runs, data=VERIFIED)["verdict"]
    assert says(verdict, "not comparable", "depth of its run is unknown")


def test_a_followir_score_over_several_cutoffs_needs_a_run_as_deep_as_the_deepest(reported):
    # Score is the mean of MAP@1000, nDCG@5 and MAP@1000 over the three subsets: runs cut at 100 rank too few
    # documents for MAP@1000, though enough for nDCG@5
    followir = load_reported("followir")
    row = followir[followir["measure"].str.startswith("Score")].iloc[0]
    subsets = list(catalog.family("followir").subsets)
    ours = pd.DataFrame([{"system": row["model_key"], "benchmark": f"followir/{s}" if s else "followir",
                          "setting": "instructed", "subset": s or "average", "level": "all", "measure": row["measure"],
                          "value": row["value"] / row["scale"]} for s in [*subsets, ""]])
    runs = pd.DataFrame({"benchmark": [f"followir/{s}" for s in subsets], "system": row["model_key"],
                         "windowing": "n/a", "engine": "n/a", "k": 100})
    (verdict,) = compare_to_papers(ours, followir[followir.index == row.name], runs=runs, data=VERIFIED)["verdict"]
    assert says(verdict, "not comparable", "ranks 100 documents", "k = 1000")


def test_an_instfol_judged_on_all_but_one_instance_earns_no_verdict(reported):
    ours = table([("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "InstFol@20", 0.011)])
    (verdict,) = grounded(ours.assign(instances=1717), reported[reported["table"] == "Table 3"])["verdict"]
    assert says(verdict, "not comparable", "judged on 1,717 of the 1,718 instances")


def test_the_tolerance_rule_of_one_number_is_stated_in_points_too():
    assert says(tolerance_statement(0.02), "≤ 2 points on the ×100 scale")


def test_comparison_view_puts_the_tolerance_on_the_unit_scale_too(reported):
    # InstFol prints ×100: tolerance 0.03 x 100 + 0.005 printed is 0.03005 on the unit scale
    ours = table([("bm25", "ifir/fiqa", "instructed", "fiqa", "all", "InstFol@20", 0.02)])
    view = comparison_view(grounded(ours, reported[reported["table"] == "Table 3"]))
    assert view.loc[0, "tolerance"] == pytest.approx(0.03005) and view.loc[0, "delta"] == pytest.approx(0.009)


def test_the_secondary_source_reason_attaches_to_secondary_numbers_only(reported):
    (own,) = grounded(table([(*FIQA_NATIVE, 0.25)]), reported[reported["table"] == "Table 3"])["reasons"]
    assert "secondary-source" not in own.split("; ")
    robust = table([("bm25", "instructir", "instructed", "all", "all", "Robustness@10", 0.25)])
    (theirs,) = compare_to_papers(robust, reported[reported["paper"] == "instructir"])["reasons"]
    assert "secondary-source" in theirs.split("; ")


@pytest.mark.parametrize("engine", [None, float("nan"), ""])
def test_a_bm25_row_that_names_no_engine_gets_the_engine_reason(engine):
    # a reported row (no run behind it) or a run whose engine nothing says: its engine is unknown, not the paper's
    from instir.papers import reasons_for

    row = {"paper": "ifir", "benchmark": "ifir", "measure": "nDCG@20", "model_key": "bm25", "engine": engine}
    assert "bm25-engine" in reasons_for(row)
    assert "bm25-engine" not in reasons_for({**row, "engine": "elasticsearch"})


def test_an_instfol_of_a_subset_the_family_lacks_meets_no_row_and_raises_nothing(reported):
    ours = table([("bm25", "ifir/nosuch", "instructed", "nosuch", "all", "InstFol@20", 0.011)])
    assert compare_to_papers(ours.assign(instances=5), reported[reported["table"] == "Table 3"], data=VERIFIED).empty


def test_the_reasons_listed_for_a_measure_are_those_that_concern_it():
    listed = known_divergences("InstFol")
    assert "judge-model" in set(listed["key"]) and "bm25-engine" not in set(listed["key"])
    assert set(listed["key"]) == {d.key for d in DIVERGENCES if "InstFol" in d.measures}


#: one filter of a Divergence each: the reason, a row it concerns, and the same row changed in that one field
ONE_FILTER = [
    ({"papers": ("ifir",)}, {"paper": "ifir"}, {"paper": "mteb"}),
    ({"benchmarks": ("ifir",)}, {"benchmark": "ifir"}, {"benchmark": "instructir"}),
    ({"measures": ("nDCG",)}, {"measure": "nDCG@20"}, {"measure": "InstFol@20"}),
    ({"measures": ("nDCG",)}, {"measure": "nDCG@20"}, {"measure": "p-nDCG@20"}),
    ({"subsets": ("aila",)}, {"subset_id": "aila"}, {"subset_id": "fiqa"}),
    ({"levels": (0, 2)}, {"level": None}, {"level": 1}),
    ({"levels": (0, 2)}, {"level": float("nan")}, {"level": 3}),
    ({"levels": (2,)}, {"level": 2.0}, {"level": None}),
    ({"models": ("colbert-ir/",)}, {"model_key": "colbert-ir/colbertv2.0"}, {"model_key": "bm25"}),
    ({"secondary_only": True}, {"secondary": True}, {"secondary": False}),
    ({"windowing": ("unknown",)}, {"windowing": ""}, {"windowing": "ifir"}),
    ({"windowing": ("unknown",)}, {"windowing": None}, {"windowing": "none"}),
    ({"engines": ("unknown",)}, {"engine": float("nan")}, {"engine": "anserini"}),
    ({"variants": ("no model prompt",)}, {"variant": "no model prompt"}, {"variant": ""}),
    ({"beside_paper_row": True}, {"paper_row_too": True}, {"paper_row_too": False}),
    ({"sources": ("deleted",)}, {"source": "MTEB results (deleted in 198c)"}, {"source": "MTEB results"}),
]


@pytest.mark.parametrize(("filters", "concerned", "other"), ONE_FILTER)
def test_a_divergence_is_attached_to_the_rows_its_filter_names_and_to_no_other(filters, concerned, other):
    from instir.papers import Divergence

    base = {"paper": "ifir", "benchmark": "ifir", "measure": "nDCG@20", "subset_id": "aila", "level": 2,
            "model_key": "colbert-ir/colbertv2.0", "secondary": True, "windowing": "", "engine": "",
            "variant": "no model prompt", "paper_row_too": True, "source": "deleted"}
    reason = Divergence("k", "title", "explanation", **filters)
    assert reason.applies({**base, **concerned})
    assert not reason.applies({**base, **other})
    assert Divergence("k", "title", "explanation").applies({**base, **other})  # no filter: every row


def test_the_first_voiding_and_withholding_reasons_are_those_that_void_or_withhold():
    from instir.papers import reasons_for
    from instir.papers.divergences import voiding, withholding

    # MTEB's byte-identical GritLM / e5-mistral IFIR files: the mteb-mislabelled-file reason voids the row;
    # the pooled nDCG of IFIR's own row is concerned by ifir-native-ndcg, which voids nothing
    mteb = {"paper": "mteb", "benchmark": "ifir", "measure": "nDCG@20", "model_key": "gritlm/gritlm-7b",
            "subset_id": "fiqa", "secondary": True, "windowing": "ifir", "engine": "n/a"}
    assert voiding(mteb).key == "mteb-mislabelled-file"
    own = {"paper": "ifir", "benchmark": "ifir", "measure": "nDCG@20", "model_key": "bm25", "subset_id": "fiqa",
           "secondary": False, "windowing": "n/a", "engine": "elasticsearch"}
    assert "ifir-native-ndcg" in reasons_for(own) and voiding(own) is None and withholding(own) is None
    # Contriever run with the kit's own cut of long texts: withheld until rerun as IFIR's code cuts them
    clean = {**own, "model_key": "facebook/contriever", "windowing": "clean"}
    assert withholding(clean).key == "long-doc-windows" and voiding(clean) is None
    assert withholding({**clean, "windowing": "ifir"}) is None


IFIR_ROW = {"paper": "ifir", "benchmark": "ifir", "measure": "nDCG@20", "subset_id": "fiqa", "level": None,
            "model_key": "bm25", "secondary": False, "windowing": "n/a", "engine": "elasticsearch"}
MTEB_ROW = {**IFIR_ROW, "paper": "mteb", "secondary": True, "model_key": "facebook/contriever",
            "source": "MTEB results"}
FOLLOWIR_ROW = {**IFIR_ROW, "paper": "followir", "benchmark": "followir", "measure": "p-MRR", "subset_id": "robust04",
                "secondary": False, "engine": "bm25s"}


#: (row, reason, whether it concerns the row), each worked from the reason's own explanation
@pytest.mark.parametrize(("row", "key", "concerned"), [
    # AILA's level-2 and level-3 judge prompts lack the passage: the pooled AILA InstFol holds those levels
    ({**IFIR_ROW, "measure": "InstFol@20", "subset_id": "aila"}, "aila-judge-prompt", True),
    ({**IFIR_ROW, "measure": "InstFol@20", "subset_id": "aila", "level": 1}, "aila-judge-prompt", False),
    # MTEB's copies hold fewer SciFact-open, FIRE and TREC-CDS queries; FiQA's are whole
    ({**MTEB_ROW, "subset_id": "cds"}, "mteb-data-revision", True),
    ({**MTEB_ROW, "subset_id": "fiqa"}, "mteb-data-revision", False),
    # MTEB's byte-identical GritLM / e5-mistral IFIR files, not its Contriever file
    ({**MTEB_ROW, "model_key": "intfloat/e5-mistral-7b-instruct"}, "mteb-mislabelled-file", True),
    (MTEB_ROW, "mteb-mislabelled-file", False),
    # the INSTRUCTOR results MTEB deleted: the rows whose source says so, not every MTEB IFIR row
    ({**MTEB_ROW, "source": "MTEB results (deleted from repo in commit 198c98f4c)"}, "mteb-removed-results", True),
    (MTEB_ROW, "mteb-removed-results", False),
    # FollowIR's BM25 scored per query over its candidates: any other engine, or none named
    ({**FOLLOWIR_ROW, "measure": "nDCG@5"}, "followir-bm25", True),
    ({**FOLLOWIR_ROW, "measure": "nDCG@5", "engine": ""}, "followir-bm25", True),
    ({**FOLLOWIR_ROW, "measure": "nDCG@5", "engine": "rank_bm25"}, "followir-bm25", False),
    # p-MRR's tie rule: in FollowIR's numbers and MTEB's alike
    (FOLLOWIR_ROW, "pmrr-ties", True),
    ({**FOLLOWIR_ROW, "paper": "mteb"}, "pmrr-ties", True),
    ({**FOLLOWIR_ROW, "measure": "nDCG@5"}, "pmrr-ties", False),
    # a secondary rerun is judged by the paper's row only where the paper prints one
    ({**MTEB_ROW, "paper_row_too": True}, "secondary-beside-paper", True),
    (MTEB_ROW, "secondary-beside-paper", False),
])
def test_a_known_reason_is_attached_to_the_rows_its_explanation_names_and_only_there(row, key, concerned):
    from instir.papers import reasons_for
    from instir.papers.divergences import voiding

    assert (key in reasons_for(row)) is concerned
    if key in ("mteb-mislabelled-file", "mteb-removed-results", "secondary-beside-paper") and concerned:
        assert voiding(row).key == key  # a number that measures nothing the kit reruns earns no verdict
    if not concerned and key in ("mteb-mislabelled-file", "secondary-beside-paper"):
        assert voiding(row) is None
