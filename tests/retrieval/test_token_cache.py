"""The ragged token-embedding cache: packed layout, resume after a crash, damaged files rebuilt."""

import hashlib
import io
import json
import shutil
import threading
import time
import warnings

import numpy as np
import pytest
from says import warns_saying

from instir.retrieval.embedding_cache import EmbeddingCache
from instir.retrieval.token_cache import TokenEmbeddingCache

ITEMS = [f"text {i}" for i in range(10)]


def fake_encode(items):
    """Input i of the list ``text i`` gets (i % 3 + 1) rows filled with i + row / 10."""
    out = []
    for item in items:
        i = int(item.split()[1])
        out.append(np.array([[i + r / 10, -i] for r in range(i % 3 + 1)], dtype=np.float32))
    return out


class Counting:
    def __init__(self, fail_on_call=None):
        self.calls, self.inputs, self.fail_on_call = 0, 0, fail_on_call

    def __call__(self, items):
        self.calls += 1
        if self.calls == self.fail_on_call:
            raise RuntimeError("crash")
        self.inputs += len(items)
        return fake_encode(items)


def test_packed_tokens_and_offsets_give_back_every_input(tmp_path):
    got = TokenEmbeddingCache(tmp_path, chunk_size=4, progress=False).embed({"m": 1}, ITEMS, Counting())
    assert got.encoded == 10 and len(got) == 10
    for i, expected in enumerate(fake_encode(ITEMS)):
        np.testing.assert_array_equal(got[i], expected)
    assert got.offsets[-1] == got.tokens.shape[0] == sum(i % 3 + 1 for i in range(10))
    assert sorted(p.name for p in got.path.parent.iterdir()) == [got.path.name]  # chunks gone


def test_rerun_after_a_crash_encodes_only_the_missing_chunks(tmp_path):
    cache = TokenEmbeddingCache(tmp_path, chunk_size=4, progress=False)
    with pytest.raises(RuntimeError, match="crash"):
        cache.embed({"m": 1}, ITEMS, Counting(fail_on_call=3))
    resumed = Counting()
    got = cache.embed({"m": 1}, ITEMS, resumed)
    assert (resumed.calls, resumed.inputs, got.encoded) == (1, 2, 2)
    np.testing.assert_array_equal(got.tokens, np.concatenate(fake_encode(ITEMS)))
    warm = Counting()
    assert cache.embed({"m": 1}, ITEMS, warm).encoded == 0 and warm.calls == 0


def test_two_encodes_of_the_same_inputs_at_once_encode_them_once_and_both_get_them(tmp_path):
    """The token cache shares the embedding cache's chunk loop: the second of two encoders failed on a chunk
    the first had removed on publishing."""
    cache = TokenEmbeddingCache(tmp_path, chunk_size=2, progress=False)
    started, got = threading.Event(), []

    def slow(seconds, counting):
        def encode(items):
            started.set()
            time.sleep(seconds)
            return counting(items)
        return encode

    first, second = Counting(), Counting()
    thread = threading.Thread(target=lambda: got.append(cache.embed({"m": 1}, ITEMS, slow(0.05, first))))
    thread.start()
    assert started.wait(10)
    with warns_saying(UserWarning, "another process is building", "waiting"):
        waited = cache.embed({"m": 1}, ITEMS, slow(0.1, second))
    thread.join(10)
    assert (first.inputs, second.calls, got[0].encoded, waited.encoded) == (10, 0, 10, 0)
    np.testing.assert_array_equal(waited.tokens, np.concatenate(fake_encode(ITEMS)))
    assert [p.name for p in tmp_path.iterdir()] == [waited.path.name]


def test_damaged_chunk_is_re_encoded_with_a_warning(tmp_path):
    cache = TokenEmbeddingCache(tmp_path, chunk_size=4, progress=False)
    with pytest.raises(RuntimeError):
        cache.embed({"m": 1}, ITEMS, Counting(fail_on_call=3))
    (tokens_chunk,) = tmp_path.glob("*.partial/chunk4-000001.tokens.npy")
    tokens_chunk.write_bytes(tokens_chunk.read_bytes()[:-8])
    again = Counting()
    with warns_saying(UserWarning, "chunk4-000001.tokens.npy", "checksum"):
        got = cache.embed({"m": 1}, ITEMS, again)
    assert again.inputs == 4 + 2
    np.testing.assert_array_equal(got.tokens, np.concatenate(fake_encode(ITEMS)))


def test_damaged_joined_matrix_is_rebuilt(tmp_path):
    cache = TokenEmbeddingCache(tmp_path, chunk_size=4, progress=False)
    first = cache.embed({"m": 1}, ITEMS, Counting())
    matrix = first.path / "tokens.npy"
    data = bytearray(matrix.read_bytes())
    data[-4:] = b"\0\0\0\0"
    matrix.write_bytes(bytes(data))
    again = Counting()
    with pytest.warns(UserWarning, match="does not match the checksum"):
        got = cache.embed({"m": 1}, ITEMS, again)
    assert again.inputs == 10
    np.testing.assert_array_equal(got.tokens, np.concatenate(fake_encode(ITEMS)))


def test_encoder_returning_an_empty_matrix_is_refused(tmp_path):
    with pytest.raises(ValueError, match="each must be \\(n_tokens >= 1, dim\\)"):
        TokenEmbeddingCache(tmp_path, progress=False).embed({"m": 1}, ["a"], lambda items: [np.zeros((0, 2))])


@pytest.mark.parametrize(("returned", "what"), [(lambda items: fake_encode(items)[:-1], "3 matrices for 4 inputs"),
                                                (lambda items: [np.ones(3) for _ in items], "4 matrices for 4 inputs")])
def test_an_encoder_returning_too_few_or_one_dimensional_matrices_is_refused_naming_it(tmp_path, returned, what):
    with pytest.raises(ValueError, match=f"encode returned {what}, each must be \\(n_tokens >= 1, dim\\)"):
        TokenEmbeddingCache(tmp_path, chunk_size=4, progress=False).embed({"m": 1}, ITEMS, returned)


def test_the_manifest_records_the_inputs_and_tokens_and_the_lengths_are_int64(tmp_path):
    got = TokenEmbeddingCache(tmp_path, chunk_size=4, progress=False).embed({"m": 1}, ITEMS, Counting())
    meta = json.loads((got.path / "manifest.json").read_text())["meta"]
    assert (meta["inputs"], meta["tokens"]) == (10, sum(i % 3 + 1 for i in range(10)))
    assert got.doclens.dtype == np.int64 and got.offsets.dtype == np.int64


@pytest.mark.parametrize("lengths,said", [([2, 2, 3, 1, 2, 3, 1, 2, 3, 1], "do not add up to the 19 token rows"),
                                          ([0, 3, 3, 1, 2, 3, 1, 2, 3, 1], "holds a length below 1")])
def test_recorded_lengths_that_miss_the_token_rows_or_hold_an_empty_input_are_refused(tmp_path, lengths, said):
    # the second adds up to the 19 rows: it was said not to, which sent a reader looking for a missing row
    cache = TokenEmbeddingCache(tmp_path, chunk_size=4, progress=False)
    entry = cache.embed({"m": 1}, ITEMS, Counting()).path
    np.save(entry / "doclens.npy", np.array(lengths, dtype=np.float32)[:, None])
    info = json.loads((entry / "manifest.json").read_text())  # recorded as a consistent entry by another writer
    data = (entry / "doclens.npy").read_bytes()
    info["files"]["doclens.npy"] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (entry / "manifest.json").write_text(json.dumps(info))
    again = Counting()
    with warns_saying(UserWarning, "doclens.npy", said):
        got = cache.embed({"m": 1}, ITEMS, again)
    assert again.inputs == 10 and got.doclens.tolist() == [i % 3 + 1 for i in range(10)]


def test_an_entry_whose_manifest_does_not_record_the_lengths_is_encoded_again(tmp_path):
    cache = TokenEmbeddingCache(tmp_path, chunk_size=4, progress=False)
    entry = cache.embed({"m": 1}, ITEMS, Counting()).path
    info = json.loads((entry / "manifest.json").read_text())
    del info["files"]["doclens.npy"]
    (entry / "manifest.json").write_text(json.dumps(info))
    (entry / "doclens.npy").unlink()
    again = Counting()
    with pytest.warns(UserWarning, match="doclens.npy"):
        got = cache.embed({"m": 1}, ITEMS, again)
    assert again.inputs == 10 and len(got) == 10


def test_a_token_matrix_that_cannot_be_written_is_an_error_naming_it_and_the_chunks_stay(tmp_path, monkeypatch):
    import errno

    import instir.retrieval.token_cache as token_cache

    def full_disk(path, chunk_files, n_rows):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(token_cache, "join_chunks", full_disk)
    with pytest.raises(OSError, match="No space left on device") as raised:
        TokenEmbeddingCache(tmp_path, chunk_size=4, progress=False).embed({"m": 1}, ITEMS, Counting())
    assert raised.value.filename.endswith("/tokens.npy") and ".tmp" not in raised.value.filename
    assert len(list(tmp_path.glob("*.partial/chunk4-*.tokens.npy"))) == 3  # kept for the rerun


def earlier_kits_token_entry(root, items, spoil=lambda manifest: None):
    """The entry of ``items`` as a kit before the one verified store (e794caf) kept it: ``tokens/`` and ``doclens/``
    (each an ``embeddings.npy``) under a manifest recording both ``parts``, which ``spoil`` may change."""
    key, entry = EmbeddingCache(root, chunk_size=2, progress=False).entry_of({"model": "m"}, items)
    shutil.rmtree(entry, ignore_errors=True)
    parts = {}
    for part, matrix in [("tokens", np.array([[10, 10], [10, 10], [5, 5]], np.float32)),
                         ("doclens", np.array([[2], [1]], np.float32))]:
        buffer = io.BytesIO()
        np.save(buffer, matrix)
        (entry / part).mkdir(parents=True)
        (entry / part / "embeddings.npy").write_bytes(buffer.getvalue())
        parts[part] = {"bytes": len(buffer.getvalue()), "sha256": hashlib.sha256(buffer.getvalue()).hexdigest(),
                       "shape": list(matrix.shape)}
    manifest = {"key": key, "encoder": {"model": "m"}, "inputs": 2, "tokens": 3, "chunk_size": 2, "parts": parts}
    spoil(manifest)
    (entry / "manifest.json").write_text(json.dumps(manifest))
    return entry


def test_an_earlier_kits_token_entry_is_taken_over_not_encoded_again(tmp_path):
    # a kit before the one verified store (e794caf) kept a token entry as tokens/ and doclens/ (each an embeddings.npy)
    # under a manifest recording both 'parts': today's cache lays it out as its own once both match their record,
    # where it removed it ('is not a complete manifest … truncated, zeroed or overwritten') and encoded it again
    items, calls = ["alpha beta", "gamma"], []

    def encode(batch):
        calls.append(len(batch))
        return [np.full((len(text.split()), 2), float(len(text)), dtype=np.float32) for text in batch]

    entry = earlier_kits_token_entry(tmp_path / "cache", items)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = TokenEmbeddingCache(tmp_path / "cache", chunk_size=2, progress=False).embed({"model": "m"}, items, encode)
    assert calls == [] and got.encoded == 0  # before: removed as damaged and both inputs encoded again
    assert got[0].tolist() == [[10, 10], [10, 10]] and got[1].tolist() == [[5, 5]]
    assert sorted(p.name for p in entry.iterdir()) == ["doclens.npy", "manifest.json", "tokens.npy"]
    assert json.loads((entry / "manifest.json").read_text())["description"] == {"model": "m"}  # its encoder, kept


@pytest.mark.parametrize("spoil", [
    lambda manifest: manifest.update(key="0" * 64),
    lambda manifest: manifest["parts"]["tokens"].update(shape=[2, 2]),
], ids=["another key", "another shape"])
def test_an_earlier_kits_token_entry_that_does_not_match_its_record_is_encoded_again(tmp_path, spoil):
    # an entry recorded under another key (another encoder's), or whose matrix is not the one its record names, is
    # never served: the inputs are encoded again
    items, calls = ["alpha beta", "gamma"], []

    def encode(batch):
        calls.append(len(batch))
        return [np.full((len(text.split()), 2), float(len(text)), dtype=np.float32) for text in batch]

    earlier_kits_token_entry(tmp_path / "cache", items, spoil)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the store's word on the entry it removes
        got = TokenEmbeddingCache(tmp_path / "cache", chunk_size=2, progress=False).embed({"model": "m"}, items, encode)
    assert calls == [2] and got.encoded == 2
    assert got[0].tolist() == [[10, 10], [10, 10]] and got[1].tolist() == [[5, 5]]


def test_token_embed_into_a_cache_folder_that_cannot_be_written_keeps_them_in_memory(tmp_path, monkeypatch):
    # on another account's read-only cache the chunks' folder could not be made: "Permission denied: <entry>.partial"
    # where the store promises a warning and the token matrices kept in memory
    import os

    from instir import verified_store

    root = tmp_path / "tokens"
    root.mkdir()
    real_mkdir = os.mkdir

    def mkdir(path, *args, **kwargs):
        if str(path).startswith(str(root) + os.sep):
            raise PermissionError(13, "Permission denied", str(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)
    monkeypatch.setattr(verified_store, "_warned_unwritable", set())
    with warns_saying(verified_store.CacheWarning, str(root), "cannot be written", "in memory"):
        got = TokenEmbeddingCache(root, chunk_size=4, progress=False).embed({"m": 1}, ITEMS, Counting())
    assert got.encoded == 10 and list(root.iterdir()) == []
    for i, expected in enumerate(fake_encode(ITEMS)):
        np.testing.assert_array_equal(got[i], expected)
