"""BM25 (bm25s): Lucene BM25 scores by hand, per-benchmark defaults, tokenisation options,
and rankings on the toy benchmark and the bundled InstructIR sample."""

import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest
from says import raises_saying

from instir.benchmarks.types import Benchmark, Corpus, Doc, Query
from instir.errors import UsageError
from instir.formatting import Template, get_template
from instir.retrieval import retrieve
from instir.retrieval.dense import document_format
from instir.retrieval.lexical import LUCENE_ENGLISH_STOPWORDS, BM25Retriever, bm25_defaults
from instir.retrieval.lucene import LuceneBM25Retriever

PLAIN = dict(k1=1.2, b=0.75, stemmer="none", stopwords="none", show_progress=False)
QUERY_ONLY = get_template("query-only")


def small(docs, queries) -> Benchmark:
    return Benchmark("lexical-test", "hand-made", "local", "instructed", Corpus.from_docs(docs),
                     {q.id: q for q in queries}, {q.id: {} for q in queries})


def test_scores_match_lucene_bm25_computed_by_hand():
    docs = [Doc("d1", "apple banana apple"), Doc("d2", "banana cherry"), Doc("d3", "cherry cherry cherry date"),
            Doc("d4", "zebra")]
    run = BM25Retriever(**PLAIN).search(small(docs, [Query("q", "apple cherry")]), QUERY_ONLY, k=10)
    n, avgdl, k1, b = 4, (3 + 2 + 4 + 1) / 4, 1.2, 0.75

    def idf(df):
        return math.log(1 + (n - df + 0.5) / (df + 0.5))

    def tf(freq, length):
        return freq / (freq + k1 * (1 - b + b * length / avgdl))

    expected = {"d1": idf(1) * tf(2, 3), "d3": idf(2) * tf(3, 4), "d2": idf(2) * tf(1, 2)}
    assert run.df["docid"].tolist() == ["d1", "d3", "d2"]  # d4 matches nothing: not returned
    assert run.df["score"].tolist() == pytest.approx([expected[d] for d in ("d1", "d3", "d2")], rel=1e-6)


def test_query_without_known_terms_gets_no_results():
    docs = [Doc("d1", "apple pie"), Doc("d2", "cherry pie")]
    run = BM25Retriever(**PLAIN).search(small(docs, [Query("q1", "zebra"), Query("q2", "apple")]), QUERY_ONLY, 10)
    assert run.df["qid"].tolist() == ["q2"]


def test_porter_stemming_matches_inflected_forms():
    docs = [Doc("d1", "farmers harvested the crocus"), Doc("d2", "stock markets")]
    bench = small(docs, [Query("q", "harvesting")])
    stemmed = BM25Retriever(**{**PLAIN, "stemmer": "porter"}).search(bench, QUERY_ONLY, 10)
    assert stemmed.df["docid"].tolist() == ["d1"]
    assert len(BM25Retriever(**PLAIN).search(bench, QUERY_ONLY, 10)) == 0


def test_lucene_stopwords_are_dropped_from_queries_and_documents():
    assert len(LUCENE_ENGLISH_STOPWORDS) == 33 and "the" in LUCENE_ENGLISH_STOPWORDS
    bench = small([Doc("d1", "the tower"), Doc("d2", "a bridge")], [Query("q", "the")])
    assert len(BM25Retriever(**{**PLAIN, "stopwords": "lucene"}).search(bench, QUERY_ONLY, 10)) == 0
    assert BM25Retriever(**PLAIN).search(bench, QUERY_ONLY, 10).df["docid"].tolist() == ["d1"]
    custom = BM25Retriever(**{**PLAIN, "stopwords": ["tower"]})
    assert custom.params()["stopwords"] == ["tower"]


def test_defaults_follow_each_benchmarks_engine():
    assert {k: bm25_defaults("instructir")[k] for k in ("k1", "b", "stemmer", "stopwords")} == \
        {"k1": 0.9, "b": 0.4, "stemmer": "porter", "stopwords": "lucene"}
    assert {k: bm25_defaults("ifir/fiqa")[k] for k in ("k1", "b", "stemmer", "stopwords")} == \
        {"k1": 1.2, "b": 0.75, "stemmer": "none", "stopwords": "none"}
    with raises_saying(ValueError, "BM25", "'msmarco'"):
        bm25_defaults("msmarco")


def test_unset_parameters_resolve_per_benchmark_and_are_recorded(toy_benchmark):
    retriever = BM25Retriever(b=0.5, show_progress=False)
    assert retriever.params() == {"k1": None, "b": 0.5, "method": None, "stemmer": None, "stopwords": None}
    run = retriever.search(toy_benchmark("ifir-toy/fiqa"), get_template("ifir"), k=3)
    assert run.meta["retriever"]["params"] == {"k1": 1.2, "b": 0.5, "method": "lucene", "stemmer": "none",
                                               "stopwords": "none"}
    with pytest.raises(ValueError, match="pass k1, b, stemmer and stopwords"):
        retriever.search(toy_benchmark("toy"), QUERY_ONLY, k=3)
    configured = BM25Retriever(**PLAIN).search(toy_benchmark("toy"), QUERY_ONLY, k=3)
    assert configured.meta["retriever"]["params"]["k1"] == 1.2


def test_the_bm25_method_a_familys_spec_names_is_the_one_searched_unless_one_is_given(tmp_path):
    # followir.toml names rank_bm25's Okapi IDF, bm25s's "robertson"; plain bm25 searched with "lucene" whatever it said
    from instir.benchmarks import load_benchmark
    news = load_benchmark("followir-sample/news21")
    assert BM25Retriever().resolved(news)["method"] == "robertson"
    assert BM25Retriever(**PLAIN).resolved(news)["method"] == "robertson"  # the other four given, the method not
    assert BM25Retriever(method="lucene").resolved(news)["method"] == "lucene"
    assert BM25Retriever(**PLAIN).resolved(small([Doc("d", "x")], [Query("q", "x")]))["method"] == "lucene"

    def run(**method):
        return BM25Retriever(k1=1.5, b=0.75, stemmer="porter", stopwords="en", show_progress=False,
                             cache_dir=tmp_path, **method).search(news, QUERY_ONLY, 20).df
    left = run()
    pd.testing.assert_frame_equal(left, run(method="robertson"))
    assert not left.equals(run(method="lucene"))  # the two IDFs rank this sample apart


def test_a_run_left_to_the_benchmarks_bm25_defaults_is_made_anew_when_a_default_changes(tmp_path, monkeypatch):
    # before, the run's key held the unset settings as None: after the family spec's [bm25] changed, retrieving into
    # the same folder reused the run made with the old defaults, "(reused)", one key, the same file
    from instir.benchmarks import load_benchmark
    from instir.retrieval import lexical
    from instir.retrieval.fusion import HybridRetriever
    from instir.retrieval.search import settings
    from instir.systems.cards import get_card
    from instir.systems.registry import SystemRetriever

    benchmark = load_benchmark("instructir-sample")
    first = retrieve(benchmark, BM25Retriever(show_progress=False), k=10, out_dir=tmp_path)
    monkeypatch.setattr(lexical, "bm25_defaults", lambda bench: {**bm25_defaults(bench), "k1": 2.5})  # spec edited
    again = retrieve(benchmark, BM25Retriever(show_progress=False), k=10, out_dir=tmp_path)
    assert not again.meta.get("reused") and again.meta["path"] != first.meta["path"]
    assert again.meta["key"]["retriever"]["params"]["k1"] == 2.5 == again.meta["search"]["retriever"]["params"]["k1"]
    fused = HybridRetriever(BM25Retriever(show_progress=False), BM25Retriever(show_progress=False)).resolved(benchmark)
    assert fused["lexical"]["k1"] == 2.5 and fused["weights"]
    carded = SystemRetriever(get_card("BM25 (IFIR)"), BM25Retriever(show_progress=False))  # a card over it
    assert settings(carded, benchmark)["retriever"]["k1"] == 2.5 and settings(carded, benchmark)["system"]


def test_instructions_pick_the_right_sibling_target(toy_benchmark):
    bench = toy_benchmark()
    instructed = BM25Retriever(show_progress=False).search(bench, get_template("instructir"), k=5)
    top = instructed.df[instructed.df["rank"] == 1].set_index("qid")["docid"].to_dict()
    assert top == {q: next(iter(rel)) for q, rel in bench.qrels.items()}
    bare = BM25Retriever(show_progress=False).search(bench, QUERY_ONLY, k=5)
    bare_top = bare.df[bare.df["rank"] == 1].set_index("qid")["docid"].to_dict()
    assert sum(bare_top[q] == target for q, target in top.items()) <= 2  # one target per pair of siblings


def test_pair_templates_are_refused(toy_benchmark):
    with pytest.raises(ValueError, match="BM25 cannot take"):
        BM25Retriever(show_progress=False).search(toy_benchmark(), get_template("instructir-instructor"), k=3)


def test_a_benchmark_mixing_subsets_gives_its_documents_no_domain_word_in_bm25_as_in_every_retriever():
    """IFIR formats each subset's corpus apart: BM25 (like the dense, decoder, ColBERT and OpenAI retrievers and
    the sweep, through Benchmark.shared_subset) refuses a domain-word document format on queries of two subsets,
    where it once gave every document the first query's domain word."""
    template = Template("domains", "raw", "", "{query}", doc="{domain}: {text}",
                        domains={"fiqa": "financial", "aila": "legal"})
    docs = [Doc("d1", "stock market"), Doc("d2", "court ruling")]
    mixed = small(docs, [Query("q1", "stock", subset="fiqa"), Query("q2", "court", subset="aila")])
    with raises_saying(UsageError, "no domain word for subset ''", "several subsets", "each subset apart"):
        BM25Retriever(**PLAIN).search(mixed, template, k=2)
    assert BM25Retriever(**PLAIN).index_description(mixed, template)["doc"]["domain"] == \
        document_format(template, mixed.shared_subset)["domain"] == ""
    one = small(docs, [Query("q1", "stock", subset="fiqa"), Query("q3", "market", subset="fiqa")])
    assert BM25Retriever(**PLAIN).index_description(one, template)["doc"]["domain"] == "financial"


@pytest.mark.parametrize("engine", ["anserini", "elasticsearch", "rank_bm25"])
def test_the_papers_bm25_engines_refuse_pair_templates_before_any_work(engine, toy_benchmark, tmp_path):
    """Like the kit's BM25, the papers' own engines take one text per input: a pair template is refused in
    one line (instir.formatting.require_text) instead of failing inside the engine's formatting."""
    from instir.retrieval.lucene import AnseriniBM25Retriever, ElasticsearchBM25Retriever
    from instir.retrieval.okapi import CandidateOkapiRetriever

    retriever = {"anserini": lambda: AnseriniBM25Retriever(cache_dir=tmp_path, show_progress=False),
                 "elasticsearch": lambda: ElasticsearchBM25Retriever(cache_dir=tmp_path, show_progress=False),
                 "rank_bm25": lambda: CandidateOkapiRetriever(show_progress=False)}[engine]()
    bench = toy_benchmark(meta={"top_ranked": {"1_1": ["10_1", "900"]}})
    with raises_saying(UsageError, "'instructir-instructor'", "[instruction, text] pairs", engine):
        retriever.search(bench, get_template("instructir-instructor"), k=3)


def test_unknown_stemmer_is_refused():
    with pytest.raises(ValueError, match="unknown stemmer 'lancaster'"):
        BM25Retriever(stemmer="lancaster")


def test_self_hits_are_dropped_and_k_still_filled():
    docs = [Doc("q1", "saffron saffron saffron"), Doc("d1", "saffron paella"), Doc("d2", "saffron crocus"),
            Doc("d3", "saffron price")]
    run = BM25Retriever(**PLAIN).search(small(docs, [Query("q1", "saffron")]), QUERY_ONLY, k=3)
    assert "q1" not in run.df["docid"].tolist() and len(run) == 3
    assert run.meta["self_hits_dropped"] == 1


@pytest.mark.parametrize("with_self_hit", [False, True])
def test_a_bm25_run_cut_at_k_holds_the_top_k_of_a_deeper_run_as_trec_eval_reads_it(with_self_hit):
    import ir_measures

    texts = ["saffron paella rice", "saffron crocus", "saffron price", "paella pan", "rice crocus saffron"]
    docs = [Doc(f"d{copy}{n}", text) for n, text in enumerate(texts) for copy in range(6)]  # each text 6 times
    queries = [Query("q1", "saffron rice"), Query("q2", "crocus paella")]
    if with_self_hit:
        docs.append(Doc("q1", "saffron rice saffron rice"))
    bench = small(docs, queries)
    qrels = {"q1": {d.id: int(d.id[1] in "024") for d in docs}, "q2": {d.id: int(d.id[1] in "135") for d in docs}}
    retriever = BM25Retriever(**PLAIN)
    deep = retriever.search(bench, QUERY_ONLY, k=100)
    for k in (1, 4, 6, 9, 13):
        cut = retriever.search(bench, QUERY_ONLY, k=k)
        assert cut.df[["qid", "docid"]].values.tolist() == deep.top(k).df[["qid", "docid"]].values.tolist()
        measure = ir_measures.nDCG @ k
        assert ir_measures.calc_aggregate([measure], qrels, cut.to_dict())[measure] == pytest.approx(
            ir_measures.calc_aggregate([measure], qrels, deep.to_dict())[measure])


def test_k_larger_than_the_corpus_returns_every_match(toy_benchmark):
    run = BM25Retriever(show_progress=False).search(toy_benchmark(), get_template("instructir"), k=1000)
    assert run.df.groupby("qid").size().max() <= 8


def test_bundled_instructir_sample_ranks_the_written_target_first():
    benchmarks = pytest.importorskip("instir.benchmarks", reason="benchmark registry not available")
    bench = benchmarks.load_benchmark("instructir-sample")
    run = retrieve(bench, BM25Retriever(show_progress=False), k=10)
    top = run.df[run.df["rank"] == 1]
    hits = sum(bench.qrels[q].get(d, 0) > 0 for q, d in zip(top["qid"], top["docid"]))
    assert hits >= 0.8 * len(bench.queries)
    bare = retrieve(bench, BM25Retriever(show_progress=False), template="query-only", k=10)
    bare_top = bare.df[bare.df["rank"] == 1]
    assert sum(bench.qrels[q].get(d, 0) > 0 for q, d in zip(bare_top["qid"], bare_top["docid"])) < hits


def test_every_stop_word_language_a_spec_may_name_is_one_bm25s_knows():
    import bm25s

    from instir.benchmarks.catalog import BM25_STOPWORDS

    for name in BM25_STOPWORDS[2:]:  # past "none" and "lucene", the kit's own
        assert bm25s.tokenize(["the cat"], stopwords=name, show_progress=False)
    # found by this stop's regression review: "english" (bm25s' name beside the code "en") was refused in a spec
    assert {"english", "english_plus", "german"} <= set(BM25_STOPWORDS)


def test_a_stop_word_list_of_ones_own_drops_its_words_and_is_copied():
    bench = small([Doc("d1", "apple pie"), Doc("d2", "cherry pie")], [Query("q1", "apple"), Query("q2", "pie")])
    words = ["apple"]
    retriever = BM25Retriever(**{**PLAIN, "stopwords": words})
    words.append("pie")  # the caller's list changing later changes nothing
    run = retriever.search(bench, QUERY_ONLY, 10)
    assert run.df["qid"].tolist() == ["q2", "q2"] and retriever.params()["stopwords"] == ["apple"]


def test_a_document_whose_id_is_the_query_id_counts_as_a_dropped_self_hit_only_where_it_matched():
    # "q1" is a document that q1 does not match: no self-hit was dropped, though the id is in the corpus
    bench = small([Doc("q1", "apple"), Doc("d2", "banana")], [Query("q1", "banana"), Query("q2", "apple")])
    run = BM25Retriever(**PLAIN).search(bench, QUERY_ONLY, 5)
    assert run.df[["qid", "docid"]].values.tolist() == [["q1", "d2"], ["q2", "q1"]]
    assert run.meta["self_hits_dropped"] == 0
    hit = small([Doc("q1", "banana"), Doc("d2", "banana split")], [Query("q1", "banana")])
    run = BM25Retriever(**PLAIN).search(hit, QUERY_ONLY, 5)
    assert run.df["docid"].tolist() == ["d2"] and run.meta["self_hits_dropped"] == 1


def test_settings_left_unset_take_the_benchmarks_defaults_whichever_are_given(toy_benchmark):
    retriever = BM25Retriever(k1=1.0, b=0.5, stemmer="none", show_progress=False)  # stop words left to the benchmark
    run = retriever.search(toy_benchmark("ifir-toy/fiqa"), get_template("ifir"), k=3)
    assert run.meta["retriever"]["params"] == {"k1": 1.0, "b": 0.5, "method": "lucene", "stemmer": "none",
                                               "stopwords": "none"}


def test_changing_the_returned_defaults_leaves_the_benchmarks_defaults_alone():
    defaults = bm25_defaults("instructir")
    defaults["k1"] = 99.0
    assert bm25_defaults("instructir")["k1"] == 0.9


def test_a_stop_word_language_name_drops_that_languages_words():
    bench = small([Doc("d1", "the tower"), Doc("d2", "a bridge")], [Query("q", "the")])
    assert len(BM25Retriever(**{**PLAIN, "stopwords": "en"}).search(bench, QUERY_ONLY, 10)) == 0


def test_a_stop_word_language_name_drops_that_languages_words_from_the_documents_lengths_too():
    docs = [Doc("d1", "the tower"), Doc("d2", "tower bridge")]
    run = BM25Retriever(**{**PLAIN, "stopwords": "en"}).search(small(docs, [Query("q", "tower")]), QUERY_ONLY, 10)
    n, avgdl, k1, b = 2, (1 + 2) / 2, 1.2, 0.75  # "the" counts in no length: d1 holds 1 token, d2 2
    idf = math.log(1 + (n - 2 + 0.5) / (2 + 0.5))
    expected = [idf * 1 / (1 + k1 * (1 - b + b * length / avgdl)) for length in (1, 2)]
    assert run.df["docid"].tolist() == ["d1", "d2"]
    assert run.df["score"].tolist() == pytest.approx(expected, rel=1e-6)


class WordCountEngine(LuceneBM25Retriever):
    """A stand-in for a Java engine (no JVM): its index is a copy of the collection, a document scores the number of
    distinct query words it holds; it keeps the topics it was given."""

    name = engine = "word-count"

    def analysis(self) -> dict:
        return {"analyzer": "words"}

    def _build(self, collection, folder) -> None:
        shutil.copy(collection, folder / "docs.jsonl")
        (folder / "write.lock").touch()  # as Lucene leaves it

    def _search(self, index, topics, out, hits) -> pd.DataFrame:
        docs = [json.loads(line) for line in (index / "docs.jsonl").read_text().splitlines()]
        self.topics = topics.read_text()
        rows = []
        for line in self.topics.splitlines():
            qid, text = line.split("\t")
            scored = sorted(((len(set(text.split()) & set(d["contents"].split())), d["id"]) for d in docs),
                            reverse=True)
            rows += [(qid, doc, float(score)) for score, doc in scored[:hits] if score]
        return pd.DataFrame(rows, columns=["qid", "docid", "score"])


@pytest.fixture
def engine_jar(tmp_path, monkeypatch):
    jar = tmp_path / "anserini-0-fatjar.jar"
    jar.write_bytes(b"jar")
    monkeypatch.setenv("INSTIR_ANSERINI_JAR", str(jar))
    return jar


def test_a_lucene_engines_run_drops_the_query_itself_and_still_holds_k(engine_jar, tmp_path):
    docs = [Doc("q1", "saffron rice paella"), Doc("d1", "saffron rice"), Doc("d2", "saffron"), Doc("d3", "rice"),
            Doc("d4", "pan")]
    bench = small(docs, [Query("q1", "saffron rice paella"), Query("q2", "saffron rice")])
    run = WordCountEngine(1.2, 0.75, cache_dir=tmp_path / "cache", show_progress=False).search(bench, QUERY_ONLY, 2)
    assert run.df[["qid", "docid"]].values.tolist() == [["q1", "d1"], ["q1", "d3"], ["q2", "q1"], ["q2", "d1"]]


def test_a_query_holding_tabs_and_line_breaks_reaches_the_engine_as_one_topic_line(engine_jar, tmp_path):
    bench = small([Doc("d1", "saffron rice")], [Query("q1", "saffron\trice\n of\r\nspain ")])
    engine = WordCountEngine(1.2, 0.75, cache_dir=tmp_path / "cache", show_progress=False)
    assert engine.search(bench, QUERY_ONLY, 5).df["docid"].tolist() == ["d1"]
    assert engine.topics == "q1\tsaffron rice of spain\n"


def test_a_lucene_index_is_kept_after_a_search_and_rebuilt_for_another_document_format_or_jar(engine_jar, tmp_path):
    bench = small([Doc("d1", "saffron rice", title="paella")], [Query("q1", "saffron")])
    engine = WordCountEngine(1.2, 0.75, cache_dir=tmp_path / "cache", show_progress=False)
    first = engine.search(bench, QUERY_ONLY, 5)
    entry = Path(first.meta["index"]["cache_entry"])
    assert (entry / "docs.jsonl").is_file() and not (entry / "write.lock").exists()
    assert engine.search(bench, QUERY_ONLY, 5).meta["index"]["origin"] == "loaded"
    entries = {str(entry)}
    titled = Template("titled", "raw", "", "{query}", doc="{title} {text}")
    again = engine.search(bench, titled, 5)
    assert again.meta["index"]["origin"] == "built" and again.meta["index"]["cache_entry"] not in entries
    entries.add(again.meta["index"]["cache_entry"])
    engine_jar.write_bytes(b"another release under the same name")
    newer = engine.search(bench, QUERY_ONLY, 5)
    assert newer.meta["index"]["origin"] == "built" and newer.meta["index"]["cache_entry"] not in entries


def test_a_lucene_engine_indexes_the_documents_with_their_subsets_domain_word(engine_jar, tmp_path):
    template = Template("domains", "raw", "", "{query}", doc="{domain} {text}", domains={"fiqa": "financial"})
    bench = small([Doc("d1", "stock market")], [Query("q1", "financial", subset="fiqa")])
    run = WordCountEngine(1.2, 0.75, cache_dir=tmp_path / "cache", show_progress=False).search(bench, template, 5)
    assert run.df["docid"].tolist() == ["d1"]
    entry = Path(run.meta["index"]["cache_entry"])
    assert json.loads((entry / "docs.jsonl").read_text())["contents"] == "financial stock market"


def test_anserinis_run_file_is_read_in_its_order_with_document_ids_holding_spaces(tmp_path):
    from instir.retrieval.lucene import read_anserini_run

    out = tmp_path / "run.trec"
    out.write_text("q1 Q0 doc one 1 2.5 Anserini\nq1 Q0 d2 2 1.25 Anserini\n\n", encoding="utf-8")
    assert read_anserini_run(out).values.tolist() == [["q1", "doc one", 1, 2.5], ["q1", "d2", 2, 1.25]]


def test_an_engine_that_fails_is_an_error_with_the_last_lines_of_its_log(engine_jar, tmp_path, monkeypatch):
    from instir.retrieval.lucene import AnseriniBM25Retriever

    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\nfor n in 1 2 3 4 5 6 7; do echo \"log line $n\" >&2; done\nexit 1\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "jdk"))
    bench = small([Doc("d1", "saffron")], [Query("q1", "saffron")])
    with pytest.raises(RuntimeError, match=r"^Anserini index\.IndexCollection failed \(exit 1\): log line 3 "
                                           r"\| log line 4 \| log line 5 \| log line 6 \| log line 7$"):
        AnseriniBM25Retriever(cache_dir=tmp_path / "cache", show_progress=False).search(bench, QUERY_ONLY, 5)


@pytest.mark.parametrize(("written", "expected"),
                         [("", []), ('q1\tNA\t1.5\nq1\td"2\t0.5\n', [["q1", "NA"], ["q1", 'd"2']])])
def test_elasticsearchs_run_file_is_read_whatever_the_document_ids_and_when_nothing_matched(
        engine_jar, tmp_path, monkeypatch, written, expected):
    from instir.retrieval.lucene import ElasticsearchBM25Retriever

    engine = ElasticsearchBM25Retriever(cache_dir=tmp_path / "cache", show_progress=False)

    def jvm(command, *arguments):  # the Lucene process: an index of one file, a run file as it writes them
        if command == "index":
            Path(arguments[1], "segment").write_text("index")
        else:
            Path(arguments[2]).write_text(written)

    monkeypatch.setattr(engine, "_jvm", jvm)
    bench = small([Doc("NA", "saffron"), Doc('d"2', "rice")], [Query("q1", "saffron rice")])
    assert engine.search(bench, QUERY_ONLY, 5).df[["qid", "docid"]].values.tolist() == expected


def test_the_lucene_engines_default_to_their_papers_settings_and_refuse_an_unknown_analyzer(tmp_path):
    from instir.retrieval.lucene import AnseriniBM25Retriever, ElasticsearchBM25Retriever

    assert AnseriniBM25Retriever(cache_dir=tmp_path).params() == {"engine": "anserini", "k1": 0.9, "b": 0.4,
                                                                  "analyzer": "english"}  # Pyserini's defaults
    assert ElasticsearchBM25Retriever(cache_dir=tmp_path).params() == {"engine": "elasticsearch", "k1": 1.2,
                                                                       "b": 0.75, "analyzer": "standard"}
    with pytest.raises(ValueError, match="unknown Anserini analyzer 'porter'; use one of english, plain"):
        AnseriniBM25Retriever(analyzer="porter")


def test_an_anserini_jar_named_in_the_environment_must_be_a_file(tmp_path, monkeypatch):
    from instir.retrieval.lucene import EngineMissing, anserini_jar

    monkeypatch.setenv("INSTIR_ANSERINI_JAR", str(tmp_path))
    with pytest.raises(EngineMissing, match=f"INSTIR_ANSERINI_JAR={tmp_path} is not a file"):
        anserini_jar()


def test_a_lucene_index_is_rebuilt_when_the_corpus_or_the_subsets_domain_word_changes(engine_jar, tmp_path):
    engine = WordCountEngine(1.2, 0.75, cache_dir=tmp_path / "cache", show_progress=False)
    assert len(engine.search(small([Doc("d1", "saffron rice")], [Query("q1", "paella")]), QUERY_ONLY, 5)) == 0
    changed = engine.search(small([Doc("d1", "paella rice")], [Query("q1", "paella")]), QUERY_ONLY, 5)
    assert changed.df["docid"].tolist() == ["d1"] and changed.meta["index"]["origin"] == "built"
    template = Template("domains", "raw", "", "{query}", doc="{domain} {text}",
                        domains={"fiqa": "financial", "aila": "legal"})
    docs = [Doc("d1", "stock market")]
    fiqa = engine.search(small(docs, [Query("q1", "financial", subset="fiqa")]), template, 5)
    aila = engine.search(small(docs, [Query("q1", "legal", subset="aila")]), template, 5)
    assert fiqa.df["docid"].tolist() == aila.df["docid"].tolist() == ["d1"]


def test_a_lucene_engine_whose_cache_cannot_be_written_still_searches(engine_jar, tmp_path):
    blocked = tmp_path / "cache"
    blocked.write_text("a file where the cache folder would be")
    engine = WordCountEngine(1.2, 0.75, cache_dir=blocked, show_progress=False)
    with pytest.warns(UserWarning, match="cannot be written"):
        run = engine.search(small([Doc("d1", "saffron rice")], [Query("q1", "saffron")]), QUERY_ONLY, 5)
    assert run.df["docid"].tolist() == ["d1"] and run.meta["index"]["cache_entry"] is None


def test_a_lucene_run_records_the_engine_with_its_jar_and_the_settings(engine_jar, tmp_path):
    engine = WordCountEngine(1.2, 0.75, cache_dir=tmp_path / "cache", show_progress=False)
    run = engine.search(small([Doc("d1", "saffron rice")], [Query("q1", "saffron")]), QUERY_ONLY, 5)
    assert run.meta["retriever"] == {"name": "word-count", "family": "bm25",
                                     "engine": "word-count (anserini-0-fatjar.jar)",
                                     "params": {"engine": "word-count", "k1": 1.2, "b": 0.75, "analyzer": "words"}}


def _authors_rank_bm25_scores(bench, template, **settings):
    """orionw/FollowIR models/bm25/evaluate_bm25.py by hand: clean() (lower-case, split on single spaces, NLTK's
    stop words dropped, Porter stems, punctuation removed), BM25Okapi over each query's candidates."""
    import string

    from bm25s.stopwords import STOPWORDS_EN_PLUS
    from nltk.stem import PorterStemmer
    from rank_bm25 import BM25Okapi

    stemmer, stop_words = PorterStemmer(), set(STOPWORDS_EN_PLUS)

    def clean(s):
        s = " ".join(stemmer.stem(w) for w in s.lower().split(" ") if w not in stop_words)
        return s.translate(str.maketrans("", "", string.punctuation)).strip()

    rows = []
    for query in bench.queries.values():
        passages = [d for d in bench.meta["top_ranked"].get(query.id, ()) if d in bench.corpus.get([d])]
        if not passages:
            continue
        tokenized = [[t for t in clean(template.format_doc(bench.corpus.get([d])[d])).split(" ") if t]
                     for d in passages]
        scores = BM25Okapi(tokenized, **settings).get_scores([t for t in clean(template.format_query(query)).split(" ")
                                                               if t])
        rows += [(query.id, d, pytest.approx(float(s), rel=1e-6, abs=1e-9)) for d, s in zip(passages, scores)]
    return sorted(rows)


def test_rank_bm25_scores_each_querys_candidates_as_the_authors_sequence_does():
    """Texts with a newline inside a word, a word of punctuation alone, capitals and stop words, a candidate the
    corpus lacks and a query with no candidates: every score is the one the authors' clean() and BM25Okapi give."""
    pytest.importorskip("rank_bm25")
    from instir.retrieval.okapi import CandidateOkapiRetriever

    docs = [Doc("d1", "Saffron rice - the\npaella of Valencia"), Doc("d2", "saffron crocus, the flower"),
            Doc("d3", "rice  pudding with saffron"), Doc("d4", "crocus bulbs"), Doc("d5", "a saffron\ncrocus")]
    queries = [Query("q1", "Saffron rice", "the\npaella - recipes"), Query("q2", "crocus flower"),
               Query("q3", "saffron")]
    bench = small(docs, queries)
    bench.meta["top_ranked"] = {"q1": ["d1", "d2", "d3", "d5", "gone"], "q2": ["d4", "d2", "d5", "d1"]}
    template = get_template("mteb")
    for settings in ({}, {"k1": 0.9, "b": 0.4, "epsilon": 0.5}):
        run = CandidateOkapiRetriever(**settings, show_progress=False).search(bench, template, k=1)
        got = sorted(run.df[["qid", "docid", "score"]].itertuples(index=False, name=None))
        assert got == _authors_rank_bm25_scores(bench, template, **settings)
        assert {key: run.meta["retriever"]["params"][key] for key in ("k1", "b", "epsilon")} == \
            {"k1": 1.5, "b": 0.75, "epsilon": 0.25, **settings}


def test_rank_bm25_refuses_a_benchmark_whose_candidate_lists_are_empty():
    pytest.importorskip("rank_bm25")
    from instir.retrieval.okapi import CandidateOkapiRetriever

    bench = small([Doc("d1", "saffron")], [Query("q1", "saffron")])
    bench.meta["top_ranked"] = {}
    with raises_saying(UsageError, "lexical-test", "has none", "use bm25"):
        CandidateOkapiRetriever(show_progress=False).search(bench, get_template("mteb"), k=1)
