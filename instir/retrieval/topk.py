"""Exact top-k search over vectors, the one vector-search core every vector retriever calls
(dense bi-encoders, ColBERT's MaxSim, decoder embedders, OpenAI embeddings, the Ray sweep).

Scores are computed block by block (documents may be a memory-mapped matrix, read once), the
running top-k is merged block after block, and ties are broken in trec_eval's order (document id
descending, :func:`~instir.retrieval.runs.tie_ranks`), also at the cut: a run never depends on
torch's unspecified tie order or on the block sizes, and a run cut at k holds the top k of a deeper
run as trec_eval reads it. :func:`run_from_top_k` turns a top-k into a
:class:`~instir.retrieval.runs.Run` without self-hits (documents whose id is the query id, dropped
as the official code does).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from instir.benchmarks.types import Benchmark
from instir.progress import tqdm
from instir.retrieval.runs import Run, tie_ranks

if TYPE_CHECKING:
    import torch

#: Similarities :func:`exact_top_k` computes (sentence-transformers' similarity functions).
SIMILARITIES = ("cosine", "dot", "euclidean", "manhattan")


def top_k_block(scores: torch.Tensor, k: int, ranks: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k of each row ordered by score descending, equal scores by ``ranks`` (one per column, lower first;
    default the column), also at the cut, so the selection never depends on torch's unspecified tie order."""
    import torch

    ranks = torch.arange(scores.shape[1]) if ranks is None else ranks.to(scores.device)
    vals, idx = torch.topk(scores, k, dim=1)
    kth = vals[:, -1:]
    split_ties = ((scores == kth).sum(1) > (vals == kth).sum(1)).nonzero().flatten()
    for r in split_ties.tolist():
        tied = ((scores[r] >= kth[r]) | scores[r].isnan()).nonzero().flatten()  # topk ranks NaN first; so do we
        tied = tied[torch.argsort(ranks[tied])]
        keep = torch.sort(scores[r, tied], descending=True, stable=True).indices[:k]
        vals[r], idx[r] = scores[r, tied[keep]], tied[keep]
    return _ordered(vals, idx, ranks[idx])


def _ordered(vals: torch.Tensor, idx: torch.Tensor, row_ranks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's entries by score descending, equal scores by their rank ascending (ranks are distinct)."""
    import torch

    by_rank = torch.argsort(row_ranks, dim=1)
    vals, idx = vals.gather(1, by_rank), idx.gather(1, by_rank)
    order = torch.sort(vals, dim=1, descending=True, stable=True).indices
    return vals.gather(1, order), idx.gather(1, order)


def top_k_row(scores: np.ndarray, k: int, ranks: np.ndarray, *, above: float = -np.inf) -> np.ndarray:
    """Indices of the top ``k`` entries of one score vector that score above ``above`` (fewer when fewer do), in
    :func:`top_k_block`'s order: score descending, equal scores by ``ranks``, also at the cut. The numpy form of
    the cut for a retriever that scores one query at a time (BM25)."""
    n = len(scores)
    chosen = scores > above
    if k < n:
        chosen &= scores >= np.partition(scores, n - k)[n - k]
    chosen = np.flatnonzero(chosen)
    return chosen[np.lexsort((ranks[chosen], -scores[chosen]))[:k]]


def exact_top_k(queries: np.ndarray, docs: np.ndarray, k: int, similarity: str = "cosine", *,
                normalize: bool = False, ranks: np.ndarray | None = None, query_block: int = 1024,
                doc_block: int = 16384, device: str | None = None,
                progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` documents per query: returns ``(scores, indices)``, each
    ``(n_queries, min(k, n_docs))``, rows ordered by score descending, equal scores by ``ranks``
    (one per document, lower first: :func:`~instir.retrieval.runs.tie_ranks` of the ids gives
    trec_eval's order; default the document index), also at the cut. ``normalize`` L2-normalises
    both sides first.

    ``docs`` may be a memory-mapped matrix: it is read block by block (``doc_block`` rows at
    a time, once), and at most ``query_block × doc_block`` scores are held (16 M floats,
    64 MB, by default), so memory stays bounded for 600k-document corpora.
    """
    import torch
    from sentence_transformers import SimilarityFunction

    if similarity not in SIMILARITIES:
        raise ValueError(f"unknown similarity {similarity!r}; known: {', '.join(SIMILARITIES)}")
    if k < 1:
        raise ValueError(f"k must be positive, got {k}")
    score_fn = SimilarityFunction.to_similarity_fn(similarity)
    n_q, n_d = queries.shape[0], docs.shape[0]
    all_ranks = torch.arange(n_d) if ranks is None else torch.as_tensor(np.asarray(ranks, dtype=np.int64))
    k_out = min(k, n_d)
    best_vals = torch.full((n_q, 0), float("-inf"))
    best_idx = torch.zeros((n_q, 0), dtype=torch.long)
    def load(rows: np.ndarray) -> torch.Tensor:
        t = torch.from_numpy(np.array(rows, dtype=np.float32)).to(device or "cpu")
        return torch.nn.functional.normalize(t, dim=1) if normalize else t

    q_all = load(queries)
    for start in tqdm(range(0, n_d, doc_block), desc="scoring", unit="block", disable=not progress or n_d <= doc_block):
        d = load(docs[start:start + doc_block])
        kk = min(k_out, d.shape[0])
        vals, idx = [], []
        for q0 in range(0, n_q, query_block):
            v, i = top_k_block(score_fn(q_all[q0:q0 + query_block], d).float(), kk,
                               all_ranks[start:start + d.shape[0]])
            vals.append(v.cpu())
            idx.append(i.cpu() + start)
        best_vals, best_idx = merge_top_k(best_vals, best_idx, torch.cat(vals), torch.cat(idx), k_out, all_ranks)
    return best_vals.numpy(), best_idx.numpy()


def merge_top_k(best_vals: torch.Tensor, best_idx: torch.Tensor, vals: torch.Tensor, idx: torch.Tensor,
                k: int, ranks: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The top ``k`` of a running top-k and a later block's top-k (rows = queries, ``idx`` document indices),
    equal scores by ``ranks`` (one per document, lower first) as in :func:`top_k_block`."""
    import torch

    merged_idx = torch.cat([best_idx, idx], dim=1)
    vals, idx = _ordered(torch.cat([best_vals, vals], dim=1), merged_idx, ranks[merged_idx])
    return vals[:, :k], idx[:, :k]


def rank_by_embeddings(benchmark: Benchmark, queries: np.ndarray, docs: np.ndarray, k: int, similarity: str,
                       meta: dict, *, doc_ids: Sequence[str] | None = None, normalize: bool = False,
                       device: str | None = None, progress: bool = False) -> Run:
    """The top-``k`` run of query vectors (rows in ``benchmark.queries`` order) against document
    vectors (rows in ``doc_ids`` order, default the corpus order) by :func:`exact_top_k`, through
    :func:`run_from_top_k` (self-hits dropped and counted)."""
    ranks = tie_ranks(benchmark.corpus.ids() if doc_ids is None else doc_ids)
    return run_from_top_k(benchmark, lambda depth: exact_top_k(
        queries, docs, depth, similarity, normalize=normalize, ranks=ranks, device=device, progress=progress), k,
        meta, doc_ids=doc_ids)


def run_from_top_k(benchmark: Benchmark, top_k: Callable[[int], tuple[np.ndarray, np.ndarray]], k: int, meta: dict,
                   *, doc_ids: Sequence[str] | None = None) -> Run:
    """The top-``k`` run from ``top_k(depth) -> (scores, indices)`` (rows in ``benchmark.queries``
    order, indices into ``doc_ids``, default the corpus order): asks one deeper when a query id is
    also a document id, drops such self-hits (as the official code does) without shortening the
    list, and counts them in ``meta["self_hits_dropped"]``."""
    qids = list(benchmark.queries)
    doc_ids = np.asarray(benchmark.corpus.ids() if doc_ids is None else doc_ids, dtype=object)
    has_self = not benchmark.corpus.id_set().isdisjoint(qids)
    scores, indices = top_k(k + int(has_self))
    not_self = doc_ids[indices] != np.asarray(qids, dtype=object)[:, None]
    keep = not_self & (np.cumsum(not_self, axis=1) <= k)
    return Run.from_arrays(qids, doc_ids, indices, scores, {**meta, "self_hits_dropped": int((~not_self).sum())},
                           keep=keep)


