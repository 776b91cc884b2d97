"""``instir evaluate`` end to end on the bundled samples."""

import argparse
import csv
import re
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest

from instir.benchmarks import load_benchmark
from instir.cli.evaluate import file_system_name, register
from instir.errors import UsageError, UserError
from instir.metrics.scoring import evaluate, evaluate_runs
from instir.report.record import read_record
from instir.retrieval.runs import Run, ShallowRunsWarning, read_run, write_run
from instir.retrieval.search import OtherDataWarning, keyed

MTEB_PREDICTIONS = Path(__file__).parents[1] / "fixtures" / "mteb" / "predictions" / "IFIRFiQA_predictions.json"


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="instir")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.handler(args)


def _runs(benchmark, rank_of_relevant: dict[str, int]) -> pd.DataFrame:
    """Each query retrieves 5 documents, its relevant one at the given rank (default 1)."""
    others = [d for d in benchmark.corpus.ids()][:8]
    rows = []
    for qid, rel in benchmark.qrels.items():
        target = next(iter(rel))
        docs = [d for d in others if d != target][:4]
        docs.insert(rank_of_relevant.get(qid, 1) - 1, target)
        rows += [(qid, d, 10.0 - i) for i, d in enumerate(docs)]
    return pd.DataFrame(rows, columns=["qid", "docid", "score"])


def test_evaluate_prints_the_table_and_writes_the_evaluate_stages_folder(instructir_sample, tmp_path, capsys):
    qids = list(instructir_sample.qrels)
    strong = write_run(Run(_runs(instructir_sample, {})), tmp_path / "strong.trec")
    weak_df = pd.concat([_runs(instructir_sample, {q: 3 for q in qids[::2]}),
                         pd.DataFrame({"qid": ["no-such-query"], "docid": [qids[0]], "score": [1.0]})])
    weak = write_run(Run(weak_df), tmp_path / "weak.trec")
    report = tmp_path / "report"
    assert _cli(["evaluate", "--benchmark", "instructir-sample", "--run", str(strong), "--run", str(weak),
                 "--measures", "nDCG@10", "RR@10", "--resamples", "199", "--out", str(report)]) == 0
    out = capsys.readouterr().out
    assert "weak: 1 query ids not in the benchmark" in out and "no-such-query" in out
    assert "Robustness@10" in out and "against baseline 'strong' (scores ×100;" in out
    comparison = out.split("against baseline")[1].split("\nwrote ")[0]
    nDCG = next(line.split() for line in comparison.splitlines() if line.split()[:2] == ["nDCG@10", "weak"])
    assert nDCG[3] == "100.0" and re.fullmatch(r"\d+\.\d", nDCG[2])  # means ×100, one decimal, as the tables
    assert "<0.001" in comparison and not re.search(r"\b0\.\d{4}\b", comparison)  # no 0.9356, no p 0.0000

    table = pd.read_csv(report / "metrics" / "metrics.csv")
    value = table.set_index(["system", "measure"])["value"]
    assert value[("strong", "nDCG@10")] == 1.0 and value[("strong", "Robustness(RR@10)")] == 1.0
    assert value[("weak", "RR@10")] == pytest.approx((len(qids[::2]) / 3 + len(qids[1::2])) / len(qids))
    assert value[("weak", "Robustness(RR@10)")] == pytest.approx(1 / 3)  # every group has a rank-3 instance
    runs = pd.read_csv(report / "runs" / "runs.csv")  # the baseline first: the stage's baseline
    assert runs["system"].tolist() == ["strong", "weak"] and runs["sample"].all()
    assert runs["run_file"].tolist() == [str(strong.resolve()), str(weak.resolve())]  # listed, not copied
    # no k in its sidecar: the depth every query of the benchmark reaches (weak's stray line of a query the
    # benchmark lacks sets none)
    assert runs["k"].tolist() == [read_run(strong).df["qid"].value_counts().min()] * 2 == [5, 5]
    assert read_record(report)["datasets"]["instructir-sample"]["sample"] is True
    comparisons = pd.read_csv(report / "metrics" / "comparisons.csv")
    assert set(comparisons["measure"]) == {"nDCG@10", "RR@10", "Robustness@10", "Robustness(RR@10)"}
    comparisons = comparisons.set_index("measure")
    assert comparisons.loc["RR@10", "worse"] == len(qids[::2]) and comparisons.loc["RR@10", "better"] == 0
    assert comparisons.loc["Robustness(RR@10)", "n"] == len(instructir_sample.groups())
    assert len(pd.read_parquet(report / "metrics" / "per_query.parquet")) == 2 * 2 * len(qids)
    assert "\\textbf" in (report / "metrics" / "instructir-sample.tex").read_text()  # the marked table


def test_unknown_baseline_is_refused(instructir_sample, tmp_path):
    run = write_run(Run(_runs(instructir_sample, {})), tmp_path / "a.trec")
    with pytest.raises(UsageError, match="unknown --baseline 'b'"):
        _cli(["evaluate", "--benchmark", "instructir-sample", "--run", str(run), "--baseline", "b"])


@pytest.mark.parametrize("where", ["runs/runs.csv", "report.json", "metrics/mine.trec", "judge/mine.trec", "link"])
def test_a_run_where_evaluate_writes_in_its_out_is_refused_before_anything_is_written(instructir_sample, tmp_path,
                                                                                    where):
    # on the commit before, --run OUT/runs/runs.csv --out OUT replaced the run with the runs table: its only copy lost
    out = tmp_path / "out"
    run = write_run(Run(_runs(instructir_sample, {})), out / ("runs/runs.csv" if where == "link" else where))
    if where == "link":
        (tmp_path / "link.trec").symlink_to(run)
        run = tmp_path / "link.trec"
    before = run.read_bytes()
    with pytest.raises(UsageError, match=r"instir writes there in the report folder .*out .*choose another --out"):
        _cli(["evaluate", "--benchmark", "instructir-sample", "--run", f"x={run}", "--out", str(out)])
    assert run.read_bytes() == before and not (out / "metrics" / "metrics.csv").exists()



def test_a_run_where_evaluate_writes_is_refused_also_under_an_out_with_a_quoted_tilde(instructir_sample, tmp_path,
                                                                                       monkeypatch):
    # --out '~/ev' (the tilde quoted) is the home folder's ev, as report_folder makes it; the check read a folder
    # named '~' instead, so the run at ~/ev/runs/runs.csv was set aside and replaced by the runs table
    monkeypatch.setenv("HOME", str(tmp_path))
    run = write_run(Run(_runs(instructir_sample, {})), tmp_path / "ev" / "runs" / "runs.csv")
    before = run.read_bytes()
    with pytest.raises(UsageError, match=r"instir writes there in the report folder ~/ev .*choose another --out"):
        _cli(["evaluate", "--benchmark", "instructir-sample", "--run", f"x={run}", "--out", "~/ev"])
    assert run.read_bytes() == before and not (tmp_path / "ev" / "metrics").exists()

def test_a_run_whose_sidecar_says_its_k_is_listed_that_deep_though_it_ranks_fewer(instructir_sample, tmp_path):
    """A run asked for 10 a query whose queries each matched 5: runs.csv says the depth asked, 10, as its sidecar
    records it (not the 5 a file without one would be counted to)."""
    run = write_run(Run(_runs(instructir_sample, {}), {"k": 10}), tmp_path / "asked10.trec")
    report = tmp_path / "report"
    assert _cli(["evaluate", "--benchmark", "instructir-sample", "--run", str(run), "--measures", "nDCG@10",
                 "--resamples", "99", "--out", str(report)]) == 0
    assert pd.read_csv(report / "runs" / "runs.csv")["k"].tolist() == [10]


def test_a_sidecar_whose_rows_are_not_its_runs_is_said_and_not_used(tmp_path, capsys):
    # on the commit before, a sidecar edited to say 10 rows and k 5 (its digest made to match) was taken at its word:
    # runs.csv recorded k 5 for a run 100 deep
    import hashlib
    import json

    from instir.cli import main

    assert main(["retrieve", "--benchmark", "instructir-sample", "--retriever", "bm25", "--out", str(tmp_path)]) == 0
    run = next(tmp_path.glob("*.trec"))
    sidecar = run.with_name(run.name + ".json")
    meta = json.loads(sidecar.read_text())
    sidecar.write_text(json.dumps({**meta, "rows": 10, "k": 5,
                                   "trec_sha256": hashlib.sha256(run.read_bytes()).hexdigest()}))
    with pytest.warns(UserWarning, match="sidecar says 10 rows, the run holds 6690: its template and k are not used"):
        assert _cli(["evaluate", "--benchmark", "instructir-sample", "--run", str(run),
                     "--out", str(tmp_path / "e")]) == 0
    # the k listed is the depth every query reaches (the paper comparison reads it as the run's depth)
    depth = read_run(run).df["qid"].value_counts().min()
    assert pd.read_csv(tmp_path / "e" / "runs" / "runs.csv")["k"].tolist() == [depth] and depth != 5


def test_system_names_come_from_run_file_names_in_every_command(tmp_path):
    # on the commit before, instir mteb-export named a run file e5.run "e5.run" where instir evaluate said "e5"
    from instir.cli.mteb import run_identity

    assert file_system_name(tmp_path / "bm25.trec") == "bm25" and file_system_name(tmp_path / "e5.run") == "e5"
    assert run_identity({}, tmp_path / "e5.run") == ("e5", None)


def test_runs_are_named_with_name(instructir_sample, tmp_path):
    run = write_run(Run(_runs(instructir_sample, {})), tmp_path / "a.trec")
    assert _cli(["evaluate", "--benchmark", "instructir-sample", "--run", str(run), "--name", "mine",
                 "--out", str(tmp_path / "report")]) == 0
    table = pd.read_csv(tmp_path / "report" / "metrics" / "metrics.csv")
    assert set(table["system"]) == {"mine"}
    with pytest.raises(UsageError, match="one per --run"):
        _cli(["evaluate", "--benchmark", "instructir-sample", "--run", str(run), "--name", "a", "b"])


def test_without_out_the_report_goes_under_reports_in_the_current_folder_never_beside_a_run(
        instructir_sample, tmp_path, monkeypatch, capsys):
    here, elsewhere = tmp_path / "here", tmp_path / "some" / "other" / "dir"
    here.mkdir()
    elsewhere.mkdir(parents=True)
    monkeypatch.chdir(here)
    write_run(Run(_runs(instructir_sample, {})), here / "a.trec")
    shutil.copy(MTEB_PREDICTIONS, elsewhere / "x.json")
    assert _cli(["evaluate", "--benchmark", "instructir-sample", "--run", "a.trec"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("wrote reports/evaluation-instructir-sample-instructed/:")
    assert _cli(["evaluate", "--benchmark", "ifir-sample/fiqa", "--run", str(elsewhere / "x.json"),
                 "--protocol", "mteb"]) == 0
    assert sorted(p.name for p in here.iterdir()) == ["a.trec", "a.trec.json", "reports"]
    assert [p.name for p in elsewhere.iterdir()] == ["x.json"]
    assert sorted(p.name for p in (here / "reports").iterdir()) == ["evaluation-ifir-sample_fiqa-instructed-mteb",
                                                                   "evaluation-instructir-sample-instructed"]
    assert "reports/evaluation-ifir-sample_fiqa-instructed-mteb/" in capsys.readouterr().out


def test_run_name_equals_file_names_the_system_and_a_file_holding_equals_stays_a_path(instructir_sample, tmp_path):
    strong = write_run(Run(_runs(instructir_sample, {})), tmp_path / "a=b.trec")
    weak = write_run(Run(_runs(instructir_sample, {q: 2 for q in instructir_sample.qrels})), tmp_path / "weak.trec")
    report = tmp_path / "report"
    assert _cli(["evaluate", "--benchmark", "instructir-sample", "--run", str(strong), f"mine={weak}",
                 "--out", str(report)]) == 0
    assert pd.read_csv(report / "runs" / "runs.csv")["system"].tolist() == ["a=b", "mine"]
    for runs, error in ([f"={weak}"], "empty system name"), ([f"x={weak}", f"x={strong}"], "distinct names"):
        with pytest.raises(UsageError, match=error):
            _cli(["evaluate", "--benchmark", "instructir-sample", "--run", *runs, "--out", str(report)])
    with pytest.raises(UsageError, match="not both"):
        _cli(["evaluate", "--benchmark", "instructir-sample", "--run", f"x={weak}", "--name", "y",
              "--out", str(report)])


def test_the_written_scores_read_back_to_the_computed_floats_exactly(instructir_sample, tmp_path):
    frame = _runs(instructir_sample, {q: 1 + i % 3 for i, q in enumerate(instructir_sample.qrels)})
    run = write_run(Run(frame), tmp_path / "mixed.trec")
    assert _cli(["evaluate", "--benchmark", "instructir-sample", "--run", str(run), "--out", str(tmp_path / "r")]) == 0
    computed = evaluate_runs({"mixed": read_run(run)}, instructir_sample).table
    with open(tmp_path / "r" / "metrics" / "metrics.csv", newline="") as fh:
        written = {(row["measure"], row["level"]): float(row["value"]) for row in csv.DictReader(fh)}
    expected = {(m, str(lv)): v for m, lv, v in zip(computed["measure"], computed["level"], computed["value"])}
    assert written == expected  # exact: repr round-trips, nothing rounded
    assert any(len(repr(v)) > 12 for v in written.values())  # values with more than 10 decimals survive


def test_ifir_sample_gets_native_measures_per_level_and_no_robustness():
    bench = load_benchmark("ifir-sample/fiqa")
    result = evaluate_runs({"s": _runs(bench, {})}, bench)
    measures = set(result.table["measure"])
    assert {"nDCG@20", "nDCG@20[ifir-native]", "RR@20[ifir-native]", "R@20"} <= measures
    assert not any(m.startswith("Robustness") for m in measures)
    assert set(result.table["level"]) == {"all", "1", "2", "3"}
    native = result.table.set_index(["level", "measure"])["value"]
    assert native[("all", "RR@20[ifir-native]")] == 1.0  # first relevant doc is always at rank 1


def test_a_run_shallower_than_a_cutoff_is_said_on_every_scoring_also_a_reused_one(instructir_sample, tmp_path,
                                                                                   capsys):
    # on the commit before, R@100 of runs cut at 5 documents was printed as a recall at 100 without a word
    run = write_run(Run(_runs(instructir_sample, {})), tmp_path / "five.trec")  # 5 documents per query
    said = "five: ranks at most 5 documents per query, fewer than the cutoff of nDCG@10, R@100: the ranks past 5"
    for _ in range(2):  # the second time its per-query scores are read back from metrics/runs/
        assert _cli(["evaluate", "--benchmark", "instructir-sample", "--run", str(run), "--measures", "nDCG@10",
                     "R@100", "--out", str(tmp_path / "report")]) == 0
        assert said in capsys.readouterr().out
    notes = evaluate_runs({"five": read_run(run)}, instructir_sample, ["nDCG@10", "R@100"]).notes
    assert any(said in note for note in notes)
    deep = evaluate_runs({"five": read_run(run)}, instructir_sample, ["nDCG@5", "RR@5"]).notes
    assert not deep
    # on the commit before, instir.evaluate gave its values without a word
    with pytest.warns(ShallowRunsWarning, match="the run: ranks at most 5 documents per query, fewer than the cutoff "
                                                "of nDCG@10, R@100: the ranks past 5"):
        evaluate(instructir_sample, read_run(run), ["nDCG@10", "R@100"])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ShallowRunsWarning)
        evaluate(instructir_sample, read_run(run), ["nDCG@5", "RR@5"])


def test_a_run_shallower_than_a_cutoff_is_warned_by_the_api_and_kept_in_the_stages_run_checks(
        instructir_sample, tmp_path, capsys):
    # before, evaluate_runs and compare_runs kept the note in .notes only (compare_runs printed R@100 100.0 without a
    # word), and notebook 03's page and metrics/ held no trace of it; the stage says it in its table, not as a raw
    # warning on the page (nor twice in a sweep: the regression review)
    from instir import compare_runs
    from instir.stages import score_runs

    run = write_run(Run(_runs(instructir_sample, {})), tmp_path / "five.trec")  # 5 documents per query
    said = "five: ranks at most 5 documents per query, fewer than the cutoff of nDCG@10, R@100"
    for score in (lambda: evaluate_runs({"five": read_run(run)}, instructir_sample, ["nDCG@10", "R@100"]),
                  lambda: compare_runs(instructir_sample, {"five": read_run(run), "again": read_run(run)},
                                       ["nDCG@10", "R@100"])):
        with pytest.warns(ShallowRunsWarning, match=said):
            score()
    assert _cli(["evaluate", "--benchmark", "instructir-sample", "--run", str(run), "--measures", "nDCG@10",
                 "R@100", "--out", str(tmp_path / "report")]) == 0
    assert capsys.readouterr().err.count("fewer than the cutoff") == 0  # printed once, as a note under its benchmark
    checks = pd.read_csv(tmp_path / "report" / "metrics" / "run_checks.csv", keep_default_na=False)
    assert checks["notes"].str.startswith(said).tolist() == [True]
    with warnings.catch_warnings():
        warnings.simplefilter("error", ShallowRunsWarning)
        shown = score_runs(tmp_path / "report").checks_table()
    assert list(shown.columns) == ["benchmark", "system", "run ids", "notes"]  # no other_data: none differs


def test_a_query_cut_short_is_named_and_listed_at_the_depth_its_note_gives(instructir_sample, tmp_path, capsys):
    # on the commit before, a run 5 deep but for one query cut to 2 got no depth note (the note took the deepest
    # query) while runs.csv listed k 2 (the shallowest), and a stray line of a query the benchmark lacks listed k 1
    full = _runs(instructir_sample, {})
    first = full["qid"].iloc[0]
    cut = write_run(Run(full[(full["qid"] != first) | (full.groupby("qid").cumcount() < 2)]), tmp_path / "cut.trec")
    stray = write_run(Run(pd.concat([full, pd.DataFrame({"qid": ["no-such-query"], "docid": [first],
                                                         "score": [1.0]})])), tmp_path / "stray.trec")
    assert _cli(["evaluate", "--benchmark", "instructir-sample", "--run", str(cut), "--run", str(stray),
                 "--measures", "nDCG@5", "RR@5", "--out", str(tmp_path / "report")]) == 0
    out = capsys.readouterr().out
    assert (f"cut: ranks 2 documents for query '{first}' (its shallowest query: the others rank more), fewer than "
            "the cutoff of nDCG@5, RR@5: the ranks past 2 count as non-relevant (if the run was cut short, retrieve "
            "at k = 5 for these; if its system found no more documents for that query, nothing is lost)") in out
    assert "stray: ranks" not in out  # 5 deep for every query of the benchmark: as deep as the cutoffs
    assert pd.read_csv(tmp_path / "report" / "runs" / "runs.csv")["k"].tolist() == [2, 5]


def test_a_run_of_another_benchmark_is_refused_in_every_scoring_path(instructir_sample, tmp_path, capsys):
    # on the commit before, instir evaluate and evaluate_runs printed 0.0 on every measure and exited 0;
    # only evaluate() refused it
    fiqa = load_benchmark("ifir-sample/fiqa")
    run = write_run(Run(_runs(fiqa, {})), tmp_path / "fiqa.trec")
    with pytest.raises(UsageError, match=rf"the run {re.escape(str(run))} answers none of the 86 queries of "
                                         "instructir-sample"):
        evaluate_runs({"fiqa": read_run(run)}, instructir_sample)
    with pytest.raises(UsageError, match="answers none of the 86 queries"):
        _cli(["evaluate", "--benchmark", "instructir-sample", "--run", str(run), "--out", str(tmp_path / "r")])
    assert not (tmp_path / "r").exists()  # refused before anything is written (runs.csv was, beside old metrics)


def test_a_run_that_ranks_the_whole_corpus_gets_no_depth_note(tmp_path):
    fiqa = load_benchmark("ifir-sample/fiqa")  # 38 documents: a run at k = 100 ranks them all
    run = Run(pd.DataFrame([(q, d, 1.0 / (i + 1)) for q in fiqa.queries for i, d in enumerate(fiqa.corpus.ids())],
                           columns=["qid", "docid", "score"]))
    assert not evaluate_runs({"all": run}, fiqa, ["nDCG@20", "R@100"]).notes


def test_runs_mteb_cannot_pair_are_one_line_under_its_protocol(instructir_sample, tmp_path):
    # MTEB averages a run over the queries it answers, so runs answering different queries cannot be paired;
    # on the commit before, a ValueError traceback
    full = write_run(Run(_runs(instructir_sample, {})), tmp_path / "full.trec")
    frame = _runs(instructir_sample, {})
    part = write_run(Run(frame[frame["qid"].isin(list(instructir_sample.qrels)[:10])]), tmp_path / "part.trec")
    with pytest.raises(UsageError, match="not scored on the same qids .* under MTEB's protocol a run counts only"):
        _cli(["evaluate", "--benchmark", "instructir-sample", "--run", str(full), str(part), "--protocol", "mteb",
              "--measures", "nDCG@10", "--out", str(tmp_path / "r")])



def test_ifirs_hard_negatives_are_no_ceiling_on_how_deep_a_run_can_rank(tmp_path):
    # IFIR's songtingyu layout gives each query candidates (3 in the fixture): hard negatives for judge validation,
    # not a reranking task's lists, since IFIR's runs search the whole corpus. On the commit before they capped
    # rankable(), so a run cut at 2 of a corpus of 5 got no depth note (nor instir judge's shallow-run warning)
    from real_data import data_root

    from instir.retrieval.lexical import BM25Retriever
    from instir.retrieval.search import retrieve

    fiqa = load_benchmark("ifir/fiqa", root=data_root(tmp_path / "root"))
    assert fiqa.rankable() == len(fiqa.corpus) - 1 == 4
    (note,) = evaluate_runs({"bm25": retrieve(fiqa, BM25Retriever(show_progress=False), k=2)}, fiqa, ["nDCG@20"]).notes
    assert note.startswith("bm25: ranks at most 2 documents per query, fewer than the cutoff of nDCG@20")
    # BM25 ranks only the documents that match (3 here): a run asked for 100 is as deep as the corpus allows
    run = retrieve(fiqa, BM25Retriever(show_progress=False), k=100)
    assert run.df["qid"].value_counts().max() == 3 and not evaluate_runs({"bm25": run}, fiqa, ["nDCG@20"]).notes


@pytest.mark.parametrize("damage", ["zeroed", "values edited", "manifest gone"])
def test_damaged_stored_scores_are_said_and_computed_again_never_reported(instructir_sample, tmp_path, capsys,
                                                                         damage):
    """On the commit before, zeroed per-query scores in ``metrics/runs/`` were a pyarrow traceback on every later
    ``instir evaluate`` into the folder, and edited ones (a file of the same kind) were reported as the run's."""
    from instir.verified_store import CacheWarning

    run = write_run(Run(_runs(instructir_sample, {})), tmp_path / "five.trec")
    argv = ["evaluate", "--benchmark", "instructir-sample", "--run", str(run), "--out", str(tmp_path / "report")]
    assert _cli(argv) == 0
    first = pd.read_csv(tmp_path / "report" / "metrics" / "metrics.csv")
    capsys.readouterr()
    (entry,) = (tmp_path / "report" / "metrics" / "runs").iterdir()
    scores = entry / "scores.parquet"
    if damage == "zeroed":
        scores.write_bytes(bytes(scores.stat().st_size))
    elif damage == "values edited":
        pd.read_parquet(scores).assign(value=1.0).to_parquet(scores, index=False)
    else:
        (entry / "manifest.json").unlink()
    with pytest.warns(CacheWarning, match=f"stored scores: {re.escape(str(entry))}.* removed, rebuilding it"):
        assert _cli(argv) == 0
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "report" / "metrics" / "metrics.csv"), first)
    assert (entry / "manifest.json").is_file()


def test_a_run_file_with_a_long_name_has_its_scores_stored_and_reused(instructir_sample, tmp_path, capsys):
    # found in this stop's review: the stored scores' entry took the run file's whole name, so the store's temporary
    # folder (name, pid, host, build id) passed 255 bytes for a 200-character run name: "File name too long"
    run = write_run(Run(_runs(instructir_sample, {})), tmp_path / f"{'r' * 200}.trec")
    argv = ["evaluate", "--benchmark", "instructir-sample", "--run", str(run), "--out", str(tmp_path / "report")]
    assert _cli(argv) == 0 and _cli(argv) == 0
    (entry,) = (tmp_path / "report" / "metrics" / "runs").iterdir()
    assert entry.name.startswith("r" * 48 + "-") and len(entry.name) < 80 and (entry / "manifest.json").is_file()


def test_stored_scores_follow_what_the_release_brings_that_p_mrr_reads(tmp_path):
    # before, the key held the run, queries, qrels and corpus only: FollowIR's changed documents or candidate lists
    # edited under one revision served the p-MRR stored before
    import copy

    from instir.stages.evaluate import scores_key

    bench = load_benchmark("followir-sample/news21")
    run = tmp_path / "r.trec"
    run.write_text("x Q0 d 1 1.0 t\n")
    key = scores_key(bench, run, "s", ["p-MRR"])
    for name in ("changed", "top_ranked"):
        edited = copy.deepcopy(bench)
        first = next(iter(edited.meta[name]))
        edited.meta[name][first] = list(edited.meta[name][first])[:-1]
        assert scores_key(edited, run, "s", ["p-MRR"]) != key
    assert "release_sha256" not in scores_key(load_benchmark("instructir-sample"), run, "s", ["nDCG@10"])


def test_the_papers_table_names_the_table_and_source_of_each_number():
    # on the commit before, `instir evaluate --papers` printed "instructir … BM25 … 76.00 … outside tolerance" with no
    # word that 76.00 is the Promptriever paper's rerun, not the InstructIR paper's number
    from instir.cli.evaluate import papers_text
    from instir.papers import compare_to_papers, load_reported

    ours = pd.DataFrame({"system": ["bm25", "repllama"], "benchmark": "instructir", "measure": "nDCG@10",
                         "value": [0.8, 0.88]})
    compared = compare_to_papers(ours, load_reported("instructir"),
                                 model_map={"repllama": "castorini/repllama-v1-7b-lora-passage"})
    lines = papers_text(compared).splitlines()
    assert "table" in lines[0].split()
    (bm25,) = [line for line in lines if " bm25 " in f" {line} "]
    assert "Promptriever Table 2 (secondary)" in bm25 and "76.00" in bm25
    repllama = [line for line in lines if "repllama" in line]
    assert any("InstructIR paper" in line and "87.62" in line for line in repllama)
    assert any("Promptriever Table 2 (secondary)" in line and "85.70" in line for line in repllama)


def test_a_run_retrieved_over_other_data_is_said_once_in_every_scoring_path_and_its_row_says_so(instructir_sample,
                                                                                               tmp_path):
    # on the commit before, a run retrieved over another corpus (its sidecar's key records the corpus's hash) was
    # scored, and compared with the papers, as a run of the benchmark's data without a word
    key = keyed(instructir_sample)
    other = write_run(Run(_runs(instructir_sample, {}), {"key": {**key, "corpus_sha256": "0" * 64}}),
                      tmp_path / "other.trec")
    same = write_run(Run(_runs(instructir_sample, {}), {"key": key}), tmp_path / "same.trec")
    external = write_run(Run(_runs(instructir_sample, {})), tmp_path / "external.trec")
    said = rf"{re.escape(str(other))} was retrieved over a corpus other than instructir-sample's"
    for _ in range(2):  # the second time its scores are read back from metrics/runs/
        with pytest.warns(OtherDataWarning) as caught:
            assert _cli(["evaluate", "--benchmark", "instructir-sample", "--run", str(other), "--run", str(same),
                         "--run", str(external), "--measures", "nDCG@5", "--out", str(tmp_path / "report")]) == 0
        assert [re.search(said, str(w.message)) is not None for w in caught.list
                if w.category is OtherDataWarning] == [True]
        checks = pd.read_csv(tmp_path / "report" / "metrics" / "run_checks.csv", keep_default_na=False)
        assert checks.set_index("system")["other_data"].to_dict() == {"other": "corpus", "same": "", "external": ""}
    with pytest.warns(OtherDataWarning, match=said):
        result = evaluate_runs({"other": read_run(other)}, instructir_sample, ["nDCG@5"])
    assert result.checks["other"].other_data == ["corpus"]
    with pytest.warns(OtherDataWarning, match=said):
        evaluate(instructir_sample, read_run(other), "nDCG@5")
    with warnings.catch_warnings():
        warnings.simplefilter("error", OtherDataWarning)
        evaluate_runs({"same": read_run(same), "external": read_run(external)}, instructir_sample, ["nDCG@5"])
        evaluate(instructir_sample, read_run(same), "nDCG@5")
    queries = write_run(Run(_runs(instructir_sample, {}), {"key": {**key, "queries_sha256": "0" * 64}}),
                        tmp_path / "queries.trec")
    with pytest.warns(OtherDataWarning, match="retrieved over queries other than"):
        assert evaluate_runs({"q": read_run(queries)}, instructir_sample, ["nDCG@5"]).checks["q"].other_data == [
            "queries"]


def test_the_baseline_asked_for_is_the_one_compared_against_not_the_first_run(instructir_sample, tmp_path, capsys):
    qids = list(instructir_sample.qrels)
    strong = write_run(Run(_runs(instructir_sample, {})), tmp_path / "strong.trec")
    weak = write_run(Run(_runs(instructir_sample, {q: 3 for q in qids[::2]})), tmp_path / "weak.trec")
    report = tmp_path / "report"
    assert _cli(["evaluate", "--benchmark", "instructir-sample", "--run", str(strong), str(weak), "--baseline", "weak",
                 "--measures", "RR@10", "--resamples", "199", "--out", str(report)]) == 0
    out = capsys.readouterr().out
    assert "against baseline 'weak'" in out
    assert pd.read_csv(report / "runs" / "runs.csv")["system"].tolist() == ["weak", "strong"]
    comparisons = pd.read_csv(report / "metrics" / "comparisons.csv").set_index("measure")
    printed = next(line.split() for line in out.split("against baseline")[1].splitlines()
                   if line.split()[:2] == ["RR@10", "strong"])
    assert printed[-1] == ("yes" if comparisons.loc["RR@10", "significant"] else "no")  # as written
    assert set(comparisons["baseline"]) == {"weak"} and set(comparisons["system"]) == {"strong"}
    assert comparisons.loc["RR@10", "better"] == len(qids[::2]) and comparisons.loc["RR@10", "worse"] == 0


def test_resamples_and_seed_reach_the_permutation_test_and_the_bootstrap(instructir_sample, tmp_path):
    from instir.metrics.stats import paired_tests

    qids = list(instructir_sample.qrels)
    strong = write_run(Run(_runs(instructir_sample, {q: 1 + i % 3 for i, q in enumerate(qids)})),
                       tmp_path / "strong.trec")
    weak = write_run(Run(_runs(instructir_sample, {q: 1 + i % 4 for i, q in enumerate(qids)})), tmp_path / "weak.trec")
    report = tmp_path / "report"
    assert _cli(["evaluate", "--benchmark", "instructir-sample", "--run", str(strong), str(weak),
                 "--measures", "RR@10", "--resamples", "101", "--seed", "7", "--out", str(report)]) == 0
    written = pd.read_csv(report / "metrics" / "comparisons.csv").set_index("measure").loc["RR@10"]
    per_query = pd.read_parquet(report / "metrics" / "per_query.parquet")
    expected = paired_tests(per_query[per_query["measure"] == "RR@10"], "strong", n_resamples=101, seed=7).iloc[0]
    assert 0 < expected["p_perm"] < 1 and expected["ci_low"] < expected["ci_high"]  # both resampled
    for column in ("p_perm", "ci_low", "ci_high"):
        assert written[column] == pytest.approx(expected[column], abs=1e-12), column
    default = paired_tests(per_query[per_query["measure"] == "RR@10"], "strong", seed=0).iloc[0]
    assert (default["ci_low"], default["ci_high"]) != (expected["ci_low"], expected["ci_high"])


def test_an_empty_name_is_refused(instructir_sample, tmp_path):
    run = write_run(Run(_runs(instructir_sample, {})), tmp_path / "a.trec")
    with pytest.raises(UsageError, match="--name: empty system name"):
        _cli(["evaluate", "--benchmark", "instructir-sample", "--run", str(run), "--name", "",
              "--out", str(tmp_path / "report")])
    assert not (tmp_path / "report").exists()


def test_a_reported_numbers_source_is_printed_short():
    from instir.cli.evaluate import table_label

    assert table_label("InstructIR paper, results text (largest model)") == "InstructIR paper, results text"
    assert table_label("Table 2 (nDCG@10)") == "Table 2 (nDCG@10)"
    assert table_label("SECONDARY: Promptriever (arXiv:2409.11136) Table 2 - NOT the InstructIR paper") == \
        "Promptriever Table 2 (secondary)"


def test_a_run_inside_the_report_folder_is_listed_relative_to_it_so_the_folder_can_move(instructir_sample, tmp_path):
    report = tmp_path / "report"
    run = write_run(Run(_runs(instructir_sample, {})), report / "runs" / "mine.trec")
    assert _cli(["evaluate", "--benchmark", "instructir-sample", "--run", str(run), "--out", str(report)]) == 0
    assert pd.read_csv(report / "runs" / "runs.csv")["run_file"].tolist() == ["runs/mine.trec"]


@pytest.mark.parametrize(("options", "said"), [
    (["--name", "a", "b", "--resamples", "50"], "resamples"),
    (["--name", "a", "b", "--resamples", "100001"], "resamples"),
    (["--measures", "InstFol@20"], "InstFol@20 is judged"),
    (["--mteb-results", "nope.json"], "nope.json: MTEB result file or folder not found"),
])
def test_a_bad_option_is_refused_before_anything_is_written(instructir_sample, tmp_path, monkeypatch, options, said):
    run = write_run(Run(_runs(instructir_sample, {})), tmp_path / "a.trec")
    monkeypatch.chdir(tmp_path)  # nope.json: a file named relative to here that is not there
    runs = [str(run), str(run)] if "--name" in options else [str(run)]
    with pytest.raises(UserError, match=said):
        _cli(["evaluate", "--benchmark", "instructir-sample", "--run", *runs, *options,
              "--out", str(tmp_path / "report")])
    assert not (tmp_path / "report").exists()
