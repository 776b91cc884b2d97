"""BM25 tokenisation in worker processes gives the ids and vocabulary of one pass (whatever the
chunk size and the number of workers), and a BM25 index built that way ranks as one built in
one process."""

import pytest

from instir.benchmarks import load_benchmark
from instir.formatting import get_template
from instir.retrieval.bm25_tokens import tokenize, workers
from instir.retrieval.lexical import BM25Retriever

TEXTS = ["The cats were running; the dog ran.", "", "the a an of", "Running runners run RUN runs 3.5 x y",
         "Über café naïve coöperate — ünïcode wörds", "dogs and cats, cats and dogs", "zz zz zz", "new words only here"]

needs_fork = pytest.mark.skipif(workers(2) < 2, reason="needs a system that forks and two CPUs")


@needs_fork
@pytest.mark.parametrize(("stopwords", "stemmer"), [(["the", "a", "an", "of", "and"], "porter"), ([], "none")])
@pytest.mark.parametrize("chunk", [1, 3, 7])
def test_chunks_on_workers_give_the_ids_and_vocabulary_of_one_pass(stopwords, stemmer, chunk):
    texts = TEXTS * 5
    one_ids, one_vocab = tokenize(texts, stopwords, stemmer)
    ids, vocab = tokenize(iter(texts), stopwords, stemmer, n_jobs=2, chunk=chunk)
    assert list(vocab.items()) == list(one_vocab.items())  # same ids, numbered in the same order
    assert [list(a) for a in ids] == [list(a) for a in one_ids]


@needs_fork
def test_an_index_tokenised_on_workers_ranks_as_one_built_in_one_process(monkeypatch):
    bench = load_benchmark("instructir-sample")
    template = get_template("instructir")
    alone = BM25Retriever(cache=False, n_jobs=1, show_progress=False).search(bench, template, k=20)
    monkeypatch.setattr("instir.retrieval.lexical.PARALLEL_MIN_TEXTS", 1)
    shared = BM25Retriever(cache=False, n_jobs=2, show_progress=False).search(bench, template, k=20)
    assert shared.df.equals(alone.df)


def test_workers_never_exceed_the_cpus_this_process_may_use():
    assert 1 <= workers(None) == workers(10_000) and workers(1) == 1
