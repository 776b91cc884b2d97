"""Long-text windows: ``ifir_windows`` against a plain re-statement of the IFIR authors'
``segment_text`` (SighingSnow/IFIR ``src/utils/embeddings.py``) for each tokenizer family the
authors' windowed models use, all built here without downloads: WordPiece (BERT tokenizer:
Contriever, ColBERT), SentencePiece Unigram (T5 tokenizer: GTR, INSTRUCTOR) and byte-level
BPE (a tiktoken encoding: the OpenAI models); the boundary lengths 383-385, 510-512 and 896;
and the kit's ``clean_windows``."""

import pytest
from tiny_tokenizers import (BOUNDARY_LENGTHS, EXPECTED_COUNTS, INSTRUCTION, LEGAL_WORDS, authors_segment_text,
                             t5_tokenizer, text_of_exactly, tiny_tiktoken, wordpiece_tokenizer)

from instir.retrieval.windows import (IFIR_WINDOW, TokenizerAdapter, clean_windows, hf_adapter, ifir_windows,
                                      tiktoken_adapter)


@pytest.fixture(scope="module")
def wordpiece():
    return hf_adapter(wordpiece_tokenizer())


@pytest.fixture(scope="module", params=["wordpiece", "t5", "tiktoken"])
def adapter(request) -> TokenizerAdapter:
    if request.param == "wordpiece":
        return hf_adapter(wordpiece_tokenizer())
    if request.param == "t5":
        return hf_adapter(t5_tokenizer())
    return tiktoken_adapter(tiny_tiktoken())


@pytest.mark.parametrize("n_tokens", BOUNDARY_LENGTHS)
def test_ifir_windows_match_the_authors_loop_at_boundary_lengths(adapter, n_tokens):
    text = text_of_exactly(n_tokens, adapter.tokenize)
    got = ifir_windows(text, *adapter)
    assert got == authors_segment_text(adapter.tokenize, adapter.detokenize, text)
    assert len(got) == EXPECTED_COUNTS[n_tokens]


@pytest.mark.parametrize("n_tokens", BOUNDARY_LENGTHS)
def test_each_wordpiece_window_holds_512_tokens_from_a_multiple_of_384(wordpiece, n_tokens):
    whole_words = [w for w in LEGAL_WORDS if len(wordpiece.tokenize(w)) == 1]  # windows re-tokenise to their tokens
    text = text_of_exactly(n_tokens, wordpiece.tokenize, whole_words)
    tokens = wordpiece.tokenize(text)
    windows = ifir_windows(text, *wordpiece)
    assert [wordpiece.tokenize(w) for w in windows] == [tokens[s:s + 512] for s in range(0, n_tokens, 384)]


def test_a_400_token_text_gets_its_16_token_tail_as_a_second_window(wordpiece):
    text = text_of_exactly(400, wordpiece.tokenize)
    first, tail = ifir_windows(text, *wordpiece)
    assert len(wordpiece.tokenize(first)) == 400 and len(wordpiece.tokenize(tail)) == 16


def test_windows_are_the_tokenizers_rendering_not_slices_of_the_text(wordpiece):
    text = "The Court HELD that the Appeal was dismissed , playing"
    (window,) = ifir_windows(text, *wordpiece)
    assert window == "the court held that the appeal was dismissed, playing"  # lower-cased, re-spaced


@pytest.mark.parametrize("family", ["wordpiece", "t5"])
def test_instructor_windows_shrink_by_the_instruction_tokens(family):
    adapter = hf_adapter(wordpiece_tokenizer() if family == "wordpiece" else t5_tokenizer())
    reserve = len(adapter.tokenize(INSTRUCTION))
    assert reserve > 3
    for n_tokens in (510, 896):
        text = text_of_exactly(n_tokens, adapter.tokenize)
        got = ifir_windows(text, *adapter, reserve=reserve)
        assert got == authors_segment_text(adapter.tokenize, adapter.detokenize, text, instruction_tokens=reserve)
        assert len(got) == EXPECTED_COUNTS[n_tokens]
        assert got[0] == adapter.detokenize(adapter.tokenize(text)[:IFIR_WINDOW - reserve])


def test_windows_cut_inside_words_and_characters_match_the_authors_loop(adapter):
    text = "The appellant's naïve über-claim (café, résumé) was dismissed: costs 3.14 " * 20
    got = ifir_windows(text, *adapter, window=7, stride=5)
    assert got == authors_segment_text(adapter.tokenize, adapter.detokenize, text, max_seq_length=7, stride=5)
    assert len(got) == -(-len(adapter.tokenize(text)) // 5)


def test_tiktoken_window_cut_inside_a_character_decodes_it_as_replacement():
    adapter = tiktoken_adapter(tiny_tiktoken())
    tokens = adapter.tokenize("über")  # ü is two byte tokens in the tiny encoding
    assert ifir_windows("über", *adapter, window=1, stride=1)[:2] == ["\ufffd", "\ufffd"]
    assert len(tokens) == 5


def test_a_text_without_tokens_has_no_windows(wordpiece):
    assert ifir_windows("   ", *wordpiece) == []


def test_window_smaller_than_the_reserve_is_refused(wordpiece):
    with pytest.raises(ValueError, match="no room"):
        ifir_windows("the court", *wordpiece, reserve=IFIR_WINDOW)
    with pytest.raises(ValueError, match="stride"):
        ifir_windows("the court", *wordpiece, stride=0)


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
