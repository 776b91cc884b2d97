"""The on-disk embedding cache: hits, misses, crash recovery, layout (no model needed: a
deterministic fake encoder stands in)."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from says import warns_saying

from instir import verified_store
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
    work = cache.work_dir(entry)
    assert sorted(p.name for p in work.glob("chunk*.npy")) == ["chunk3-000000.npy", "chunk3-000001.npy"]
    assert not entry.exists()  # no entry until every chunk is joined


    resumed = FakeEncoder()
    got = cache.embed(ENCODER, items, resumed, label="fake")
    assert resumed.encoded == items[6:]
    assert got.encoded == 4
    np.testing.assert_array_equal(got.matrix, FakeEncoder()(items))


class SlowEncoder(FakeEncoder):
    """A :class:`FakeEncoder` taking ``seconds`` per chunk; ``started`` is set at its first call."""

    def __init__(self, seconds: float):
        super().__init__()
        self.seconds, self.started = seconds, threading.Event()

    def __call__(self, items: list[str]) -> np.ndarray:
        self.started.set()
        time.sleep(self.seconds)
        return super().__call__(items)


def test_two_encodes_of_one_corpus_at_once_encode_it_once_and_both_get_it(tmp_path):
    """The second of two processes encoding one corpus failed (``No such file or directory: ….partial/chunk…``:
    the first removed the shared chunks on publishing) and left its own chunks behind for ever."""
    cache = EmbeddingCache(tmp_path, chunk_size=2, progress=False)
    items, first, second, got = texts(8), SlowEncoder(0.05), SlowEncoder(0.1), []
    thread = threading.Thread(target=lambda: got.append(cache.embed(ENCODER, items, first, label="fake")))
    thread.start()
    assert first.started.wait(10)
    with warns_saying(verified_store.CacheWarning, "another process is building", "waiting"):
        waited = cache.embed(ENCODER, items, second, label="fake")
    thread.join(10)
    assert first.encoded == items and second.calls == 0 and (got[0].encoded, waited.encoded) == (8, 0)
    np.testing.assert_array_equal(waited.matrix, FakeEncoder()(items))
    assert [p.name for p in tmp_path.iterdir()] == [waited.path.name]  # no chunks, no lock left


def test_chunks_left_beside_a_published_entry_go_at_its_next_load(tmp_path):
    """What the loser of that race left was never removed: a later run found the entry and looked no further."""
    cache = EmbeddingCache(tmp_path, chunk_size=4, progress=False)
    entry = cache.embed(ENCODER, texts(10), FakeEncoder(), label="fake").path
    cache.work_dir(entry).mkdir()
    verified_store.write_part(cache.chunk_path(entry, 0), np.ones((4, 3)))
    again = FakeEncoder()
    assert cache.embed(ENCODER, texts(10), again, label="fake").encoded == 0 and again.calls == 0
    assert not cache_work_left(entry)


def test_rerun_with_another_chunk_size_ignores_chunks_of_the_old_size(tmp_path):
    items = texts(10)
    with pytest.raises(RuntimeError):
        EmbeddingCache(tmp_path, chunk_size=3, progress=False).embed(ENCODER, items, FakeEncoder(fail_on_call=4),
                                                                     label="fake")
    resumed = FakeEncoder()
    got = EmbeddingCache(tmp_path, chunk_size=4, progress=False).embed(ENCODER, items, resumed, label="fake")
    assert resumed.encoded == items
    np.testing.assert_array_equal(got.matrix, FakeEncoder()(items))
    assert not cache_work_left(got.path)


def cache_work_left(entry: Path) -> list[Path]:
    return list(entry.parent.glob(entry.name + ".partial"))


def test_a_complete_entry_holds_matrix_and_manifest_only(tmp_path):
    cache = EmbeddingCache(tmp_path, chunk_size=4, progress=False)
    got = cache.embed(ENCODER, texts(9), FakeEncoder(), label="my/model name")
    assert sorted(os.listdir(got.path)) == [MATRIX, MANIFEST] and not cache_work_left(got.path)
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


def crashed_entry(tmp_path) -> tuple[EmbeddingCache, list[str], Path]:
    """A cache whose first encode died after two finished chunks of 3 (of 10 inputs); its work folder."""
    cache = EmbeddingCache(tmp_path, chunk_size=3, progress=False)
    items = texts(10)
    with pytest.raises(RuntimeError):
        cache.embed(ENCODER, items, FakeEncoder(fail_on_call=3), label="fake")
    return cache, items, cache.work_dir(cache.entry_dir("fake", cache.key(ENCODER, items)))


def corrupt(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "garbage":
        path.write_bytes(os.urandom(len(data)))
    elif how == "zeroed bytes":
        path.write_bytes(bytes(len(data)))
    elif how == "zeroed vectors":  # a valid .npy of the right shape, all zeros
        shape = np.load(path, mmap_mode="r").shape
        np.save(path, np.zeros(shape, dtype=np.float32))
    else:
        raise AssertionError(how)


@pytest.mark.parametrize("how", ["truncated", "garbage", "zeroed bytes", "zeroed vectors"])
def test_a_corrupt_chunk_is_re_encoded_with_a_warning_naming_it(tmp_path, how):
    cache, items, entry = crashed_entry(tmp_path)
    bad = entry / "chunk3-000001.npy"
    corrupt(bad, how)
    resumed = FakeEncoder()
    with pytest.warns(UserWarning, match=re.escape(str(bad))):
        got = cache.embed(ENCODER, items, resumed, label="fake")
    assert resumed.encoded == items[3:]  # chunk 0 reused, the corrupt chunk 1 and the missing rest encoded
    np.testing.assert_array_equal(got.matrix, FakeEncoder()(items))


def test_a_chunk_without_its_checksum_is_re_encoded(tmp_path):
    cache, items, entry = crashed_entry(tmp_path)
    (entry / "chunk3-000000.npy.sha256").unlink()
    resumed = FakeEncoder()
    with pytest.warns(UserWarning, match="no readable checksum"):
        cache.embed(ENCODER, items, resumed, label="fake")
    assert resumed.encoded[:3] == items[:3] and len(resumed.encoded) == 7


def test_chunk_helpers_write_and_verify_one_chunk(tmp_path):
    cache = EmbeddingCache(tmp_path, chunk_size=5, progress=False)
    entry = cache.entry_dir("m", "k" * 64)
    path = cache.chunk_path(entry, 2)
    assert path == cache.work_dir(entry) / "chunk5-000002.npy" and not cache.has_chunk(entry, 2, 5)
    assert cache.write_chunk(entry, 2, ["x"] * 5, lambda items: np.ones((len(items), 3)))
    assert cache.has_chunk(entry, 2, 5)
    with pytest.warns(UserWarning, match="where \\(4, dim\\) float32 is expected"):
        assert not cache.has_chunk(entry, 2, 4)
    assert not path.exists()  # a chunk that fails is removed, never used


@pytest.mark.parametrize("how", ["truncated", "garbage", "zeroed bytes", "zeroed vectors"])
def test_a_corrupt_joined_matrix_is_rebuilt_with_a_warning_naming_it(tmp_path, how):
    cache = EmbeddingCache(tmp_path, chunk_size=4, progress=False)
    items = texts(10)
    entry = cache.embed(ENCODER, items, FakeEncoder(), label="fake").path
    corrupt(entry / MATRIX, how)
    again = FakeEncoder()
    with pytest.warns(UserWarning, match=re.escape(str(entry / MATRIX))):
        got = cache.embed(ENCODER, items, again, label="fake")
    assert again.encoded == items and got.encoded == 10
    np.testing.assert_array_equal(got.matrix, FakeEncoder()(items))


def test_an_unreadable_manifest_rebuilds_the_entry(tmp_path):
    cache = EmbeddingCache(tmp_path, chunk_size=4, progress=False)
    entry = cache.embed(ENCODER, texts(5), FakeEncoder(), label="fake").path
    (entry / MANIFEST).write_text("{not json")
    with pytest.warns(UserWarning, match=re.escape(str(entry / MANIFEST))):
        got = cache.embed(ENCODER, texts(5), FakeEncoder(), label="fake")
    assert got.encoded == 5


def test_manifest_records_rows_size_and_checksum_of_the_matrix(tmp_path):
    got = EmbeddingCache(tmp_path, chunk_size=4, progress=False).embed(ENCODER, texts(9), FakeEncoder(), label="fake")
    info = json.loads((got.path / MANIFEST).read_text())
    data = (got.path / MATRIX).read_bytes()
    assert info["files"] == {MATRIX: {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}}
    assert info["meta"]["rows"] == 9 and info["description"] == ENCODER


def earlier_kit_entry(cache: EmbeddingCache, items: list[str], *, checksum: bool) -> Path:
    """An entry in the layout the kit wrote before the verified store: ``matrix`` in the manifest."""
    entry = cache.entry_dir("fake", cache.key(ENCODER, items))
    entry.mkdir(parents=True)
    np.save(entry / MATRIX, FakeEncoder()(items))
    data = (entry / MATRIX).read_bytes()
    matrix = {"shape": [len(items), 3], "bytes": len(data)}
    if checksum:
        matrix["sha256"] = hashlib.sha256(data).hexdigest()
    (entry / MANIFEST).write_text(json.dumps({"key": cache.key(ENCODER, items), "encoder": ENCODER,
                                              "rows": len(items), "dim": 3, "chunk_size": 4, "matrix": matrix}))
    return entry


@pytest.mark.parametrize("checksum", [True, False])
def test_an_entry_of_an_earlier_kit_is_taken_over_not_encoded_again(tmp_path, checksum):
    cache = EmbeddingCache(tmp_path, chunk_size=4, progress=False)
    entry = earlier_kit_entry(cache, texts(6), checksum=checksum)
    again = FakeEncoder()
    got = cache.embed(ENCODER, texts(6), again, label="fake")
    assert got.encoded == 0 and again.calls == 0
    np.testing.assert_array_equal(got.matrix, FakeEncoder()(texts(6)))
    assert "files" in json.loads((entry / MANIFEST).read_text())  # now in the store's format


def test_an_earlier_kits_entry_whose_matrix_fails_its_checksum_is_encoded_again(tmp_path):
    cache = EmbeddingCache(tmp_path, chunk_size=4, progress=False)
    entry = earlier_kit_entry(cache, texts(6), checksum=True)
    corrupt(entry / MATRIX, "zeroed vectors")
    again = FakeEncoder()
    with pytest.warns(UserWarning, match=re.escape(str(entry / MANIFEST))):
        assert cache.embed(ENCODER, texts(6), again, label="fake").encoded == 6


def test_above_the_full_hash_size_size_and_header_are_still_checked(tmp_path, monkeypatch):
    monkeypatch.setattr(verified_store, "FULL_HASH_BYTES", 0)
    cache = EmbeddingCache(tmp_path, chunk_size=4, progress=False)
    entry = cache.embed(ENCODER, texts(6), FakeEncoder(), label="fake").path
    (entry / MATRIX).write_bytes((entry / MATRIX).read_bytes()[:-8])  # header intact, last row cut
    with pytest.warns(UserWarning, match="truncated"):
        assert cache.embed(ENCODER, texts(6), FakeEncoder(), label="fake").encoded == 6


def test_cache_files_respect_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        got = EmbeddingCache(tmp_path, chunk_size=4, progress=False).embed(ENCODER, texts(5), FakeEncoder(), label="f")
    finally:
        os.umask(old)
    assert {(got.path / name).stat().st_mode & 0o777 for name in (MATRIX, MANIFEST)} == {0o644}


def test_the_cache_key_is_the_sha256_of_the_sorted_encoder_then_each_input_as_written():
    """Pinned: a key that changed between kit versions would re-encode every cached corpus (hours on a GPU)."""
    items = ["Café", ["Title", "naïve text"]]
    key = EmbeddingCache.key({"model": "m", "fingerprint": "f"}, items)
    assert key == "08ec817fb8a19d979ff46c19578df0a7056d1f26002d1f390a715f8c9b0ce015"
    assert key == EmbeddingCache.key({"fingerprint": "f", "model": "m"}, items)  # the encoder's key order is no part


def test_inputs_differing_in_case_or_only_in_where_one_ends_have_different_keys():
    assert EmbeddingCache.key(ENCODER, ["Apple"]) != EmbeddingCache.key(ENCODER, ["apple"])
    assert EmbeddingCache.key(ENCODER, [1, 23]) != EmbeddingCache.key(ENCODER, [12, 3])


def test_a_chunk_size_of_one_is_taken_and_zero_is_refused(tmp_path):
    got = EmbeddingCache(tmp_path, chunk_size=1, progress=False).embed(ENCODER, texts(3), FakeEncoder(), label="fake")
    np.testing.assert_array_equal(got.matrix, FakeEncoder()(texts(3)))
    with pytest.raises(ValueError, match="chunk_size must be positive, got 0"):
        EmbeddingCache(tmp_path, chunk_size=0)


def test_an_entry_folder_is_named_by_the_labels_last_48_characters_or_the_model_and_24_of_the_key(tmp_path):
    cache = EmbeddingCache(tmp_path, chunk_size=4, progress=False)
    long_label = "organisation-with-a-long-name/" + "m" * 40 + "-v2"
    got = cache.embed(ENCODER, texts(2), FakeEncoder(), label=long_label)
    assert got.path.name == "name-" + "m" * 40 + "-v2-" + got.key[:24]
    assert cache.entry_of(ENCODER, texts(2))[1].name == "fake-" + got.key[:24]  # no label: the encoder's model
    assert cache.entry_of({"fingerprint": "abc"}, texts(2))[1].name.startswith("model-")


def test_no_inputs_at_all_is_refused_in_one_line(tmp_path):
    with pytest.raises(ValueError, match="nothing to embed \\(no inputs\\)"):
        EmbeddingCache(tmp_path, progress=False).embed(ENCODER, [], FakeEncoder())


def test_an_encoder_returning_one_number_per_input_is_refused_before_a_chunk_is_written(tmp_path):
    cache = EmbeddingCache(tmp_path, chunk_size=4, progress=False)
    with pytest.raises(ValueError, match="encode returned shape \\(3,\\) for 3 inputs"):
        cache.embed(ENCODER, texts(3), lambda items: np.ones(len(items)), label="fake")
    assert not list(tmp_path.glob("*.partial/chunk*"))


def test_an_earlier_kits_entry_recorded_under_another_key_is_not_taken_over(tmp_path):
    cache = EmbeddingCache(tmp_path, chunk_size=4, progress=False)
    entry = earlier_kit_entry(cache, texts(6), checksum=True)
    info = json.loads((entry / MANIFEST).read_text())
    (entry / MANIFEST).write_text(json.dumps({**info, "key": "0" * 64}))  # another corpus's entry in this folder
    again = FakeEncoder()
    with pytest.warns(UserWarning, match=re.escape(str(entry / MANIFEST))):
        assert cache.embed(ENCODER, texts(6), again, label="fake").encoded == 6


def test_a_chunk_of_another_width_is_refused_when_the_matrix_is_joined_naming_it(tmp_path):
    cache = EmbeddingCache(tmp_path, chunk_size=4, progress=False)
    items = texts(8)
    entry = cache.entry_of(ENCODER, items, "fake")[1]
    cache.write_chunk(entry, 1, items[4:], lambda chunk: np.ones((len(chunk), 2)))  # a chunk by another encoder
    with pytest.raises(ValueError, match=re.escape(f"{cache.chunk_path(entry, 1)} holds (4, 2) float32 where "
                                                   "(rows, 3) float32 is expected")):
        cache.embed(ENCODER, items, FakeEncoder(), label="fake")


def rewrite_recorded(entry: Path, name: str, array: np.ndarray) -> None:
    """Replace one file of an entry and record its new size and checksum in the manifest (as a consistent entry
    by another writer would be): only the loader's own checks stand between it and a caller."""
    np.save(entry / name, array)
    info = json.loads((entry / MANIFEST).read_text())
    data = (entry / name).read_bytes()
    info["files"][name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (entry / MANIFEST).write_text(json.dumps(info))


@pytest.mark.parametrize("stored", [np.ones((9, 3), np.float32), np.ones((10, 3), np.float64)])
def test_a_recorded_matrix_of_another_row_count_or_dtype_is_refused_and_encoded_again(tmp_path, stored):
    cache = EmbeddingCache(tmp_path, chunk_size=4, progress=False)
    entry = cache.embed(ENCODER, texts(10), FakeEncoder(), label="fake").path
    rewrite_recorded(entry, MATRIX, stored)
    again = FakeEncoder()
    with pytest.warns(UserWarning, match="where \\(10, dim\\) float32 is expected"):
        got = cache.embed(ENCODER, texts(10), again, label="fake")
    assert got.encoded == 10
    np.testing.assert_array_equal(got.matrix, FakeEncoder()(texts(10)))


def test_chunks_an_earlier_kits_interrupted_encoding_left_in_its_entry_are_resumed_not_encoded_again(tmp_path):
    # a kit before the store's work folder (e794caf) wrote each finished chunk and its checksum in the entry's own
    # folder until the manifest came: today's encoding resumes from them, as from its own parts, where it removed
    # them as a damaged entry ('manifest.json is missing: removed, rebuilding it') and encoded everything again
    from instir.verified_store import write_part

    items, calls = ["a", "b", "c", "d", "e"], []

    def encode(batch):
        calls.append(list(batch))
        return np.array([[float(ord(text)), 1.0] for text in batch])

    def earlier_kits_entry():
        cache = EmbeddingCache(tmp_path / "cache", chunk_size=2, progress=False)
        _, entry = cache.entry_of({"model": "m"}, items)
        shutil.rmtree(entry, ignore_errors=True)
        shutil.rmtree(cache.work_dir(entry), ignore_errors=True)
        entry.mkdir(parents=True)
        for index, part in enumerate([["a", "b"], ["c", "d"]]):
            write_part(entry / f"chunk2-{index:06d}.npy", encode(part))
        calls.clear()
        return cache, entry

    cache, entry = earlier_kits_entry()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # before: 'manifest.json is missing: removed, rebuilding it', all 5 encoded
        got = cache.embed({"model": "m"}, items, encode)
    assert calls == [["e"]] and got.encoded == 1 and got.matrix[:, 0].tolist() == [97, 98, 99, 100, 101]
    assert (entry / "manifest.json").is_file() and not cache.work_dir(entry).exists()


def read_only(root, monkeypatch):
    """Make the folder ``root`` refuse new files and folders, as another account's read-only cache does (in-process:
    root ignores file permissions)."""
    real_mkdir, real_open, inside = os.mkdir, os.open, str(root)

    def mkdir(path, *args, **kwargs):
        if str(path).startswith(inside + os.sep):
            raise PermissionError(13, "Permission denied", str(path))
        return real_mkdir(path, *args, **kwargs)

    def open_(path, flags, *args, **kwargs):
        if flags & os.O_CREAT and str(path).startswith(inside + os.sep):
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)
    monkeypatch.setattr(os, "open", open_)


def test_embed_into_a_cache_folder_that_cannot_be_written_keeps_the_vectors_in_memory(tmp_path, monkeypatch):
    # a student's dense run on a teacher's read-only INSTIR_HOME stopped at "Permission denied: <entry>.partial"
    # (the chunks' folder) where the store promises a warning and the vectors kept in memory
    root = tmp_path / "embeddings"
    root.mkdir()
    read_only(root, monkeypatch)
    monkeypatch.setattr(verified_store, "_warned_unwritable", set())
    items = texts(10)
    with warns_saying(verified_store.CacheWarning, str(root), "cannot be written", "in memory"):
        got = EmbeddingCache(root, chunk_size=4, progress=False).embed(ENCODER, items, FakeEncoder(), label="fake")
    np.testing.assert_array_equal(got.matrix, FakeEncoder()(items))
    assert got.encoded == 10 and list(root.iterdir()) == []


def test_an_earlier_kits_chunk_the_work_folder_already_holds_is_not_left_in_the_entry(tmp_path):
    # an earlier kit's chunks, the first also in today's work folder (a take-over interrupted after its first move):
    # what is left in the entry's folder goes with it, and no entry is judged damaged
    from instir.verified_store import write_part

    items, calls = ["a", "b", "c", "d", "e"], []

    def encode(batch):
        calls.append(list(batch))
        return np.array([[float(ord(text)), 1.0] for text in batch])

    cache = EmbeddingCache(tmp_path / "cache", chunk_size=2, progress=False)
    _, entry = cache.entry_of({"model": "m"}, items)
    work = cache.work_dir(entry)
    for folder in (entry, work):
        folder.mkdir(parents=True, exist_ok=True)
    for index, part in enumerate([["a", "b"], ["c", "d"]]):
        write_part(entry / f"chunk2-{index:06d}.npy", encode(part))
    write_part(work / "chunk2-000000.npy", encode(["a", "b"]))
    calls.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no 'removed, rebuilding it' of the chunk left behind
        got = cache.embed({"model": "m"}, items, encode)
    assert calls == [["e"]] and got.matrix[:, 0].tolist() == [97, 98, 99, 100, 101]
    assert sorted(p.name for p in entry.iterdir()) == ["embeddings.npy", "manifest.json"]


def test_chunks_in_a_folder_the_entry_links_to_are_left_where_they_are(tmp_path):
    # an entry that is a symlink (to a folder of the user's) is not emptied into the cache's work folder
    from instir.verified_store import write_part

    items = ["a", "b"]
    cache = EmbeddingCache(tmp_path / "cache", chunk_size=2, progress=False)
    _, entry = cache.entry_of({"model": "m"}, items)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write_part(elsewhere / "chunk2-000000.npy", np.ones((2, 2), dtype=np.float32))
    entry.parent.mkdir(parents=True, exist_ok=True)
    entry.symlink_to(elsewhere, target_is_directory=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cache.embed({"model": "m"}, items, lambda batch: np.zeros((len(batch), 2)))
    assert sorted(p.name for p in elsewhere.iterdir()) == ["chunk2-000000.npy", "chunk2-000000.npy.sha256"]


_FIFO_MANIFEST = """
import os, sys, warnings
from pathlib import Path
import numpy as np
from instir.retrieval.embedding_cache import EmbeddingCache
from instir.retrieval.token_cache import TokenEmbeddingCache
root = Path(sys.argv[2])
if sys.argv[1] == "embedding":
    cache, encode = EmbeddingCache(root), lambda chunk: np.ones((len(chunk), 4), dtype=np.float32)
else:
    cache, encode = TokenEmbeddingCache(root), lambda chunk: [np.ones((2, 4), dtype=np.float32) for _ in chunk]
cache.embed({"model": "toy"}, ["a", "b"], encode, label="toy")
(manifest,) = root.rglob("manifest.json")
manifest.unlink()
os.mkfifo(manifest)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    cache.embed({"model": "toy"}, ["a", "b"], encode, label="toy")
print(*[str(w.message) for w in caught], sep="\\n")
"""


@pytest.mark.parametrize("kind", ["embedding", "token"])
def test_an_entrys_manifest_that_is_a_fifo_is_damage_not_a_read_that_blocks_the_next_encoding(tmp_path, kind):
    # planted in a group's cache, it blocked the earlier-kit check of the next encoding for ever (in a process of its
    # own here, so that a regression fails rather than hanging the suite)
    encoded = subprocess.run([sys.executable, "-c", _FIFO_MANIFEST, kind, str(tmp_path)], capture_output=True,
                             text=True, timeout=30, env={**os.environ, "INSTIR_PROGRESS": "0"})
    assert encoded.returncode == 0, encoded.stderr
    assert re.search(r"manifest\.json is a FIFO \(named pipe\), not a regular file: removed, rebuilding it",
                     encoded.stdout), encoded.stdout
