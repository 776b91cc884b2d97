"""The stages on their own, as notebooks, the CLI and the sweep call them: each reads only the
files (and the parts of the corpus) it needs, builds each index once, names the notebook that
writes a missing input, and joins per-run scores into what scoring all runs at once gives."""

import json
import os
import shutil
import time
from pathlib import Path

import pandas as pd
import pytest
from real_data import write_ifir_songtingyu
from says import raises_saying
from tiny_models import build_tiny_bert

from instir.benchmarks import docstore, load_benchmark
from instir.metrics import evaluate_runs, paired_tests
from instir.report.layout import MissingInput, ReportLayout, report_layout
from instir.retrieval import read_run
from instir.stages import describe_benchmarks, judge_runs, paper_tables, retrieve_runs, score_runs

SAMPLES = ["instructir-sample", "ifir-sample/fiqa"]


@pytest.fixture(scope="module")
def tiny_dense(tmp_path_factory) -> str:
    """A dense system (``dense:PATH``) on a tiny random BERT whose vocabulary is the samples' words: the stages'
    plumbing with a model that encodes the samples at once (the bundled model's vectors are checked in
    tests/retrieval/test_dense.py, its runs in every chain)."""
    words = {word for name in SAMPLES for bench in [load_benchmark(name)]
             for text in [*(d.indexed_text for d in bench.corpus), *(q.query + " " + q.instruction
                                                                     for q in bench.queries.values())]
             for word in text.split()}
    return "dense:" + str(build_tiny_bert(tmp_path_factory.mktemp("tiny-bert"), sorted(words)))


def settle(folder: Path) -> None:
    """Date every file under ``folder`` back an hour: files written moments ago are indexed but not
    cached (their modification time could still change within the file system's resolution)."""
    t = time.time_ns() - 3600 * 10**9
    for path in folder.rglob("*"):
        os.utime(path, ns=(t, t))


@pytest.fixture
def bm25_builds(monkeypatch):
    """The benchmark of every BM25 index the retrievers build (not load from the cache)."""
    from instir.retrieval.lexical import BM25Retriever

    built, real = [], BM25Retriever._build

    def counting(self, benchmark, *args, **kwargs):
        built.append(benchmark.name)
        return real(self, benchmark, *args, **kwargs)

    monkeypatch.setattr(BM25Retriever, "_build", counting)
    return built


@pytest.fixture
def ifir_root(tmp_path) -> Path:
    """IFIR's fiqa and fire in the songtingyu layout, settled so their corpus indexes are cached."""
    root = write_ifir_songtingyu(tmp_path / "data" / "ifir" / "songtingyu")
    settle(root)
    return tmp_path / "data"


def test_one_retriever_serves_both_variants_of_a_benchmark_from_one_index(tmp_path, bm25_builds, monkeypatch):
    monkeypatch.setenv("INSTIR_HOME", str(tmp_path / "home"))  # no index cached by another test
    runs = retrieve_runs(tmp_path / "report", SAMPLES, ["bm25"], k=10).runs
    assert runs[["benchmark", "variant"]].values.tolist() == [[b, v] for b in SAMPLES
                                                              for v in ("instructed", "query-only")]
    assert bm25_builds == SAMPLES  # one index per benchmark, shared by its two runs
    again = retrieve_runs(tmp_path / "report", SAMPLES, ["bm25"], k=5).runs  # another k: new runs, loaded indexes
    assert bm25_builds == SAMPLES and not again["reused"].any()
    sidecars = [json.loads((tmp_path / "report" / f"{run}.json").read_text())["search"]["index"]
                for run in again["run_file"]]
    assert [s["origin"] for s in sidecars] == ["loaded", "loaded"] * 2


def test_runs_are_listed_benchmark_by_benchmark_in_the_order_of_the_systems(tmp_path, tiny_dense):
    runs = retrieve_runs(tmp_path, ["ifir-sample/fiqa", "instructir-sample"], [tiny_dense, "bm25"], k=5).runs
    assert runs["benchmark"].tolist() == ["ifir-sample/fiqa"] * 4 + ["instructir-sample"] * 4
    assert runs["retriever"].tolist() == [tiny_dense, tiny_dense, "bm25", "bm25"] * 2
    assert set(pd.read_csv(ReportLayout(tmp_path).runs_table)["system"]) == set(runs["system"])


def test_the_retrieve_stage_shows_each_benchmarks_first_instance_as_each_variant_formats_it(tmp_path):
    first = next(iter(load_benchmark("instructir-sample").queries.values()))
    inputs = retrieve_runs(tmp_path, ["instructir-sample"], ["bm25"], k=3).inputs
    assert inputs[["benchmark", "retriever", "template"]].values.tolist() == [["instructir-sample", "bm25",
                                                                                "instructir"]]
    assert inputs.loc[0, "query-only text"] == first.query
    assert first.query in inputs.loc[0, "instructed text"] and first.instruction in inputs.loc[0, "instructed text"]


def test_runs_csv_counts_each_runs_queries_and_rows_and_says_a_rerun_reused_it(tmp_path):
    bench = load_benchmark("ifir-sample/fiqa")
    runs = retrieve_runs(tmp_path, ["ifir-sample/fiqa"], ["bm25"], k=3).runs
    files = [pd.read_csv(tmp_path / f, sep=" ", header=None, dtype={0: str}) for f in runs["run_file"]]
    assert runs["queries"].tolist() == [len(bench.queries)] * 2 == [f[0].nunique() for f in files]
    assert runs["rows"].tolist() == [len(f) for f in files] and runs["k"].tolist() == [3, 3]
    assert not runs["reused"].any()
    assert retrieve_runs(tmp_path, ["ifir-sample/fiqa"], ["bm25"], k=3).runs["reused"].all()


@pytest.mark.parametrize("stage", [score_runs, lambda out: judge_runs(out, backend="baseline")])
def test_a_stage_without_its_input_names_the_notebook_that_writes_it(tmp_path, stage):
    with raises_saying(MissingInput, "runs/runs.csv", "02_retrieval"):
        stage(tmp_path)


def test_the_compare_stage_without_metrics_names_notebook_03(tmp_path):
    with raises_saying(MissingInput, "metrics.csv", "03_metrics"):
        paper_tables(tmp_path)


def test_scores_joined_run_by_run_equal_scoring_every_run_at_once(tmp_path, tiny_dense):
    retrieve_runs(tmp_path, SAMPLES, ["bm25", tiny_dense], k=20)
    metrics = score_runs(tmp_path)
    runs = pd.read_csv(ReportLayout(tmp_path).runs_table)
    for name in SAMPLES:
        listed = runs[runs["benchmark"] == name]
        at_once = evaluate_runs({r.system: read_run(tmp_path / r.run_file) for r in listed.itertuples()},
                                load_benchmark(name))
        table = metrics.table[(metrics.table["benchmark"] == name) & (metrics.table["subset"] != "average")]
        pd.testing.assert_frame_equal(table.reset_index(drop=True), at_once.table)
        baseline = listed["system"].iloc[0]
        expected = paired_tests(at_once.per_query[at_once.per_query["measure"].isin(["nDCG@10", "nDCG@20"])],
                                baseline)
        got = metrics.comparisons[(metrics.comparisons["benchmark"] == name) & (metrics.comparisons["unit"] == "query")
                                  & metrics.comparisons["measure"].isin(["nDCG@10", "nDCG@20"])]
        assert got["diff"].tolist() == expected["diff"].tolist()
        assert got["p_ttest_holm"].tolist() == expected["p_ttest_holm"].tolist()
    groups = metrics.comparisons[metrics.comparisons["unit"] == "group"]
    assert set(groups["measure"]) == {"Robustness@10"} and set(groups["benchmark"]) == {"instructir-sample"}


def test_evaluate_judge_and_compare_read_no_corpus_beyond_the_passages_they_show(ifir_root, monkeypatch, tmp_path):
    out = tmp_path / "report"
    names = ["ifir/fiqa", "ifir/fire"]
    retrieve_runs(out, names, ["bm25"], k=20, data_root=str(ifir_root))  # the corpus indexes are made here

    def no_stream(*args, **kwargs):
        raise AssertionError("the corpus was streamed")

    monkeypatch.setattr(docstore, "build_index", no_stream)
    monkeypatch.setattr(docstore.IndexedCorpus, "_stream_files", no_stream)
    score_runs(out, data_root=str(ifir_root))
    judging = judge_runs(out, backend="baseline", max_instances=2, repeats=1, data_root=str(ifir_root))
    assert judging.instfol.positions["error"].isna().all()  # every judged passage was read, by id
    paper_tables(out)


def test_the_compare_stage_loads_no_benchmark(tmp_path, monkeypatch):
    retrieve_runs(tmp_path, SAMPLES, ["bm25"], k=20)
    score_runs(tmp_path)
    judge_runs(tmp_path, backend="baseline", repeats=1)
    monkeypatch.setattr("instir.benchmarks.registry.load_benchmark", lambda *a, **k: pytest.fail("loaded"))
    papers = paper_tables(tmp_path)
    assert set(papers.compared["verdict"]) == {"not comparable (SAMPLE)"}
    assert (tmp_path / "paper_tables" / "comparison.csv").is_file()


def test_a_judge_stage_given_a_host_builds_its_one_judge_there_with_the_folders_cache(tmp_path):
    # the sweep's judge actor is such a host: the stage's own settings and cache, built in the actor's process
    retrieve_runs(tmp_path, ["instructir-sample"], ["bm25"], k=20)
    hosted = []

    def host(make):
        hosted.append(make())
        return hosted[-1]

    judging = judge_runs(tmp_path, backend="baseline", max_instances=2, repeats=1, validate=False, host=host)
    assert len(hosted) == 1 and judging.judge is hosted[0] and hosted[0].name == "baseline-lexical"
    assert Path(hosted[0].cache.path).resolve() == (tmp_path / "judge" / "judgments.sqlite").resolve()
    assert hosted[0].stats.judged > 0  # it judged the pairs


def test_a_hosted_judge_is_built_with_every_setting_the_stage_was_given(tmp_path, monkeypatch):
    """The maker a host gets carries the stage's endpoint settings: the key's variable, the timeout, the rate."""
    retrieve_runs(tmp_path, ["instructir-sample"], ["bm25"], k=20)
    monkeypatch.setenv("MY_JUDGE_KEY", "sk-test")

    class Built(Exception):
        pass

    def host(make):
        raise Built(make())  # stop before any request: the judge as built is what is checked

    with pytest.raises(Built) as built:
        judge_runs(tmp_path, backend="openai", model="m", base_url="http://judge.localhost:9/v1",
                   api_key_env="MY_JUDGE_KEY", timeout_s=7.0, requests_per_minute=30.0, host=host)
    endpoint = built.value.args[0].backend.endpoint
    assert (endpoint.base_url, endpoint.api_key_env, endpoint.timeout_s, endpoint.pace.interval) == (
        "http://judge.localhost:9/v1", "MY_JUDGE_KEY", 7.0, 2.0)  # 30 a minute: one each 2 s


def test_one_judge_repeat_still_gives_the_query_sample_spread(tmp_path):
    retrieve_runs(tmp_path, ["instructir-sample"], ["bm25"], k=20)
    judging = judge_runs(tmp_path, backend="baseline", max_instances=3, repeats=1)
    table = judging.stability_table()
    assert len(table) and table["judge_sd"].isna().all() and table["sample_sd"].notna().any()
    assert (tmp_path / "judge" / "stability.csv").is_file()


def test_the_judge_stage_writes_the_k_of_its_lists_with_the_instfol_numbers(tmp_path):
    # the compare stage labels InstFol with it (InstFol@10 is never the paper's InstFol@20), whatever the record says
    from instir.stages.compare import reproduced_numbers

    retrieve_runs(tmp_path, ["instructir-sample"], ["bm25"], k=20)
    score_runs(tmp_path)
    judge_runs(tmp_path, backend="baseline", max_instances=3, repeats=1, k=10, validate=False)
    assert set(pd.read_csv(tmp_path / "judge" / "instfol.csv")["k"]) == {10}
    measures = set(reproduced_numbers(report_layout(tmp_path))["measure"])
    assert "InstFol@10" in measures and "InstFol@20" not in measures


def test_instfol_judged_on_runs_written_again_since_is_left_out_of_the_comparison_with_a_warning(tmp_path):
    # a review found a sweep whose judge failed comparing the runs it had just made with the InstFol of an earlier
    # sweep's runs (depth 100 where the runs now ranked 3)
    from instir.stages.compare import reproduced_numbers

    retrieve_runs(tmp_path, ["instructir-sample"], ["bm25"], k=20)
    score_runs(tmp_path)
    judge_runs(tmp_path, backend="baseline", max_instances=3, repeats=1, validate=False)
    assert any(m.startswith("InstFol") for m in reproduced_numbers(report_layout(tmp_path))["measure"])
    retrieve_runs(tmp_path, ["instructir-sample"], ["bm25"], k=5)  # other runs; no judge stage after them
    score_runs(tmp_path)
    with pytest.warns(UserWarning, match="the InstFol of bm25 on instructir-sample is left out of the comparison "
                                         "after a later retrieval: its runs are no longer the ones runs/runs.csv "
                                         "lists"):
        measures = set(reproduced_numbers(report_layout(tmp_path))["measure"])
    assert measures and not any(m.startswith("InstFol") for m in measures)


def test_instfol_of_runs_the_folder_still_lists_unchanged_stays_after_another_system_is_retrieved(tmp_path):
    # before, adding a system to a judged folder (notebook 02 again, no judge stage after it) left out every InstFol,
    # saying its runs "were written again since": the judged bm25 runs were untouched and still listed
    import warnings

    from instir.stages.compare import reproduced_numbers

    retrieve_runs(tmp_path, ["instructir-sample"], ["bm25"], k=20)
    score_runs(tmp_path)
    judge_runs(tmp_path, backend="baseline", max_instances=3, repeats=1, validate=False)
    judged = reproduced_numbers(report_layout(tmp_path))
    retrieval = retrieve_runs(tmp_path, ["instructir-sample"], ["bm25", "dense"], k=20)
    # runs.csv's retriever (and the timing table's rows) is the system as written, its system as reports name it
    assert retrieval.runs["retriever"].tolist() == ["bm25", "bm25", "dense", "dense"]
    assert retrieval.runs["system"].tolist()[2:] == ["dense:sentence-transformers/all-MiniLM-L6-v2",
                                                    "dense:sentence-transformers/all-MiniLM-L6-v2 (query-only)"]
    seconds = retrieval.runs.groupby("retriever")["elapsed_s"].sum()  # both variants' runs of a system
    assert list(retrieval.timing.index) == ["bm25", "dense", "total"]
    assert retrieval.timing["instructir-sample"].tolist() == pytest.approx([*seconds[["bm25", "dense"]],
                                                                            seconds.sum()])
    score_runs(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = reproduced_numbers(report_layout(tmp_path))
    instfol = again[again["measure"].str.startswith("InstFol")]
    assert len(instfol) and set(instfol["system"]) == {"bm25"}
    assert instfol["value"].tolist() == judged[judged["measure"].str.startswith("InstFol")]["value"].tolist()
    run = next((tmp_path / "runs").glob("instructir-sample__instructed__bm25__instructir__*.trec"))
    run.write_text(run.read_text().replace(" 1 ", " 1 ", 1) + "\n", encoding="utf-8")  # edited since its sidecar
    with pytest.warns(UserWarning, match="were changed since they were judged"):
        assert not reproduced_numbers(report_layout(tmp_path))["measure"].str.startswith("InstFol").any()


def test_a_subsets_instfol_stays_when_its_runs_do_while_another_subsets_and_the_average_go(tmp_path):
    # a review: every row of a collection named all its subsets' run files, so FiQA's InstFol was left out when only
    # NFCorpus's runs left the list
    from instir.stages.compare import reproduced_numbers

    retrieve_runs(tmp_path, ["ifir-sample/fiqa", "ifir-sample/nfcorpus"], ["bm25"], k=20)
    score_runs(tmp_path)
    judge_runs(tmp_path, backend="baseline", max_instances=3, repeats=1, validate=False)
    retrieve_runs(tmp_path, ["ifir-sample/fiqa"], ["bm25"], k=20)  # FiQA's runs: the same files, still listed
    score_runs(tmp_path)
    with pytest.warns(UserWarning, match=r"the InstFol of bm25 on ifir-sample \(nfcorpus\), bm25 on ifir-sample "
                                         r"\(average\) is left out"):
        numbers = reproduced_numbers(report_layout(tmp_path))
    assert set(numbers.loc[numbers["measure"].str.startswith("InstFol"), "subset"]) == {"fiqa"}


def test_an_instfol_that_is_0_by_construction_is_said_so_beside_its_table(tmp_path):
    # a review: on followir-sample (6 candidates an instance) both top-20 lists hold the same passages, so InstFol@20
    # is 0 for every system; notebook 04 printed it as a result without a word
    retrieve_runs(tmp_path, ["followir-sample", "instructir-sample"], ["bm25"], k=20)
    judging = judge_runs(tmp_path, backend="baseline", max_instances=3, repeats=1, validate=False)
    assert judging.instfol_notes() == [
        "InstFol@20 is 0 by construction on followir-sample/news21, followir-sample/core17: every instance's "
        "candidate list holds at most 20 documents, so both runs rank the same passages (S_inst = S_q)"]


def test_a_query_only_runs_p_mrr_is_said_to_be_0_by_construction_beside_its_table(tmp_path):
    # a review: a query-only run's og and changed halves see one text, so its p-MRR is 0; notebook 03 listed
    # `bm25 (query-only)` p-MRR 0.0 as a result
    retrieve_runs(tmp_path, ["followir-sample", "instructir-sample"], ["bm25"], k=20)
    notes = {view.title.partition(":")[0]: view.note for view in score_runs(tmp_path).views()}
    assert notes["FollowIR"].endswith(" p-MRR of bm25 (query-only) is 0 by construction: a query-only run gives a "
                                      "pair's og and changed halves the same text, so no document's rank can move.")
    assert [title for title, note in notes.items() if "by construction" in note] == ["FollowIR"]
    listed = pd.read_csv(tmp_path / "runs" / "runs.csv")
    listed[["benchmark", "system", "run_file"]].to_csv(tmp_path / "runs" / "runs.csv", index=False)  # one's own list
    # a review: a list of the required columns only (no variant) was a KeyError in notebook 03's tables
    assert not any("by construction" in view.note for view in score_runs(tmp_path).views())


def test_a_runs_list_of_the_required_columns_pairs_no_run_with_a_query_only_one(tmp_path):
    # a review: notebook 03's instructed-vs-query-only plot was a KeyError ('retriever') on one's own list of the
    # required columns; without variant and retriever its runs are instructed ones, as far as the kit can tell
    retrieve_runs(tmp_path, ["instructir-sample"], ["bm25"], k=20)
    measure, pairs = score_runs(tmp_path).instructed_vs_query_only("instructir-sample")
    assert [retriever for retriever, _, _ in pairs] == ["bm25"]
    listed = pd.read_csv(tmp_path / "runs" / "runs.csv")
    listed[["benchmark", "system", "run_file"]].to_csv(tmp_path / "runs" / "runs.csv", index=False)
    assert score_runs(tmp_path).instructed_vs_query_only("instructir-sample") == (measure, [])


def test_the_explore_stage_counts_document_words_from_the_corpus_index(ifir_root, tmp_path):
    data = describe_benchmarks(tmp_path, ["ifir/fiqa"], str(ifir_root))
    bench = load_benchmark("ifir/fiqa", root=str(ifir_root))
    assert data.documents["document_words"].tolist() == [len(d.indexed_text.split()) for d in bench.corpus]
    assert data.overview.set_index("benchmark").loc["ifir/fiqa", "documents"] == len(bench.corpus)
    assert pd.read_csv(tmp_path / "data" / "statistics.csv")["queries"].tolist() == [len(bench.queries)]
    assert data.examples[0].relevant["instance"].isin(list(bench.queries)).all()


def test_the_compare_stage_shows_mteb_result_files_left_in_the_report(tmp_path):
    retrieve_runs(tmp_path, ["instructir-sample"], ["bm25"], k=20)
    score_runs(tmp_path)
    judge_runs(tmp_path, backend="baseline", repeats=1)
    stored = Path(__file__).parents[1] / "fixtures" / "mteb" / "results" / "instir__bm25s-sample" / "fixture"
    target = tmp_path / "mteb_results" / "results" / "bm25" / "fixture"  # MTEB's layout, the model named bm25
    target.mkdir(parents=True)
    shutil.copy(stored / "InstructIR.json", target)
    papers = paper_tables(tmp_path)
    from_file = papers.compared[papers.compared["reference"] == "MTEB result file, InstructIR"]
    assert set(from_file["measure_reproduced"]) >= {"nDCG@10", "Robustness@10"} and set(from_file["system"]) == {"bm25"}
    assert (papers.reported["mteb"]["reference"] == "MTEB result file, InstructIR").any()


def test_the_judge_stage_refuses_a_dead_endpoint_in_seconds(tmp_path):
    import socket

    from instir.errors import UsageError
    from instir.stages import judge_runs, retrieve_runs, score_runs

    retrieve_runs(tmp_path, ["ifir-sample/fiqa"], ["bm25"], k=20)
    score_runs(tmp_path)
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(UsageError, match=rf"judge endpoint http://127.0.0.1:{port}/v1: nothing answers"):
        judge_runs(tmp_path, backend="openai", model="m", base_url=f"http://127.0.0.1:{port}/v1")


def test_a_family_table_names_each_subset_once_and_its_average_plainly():
    from instir.stages.evaluate import column_labels

    one = pd.DataFrame({"benchmark": ["ifir-sample/fiqa", "ifir-sample/nfcorpus", "ifir-sample"],
                        "subset": ["fiqa", "nfcorpus", "average"]})
    assert column_labels(one).tolist() == ["fiqa", "nfcorpus", "Average"]
    two = pd.DataFrame({"benchmark": ["ifir-sample/fiqa", "ifir/fiqa", "ifir-sample", "ifir"],
                        "subset": ["fiqa", "fiqa", "average", "average"]})
    assert column_labels(two).tolist() == ["ifir-sample/fiqa", "ifir/fiqa", "ifir-sample Average", "ifir Average"]


def test_judgments_failed_only_in_the_spreads_repeats_are_said_to_be_judged_again_by_a_rerun():
    # found re-reading this stop's change: with no failed InstFol or validation judgment to read a reason from, the
    # advice said "running again fails them again" (all of no reasons were lasting), where a rerun judges them
    import pandas as pd

    from instir.stages.judge import InstFolTables, Judging

    spread = pd.DataFrame()
    spread.attrs["repeats"] = [[{"repeat": 0, "from_instfol": True, "failed_judgments": 0},
                                {"repeat": 1, "failed_judgments": 2}]]
    none = pd.DataFrame(columns=["qid", "docid", "error"])
    judging = Judging(judge=None, backend="baseline", max_instances=1, validations={},
                      pairs=pd.DataFrame(columns=["benchmark", "norm", "error", "warning"]), agreement=pd.DataFrame(),
                      instfol=InstFolTables(none, none, pd.DataFrame(), pd.DataFrame({"failed_judgments": [0]})),
                      rankings=pd.DataFrame(), spread=spread, summary="")
    assert judging.incomplete() == ["2 judgment(s) failed (2 of its repeats) and are left out of the values; run the "
                                    "same command again to judge only those (the judgment cache keeps every success)"]
