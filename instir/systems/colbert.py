"""Late-interaction ColBERTv2 as InstructIR ran it, reimplemented on plain transformers.

The authors (kaistAI/InstructIR ``eval/eval_instructir_colbert.py``, ``main``) index the corpus
with colbert-ai's ``Indexer`` (checkpoint ``colbert-ir/colbertv2.0``, ``ColBERTConfig(doc_maxlen=300,
nbits=2, kmeans_niters=4)``) and search the top 100 with its ``Searcher``. colbert-ai itself
does not load on transformers 5 (``HF_ColBERT.__init__`` calls ``init_weights()``, which fails
there), so this module reproduces its encoder step by step (stanford-futuredata/ColBERT, files
under ``colbert/modeling/``):

- model (``hf_colbert.py``, ``class_factory``/``HF_ColBERT``): the checkpoint's BERT
  (``AutoModel``, weights under ``bert.``) and a bias-free linear projection hidden → ``dim``
  (``linear.weight``, 768 → 128);
- query (``tokenization/query_tokenization.py``, ``QueryTokenizer.tensorize``): the text is
  tokenised to ``query_maxlen - 1`` tokens (``[CLS] … [SEP]``, truncated, padded to that length),
  the ``[Q]`` marker (token ``[unused0]``) is inserted after ``[CLS]``, every ``[PAD]`` becomes
  ``[MASK]`` (query augmentation), and the ``[MASK]`` positions are attended to only when
  ``attend_to_mask_tokens`` (False for colbertv2.0); all ``query_maxlen`` output vectors are
  kept (``colbert.py``, ``ColBERT.query``);
- document (``tokenization/doc_tokenization.py``, ``DocTokenizer.tensorize``): tokenised to
  ``doc_maxlen - 1`` tokens, the ``[D]`` marker (``[unused1]``) inserted after ``[CLS]``; output
  vectors of padding and of the punctuation skiplist (the first token id of each character of
  ``string.punctuation``, ``ColBERT.__init__`` with ``mask_punctuation``) are dropped
  (``ColBERT.doc``, ``keep_dims=False``);
- every kept vector is L2-normalised after the projection, and a query–document score is
  MaxSim: the sum over query vectors of the largest dot product with any document vector
  (``colbert_score``/``colbert_score_reduce``).

Settings not given explicitly come from the checkpoint's ``artifact.metadata`` (colbert-ai's
``ColBERTConfig.load_from_checkpoint``), else colbert-ai's defaults (``colbert/infra/config/
settings.py``); ``doc_maxlen`` defaults to InstructIR's 300.

Quirk kept on purpose: InstructIR's ColBERT query text is ``instruction [SEP] query``
(template ``instructir``) and colbertv2.0's ``query_maxlen`` is 32, so the text is cut to 29
word pieces — most instructions are longer, and the query itself is usually cut away. That is
what the authors ran; ``query_maxlen=128`` (:data:`LONG_QUERY_MAXLEN`, the named variant
``colbertv2.0-q128``) keeps the whole InstructIR query (sample: median 56 words, at most 81).

Search is exact and exhaustive: every document's token vectors are scored (blocked matrix
products + a per-document max), not colbert-ai's PLAID index (centroid pruning, then scores from
2-bit compressed residuals). Ranks are therefore at least as faithful to the model as the
authors' approximation, and scores differ from theirs in low digits (see the ``colbert-plaid``
divergence). Cost (estimates, not measured on the full corpus): the packed token matrix holds
``tokens × dim × 4`` bytes — InstructIR's 16,072 passages average ~63 words and marks in the
bundled sample, so ~75 kept word pieces each, ~1.2 M vectors, ~0.6 GB in float32 — and is read
once per search from the memory-mapped cache; scoring costs ``queries × query_maxlen × corpus
tokens × dim`` multiply-adds, ~5·10^13 for InstructIR's 9,906 queries: minutes on a GPU
(``device="cuda"``), tens of minutes to hours on a few CPU cores. There is no PLAID index, no
centroid pruning and no residual compression (``nbits=2`` is not reproduced); for corpora of
millions of passages use colbert-ai's PLAID on a GPU instead. ``device`` places the encoder
(default: CUDA when available) and the MaxSim (default: CPU). Encoding runs in float32
(colbert-ai uses float16 autocast on GPU).
"""

from __future__ import annotations

import json
import string
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from instir.benchmarks.types import Benchmark, Doc
from instir.formatting import Template, shared_subset
from instir.progress import tqdm
from instir.retrieval.dense import weights_fingerprint
from instir.retrieval.embedding_cache import DEFAULT_CHUNK_SIZE, CorpusTexts
from instir.retrieval.runs import Run
from instir.retrieval.token_cache import TokenEmbeddingCache, TokenEmbeddings
from instir.retrieval.topk import merge_top_k, run_from_top_k, top_k_block

if TYPE_CHECKING:
    import torch

#: The checkpoint InstructIR ran.
COLBERTV2 = "colbert-ir/colbertv2.0"
#: InstructIR's ``--doc_maxlen`` (``eval_instructir_colbert.py``).
INSTRUCTIR_DOC_MAXLEN = 300
#: ``query_maxlen`` of the long-query variant: room for a whole InstructIR instruction + query.
LONG_QUERY_MAXLEN = 128
#: colbert-ai's defaults (``colbert/infra/config/settings.py``) for what the checkpoint may set.
COLBERT_DEFAULTS = {"query_maxlen": 32, "attend_to_mask_tokens": False, "mask_punctuation": True,
                    "query_token_id": "[unused0]", "doc_token_id": "[unused1]", "dim": 128}
_SRC = ("kaistAI/InstructIR eval/eval_instructir_colbert.py (main); stanford-futuredata/ColBERT colbert/modeling/"
        "{colbert.py ColBERT.query/doc/colbert_score, tokenization/query_tokenization.py QueryTokenizer.tensorize, "
        "tokenization/doc_tokenization.py DocTokenizer.tensorize, hf_colbert.py HF_ColBERT}")


def checkpoint_settings(folder: str | Path) -> dict:
    """colbert-ai's settings of a checkpoint folder: :data:`COLBERT_DEFAULTS` updated with its
    ``artifact.metadata`` (absent: the defaults)."""
    settings = dict(COLBERT_DEFAULTS)
    path = Path(folder) / "artifact.metadata"
    if path.is_file():
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
        except ValueError as err:
            raise ValueError(f"{path}: not JSON ({err})") from None
        settings.update({k: meta[k] for k in COLBERT_DEFAULTS if k in meta})
    return settings


def _local_folder(model: str, revision: str | None) -> Path:
    """The checkpoint as a local folder (a path, or the Hugging Face snapshot of an id)."""
    if Path(model).is_dir():
        return Path(model)
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(model, revision=revision))
    except Exception as err:  # noqa: BLE001 - hub raises many kinds (offline, missing repo, gated)
        raise RuntimeError(f"ColBERT checkpoint {model!r} (revision {revision or 'main'}) is neither a local folder "
                           f"nor available from Hugging Face here ({type(err).__name__}: {err})") from None


def _linear_weight(folder: Path) -> "torch.Tensor":
    """``linear.weight`` of a colbert-ai checkpoint (``model.safetensors`` or ``pytorch_model.bin``)."""
    import torch

    if (folder / "model.safetensors").is_file():
        from safetensors import safe_open

        with safe_open(str(folder / "model.safetensors"), framework="pt") as fh:
            if "linear.weight" in fh.keys():
                return fh.get_tensor("linear.weight")
    elif (folder / "pytorch_model.bin").is_file():
        state = torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
        if "linear.weight" in state:
            return state["linear.weight"]
    raise ValueError(f"{folder}: no 'linear.weight' in model.safetensors or pytorch_model.bin — not a colbert-ai "
                     "checkpoint (HF_ColBERT)")


def _load_bert(folder: Path) -> "torch.nn.Module":
    """The checkpoint's encoder (``AutoModel``: the weights under ``bert.``), float32, eval mode.
    ``linear.weight`` is expected beside it (loaded by :func:`_linear_weight`), so the loader's
    report of it as unexpected is silenced; a missing encoder weight is an error."""
    import torch
    import transformers

    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    try:
        bert, info = transformers.AutoModel.from_pretrained(folder, dtype=torch.float32, output_loading_info=True)
    finally:
        transformers.logging.set_verbosity(verbosity)
    missing = [k for k in info.get("missing_keys", ()) if not k.startswith("pooler.")]
    if missing:
        raise ValueError(f"{folder}: the checkpoint lacks encoder weights {sorted(missing)[:5]} — not a colbert-ai "
                         "checkpoint (HF_ColBERT)")
    return bert.eval()


class ColBERTEncoder:
    """colbert-ai's ``Checkpoint`` encoder on plain transformers (module docstring): ``queries``
    gives ``(n, query_maxlen, dim)``, ``documents`` one ``(kept tokens, dim)`` matrix each.
    ``forward_calls`` counts model forward passes."""

    def __init__(self, model: str = COLBERTV2, *, revision: str | None = None, query_maxlen: int | None = None,
                 doc_maxlen: int = INSTRUCTIR_DOC_MAXLEN, attend_to_mask_tokens: bool | None = None,
                 mask_punctuation: bool | None = None, batch_size: int = 64, device: str | None = None):
        import torch
        from transformers import AutoTokenizer

        self.model_id, self.revision = model, revision
        self.folder = _local_folder(model, revision)
        settings = checkpoint_settings(self.folder)
        for key, value in (("query_maxlen", query_maxlen), ("attend_to_mask_tokens", attend_to_mask_tokens),
                           ("mask_punctuation", mask_punctuation)):
            if value is not None:
                settings[key] = value
        settings["doc_maxlen"] = doc_maxlen
        self.settings = settings
        self.tokenizer = AutoTokenizer.from_pretrained(self.folder)
        self.bert = _load_bert(self.folder)
        max_positions = getattr(self.bert.config, "max_position_embeddings", 512)
        for key in ("query_maxlen", "doc_maxlen"):
            if not isinstance(settings[key], int) or not 4 <= settings[key] <= max_positions:
                raise ValueError(f"{key} must be a whole number from 4 to {max_positions} (the model's positions); "
                                 f"got {settings[key]!r}")
        weight = _linear_weight(self.folder).to(torch.float32)
        if weight.shape[1] != self.bert.config.hidden_size:
            raise ValueError(f"{self.folder}: linear.weight is {tuple(weight.shape)}, the model's hidden size is "
                             f"{self.bert.config.hidden_size}")
        self.linear = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=False)
        self.linear.weight.data.copy_(weight)
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.bert.to(self.device)
        self.linear.to(self.device)
        tok = self.tokenizer
        self.q_marker = tok.convert_tokens_to_ids(settings["query_token_id"])
        self.d_marker = tok.convert_tokens_to_ids(settings["doc_token_id"])
        self.skiplist = frozenset(tok.encode(symbol, add_special_tokens=False)[0] for symbol in string.punctuation) \
            if settings["mask_punctuation"] else frozenset()
        self.batch_size = max(1, batch_size)
        self.fingerprint = weights_fingerprint(
            f"{type(self.bert).__name__}|{self.bert.config.to_json_string()}|{settings}",
            tok, {**self.bert.state_dict(), "linear.weight": self.linear.weight})
        self.forward_calls = 0

    @property
    def query_maxlen(self) -> int:
        return self.settings["query_maxlen"]

    @property
    def doc_maxlen(self) -> int:
        return self.settings["doc_maxlen"]

    def describe(self) -> dict:
        """Everything that changes the vectors (part of every cache key)."""
        return {"backend": "colbert (transformers reimplementation of colbert-ai Checkpoint)", "model": self.model_id,
                "revision": self.revision, "fingerprint": self.fingerprint, "precision": "float32",
                **{k: self.settings[k] for k in sorted(self.settings)}}

    def _forward(self, ids: "torch.Tensor", mask: "torch.Tensor") -> "torch.Tensor":
        """Projected, not yet normalised token vectors (``ColBERT.query``/``doc`` up to ``linear``)."""
        import torch

        with torch.inference_mode():
            self.forward_calls += 1
            hidden = self.bert(input_ids=ids.to(self.device), attention_mask=mask.to(self.device))[0]
            return self.linear(hidden)

    @staticmethod
    def _with_marker(tensor: "torch.Tensor", marker: int) -> "torch.Tensor":
        """``marker`` inserted after the first column (colbert-ai's ``_insert_prefix_token``)."""
        import torch

        return torch.cat([tensor[:, :1], torch.full_like(tensor[:, :1], marker), tensor[:, 1:]], dim=1)

    def query_inputs(self, texts: Sequence[str]) -> tuple["torch.Tensor", "torch.Tensor"]:
        """``(input_ids, attention_mask)`` as ``QueryTokenizer.tensorize`` builds them."""
        tok = self.tokenizer
        obj = tok(list(texts), padding="max_length", truncation=True, max_length=self.query_maxlen - 1,
                  return_tensors="pt")
        ids = self._with_marker(obj["input_ids"], self.q_marker)
        mask = self._with_marker(obj["attention_mask"], 1)
        ids[ids == tok.pad_token_id] = tok.mask_token_id
        if self.settings["attend_to_mask_tokens"]:
            mask[ids == tok.mask_token_id] = 1
        return ids, mask

    def queries(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), query_maxlen, dim)`` unit vectors (``Checkpoint.queryFromText``)."""
        import torch

        out = []
        for start in range(0, len(texts), self.batch_size):
            ids, mask = self.query_inputs(texts[start:start + self.batch_size])
            q = self._forward(ids, mask) * (ids != self.tokenizer.pad_token_id).unsqueeze(2).to(self.device)
            out.append(torch.nn.functional.normalize(q, p=2, dim=2).float().cpu().numpy())
        return np.concatenate(out)

    def document_inputs(self, texts: Sequence[str]) -> tuple["torch.Tensor", "torch.Tensor"]:
        """``(input_ids, attention_mask)`` as ``DocTokenizer.tensorize`` builds them."""
        obj = self.tokenizer(list(texts), padding="longest", truncation="longest_first",
                             max_length=self.doc_maxlen - 1, return_tensors="pt")
        return self._with_marker(obj["input_ids"], self.d_marker), self._with_marker(obj["attention_mask"], 1)

    def documents(self, texts: Sequence[str]) -> list[np.ndarray]:
        """One ``(kept tokens, dim)`` matrix of unit vectors per text, in order: padding and
        skiplist tokens dropped (``Checkpoint.docFromText(keep_dims=False)``). Texts are batched
        by token length, as colbert-ai batches them."""
        import torch

        lengths = [len(ids) for ids in self.tokenizer(list(texts), add_special_tokens=False, truncation=True,
                                                      max_length=self.doc_maxlen)["input_ids"]]
        order = np.argsort(lengths, kind="stable")
        out: list[np.ndarray | None] = [None] * len(texts)
        skip = torch.tensor(sorted(self.skiplist), dtype=torch.long)
        for start in range(0, len(texts), self.batch_size):
            batch = order[start:start + self.batch_size]
            ids, mask = self.document_inputs([texts[i] for i in batch])
            keep = (ids != self.tokenizer.pad_token_id) & ~torch.isin(ids, skip)
            d = self._forward(ids, mask) * keep.unsqueeze(2).to(self.device)
            d = torch.nn.functional.normalize(d, p=2, dim=2).float().cpu()
            for row, i in enumerate(batch):
                out[i] = d[row][keep[row]].numpy()
        return out  # type: ignore[return-value]


def maxsim_top_k(queries: np.ndarray, docs: TokenEmbeddings, k: int, *, token_block: int = 8192,
                 query_block: int = 64, device: str | None = None,
                 progress: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` documents by MaxSim for ``queries`` ``(n, Lq, dim)`` over packed document
    tokens: ``(scores, indices)``, each ``(n, min(k, n_docs))``, score descending, ties by
    document index ascending. Documents are scored ``token_block`` tokens at a time (whole
    documents), ``query_block`` queries at a time, so at most ``query_block × Lq × token_block``
    similarities are held (16 M floats, 64 MB, by default)."""
    import torch

    if k < 1:
        raise ValueError(f"k must be positive, got {k}")
    n_q, n_qtok, dim = queries.shape
    offsets, n_docs = docs.offsets, len(docs)
    k_out = min(k, n_docs)
    dev = torch.device(device or "cpu")
    q_all = torch.from_numpy(np.array(queries, dtype=np.float32)).to(dev)
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
            v, i = top_k_block(best_tok.view(q.shape[0], n_qtok, -1).sum(1), kk)
            vals.append(v.cpu())
            idx.append(i.cpu() + d0)
        best_vals, best_idx = merge_top_k(best_vals, best_idx, torch.cat(vals), torch.cat(idx), k_out)
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
    def from_card(cls, card: Any, **options: Any) -> "ColBERTRetriever":
        """From a system card (duck-typed): ``model``, ``name``, ``revision``, ``query_max_length``,
        ``doc_max_length`` and ``params`` (``attend_to_mask_tokens``, ``mask_punctuation``,
        ``batch_size``); ``options`` (cache_dir, device, progress …) pass through. The card's
        ``template`` is for :func:`instir.retrieval.retrieve`, not for the retriever."""
        params = dict(getattr(card, "params", None) or {})
        settings: dict[str, Any] = {k: params[k] for k in ("attend_to_mask_tokens", "mask_punctuation", "batch_size")
                                    if k in params}
        if getattr(card, "query_max_length", None) is not None:
            settings["query_maxlen"] = card.query_max_length
        if getattr(card, "doc_max_length", None) is not None:
            settings["doc_maxlen"] = card.doc_max_length
        return cls(card.model, name=card.name, revision=getattr(card, "revision", None), **settings, **options)

    @classmethod
    def for_instructir(cls, long_query: bool = False, model: str = COLBERTV2, **options: Any) -> "ColBERTRetriever":
        """InstructIR's ColBERTv2 row as the authors ran it (``colbertv2.0``: the checkpoint's
        ``query_maxlen`` 32, ``doc_maxlen`` 300), or with ``long_query`` the named variant
        ``colbertv2.0-q128`` (``query_maxlen`` :data:`LONG_QUERY_MAXLEN`, the whole
        ``instruction [SEP] query`` kept); ``options`` pass through."""
        base = model.rstrip("/").split("/")[-1]
        if long_query:
            return cls(model, name=f"{base}-q{LONG_QUERY_MAXLEN}", query_maxlen=LONG_QUERY_MAXLEN,
                       doc_maxlen=INSTRUCTIR_DOC_MAXLEN, **options)
        return cls(model, name=base, doc_maxlen=INSTRUCTIR_DOC_MAXLEN, **options)

    @property
    def encoder(self) -> ColBERTEncoder:
        """The encoder, loaded on first use."""
        if self._encoder is None:
            self._encoder = ColBERTEncoder(self.model_id, **self._options)
        return self._encoder

    def encoder_description(self) -> dict:
        """What keys the caches: the checkpoint, its weights' fingerprint and the colbert settings.
        Computed once from the loaded encoder, then kept in ``<cache>/colbert-describe`` (keyed by
        the checkpoint folder's files and this retriever's options) so a warm rerun loads no model."""
        if self._description is None:
            self._description = self._cached_description()
        return self._description

    def _cached_description(self) -> dict:
        import hashlib

        from instir import atomic

        folder = _local_folder(self.model_id, self.revision)
        stamp = sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir() if p.is_file())
        identity = json.dumps([str(folder.resolve()), stamp, self._options], default=str)
        key = hashlib.sha256(identity.encode()).hexdigest()
        path = self.cache.root / "colbert-describe" / f"{key[:32]}.json"
        if path.is_file():
            try:
                return json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                path.unlink(missing_ok=True)
        description = self.encoder.describe()
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(path, json.dumps(description, sort_keys=True))
        return description

    def params(self) -> dict:
        """Parameters recorded in run metadata."""
        return {**self.encoder_description(), "similarity": "maxsim (exact, exhaustive)", "index": None,
                "batch_size": self._options["batch_size"], "source": _SRC}

    def search(self, benchmark: Benchmark, template: Template, k: int = 100) -> Run:
        """Top-``k`` documents per query by exact MaxSim over the cached token vectors."""
        inputs = template.format_queries(benchmark.queries.values())
        if any(not isinstance(x, str) for x in inputs):
            raise ValueError(f"template {template.name!r} makes [instruction, text] pairs; ColBERT takes one string "
                             "per query (use a plain template such as 'instructir')")
        described = template.describe()
        subset = shared_subset(benchmark)
        base = self.encoder_description()
        queries = self.cache.embed({**base, "kind": "queries"}, list(inputs),
                                   lambda texts: list(self.encoder.queries(texts)), label=self.name,
                                   desc="encoding queries")
        doc_encoder = {**base, "kind": "documents", "doc_format": described["doc"],
                       "domain": described["domains"].get(subset, "")}

        def encode_docs(items: list[list[str]]) -> list[np.ndarray]:
            return self.encoder.documents([template.format_doc(Doc("", text, title), subset) for title, text in items])

        docs = self.cache.embed(doc_encoder, CorpusTexts(benchmark.corpus), encode_docs, label=self.name,
                                desc="encoding corpus")
        q_matrix = np.asarray(queries.tokens).reshape(len(queries), base["query_maxlen"], -1)
        meta = {"retriever": {"name": self.name, "family": self.family, "params": self.params()},
                "template": template.name,
                "embeddings": {"queries_encoded": queries.encoded, "documents_encoded": docs.encoded,
                               "document_tokens": int(docs.tokens.shape[0]), "query_cache": str(queries.path),
                               "document_cache": str(docs.path), "document_cache_key": docs.key,
                               "model_calls": self._encoder.forward_calls if self._encoder is not None else 0}}
        return run_from_top_k(benchmark, lambda depth: maxsim_top_k(
            q_matrix, docs, depth, device=self.device, progress=self.progress), k, meta)
