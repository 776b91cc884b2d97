"""Adapters that build the kit's existing retrievers from a :class:`~instir.systems.cards.SystemCard`:
``bm25`` (:class:`~instir.retrieval.lexical.BM25Retriever`), ``paper-bm25`` (the BM25 engine the card's paper
ran, as its family spec names it), ``hybrid``
(:class:`~instir.retrieval.fusion.HybridRetriever` of two other cards), ``sentence-transformers``
and ``hf-mean-pool`` (:class:`~instir.retrieval.dense.DenseRetriever`; the latter assembles a
plain ``AutoModel`` + masked mean pooling, IFIR's ``Contriever``/``ColBERT`` classes and
InstructIR's ``BertRetriever``, from sentence-transformers modules)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from instir.errors import UsageError
from instir.retrieval.search import model_location
from instir.systems.cards import READS, SystemCard


def bm25_from_card(card: SystemCard):
    """BM25 with the card's params (k1, b, method, stemmer, stopwords; missing ones take the
    benchmark's defaults: :class:`~instir.retrieval.lexical.BM25Retriever`)."""
    from instir.retrieval.lexical import BM25Retriever

    kwargs = {key: card.params[key] for key in READS["bm25"].params if key in card.params}  # checked: cards.READS
    return BM25Retriever(**kwargs)


def paper_bm25_from_card(card: SystemCard, *, progress: bool | None = None):
    """The BM25 engine the card's paper ran: its family spec's ``[bm25] engine`` (Anserini, Elasticsearch's
    BM25 on Lucene, or rank_bm25 over the candidates: :mod:`instir.retrieval.lucene`, :mod:`instir.retrieval.okapi`)
    with the spec's ``k1`` and ``b`` (the card's params, where given, override them; ``epsilon`` for rank_bm25).
    Its packages are checked first (:data:`instir.systems.registry.ENGINE_REQUIRES`) and Java and the jar looked up
    now, so a missing engine is one line before any work; a Lucene index stays
    in ``$INSTIR_HOME/lucene`` whatever ``cache_dir`` says."""
    from instir.benchmarks import catalog

    spec = dict(catalog.family(card.paper).bm25)
    settings = {"k1": card.params.get("k1", spec["k1"]), "b": card.params.get("b", spec["b"]),
                "show_progress": progress}
    if spec.get("engine") == "rank_bm25":
        from instir.retrieval.okapi import CandidateOkapiRetriever

        return CandidateOkapiRetriever(epsilon=card.params.get("epsilon", 0.25), **settings)
    from instir.retrieval import lucene

    lucene.java(), lucene.anserini_jar()
    if spec.get("engine") == "elasticsearch":
        return lucene.ElasticsearchBM25Retriever(**settings)
    if spec.get("engine") == "anserini":
        return lucene.AnseriniBM25Retriever(analyzer="plain" if spec["stemmer"] == "none" else "english", **settings)
    raise ValueError(f"system {card.name!r}: the {card.paper} family spec names no BM25 engine ([bm25] engine)")


def hybrid_from_card(card: SystemCard, *, cards: Mapping[str, SystemCard], **options):
    """IFIR's hybrid: the cards named by params ``dense`` and ``lexical``, fused by RRF with
    params ``weights`` (dense, lexical) and ``rrf_k``."""
    from instir.retrieval.fusion import IFIR_RRF_K, IFIR_WEIGHTS, HybridRetriever
    from instir.systems.cards import get_card
    from instir.systems.registry import build_system

    dense = build_system(get_card(card.params["dense"], cards), cards=cards, **options)
    lexical = build_system(get_card(card.params["lexical"], cards), cards=cards, **options)
    return HybridRetriever(dense, lexical, weights=tuple(card.params.get("weights", IFIR_WEIGHTS)),
                           rrf_k=int(card.params.get("rrf_k", IFIR_RRF_K)))


def _single_max_length(card: SystemCard) -> int | None:
    """The one max length a sentence-transformers model takes (query and doc must agree)."""
    q, d = card.query_max_length, card.doc_max_length
    if q is not None and d is not None and q != d:
        raise ValueError(f"system {card.name!r}: a sentence-transformers model has one max length, "
                         f"but the card sets query {q} and doc {d}")
    return d if d is not None else q


def _torch_dtype(card: SystemCard, device: str | None):
    """The card's dtype on CUDA; float32 on CPU (half precision there is slow and not what
    the authors ran; DenseRetriever records the precision used)."""
    import torch

    if not card.dtype or not (device or "").startswith("cuda"):
        return None
    return getattr(torch, card.dtype)


def _dense(card: SystemCard, model, *, device: str | None, cache_dir: str | Path | None, progress: bool):
    from instir.retrieval.dense import DenseRetriever

    return DenseRetriever(model, batch_size=int(card.params.get("batch_size", 64)), max_length=_single_max_length(card),
                          normalize=card.normalize, similarity=card.similarity or None, device=device,
                          cache_dir=cache_dir, progress=progress, windowing=card.windowing or None,
                          half=False)  # the card's dtype, as _torch_dtype loaded it (the authors' float32 by default)


def sentence_transformers_from_card(card: SystemCard, *, device: str | None = None,
                                    cache_dir: str | Path | None = None, progress: bool = True):
    """A sentence-transformers model as the card loads it (revision, dtype on CUDA, params
    ``trust_remote_code`` and ``padding_side``), searched by DenseRetriever."""
    from sentence_transformers import SentenceTransformer

    dtype = _torch_dtype(card, device)
    model = SentenceTransformer(model_location(card.model), device=device, revision=card.revision or None,
                                trust_remote_code=bool(card.params.get("trust_remote_code", False)),
                                model_kwargs={"dtype": dtype} if dtype is not None else None)
    if "padding_side" in card.params:
        model.tokenizer.padding_side = card.params["padding_side"]
    _check_pooling(card, model)
    return _dense(card, model, device=device, cache_dir=cache_dir, progress=progress)


#: a card's pooling -> sentence-transformers' name of it (``Pooling.pooling_mode``)
_ST_POOLINGS = {"mean": "mean", "cls": "cls", "last-token": "lasttoken"}


def _check_pooling(card: SystemCard, model) -> None:
    """Refuse a card whose pooling is not the one its model's own modules run: the adapter runs the model as it is
    (a card saying ``cls`` of a mean-pooled model ran mean pooling, and its sidecar said ``cls``)."""
    from sentence_transformers.sentence_transformer.modules import Pooling

    if not card.pooling:
        return
    own = [module.pooling_mode for module in model if isinstance(module, Pooling)]
    if own != [_ST_POOLINGS[card.pooling]]:
        pools = f"pools by {', '.join(map(str, own))}" if own else "has no Pooling module"
        raise UsageError(f"system {card.name!r}, field 'pooling': {card.model} {pools}, not {card.pooling!r}; the "
                         f"sentence-transformers adapter runs the model's own pooling (hf-mean-pool: mean pooling)")


def hf_mean_pool_from_card(card: SystemCard, *, device: str | None = None, cache_dir: str | Path | None = None,
                           progress: bool = True):
    """``AutoModel`` + masked mean pooling (one vector per input), whatever the repository's
    own sentence-transformers config says: the card's pooling is ``mean`` by definition."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling, Transformer

    dtype = _torch_dtype(card, device)
    model_kwargs = {"revision": card.revision} if card.revision else {}
    if dtype is not None:
        model_kwargs["dtype"] = dtype
    transformer = Transformer(model_location(card.model), max_seq_length=_single_max_length(card),
                              model_kwargs=model_kwargs or None)
    pooling = Pooling(transformer.get_embedding_dimension(), pooling_mode="mean")
    return _dense(card, SentenceTransformer(modules=[transformer, pooling], device=device), device=device,
                  cache_dir=cache_dir, progress=progress)
