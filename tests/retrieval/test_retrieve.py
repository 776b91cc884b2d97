"""retrieve(): template choice, run files + sidecars, reuse of identical runs, the
`instir retrieve` command, and bring-your-own runs."""

import argparse
import json
from pathlib import Path

import pytest
from says import raises_saying

from instir.cli import retrieve as commands
from instir.retrieval import (
    check_run_ids,
    make_retriever,
    read_run,
    retrieve,
    retriever_family,
    run_is_complete,
    system_name,
)
from instir.retrieval.lexical import BM25Retriever
from instir.retrieval.runs import Run, sidecar_path


class CountingBM25(BM25Retriever):
    """BM25 that counts its searches."""

    def __init__(self, **kwargs):
        super().__init__(show_progress=False, **kwargs)
        self.searches = 0

    def search(self, benchmark, template, k):
        self.searches += 1
        return super().search(benchmark, template, k)


def test_run_and_sidecar_are_written_with_a_descriptive_name(toy_benchmark, tmp_path):
    run = retrieve(toy_benchmark(), CountingBM25(), k=3, out_dir=tmp_path)
    path = Path(run.meta["path"])
    assert path.name.startswith("instructir-toy__instructed__bm25__instructir__k3-") and path.suffix == ".trec"
    assert run_is_complete(path)
    side = json.loads(sidecar_path(path).read_text())
    assert side["benchmark"] == {"name": "instructir-toy", "layout": "hand-made", "revision": "local",
                                 "setting": "instructed", "sample": False}
    assert side["template"]["name"] == "instructir" and side["template"]["query"] == "{instruction} [SEP] {query}"
    assert side["retriever"]["params"]["k1"] is None  # configured: benchmark default ...
    assert side["search"]["retriever"]["params"]["k1"] == 0.9  # ... resolved by the search
    assert side["k"] == 3 and side["wall_time_s"] >= 0 and side["self_hits_dropped"] == 0
    assert len(side["key"]["corpus_sha256"]) == 64 and "bm25s" in side["versions"]


def test_second_call_with_identical_inputs_does_no_search(toy_benchmark, tmp_path):
    retriever = CountingBM25()
    first = retrieve(toy_benchmark(), retriever, k=3, out_dir=tmp_path)
    second = retrieve(toy_benchmark(), retriever, k=3, out_dir=tmp_path)
    assert retriever.searches == 1 and second.meta["reused"] is True
    assert second.df.equals(first.df)
    assert len(list(tmp_path.glob("*.trec"))) == 1


@pytest.mark.parametrize("change", ["k", "params", "template", "corpus"])
def test_any_changed_input_searches_again_into_a_new_file(toy_benchmark, tmp_path, change):
    from instir.benchmarks.types import Doc

    retrieve(toy_benchmark(), CountingBM25(), k=3, out_dir=tmp_path)
    retriever = CountingBM25(k1=1.5) if change == "params" else CountingBM25()
    bench = toy_benchmark(extra_docs=(Doc("904", "saffron tea"),)) if change == "corpus" else toy_benchmark()
    retrieve(bench, retriever, k=4 if change == "k" else 3, template="mteb" if change == "template" else None,
             out_dir=tmp_path)
    assert retriever.searches == 1 and len(list(tmp_path.glob("*.trec"))) == 2


@pytest.mark.parametrize("change", ["sidecar gone", "edited"])
def test_a_run_file_the_kit_cannot_show_it_wrote_is_set_aside_and_the_run_made_anew(toy_benchmark, tmp_path, change):
    # on the commit before, a run edited by hand (a line dropped) was replaced without a word when the run was asked
    # for again; a run whose sidecar is gone (the process died before it) is made anew too
    first = retrieve(toy_benchmark(), CountingBM25(), k=3, out_dir=tmp_path)
    path = Path(first.meta["path"])
    if change == "edited":
        path.write_text("".join(path.read_text().splitlines(True)[1:]))
    else:
        sidecar_path(path).unlink()
    kept = path.read_bytes()
    retriever = CountingBM25()
    with pytest.warns(UserWarning, match="is not the run the kit wrote there.* set aside as .*kept, never read"):
        again = retrieve(toy_benchmark(), retriever, k=3, out_dir=tmp_path)
    assert retriever.searches == 1 and run_is_complete(again.meta["path"]) and "reused" not in again.meta
    (aside,) = tmp_path.glob(f"{path.name}.set-aside-*[0-9]")
    assert aside.read_bytes() == kept


def test_without_out_dir_nothing_is_written(toy_benchmark, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = retrieve(toy_benchmark(), CountingBM25(), k=2)
    assert "path" not in run.meta and list(tmp_path.iterdir()) == []
    assert run.df.groupby("qid").size().max() == 2


@pytest.mark.parametrize("k", [0, -5, 2.5, "10", True])
def test_k_below_one_or_not_a_whole_number_is_refused_before_searching(toy_benchmark, tmp_path, k):
    retriever = CountingBM25()
    with raises_saying(ValueError, "k", "at least 1"):
        retrieve(toy_benchmark(), retriever, k=k, out_dir=tmp_path)
    assert retriever.searches == 0 and list(tmp_path.iterdir()) == []


def test_default_template_follows_family_benchmark_and_query_order(toy_benchmark):
    assert retrieve(toy_benchmark("ifir-toy/fiqa"), CountingBM25(), k=2).meta["template"]["name"] == "ifir"
    order = toy_benchmark(setting="order-sensitivity", meta={"query_order": "query-first"})
    assert retrieve(order, CountingBM25(), k=2).meta["template"]["name"] == "instructir-query-first"


def test_retriever_family_comes_from_attribute_or_name():
    assert retriever_family(BM25Retriever()) == "bm25"

    class Named:
        name = "dense-instructor-xl"

    assert retriever_family(Named()) == "instructor"


def test_make_retriever_kinds_and_errors():
    assert isinstance(make_retriever("bm25"), BM25Retriever)
    with pytest.raises(ValueError, match="unknown retriever 'splade'"):
        make_retriever("splade")
    with pytest.raises(ValueError, match="--model applies to dense and hybrid"):
        make_retriever("bm25", model="x")


def test_system_names_are_the_report_names_and_map_to_the_paper_models():
    from instir.papers.loader import load_reported, model_key

    assert system_name("bm25") == "bm25"
    assert system_name("dense") == system_name("dense", "") == "dense:sentence-transformers/all-MiniLM-L6-v2"
    assert system_name("hybrid", "GritLM/GritLM-7B") == "hybrid:GritLM/GritLM-7B+bm25"
    assert model_key(system_name("dense")) == "sentence-transformers/all-minilm-l6-v2"
    assert model_key(system_name("dense", "hkunlp/instructor-xl")) == "hkunlp/instructor-xl"
    ifir_keys = set(load_reported("ifir")["model_key"])
    for kind, model in (("bm25", None), ("dense", "GritLM/GritLM-7B"), ("hybrid", "GritLM/GritLM-7B"),
                        ("hybrid", "sentence-transformers/gtr-t5-xl")):
        assert model_key(system_name(kind, model)) in ifir_keys
    with pytest.raises(ValueError, match="unknown retriever 'splade'"):
        system_name("splade")
    with pytest.raises(ValueError, match="--model applies to dense and hybrid"):
        system_name("bm25", "x")


def test_bring_your_own_run_file_with_unknown_ids(toy_benchmark, tmp_path):
    path = tmp_path / "mine.run"
    path.write_text("1_1 Q0 10_1 1 9.1 mine\n1_1 Q0 404 2 3.2 mine\nnot-a-query Q0 10_2 1 1.0 mine\n")
    run = read_run(path)
    check = check_run_ids(run, toy_benchmark())
    assert check.unknown_qids == ["not-a-query"] and check.unknown_docids == ["404"]
    assert len(run) == 3 and run.meta["tag"] == "mine"


def _cli(argv):
    parser = argparse.ArgumentParser()
    commands.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.handler(args)


def test_cli_retrieve_writes_then_reuses(tmp_path, capsys):
    pytest.importorskip("instir.benchmarks.registry", reason="benchmark registry not available")
    argv = ["retrieve", "--benchmark", "instructir-sample", "--retriever", "bm25", "--k", "5", "--out", str(tmp_path)]
    assert _cli(argv) == 0
    first = capsys.readouterr().out
    assert "instructir-sample [instructed] (bundled SAMPLE, not the benchmark)" in first and "written in" in first
    path = first.strip().splitlines()[-1]
    assert run_is_complete(path) and read_run(path).meta["template"]["name"] == "instructir"
    assert _cli(argv) == 0
    assert "(reused)" in capsys.readouterr().out


def test_an_edited_instruction_searches_again_into_a_new_file(toy_benchmark, tmp_path):
    # the run's key holds a hash of every query's text and instruction: a query file whose instruction was edited is
    # another benchmark's queries, never the run made before
    from dataclasses import replace

    retrieve(toy_benchmark(), CountingBM25(), k=3, out_dir=tmp_path)
    edited = toy_benchmark()
    edited.queries["1_1"] = replace(edited.queries["1_1"], instruction="I am a chef cooking a curry")
    retriever = CountingBM25()
    again = retrieve(edited, retriever, k=3, out_dir=tmp_path)
    assert retriever.searches == 1 and "reused" not in again.meta and len(list(tmp_path.glob("*.trec"))) == 2


def test_a_run_of_candidate_lists_is_as_deep_as_the_longest_list(toy_benchmark):
    # a reranking task (FollowIR): every candidate kept in the system's order, k the longest list, not the shortest
    lists = {"1_1": ["10_1", "10_2", "900"], "1_2": ["10_2"], "2_1": ["20_1", "20_2"], "2_2": ["20_2", "901"]}
    run = retrieve(toy_benchmark(meta={"top_ranked": lists}), BM25Retriever(show_progress=False), k=1)
    assert run.meta["k"] == 3
    assert {q: sorted(g["docid"]) for q, g in run.df.groupby("qid")} == {q: sorted(d) for q, d in lists.items()}


def test_each_candidate_keeps_the_score_a_search_of_the_whole_corpus_gives_it(toy_benchmark):
    # one candidate per query, each its query's sibling target, which BM25 ranks below the query's own target: the
    # system ranks the whole corpus, not the top k = 1, so the candidate keeps its own score (not the floor)
    from instir.formatting import get_template

    sibling = {"1_1": ["10_2"], "1_2": ["10_1"], "2_1": ["20_2"], "2_2": ["20_1"]}
    whole = BM25Retriever(show_progress=False).search(toy_benchmark(), get_template("instructir"), 8).to_dict()
    run = retrieve(toy_benchmark(meta={"top_ranked": sibling}), BM25Retriever(show_progress=False), k=1)
    assert run.to_dict() == {q: {d: whole[q][d]} for q, (d,) in sibling.items()}
    assert all(score > 0 for docs in run.to_dict().values() for score in docs.values())


def test_a_retriever_of_ones_own_that_returns_self_hits_gets_them_dropped_and_counted(toy_benchmark):
    # the official InstructIR code drops a document whose id is the query id before scoring; retrieve does it for any
    # retriever, not only the kit's (which drop them while searching)
    class SelfHitting:
        name, family = "self-hitting", "dense"

        def params(self):
            return {}

        def search(self, benchmark, template, k):
            return Run.from_scores({q: {q: 9.0, "900": 1.0} for q in benchmark.queries})

    run = retrieve(toy_benchmark(), SelfHitting(), k=2)
    assert set(run.df["docid"]) == {"900"} and run.df["rank"].tolist() == [1, 1, 1, 1]
    assert run.meta["self_hits_dropped"] == 4


def test_a_runs_queries_are_compared_with_the_benchmarks_only_in_the_runs_own_setting(toy_benchmark):
    # another setting's queries differ by design (InstructIR's order-sensitivity text): no "queries" differ note there
    from instir.retrieval.search import keyed, other_data

    bench = toy_benchmark()
    own = {"key": {**keyed(bench), "queries_sha256": "0" * 64}}  # the run's key: the same setting, other queries
    assert other_data(own, bench) == ["queries"]
    other_setting = {"key": {**own["key"], "benchmark": {**own["key"]["benchmark"], "setting": "order-sensitivity"}}}
    assert other_data(other_setting, bench) == []
    assert other_data({"key": keyed(bench)}, bench) == []


def test_a_template_named_for_a_run_wins_over_the_one_its_system_card_gives(toy_benchmark):
    from types import SimpleNamespace

    from instir.retrieval.search import template_for

    carded = CountingBM25()
    carded.card = SimpleNamespace(template="instructir-query-first")
    assert template_for(toy_benchmark(), carded).name == "instructir-query-first"  # the card's, when none is named
    assert template_for(toy_benchmark(), carded, "mteb").name == "mteb"
    assert template_for(toy_benchmark(), CountingBM25()).name == "instructir"  # no card: the family's default


@pytest.mark.parametrize("option", [{"model": ""}, {"windowing": "ifir"}])
def test_bm25_refuses_an_encoders_option(option):
    from instir.errors import UsageError

    with pytest.raises(UsageError, match="applies to dense and hybrid retrievers, not bm25"):
        make_retriever("bm25", **option)


def test_a_run_files_name_parts_are_slugged_without_dashes_at_their_ends():
    from instir.retrieval.search import file_slug

    assert file_slug(" BM25 (IFIR) ") == "BM25-IFIR" and file_slug("dense:org/model") == "dense-org-model"


def test_queries_differing_only_in_their_subset_are_other_queries_to_a_runs_key():
    from instir.benchmarks.types import Benchmark, Corpus, Doc, Query
    from instir.retrieval.search import queries_sha256

    def bench(subset):
        return Benchmark("user", "t", "local", "instructed", Corpus.from_docs([Doc("d", "x")]),
                         {"q": Query("q", "x", subset=subset)}, {"q": {"d": 1}})

    assert queries_sha256(bench("fiqa")) != queries_sha256(bench("aila"))
