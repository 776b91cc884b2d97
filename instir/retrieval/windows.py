"""Long-text windows for dense encoders: the IFIR authors' cut and the kit's clean cut.

Two ways to split a text that is longer than an encoder takes; the caller encodes every
window and averages the window vectors.

- :func:`ifir_windows` re-states ``segment_text`` of SighingSnow/IFIR ``src/utils/embeddings.py``
  (classes ``Contriever``, ``ColBERT``, ``GTR``, ``Instructor``, ``OpenAIEmbedding``; all share
  the loop): tokenise the whole text with the model's tokenizer (``tokenizer.tokenize``, no
  special tokens; ``OpenAIEmbedding``: tiktoken's ``encode``), start a window at *every*
  multiple of ``stride`` (384) below the token count, take up to ``window`` (512) tokens from
  there, turn them back into text (``convert_tokens_to_string``; tiktoken: ``decode``) and
  keep the window when that text is not empty. A 400-token text thus gets two windows, the
  second its 16-token tail, and the windows are the tokenizer's rendering of the tokens
  (an uncased WordPiece tokenizer lower-cases them), not slices of the original string.
  ``Instructor.segment_text`` shrinks the window by the instruction's token count
  (``reserve``). The model's own truncation applies afterwards, when the window texts are
  encoded: the authors never capped the window at the model's input size.
- :func:`clean_windows` is the kit's own cut: a window every ``stride`` tokens only until the
  text is covered (so no window lies inside the previous one), each cut from the original
  string at token character offsets, so no text is altered.

Tokenizers are seen through a :class:`TokenizerAdapter` (tokenize, detokenize), so a Hugging
Face tokenizer (:func:`hf_adapter`) and a tiktoken encoding (:func:`tiktoken_adapter`) are
cut by the same code: ``ifir_windows(text, *adapter)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

#: The dense encoders' long-text ``windowing`` modes besides ``None`` (no windows): the IFIR
#: authors' cut (:func:`ifir_windows`) and the kit's clean cut (:func:`clean_windows`).
AUTHORS_CUT, CLEAN_CUT = "ifir", "clean"
WINDOWING_MODES = (AUTHORS_CUT, CLEAN_CUT)

#: Window and stride of IFIR's official encoders (tokens).
IFIR_WINDOW = 512
IFIR_STRIDE = 384


class TokenizerAdapter(NamedTuple):
    """A tokenizer as two functions: text -> tokens, and tokens -> text. Unpacks into
    :func:`ifir_windows`' ``tokenize, detokenize`` arguments."""

    tokenize: Callable[[str], Sequence[Any]]
    detokenize: Callable[[Sequence[Any]], str]


def hf_adapter(tokenizer: Any) -> TokenizerAdapter:
    """A Hugging Face tokenizer as the IFIR authors used it: ``tokenize`` (token strings, no
    special tokens) and ``convert_tokens_to_string``. ``verbose=False`` only silences the
    tokenizer's "longer than the maximum sequence length" warning: long texts are what is cut."""
    return TokenizerAdapter(lambda text: tokenizer.tokenize(text, verbose=False), tokenizer.convert_tokens_to_string)


def tiktoken_adapter(encoding: Any) -> TokenizerAdapter:
    """A tiktoken encoding as IFIR's ``OpenAIEmbedding.segment_text`` used it: ``encode`` (with
    tiktoken's defaults, which refuse text containing a special-token string such as
    ``<|endoftext|>``) and ``decode`` (a window cut inside a multi-byte character decodes it
    as U+FFFD, as the authors' windows did)."""
    return TokenizerAdapter(encoding.encode, encoding.decode)


def ifir_windows(text: str, tokenize: Callable[[str], Sequence[Any]], detokenize: Callable[[Sequence[Any]], str],
                 window: int = IFIR_WINDOW, stride: int = IFIR_STRIDE, reserve: int = 0) -> list[str]:
    """The IFIR authors' windows of ``text`` (``segment_text``, see the module docstring):
    one window starting at each of ``0, stride, 2·stride, …`` below the token count, each at
    most ``window - reserve`` tokens, detokenised; windows that detokenise to ``""`` are
    dropped, so a text without tokens has no windows (the authors then averaged nothing).
    """
    if stride < 1:
        raise ValueError(f"stride must be positive, got {stride}")
    size = window - reserve
    if size < 1:
        raise ValueError(f"window {window} minus reserve {reserve} leaves no room for text")
    tokens = tokenize(text)
    pieces = (detokenize(tokens[start:start + size]) for start in range(0, len(tokens), stride))
    return [piece for piece in pieces if piece]


def clean_windows(text: str, offsets: Sequence[tuple[int, int]], window: int, stride: int) -> list[str]:
    """The kit's clean windows of ``text`` given its tokens' character ``offsets`` (no special
    tokens): a text of at most ``window`` tokens is one window, itself; a longer one gets
    windows of ``window`` tokens every ``stride`` tokens until its last token is covered,
    each the original substring from its first token's start to its last token's end."""
    if not 0 < stride <= window:
        raise ValueError(f"need 0 < stride <= window, got stride={stride}, window={window}")
    n = len(offsets)
    if n <= window:
        return [text]
    pieces, start = [], 0
    while True:
        end = min(start + window, n)
        pieces.append(text[offsets[start][0]:offsets[end - 1][1]])
        if end == n:
            return pieces
        start += stride


def encode_window_means(windows: Sequence[Sequence[Any]], encode: Callable[[list[Any]], Any]) -> Any:
    """One vector per input: the plain mean (not re-normalised) of the vectors of its windows,
    every window of every input encoded in one ``encode`` call (one 2-D array row per window)."""
    import numpy as np

    counts = np.array([len(ws) for ws in windows])
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    return np.add.reduceat(encode([w for ws in windows for w in ws]), starts, axis=0) / counts[:, None]
