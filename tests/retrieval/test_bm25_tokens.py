"""BM25 tokenisation in worker processes gives the ids and vocabulary of one pass (whatever the
chunk size and the number of workers), and a BM25 index built that way ranks as one built in
one process."""

import os
import signal
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest
from says import warns_saying

from instir.benchmarks import load_benchmark
from instir.formatting import get_template
from instir.retrieval.bm25_tokens import cut_long_tokens, tokenized_chunks, workers
from instir.retrieval.lexical import BM25Retriever

TEXTS = ["The cats were running; the dog ran.", "", "the a an of", "Running runners run RUN runs 3.5 x y",
         "Über café naïve coöperate — ünïcode wörds", "dogs and cats, cats and dogs", "zz zz zz", "new words only here"]

def tokenize(texts, stopwords, stemmer, **options) -> tuple[list[list[int]], dict[str, int]]:
    """Each text's token ids and the vocabulary, from the chunks :func:`tokenized_chunks` yields."""
    vocab: dict[str, int] = {}
    ids: list[list[int]] = []
    for flat, lengths in tokenized_chunks(texts, stopwords, stemmer, vocab, **options):
        ends = np.cumsum(lengths)
        ids += [flat[end - n:end].tolist() for end, n in zip(ends, lengths)]
    return ids, vocab


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


def test_a_token_longer_than_the_limit_is_cut_before_stemming_and_counted(monkeypatch):
    import Stemmer

    import instir.retrieval.bm25_tokens as bm25_tokens

    stemmed: list[int] = []
    real = Stemmer.Stemmer

    class Watched:
        def __init__(self, name):
            self.inner = real(name)

        def stemWord(self, word):  # noqa: N802 - PyStemmer's name
            stemmed.append(len(word))
            return self.inner.stemWord(word)

    monkeypatch.setattr(bm25_tokens.Stemmer, "Stemmer", Watched)
    long_word = "a" * 10_000_000  # a 10 MB token; 2 GiB ended in a segmentation fault inside PyStemmer
    stats: dict = {}
    with warns_saying(bm25_tokens.LongTokenWarning, "3 tokens", "255 characters"):
        ids, vocab = tokenize([f"running {long_word} dogs", f"{long_word} {'a' * 255}b"], [], "porter", stats=stats)
    assert max(stemmed) == bm25_tokens.MAX_TOKEN_CHARS == 255 and stats == {"long_tokens_cut": 3}
    assert [len(a) for a in ids] == [3, 2]  # as many tokens as bm25s counts: document lengths are unchanged
    assert vocab == {"run": 0, "a" * 255: 1, "dog": 2}  # the cut token is one word; a ...255a + b is the same cut
    assert bm25_tokens.cut_long_tokens(f"Running {long_word}!") == f"running {'a' * 255}!"
    assert bm25_tokens.cut_long_tokens("Short Text") == "Short Text"


@needs_fork
def test_workers_cut_and_count_long_tokens_as_one_process_does():
    texts = ["x" * 300 + " y" * 5, "plain words"] * 4
    one, many = {}, {}
    with pytest.warns(UserWarning):
        one_ids, one_vocab = tokenize(texts, [], "none", stats=one)
    with pytest.warns(UserWarning):
        ids, vocab = tokenize(texts, [], "none", n_jobs=2, chunk=3, stats=many)
    assert list(vocab.items()) == list(one_vocab.items()) and [list(a) for a in ids] == [list(a) for a in one_ids]
    assert one == many == {"long_tokens_cut": 4} and "x" * 255 in vocab


def test_a_query_with_a_long_token_finds_the_document_cut_the_same_way():
    from instir.benchmarks.types import Benchmark, Corpus, Doc, Query

    long_word = "q" * 1000
    bench = Benchmark("toy", "toy", "local", "instructed",
                      Corpus.from_docs([Doc("d1", f"{long_word} here"), Doc("d2", "other words")]),
                      {"q1": Query("q1", long_word)}, {"q1": {"d1": 1}})
    with pytest.warns(UserWarning, match="1 tokens longer than 255"):
        run = BM25Retriever(k1=0.9, b=0.4, stemmer="porter", stopwords="none", cache=False,
                            show_progress=False).search(bench, get_template("instructir"), k=5)
    assert run.df["docid"].tolist() == ["d1"] and run.meta["index"]["long_tokens_cut"] == 1


def test_a_query_token_one_character_past_the_limit_is_cut_as_in_the_documents():
    assert cut_long_tokens("Find " + "X" * 256) == "find " + "x" * 255


def test_a_token_of_exactly_the_limit_is_kept_whole_and_not_counted_as_cut():
    stats: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ids, vocab = tokenize(["b" * 255 + " word"], [], "none", stats=stats)
    assert stats == {"long_tokens_cut": 0} and vocab == {"b" * 255: 0, "word": 1} and ids == [[0, 1]]


def test_any_pystemmer_algorithm_stems_the_documents_not_only_porter():
    assert tokenize(["Running runs"], [], "english")[1] == {"run": 0}


#: a build whose workers stop in their first chunk (each writes its pid first), in a process of its own
STUCK_BUILD = """
import os, sys, time
from instir.retrieval.bm25_tokens import tokenized_chunks

PARENT, OUT = os.getpid(), sys.argv[1]


class Stuck(list):
    def __iter__(self):  # the stop words, read by each worker as it starts its chunk
        if os.getpid() != PARENT:
            open(os.path.join(OUT, f"{os.getpid()}.pid"), "w").close()
            time.sleep(600)
        return super().__iter__()


list(tokenized_chunks(["a b"] * 10, Stuck(["the"]), "english", {}, n_jobs=2, chunk=1))
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, killed and not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@needs_fork
@pytest.mark.processes
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux ends a worker with its parent")
def test_a_build_killed_with_kill_9_leaves_no_tokenising_worker_behind(tmp_path):
    # on the commit before, its workers stayed, blocked for ever on a pipe no one read, holding their chunks
    build = subprocess.Popen([sys.executable, "-c", STUCK_BUILD, str(tmp_path)])
    pids: list[int] = []
    try:
        for _ in range(600):
            pids = [int(p.stem) for p in tmp_path.glob("*.pid")]
            if len(pids) == 2 or build.poll() is not None:
                break
            time.sleep(0.1)
        assert len(pids) == 2, "the workers never started their chunks"
        build.send_signal(signal.SIGKILL)
        build.wait(30)
        for _ in range(100):
            if not any(map(_alive, pids)):
                break
            time.sleep(0.1)
        assert not [pid for pid in pids if _alive(pid)]
    finally:
        build.kill()
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
