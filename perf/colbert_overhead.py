"""The kit's late-interaction ColBERT against the bare transformers path, on the bundled sample
corpora with the tiny random-initialised colbert-ai checkpoint of the tests (a cheap model, so
the kit's own cost shows: the worst case for the overhead ratio).

- ``bare``: what colbert-ai's ``Checkpoint`` computes, written plainly — tokenise batches of 64
  (queries: ``[CLS] [Q] … [SEP]`` + ``[MASK]`` to ``query_maxlen``; documents ``[CLS] [D] …
  [SEP]`` to ``doc_maxlen``), BERT forward, linear projection, punctuation/padding mask, L2
  normalisation, then MaxSim of every query against all padded documents and ``topk``.
- ``kit cold``: ``ColBERTRetriever.search`` with an empty token cache (encoder already loaded);
- ``kit warm``: a fresh retriever on the full cache (asserted: no model loaded, zero model calls).

Each side runs ``--repeat`` times; medians are reported.

    python -m perf.colbert_overhead [--repeat 3] [--threads 1] [--k 100]
"""

from __future__ import annotations

import argparse
import statistics
import string
import tempfile
import time
from pathlib import Path
from unittest import mock


def bare(folder: Path, queries: list[str], docs: list[str], k: int, query_maxlen: int = 32,
         doc_maxlen: int = 300) -> None:
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    bert = AutoModel.from_pretrained(folder).eval()
    w = load_file(str(folder / "model.safetensors"))["linear.weight"]
    skip = torch.tensor([tok.encode(p, add_special_tokens=False)[0] for p in string.punctuation])

    def encode(texts, maxlen, marker, padding):
        out = []
        for i in range(0, len(texts), 64):
            obj = tok(texts[i:i + 64], padding=padding, truncation=True, max_length=maxlen - 1, return_tensors="pt")
            ids = torch.cat([obj["input_ids"][:, :1], torch.full_like(obj["input_ids"][:, :1], marker),
                             obj["input_ids"][:, 1:]], 1)
            mask = torch.cat([obj["attention_mask"][:, :1], torch.ones_like(obj["attention_mask"][:, :1]),
                              obj["attention_mask"][:, 1:]], 1)
            if marker == tok.convert_tokens_to_ids("[unused0]"):
                ids[ids == tok.pad_token_id] = tok.mask_token_id
                keep = torch.ones_like(ids, dtype=torch.bool)
            else:
                keep = (ids != tok.pad_token_id) & ~torch.isin(ids, skip)
            with torch.inference_mode():
                v = bert(input_ids=ids, attention_mask=mask)[0] @ w.T
            out.append((torch.nn.functional.normalize(v * keep.unsqueeze(2), dim=2), keep))
        return out

    q = torch.cat([v for v, _ in encode(queries, query_maxlen, tok.convert_tokens_to_ids("[unused0]"), "max_length")])
    d_parts = encode(docs, doc_maxlen, tok.convert_tokens_to_ids("[unused1]"), "longest")
    width = max(v.shape[1] for v, _ in d_parts)
    d = torch.cat([torch.nn.functional.pad(v, (0, 0, 0, width - v.shape[1])) for v, _ in d_parts])
    keep = torch.cat([torch.nn.functional.pad(m, (0, width - m.shape[1])) for _, m in d_parts])
    sims = torch.einsum("qid,njd->qnij", q, d).masked_fill(~keep[None, :, None, :], float("-inf"))
    sims.max(-1).values.sum(-1).topk(min(k, len(docs)), dim=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--k", type=int, default=100)
    args = parser.parse_args()

    import torch

    from instir.benchmarks import load_benchmark, sample_benchmarks
    from instir.formatting import default_template
    from instir.systems.colbert import ColBERTRetriever
    from tests.tiny_models import build_colbert

    torch.set_num_threads(args.threads)
    for name in sample_benchmarks():
        bench = load_benchmark(name)
        template = default_template("dense", bench.name)
        queries = list(template.format_queries(bench.queries.values()))
        docs = [template.format_doc(d) for d in bench.corpus]
        with tempfile.TemporaryDirectory() as tmp:
            folder = build_colbert(Path(tmp) / "ckpt", queries + docs)
            times: dict[str, list[float]] = {"bare": [], "kit cold": [], "kit warm": []}
            for r in range(args.repeat):
                start = time.perf_counter()
                bare(folder, queries, docs, args.k)
                times["bare"].append(time.perf_counter() - start)
                cold = ColBERTRetriever(str(folder), cache_dir=Path(tmp) / f"cache{r}", progress=False)
                assert cold.encoder.forward_calls == 0  # model loaded outside the timing (bare loads inside)
                start = time.perf_counter()
                cold.search(bench, template, args.k)
                times["kit cold"].append(time.perf_counter() - start)
                warm = ColBERTRetriever(str(folder), cache_dir=Path(tmp) / f"cache{r}", progress=False)
                with mock.patch("instir.systems.colbert.ColBERTEncoder", side_effect=AssertionError("model loaded")):
                    start = time.perf_counter()
                    run = warm.search(bench, template, args.k)
                    times["kit warm"].append(time.perf_counter() - start)
                assert run.meta["embeddings"]["model_calls"] == 0
                assert run.meta["embeddings"]["documents_encoded"] == run.meta["embeddings"]["queries_encoded"] == 0
            med = {key: statistics.median(v) for key, v in times.items()}
            print(f"{name}: {len(queries)} queries × {len(docs)} docs, medians of {args.repeat} "
                  f"(bare includes loading the tiny model, ~0.05 s): bare {med['bare']:.3f} s, "
                  f"kit cold {med['kit cold']:.3f} s ({med['kit cold'] / med['bare']:.2f}×), "
                  f"kit warm {med['kit warm']:.3f} s (0 model calls)")


if __name__ == "__main__":
    main()
