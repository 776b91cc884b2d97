"""The on-disk embedding cache: hits, misses, crash recovery, layout (no model needed: a
deterministic fake encoder stands in)."""

import os
from pathlib import Path

import numpy as np
import pytest

from instir.retrieval.embedding_cache import MANIFEST, MATRIX, EmbeddingCache, default_cache_dir

ENCODER = {"model": "fake", "fingerprint": "abc"}


class FakeEncoder:
    """Encodes a string as (len, number of vowels, first char code); counts what it encodes
    and can be told to fail on a given call."""

    def __init__(self, fail_on_call: int | None = None):
        self.calls = 0
        self.encoded: list[str] = []
        self.fail_on_call = fail_on_call

    def __call__(self, items: list[str]) -> np.ndarray:
        self.calls += 1
        if self.calls == self.fail_on_call:
            raise RuntimeError("simulated crash")
        self.encoded.extend(items)
        return np.array([[len(s), sum(c in "aeiou" for c in s), ord(s[0])] for s in items], dtype=np.float32)


def texts(n: int) -> list[str]:
    return [f"document number {i} " + "word " * (i % 5) for i in range(n)]


def test_embed_returns_memory_mapped_rows_in_input_order(tmp_path):
    items = texts(10)
    got = EmbeddingCache(tmp_path, chunk_size=4, progress=False).embed(ENCODER, items, FakeEncoder(), label="fake")
    assert isinstance(got.matrix, np.memmap)
    np.testing.assert_array_equal(got.matrix, FakeEncoder()(items))
    assert got.encoded == 10 and len(got) == 10


def test_second_embed_of_same_inputs_encodes_nothing(tmp_path):
    cache = EmbeddingCache(tmp_path, chunk_size=4, progress=False)
    first = cache.embed(ENCODER, texts(10), FakeEncoder(), label="fake")
    again = FakeEncoder()
    second = cache.embed(ENCODER, texts(10), again, label="fake")
    assert again.calls == 0 and second.encoded == 0
    assert second.key == first.key
    np.testing.assert_array_equal(second.matrix, first.matrix)


@pytest.mark.parametrize("change", ["text", "order", "encoder"])
def test_changed_inputs_or_encoder_miss_the_cache(tmp_path, change):
    cache = EmbeddingCache(tmp_path, chunk_size=4, progress=False)
    items = texts(6)
    first = cache.embed(ENCODER, items, FakeEncoder(), label="fake")
    encoder = dict(ENCODER)
    if change == "text":
        items = items[:5] + ["a different last document"]
    elif change == "order":
        items = items[::-1]
    else:
        encoder["fingerprint"] = "abd"
    again = FakeEncoder()
    second = cache.embed(encoder, items, again, label="fake")
    assert second.key != first.key
    assert len(again.encoded) == 6


def test_crash_mid_encode_keeps_finished_chunks_and_rerun_encodes_only_the_rest(tmp_path):
    cache = EmbeddingCache(tmp_path, chunk_size=3, progress=False)
    items = texts(10)  # chunks of 3, 3, 3, 1
    crashing = FakeEncoder(fail_on_call=3)
    with pytest.raises(RuntimeError, match="simulated crash"):
        cache.embed(ENCODER, items, crashing, label="fake")
    entry = cache.entry_dir("fake", cache.key(ENCODER, items))
    assert sorted(p.name for p in entry.glob("chunk*.npy")) == ["chunk3-000000.npy", "chunk3-000001.npy"]
    assert not (entry / MANIFEST).exists() and not (entry / MATRIX).exists()

    resumed = FakeEncoder()
    got = cache.embed(ENCODER, items, resumed, label="fake")
    assert resumed.encoded == items[6:]
    assert got.encoded == 4
    np.testing.assert_array_equal(got.matrix, FakeEncoder()(items))


def test_rerun_with_another_chunk_size_ignores_chunks_of_the_old_size(tmp_path):
    items = texts(10)
    with pytest.raises(RuntimeError):
        EmbeddingCache(tmp_path, chunk_size=3, progress=False).embed(ENCODER, items, FakeEncoder(fail_on_call=4),
                                                                     label="fake")
    resumed = FakeEncoder()
    got = EmbeddingCache(tmp_path, chunk_size=4, progress=False).embed(ENCODER, items, resumed, label="fake")
    assert resumed.encoded == items
    np.testing.assert_array_equal(got.matrix, FakeEncoder()(items))
    assert not list(got.path.glob("chunk*"))


def test_a_complete_entry_holds_matrix_and_manifest_only(tmp_path):
    cache = EmbeddingCache(tmp_path, chunk_size=4, progress=False)
    got = cache.embed(ENCODER, texts(9), FakeEncoder(), label="my/model name")
    assert sorted(os.listdir(got.path)) == [MATRIX, MANIFEST]
    assert got.path.parent == tmp_path and got.path.name.startswith("my-model-name-")
    manifest = (got.path / MANIFEST).read_text()
    assert '"rows": 9' in manifest and '"fingerprint": "abc"' in manifest


def test_one_shot_iterators_are_refused(tmp_path):
    cache = EmbeddingCache(tmp_path, progress=False)
    with pytest.raises(TypeError, match="re-iterable"):
        cache.embed(ENCODER, iter(texts(3)), FakeEncoder())


def test_encoder_returning_wrong_row_count_is_an_error(tmp_path):
    cache = EmbeddingCache(tmp_path, progress=False)
    with pytest.raises(ValueError, match="shape"):
        cache.embed(ENCODER, texts(3), lambda items: np.zeros((len(items) - 1, 2)))


def test_default_cache_dir_is_under_instir_home():
    assert default_cache_dir() == Path(os.environ["INSTIR_HOME"]) / "embeddings"
