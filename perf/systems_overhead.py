"""Kit overhead of the system adapters over the bare library call (tiny models, this CPU).

Data: ``--queries`` queries and ``--docs`` passages of random words (48 per passage) from a
600-word vocabulary, which the tiny models' word-level tokenizers know. Models
(``tests/tiny_models.py``): a random Llama (hidden 32, 2 layers) + random LoRA, and
a random BERT of the same size; plus the bundled all-MiniLM-L6-v2. Every cold kit side is a
new system on an empty cache, its model loaded before the clock starts (a retriever keeps the last
corpus's vectors, so a reused one would encode nothing); that it encoded every document is asserted.

- ``peft-decoder`` (card RepLLaMA-7B: batch 4, batch-last pooling, corpus sorted by length):
  bare = the authors' loop (tokenise a batch, forward, ``[:, -1]``, normalise) + one matrix
  product + ``torch.topk``; kit = ``build_system(card).search`` (cache, exact top-k, Run);
- ``hf-mean-pool`` (card Contriever on the tiny BERT): bare = AutoModel + masked mean per
  batch of 64 + cosine top-k; kit as above;
- ``sentence-transformers`` (a MiniLM user card): the card-built retriever against today's
  ``DenseRetriever()``, in inputs (documents and queries) per second;
- ``bm25``: the kit's ``bm25`` adapter built from a card with IFIR's settings (k1 1.2, b 0.75, no
  stemmer, no stop words), on an empty index cache (build, store, search, Run), against bare bm25s
  (tokenise, index, ``retrieve``) with the same settings on the same texts. (The paper card
  ``BM25 (IFIR)`` runs Elasticsearch's BM25 on Lucene: ``perf/bm25_vs_lucene.py`` compares engines.)

The warm rerun (same cache) is timed and its model forward calls counted. Each side runs
``--repeat`` times, interleaved, after one uncounted warm-up round; medians are printed.

    python -m perf.systems_overhead [--docs 1000] [--queries 100] [--repeat 3] [--threads N]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from pathlib import Path

K = 100


def make_benchmark(n_docs: int, n_queries: int, seed: int = 0):
    """Random-word passages and queries, and the vocabulary."""
    import numpy as np

    from instir.benchmarks.types import Benchmark, Corpus, Doc, Query

    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(600)]
    docs = [Doc(f"d{j}", " ".join(rng.choice(vocab, size=48))) for j in range(n_docs)]
    queries = {f"q{i}": Query(f"q{i}", " ".join(rng.choice(vocab, size=6)), " ".join(rng.choice(vocab, size=12)),
                              subset="fiqa") for i in range(n_queries)}
    qrels = {qid: {f"d{i}": 1} for i, qid in enumerate(queries)}
    return Benchmark("ifir-overhead/fiqa", "generated", "local", "instructed", Corpus.from_docs(docs), queries,
                     qrels), vocab


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _topk(q, d, k, cosine: bool):
    import torch

    if cosine:
        q, d = torch.nn.functional.normalize(q, dim=1), torch.nn.functional.normalize(d, dim=1)
    return torch.topk(q @ d.T, min(k, d.shape[0]), dim=1)


def bare_decoder(model, tok, q_texts, d_texts, batch_size=4):
    """InstructIR DenseEncoder_w_Decoder_Model + dot top-k."""
    import torch

    def encode(texts):
        out = []
        with torch.no_grad():
            for i in range(0, len(texts), batch_size):
                enc = tok(texts[i:i + batch_size], max_length=512, padding=True, truncation=True, return_tensors="pt")
                hidden = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state
                out.append(torch.nn.functional.normalize(hidden[:, -1], p=2, dim=1))
        return torch.cat(out)

    return _topk(encode(q_texts), encode(d_texts), K, cosine=False)


def bare_mean_pool(model, tok, q_texts, d_texts, batch_size=64):
    """IFIR Contriever.embed_documents (batched) + cosine top-k."""
    import torch

    def encode(texts):
        out = []
        with torch.no_grad():
            for i in range(0, len(texts), batch_size):
                enc = tok(texts[i:i + batch_size], padding=True, truncation=True, return_tensors="pt")
                hidden = model(**enc)[0].masked_fill(~enc["attention_mask"][..., None].bool(), 0.0)
                out.append(hidden.sum(dim=1) / enc["attention_mask"].sum(dim=1)[..., None])
        return torch.cat(out)

    return _topk(encode(q_texts), encode(d_texts), K, cosine=True)


def bare_bm25(q_texts, d_texts, k1=1.2, b=0.75):
    """bm25s as its README runs it: tokenise (no stemmer, no stop words), index, top-k."""
    import bm25s

    model = bm25s.BM25(k1=k1, b=b, method="lucene")
    model.index(bm25s.tokenize(d_texts, stopwords=[], show_progress=False), show_progress=False)
    tokens = bm25s.tokenize(q_texts, stopwords=[], return_ids=False, show_progress=False)
    return model.retrieve(tokens, k=min(K, len(d_texts)), show_progress=False)


def cold_search(system, bench, template) -> float:
    """Seconds of a new system's first search, which must build its index or encode every document."""
    start = time.perf_counter()
    meta = system.search(bench, template, K).meta
    seconds = time.perf_counter() - start
    done = meta["index"] if "index" in meta else meta["embeddings"]
    assert done.get("origin") == "built" or done.get("documents_encoded") == len(bench.corpus), \
        f"a cold search reused a cache: {done}"
    return seconds


def parse_args(doc: str) -> argparse.Namespace:
    """The options every adapter-overhead script takes (``--docs``, ``--queries``, ``--repeat``,
    ``--threads``); sets torch's thread count when ``--threads`` is given."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None)
    args = parser.parse_args()
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    return args


def main() -> None:
    args = parse_args(__doc__)

    import torch
    from transformers import AutoModel, AutoTokenizer

    from instir.formatting import get_template
    from instir.retrieval import BUNDLED_MODEL_ID
    from instir.retrieval.bm25_cache import BM25IndexCache
    from instir.retrieval.dense import DenseRetriever
    from instir.systems import SystemCard, build_system, get_card, load_cards
    from tests.tiny_models import build_tiny_bert, build_tiny_llama

    bench, vocab = make_benchmark(args.docs, args.queries)
    tmp = Path(tempfile.mkdtemp(prefix="systems-overhead-"))
    words = vocab + ["[", "SEP", "]", "query", ":", "passage"]
    base_dir, adapter_dir = build_tiny_llama(tmp / "llama", words)
    bert_dir = build_tiny_bert(tmp / "bert", words)
    cards = load_cards()

    repllama = get_card("RepLLaMA-7B", cards)
    repllama = dataclasses.replace(repllama, model=str(adapter_dir), base_model=str(base_dir),
                                   params={**repllama.params, "tokenizer": str(base_dir)})
    contriever = dataclasses.replace(get_card("Contriever", cards), model=str(bert_dir), windowing="")
    minilm = SystemCard(name="MiniLM (user)", paper="user", kind="retriever", adapter="sentence-transformers",
                        model=BUNDLED_MODEL_ID, template="ifir")

    bm25 = SystemCard(name="bm25 (IFIR settings)", paper="user", kind="retriever", adapter="bm25", template="ifir",
                      params={"k1": 1.2, "b": 0.75, "stemmer": "none", "stopwords": "none"})

    t_rep, t_ifir = get_template("instructir-repllama"), get_template("ifir")
    rep_q = t_rep.format_queries(bench.queries.values())
    rep_d = [t_rep.format_doc(d) for d in sorted(bench.corpus, key=lambda d: len(d.title + d.text), reverse=True)]
    ifir_q = t_ifir.format_queries(bench.queries.values())
    ifir_d = [t_ifir.format_doc(d) for d in bench.corpus]
    bare_decoder_system = build_system(repllama, cards=cards, cache_dir=tmp / "bare", progress=False)
    llama, llama_tok = bare_decoder_system.inner.model, bare_decoder_system.inner.tokenizer
    bert, bert_tok = AutoModel.from_pretrained(bert_dir).eval(), AutoTokenizer.from_pretrained(bert_dir)

    times: dict[str, list[float]] = {}
    warm_calls = []
    for r in range(-1, args.repeat):  # round -1 warms every side up and is not counted
        def new(card, name):
            """A new system of ``card`` on an empty cache, its model loaded."""
            system = build_system(card, cards=cards, cache_dir=tmp / f"{name}-{r}", progress=False)
            system.inner.model
            return system

        times.setdefault("decoder bare", []).append(_timed(lambda: bare_decoder(llama, llama_tok, rep_q, rep_d)))
        decoder = new(repllama, "dec")
        times.setdefault("decoder kit cold", []).append(cold_search(decoder, bench, t_rep))
        before = decoder.inner.forward_calls
        times.setdefault("decoder kit warm", []).append(_timed(lambda: decoder.search(bench, t_rep, K)))
        warm_calls.append(decoder.inner.forward_calls - before)

        times.setdefault("mean-pool bare", []).append(_timed(lambda: bare_mean_pool(bert, bert_tok, ifir_q, ifir_d)))
        mean_pool = new(contriever, "mp")
        times.setdefault("mean-pool kit cold", []).append(cold_search(mean_pool, bench, t_ifir))
        times.setdefault("mean-pool kit warm", []).append(_timed(lambda: mean_pool.search(bench, t_ifir, K)))

        st_today = DenseRetriever(cache_dir=tmp / f"today-{r}", progress=False)
        st_today.model
        times.setdefault("minilm today cold", []).append(cold_search(st_today, bench, t_ifir))
        times.setdefault("minilm card cold", []).append(cold_search(new(minilm, "card"), bench, t_ifir))

        times.setdefault("bm25 bare bm25s", []).append(_timed(lambda: bare_bm25(ifir_q, ifir_d)))
        kit_bm25 = build_system(bm25, cards=cards)  # the bm25 adapter takes no cache_dir
        kit_bm25.inner.cache, kit_bm25.inner.show_progress = BM25IndexCache(tmp / f"bm25-{r}"), False
        times.setdefault("bm25 kit cold", []).append(cold_search(kit_bm25, bench, t_ifir))

    med = {name: statistics.median(values[1:]) for name, values in times.items()}
    warm_calls = warm_calls[1:]
    print(f"{args.docs} docs, {args.queries} queries, k={K}, median of {args.repeat}, "
          f"torch threads {torch.get_num_threads()}")
    for name, value in med.items():
        print(f"  {name:22s} {value * 1000:9.1f} ms")
    for adapter, bare in (("decoder", "decoder bare"), ("mean-pool", "mean-pool bare")):
        cold = med[f"{adapter} kit cold"]
        warm = med[f"{adapter} kit warm"]
        print(f"  {adapter}: kit cold / bare = {cold / med[bare]:.3f}; warm / cold = {warm / cold:.3f}")
    print(f"  decoder warm rerun model forward calls: {warm_calls}")
    n = args.docs + args.queries
    print(f"  MiniLM inputs/s: today {n / med['minilm today cold']:.0f}, card {n / med['minilm card cold']:.0f}")
    print(f"  bm25 kit cold / bare bm25s = {med['bm25 kit cold'] / med['bm25 bare bm25s']:.3f}")


if __name__ == "__main__":
    main()
