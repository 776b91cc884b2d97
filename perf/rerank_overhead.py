"""The kit's rerank stage and embeddings backend against the bare library calls, with the tiny
random-initialised models of the tests (so the model is cheap and the kit's own cost shows —
the worst case for the overhead ratio).

Data: ``--queries`` generated instructed queries × ``--docs`` generated passages of 64 words;
a first-stage run ranks every passage for every query (depth = ``--docs``).

- rerankers (monoT5, LLM P(true), monoBERT): ``bare`` = the authors' path (tokenise batches of
  64 prompts, one forward, softmax over the label logits) on the prompts the kit would build;
  ``kit cold`` = :func:`instir.retrieval.rerank.rerank` with an empty score cache (model
  already loaded); ``kit warm`` = the same call again (every score from the cache; the model
  is not called — asserted).
- embeddings API (fake /v1/embeddings on loopback, windows off, one request at a time):
  ``bare`` = httpx POSTs of 256 texts + cosine top-k in numpy; ``kit cold`` / ``kit warm`` =
  ``OpenAIEmbeddingsRetriever.search`` with an empty / full embedding cache.

Each side runs ``--repeat`` times; the median is reported, and for rerankers also the kit's
own time (cold time minus time inside the model calls), which shared-CPU noise barely moves.

    python -m perf.rerank_overhead [--queries 20] [--docs 50] [--repeat 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

WORDS = ("wine cabinet saffron spice chef farmer humidity cork oven sunlight market volcano magma crust "
         "harvest crocus paella risotto sommelier homeowner temperature storage flower autumn yield").split()


def make_benchmark(n_queries: int, n_docs: int, seed: int = 0):
    import numpy as np

    from instir.benchmarks.types import Benchmark, Corpus, Doc, Query

    rng = np.random.default_rng(seed)
    docs = [Doc(f"d{j}", " ".join(rng.choice(WORDS, size=64))) for j in range(n_docs)]
    queries = {f"{i}_1": Query(f"{i}_1", " ".join(rng.choice(WORDS, size=4)), " ".join(rng.choice(WORDS, size=30)),
                               group=str(i)) for i in range(n_queries)}
    qrels = {qid: {"d0": 1} for qid in queries}
    return Benchmark("rerank-overhead", "generated", "local", "instructed", Corpus.from_docs(docs), queries, qrels)


def first_stage(benchmark):
    from instir.retrieval.runs import Run

    return Run.from_scores({qid: {d.id: float(-j) for j, d in enumerate(benchmark.corpus)}
                            for qid in benchmark.queries})


def bare_rerank(kit, prompts) -> None:
    """The authors' loop: batches of 64, tokenise, forward, softmax over the label logits."""
    for start in range(0, len(prompts), 64):
        kit.score(prompts[start:start + 64])


def median_times(fn, repeat: int) -> float:
    return statistics.median(fn() for _ in range(repeat))


def time_reranker(label, kit, benchmark, run, repeat: int) -> None:
    from instir.retrieval.rerank import query_parts, rerank

    docs = {d.id: d for d in benchmark.corpus}
    prompts = [kit.model_input(*query_parts(benchmark.queries[q]), docs[d].text)
               for q, d in zip(run.df["qid"], run.df["docid"])]
    kit.loaded()
    bare_rerank(kit, prompts[:64])  # warm-up

    def bare():
        start = time.perf_counter()
        bare_rerank(kit, prompts)
        return time.perf_counter() - start

    in_model = [0.0]
    real_score = kit.score

    def timed_score(inputs):
        start = time.perf_counter()
        try:
            return real_score(inputs)
        finally:
            in_model[0] += time.perf_counter() - start

    cold_times, warm_times, own_times = [], [], []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            kit.score, in_model[0] = timed_score, 0.0
            start = time.perf_counter()
            rerank(run, benchmark, kit, depth=len(docs), cache=Path(tmp) / "s.sqlite", progress=False)
            cold_times.append(time.perf_counter() - start)
            own_times.append(cold_times[-1] - in_model[0])
            kit.score = real_score
            calls = kit.calls
            start = time.perf_counter()
            rerank(run, benchmark, kit, depth=len(docs), cache=Path(tmp) / "s.sqlite", progress=False)
            warm_times.append(time.perf_counter() - start)
            assert kit.calls == calls, "warm rerun called the model"
    report(label, len(prompts), median_times(bare, repeat), statistics.median(cold_times),
           statistics.median(warm_times), statistics.median(own_times))


def time_embeddings(benchmark, repeat: int) -> None:
    import httpx
    import numpy as np

    from instir.formatting import get_template
    from instir.systems.openai_embeddings import OpenAIEmbeddingsRetriever
    from tests.judge.judge_fakes import FakeChatServer, embeddings_reply

    template = get_template("ifir")
    qtexts = template.format_queries(benchmark.queries.values())
    dtexts = [template.format_doc(d) for d in benchmark.corpus]
    with FakeChatServer(responder=embeddings_reply) as server:
        def bare():
            start = time.perf_counter()
            with httpx.Client(base_url=server.url) as client:
                def embed(texts):
                    rows = []
                    for i in range(0, len(texts), 256):
                        data = client.post("/embeddings", json={"model": "m", "input": texts[i:i + 256]}).json()["data"]
                        rows.extend(item["embedding"] for item in sorted(data, key=lambda x: x["index"]))
                    return np.asarray(rows, dtype=np.float32)
                q, d = embed(qtexts), embed(dtexts)
            q /= np.linalg.norm(q, axis=1, keepdims=True)
            d /= np.linalg.norm(d, axis=1, keepdims=True)
            np.argsort(-(q @ d.T), axis=1)[:, :100]
            return time.perf_counter() - start

        cold_times, warm_times = [], []
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as tmp:
                make = lambda: OpenAIEmbeddingsRetriever("m", server.url, windows=False, concurrency=1,  # noqa: E731
                                                         cache=tmp, progress=False)
                start = time.perf_counter()
                make().search(benchmark, template, 100)
                cold_times.append(time.perf_counter() - start)
                warm = make()
                start = time.perf_counter()
                warm.search(benchmark, template, 100)
                warm_times.append(time.perf_counter() - start)
                assert warm.client.requests == 0, "warm rerun sent requests"
        report("openai-embeddings (fake server)", len(qtexts) + len(dtexts), median_times(bare, repeat),
               statistics.median(cold_times), statistics.median(warm_times))


def report(label: str, n: int, bare: float, cold: float, warm: float, own: float | None = None) -> None:
    own_text = "" if own is None else f"  kit's own (cold minus model) {own:6.3f} s ({100 * own / bare:4.1f} % of bare)"
    print(f"{label:32s} {n:5d} inputs  bare {bare:7.3f} s  kit cold {cold:7.3f} s ({100 * (cold / bare - 1):+6.1f} %)"
          f"{own_text}  kit warm {warm:6.3f} s (0 model calls)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--docs", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: 1; the machine is shared)")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)

    from instir.systems.rerankers import CausalLMPTrueReranker, CrossEncoderReranker, MonoT5Reranker
    from tests.tiny_models import build_bert_classifier, build_llama, build_t5

    benchmark = make_benchmark(args.queries, args.docs)
    run = first_stage(benchmark)
    texts = [" ".join(WORDS), "Query: Document: Relevant: true false ? Determine if the following document is "
             "relevant to the query (true/false)."]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        time_reranker("monoT5 (tiny T5)", MonoT5Reranker(str(build_t5(tmp / "t5", texts, model_max_length=512))),
                      benchmark, run, args.repeat)
        time_reranker("LLM P(true) (tiny Llama)",
                      CausalLMPTrueReranker(str(build_llama(tmp / "llama", texts)), prompt="llama"),
                      benchmark, run, args.repeat)
        time_reranker("monoBERT (tiny BERT)", CrossEncoderReranker(str(build_bert_classifier(tmp / "bert", texts))),
                      benchmark, run, args.repeat)
    time_embeddings(benchmark, args.repeat)


if __name__ == "__main__":
    main()
