"""The bundled IFIR SAMPLE: exact counts and records, cumulative relevance, the upstream
layout's quirks (titles present, missing, null), SAMPLE labels, and that its instructions
matter to a retriever."""

import json

import bm25s
import ir_measures
import pytest
import Stemmer
from ir_measures import nDCG

from instir.benchmarks import SAMPLE_ROOT, Query, load_benchmark

SAMPLE = SAMPLE_ROOT / "ifir-sample"


@pytest.fixture(scope="module")
def fiqa():
    return load_benchmark("ifir-sample/fiqa")


@pytest.fixture(scope="module")
def nfcorpus():
    return load_benchmark("ifir-sample/nfcorpus")


def test_fiqa_sample_has_exact_counts(fiqa):
    d = fiqa.describe()
    assert (d["queries"], d["groups"], d["documents"]) == (18, 6, 38)
    assert d["levels"] == json.dumps({"1": 6, "2": 6, "3": 6}) and d["avg_relevant"] == 2.33
    assert d["layout"] == "songtingyu" and d["revision"].startswith("bundled-") and d["sample"] is True


def test_nfcorpus_sample_has_exact_counts(nfcorpus):
    d = nfcorpus.describe()
    assert (d["queries"], d["groups"], d["documents"]) == (5, 5, 26)
    assert d["levels"] == json.dumps({"0": 5}) and d["avg_relevant"] == 1.6


def test_fiqa_sample_first_and_last_records(fiqa):
    queries = list(fiqa.queries.values())
    assert queries[0] == Query(id="sample-fiqa-q1_1",
                               query="Should I pay off my student loans early or invest the extra money?",
                               instruction="Give me the general way to weigh paying off debt against investing.",
                               group="sample-fiqa-q1", level=1, subset="fiqa")
    assert queries[-1] == Query(id="sample-fiqa-q6_3", query="Is it worth using a credit card for everyday purchases?",
                                instruction="I struggle with overspending and want to rebuild my credit score after "
                                            "a missed payment.",
                                group="sample-fiqa-q6", level=3, subset="fiqa")
    docs = list(fiqa.corpus)
    assert docs[0].id == "sample-fiqa-d101" and docs[0].text.startswith("The usual way to decide")
    assert docs[-1].id == "sample-fiqa-d908" and docs[-1].title == "529 college savings plans"


def test_nfcorpus_sample_first_and_last_records(nfcorpus):
    queries = list(nfcorpus.queries.values())
    assert queries[0] == Query(id="sample-nf-q1_0", query="Does drinking coffee affect heart health?",
                               instruction="Focus on studies of people who already have high blood pressure.",
                               group="sample-nf-q1", level=0, subset="nfcorpus")
    assert queries[-1].id == "sample-nf-q5_0" and queries[-1].instruction == "Focus on effects in postmenopausal women."
    docs = list(nfcorpus.corpus)
    assert docs[0].title == "Habitual coffee intake and blood pressure control in hypertensive patients"
    assert docs[-1].id == "sample-nf-d906" and docs[-1].title == "Sleep duration and obesity in adults"


def test_fiqa_sample_relevance_is_cumulative_over_levels(fiqa):
    for group, ids in fiqa.groups().items():
        rel = {fiqa.queries[q].level: set(fiqa.qrels[q]) for q in ids}
        assert rel[3] < rel[2] < rel[1], group


def test_each_query_has_an_unjudged_candidate_and_the_corpus_has_distractors():
    for subset, distractors in (("fiqa", 8), ("nfcorpus", 6)):
        data = json.loads((SAMPLE / subset / "test_data.json").read_text())
        candidates = set()
        for element in data:
            judged = {i for item in element["instructions"] for i in item["rel"]}
            assert len(judged) < len(element["corpus"]), element["_id"]
            candidates |= {c["_id"] for c in element["corpus"]}
        corpus_ids = [json.loads(line)["_id"] for line in (SAMPLE / subset / f"{subset}-corpus.jsonl").open()]
        assert len(set(corpus_ids) - candidates) == distractors


def test_sample_corpus_titles_are_present_missing_and_null_and_passages_are_40_to_120_words():
    for subset in ("fiqa", "nfcorpus"):
        records = [json.loads(line) for line in (SAMPLE / subset / f"{subset}-corpus.jsonl").open()]
        assert any(r.get("title") for r in records)
        assert any("title" not in r for r in records)
        assert any("title" in r and r["title"] is None for r in records)
        assert all(40 <= len(r["text"].split()) <= 120 for r in records)


def test_sample_is_labelled_sample_everywhere(fiqa, nfcorpus):
    assert "SAMPLE" in (SAMPLE / "README.md").read_text().splitlines()[0]
    for bench in (fiqa, nfcorpus):
        assert bench.is_sample and "SAMPLE" in bench.label
        assert all(q.startswith("sample-") for q in bench.queries)
        assert all(d.startswith("sample-") for d in bench.corpus.ids())


def _bm25_ndcg20(bench, with_instruction: bool) -> float:
    docs = list(bench.corpus)
    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize([d.indexed_text for d in docs], stopwords="en", stemmer=stemmer,
                                   show_progress=False), show_progress=False)
    qids = list(bench.queries)
    texts = [bench.queries[q].query + (" " + bench.queries[q].instruction if with_instruction else "") for q in qids]
    ranked, scores = retriever.retrieve(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False),
                                        k=20, show_progress=False)
    run = {q: {docs[j].id: float(s) for j, s in zip(ranked[i], scores[i])} for i, q in enumerate(qids)}
    return ir_measures.calc_aggregate([nDCG @ 20], bench.qrels, run)[nDCG @ 20]


@pytest.mark.parametrize("name", ["ifir-sample/fiqa", "ifir-sample/nfcorpus"])
def test_instructions_matter_bm25_with_instruction_beats_the_bare_query(name):
    bench = load_benchmark(name)
    bare, instructed = _bm25_ndcg20(bench, False), _bm25_ndcg20(bench, True)
    assert instructed >= bare + 0.15, (bare, instructed)


def test_each_querys_candidate_list_is_kept_as_in_test_data(nfcorpus):
    elements = json.loads((SAMPLE_ROOT / "ifir-sample" / "nfcorpus" / "test_data.json").read_text())
    assert nfcorpus.meta["candidates"] == {e["_id"]: [c["_id"] for c in e["corpus"]] for e in elements}
