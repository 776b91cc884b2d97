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
