"""The streamed Corpus: one pass for the content hash, which also yields the ids."""

from instir.benchmarks.types import Corpus, Doc


def counting_corpus(docs):
    passes = []

    def stream():
        passes.append(1)
        return iter(docs)

    return Corpus(stream), passes


def test_content_hash_reads_the_corpus_once_and_fills_the_ids():
    corpus, passes = counting_corpus([Doc("a", "alpha"), Doc("b", "beta", title="B")])
    first = corpus.content_hash()
    assert corpus.content_hash() == first and corpus.ids() == ["a", "b"]
    assert len(passes) == 1


def test_content_hash_changes_with_any_text_id_or_order():
    base = Corpus.from_docs([Doc("a", "alpha"), Doc("b", "beta")]).content_hash()
    for docs in ([Doc("a", "alpha"), Doc("b", "beta!")], [Doc("a", "alpha"), Doc("c", "beta")],
                 [Doc("b", "beta"), Doc("a", "alpha")], [Doc("a", "alpha"), Doc("b", "beta", title="t")]):
        assert Corpus.from_docs(docs).content_hash() != base


def _benchmark(qrels, meta=None):
    from instir.benchmarks.types import Benchmark, Query

    docs = [Doc(d, f"text of {d}") for d in ("a", "b", "c", "d")]
    return Benchmark(name="mine", layout="local", revision="local", setting="instructed",
                     corpus=Corpus.from_docs(docs), queries={q: Query(q, "query", group=q) for q in qrels},
                     qrels=qrels, meta=meta or {})


def test_average_relevant_counts_only_positive_grades():
    # q1 has one relevant document of two judged, q2 one: (1 + 1) / 2
    bench = _benchmark({"q1": {"a": 1, "b": 0}, "q2": {"c": 2}})
    assert bench.describe()["avg_relevant"] == 1.0


def test_rankable_is_the_corpus_less_a_self_hit_or_the_longest_candidate_list():
    assert _benchmark({"q1": {"a": 1}}).rankable() == 3  # four documents, one of which may be the query itself
    assert _benchmark({"q1": {"a": 1}}, {"top_ranked": {"q1": ["a", "b"], "q2": ["a", "b", "c"]}}).rankable() == 3
    assert _benchmark({"q1": {"a": 1}}, {"top_ranked": {"q1": ["a"], "q2": ["a", "b"]}}).rankable() == 2
