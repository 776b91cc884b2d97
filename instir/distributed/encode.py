"""Sharded corpus encoding with Ray Data: the missing chunks of a corpus's embedding-cache
entry are encoded by a pool of actors (one model per actor, a GPU each when the system asks
for one), one task per chunk, and the driver writes each chunk into the cache as its vectors
arrive, then joins the entry exactly as the single-process path does. The driver writes, so
the cache folder need not be shared by the nodes; a lost worker costs only its chunk; the
vectors are the single-process ones (the same :meth:`DenseRetriever.encode_documents`).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from instir.benchmarks.types import Corpus
from instir.formatting import Template
from instir.progress import tqdm
from instir.retrieval import Retriever
from instir.retrieval.embedding_cache import MANIFEST, MATRIX, CorpusTexts, Embeddings


def dense_part(retriever: Retriever):
    """The dense retriever inside ``retriever`` (itself, or a hybrid's dense half), else None."""
    from instir.retrieval.dense import DenseRetriever

    for part in (retriever, getattr(retriever, "dense", None)):
        if isinstance(part, DenseRetriever):
            return part
    return None


class _ChunkEncoder:
    """A Ray Data actor: builds the retriever once, then encodes whole chunks (one per row)."""

    def __init__(self, factory: Callable[[], Retriever], template: Template, subset: str):
        self.dense = dense_part(factory())
        self.template, self.subset = template, subset

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        vectors = [self.dense.encode_documents(self.template, self.subset, json.loads(items)).astype(np.float32)
                   for items in batch["items"]]
        return {"index": np.asarray(batch["index"]),
                "rows": np.array([v.shape[0] for v in vectors]),
                "dim": np.array([v.shape[1] for v in vectors]),
                "vectors": np.array([v.tobytes() for v in vectors], dtype=object),
                "pid": np.full(len(vectors), os.getpid())}


def _document_encoder(factory: Callable[[], Retriever], template: Template, subset: str) -> dict:
    """The cache's description of the documents' encoder (it loads the model)."""
    return dense_part(factory()).document_encoder(template, subset)


def encoder_pool(num_gpus: float = 0, actors: int | None = None) -> tuple[int, int]:
    """(actors, CPUs per actor) for encoding with a model that asks ``num_gpus`` per actor (Ray
    must be initialised). With GPUs: one actor per GPU share, one CPU each. On CPUs only: one
    actor per alive node, with as many CPUs as the smallest node has, so torch spreads each
    chunk over a node's cores and no extra actor loads the model again. ``actors`` sets the
    count; the CPUs are then shared among them."""
    import ray

    nodes = [node["Resources"] for node in ray.nodes() if node.get("Alive")]
    if num_gpus:
        return actors or max(1, int(sum(n.get("GPU", 0) for n in nodes) // num_gpus)), 1
    cpus = [int(n.get("CPU", 1)) for n in nodes] or [1]
    count = actors or len(cpus)
    return count, max(1, min(min(cpus), sum(cpus) // count))


@dataclass
class ShardedEncoding:
    """What :func:`encode_corpus` did: the joined embeddings, every chunk write it made as
    (chunk index, pid of the actor that encoded it), and the chunks that were already there."""

    embeddings: Embeddings
    written: list[tuple[int, int]]
    present: list[int]


def encode_corpus(factory: Callable[[], Retriever], corpus: Corpus, template: Template, subset: str = "", *,
                  actors: int = 2, num_gpus: float = 0, num_cpus: float = 1) -> ShardedEncoding:
    """Encode ``corpus``'s missing cache chunks on a pool of ``actors`` Ray actors and join the
    entry; returns the embeddings the single-process ``embed_corpus`` would return. Ray must
    be initialised (``ray.init`` or :func:`instir.distributed.sweep.ray_session`)."""
    import ray.data

    dense = dense_part(factory())  # its cache and name; its model stays unloaded here
    if dense is None:
        raise ValueError("sharded encoding needs a dense or hybrid system")
    cache = dense.cache
    # the cache key holds the model's fingerprint: a worker with the encoders' resources loads
    # the model for it, not the driver (a 7B model on a head node without a GPU)
    describe = ray.remote(_document_encoder).options(num_gpus=num_gpus, num_cpus=num_cpus)
    encoder = ray.get(describe.remote(factory, template, subset))
    texts = CorpusTexts(corpus)
    key = cache.key(encoder, texts)
    entry = cache.entry_dir(dense.name, key)
    n_chunks = math.ceil(len(corpus) / cache.chunk_size)
    done = (entry / MANIFEST).is_file() and (entry / MATRIX).is_file()
    present = [] if done else [i for i in range(n_chunks)
                               if cache.has_chunk(entry, i, min(cache.chunk_size, len(corpus) - i * cache.chunk_size))]
    missing = [] if done else sorted(set(range(n_chunks)) - set(present))
    written: list[tuple[int, int]] = []
    if missing:
        items = list(texts)
        rows = [{"index": i, "items": json.dumps(items[i * cache.chunk_size:(i + 1) * cache.chunk_size],
                                                 ensure_ascii=False)} for i in missing]
        ds = ray.data.from_items(rows, override_num_blocks=len(rows)).map_batches(
            _ChunkEncoder, fn_constructor_kwargs={"factory": factory, "template": template, "subset": subset},
            batch_size=1, compute=ray.data.ActorPoolStrategy(size=max(1, min(actors, len(rows)))),
            num_gpus=num_gpus, num_cpus=num_cpus)  # Ray Data restarts lost actors and retries their tasks
        with tqdm(total=len(missing), desc=f"encoding {len(corpus)} documents on {actors} actors",
                  unit="chunk", disable=not dense.progress) as bar:
            for batch in ds.iter_batches(batch_size=1, batch_format="numpy", prefetch_batches=0):
                for i, n, dim, raw, pid in zip(batch["index"], batch["rows"], batch["dim"], batch["vectors"],
                                               batch["pid"]):
                    vectors = np.frombuffer(raw, dtype=np.float32).reshape(int(n), int(dim))
                    chunk = items[int(i) * cache.chunk_size:(int(i) + 1) * cache.chunk_size]
                    if cache.write_chunk(entry, int(i), chunk, lambda _chunk, v=vectors: v):
                        written.append((int(i), int(pid)))
                    bar.update(1)
    embeddings = cache.embed(encoder, texts, lambda items: dense.encode_documents(template, subset, items),
                             label=dense.name, desc="joining chunks")
    return ShardedEncoding(embeddings, written, present)
