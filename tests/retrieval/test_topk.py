"""The exact top-k every vector retriever calls: blocked search equals a full sort, ties go
by the ranks given (trec_eval's order for a run, the document index by default) whatever the
block sizes, and a run from a top-k drops self-hits without shortening the list."""

import numpy as np
import pytest
import torch

from instir.benchmarks.types import Benchmark, Corpus, Doc, Query
from instir.retrieval.runs import Run, tie_ranks
from instir.retrieval.topk import (
    exact_top_k,
    merge_top_k,
    rank_by_embeddings,
    run_from_top_k,
    top_k_block,
    top_k_row,
)


@pytest.mark.parametrize("similarity", ["cosine", "dot", "euclidean"])
def test_blocked_top_k_equals_a_full_sort(similarity):
    rng = np.random.default_rng(0)
    q, d = rng.normal(size=(13, 8)).astype(np.float32), rng.normal(size=(50, 8)).astype(np.float32)
    scores, idx = exact_top_k(q, d, 7, similarity, query_block=5, doc_block=11)
    from sentence_transformers import SimilarityFunction

    full = SimilarityFunction.to_similarity_fn(similarity)(torch.from_numpy(q), torch.from_numpy(d)).numpy()
    expected = np.argsort(-full, axis=1, kind="stable")[:, :7]
    np.testing.assert_array_equal(idx, expected)
    np.testing.assert_allclose(scores, np.take_along_axis(full, expected, 1), rtol=1e-5)


def test_ties_at_the_cut_keep_the_lowest_document_indices_whatever_the_blocks():
    q = np.array([[1.0, 0.0]], dtype=np.float32)
    d = np.array([[0.5, 1.0]] * 9 + [[1.0, 0.0]], dtype=np.float32)  # docs 0-8 tie, doc 9 best
    for doc_block in (2, 3, 4, 10):
        scores, idx = exact_top_k(q, d, 4, "dot", doc_block=doc_block)
        assert idx.tolist() == [[9, 0, 1, 2]] and scores.tolist() == [[1.0, 0.5, 0.5, 0.5]]


def test_top_k_block_breaks_ties_by_column_also_when_torch_would_not():
    scores = torch.tensor([[0.5] * 6 + [0.9]])
    vals, idx = top_k_block(scores, 3)
    assert idx.tolist() == [[6, 0, 1]] and vals.tolist() == [[pytest.approx(0.9), 0.5, 0.5]]


def test_merging_a_later_block_keeps_the_earlier_document_on_a_tie():
    best_vals, best_idx = torch.tensor([[1.0, 0.5]]), torch.tensor([[3, 4]])
    vals, idx = merge_top_k(best_vals, best_idx, torch.tensor([[0.5, 0.2]]), torch.tensor([[10, 11]]), 3,
                            torch.arange(12))
    assert idx.tolist() == [[3, 4, 10]] and vals.tolist() == [[1.0, 0.5, 0.5]]


def test_ties_at_the_cut_go_by_the_ranks_given_whatever_the_blocks():
    q = np.array([[1.0, 0.0]], dtype=np.float32)
    d = np.array([[0.5, 1.0]] * 9 + [[1.0, 0.0]], dtype=np.float32)  # docs 0-8 tie, doc 9 best
    ranks = np.array([5, 0, 7, 1, 8, 2, 6, 3, 4, 9])  # among the tied: 1, 3, 5, 7 first
    for doc_block in (2, 3, 4, 10):
        scores, idx = exact_top_k(q, d, 4, "dot", ranks=ranks, doc_block=doc_block)
        assert idx.tolist() == [[9, 1, 3, 5]] and scores.tolist() == [[1.0, 0.5, 0.5, 0.5]]
    vals, idx = top_k_block(torch.tensor([[0.5] * 6 + [0.9]]), 3, torch.tensor([6, 5, 4, 3, 2, 1, 0]))
    assert idx.tolist() == [[6, 5, 4]]


def test_tie_ranks_are_trec_evals_order_document_id_descending_byte_wise():
    assert tie_ranks(["d10", "d9", "D1", "d1", "é"]).tolist() == [2, 1, 4, 3, 0]


def test_a_vector_run_cut_at_k_holds_the_top_k_of_a_deeper_run_as_trec_eval_reads_it():
    import ir_measures

    ids = [f"d{i}" for i in range(30)]
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(5, 4)).astype(np.float32)[rng.integers(0, 5, size=30)]  # each vector ~6 times
    corpus = Corpus.from_docs([Doc(i, "x") for i in ids])
    queries = {f"q{j}": Query(f"q{j}", "x") for j in range(4)}
    qrels = {q: {i: int(i[-1] in "137") for i in ids} for q in queries}
    bench = Benchmark("user", "test", "local", "instructed", corpus, queries, qrels)
    q = rng.normal(size=(4, 4)).astype(np.float32)
    for k in (3, 7, 10):
        cut = rank_by_embeddings(bench, q, vectors, k, "dot", {})
        deep = rank_by_embeddings(bench, q, vectors, 30, "dot", {})
        as_trec_eval_reads = Run(deep.df[["qid", "docid", "score"]]).top(k)  # trec_eval's order of the deep run
        assert cut.df[["qid", "docid"]].values.tolist() == as_trec_eval_reads.df[["qid", "docid"]].values.tolist()
        measure = ir_measures.nDCG @ k
        assert ir_measures.calc_aggregate([measure], qrels, cut.to_dict())[measure] == pytest.approx(
            ir_measures.calc_aggregate([measure], qrels, deep.to_dict())[measure])


def test_a_run_from_top_k_drops_a_self_hit_and_still_holds_k_documents():
    corpus = Corpus.from_docs([Doc("q1", "self"), Doc("d1", "a"), Doc("d2", "b"), Doc("d3", "c")])
    bench = Benchmark("user", "test", "local", "instructed", corpus, {"q1": Query("q1", "query")}, {"q1": {"d1": 1}})
    asked = []

    def top_k(depth):
        asked.append(depth)
        return np.array([[0.9, 0.8, 0.7][:depth]]), np.array([[0, 1, 2][:depth]])

    run = run_from_top_k(bench, top_k, 2, {})
    assert asked == [3]  # one deeper, since a query id is also a document id
    assert run.df["docid"].tolist() == ["d1", "d2"] and run.meta["self_hits_dropped"] == 1


def test_nan_scores_with_a_tie_at_the_cut_reach_the_runs_clear_refusal_not_a_torch_error():
    # found by this stop's regression review: the tie fix left NaNs (which torch.topk ranks first) out of the
    # candidates, and a model's NaN vectors became "The expanded size of the tensor (3) must match …"
    from instir.errors import UsageError

    q = np.array([[1.0, 0.0]], np.float32)
    d = np.array([[np.nan, 0], [np.nan, 0], [1, 0], [1, 0], [0.5, 0]], np.float32)
    scores, idx = exact_top_k(q, d, 3, "dot")
    assert sorted(idx[0].tolist()) == [0, 1, 2] and np.isnan(scores[0, :2]).all()
    corpus = Corpus.from_docs([Doc(f"d{i}", "x") for i in range(5)])
    bench = Benchmark("user", "test", "local", "instructed", corpus, {"q": Query("q", "x")}, {"q": {"d2": 1}})
    with pytest.raises(UsageError, match="expected a finite number, got nan"):
        rank_by_embeddings(bench, q, d, 3, "dot", {})


def test_normalize_ranks_by_the_cosine_of_the_vectors_whatever_their_lengths():
    # dot: d0 (10·1 = 10) beats d1 (0.9); normalised first, d1 points almost along q:
    # cos(q, d1) = 0.9 / sqrt(0.9² + 0.1²) = 0.9 / 0.905539 = 0.993884 > cos(q, d0) = 10 / sqrt(200) = 0.707107
    q = np.array([[2.0, 0.0]], dtype=np.float32)
    d = np.array([[10.0, 10.0], [0.9, 0.1]], dtype=np.float32)
    scores, idx = exact_top_k(q, d, 2, "dot")
    assert idx.tolist() == [[0, 1]] and scores[0].tolist() == pytest.approx([20.0, 1.8])
    scores, idx = exact_top_k(q, d, 2, "dot", normalize=True)
    assert idx.tolist() == [[1, 0]] and scores[0].tolist() == pytest.approx([0.993884, 0.707107], abs=1e-6)


def test_the_numpy_cut_keeps_only_entries_scoring_strictly_above_the_floor():
    # BM25's cut: a document scoring 0 matches no query term and is no result
    scores = np.array([0.0, 2.0, 0.0, 1.0], dtype=np.float32)
    assert top_k_row(scores, 3, np.arange(4), above=0.0).tolist() == [1, 3]
    assert top_k_row(scores, 3, np.arange(4)).tolist() == [1, 3, 0]


@pytest.mark.parametrize("doc_block", [700, 16384])
def test_a_top_k_of_many_tied_scores_equals_numpys_sort_by_score_then_rank(doc_block):
    # small whole-number vectors: dot scores are whole numbers, dozens of documents tie at every cut, more than
    # torch sorts stably by chance; numpy's lexsort (score descending, then the rank given) is the order asked for
    rng = np.random.default_rng(7)
    q = rng.integers(0, 3, size=(4, 3)).astype(np.float32)
    d = rng.integers(0, 3, size=(2000, 3)).astype(np.float32)
    ranks = rng.permutation(2000)
    full = q @ d.T
    for k in (1, 50, 333):
        scores, idx = exact_top_k(q, d, k, "dot", ranks=ranks, doc_block=doc_block)
        expected = np.stack([np.lexsort((ranks, -row))[:k] for row in full])
        np.testing.assert_array_equal(idx, expected)
        np.testing.assert_array_equal(scores, np.take_along_axis(full, expected, 1))
    for row in full:  # the numpy cut of a one-query retriever (BM25), the same order
        assert top_k_row(row, 50, ranks).tolist() == np.lexsort((ranks, -row))[:50].tolist()


def test_top_k_block_orders_tied_scores_inside_the_top_k_by_the_ranks_given():
    # no tie at the cut (all four kept): the order among the three 0.5s is still the ranks' (2, 1, 0), not torch's
    vals, idx = top_k_block(torch.tensor([[0.5, 0.5, 0.5, 0.9]]), 4, torch.tensor([3, 2, 1, 0]))
    assert idx.tolist() == [[3, 2, 1, 0]] and vals.tolist() == [[pytest.approx(0.9), 0.5, 0.5, 0.5]]


def test_a_top_k_of_no_documents_is_refused():
    q = np.ones((1, 2), dtype=np.float32)
    with pytest.raises(ValueError, match="k must be positive, got 0"):
        exact_top_k(q, q, 0, "dot")


def test_a_run_from_top_k_keeps_k_documents_when_the_deeper_list_holds_no_self_hit():
    # the query id is a document id, so one more is asked for; here it was not retrieved: the run still holds k
    corpus = Corpus.from_docs([Doc("q1", "self"), Doc("d1", "a"), Doc("d2", "b"), Doc("d3", "c")])
    bench = Benchmark("user", "test", "local", "instructed", corpus, {"q1": Query("q1", "query")}, {"q1": {"d1": 1}})
    run = run_from_top_k(bench, lambda depth: (np.array([[0.9, 0.8, 0.7][:depth]]), np.array([[1, 2, 3][:depth]])),
                         2, {})
    assert run.df["docid"].tolist() == ["d1", "d2"] and run.meta["self_hits_dropped"] == 0


def test_a_run_of_vectors_normalised_first_ranks_by_their_cosine():
    # dot: d0 (2·10 = 20) before d1 (1.8); cos(q, d1) = 0.993884 > cos(q, d0) = 0.707107
    corpus = Corpus.from_docs([Doc("d0", "x"), Doc("d1", "y")])
    bench = Benchmark("user", "test", "local", "instructed", corpus, {"q": Query("q", "x")}, {"q": {"d1": 1}})
    q, d = np.array([[2.0, 0.0]], np.float32), np.array([[10.0, 10.0], [0.9, 0.1]], np.float32)
    run = rank_by_embeddings(bench, q, d, 2, "dot", {}, normalize=True)
    assert run.df["docid"].tolist() == ["d1", "d0"]
    assert run.df["score"].tolist() == pytest.approx([0.993884, 0.707107], abs=1e-6)
