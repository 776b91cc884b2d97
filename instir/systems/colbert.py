"""Late-interaction ColBERTv2 as InstructIR ran it: sentence-transformers' multi-vector encoder
on colbert-ai's checkpoint, with exact MaxSim search and the token cache.

The authors (kaistAI/InstructIR ``eval/eval_instructir_colbert.py``, ``main``) index the corpus
with colbert-ai's ``Indexer`` (checkpoint ``colbert-ir/colbertv2.0``, ``ColBERTConfig(doc_maxlen=300,
nbits=2, kmeans_niters=4)``) and search the top 100 with its ``Searcher``. colbert-ai and PyLate do
not install against transformers 5 (colbert-ai's ``HF_ColBERT.__init__`` calls ``init_weights()``,
which fails there); sentence-transformers (>= 6.2) reads the same Stanford checkpoint as a
``MultiVectorEncoder`` (``sentence_transformers/multi_vector_encoder/model.py``:
``MultiVectorEncoder._load_default_modules`` when ``config.json`` names ``HF_ColBERT``), and
``tests/systems/test_colbert.py`` checks, step by step, that it encodes as colbert-ai's
``Checkpoint`` does (stanford-futuredata/ColBERT, files under ``colbert/modeling/``).

The one place they differ is the skiplist of a vocabulary without some punctuation mark as one
token: colbert-ai skips ``encode(mark)[0]`` (``ColBERT.__init__``), which is then ``[UNK]``, so it
drops every unknown word of a document, while the library drops the mark from its list
(``MultiVectorMask.resolve_with_tokenizer``); colbertv2.0's vocabulary holds all 32 marks, so
they agree there, and the kit hands the library colbert-ai's list so that they agree everywhere.
What the kit keeps of its own is what the library lacks: the settings a card gives (``query_maxlen``,
``doc_maxlen`` 300 for InstructIR where the checkpoint says 180, ``attend_to_mask_tokens``,
``mask_punctuation``; otherwise the checkpoint's ``artifact.metadata`` as the library reads it, else
colbert-ai's defaults, which the library's equal), refusals of a checkpoint without its projection
or encoder weights, float32 everywhere, the token cache and exact top-k MaxSim search.

Quirk kept on purpose: InstructIR's ColBERT query text is ``instruction [SEP] query``
(template ``instructir``) and colbertv2.0's ``query_maxlen`` is 32, so the text is cut to 29
word pieces — most instructions are longer, and the query itself is usually cut away. That is
what the authors ran; ``query_maxlen=128`` (:data:`LONG_QUERY_MAXLEN`, the named variant
``colbertv2.0-q128``) keeps the whole InstructIR query (sample: median 56 words, at most 81).

Search is exact and exhaustive: every document's token vectors are scored (blocked matrix
products + a per-document max), not colbert-ai's PLAID index (centroid pruning, then scores from
2-bit compressed residuals, ``nbits=2``). Ranks are therefore at least as faithful to the model as
the authors' approximation, and scores differ from theirs in low digits (see the ``colbert-plaid``
divergence); for corpora of millions of passages use colbert-ai's PLAID on a GPU instead.
``device`` places the encoder (default: CUDA when available) and the MaxSim (default: CPU).
Encoding runs in float32 (colbert-ai uses float16 autocast on GPU).
"""

from __future__ import annotations

import string
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from instir.benchmarks.types import Benchmark
from instir.errors import UserError
from instir.extras import package_versions
from instir.formatting import Template
from instir.progress import tqdm
from instir.retrieval.dense import cached_vectors, default_device, search_meta, weights_fingerprint
from instir.retrieval.embedding_cache import DEFAULT_CHUNK_SIZE
from instir.retrieval.model_files import model_folder, remembered
from instir.retrieval.runs import Run, tie_ranks
from instir.retrieval.token_cache import TokenEmbeddingCache, TokenEmbeddings
from instir.retrieval.topk import merge_top_k, run_from_top_k, top_k_block

if TYPE_CHECKING:
    from sentence_transformers import MultiVectorEncoder

#: The checkpoint InstructIR ran.
COLBERTV2 = "colbert-ir/colbertv2.0"
#: InstructIR's ``--doc_maxlen`` (``eval_instructir_colbert.py``).
INSTRUCTIR_DOC_MAXLEN = 300
#: ``query_maxlen`` of the long-query variant: room for a whole InstructIR instruction + query.
LONG_QUERY_MAXLEN = 128
#: The sentence-transformers release whose Stanford-checkpoint loading the tests check against
#: colbert-ai (``MultiVectorEncoder`` first shipped in 6.0).
SENTENCE_TRANSFORMERS_MIN = (6, 2)
#: What encodes (``describe()["backend"]``, part of every cache key).
BACKEND = "colbert (sentence-transformers MultiVectorEncoder of a colbert-ai checkpoint)"
_SRC = ("kaistAI/InstructIR eval/eval_instructir_colbert.py (main); sentence-transformers "
        "multi_vector_encoder/model.py MultiVectorEncoder (Stanford HF_ColBERT loading), equal to "
        "stanford-futuredata/ColBERT colbert/modeling/{checkpoint.py Checkpoint.queryFromText/docFromText, "
        "colbert.py ColBERT.query/doc/colbert_score, tokenization/query_tokenization.py QueryTokenizer.tensorize, "
        "tokenization/doc_tokenization.py DocTokenizer.tensorize}")


def _local_folder(model: str, revision: str | None) -> Path:
    """The checkpoint as a local folder (a path, or the Hugging Face snapshot of an id)."""
    try:
        return model_folder(model, revision, download=True)
    except Exception as err:  # noqa: BLE001 - hub raises many kinds (offline, missing repo, gated)
        raise RuntimeError(f"ColBERT checkpoint {model!r} (revision {revision or 'main'}) is neither a local folder "
                           f"nor available from Hugging Face here ({type(err).__name__}: {err})") from None


def checkpoint_keys(folder: str | Path) -> set[str]:
    """The weight names of a checkpoint folder (``model.safetensors``, else ``pytorch_model.bin``);
    empty when it has neither."""
    folder = Path(folder)
    if (folder / "model.safetensors").is_file():
        from safetensors import safe_open

        with safe_open(str(folder / "model.safetensors"), framework="pt") as fh:
            return set(fh.keys())
    if (folder / "pytorch_model.bin").is_file():
        import torch

        return set(torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True))
    return set()


def colbert_skiplist(tokenizer: Any) -> list[str]:
    """colbert-ai's punctuation skiplist as tokens: the first token of each character of
    ``string.punctuation`` (``ColBERT.__init__`` with ``mask_punctuation``), ``[UNK]`` for a mark
    the vocabulary lacks, so that, as in colbert-ai, unknown words are then skipped too."""
    ids = dict.fromkeys(tokenizer.encode(mark, add_special_tokens=False)[0] for mark in string.punctuation)
    return tokenizer.convert_ids_to_tokens(list(ids))


def _load_multi_vector(folder: Path, device: str) -> "MultiVectorEncoder":
    """sentence-transformers' ``MultiVectorEncoder`` of a Stanford checkpoint folder, float32,
    offline; refused with one line when the folder is not a colbert-ai checkpoint (no
    ``linear.weight``, encoder weights missing, not the library's Stanford layout)."""
    import torch
    import transformers

    keys = checkpoint_keys(folder)
    if "linear.weight" not in keys:
        raise ValueError(f"{folder}: no 'linear.weight' in model.safetensors or pytorch_model.bin — not a colbert-ai "
                         "checkpoint (HF_ColBERT)")
    import sentence_transformers

    version = tuple(int(p) if p.isdigit() else 0 for p in sentence_transformers.__version__.split(".")[:2])
    if version < SENTENCE_TRANSFORMERS_MIN:
        need = ".".join(map(str, SENTENCE_TRANSFORMERS_MIN))
        raise UserError(f"ColBERT needs sentence-transformers>={need} (MultiVectorEncoder, checked against colbert-ai "
                        f"in the tests); this is {sentence_transformers.__version__}: "
                        f"pip install 'sentence-transformers>={need}'")
    from sentence_transformers import MultiVectorEncoder
    from sentence_transformers.base.modules import Normalize, Transformer
    from sentence_transformers.base.modules.dense import Dense
    from sentence_transformers.multi_vector_encoder.modules import MultiVectorMask

    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # the loader reports linear.weight as unexpected: it is expected
    try:
        model = MultiVectorEncoder(str(folder), device=device, local_files_only=True,
                                   model_kwargs={"dtype": torch.float32})
    finally:
        transformers.logging.set_verbosity(verbosity)
    layout = [type(m) for m in model]
    if layout != [Transformer, Dense, MultiVectorMask, Normalize] or model[0].query_expansion is None:
        raise ValueError(f"{folder}: sentence-transformers loads it as {[t.__name__ for t in layout]}, not as a "
                         "Stanford ColBERT checkpoint (Transformer, Dense, MultiVectorMask, Normalize with query "
                         "expansion) — not a colbert-ai checkpoint (HF_ColBERT)")
    loaded = set(model[0].auto_model.state_dict())
    given = {k.removeprefix("bert.") for k in keys}
    missing = sorted(k for k in loaded - given if not k.startswith("pooler."))
    if missing:
        raise ValueError(f"{folder}: the checkpoint lacks encoder weights {missing[:5]} — not a colbert-ai "
                         "checkpoint (HF_ColBERT)")
    return model.eval()


def _library_version() -> str:
    """The installed sentence-transformers version: part of every cache key, since the library encodes."""
    return package_versions(["sentence-transformers"])["sentence-transformers"] or "not installed"


class ColBERTEncoder:
    """colbert-ai's ``Checkpoint`` encoding through sentence-transformers' ``MultiVectorEncoder``
    (module docstring): ``queries`` gives ``(n, query_maxlen, dim)``, ``documents`` one ``(kept
    tokens, dim)`` matrix each. Settings given here override the checkpoint's; ``model`` is the
    library's encoder; ``forward_calls`` counts model forward passes."""

    def __init__(self, model: str = COLBERTV2, *, revision: str | None = None, query_maxlen: int | None = None,
                 doc_maxlen: int = INSTRUCTIR_DOC_MAXLEN, attend_to_mask_tokens: bool | None = None,
                 mask_punctuation: bool | None = None, batch_size: int = 64, device: str | None = None):
        self.model_id, self.revision = model, revision
        self.folder = _local_folder(model, revision)
        self.device = default_device(device)
        self.model = _load_multi_vector(self.folder, self.device)
        transformer, _, mask, _ = self.model
        expansion = transformer.query_expansion
        settings = {"query_maxlen": expansion["length"], "attend_to_mask_tokens": expansion["attend"],
                    "mask_punctuation": bool(mask.skiplist_words),
                    "query_token_id": self.model.prompts["query"].strip(),
                    "doc_token_id": self.model.prompts["document"].strip(),
                    "dim": self.model.get_embedding_dimension()}
        for key, value in (("query_maxlen", query_maxlen), ("attend_to_mask_tokens", attend_to_mask_tokens),
                           ("mask_punctuation", mask_punctuation)):
            if value is not None:
                settings[key] = value
        settings["doc_maxlen"] = doc_maxlen
        max_positions = getattr(transformer.auto_model.config, "max_position_embeddings", 512)
        for key in ("query_maxlen", "doc_maxlen"):
            if not isinstance(settings[key], int) or not 4 <= settings[key] <= max_positions:
                raise ValueError(f"{key} must be a whole number from 4 to {max_positions} (the model's positions); "
                                 f"got {settings[key]!r}")
        self.settings = settings
        self.tokenizer = self.model.tokenizer
        transformer.query_expansion = {"strategy": "fixed", "attend": bool(settings["attend_to_mask_tokens"]),
                                       "length": settings["query_maxlen"]}
        transformer.document_length = settings["doc_maxlen"]
        mask.skiplist_words = colbert_skiplist(self.tokenizer) if settings["mask_punctuation"] else []
        mask.resolve_with_tokenizer(self.tokenizer)
        self.batch_size = max(1, batch_size)
        self.fingerprint = weights_fingerprint(
            f"{type(transformer.auto_model).__name__}|{transformer.auto_model.config.to_json_string()}|{settings}",
            self.tokenizer, self.model.state_dict())
        self.forward_calls = 0
        transformer.register_forward_hook(self._count_forward)

    def _count_forward(self, *_: Any) -> None:
        """Forward hook of the library's ``Transformer`` module: one model forward pass."""
        self.forward_calls += 1

    @property
    def query_maxlen(self) -> int:
        """Tokens per query, ``[CLS]``, marker, ``[SEP]`` and ``[MASK]`` padding included."""
        return self.settings["query_maxlen"]

    def describe(self) -> dict:
        """Everything that changes the vectors (part of every cache key)."""
        return {"backend": BACKEND, "sentence_transformers": _library_version(), "model": self.model_id,
                "revision": self.revision, "fingerprint": self.fingerprint,
                "precision": "float32", **{k: self.settings[k] for k in sorted(self.settings)}}

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), query_maxlen, dim)`` unit vectors (``Checkpoint.queryFromText``)."""
        if not texts:
            return np.zeros((0, self.query_maxlen, self.settings["dim"]), dtype=np.float32)
        vectors = self.model.encode_query(list(texts), batch_size=self.batch_size, show_progress_bar=False,
                                          convert_to_numpy=True)
        return np.stack(vectors).astype(np.float32, copy=False)

    def documents(self, texts: Sequence[str]) -> list[np.ndarray]:
        """One ``(kept tokens, dim)`` matrix of unit vectors per text, in order: padding and
        skiplist tokens dropped (``Checkpoint.docFromText(keep_dims=False)``)."""
        if not texts:
            return []
        vectors = self.model.encode_document(list(texts), batch_size=self.batch_size, show_progress_bar=False,
                                             convert_to_numpy=True)
        return [np.asarray(v, dtype=np.float32) for v in vectors]


def maxsim_top_k(queries: np.ndarray, docs: TokenEmbeddings, k: int, *, ranks: np.ndarray | None = None,
                 token_block: int = 8192, query_block: int = 64, device: str | None = None,
                 progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` documents by MaxSim for ``queries`` ``(n, Lq, dim)`` over packed document
    tokens: ``(scores, indices)``, each ``(n, min(k, n_docs))``, score descending, equal scores
    by ``ranks`` as :func:`~instir.retrieval.topk.exact_top_k` orders them. Documents are scored
    ``token_block`` tokens at a time (whole documents), ``query_block`` queries at a time, so at
    most ``query_block × Lq × token_block`` similarities are held (16 M floats, 64 MB, by default)."""
    import torch

    if k < 1:
        raise ValueError(f"k must be positive, got {k}")
    n_q, n_qtok, dim = queries.shape
    offsets, n_docs = docs.offsets, len(docs)
    k_out = min(k, n_docs)
    dev = torch.device(device or "cpu")
    q_all = torch.from_numpy(np.array(queries, dtype=np.float32)).to(dev)
    all_ranks = torch.arange(n_docs) if ranks is None else torch.as_tensor(np.asarray(ranks, dtype=np.int64))
    best_vals = torch.full((n_q, 0), float("-inf"))
    best_idx = torch.zeros((n_q, 0), dtype=torch.long)
    starts = [0]
    while starts[-1] < n_docs:  # whole documents, about token_block tokens per block (at least one document)
        d0 = starts[-1]
        starts.append(max(d0 + 1, int(np.searchsorted(offsets, offsets[d0] + token_block, side="right")) - 1))
    for d0, d1 in tqdm(list(zip(starts[:-1], starts[1:])), desc="MaxSim", unit="block", disable=not progress):
        d = torch.from_numpy(np.array(docs.tokens[offsets[d0]:offsets[d1]], dtype=np.float32)).to(dev)
        owner = torch.repeat_interleave(torch.arange(d1 - d0, device=dev),
                                        torch.from_numpy(docs.doclens[d0:d1]).to(dev))
        kk = min(k_out, d1 - d0)
        vals, idx = [], []
        for q0 in range(0, n_q, query_block):
            q = q_all[q0:q0 + query_block]
            sims = q.reshape(-1, dim) @ d.T  # (queries × Lq, tokens)
            best_tok = torch.full((sims.shape[0], d1 - d0), float("-inf"), device=dev)
            best_tok.scatter_reduce_(1, owner.expand_as(sims), sims, reduce="amax", include_self=True)
            v, i = top_k_block(best_tok.view(q.shape[0], n_qtok, -1).sum(1), kk, all_ranks[d0:d1])
            vals.append(v.cpu())
            idx.append(i.cpu() + d0)
        best_vals, best_idx = merge_top_k(best_vals, best_idx, torch.cat(vals), torch.cat(idx), k_out, all_ranks)
    return best_vals.numpy(), best_idx.numpy()


class ColBERTRetriever:
    """Follows :class:`instir.retrieval.Retriever`: late-interaction ColBERT (module docstring)
    with query and document token vectors in the :class:`~instir.retrieval.token_cache.
    TokenEmbeddingCache` and exact MaxSim search. The encoder loads on first use, so a warm
    rerun (everything cached) loads no model and makes no model call."""

    family = "dense"

    def __init__(self, model: str = COLBERTV2, *, name: str | None = None, revision: str | None = None,
                 query_maxlen: int | None = None, doc_maxlen: int = INSTRUCTIR_DOC_MAXLEN,
                 attend_to_mask_tokens: bool | None = None, mask_punctuation: bool | None = None,
                 batch_size: int = 64, device: str | None = None, cache_dir: str | Path | None = None,
                 chunk_size: int = DEFAULT_CHUNK_SIZE, progress: bool = True):
        self.model_id, self.revision = model, revision
        self.name = name or f"colbert-{model.rstrip('/').split('/')[-1]}"
        self._options = {"revision": revision, "query_maxlen": query_maxlen, "doc_maxlen": doc_maxlen,
                         "attend_to_mask_tokens": attend_to_mask_tokens, "mask_punctuation": mask_punctuation,
                         "batch_size": batch_size, "device": device}
        self.device = device
        self.cache = TokenEmbeddingCache(cache_dir, chunk_size=chunk_size, progress=progress)
        self.progress = progress
        self._encoder: ColBERTEncoder | None = None
        self._description: dict | None = None

    @classmethod
    def card_settings(cls, card: Any) -> dict[str, Any]:
        """The constructor's settings a system card (duck-typed) gives: ``name``, ``revision``, ``query_max_length``,
        ``doc_max_length`` and ``params`` (``attend_to_mask_tokens``, ``mask_punctuation``, ``batch_size``)."""
        params = dict(getattr(card, "params", None) or {})
        settings: dict[str, Any] = {"name": card.name, "revision": getattr(card, "revision", None),
                                    **{k: params[k] for k in ("attend_to_mask_tokens", "mask_punctuation",
                                                              "batch_size") if k in params}}
        if getattr(card, "query_max_length", None) is not None:
            settings["query_maxlen"] = card.query_max_length
        if getattr(card, "doc_max_length", None) is not None:
            settings["doc_maxlen"] = card.doc_max_length
        return settings

    @classmethod
    def from_card(cls, card: Any, **options: Any) -> "ColBERTRetriever":
        """From a system card (duck-typed): its ``model`` and :meth:`card_settings`; ``options``
        (the constructor's others: cache_dir, device, progress …) pass through. The card's ``template`` is for
        :func:`instir.retrieval.retrieve`, not for the retriever."""
        return cls(card.model, **cls.card_settings(card), **options)

    @property
    def encoder(self) -> ColBERTEncoder:
        """The encoder, loaded on first use."""
        if self._encoder is None:
            self._encoder = ColBERTEncoder(self.model_id, **self._options)
        return self._encoder

    def encoder_description(self) -> dict:
        """What keys the caches: the checkpoint, its weights' fingerprint, the colbert settings and
        the sentence-transformers version. Computed once from the loaded encoder and remembered under
        the checkpoint's files (:func:`~instir.retrieval.model_files.remembered`), so a warm rerun loads
        no model."""
        if self._description is None:
            self._description = remembered(self.cache.root, [_local_folder(self.model_id, self.revision)],
                                           {**self._options, "backend": BACKEND},
                                           lambda: self.encoder.describe())
        return self._description

    def params(self) -> dict:
        """Parameters recorded in run metadata."""
        return {**self.encoder_description(), "similarity": "maxsim (exact, exhaustive)", "index": None,
                "batch_size": self._options["batch_size"], "source": _SRC}

    def search(self, benchmark: Benchmark, template: Template, k: int = 100) -> Run:
        """Top-``k`` documents per query by exact MaxSim over the cached token vectors."""
        queries, docs = cached_vectors(self, benchmark, template, "ColBERT",
                                       lambda texts: list(self.encoder.queries(texts)),
                                       lambda texts: self.encoder.documents(texts), verb="encoding")
        query_maxlen = self.encoder_description()["query_maxlen"]
        q_matrix = np.asarray(queries.tokens).reshape(len(queries), query_maxlen, -1)
        meta = search_meta(self, template, queries, docs, document_tokens=int(docs.tokens.shape[0]),
                           model_calls=self._encoder.forward_calls if self._encoder is not None else 0)
        ranks = tie_ranks(benchmark.corpus.ids())
        return run_from_top_k(benchmark, lambda depth: maxsim_top_k(
            q_matrix, docs, depth, ranks=ranks, device=self.device, progress=self.progress), k, meta)
