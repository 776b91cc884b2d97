"""The streamed BM25 build (:mod:`instir.retrieval.bm25_build`) writes the arrays bm25s's own ``BM25.index``
builds from the same token ids, bit for bit, for every BM25 variant bm25s has, whatever the chunk and block
sizes; and the retriever's index built that way ranks as bm25s's."""

import bm25s
import numpy as np
import pytest
from bm25s.tokenization import Tokenized

from instir.retrieval.bm25_build import spill, write_index
from instir.retrieval.bm25_tokens import tokenized_chunks

METHODS = ("robertson", "lucene", "atire", "bm25l", "bm25+")


def _texts(n: int = 400, seed: int = 7) -> list[str]:
    """Documents of Zipf-distributed words (a few in most documents, most in few), some empty or repeated."""
    rng = np.random.default_rng(seed)
    words = np.array([f"w{i}" for i in range(250)])
    weights = 1 / np.arange(1, len(words) + 1)
    texts = [" ".join(rng.choice(words, size=int(rng.integers(0, 80)), p=weights / weights.sum())) for _ in range(n)]
    return [*texts, "", "of the", texts[3], "w0 " * 300]


def _per_document(texts: list[str]) -> tuple[list[list[int]], dict[str, int]]:
    vocab: dict[str, int] = {}
    ids: list[list[int]] = []
    for flat, lengths in tokenized_chunks(texts, ["of", "the"], "none", vocab):
        ends = np.cumsum(lengths)
        ids += [flat[end - n:end].tolist() for end, n in zip(ends, lengths)]
    return ids, vocab


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(("chunk", "block_pairs"), [(37, 50), (10_000, 8_000_000)])
def test_the_streamed_build_writes_the_arrays_bm25s_builds(method, chunk, block_pairs, tmp_path):
    texts = _texts()
    vocab: dict[str, int] = {}
    spilled = spill(tokenized_chunks(texts, ["of", "the"], "none", vocab, chunk=chunk), tmp_path / "triples")
    (tmp_path / "index").mkdir()
    write_index(tmp_path / "index", spilled, vocab, k1=1.2, b=0.75, method=method, block_pairs=block_pairs)
    ours = bm25s.BM25.load(tmp_path / "index")

    ids, reference_vocab = _per_document(texts)
    reference = bm25s.BM25(k1=1.2, b=0.75, method=method)
    reference.index(Tokenized(ids=ids, vocab=reference_vocab), show_progress=False)
    for name in ("data", "indices", "indptr"):
        assert ours.scores[name].dtype == reference.scores[name].dtype, name
        np.testing.assert_array_equal(ours.scores[name], reference.scores[name], err_msg=name)
    assert ours.scores["num_docs"] == reference.scores["num_docs"] == len(texts)
    assert ours.vocab_dict == reference.vocab_dict and "" in ours.vocab_dict
    if method in ("bm25l", "bm25+"):
        np.testing.assert_array_equal(ours.nonoccurrence_array, reference.nonoccurrence_array)
    else:
        assert ours.nonoccurrence_array is None
    queries = [["w0", "w5"], ["w249", "w1", "w1"], ["unknown"]]
    for query in queries:
        np.testing.assert_array_equal(ours.get_scores(query), reference.get_scores(query))


def test_a_block_smaller_than_one_terms_documents_holds_that_term_alone(tmp_path):
    texts = ["w0 w1"] * 30 + ["w2"]
    vocab: dict[str, int] = {}
    spilled = spill(tokenized_chunks(texts, [], "none", vocab, chunk=4), tmp_path / "triples")
    assert spilled.pairs == 61 and spilled.df.tolist() == [30, 30, 1]
    (tmp_path / "index").mkdir()
    write_index(tmp_path / "index", spilled, vocab, k1=0.9, b=0.4, method="lucene", block_pairs=5)
    index = bm25s.BM25.load(tmp_path / "index")
    assert index.scores["indptr"].tolist() == [0, 30, 60, 61]
    assert index.scores["indices"].tolist() == [*range(30), *range(30), 30]


def test_a_chunk_of_documents_without_a_single_token_is_indexed_as_empty_documents(tmp_path):
    vocab: dict[str, int] = {}
    texts = ["of the", "", "w1 w2 w1", "the"]  # the first chunk of two holds stop words only
    spilled = spill(tokenized_chunks(texts, ["of", "the"], "none", vocab, chunk=2), tmp_path / "triples")
    assert spilled.lengths.tolist() == [0, 0, 3, 0] and spilled.pairs == 2 and spilled.df.tolist() == [1, 1]
    (tmp_path / "index").mkdir()
    write_index(tmp_path / "index", spilled, vocab, k1=0.9, b=0.4, method="lucene")
    index = bm25s.BM25.load(tmp_path / "index")
    assert index.scores["num_docs"] == 4 and index.scores["indices"].tolist() == [2, 2]
