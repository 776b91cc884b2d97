"""Decoder-LLM embedders (RepLLaMA, Promptriever, any causal LM): a LoRA adapter merged onto
its base with peft, or plain transformers weights, pooled at one token position.

Loading follows the authors: ``PeftModel.from_pretrained(AutoModel(base), adapter)
.merge_and_unload()`` (InstructIR ``eval/eval_instructir_dense.py`` ``_get_model``; IFIR
``src/utils/inst_llms.py`` ``Promptriever.get_model``); the tokenizer is the base model's
with pad = EOS and the card's padding side (right for both papers).

Pooling (``pooling``):

- ``batch-last``: ``last_hidden_state[:, -1]`` of the padded batch, as InstructIR's
  ``DenseEncoder_w_Decoder_Model`` does. With right padding this is the last *real* token
  only for the longest input(s) of each batch; every shorter input gets the hidden state of
  a pad (EOS) position, which attends to its real tokens but is not the trained EOS
  representation, and its vector depends on which inputs share its batch. Reproducing it
  therefore also needs the authors' batch composition: ``batch_size`` (4 in their script),
  queries in file order and, with ``doc_order="length-desc"``, documents sorted by
  ``len(title + text)`` descending as BEIR's ``DenseRetrievalExactSearch`` sorts them.
- ``last-token``: the last real token (``attention_mask.sum - 1`` with right padding,
  position -1 with left padding): the same text, pooled as RepLLaMA was trained.
- ``eos``: the input is truncated to ``max_length - 1`` tokens, the EOS id is appended and
  pooled (tevatron's ``append_eos_token``; IFIR ``Promptriever.create_batch_dict``).

Vectors are L2-normalised when ``normalize`` (both papers), computed in ``dtype`` and
returned as float32; they go through :class:`~instir.retrieval.embedding_cache.EmbeddingCache`
keyed by everything above, so a rerun encodes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from instir.benchmarks.types import Benchmark, Corpus, Doc
from instir.formatting import ModelInput, Template, family_of_model, require_text
from instir.retrieval.dense import default_device, document_format, search_meta, weights_fingerprint
from instir.retrieval.embedding_cache import (
    DEFAULT_CHUNK_SIZE,
    CorpusTexts,
    EmbeddingCache,
    Embeddings,
)
from instir.retrieval.model_files import model_folder, remembered
from instir.retrieval.runs import Run
from instir.retrieval.topk import rank_by_embeddings
from instir.systems.cards import DECODER_POOLINGS, DOC_ORDERS

if TYPE_CHECKING:
    import torch

    from instir.systems.cards import SystemCard


def input_text(item: ModelInput) -> str:
    """``item`` as the one text a decoder embedder takes: inputs given to :meth:`DecoderRetriever.encode`
    directly are checked here (a search refuses a pair template at once, :func:`~instir.formatting.require_text`)."""
    if not isinstance(item, str):
        raise ValueError("decoder embedders take text templates, not [instruction, text] pairs")
    return item


class DecoderRetriever:
    """Dense retrieval with a decoder LLM embedder (see the module docstring).

    ``model`` is a LoRA adapter (id or path) when ``base_model`` is given, else full
    weights. ``tokenizer`` defaults to the base model's (else the model's). ``device``
    defaults to CUDA when available. ``forward_calls`` counts model forward passes (a warm
    rerun makes none).
    """

    #: pooling names this class accepts (a subclass with its own pooling narrows them)
    poolings: tuple[str, ...] = DECODER_POOLINGS

    def __init__(self, model: str, *, base_model: str = "", revision: str = "", tokenizer: str = "",
                 pooling: str = "last-token", dtype: str = "float32", query_max_length: int = 512,
                 doc_max_length: int = 512, normalize: bool = True, similarity: str = "dot", batch_size: int = 8,
                 padding_side: str = "right", pad_to_multiple_of: int | None = None, doc_order: str = "",
                 device: str | None = None, cache_dir: str | Path | None = None,
                 chunk_size: int = DEFAULT_CHUNK_SIZE, progress: bool = True):
        if pooling not in self.poolings:
            raise ValueError(f"unknown pooling {pooling!r} for {type(self).__name__}; use one of "
                             f"{', '.join(self.poolings)}")
        if padding_side not in ("left", "right"):
            raise ValueError(f"padding_side must be 'left' or 'right', got {padding_side!r}")
        if doc_order not in DOC_ORDERS:
            raise ValueError(f"unknown doc_order {doc_order!r}; use 'length-desc' or leave it empty")
        self.model_id, self.base_model, self.revision = model, base_model, revision
        self.tokenizer_id = tokenizer or base_model or model
        self.pooling, self.dtype = pooling, dtype
        self.query_max_length, self.doc_max_length = query_max_length, doc_max_length
        self.normalize, self.similarity = normalize, similarity
        self.batch_size, self.padding_side, self.pad_to_multiple_of = batch_size, padding_side, pad_to_multiple_of
        self.doc_order, self.device = doc_order, device
        self.cache = EmbeddingCache(cache_dir, chunk_size=chunk_size, progress=progress)
        self.progress = progress
        self.family = family_of_model(model)
        self._model = None
        self._tokenizer = None
        self._fingerprint: str | None = None
        self.forward_calls = 0

    @classmethod
    def from_card(cls, card: SystemCard, *, device: str | None = None, cache_dir: str | Path | None = None,
                  progress: bool = True) -> "DecoderRetriever":
        """The embedder a ``peft-decoder`` card describes (params: batch_size, padding_side,
        pad_to_multiple_of, doc_order, tokenizer)."""
        p = card.params
        return cls(card.model, base_model=card.base_model, revision=card.revision, tokenizer=p.get("tokenizer", ""),
                   pooling=card.pooling or "last-token", dtype=card.dtype or "float32",
                   query_max_length=card.query_max_length or 512, doc_max_length=card.doc_max_length or 512,
                   normalize=True if card.normalize is None else card.normalize,
                   similarity=card.similarity or "dot", batch_size=int(p.get("batch_size", 8)),
                   padding_side=p.get("padding_side", "right"), pad_to_multiple_of=p.get("pad_to_multiple_of"),
                   doc_order=p.get("doc_order", ""), device=device, cache_dir=cache_dir, progress=progress)

    # ------------------------------------------------------------ model

    def _load(self) -> None:
        import torch
        from transformers import AutoModel, AutoTokenizer

        dtype = getattr(torch, self.dtype)
        # the model's own tokenizer at the model's revision; a base model's or another tokenizer's at its main
        tokenizer = AutoTokenizer.from_pretrained(
            self.tokenizer_id, revision=(self.revision or None) if self.tokenizer_id == self.model_id else None)
        tokenizer.pad_token = tokenizer.eos_token
        tokenizer.padding_side = self.padding_side
        if self.base_model:  # merged in float32, then cast, as both papers' code does
            from peft import PeftModel

            base = AutoModel.from_pretrained(self.base_model, dtype=torch.float32)
            model = PeftModel.from_pretrained(base, self.model_id, revision=self.revision or None).merge_and_unload()
            model = model.to(dtype)
        else:
            model = AutoModel.from_pretrained(self.model_id, revision=self.revision or None, dtype=dtype)
        model.eval().to(default_device(self.device))
        self._model, self._tokenizer = model, tokenizer
        settings = (f"|pooling={self.pooling}|padding_side={self.padding_side}|pad_to={self.pad_to_multiple_of}"
                    f"|eos={tokenizer.eos_token_id}")
        if self._fingerprint is None:  # else remembered under the model's files (:meth:`fingerprint`)
            self._fingerprint = weights_fingerprint(f"{model!r}{settings}", tokenizer, model.state_dict())

    def _model_files(self) -> list[tuple[str, str | None]]:
        """The ``(model, revision)`` of every set of files the loaded model is made of."""
        files = [(self.model_id, self.revision or None)]
        others = dict.fromkeys((self.base_model, self.tokenizer_id))
        files += [(ref, None) for ref in others if ref and ref != self.model_id]
        return files

    def fingerprint_options(self) -> dict:
        """The settings besides the files that :func:`weights_fingerprint` of the loaded model depends on."""
        return {"class": type(self).__name__, "dtype": self.dtype, "pooling": self.pooling,
                "padding_side": self.padding_side, "pad_to_multiple_of": self.pad_to_multiple_of}

    def fingerprint(self) -> str:
        """The loaded model's :func:`~instir.retrieval.dense.weights_fingerprint`, remembered under its files
        (:func:`~instir.retrieval.model_files.remembered`): a rerun whose vectors exist loads no model."""
        if self._fingerprint is None:
            folders = [model_folder(ref, revision) for ref, revision in self._model_files()]
            described = remembered(self.cache.root, folders, self.fingerprint_options(),
                                   lambda: {"fingerprint": self._loaded_fingerprint()})
            self._fingerprint = described["fingerprint"]
        return self._fingerprint

    def _loaded_fingerprint(self) -> str:
        self._load()
        return str(self._fingerprint)

    @property
    def model(self):
        """The merged transformers model, loaded on first use."""
        if self._model is None:
            self._load()
        return self._model

    @property
    def tokenizer(self):
        """The tokenizer (pad = EOS, the configured padding side), loaded with the model."""
        if self._tokenizer is None:
            self._load()
        return self._tokenizer

    @property
    def name(self) -> str:
        """Short retriever name for run files: ``decoder-<adapter basename>``."""
        return "decoder-" + self.model_id.rstrip("/").split("/")[-1]

    def encoder_description(self) -> dict:
        """Everything that changes the vectors (part of every cache key)."""
        return {"model": self.model_id, "base_model": self.base_model, "revision": self.revision,
                "tokenizer": self.tokenizer_id, "fingerprint": self.fingerprint(), "pooling": self.pooling,
                "dtype": self.dtype, "normalize": self.normalize, "batch_size": self.batch_size,
                "padding_side": self.padding_side, "pad_to_multiple_of": self.pad_to_multiple_of}

    def params(self) -> dict:
        """Parameters recorded in run metadata."""
        return {**self.encoder_description(), "query_max_length": self.query_max_length,
                "doc_max_length": self.doc_max_length, "similarity": self.similarity, "doc_order": self.doc_order}

    # ------------------------------------------------------------ encoding

    def _batch(self, texts: list[str], max_length: int) -> dict:
        tok = self.tokenizer
        if self.pooling == "eos":
            enc = tok(texts, max_length=max_length - 1, truncation=True, padding=False,
                      return_attention_mask=False, return_token_type_ids=False)
            enc["input_ids"] = [ids + [tok.eos_token_id] for ids in enc["input_ids"]]
            return tok.pad(enc, padding=True, pad_to_multiple_of=self.pad_to_multiple_of, return_attention_mask=True,
                           return_tensors="pt")
        return tok(texts, max_length=max_length, truncation=True, padding=True,
                   pad_to_multiple_of=self.pad_to_multiple_of, return_token_type_ids=False, return_tensors="pt")

    def _pool(self, hidden, mask):
        import torch

        if self.pooling == "batch-last" or self.padding_side == "left":
            return hidden[:, -1]
        last = mask.sum(dim=1) - 1
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last]

    def embed_batch(self, texts: list[str], max_length: int) -> torch.Tensor:
        """One forward pass over one batch of ``texts``: their pooled vectors in float32, not yet
        normalised (the hook a subclass overrides: GritLM's instruction mask and mean)."""
        import torch

        model = self.model
        batch = {key: value.to(model.device) for key, value in self._batch(texts, max_length).items()}
        hidden = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
        return self._pool(hidden, batch["attention_mask"]).to(torch.float32)

    def encode(self, inputs: Sequence[ModelInput], max_length: int) -> np.ndarray:
        """Vectors (float32) of formatted inputs, in order, in batches of ``batch_size``: each batch one
        :meth:`embed_batch` (one forward call), normalised when ``normalize`` is set."""
        import torch

        texts = [input_text(item) for item in inputs]
        out = []
        with torch.no_grad():
            for start in range(0, len(texts), self.batch_size):
                reps = self.embed_batch(texts[start:start + self.batch_size], max_length)
                self.forward_calls += 1
                if self.normalize:
                    reps = torch.nn.functional.normalize(reps, p=2, dim=-1)
                out.append(reps.cpu().numpy())
        return np.concatenate(out, axis=0) if out else np.zeros((0, 0), dtype=np.float32)

    def embed_queries(self, inputs: Sequence[ModelInput]) -> Embeddings:
        """Query vectors through the cache (inputs in benchmark order, as the authors batch them)."""
        encoder = {**self.encoder_description(), "kind": "queries", "max_length": self.query_max_length}
        return self.cache.embed(encoder, list(inputs), lambda items: self.encode(items, self.query_max_length),
                                label=self.name, desc="encoding queries")

    def _doc_view(self, corpus: Corpus) -> tuple[CorpusTexts | list[list[str]], list[str]]:
        """The corpus as ``[title, text]`` items in encoding order, and the doc ids in that order
        (``length-desc`` holds the corpus texts in memory to sort them, as BEIR does)."""
        if not self.doc_order:
            return CorpusTexts(corpus), corpus.ids()
        items, ids = [], []
        for doc in corpus:
            items.append([doc.title, doc.text])
            ids.append(doc.id)
        order = sorted(range(len(items)), key=lambda i: len(items[i][0] + items[i][1]), reverse=True)
        return [items[i] for i in order], [ids[i] for i in order]

    def embed_corpus(self, corpus: Corpus, template: Template, subset: str = "") -> tuple[Embeddings, list[str]]:
        """Document vectors through the cache, and the doc ids of their rows."""
        require_text(template, "a decoder embedder")
        view, ids = self._doc_view(corpus)
        encoder = {**self.encoder_description(), "kind": "documents", **document_format(template, subset),
                   "max_length": self.doc_max_length, "doc_order": self.doc_order}

        def encode(items: list[list[str]]) -> np.ndarray:
            texts = [template.format_doc(Doc("", text, title), subset) for title, text in items]
            return self.encode(texts, self.doc_max_length)

        return self.cache.embed(encoder, view, encode, label=self.name, desc="encoding corpus"), ids

    # ------------------------------------------------------------ search

    def search(self, benchmark: Benchmark, template: Template, k: int = 100) -> Run:
        """Top-``k`` documents per query by exact search over the cached vectors."""
        require_text(template, "a decoder embedder")
        queries = self.embed_queries(template.format_queries(benchmark.queries.values()))
        docs, doc_ids = self.embed_corpus(benchmark.corpus, template, benchmark.shared_subset)
        meta = search_meta(self, template, queries, docs)
        return rank_by_embeddings(benchmark, queries.matrix, docs.matrix, k, self.similarity, meta, doc_ids=doc_ids,
                                  device=default_device(self.device), progress=self.progress)
