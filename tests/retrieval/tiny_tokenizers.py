"""Tokenizers built locally (no downloads) for the window tests, one per family of IFIR's
windowed encoders, and a plain re-statement of the authors' ``segment_text`` loop
(SighingSnow/IFIR ``src/utils/embeddings.py``) to compare the kit's windows with."""

import json

import pytest

BOUNDARY_LENGTHS = (383, 384, 385, 400, 510, 511, 512, 896, 1600)
# Windows start at 0, 384, 768, ... below the token count: ceil(n / 384) of them.
EXPECTED_COUNTS = {383: 1, 384: 1, 385: 2, 400: 2, 510: 2, 511: 2, 512: 2, 896: 3, 1600: 5}

LEGAL_WORDS = ("the court held that the appeal was dismissed and the appellant pays costs under section "
               "playing running holding appealed dismissing courts patients doses").split()
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
INSTRUCTION = "Represent the legal paragraph for retrieval: "


def authors_segment_text(tokenize, detokenize, text, max_seq_length=512, stride=384, instruction_tokens=0):
    """IFIR's segment_text, step by step: tokenise the text; (Instructor only) shrink the
    window by the instruction's token count; from token 0, every ``stride`` tokens while the
    start is below the token count, take up to ``max_seq_length`` tokens, turn them back into
    a string and keep it if it is not empty."""
    tokens = tokenize(text)
    max_seq_length = max_seq_length - instruction_tokens
    segments = []
    i = 0
    while i < len(tokens):
        segment = tokens[i:i + max_seq_length]
        s = detokenize(segment)
        if len(s) > 0:
            segments.append(s)
        i = i + stride
    return segments


def text_of_exactly(n_tokens, tokenize, words=LEGAL_WORDS):
    """A text of ``n_tokens`` tokens: the words in turn (multi-piece ones included), a
    one-token word where the next word would overshoot. A word is counted with the space
    before it, which byte-level BPE folds into the word's first token."""
    filler = next(w for w in words if len(tokenize(w)) == len(tokenize(" " + w)) == 1)
    out, count, i = [], 0, 0
    while count < n_tokens:
        word = words[i % len(words)]
        i += 1
        k = len(tokenize(" " + word if out else word))
        if count + k > n_tokens:
            word, k = filler, 1
        out.append(word)
        count += k
    text = " ".join(out)
    assert len(tokenize(text)) == n_tokens
    return text


def wordpiece_tokenizer():
    """A BERT tokenizer (uncased WordPiece) over a tiny vocabulary: whole words, a few
    continuation pieces, letters, so some words split in two or more tokens."""
    from transformers import BertTokenizer

    pieces = ["the", "court", "held", "that", "appeal", "was", "dismiss", "and", "pay", "cost", "under", "section",
              "play", "run", "hold", "patient", "dose", "represent", "legal", "paragraph", "for", "retrieval",
              "##ing", "##ed", "##s", "##ning", "##lant", "##ant", "##e", ":", ",", "."]
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    vocab = SPECIAL + pieces + letters + [f"##{c}" for c in letters]
    return BertTokenizer(vocab={p: i for i, p in enumerate(dict.fromkeys(vocab))})


def t5_tokenizer():
    """A T5 tokenizer (SentencePiece Unigram, Metaspace) trained here on a small legal/medical text."""
    from tokenizers import SentencePieceUnigramTokenizer
    from transformers import T5Tokenizer

    corpus = [" ".join(LEGAL_WORDS), "The patient received a dose of the drug every morning, said the court.",
              "Represent the legal paragraph for retrieval: café naïve résumé 3.14 (see section 12)"] * 40
    trainer = SentencePieceUnigramTokenizer()
    trainer.train_from_iterator(corpus, vocab_size=150, special_tokens=["<pad>", "</s>", "<unk>"],
                                unk_token="<unk>", show_progress=False)
    vocab = [tuple(p) for p in json.loads(trainer._tokenizer.to_str())["model"]["vocab"]]
    return T5Tokenizer(vocab=vocab, extra_ids=0)


def tiny_tiktoken():
    """A byte-level BPE tiktoken encoding built from ranks given here (cl100k's split pattern,
    256 byte tokens and a few merges); tiktoken's own encodings are downloaded at run time."""
    tiktoken = pytest.importorskip("tiktoken")
    ranks = {bytes([i]): i for i in range(256)}
    for merge in (b"th", b"the", b" t", b" th", b" the", b"co", b"cou", b"rt", b"court", b" c", b" court",
                  b"ap", b"app", b"eal", b" ap", b" app", b" appeal", b"\xc3\xa9"):
        ranks[merge] = len(ranks)
    pattern = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
    return tiktoken.Encoding("tiny-bpe", pat_str=pattern, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": len(ranks)})
