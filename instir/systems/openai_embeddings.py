"""Dense retrieval over an OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, Azure's v1
API, vLLM, llama.cpp server, …), as IFIR ran OpenAI-v3-small/-large.

Recipe (SighingSnow/IFIR ``src/utils/embeddings.py``, ``OpenAIEmbedding``): every text — documents
*and* queries (``embed_query`` calls ``embed_documents``) — is cut by ``segment_text`` into windows
of 512 tokens starting every 384 tokens (tiktoken's encoding for the model; each window decoded
back to text, empty ones skipped), each window is embedded, and the text's vector is the plain
mean of its window vectors (not re-normalised); search is cosine (the Elasticsearch store's
``distance_strategy="COSINE"``, ``src/utils/constant.py``). Search here is exact, not
Elasticsearch's approximate kNN.

Differences from the authors' client (``src/utils/openai_utils.py``), which change no vector:
the authors send one window per request (100 requests/minute, up to 20 tries, a failed request
becoming the string ``"Invalid Message"`` inside the matrix); here ``batch_size`` windows go in
one request, ``concurrency`` requests run at once, 408/409/429/5xx answers are retried honouring
``Retry-After`` (:mod:`instir.http_retry`), and a request that fails for good stops the run — the
embedding cache keeps every finished chunk (``batch_size`` x ``concurrency`` texts, one round of requests), so
the rerun resumes and pays again for no more than the round that was in flight.

Tokenizer: tiktoken's encoding for the model (it downloads its BPE file on first use; offline it
must already be in ``TIKTOKEN_CACHE_DIR``), or any ``tokenizer=`` with its ``encode``/``decode``.

Secrets: the key is read from the environment variable *named* ``api_key_env`` at request time
and sent only in the request header; it is never stored, logged or part of any cache key.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from instir.benchmarks.types import Benchmark
from instir.errors import UsageError, UserError
from instir.extras import install_hint
from instir.formatting import Template
from instir.http_retry import ERROR_BODY_CHARS, Endpoint, RequestFailed, RetryPolicy, check_concurrency
from instir.progress import tqdm
from instir.retrieval.dense import cached_vectors, search_meta
from instir.retrieval.embedding_cache import EmbeddingCache
from instir.retrieval.runs import Run
from instir.retrieval.topk import rank_by_embeddings
from instir.retrieval.windows import (
    AUTHORS_CUT,
    CLEAN_CUT,
    IFIR_STRIDE,
    IFIR_WINDOW,
    encode_window_means,
    ifir_windows,
    tiktoken_adapter,
)

_SRC = "SighingSnow/IFIR src/utils/embeddings.py OpenAIEmbedding (segment_text, embed_documents, embed_query)"


class EmbeddingsRequestFailed(UserError, RuntimeError):
    """A request the server refused or never answered, after its retries: one line naming the URL and why (a wrong
    ``base_url``, a server that is down, a key it refuses); the vectors of finished chunks stay in the cache."""


def tiktoken_tokenizer(model: str) -> Any:
    """``tiktoken.encoding_for_model(model)``, with one clear line when it cannot load."""
    try:
        import tiktoken
    except ModuleNotFoundError:
        raise RuntimeError(f"windowing OpenAI inputs needs tiktoken ({install_hint('tiktoken')}) or a "
                           "tokenizer= argument") from None
    try:
        return tiktoken.encoding_for_model(model)
    except Exception as err:  # noqa: BLE001 - tiktoken raises KeyError, requests/OS errors offline
        raise RuntimeError(f"tiktoken could not load the encoding of {model!r} ({type(err).__name__}: {err}); "
                           "it downloads its BPE file on first use — offline, put it in TIKTOKEN_CACHE_DIR") from None


class OpenAIEmbeddingClient:
    """Batched, concurrent, retrying client of an OpenAI-compatible ``/embeddings`` endpoint.

    ``base_url`` ends before ``/embeddings`` (``https://api.openai.com/v1``,
    ``http://127.0.0.1:8000/v1``); it, ``api_key_env``, ``auth_header``, ``query_params`` and ``timeout_s``
    make the :attr:`endpoint` (:class:`~instir.http_retry.Endpoint`, the judge's rules). ``batch_size`` texts
    per request, ``concurrency`` requests
    at a time; ``dimensions`` is sent when set (text-embedding-3 shortening). ``requests``
    counts requests that succeeded.
    """

    def __init__(self, model: str, base_url: str = "https://api.openai.com/v1", *,
                 api_key_env: str = "OPENAI_API_KEY", auth_header: str = "Authorization",
                 query_params: Mapping[str, str] | None = None, dimensions: int | None = None, batch_size: int = 256,
                 concurrency: int = 4, timeout_s: float = 60.0, policy: RetryPolicy = RetryPolicy(),
                 progress: bool = True):
        self.model = model
        self.endpoint = Endpoint(base_url, api_key_env=api_key_env, auth_header=auth_header,
                                 query_params=query_params, timeout_s=timeout_s)
        self.dimensions = dimensions
        self.batch_size = max(1, batch_size)
        self.concurrency = check_concurrency(concurrency)
        self.policy = policy
        self.progress = progress
        self.requests = 0
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (f"OpenAIEmbeddingClient(model={self.model!r}, base_url={self.endpoint.base_url!r}, "
                f"api_key_env={self.endpoint.api_key_env!r})")

    def _embed_batch(self, client: httpx.Client, texts: list[str]) -> np.ndarray:
        body: dict[str, Any] = {"model": self.model, "input": texts}
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        try:
            response = self.endpoint.post(client, "/embeddings", body, policy=self.policy, what="embeddings request")
        except RequestFailed as err:
            raise EmbeddingsRequestFailed(f"{self.endpoint.base_url}/embeddings ({self.model}): {err}") from None
        try:
            data = sorted(response.json()["data"], key=lambda item: item["index"])
            vectors = np.asarray([item["embedding"] for item in data], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as err:
            raise RuntimeError(f"{self.endpoint.base_url}/embeddings returned a malformed body ({type(err).__name__}: "
                               f"{err}): {self.endpoint.scrub(response.text)[:ERROR_BODY_CHARS]}") from None
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise RuntimeError(f"{self.endpoint.base_url}/embeddings returned "
                               f"{vectors.shape[0] if vectors.ndim else 0} vectors for {len(texts)} inputs")
        with self._lock:
            self.requests += 1
        return vectors

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One float32 row per text, in order."""
        texts = list(texts)
        if not texts:
            raise ValueError("nothing to embed (no texts)")
        batches = [texts[i:i + self.batch_size] for i in range(0, len(texts), self.batch_size)]
        out: list[np.ndarray | None] = [None] * len(batches)
        with self.endpoint.client() as client, \
                ThreadPoolExecutor(max_workers=self.concurrency) as pool, \
                tqdm(total=len(texts), desc=f"embedding ({self.model})", unit="text",
                     disable=not self.progress or len(batches) < 2) as bar:
            futures = [pool.submit(self._embed_batch, client, batch) for batch in batches]
            try:
                for i, fut in enumerate(futures):
                    out[i] = fut.result()
                    bar.update(len(batches[i]))
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
        return np.concatenate(out)  # type: ignore[arg-type]


class OpenAIEmbeddingsRetriever:
    """Follows :class:`instir.retrieval.Retriever`: IFIR's OpenAI-embeddings recipe (module
    docstring) with vectors in the :class:`~instir.retrieval.embedding_cache.EmbeddingCache`.

    ``tokenizer`` (with ``tokenizer_name``, which keys the cache) replaces tiktoken;
    ``windows=False`` sends whole texts (one vector each)."""

    family = "dense"

    def __init__(self, model: str = "text-embedding-3-small", base_url: str = "https://api.openai.com/v1", *,
                 name: str | None = None, api_key_env: str = "OPENAI_API_KEY", auth_header: str = "Authorization",
                 query_params: Mapping[str, str] | None = None, dimensions: int | None = None,
                 windows: bool = True, window: int = IFIR_WINDOW, stride: int = IFIR_STRIDE,
                 tokenizer: Any = None, tokenizer_name: str | None = None,
                 similarity: str = "cosine", batch_size: int = 256, concurrency: int = 4,
                 timeout_s: float = 60.0, policy: RetryPolicy = RetryPolicy(),
                 cache: EmbeddingCache | str | Path | None = None, progress: bool = True):
        if tokenizer is not None and not tokenizer_name:
            raise ValueError("a custom tokenizer needs tokenizer_name (it keys the embedding cache)")
        if window < 1 or not 1 <= stride <= window:
            raise ValueError(f"need 1 <= stride <= window, got window={window}, stride={stride}")
        self.client = OpenAIEmbeddingClient(model, base_url, api_key_env=api_key_env, auth_header=auth_header,
                                            query_params=query_params, dimensions=dimensions,
                                            batch_size=batch_size, concurrency=concurrency, timeout_s=timeout_s,
                                            policy=policy, progress=progress)
        self.name = name or f"api-{model.rstrip('/').split('/')[-1]}"
        self.windows, self.window, self.stride = windows, window, stride
        self._tokenizer = tokenizer
        self.tokenizer_name = tokenizer_name or f"tiktoken:encoding_for_model({model})"
        self.similarity = similarity
        # a chunk is one round of requests in flight: what a stopped run had paid for is kept, but that round
        self.cache = cache if isinstance(cache, EmbeddingCache) else EmbeddingCache(
            cache, chunk_size=self.client.batch_size * self.client.concurrency, progress=progress)
        self.progress = progress

    @classmethod
    def card_settings(cls, card: Any) -> dict[str, Any]:
        """The constructor's settings a system card (duck-typed) gives: ``name``, ``similarity``, ``windowing``
        (``"ifir"``: IFIR's windows of 512 tokens every 384; empty: whole texts) and ``params`` (``base_url``,
        ``api_key_env`` — the variable's *name* —, ``auth_header``, ``query_params``, ``dimensions``,
        ``batch_size``, ``concurrency``)."""
        params = dict(getattr(card, "params", None) or {})
        windowing = getattr(card, "windowing", None) or ""
        if windowing == CLEAN_CUT:  # the clean cut needs the tokens' character offsets
            raise ValueError(f"system {card.name!r}: the openai-embeddings adapter cuts IFIR's windows "
                             f"(windowing = {AUTHORS_CUT!r}) or none, not {CLEAN_CUT!r}")
        settings: dict[str, Any] = {"name": card.name, "similarity": getattr(card, "similarity", None) or "cosine",
                                    "windows": windowing == AUTHORS_CUT}
        for key in ("base_url", "api_key_env", "auth_header", "query_params", "dimensions", "batch_size",
                    "concurrency"):
            if key in params:
                settings[key] = params[key]
        return settings

    @classmethod
    def from_card(cls, card: Any, **options: Any) -> "OpenAIEmbeddingsRetriever":
        """From a system card (duck-typed): its ``model`` and :meth:`card_settings`; ``options``
        (the constructor's others: tokenizer, cache, progress …; ``cache_dir`` for ``cache``, ``device`` ignored) pass
        through."""
        if "cache_dir" in options:  # the registry's name for where embeddings are cached
            if "cache" in options:
                raise UsageError(f"system {card.name!r}: give cache or cache_dir (the same option), not both")
            options["cache"] = options.pop("cache_dir")
        options.pop("device", None)  # an API: nothing runs here
        return cls(card.model, **cls.card_settings(card), **options)

    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None:
            self._tokenizer = tiktoken_tokenizer(self.client.model)
        return self._tokenizer

    def encoder_description(self) -> dict:
        """Everything that changes the vectors (part of every cache key; never the key itself)."""
        return {"backend": "openai-embeddings", "base_url": self.client.endpoint.base_url, "model": self.client.model,
                "dimensions": self.client.dimensions,
                "windows": [self.window, self.stride] if self.windows else None,
                "tokenizer": self.tokenizer_name if self.windows else None, "pooling": "mean of windows"}

    def params(self) -> dict:
        """Parameters recorded in run metadata (no secret: only the variable's name)."""
        client = self.client
        return {**self.encoder_description(), "similarity": self.similarity, "api_key_env": client.endpoint.api_key_env,
                "batch_size": client.batch_size, "concurrency": client.concurrency, "source": _SRC}

    def embed_texts(self, texts: Sequence[str]) -> np.ndarray:
        """One vector per text: the mean of its window vectors (whole text when windows are off)."""
        # a text without tokens has no IFIR windows (the authors averaged nothing): it is encoded whole
        pieces = [(ifir_windows(t, *tiktoken_adapter(self.tokenizer), self.window, self.stride) or [t]) if self.windows
                  else [t] for t in texts]
        return encode_window_means(pieces, self.client.embed)

    def search(self, benchmark: Benchmark, template: Template, k: int = 100) -> Run:
        """Top-``k`` documents per query by exact ``similarity`` (cosine unless set) over the cached vectors."""
        queries, docs = cached_vectors(self, benchmark, template, "an embeddings API", self.embed_texts,
                                       self.embed_texts, verb="embedding")
        meta = search_meta(self, template, queries, docs, requests=self.client.requests)
        return rank_by_embeddings(benchmark, queries.matrix, docs.matrix, k, self.similarity, meta,
                                  progress=self.progress)
