"""The paper-comparison stage (notebook 05's) on report folders made by hand: it reads only the
folder's files, aligns a real benchmark's numbers with the paper's rows and gives their verdicts,
and names each run's long-text windowing."""

import json

import pandas as pd
import pytest
from says import says

from instir.report.layout import report_layout
from instir.stages import paper_tables
from instir.stages.compare import reproduced_numbers


def real_fiqa_folder(folder, *, engine="elasticsearch", judge=("openai-compatible", "gpt-4o-mini [ifir]"),
                     data=(True, "record counts as published"), k=100, system="bm25", card=None, template=None):
    """A report folder of BM25 on the real IFIR FiQA as the stages leave it: the run (its engine and depth in its
    sidecar, and ``card``'s fields and the ``template`` where given), metrics, InstFol with its judge, and the
    record of the data loaded; the system named ``system``."""
    from instir.report.record import update_record
    from instir.retrieval import Run, write_run

    for name in ("metrics", "judge", "runs"):
        (folder / name).mkdir()
    meta = {"search": {"retriever": {"name": "bm25", "params": {"engine": engine}}}, "k": k,
            **({"template": {"name": template}} if template else {})}
    run = Run(pd.DataFrame({"qid": ["q"], "docid": ["d"], "score": [1.0]}),
              {**meta, "system": card.to_dict()} if card else meta)
    write_run(run, folder / "runs" / "bm25.trec")
    pd.DataFrame([{"benchmark": "ifir/fiqa", "system": system, "run_file": "runs/bm25.trec"}]).to_csv(
        folder / "runs" / "runs.csv", index=False)
    pd.DataFrame({
        "system": [system, system, f"{system} (query-only)"], "benchmark": "ifir/fiqa", "setting": "instructed",
        "subset": "fiqa", "level": "all", "measure": ["nDCG@20[ifir-native]", "nDCG@20", "nDCG@20"],
        "value": [0.251, 0.10, 0.2], "n_queries": 1718,
    }).to_csv(folder / "metrics" / "metrics.csv", index=False)
    pd.DataFrame({
        "scope": ["level", "subset"], "subset": "fiqa", "level": [3, None], "instfol": [0.05, 0.011],
        "s_q": 1.0, "s_inst": 1.1, "instances": [10, 1718], "scored": [10, 1718], "failed": 0, "dropped": 0,
        "system": system, "benchmark": "ifir", "judge_backend": judge[0], "judge_model": judge[1], "k": 20,
        "depth": k,
    }).to_csv(folder / "judge" / "instfol.csv", index=False)
    update_record(folder, datasets={"ifir/fiqa": {"revision": "local", "layout": "songtingyu", "sample": False,
                                                  "verified": data[0], "check": data[1]}})
    return folder


def compared_bm25(folder, system="bm25") -> pd.DataFrame:
    paper_tables(folder)
    compared = pd.read_csv(folder / "paper_tables" / "comparison.csv")
    return compared[(compared["table"] == "Table 3") & (compared["system"] == system)].set_index("measure_reproduced")


def test_paper_tables_compare_numbers_from_a_real_benchmark(tmp_path):
    """05's stage reads only files: given metrics and InstFol of a real IFIR subset, verified data, the paper's
    engine and judge, it aligns them with the paper (BM25 on FiQA: nDCG@20 0.25 and InstFol@20 1.10 in Table 3),
    one verdict per number in the paper's protocol, the standard nDCG@20 beside it."""
    table3 = compared_bm25(real_fiqa_folder(tmp_path))
    assert list(table3.index) == ["nDCG@20[ifir-native]", "InstFol@20"]
    assert table3.loc["nDCG@20[ifir-native]", "verdict"] == "within tolerance"
    assert table3.loc["nDCG@20[ifir-native]", "other_measure"] == "nDCG@20"
    assert table3.loc["nDCG@20[ifir-native]", "other_reproduced"] == pytest.approx(0.10)
    assert table3.loc["InstFol@20", "reproduced"] == pytest.approx(1.1)
    assert table3.loc["InstFol@20", "verdict"] == "within tolerance"
    assert "ifir-native-ndcg" in table3.loc["nDCG@20[ifir-native]", "reasons"]
    assert not (tmp_path / "paper_tables" / "not_comparable.txt").exists()
    assert "bm25 (query-only)" not in set(pd.read_csv(tmp_path / "paper_tables" / "comparison.csv")["system"])


@pytest.mark.parametrize("system", ["BM25 (IFIR)", "my bm25"])
def test_a_run_of_a_papers_card_meets_that_papers_row_whatever_the_run_is_named(tmp_path, system):
    # before, a run was matched to a paper row by its name only: a card's run ("BM25 (IFIR)", as notebook 02 and the
    # sweep name it) or a renamed one (--run NAME=FILE) met no row, so no card's run could earn a verdict, while
    # coverage.csv said the card reproduced the row
    from instir.systems.cards import get_card

    folder = real_fiqa_folder(tmp_path, system=system, card=get_card("BM25 (IFIR)"))
    runs = pd.read_csv(folder / "runs" / "runs.csv").assign(variant="instructed")
    query_only = runs.assign(system=f"{system} (query-only)", variant="query-only")  # the same card: InstFol's half
    pd.concat([runs, query_only]).to_csv(folder / "runs" / "runs.csv", index=False)
    table3 = compared_bm25(folder, system)
    assert list(table3.index) == ["nDCG@20[ifir-native]", "InstFol@20"]
    assert set(table3["model"]) == {"BM25"} and set(table3["verdict"]) == {"within tolerance"}
    # a review found the query-only run compared with the paper's instructed row (a regression of this change)
    assert set(pd.read_csv(folder / "paper_tables" / "comparison.csv")["system"]) == {system}


def test_a_run_of_another_papers_card_is_not_comparable_with_this_papers_row(tmp_path):
    # on the commit before, a run of the FollowIR paper's BM25 card on IFIR's FiQA met IFIR's BM25 row by its model
    # key and earned IFIR's verdicts, though the card runs FollowIR's settings
    from instir.systems.cards import get_card

    system = "BM25 (FollowIR)"
    table3 = compared_bm25(real_fiqa_folder(tmp_path, system=system, card=get_card(system)), system)
    assert list(table3.index) == ["nDCG@20[ifir-native]", "InstFol@20"]
    for verdict in table3["verdict"]:
        says(verdict, "not comparable", "a FollowIR card", "FollowIR's")


@pytest.mark.parametrize("template, verdict", [("ifir", "within tolerance"),
                                               ("instructir", "its run's template is 'instructir'")])
def test_a_run_of_a_papers_card_given_another_template_earns_no_verdict(tmp_path, template, verdict):
    # before, instir retrieve --system "BM25 (IFIR)" --template instructir met the row of the card's paper as the
    # card's own run did: the template its sidecar names was read by no check
    from instir.systems.cards import get_card

    system = "BM25 (IFIR)"
    folder = real_fiqa_folder(tmp_path, system=system, card=get_card(system), template=template)
    table3 = compared_bm25(folder, system)
    assert set(table3["template"]) == {template}
    for found in table3["verdict"]:
        says(found, verdict, *(["the paper's card runs 'ifir'"] if template != "ifir" else []))


def test_a_run_retrieved_over_other_data_than_it_was_scored_on_earns_no_verdict(tmp_path):
    # the evaluate stage says it (metrics/run_checks.csv's other_data); before, the comparison did not read it and a
    # run made over an old corpus, scored on a corpus padded to the paper's counts, got the paper's verdict
    folder = real_fiqa_folder(tmp_path)
    pd.DataFrame([{"benchmark": "ifir/fiqa", "system": "bm25", "run_file": "runs/bm25.trec", "run ids": "ok",
                   "other_data": "corpus"}]).to_csv(folder / "metrics" / "run_checks.csv", index=False)
    table3 = compared_bm25(folder)
    says(table3.loc["nDCG@20[ifir-native]", "verdict"], "not comparable", "retrieved over another corpus")
    (folder / "metrics" / "run_checks.csv").write_text("benchmark,system,run_file,run ids,other_data\n"
                                                      "ifir/fiqa,bm25,runs/bm25.trec,ok,\n")
    assert compared_bm25(folder).loc["nDCG@20[ifir-native]", "verdict"] == "within tolerance"


def test_a_run_of_a_kit_variant_card_meets_no_paper_row(tmp_path):
    from instir.systems.cards import get_card

    variant = get_card("RepLLaMA-7B (fixed)")
    paper_tables(real_fiqa_folder(tmp_path, system="RepLLaMA-7B (fixed)", card=variant))
    assert pd.read_csv(tmp_path / "paper_tables" / "comparison.csv").empty


def test_a_run_whose_sidecar_records_a_kit_variant_meets_no_paper_row_though_its_card_name_now_names_one(tmp_path):
    # the sidecar says what the run was: a run of a variant card (its results folder from a kit whose "BM25 (IFIR)"
    # was a variant of FollowIR's card) is not the paper card's run, whatever card bears that name now; nothing held
    # that it was not matched to IFIR's BM25 row by the card name alone and given that row's verdicts
    import dataclasses

    from instir.systems.cards import get_card

    variant = dataclasses.replace(get_card("BM25 (IFIR)"), variant_of="BM25 (FollowIR)")
    paper_tables(real_fiqa_folder(tmp_path, system="my bm25", card=variant))
    assert pd.read_csv(tmp_path / "paper_tables" / "comparison.csv").empty


@pytest.mark.parametrize("ground, words", [
    ({"data": (False, "12,906 documents where the paper has 57,638")}, ("data of ifir/fiqa", "12,906 documents")),
    ({"data": (None, None)}, ("data of ifir/fiqa", "not checked")),
    ({"engine": "bm25s"}, ("BM25 by bm25s", "elasticsearch")),
    ({"k": 10}, ("its run ranks 10 documents a query", "@20")),
])
def test_without_verified_data_the_papers_engine_or_a_deep_enough_run_no_number_gets_a_verdict(tmp_path, ground, words):
    table3 = compared_bm25(real_fiqa_folder(tmp_path, **ground))
    for verdict in table3["verdict"]:
        says(verdict, "not comparable", *words)
    assert table3["within_tolerance"].isna().all()


def test_an_instfol_judged_by_the_lexical_baseline_is_not_comparable(tmp_path):
    table3 = compared_bm25(real_fiqa_folder(tmp_path, judge=("baseline-lexical", "lexical")))
    assert table3.loc["nDCG@20[ifir-native]", "verdict"] == "within tolerance"
    says(table3.loc["InstFol@20", "verdict"], "not comparable", "baseline-lexical", "gpt-4o-mini")


def test_an_instfol_judged_at_another_k_is_never_aligned_with_the_papers_instfol_at_20(tmp_path):
    # on the commit before, judge_runs(out, k=10) wrote InstFol@10's values, which the compare stage labelled
    # InstFol@20 and gave 'within tolerance' against IFIR's
    from instir.report.provenance import record_stage

    folder = real_fiqa_folder(tmp_path)
    pd.read_csv(folder / "judge" / "instfol.csv").drop(columns="k").to_csv(folder / "judge" / "instfol.csv",
                                                                          index=False)
    record_stage(folder, "04_judge_validation", {"k": 10}, "a notebook", {})  # a table of an earlier version
    table3 = compared_bm25(folder)
    assert "InstFol@20" not in table3.index
    assert "InstFol@10" in set(reproduced_numbers(report_layout(folder))["measure"])
    # the k is written with the numbers: a judge stage that failed after writing them (its record still says 20)
    instfol = pd.read_csv(folder / "judge" / "instfol.csv").assign(k=10)
    instfol.to_csv(folder / "judge" / "instfol.csv", index=False)
    record_stage(folder, "04_judge_validation", {"k": 20}, "a notebook", {})
    assert "InstFol@20" not in compared_bm25(folder).index


def test_an_instfol_needs_both_its_runs_deep_enough(tmp_path):
    # on the commit before, a query-only run cut at 10 (instir judge's depth: the shallower run) went unchecked: the
    # instructed run, 100 deep, earned InstFol@20 its verdict
    folder = real_fiqa_folder(tmp_path)
    instfol = pd.read_csv(folder / "judge" / "instfol.csv")
    instfol.assign(depth=10).to_csv(folder / "judge" / "instfol.csv", index=False)
    table3 = compared_bm25(folder)
    assert table3.loc["nDCG@20[ifir-native]", "verdict"] == "within tolerance"
    says(table3.loc["InstFol@20", "verdict"], "not comparable", "its run ranks 10 documents a query", "InstFol@20")
    instfol.drop(columns="depth").to_csv(folder / "judge" / "instfol.csv", index=False)  # an earlier version's
    says(compared_bm25(folder).loc["InstFol@20", "verdict"], "not comparable", "depth of its run is unknown",
         "judge again")


def test_an_instfol_judged_on_a_sample_of_the_subsets_instances_is_not_comparable(tmp_path):
    # on the commit before, the judge stage's default sample (judge_max_instances = 5) earned Table 3's verdict
    folder = real_fiqa_folder(tmp_path)
    instfol = pd.read_csv(folder / "judge" / "instfol.csv")
    instfol.assign(instances=[2, 5]).to_csv(folder / "judge" / "instfol.csv", index=False)
    table3 = compared_bm25(folder)
    assert table3.loc["nDCG@20[ifir-native]", "verdict"] == "within tolerance"
    says(table3.loc["InstFol@20", "verdict"], "not comparable", "5 of the 1,718 instances of ifir/fiqa",
         "judge_max_instances=1718")
    instfol.drop(columns="instances").to_csv(folder / "judge" / "instfol.csv", index=False)
    says(compared_bm25(folder).loc["InstFol@20", "verdict"], "not comparable", "instances", "unknown", "judge again")


#: a model IFIR encodes whole: a run of it earns a verdict whatever windowing its run records
GRITLM = "dense:GritLM/GritLM-7B"


def gritlm_fiqa_folder(folder, listed_k) -> None:
    """A report folder where GritLM-7B's run on the real IFIR FiQA (``runs/gritlm.trec``, the caller's), listed at
    ``listed_k``, scored IFIR's own nDCG@20 (0.63), on data verified as the paper's."""
    from instir.report.record import update_record

    for name in ("metrics", "judge", "runs"):
        (folder / name).mkdir(exist_ok=True)
    pd.DataFrame([{"benchmark": "ifir/fiqa", "system": GRITLM, "run_file": "runs/gritlm.trec", "k": listed_k}]).to_csv(
        folder / "runs" / "runs.csv", index=False)
    pd.DataFrame([{"system": GRITLM, "benchmark": "ifir/fiqa", "setting": "instructed", "subset": "fiqa",
                   "level": "all", "measure": "nDCG@20[ifir-native]", "value": 0.63, "n_queries": 1718}]).to_csv(
        folder / "metrics" / "metrics.csv", index=False)
    update_record(folder, datasets={"ifir/fiqa": {"revision": "local", "layout": "songtingyu", "sample": False,
                                                  "verified": True, "check": "record counts as published"}})


def gritlm_verdict(folder) -> str:
    """The verdict of GritLM-7B's number in IFIR's Table 3, as the compare stage gives it now."""
    paper_tables(folder)
    compared = pd.read_csv(folder / "paper_tables" / "comparison.csv")
    (found,) = compared[(compared["table"] == "Table 3") & (compared["system"] == GRITLM)]["verdict"]
    return found


def test_a_run_edited_since_its_sidecar_is_measured_not_taken_at_its_listed_depth(tmp_path):
    # on the commit before, the runs list's k (100) stood for a run cut by hand to one document a query: GritLM-7B's
    # nDCG@20 on IFIR's FiQA earned 'within tolerance'
    from instir.retrieval import Run, write_run

    gritlm_fiqa_folder(tmp_path, 100)
    frame = pd.DataFrame({"qid": ["q"] * 100, "docid": [f"d{i}" for i in range(100)], "score": range(100, 0, -1)})
    write_run(Run(frame, {"search": {"retriever": {"name": "dense", "params": {"windowing": "ifir"}}}, "k": 100}),
              tmp_path / "runs" / "gritlm.trec")
    assert gritlm_verdict(tmp_path) == "within tolerance"
    (tmp_path / "runs" / "gritlm.trec").write_text("q Q0 d0 1 100 edited\n")  # cut by hand: no sidecar vouches
    says(gritlm_verdict(tmp_path), "not comparable", "its run ranks 1 documents a query")
    (tmp_path / "runs" / "gritlm.trec").unlink()  # moved since it was scored: its depth as listed
    assert gritlm_verdict(tmp_path) == "within tolerance"
    # MTEB's predictions, as instir evaluate lists them: measured in their own format (on the commit before, unread:
    # 'the depth of its run is unknown')
    predictions = {"mteb_model_meta": {"model_name": "GritLM/GritLM-7B", "revision": "x"},
                   "default": {"test": {"q": {f"d{i}": 100.0 - i for i in range(100)}}}}
    (tmp_path / "runs" / "IFIRFiQA_predictions.json").write_text(json.dumps(predictions))
    pd.DataFrame([{"benchmark": "ifir/fiqa", "system": GRITLM, "run_file": "runs/IFIRFiQA_predictions.json",
                   "k": None}]).to_csv(tmp_path / "runs" / "runs.csv", index=False)
    assert gritlm_verdict(tmp_path) == "within tolerance"


def test_a_stray_line_of_a_query_the_benchmark_lacks_sets_no_depth_in_the_verdict(tmp_path):
    """A run of one's own (no sidecar's k) is as deep as the fewest documents it ranks for a query its numbers were
    scored on (``metrics/per_query.parquet``), as the evaluate stage measured it; on the commit before, one stray
    line of another query made it 1 deep and its number 'not comparable'."""
    gritlm_fiqa_folder(tmp_path, 1)
    lines = [f"q Q0 d{i} {i + 1} {100 - i} mine" for i in range(100)] + ["other Q0 d0 1 1 mine"]
    (tmp_path / "runs" / "gritlm.trec").write_text("\n".join(lines) + "\n")
    pd.DataFrame({"benchmark": "ifir/fiqa", "system": GRITLM, "qid": ["q"], "measure": "nDCG@20",
                  "value": 0.1}).to_parquet(tmp_path / "metrics" / "per_query.parquet")
    assert gritlm_verdict(tmp_path) == "within tolerance"
    (tmp_path / "runs" / "gritlm.trec").write_text("\n".join(lines[:10] + lines[100:]) + "\n")  # q cut at 10
    says(gritlm_verdict(tmp_path), "not comparable", "its run ranks 10 documents a query")


def test_paper_tables_name_each_runs_windowing(tmp_path):
    """05's stage shows the long-text windowing each run recorded in its sidecar, and a compared row of a
    model IFIR encoded in windows carries the long-doc-windows note unless its run used 'ifir'."""
    from instir.retrieval import Run, write_run

    (tmp_path / "metrics").mkdir()
    (tmp_path / "judge").mkdir()
    systems = {"clean": "dense:facebook/contriever", "ifir": "dense:sentence-transformers/gtr-t5-base"}
    rows = []
    for mode, system in systems.items():
        run = Run(pd.DataFrame({"qid": ["q"], "docid": ["d"], "score": [1.0]}),
                  {"retriever": {"name": system, "params": {"windowing": mode}}})
        write_run(run, tmp_path / "runs" / f"{mode}.trec")
        rows.append({"benchmark": "ifir/fiqa", "system": system, "run_file": f"runs/{mode}.trec"})
    pd.DataFrame(rows).to_csv(tmp_path / "runs" / "runs.csv", index=False)
    pd.DataFrame({"system": list(systems.values()), "benchmark": "ifir/fiqa", "setting": "instructed", "subset": "fiqa",
                  "level": "all", "measure": "nDCG@20", "value": 0.3, "n_queries": 1718,
                  }).to_csv(tmp_path / "metrics" / "metrics.csv", index=False)
    pd.DataFrame(columns=["scope", "subset", "level", "instfol", "system", "benchmark"]).to_csv(
        tmp_path / "judge" / "instfol.csv", index=False)
    paper_tables(tmp_path)
    compared = pd.read_csv(tmp_path / "paper_tables" / "comparison.csv")
    table3 = compared[compared["table"] == "Table 3"].set_index("system")
    assert table3["windowing"].to_dict() == {systems["clean"]: "clean", systems["ifir"]: "ifir"}
    assert "long-doc-windows" in table3.loc[systems["clean"], "reasons"]
    assert "long-doc-windows" not in table3.loc[systems["ifir"], "reasons"]


@pytest.mark.parametrize("protocol", ["authors", "mteb"])
def test_the_compare_stage_compares_the_numbers_under_the_protocol_the_evaluate_stage_scored_them(tmp_path, monkeypatch,
                                                                                                   protocol):
    # on the commit before, every number was compared as if scored under the authors' protocol
    import instir.stages.compare as compare
    from instir.stages import retrieve_runs, score_runs

    seen, real = [], compare.compare_to_papers
    monkeypatch.setattr(compare, "compare_to_papers", lambda *a, **k: seen.append(k.get("protocol")) or real(*a, **k))
    retrieve_runs(tmp_path, ["ifir-sample/fiqa"], ["bm25"], k=20)
    score_runs(tmp_path, protocol=protocol)
    paper_tables(tmp_path)
    assert seen == [protocol]


def test_only_instructed_systems_are_matched_with_the_papers_models(tmp_path):
    # the folder's metrics hold "bm25 (query-only)" too: InstFol's other half, no system a paper's row reports
    assert paper_tables(real_fiqa_folder(tmp_path)).matches["system"].tolist() == ["bm25"]


def test_a_rerun_removes_the_not_comparable_note_and_the_widened_table_it_no_longer_makes(tmp_path):
    folder = real_fiqa_folder(tmp_path)
    metrics = pd.read_csv(folder / "metrics" / "metrics.csv")
    metrics.assign(benchmark="ifir-sample/fiqa").to_csv(folder / "metrics" / "metrics.csv", index=False)  # a sample
    pd.DataFrame({"system": "bm25", "benchmark": "ifir", "scope": "subset", "subset": "fiqa", "level": [None],
                  "judge_sd": 0.01, "judge_low": 0.0, "judge_high": 0.04}).to_csv(folder / "judge" / "stability.csv",
                                                                                   index=False)
    tables = folder / "paper_tables"
    paper_tables(folder)
    assert "SAMPLE" in (tables / "not_comparable.txt").read_text() and (tables / "comparison_widened.csv").is_file()
    metrics.to_csv(folder / "metrics" / "metrics.csv", index=False)  # the real benchmark's numbers, no spread
    (folder / "judge" / "stability.csv").unlink()
    paper_tables(folder)
    assert not (tables / "not_comparable.txt").exists() and not (tables / "comparison_widened.csv").exists()


def test_an_instfol_table_naming_no_run_files_is_left_out_after_a_later_retrieval(tmp_path):
    # judge/instfol.csv of an earlier version names no run files: once the runs folder was written again since the
    # judge stage read it, nothing shows its InstFol is of the runs the folder lists
    from instir.report.record import update_record

    folder = real_fiqa_folder(tmp_path)
    assert "InstFol@20" in set(reproduced_numbers(report_layout(folder))["measure"])
    update_record(folder, stages={"04_judge_validation": [{"inputs": {"runs": "0" * 64}, "parameters": {"k": 20}}]})
    with pytest.warns(UserWarning, match="the InstFol of bm25 on ifir \\(fiqa\\) is left out of the comparison after "
                                         "a later retrieval: the table, of an earlier version, names no run files"):
        measures = set(reproduced_numbers(report_layout(folder))["measure"])
    assert measures == {"nDCG@20[ifir-native]", "nDCG@20"}



def test_an_emptied_stability_table_is_one_line_out_of_the_compare_stage_naming_it_and_its_notebook(tmp_path):
    # notebook 05 read judge/stability.csv with pandas itself: an emptied one was EmptyDataError out of the stage
    from instir.benchmarks.types import FormatError

    folder = real_fiqa_folder(tmp_path)
    (folder / "judge" / "stability.csv").write_text("")
    with pytest.raises(FormatError, match=rf"^{folder / 'judge' / 'stability.csv'}: not a table the kit can read "
                                          r"\(EmptyDataError.* run notebook 04_judge_validation "):
        paper_tables(folder)
