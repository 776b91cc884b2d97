"""LaTeX tables with significance marks as ranx prints them: the letters, superscripts, phantoms and
bold of ranx's Report.to_latex, compared row for row with ranx itself where it is installed."""

import argparse

import numpy as np
import pandas as pd
import pytest

from instir.benchmarks import load_benchmark
from instir.cli.evaluate import register
from instir.metrics.latex import best_systems, escape, latex_table, pairwise_tests, significance_marks
from instir.metrics.scoring import evaluate_runs
from instir.metrics.stats import paired_comparison
from instir.retrieval.lexical import BM25Retriever
from instir.retrieval.runs import write_run
from instir.retrieval.search import retrieve


def _per_query(values: dict[str, list[float]]) -> pd.DataFrame:
    return pd.DataFrame([(system, f"q{i}", "nDCG@10", v) for system, vs in values.items() for i, v in enumerate(vs)],
                        columns=["system", "qid", "measure", "value"])


RNG = np.random.default_rng(3)
BASE = RNG.uniform(0.2, 0.6, 40)
#: b is a plus 0.2 everywhere bar noise (beats a), c is a with noise of mean 0 (beats nothing), d is b
TOY = _per_query({"a": BASE, "b": BASE + 0.2 + RNG.normal(0, 0.01, 40), "c": BASE + RNG.normal(0, 0.05, 40),
                  "d": BASE + 0.2 + RNG.normal(0, 0.01, 40)})


def test_a_system_carries_the_letters_of_the_systems_it_beats_significantly():
    marks = significance_marks(TOY).set_index("system")
    assert marks["letter"].to_dict() == {"a": "a", "b": "b", "c": "c", "d": "d"}
    assert marks["beats"].to_dict() == {"a": "", "b": "ac", "c": "", "d": "ac"}
    assert marks.loc["b", "mean"] == pytest.approx(TOY[TOY["system"] == "b"]["value"].mean())


def test_pairs_are_tested_once_with_the_kits_paired_t_test_and_p_at_the_threshold_counts():
    pairs = pairwise_tests(TOY)
    assert list(zip(pairs["system"], pairs["other"])) == [("a", "b"), ("a", "c"), ("a", "d"), ("b", "c"),
                                                            ("b", "d"), ("c", "d")]
    wide = TOY.pivot(index="qid", columns="system", values="value")
    expected = paired_comparison(wide["a"].to_numpy(), wide["c"].to_numpy())["p_ttest"]
    row = pairs[(pairs["system"] == "a") & (pairs["other"] == "c")].iloc[0]
    assert row["p"] == expected and not row["significant"]
    at = pairwise_tests(TOY, max_p=float(row["p"]))  # ranx: significant when p <= max_p
    assert at[(at["system"] == "a") & (at["other"] == "c")]["significant"].item()


def test_holm_makes_marks_rarer_and_the_permutation_test_is_offered():
    pairs = pairwise_tests(TOY, correction="holm")
    assert (pairs["p_adjusted"] >= pairs["p"]).all() and (pairs["p_adjusted"] > pairs["p"]).any()
    perm = significance_marks(TOY, test="perm", n_resamples=499).set_index("system")
    assert perm["beats"].to_dict() == {"a": "", "b": "ac", "c": "", "d": "ac"}
    with pytest.raises(ValueError, match="test must be"):
        pairwise_tests(TOY, test="wilcoxon")


def test_a_system_is_significant_against_the_baseline_exactly_when_its_letter_says_so_for_two_systems():
    # before, the comparisons' "significant" took Holm p < 0.05 and the letters Holm p <= 0.01: on one page, B was
    # significant against A (p = 0.02) and carried no letter over it
    from instir.metrics.stats import SIGNIFICANCE_LEVEL, paired_tests

    between = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        a = rng.uniform(size=30)
        frame = pd.DataFrame({"system": ["A"] * 30 + ["B"] * 30, "qid": [f"q{i}" for i in range(30)] * 2,
                              "measure": "m", "value": np.r_[a, a + rng.normal(0.05, 0.1, size=30)]})
        tested = paired_tests(frame, "A").iloc[0]
        marks = significance_marks(frame, correction="holm").set_index("system")["beats"]
        assert bool(tested["significant"]) == (marks["B"] == "a" or marks["A"] == "b"), seed
        between += SIGNIFICANCE_LEVEL < tested["p_ttest_holm"] < 0.05
    assert between  # some seeds fall where the two rules differed


@pytest.mark.parametrize("max_p", [0, 5, -0.1, True, "0.05", float("nan")])
def test_a_max_p_that_is_no_probability_is_refused(max_p):
    # on the commit before, compare_runs(max_p=5) marked every difference significant
    with pytest.raises(ValueError, match="max_p must be a probability above 0 and at most 1"):
        pairwise_tests(TOY, max_p=max_p)


def test_the_table_prints_scores_with_superscripts_phantoms_and_the_best_in_bold():
    text = latex_table(significance_marks(TOY))
    row_b = text.split("\\midrule\n")[1].split("\\\\")[1]
    b = f"{100 * TOY[TOY['system'] == 'b']['value'].mean():.1f}"
    assert row_b.strip().startswith("b &\nb &\n")
    best = max(("b", "d"), key=lambda s: round(100 * TOY[TOY["system"] == s]["value"].mean(), 1))
    shown = f"\\textbf{{{b}}}" if best == "b" else b
    assert f"{shown}$^{{ac}}$\\hphantom{{$^{{d}}$}}" in row_b
    assert "paired Student's t-test with $p \\le 0.01$ (paired by query)" in text
    assert text.startswith("% needs \\usepackage{booktabs}") and text.rstrip().endswith("\\end{table*}")


def test_names_are_escaped_for_latex():
    assert escape("bm25_k1 & 100% #1 {x} ~^\\") == ("bm25\\_k1 \\& 100\\% \\#1 \\{x\\} \\textasciitilde{}"
                                                    "\\textasciicircum{}\\textbackslash{}")


def test_systems_scored_on_different_queries_are_refused():
    with pytest.raises(ValueError, match="not scored on the same"):
        significance_marks(TOY[~((TOY["system"] == "c") & (TOY["qid"] == "q0"))])


@pytest.fixture(scope="module")
def sample_runs():
    benchmark = load_benchmark("instructir-sample")
    runs = {"bm25": retrieve(benchmark, BM25Retriever(), k=100),
            "bm25_query_only": retrieve(benchmark, BM25Retriever(), template="query-only", k=100),
            "bm25_k1_3": retrieve(benchmark, BM25Retriever(k1=3.0, b=1.0), k=100),
            "bm25_mteb": retrieve(benchmark, BM25Retriever(), template="mteb", k=100)}
    return benchmark, runs


@pytest.mark.interop
def test_the_rows_are_ranx_s_rows_character_for_character(sample_runs, ranx):
    from instir.interop import qrels_to_ranx

    benchmark, runs = sample_runs
    kit = evaluate_runs(runs, benchmark, ["nDCG@10", "RR@10"], derived=False).per_query
    ours = latex_table(significance_marks(kit), scale=1, digits=3)  # ranx prints 3 digits on the 0-1 scale
    report = ranx.compare(qrels_to_ranx(benchmark.qrels), [run.to_ranx(name=n) for n, run in runs.items()],
                          ["ndcg@10", "mrr@10"], max_p=0.01, stat_test="student")
    theirs = report.to_latex()
    body = [text.split("\\midrule\n")[1].split("\\bottomrule")[0] for text in (ours, theirs)]
    assert body[0] == body[1]
    assert "$^{bc}$" in body[0]  # there are marks to agree on (BM25 beats its query-only and k1=3 variants)
    for n, name in enumerate(runs):
        for measure, theirs_name in (("nDCG@10", "ndcg@10"), ("RR@10", "mrr@10")):
            beats = significance_marks(kit).set_index(["system", "measure"]).loc[(name, measure), "beats"]
            assert beats == report.get_superscript_for_latex(name, theirs_name)


def test_instir_evaluate_writes_the_marked_table_for_several_runs(sample_runs, tmp_path):
    benchmark, runs = sample_runs
    paths = [write_run(run, tmp_path / f"{name}.trec") for name, run in list(runs.items())[:2]]
    parser = argparse.ArgumentParser(prog="instir")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["evaluate", "--benchmark", "instructir-sample", "--measures", "nDCG@10",
                              "--resamples", "99", "--run", *map(str, paths),  # one --run, several files
                              "--out", str(tmp_path / "report")])
    assert args.handler(args) == 0
    text = (tmp_path / "report" / "metrics" / "instructir-sample.tex").read_text()
    assert "instructir-sample [instructed] (bundled SAMPLE, not the benchmark)" in text
    assert "(paired by query and by query group)" in text and "Robustness@10" in text
    assert "a &\nbm25 &\n\\textbf{93.6}$^{b}$" in text


def test_the_stages_table_marks_the_pairs_as_compare_runs_does_holm_corrected(sample_runs, tmp_path):
    # before, the evaluate stage's table took the uncorrected p while instir.compare_runs (and the README) corrected
    # by Holm: one report folder held two verdicts on the same pair
    import instir

    benchmark, runs = sample_runs
    chosen = dict(list(runs.items())[:3])
    paths = [write_run(run, tmp_path / f"{name}.trec") for name, run in chosen.items()]
    parser = argparse.ArgumentParser(prog="instir")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["evaluate", "--benchmark", "instructir-sample", "--measures", "nDCG@10", "P@10",
                              "--run", *map(str, paths), "--out", str(tmp_path / "report")])
    assert args.handler(args) == 0
    text = (tmp_path / "report" / "metrics" / "instructir-sample.tex").read_text()
    assert "Holm-corrected across the pairs" in text
    measures = ["nDCG@10", "P@10", "Robustness@10", "Robustness(P@10)"]  # the stage derives the Robustness ones
    theirs = instir.compare_runs(benchmark, chosen, measures).to_latex()
    assert text.split("\\midrule\n")[1] == theirs.split("\\midrule\n")[1]  # the rows and their letters


def test_with_holm_a_pair_is_significant_by_its_corrected_p_not_its_raw_one():
    # a against c: raw p 0.635, Holm-corrected 0.963 (six pairs); at max_p 0.7 only the raw p is below it
    pairs = pairwise_tests(TOY, correction="holm", max_p=0.7).set_index(["system", "other"])
    assert pairs.loc[("a", "c"), "p"] < 0.7 < pairs.loc[("a", "c"), "p_adjusted"]
    assert not pairs.loc[("a", "c"), "significant"]
    assert (pairs["significant"] == (pairs["p_adjusted"] <= 0.7)).all()
    assert pairwise_tests(TOY, max_p=0.7).set_index(["system", "other"]).loc[("a", "c"), "significant"]


def test_a_tie_in_the_printed_score_bolds_the_first_system_as_ranx_does():
    # 0.5004 and 0.4996 both print as 50.0: the later one is not above the earlier, so the first stays bold
    marks = pd.DataFrame({"system": ["a", "b", "c"], "measure": "nDCG@10", "mean": [0.5004, 0.4996, 0.2]})
    assert best_systems(marks) == {"nDCG@10": "a"}
    assert best_systems(marks.assign(mean=[0.0, 0.0, 0.0])) == {"nDCG@10": None}  # nothing above 0
