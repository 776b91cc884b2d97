"""MTEB TaskResult files beside the papers' numbers. The fixtures were stored by MTEB 2.26.24's
``ResultCache`` (``results/<model>/<revision>/<task>.json`` + ``model_meta.json``)."""

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest
from says import raises_saying

from instir.benchmarks.types import FormatError
from instir.errors import UserError
from instir.papers import compare_to_papers, load_mteb_results, load_reported
from instir.stages.compare import reported_tables

RESULTS = Path(__file__).parents[1] / "fixtures" / "mteb" / "results"


@pytest.fixture(scope="module")
def rows():
    return load_mteb_results([RESULTS])


def test_result_files_read_in_the_layout_of_the_results_store_table(rows):
    assert list(rows.columns) == list(load_reported("mteb").columns)
    assert set(rows["task"]) == {"InstructIR", "IFIRFiQA"} and set(rows["model"]) == {"instir/bm25s-sample"}
    assert not rows["metric"].str.startswith("nauc").any() and "accuracy" not in set(rows["metric"])
    fiqa = rows[rows["task"] == "IFIRFiQA"].set_index("metric")
    stored_file = RESULTS / "instir__bm25s-sample" / "fixture" / "IFIRFiQA.json"
    stored = json.loads(stored_file.read_text())["scores"]["test"][0]
    assert fiqa.loc["ndcg_at_20", "value"] == stored["ndcg_at_20"]
    assert fiqa.loc["ndcg_at_20_level_2", "level"] == 2 and fiqa.loc["ndcg_at_20_level_2", "measure"] == "nDCG@20"
    assert fiqa.loc["main_score(ndcg_at_20)", "value"] == stored["main_score"]
    instructir = rows[rows["task"] == "InstructIR"].set_index("metric")
    assert instructir.loc["robustness_at_10", "measure"] == "Robustness@10"
    assert instructir.loc["precision_at_10", "measure"] == "P@10"
    assert set(rows["benchmark"]) == {"instructir", "ifir"} and rows["secondary"].all()
    assert "dataset_revision=1670fc6, mteb 2.26.24" in fiqa.loc["ndcg_at_20", "source"]


def test_without_model_meta_the_model_is_the_results_folder_name(tmp_path):
    target = tmp_path / "results" / "GritLM__GritLM-7B" / "abc" / "IFIRFiQA.json"
    target.parent.mkdir(parents=True)
    shutil.copy(RESULTS / "instir__bm25s-sample" / "fixture" / "IFIRFiQA.json", target)
    found = load_mteb_results([tmp_path])
    assert set(found["model"]) == {"GritLM/GritLM-7B"} and set(found["model_key"]) == {"gritlm/gritlm-7b"}


@pytest.mark.parametrize(("content", "message"), [
    ('{"task_name": "SciFact", "scores": {"test": []}}',
     "field 'task_name': 'SciFact' is not an InstructIR, IFIR or FollowIR"),
    ('{"task_name": "IFIRFiQA", "scores": {"test": {"default": {}}}}', "field 'test': expected a list"),
    ('{"task_name": "IFIRFiQA"}', "field 'scores': expected an MTEB TaskResult"),
    ("{", "line 1: not valid JSON"),
    pytest.param("[" * 200_000, "JSON nested deeper than Python reads", id="nested-too-deep"),  # a RecursionError
])
def test_a_file_that_is_no_task_result_is_one_error_naming_it(tmp_path, content, message):
    path = tmp_path / "org__m" / "r" / "IFIRFiQA.json"
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with pytest.raises(FormatError, match="IFIRFiQA.json") as err:
        load_mteb_results([path])
    assert message in str(err.value)


@pytest.mark.parametrize(("scores", "message"), [
    ('[{"hf_subset": "default", "ndcg_at_10": NaN}]', "scores > test > default: no score that is a finite number"),
    ('[{"hf_subset": "default", "ndcg_at_10": 5.0}]', "field 'ndcg_at_10': 5.0 is no score: MTEB stores fractions"),
    ('[{"hf_subset": "default", "ndcg_at_10": -0.5}]', "field 'ndcg_at_10': -0.5 is no score"),
    ('[{"hf_subset": "default", "ndcg_at_10": 0.5}, {"hf_subset": "default", "ndcg_at_10": 0.9}]',
     "field 'hf_subset': 2 score objects for the subset 'default'"),
])
def test_a_score_no_run_could_have_or_two_of_one_subset_is_refused_never_printed_as_reported(tmp_path, scores,
                                                                                             message):
    # on the commit before: all NaN was a KeyError traceback, 5.0 printed as a reported 500.00, and of two
    # 'default' entries the first was read without a word
    path = tmp_path / "org__m" / "r" / "IFIRFiQA.json"
    path.parent.mkdir(parents=True)
    path.write_text(f'{{"task_name": "IFIRFiQA", "scores": {{"test": {scores}}}}}')
    with raises_saying(FormatError, str(path), message):
        load_mteb_results([path])


def test_p_mrr_may_be_negative(tmp_path):
    path = tmp_path / "org__m" / "r" / "InstructIR.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"task_name": "InstructIR", "scores": {"test": [{"p-MRR": -0.25, "ndcg_at_10": 0.5}]}}')
    assert sorted(load_mteb_results([path])["value"]) == [-0.25, 0.5]


@pytest.mark.parametrize("given", ["an empty folder", "a fifo in the folder", "a fifo", "nothing"])
def test_a_results_path_with_no_result_to_read_is_one_error_naming_it(tmp_path, given):
    """On the commit before, a folder holding no task's file was a KeyError traceback, and a FIFO named like a
    task's file blocked for ever."""
    import os

    folder = tmp_path / "results"
    folder.mkdir()
    path = {"an empty folder": folder, "a fifo in the folder": folder, "a fifo": tmp_path / "IFIRFiQA.json",
            "nothing": tmp_path / "none"}[given]
    if "fifo" in given:
        os.mkfifo(folder / "IFIRFiQA.json" if "folder" in given else path)
    expected = {"an empty folder": "no MTEB result file of an InstructIR, IFIR or FollowIR task in this folder",
                "a fifo in the folder": "is a FIFO (named pipe)", "a fifo": "is a FIFO (named pipe)",
                "nothing": "MTEB result file or folder not found"}[given]
    with pytest.raises(FormatError, match=str(path)) as err:
        load_mteb_results([path])
    assert expected in str(err.value)


def test_result_files_join_the_mteb_rows_the_comparison_aligns(rows):
    reported = reported_tables([RESULTS])
    assert len(reported["mteb"]) == len(load_reported("mteb")) + len(rows)
    reproduced = pd.DataFrame({"system": ["instir/bm25s-sample"] * 2, "benchmark": ["ifir/fiqa"] * 2,
                               "subset": ["fiqa"] * 2, "level": ["all", "2"], "measure": ["nDCG@20"] * 2,
                               "value": [0.88902, 0.9]})
    runs = pd.DataFrame({"benchmark": ["ifir/fiqa"], "system": ["instir/bm25s-sample"], "k": [100]})
    compared = compare_to_papers(reproduced, pd.concat(reported.values(), ignore_index=True), runs=runs,
                                 data={"ifir/fiqa": None}, protocol="mteb")
    assert list(compared["reported"]) == [0.88902, 0.908765]
    assert list(compared["verdict"]) == ["within tolerance", "within tolerance"]
    assert "secondary-source" in compared["reasons"].iloc[0]
    # on the commit before, numbers scored under the authors' protocol (a run missing queries counts them as 0;
    # MTEB averages over the queries answered) earned a verdict against MTEB's store too
    authors = compare_to_papers(reproduced, pd.concat(reported.values(), ignore_index=True), runs=runs,
                                data={"ifir/fiqa": None})
    assert set(authors["verdict"]) == {"not comparable (scored under the authors' protocol, the reported number under "
                                       "MTEB's)"}


def test_a_stored_number_its_source_says_not_to_use_earns_no_verdict():
    # on the commit before, the IFIR rows of GritLM-7B and e5-mistral (byte-identical files in MTEB's results
    # repository, flagged "do not use as a per-model reference") each gave "within tolerance" for the same number
    reproduced = pd.DataFrame({"system": ["GritLM/GritLM-7B"], "benchmark": ["ifir/aila"], "subset": ["aila"],
                               "level": ["all"], "measure": ["nDCG@10"], "value": [0.07341]})
    compared = compare_to_papers(reproduced, load_reported("mteb"), data={"ifir/aila": None}, protocol="mteb")
    assert len(compared) and set(compared["verdict"]) == {
        "not comparable (its source says not to use it as this model's number)"}


@pytest.mark.parametrize("change,said", [
    ({"subset": "nfcorpus"}, "column 'subset': 'nfcorpus' contradicts the benchmark 'ifir/fiqa'"),
    ({"level": "1.7"}, "column 'level': '1.7' is no level"),
    ({"level": "v1"}, "column 'level': 'v1' is no level"),
])
def test_a_reproduced_row_whose_slice_contradicts_itself_is_one_line_not_a_verdict(change, said):
    # on the commit before, ifir/fiqa with subset nfcorpus earned a verdict against nfcorpus; level 1.7 was level 1;
    # level v1 was a ValueError naming no column
    reproduced = pd.DataFrame([{"system": "instir/bm25s-sample", "benchmark": "ifir/fiqa", "subset": "fiqa",
                                "level": "all", "measure": "nDCG@20", "value": 0.6, **change}])
    with pytest.raises(UserError, match=re.escape(said)):
        compare_to_papers(reproduced, load_reported("mteb"), data={"ifir/fiqa": None}, protocol="mteb")


@pytest.mark.parametrize("tolerance", [-1, 5, float("nan"), "0.02", {"default": -0.1}])
def test_a_tolerance_that_could_turn_any_number_within_or_outside_is_refused(tolerance):
    # on the commit before, -1 made equal numbers "outside tolerance" and 5 made 10.0 against 87.62 "within"
    reproduced = pd.DataFrame([{"system": "instir/bm25s-sample", "benchmark": "ifir/fiqa", "subset": "fiqa",
                                "level": "all", "measure": "nDCG@20", "value": 0.6}])
    with pytest.raises(UserError, match="a tolerance .* is a number from 0 to 1 on the unit scale"):
        compare_to_papers(reproduced, load_reported("mteb"), tolerance, data={"ifir/fiqa": None}, protocol="mteb")


@pytest.mark.parametrize("change,field,said", [
    ({"dataset_revision": "WRONG"}, "dataset_revision", "'WRONG' is not the revision of IFIRFiQA the kit compares with "
                                                        "(1670fc6): its scores are of other data"),
    ({"languages": ["deu-Latn"]}, "languages", "['deu-Latn']: not the English task"),
    ({"name": "IFIRNFCorpus.json"}, "task_name", "'IFIRFiQA' in the file of IFIRNFCorpus"),
])
def test_a_result_file_of_other_data_is_one_line_never_compared(tmp_path, change, field, said):
    # on the commit before, a hand-made TaskResult of another revision, language or task file earned a verdict
    source = RESULTS / "instir__bm25s-sample" / "fixture" / "IFIRFiQA.json"
    data = json.loads(source.read_text())
    data["dataset_revision"] = change.get("dataset_revision", data["dataset_revision"])
    if "languages" in change:
        data["scores"]["test"][0]["languages"] = change["languages"]
    folder = tmp_path / "results" / "instir__bm25s-sample" / "fixture"
    shutil.copytree(source.parent, folder)
    (folder / "IFIRFiQA.json").unlink()
    path = folder / change.get("name", "IFIRFiQA.json")
    path.write_text(json.dumps(data))
    with raises_saying(FormatError, str(path), f"field '{field}'", said):
        load_mteb_results([path])


@pytest.mark.parametrize("benchmark, subset, key, reason", [
    ("instructir", "", "baai/bge-base-en-v1.5", "MAIR legacy task, not InstructIR's setup"),
])
def test_a_stored_number_of_another_task_earns_no_verdict(benchmark, subset, key, reason):
    # before, the store's legacy MAIR InstructIR rows ("NOT the MTEB InstructIR task") earned "within/outside
    # tolerance" against the kit's verified data: the divergence was only listed as a reason
    reported = load_reported("mteb")
    theirs = reported[(reported["benchmark"] == benchmark.partition("/")[0])
                      & (reported["subset_id"].fillna("") == subset)
                      & (reported["model_key"] == key) & (reported["setting"] == "instructed")]
    assert len(theirs), "the store holds this row"
    row, system = theirs.iloc[0], f"dense:{key}"
    reproduced = pd.DataFrame({"system": [system], "benchmark": [benchmark], "subset": [subset or "all"],
                               "level": ["all"], "measure": [row["measure"]], "value": [float(row["value"])]})
    runs = pd.DataFrame({"benchmark": [benchmark], "system": [system], "k": [1000]})
    compared = compare_to_papers(reproduced, reported, runs=runs, data={benchmark: None}, protocol="mteb")
    assert len(compared) and set(compared["verdict"]) == {f"not comparable ({reason})"}
    assert compared["within_tolerance"].isna().all()


@pytest.mark.parametrize("layout, paper", [("songtingyu", "mteb"), ("mteb", "ifir")])
def test_data_verified_as_one_copy_earns_no_verdict_against_numbers_of_the_other(layout, paper):
    # before, on SciFact-open (152 queries in the paper's data, 135 in MTEB's copy), MTEB's store numbers earned a
    # verdict against the paper's data, and a run on MTEB's copy, verified against MTEB's counts, against the paper
    from instir.report.manifest import data_checks

    datasets = {"ifir/scifact_open": {"layout": layout, "verified": True, "check": "record counts as published"}}
    data, mteb_data = data_checks(datasets), data_checks(datasets, counted_by="mteb")
    reported = pd.concat([load_reported("mteb"), load_reported("ifir")], ignore_index=True)
    theirs = reported[(reported["paper"] == paper) & (reported["subset_id"] == "scifact_open")
                      & (reported["setting"] == "instructed") & (reported["measure"] == "nDCG@20")
                      & (reported["model_key"] == "hkunlp/instructor-base") & (reported["variant"] == "")]
    assert len(theirs), "the row is reported"  # (Table 9's prompt study is not judged whatever the data)
    if paper == "mteb":  # a TaskResult of one's own (the store's row is one MTEB removed: mteb-removed-results)
        theirs = theirs.assign(source="results/hkunlp__instructor-base/IFIRSciFact.json")
    row = theirs.iloc[0]
    value = float(row["value"]) / float(row["scale"])
    reproduced = pd.DataFrame({"system": ["dense:hkunlp/instructor-base"], "benchmark": ["ifir/scifact_open"],
                               "subset": ["scifact_open"], "level": ["all"], "measure": [row["measure"]],
                               "value": [value]})
    runs = pd.DataFrame({"benchmark": ["ifir/scifact_open"], "system": ["dense:hkunlp/instructor-base"],
                         "windowing": ["ifir"], "k": [1000]})
    compared = compare_to_papers(reproduced, theirs, runs=runs, data=data, mteb_data=mteb_data,
                                 protocol="mteb" if paper == "mteb" else "authors")
    assert len(compared)
    for verdict in compared["verdict"]:
        assert verdict.startswith(f"not comparable (data of ifir/scifact_open: the {layout} copy: "), verdict


def test_a_stored_p_mrr_is_judged_by_the_tie_rule_of_the_mteb_version_that_computed_it():
    # on the commit before, monoT5-3B's Core17 p-MRR in MTEB's store (computed by mteb 1.7.32, which ranked ties in
    # insertion order) was judged by the kit's current-rule p-MRR, p-MRR[insertion-ties] only shown beside it
    system = "castorini/monot5-3b-msmarco-10k"
    stored = load_reported("mteb")
    stored = stored[(stored["model_key"] == system) & (stored["measure"] == "p-MRR")]
    assert "mteb 1.7.32" in stored["source"].iloc[0]
    ours = pd.DataFrame({"benchmark": "followir/core17", "system": system, "level": "all",
                         "measure": ["p-MRR", "p-MRR[insertion-ties]"], "value": [0.0183, 0.05]})
    runs = pd.DataFrame({"benchmark": ["followir/core17"], "system": [system], "k": [1000]})

    def judged(reported):
        (row,) = compare_to_papers(ours, reported, runs=runs, data={"followir/core17": None},
                                   protocol="mteb").to_dict("records")
        return row["measure_reproduced"], row["other_measure"], row["verdict"]

    assert judged(stored) == ("p-MRR[insertion-ties]", "p-MRR", "outside tolerance")
    newer = stored.assign(source=stored["source"].str.replace("mteb 1.7.32", "mteb 2.26.0", regex=False))
    assert judged(newer) == ("p-MRR", "p-MRR[insertion-ties]", "within tolerance")


def test_results_mteb_removed_for_lack_of_an_implementation_earn_no_verdict():
    # before, an INSTRUCTOR run was judged within tolerance against IFIR results MTEB deleted (commit 198c98f4c)
    # because no MTEB implementation stood behind them: which setup they measure is not known
    store = load_reported("mteb")
    model = "hkunlp/instructor-xl"
    theirs = store[(store["benchmark"] == "ifir") & (store["subset_id"] == "fiqa") & (store["model_key"] == model)
                   & (store["measure"] == "nDCG@20") & (store["level"].isna())]
    assert len(theirs) == 1
    value = float(theirs["value"].iloc[0])
    ours = pd.DataFrame([{"system": f"dense:{model}", "benchmark": "ifir/fiqa", "setting": "instructed",
                          "subset": "fiqa", "level": "", "measure": "nDCG@20", "value": value}])
    runs = pd.DataFrame([{"benchmark": "ifir/fiqa", "system": f"dense:{model}", "k": 100, "windowing": "none",
                          "engine": "n/a"}])
    verified = {"ifir/fiqa": None}
    compared = compare_to_papers(ours, store, runs=runs, data=verified, mteb_data=verified, protocol="mteb")
    assert list(compared["verdict"]) == ["not comparable (MTEB removed these results: no MTEB implementation behind "
                                         "them)"]
    own = store.assign(source="results/hkunlp__instructor-xl/IFIRFiQA.json")  # a TaskResult of one's own
    compared = compare_to_papers(ours, own, runs=runs, data=verified, mteb_data=verified, protocol="mteb")
    assert list(compared["verdict"]) == ["within tolerance"]


def test_a_number_of_mtebs_store_in_another_variant_is_said_to_be_mtebs_not_a_papers():
    # before, the reason read "the paper's p-MRR is insertion-ties" for a number MTEB computed, not a paper
    store = load_reported("mteb")
    ours = pd.DataFrame([{"system": "google/flan-t5-base", "benchmark": "followir/core17", "setting": "instructed",
                          "subset": "core17", "level": "", "measure": "p-MRR", "value": -0.0331}])
    runs = pd.DataFrame([{"benchmark": "followir/core17", "system": "google/flan-t5-base", "k": 1000}])
    verified = {"followir/core17": None}
    compared = compare_to_papers(ours, store, runs=runs, data=verified, mteb_data=verified, protocol="mteb")
    assert list(compared["verdict"]) == ["not comparable (MTEB's p-MRR is insertion-ties, not standard)"]


def test_mteb_2_19_5_is_the_first_version_whose_p_mrr_is_the_kits_standard_one():
    # PR #5241 shipped in mteb 2.19.5: a p-MRR stored by that version is judged by the kit's current-rule p-MRR
    system = "castorini/monot5-3b-msmarco-10k"
    stored = load_reported("mteb")
    stored = stored[(stored["model_key"] == system) & (stored["measure"] == "p-MRR")]
    ours = pd.DataFrame({"benchmark": "followir/core17", "system": system, "level": "all",
                         "measure": ["p-MRR", "p-MRR[insertion-ties]"], "value": [0.0183, 0.05]})
    runs = pd.DataFrame({"benchmark": ["followir/core17"], "system": [system], "k": [1000]})
    for version, measure in (("2.19.4", "p-MRR[insertion-ties]"), ("2.19.5", "p-MRR")):
        theirs = stored.assign(source=stored["source"].str.replace("mteb 1.7.32", f"mteb {version}", regex=False))
        (row,) = compare_to_papers(ours, theirs, runs=runs, data={"followir/core17": None},
                                   protocol="mteb").to_dict("records")
        assert row["measure_reproduced"] == measure, version



def _result_file(tmp_path, task, scores, **fields):
    path = tmp_path / "org__m" / "r" / f"{task}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"task_name": task, "scores": scores, **fields}))
    return path


def test_scores_are_read_from_the_test_split_and_its_default_subset_only(tmp_path):
    path = _result_file(tmp_path, "IFIRFiQA", {
        "dev": [{"hf_subset": "default", "ndcg_at_20": 0.9}],
        "test": [{"hf_subset": "fr", "ndcg_at_20": 0.8}, {"hf_subset": "default", "ndcg_at_20": 0.3}]})
    found = load_mteb_results([path])
    assert found[["metric", "value"]].values.tolist() == [["ndcg_at_20", 0.3]]


def test_a_boolean_in_the_scores_is_no_score(tmp_path):
    path = _result_file(tmp_path, "IFIRFiQA", {"test": [{"ndcg_at_20": 0.3, "is_cached": True}]})
    assert load_mteb_results([path])["metric"].tolist() == ["ndcg_at_20"]


def test_a_negative_p_mrr_spelled_with_an_underscore_is_a_score(tmp_path):
    path = _result_file(tmp_path, "InstructIR", {"test": [{"p_mrr": -0.25}]})
    assert load_mteb_results([path])["value"].tolist() == [-0.25]


def test_a_dataset_revision_abbreviated_shorter_than_the_pinned_one_is_the_same_data(tmp_path):
    path = _result_file(tmp_path, "IFIRFiQA", {"test": [{"ndcg_at_20": 0.3}]}, dataset_revision="1670")
    assert load_mteb_results([path])["value"].tolist() == [0.3]


def test_a_model_meta_that_is_no_object_is_one_error_naming_it(tmp_path):
    path = _result_file(tmp_path, "IFIRFiQA", {"test": [{"ndcg_at_20": 0.3}]})
    (path.parent / "model_meta.json").write_text('["GritLM/GritLM-7B"]')
    with raises_saying(FormatError, "model_meta.json", "field 'name'", "not a JSON object with the model's name"):
        load_mteb_results([path])


def test_a_model_meta_with_an_empty_name_falls_back_to_the_folder_name(tmp_path):
    path = _result_file(tmp_path, "IFIRFiQA", {"test": [{"ndcg_at_20": 0.3}]})
    (path.parent / "model_meta.json").write_text('{"name": ""}')
    assert load_mteb_results([path])["model"].tolist() == ["org/m"]


def test_a_file_one_folder_below_results_names_no_model(tmp_path):
    path = tmp_path / "results" / "rev" / "IFIRFiQA.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"task_name": "IFIRFiQA", "scores": {"test": [{"ndcg_at_20": 0.3}]}}))
    with raises_saying(FormatError, str(path), "no model name"):
        load_mteb_results([path])


def test_rows_of_a_result_file_say_they_come_from_a_result_file_not_the_store(rows):
    assert set(rows["table"]) == {"MTEB result file, InstructIR", "MTEB result file, IFIRFiQA"}
    assert set(rows["reference"]) == set(rows["table"])


def test_the_model_given_names_the_rows_over_the_files_own(tmp_path):
    path = _result_file(tmp_path, "IFIRFiQA", {"test": [{"ndcg_at_20": 0.3}]})
    assert load_mteb_results([path], model="GritLM/GritLM-7B")["model_key"].tolist() == ["gritlm/gritlm-7b"]


def test_a_score_object_with_an_empty_language_list_is_read(tmp_path):
    path = _result_file(tmp_path, "IFIRFiQA", {"test": [{"ndcg_at_20": 0.3, "languages": []}]})
    assert load_mteb_results([path])["value"].tolist() == [0.3]
