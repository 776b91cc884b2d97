"""Long-text windows: ``ifir_windows`` against a plain re-statement of the IFIR authors'
``segment_text`` (SighingSnow/IFIR ``src/utils/embeddings.py``) for each tokenizer family the
authors' windowed models use, all built here without downloads: WordPiece (BERT tokenizer:
Contriever, ColBERT), SentencePiece Unigram (T5 tokenizer: GTR, INSTRUCTOR) and byte-level
BPE (a tiktoken encoding: the OpenAI models); the boundary lengths 383-385, 510-512 and 896;
and the kit's ``clean_windows``."""

import pytest
from tiny_tokenizers import (
    BOUNDARY_LENGTHS,
    EXPECTED_COUNTS,
    INSTRUCTION,
    LEGAL_WORDS,
    authors_segment_text,
    t5_tokenizer,
    text_of_exactly,
    tiny_tiktoken,
    wordpiece_tokenizer,
)

from instir.retrieval.windows import (
    IFIR_WINDOW,
    TokenizerAdapter,
    clean_windows,
    hf_adapter,
    ifir_windows,
    tiktoken_adapter,
)


@pytest.fixture(scope="module")
def wordpiece():
    return wordpiece_tokenizer()


def authors_calls(tokenizer) -> tuple:
    """The tokenizer methods IFIR's segment_text calls: ``tokenize`` and
    ``convert_tokens_to_string`` (Hugging Face), ``encode`` and ``decode`` (tiktoken)."""
    if hasattr(tokenizer, "convert_tokens_to_string"):
        return tokenizer.tokenize, tokenizer.convert_tokens_to_string
    return tokenizer.encode, tokenizer.decode


@pytest.fixture(scope="module", params=["wordpiece", "t5", "tiktoken"])
def family(request) -> tuple[TokenizerAdapter, tuple]:
    """The kit's adapter and the authors' calls, for one tokenizer family."""
    if request.param == "tiktoken":
        encoding = tiny_tiktoken()
        return tiktoken_adapter(encoding), authors_calls(encoding)
    tokenizer = wordpiece_tokenizer() if request.param == "wordpiece" else t5_tokenizer()
    return hf_adapter(tokenizer), authors_calls(tokenizer)


@pytest.mark.parametrize("n_tokens", BOUNDARY_LENGTHS)
def test_ifir_windows_match_the_authors_loop_at_boundary_lengths(family, n_tokens):
    adapter, (tokenize, detokenize) = family
    text = text_of_exactly(n_tokens, tokenize)
    got = ifir_windows(text, *adapter)
    assert got == authors_segment_text(tokenize, detokenize, text)
    assert len(got) == EXPECTED_COUNTS[n_tokens]


@pytest.mark.parametrize("n_tokens", BOUNDARY_LENGTHS)
def test_each_wordpiece_window_holds_512_tokens_from_a_multiple_of_384(wordpiece, n_tokens):
    whole_words = [w for w in LEGAL_WORDS if len(wordpiece.tokenize(w)) == 1]  # windows re-tokenise to their tokens
    text = text_of_exactly(n_tokens, wordpiece.tokenize, whole_words)
    tokens = wordpiece.tokenize(text)
    windows = ifir_windows(text, *hf_adapter(wordpiece))
    assert [wordpiece.tokenize(w) for w in windows] == [tokens[s:s + 512] for s in range(0, n_tokens, 384)]


def test_a_400_token_text_gets_its_16_token_tail_as_a_second_window(wordpiece):
    text = text_of_exactly(400, wordpiece.tokenize)
    first, tail = ifir_windows(text, *hf_adapter(wordpiece))
    assert len(wordpiece.tokenize(first)) == 400 and len(wordpiece.tokenize(tail)) == 16


def test_windows_are_the_tokenizers_rendering_not_slices_of_the_text(wordpiece):
    text = "The Court HELD that the Appeal was dismissed , playing"
    (window,) = ifir_windows(text, *hf_adapter(wordpiece))
    assert window == "the court held that the appeal was dismissed, playing"  # lower-cased, re-spaced


@pytest.mark.parametrize("kind", ["wordpiece", "t5"])
def test_instructor_windows_shrink_by_the_instruction_tokens(kind):
    tokenizer = wordpiece_tokenizer() if kind == "wordpiece" else t5_tokenizer()
    adapter = hf_adapter(tokenizer)
    reserve = len(tokenizer.tokenize(INSTRUCTION))
    assert reserve > 3
    for n_tokens in (510, 896):
        text = text_of_exactly(n_tokens, tokenizer.tokenize)
        got = ifir_windows(text, *adapter, reserve=reserve)
        assert got == authors_segment_text(*authors_calls(tokenizer), text, instruction_tokens=reserve)
        assert len(got) == EXPECTED_COUNTS[n_tokens]
        assert got[0] == tokenizer.convert_tokens_to_string(tokenizer.tokenize(text)[:IFIR_WINDOW - reserve])


def test_windows_cut_inside_words_and_characters_match_the_authors_loop(family):
    adapter, (tokenize, detokenize) = family
    text = "The appellant's naïve über-claim (café, résumé) was dismissed: costs 3.14 " * 20
    got = ifir_windows(text, *adapter, window=7, stride=5)
    assert got == authors_segment_text(tokenize, detokenize, text, max_seq_length=7, stride=5)
    assert len(got) == -(-len(tokenize(text)) // 5)


def test_tiktoken_window_cut_inside_a_character_decodes_it_as_replacement():
    encoding = tiny_tiktoken()
    assert len(encoding.encode("über")) == 5  # ü is two byte tokens in the tiny encoding
    assert ifir_windows("über", *tiktoken_adapter(encoding), window=1, stride=1) == ["\ufffd", "\ufffd", "b", "e", "r"]


def test_a_text_without_tokens_has_no_windows(wordpiece):
    assert ifir_windows("   ", *hf_adapter(wordpiece)) == []


def test_window_smaller_than_the_reserve_is_refused(wordpiece):
    with pytest.raises(ValueError, match="no room"):
        ifir_windows("the court", *hf_adapter(wordpiece), reserve=IFIR_WINDOW)
    with pytest.raises(ValueError, match="stride"):
        ifir_windows("the court", *hf_adapter(wordpiece), stride=0)


def test_clean_windows_stop_once_the_text_is_covered_and_keep_the_original_string():
    words = [f"Word{i}" for i in range(10)]
    text = " ".join(words)
    offsets = []
    at = 0
    for w in words:
        offsets.append((at, at + len(w)))
        at += len(w) + 1
    assert clean_windows(text, offsets, window=10, stride=3) == [text]
    got = clean_windows(text, offsets, window=4, stride=3)
    assert got == ["Word0 Word1 Word2 Word3", "Word3 Word4 Word5 Word6", "Word6 Word7 Word8 Word9"]


def test_a_window_that_detokenises_to_nothing_is_dropped_as_the_authors_loop_drops_it():
    # characters as tokens, a detokeniser that strips (as T5's convert_tokens_to_string does): the second window holds
    # only spaces and renders as "", which the authors' segment_text leaves out ("if len(s) > 0")
    text, tokenize, detokenize = "ab  ", list, lambda tokens: "".join(tokens).strip()
    want = authors_segment_text(tokenize, detokenize, text, max_seq_length=2, stride=2)
    assert want == ["ab"]
    assert ifir_windows(text, tokenize, detokenize, window=2, stride=2) == want
