"""Kit overhead of the gritlm adapter over the bare GritLM recipe (tiny Mistral, this CPU).

Data and timing as ``perf/systems_overhead.py`` (random-word passages the tiny
tokenizer knows; ``--repeat`` interleaved rounds after one uncounted warm-up; medians). Model:
the tiny random Mistral of ``tests/tiny_models.py``, loaded once.

- bare: ``gritlm.GritLM.encode`` as IFIR calls it, written out (one instruction per call:
  tokenise ``instruction + text``, forward with ``is_causal=False``, zero the instruction
  tokens in the mask, mean, L2 norm; batches of 8) + one matrix product + ``torch.topk``;
- kit: ``build_system(card GritLM-7B on the tiny model).search`` (template ``ifir-gritlm``,
  embedding cache, exact top-k, Run), from a fresh cache; then a warm rerun on the same
  cache, whose model forward calls are counted.

    python -m perf.gritlm_overhead [--docs 1000] [--queries 100] [--repeat 3] [--threads N]
"""

from __future__ import annotations

import dataclasses
import statistics
import tempfile
from pathlib import Path

from perf.systems_overhead import K, _timed, _topk, make_benchmark, parse_args

QUERY_INSTRUCTION = "<|user|>\nGive a query, retrieval relevant passages\n<|embed|>\n"
DOC_INSTRUCTION = "<|embed|>\n"


def bare_gritlm(model, tok, queries, docs, batch_size=8, max_length=2048):
    """IFIR GritLM.embed_documents -> gritlm.GritLM.encode (mean, bbcc), + cosine top-k."""
    import torch

    def encode(texts, instruction):
        n_inst = len(tok(instruction, truncation=True, max_length=max_length)["input_ids"])
        out = []
        with torch.no_grad():
            for i in range(0, len(texts), batch_size):
                enc = tok([instruction + t for t in texts[i:i + batch_size]], padding=True, truncation=True,
                          max_length=max_length, return_tensors="pt")
                hidden = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                               is_causal=False).last_hidden_state
                mask = enc["attention_mask"].clone()
                mask[:, :n_inst] = 0
                emb = (hidden * mask.unsqueeze(-1).float()).sum(dim=1) / mask.sum(dim=1, keepdim=True).float()
                out.append(torch.nn.functional.normalize(emb, dim=-1))
        return torch.cat(out)

    return _topk(encode(queries, QUERY_INSTRUCTION), encode(docs, DOC_INSTRUCTION), K, cosine=False)


def main() -> None:
    args = parse_args(__doc__)

    import torch

    from instir.formatting import get_template
    from instir.retrieval.embedding_cache import EmbeddingCache
    from instir.systems import build_system, get_card
    from tests.tiny_models import build_tiny_mistral

    bench, vocab = make_benchmark(args.docs, args.queries)
    tmp = Path(tempfile.mkdtemp(prefix="gritlm-overhead-"))
    words = vocab + ["<|", "user", "|>", "Give", "a", "query", ",", "retrieval", "relevant", "passages", "embed"]
    model_dir = build_tiny_mistral(tmp / "mistral", words)
    card = dataclasses.replace(get_card("GritLM-7B"), model=str(model_dir), dtype="float32")
    system = build_system(card, cache_dir=tmp / "c0", progress=False)
    model, tok = system.inner.model, system.inner.tokenizer
    template = get_template(card.template)
    queries = [f"{q.query} {q.instruction}" for q in bench.queries.values()]
    docs = [get_template("ifir").format_doc(d) for d in bench.corpus]

    times: dict[str, list[float]] = {}
    warm_calls = []
    for r in range(-1, args.repeat):  # round -1 warms both sides up and is not counted
        times.setdefault("bare", []).append(_timed(lambda: bare_gritlm(model, tok, queries, docs)))
        system.inner.cache = EmbeddingCache(tmp / f"cache-{r}", progress=False)
        times.setdefault("kit cold", []).append(_timed(lambda: system.search(bench, template, K)))
        before = system.inner.forward_calls
        times.setdefault("kit warm", []).append(_timed(lambda: system.search(bench, template, K)))
        warm_calls.append(system.inner.forward_calls - before)

    med = {name: statistics.median(values[1:]) for name, values in times.items()}
    print(f"{args.docs} docs, {args.queries} queries, k={K}, median of {args.repeat}, "
          f"torch threads {torch.get_num_threads()}")
    for name, value in med.items():
        print(f"  {name:10s} {value * 1000:9.1f} ms   (all: {', '.join(f'{v * 1000:.0f}' for v in times[name][1:])})")
    print(f"  gritlm: kit cold / bare = {med['kit cold'] / med['bare']:.3f}; "
          f"warm / cold = {med['kit warm'] / med['kit cold']:.3f}")
    print(f"  warm rerun model forward calls: {warm_calls[1:]}")


if __name__ == "__main__":
    main()
