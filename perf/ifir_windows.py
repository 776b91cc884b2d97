"""Long-document windowing: the IFIR authors' cut against the kit's clean cut (and no windows).

Data: a generated IFIR-like corpus of ``--docs`` documents whose lengths (in the encoder's
tokens) are spread evenly over 100-3,000 tokens, as IFIR's legal and clinical subsets are long;
their words are drawn from the bundled ifir-sample passages. Model: the bundled
all-MiniLM-L6-v2 (max_seq_length 256), loaded once and warmed up, shared by every mode.

For each ``windowing`` mode (``None``, ``"clean"``, ``"ifir"``) the script reports the number
of windows encoded, the time to cut them (``clean_split`` / ``ifir_split``) and the time of a
cold ``DenseRetriever.embed_corpus`` (empty cache: cut, encode, average, write the cache),
median of ``--repeat`` runs; then, per length bucket, how far the document vectors move
between modes (cosine between the two modes' vectors of the same document) and the share of
each document's tokens the model actually sees without windows and in ``"ifir"`` mode (each 512-token window is
truncated to the model's 254 text tokens, so the tokens between 254 and 384 of every window
are never encoded).

    python -m perf.ifir_windows [--docs 200] [--repeat 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time

import numpy as np

from perf.common import REPO

MIN_TOKENS, MAX_TOKENS = 100, 3000
BUCKETS = ((100, 383), (384, 511), (512, 1023), (1024, 2047), (2048, 3000))
MODES = (None, "clean", "ifir")


def sample_words() -> list[str]:
    """The words of the bundled ifir-sample passages (FiQA- and NFCorpus-like), as written."""
    words = []
    for path in sorted((REPO / "instir/benchmarks/sample/ifir-sample").glob("*/*-corpus.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            words += json.loads(line)["text"].split()
    return words


def make_corpus(tokenizer, n_docs: int, seed: int = 0):
    """``n_docs`` documents of evenly spread token lengths, each cut at a token boundary of a
    random word sequence (exact length in the model's tokenizer)."""
    from instir.benchmarks.types import Corpus, Doc

    rng = np.random.default_rng(seed)
    words = np.array(sample_words())
    lengths = np.linspace(MIN_TOKENS, MAX_TOKENS, n_docs).round().astype(int)
    rng.shuffle(lengths)
    docs, measured = [], []
    for i, n in enumerate(lengths):
        text = " ".join(rng.choice(words, size=int(n)))  # at least one token a word: always long enough
        offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        docs.append(Doc(f"d{i}", text[:offsets[n - 1][1]]))
        measured.append(len(tokenizer.tokenize(docs[-1].text)))  # a cut inside a word may re-tokenise differently
    return Corpus.from_docs(docs), np.array(measured)


def seen_share(n_tokens: int, window_seen: int, stride: int) -> float:
    """Share of a text's tokens inside the part of some IFIR window the model encodes."""
    seen = np.zeros(n_tokens, dtype=bool)
    for start in range(0, n_tokens, stride):
        seen[start:start + window_seen] = True
    return float(seen.mean())


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1: the machine is shared)")
    args = parser.parse_args()

    import torch
    from sentence_transformers import SentenceTransformer

    torch.set_num_threads(args.threads)
    from instir.formatting import get_template
    from instir.retrieval.dense import DenseRetriever, bundled_model_path

    model = SentenceTransformer(bundled_model_path(), device="cpu")
    corpus, lengths = make_corpus(model.tokenizer, args.docs)
    texts = [doc.text for doc in corpus]
    template = get_template("ifir")
    model.encode(texts[:16], batch_size=args.batch_size)  # warm-up

    windows, split_s, embed_s, vectors = {}, {}, {}, {}
    for mode in MODES:
        name = str(mode).lower()
        probe = DenseRetriever(model, batch_size=args.batch_size, windowing=mode, progress=False)
        split = {None: lambda: [[t] for t in texts], "clean": lambda: probe.clean_split(texts),
                 "ifir": lambda: probe.ifir_split(texts)}[mode]
        split_s[name], embed_s[name] = [], []
        for _ in range(args.repeat):
            start = time.perf_counter()
            cut = split()
            split_s[name].append(time.perf_counter() - start)
            with tempfile.TemporaryDirectory() as cache:
                retriever = DenseRetriever(model, batch_size=args.batch_size, windowing=mode, cache_dir=cache,
                                           progress=False)
                start = time.perf_counter()
                matrix = np.array(retriever.embed_corpus(corpus, template).matrix)
                embed_s[name].append(time.perf_counter() - start)
        windows[name] = np.array([len(w) for w in cut])
        vectors[name] = matrix

    room = model.max_seq_length - model.tokenizer.num_special_tokens_to_add()
    print(f"{args.docs} generated IFIR-like documents, {MIN_TOKENS}-{MAX_TOKENS} tokens (total {lengths.sum():,}), "
          f"bundled all-MiniLM-L6-v2 (max_seq_length {model.max_seq_length}) on CPU, {args.threads} torch thread(s), "
          f"batch {args.batch_size}; times are medians of {args.repeat}\n")
    print("| mode | windows | cut s | embed_corpus s (cold) | s per 1k windows |")
    print("|---|---:|---:|---:|---:|")
    for name in windows:
        med = statistics.median(embed_s[name])
        print(f"| {name} | {windows[name].sum():,} | {statistics.median(split_s[name]):.2f} | {med:.1f} | "
              f"{1000 * med / windows[name].sum():.2f} |")
    print()
    print("| tokens | docs | windows none / clean / ifir | cos(ifir, clean) median [min] | cos(ifir, none) median "
          "[min] | cos(clean, none) median [min] | tokens the model sees: none / ifir |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    pairs = (("ifir", "clean"), ("ifir", "none"), ("clean", "none"))
    cos = {pair: cosines(vectors[pair[0]], vectors[pair[1]]) for pair in pairs}
    for low, high in BUCKETS:
        rows = (lengths >= low) & (lengths <= high)
        counts = " / ".join(f"{windows[m][rows].sum():,}" for m in ("none", "clean", "ifir"))
        moved = " | ".join(f"{np.median(cos[p][rows]):.4f} [{cos[p][rows].min():.4f}]" for p in pairs)
        seen = np.mean([seen_share(int(n), room, 384) for n in lengths[rows]])
        whole = np.mean(np.minimum(lengths[rows], room) / lengths[rows])
        print(f"| {low}-{high} | {rows.sum()} | {counts} | {moved} | {whole:.0%} / {seen:.0%} |")
    print("\nall runs (s):", {name: [round(v, 2) for v in embed_s[name]] for name in embed_s})


if __name__ == "__main__":
    main()
