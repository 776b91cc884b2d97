"""The corpus index: one streaming pass gives what the stages ask of a corpus (ids, content
hash, word counts, where each record is), cached on disk and verified on load, so a second
load parses nothing and ``get`` parses only the requested records."""

import codecs
import hashlib
import json
import os
import re
import shutil
import threading
import time
import warnings
from itertools import chain
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from instir.benchmarks import docstore, load_benchmark
from instir.benchmarks.catalog import SAMPLE_ROOT
from instir.benchmarks.docstore import (
    CorpusIndexWarning,
    IndexedCorpus,
    build_index,
    cache_folder,
    jsonl_corpus,
    load_index,
)
from instir.benchmarks.ifir import load_ifir
from instir.benchmarks.instructir import load_instructir
from instir.benchmarks.readers import iter_corpus_docs
from instir.benchmarks.types import Corpus, Doc, FormatError

pytestmark = pytest.mark.usefixtures("own_home")  # an instir home of each test's own

FIXTURES = Path(__file__).parent / "fixtures"

#: Content hashes of the bundled sample corpora as ``Corpus.content_hash`` computed them before
#: the index existed: runs in users' out_dirs are keyed by them.
SAMPLE_HASHES = {
    "instructir-sample": "2e7192fc66fe5b2e1e3a4ba886ff4b65a63c8594a217dbdb78c39f93f456797a",
    "ifir-sample/fiqa": "ba74954803663c67354ba9fdef2557d239d46752ff7f7ac07f84571201f6c2b7",
    "ifir-sample/nfcorpus": "8fddc3a51248550c1909715cc80e53a45d6691e09944bef323cb367f58b331f6",
}
SAMPLE_CORPORA = [(SAMPLE_ROOT / "instructir-sample" / "corpus.jsonl", False),
                  (SAMPLE_ROOT / "ifir-sample" / "fiqa" / "fiqa-corpus.jsonl", True),
                  (SAMPLE_ROOT / "ifir-sample" / "nfcorpus" / "nfcorpus-corpus.jsonl", True)]
FIXTURE_CORPORA = sorted(p for p in FIXTURES.rglob("*")
                         if p.suffix in (".jsonl", ".parquet") and "corpus" in p.relative_to(FIXTURES).as_posix())


def settle(path: Path, age_s: float = 3600) -> None:
    """Date ``path`` back (files written by a test are too fresh for the cache to trust)."""
    t = time.time_ns() - int(age_s * 1e9)
    os.utime(path, ns=(t, t))


def songtingyu_doc(i: int, words: int = 12) -> dict:
    """A record as ``songtingyu/IFIR``'s ``<subset>-corpus.jsonl`` holds it (title may be empty)."""
    return {"_id": f"d{i}", "title": f"Title {i}" if i % 3 else "", "text": " ".join(f"w{i}x{j}" for j in range(words))}


def write_corpus(path: Path, records: list[dict], settled: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    if settled:
        settle(path)
    return path


def streamed(paths: list[Path], skip_empty: bool = False) -> list[Doc]:
    return list(chain.from_iterable(iter_corpus_docs(p, skip_empty=skip_empty) for p in paths))


def assert_matches_stream(index: docstore.CorpusIndex, paths: list[Path], skip_empty: bool = False) -> None:
    docs = streamed(paths, skip_empty)
    assert index.ids == [d.id for d in docs]
    assert index.content_hash == Corpus.from_docs(docs).content_hash()
    assert index.word_counts.tolist() == [len(d.indexed_text.split()) for d in docs]
    assert index.read(range(len(docs))) == docs


def outcome(call):
    """What ``call`` gives: ("ok", value), or ("error", path, line, field, message)."""
    try:
        return "ok", call()
    except FormatError as err:
        return "error", err.path, err.where, err.field, str(err)


def entries() -> list[Path]:
    folder = cache_folder()
    return sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []


class Parses:
    """Every text ``json.loads`` is given (by any reader); :meth:`of` picks the lines of one file."""

    def __init__(self):
        self.texts: list[str] = []

    def of(self, path: Path) -> list[str]:
        lines = {line.rstrip("\r\n") for line in path.read_text(encoding="utf-8-sig").splitlines()}
        return [t for t in self.texts if t.rstrip("\r\n") in lines]

    def clear(self) -> None:
        self.texts.clear()


@pytest.fixture
def parses(monkeypatch):
    seen = Parses()
    real = json.loads

    def counting(text, *args, **kwargs):
        if isinstance(text, str):
            seen.texts.append(text)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(json, "loads", counting)
    return seen


# --- the index is a streaming pass -------------------------------------------------------------

@pytest.mark.parametrize("path, skip_empty", SAMPLE_CORPORA, ids=lambda v: getattr(v, "name", str(v)))
def test_index_of_a_bundled_sample_equals_a_streaming_pass(path, skip_empty):
    assert_matches_stream(build_index([path], skip_empty=skip_empty), [path], skip_empty)
    assert_matches_stream(load_index([path], skip_empty=skip_empty), [path], skip_empty)


@pytest.mark.parametrize("name", SAMPLE_HASHES)
def test_content_hash_of_a_bundled_sample_is_the_one_existing_runs_are_keyed_by(name):
    corpus = load_benchmark(name).corpus
    assert isinstance(corpus, IndexedCorpus)
    assert corpus.content_hash() == SAMPLE_HASHES[name]
    assert load_benchmark(name).corpus.content_hash() == SAMPLE_HASHES[name]  # from the cached index


@pytest.mark.parametrize("path", FIXTURE_CORPORA, ids=lambda p: p.relative_to(FIXTURES).as_posix())
@pytest.mark.parametrize("skip_empty", [False, True])
def test_index_of_a_fixture_layout_equals_a_streaming_pass_or_fails_alike(path, skip_empty):
    stream = outcome(lambda: streamed([path], skip_empty))
    built = outcome(lambda: build_index([path], skip_empty=skip_empty))
    if stream[0] == "error":
        assert built == stream
    else:
        assert built[0] == "ok"
        assert_matches_stream(built[1], [path], skip_empty)


def test_records_skipped_for_empty_text_are_listed_and_left_out(tmp_path):
    path = write_corpus(tmp_path / "c.jsonl", [songtingyu_doc(1), {"_id": "e1", "text": "  "},
                                               {"_id": "e2", "text": None}, songtingyu_doc(2)])
    index = load_index([path], skip_empty=True)
    assert index.ids == ["d1", "d2"] and index.skipped_ids == ["e1", "e2"]
    assert_matches_stream(index, [path], skip_empty=True)


def test_offsets_hold_with_a_byte_order_mark_crlf_blank_lines_and_multibyte_text(tmp_path):
    records = [{"_id": "é1", "title": "Ünïcode", "text": "naïve café — 東京 text"}, songtingyu_doc(2),
               {"_id": "3", "text": "emoji 🙂 and tabs\there"}]
    lines = [json.dumps(r, ensure_ascii=False) for r in records]
    path = tmp_path / "c.jsonl"
    path.write_bytes(codecs.BOM_UTF8 + (lines[0] + "\r\n\r\n" + lines[1] + "\n   \n" + lines[2]).encode("utf-8"))
    settle(path)
    index = load_index([path])
    assert_matches_stream(index, [path])
    assert index.line.tolist() == [1, 3, 5]
    corpus = IndexedCorpus([path])
    assert corpus.get(["3", "é1"]) == {d.id: d for d in streamed([path]) if d.id in ("3", "é1")}


def test_a_corpus_of_several_files_is_indexed_in_order_as_the_chained_stream(tmp_path):
    a = write_corpus(tmp_path / "a.jsonl", [songtingyu_doc(i) for i in range(5)])
    b = write_corpus(tmp_path / "b.jsonl", [songtingyu_doc(i) for i in range(5, 9)])
    index = load_index([a, b])
    assert_matches_stream(index, [a, b])
    assert index.file.tolist() == [0] * 5 + [1] * 4


def test_parquet_shards_are_indexed_and_get_reads_only_the_row_groups_holding_the_ids(tmp_path, monkeypatch):
    rows = [songtingyu_doc(i) for i in range(40)]
    paths = []
    for k, part in enumerate((rows[:25], rows[25:])):
        paths.append(tmp_path / "corpus" / f"corpus-0000{k}-of-00002.parquet")
        paths[-1].parent.mkdir(exist_ok=True)
        pq.write_table(pa.Table.from_pylist(part), paths[-1], row_group_size=10)
        settle(paths[-1])
    corpus = IndexedCorpus(paths)
    assert_matches_stream(corpus.index(), paths)
    warm = IndexedCorpus(paths)
    warm.ids()  # loaded from the cache (its spot check reads a few rows)
    groups = []
    real = pq.ParquetFile.read_row_group
    monkeypatch.setattr(pq.ParquetFile, "read_row_group", lambda self, i, **kw: groups.append(i) or real(self, i, **kw))
    got = warm.get(["d3", "d27", "d8", "nope"])
    assert got == {d.id: d for d in streamed(paths) if d.id in ("d3", "d8", "d27")}
    assert list(got) == ["d3", "d8", "d27"] and sorted(groups) == [0, 0]  # one group per shard


def test_a_corpus_in_memory_computes_word_counts_on_the_fly_and_caches_nothing():
    corpus = Corpus.from_docs([Doc("a", "one two  three"), Doc("b", "four", title="T i")])
    assert corpus.word_counts().tolist() == [3, 3]
    assert corpus.word_counts().dtype == np.int64
    assert not cache_folder().exists()


# --- what the cache saves ---------------------------------------------------------------------------

def big_ifir_fiqa(tmp_path: Path, extra: int = 300) -> Path:
    """The songtingyu fiqa fixture with ``extra`` more documents in its corpus, settled."""
    root = tmp_path / "ifir"
    shutil.copytree(FIXTURES / "ifir-songtingyu" / "fiqa", root / "fiqa")
    corpus = root / "fiqa" / "fiqa-corpus.jsonl"
    with corpus.open("a", encoding="utf-8") as fh:
        fh.writelines(json.dumps(songtingyu_doc(10_000 + i)) + "\n" for i in range(extra))
    settle(corpus)
    return root / "fiqa"


def big_instructir_hf(tmp_path: Path, extra: int = 300) -> Path:
    root = tmp_path / "instructir"
    shutil.copytree(FIXTURES / "instructir-hf", root)
    with (root / "corpus.jsonl").open("a", encoding="utf-8") as fh:
        fh.writelines(json.dumps(songtingyu_doc(10_000 + i)) + "\n" for i in range(extra))
    settle(root / "corpus.jsonl")
    return root


@pytest.mark.parametrize("name, make", [("ifir/fiqa", big_ifir_fiqa), ("instructir", big_instructir_hf)])
def test_a_second_load_benchmark_in_a_fresh_corpus_parses_no_more_than_a_spot_check(tmp_path, parses, name, make):
    root = make(tmp_path)
    [corpus_file] = [p for p in root.rglob("*corpus.jsonl")]
    first = load_benchmark(name, root=root)
    n = len(first.corpus)
    assert len(parses.of(corpus_file)) >= n > 300
    parses.clear()
    second = load_benchmark(name, root=root)
    assert second.corpus is not first.corpus
    assert second.corpus.ids() == first.corpus.ids() and second.corpus.content_hash() == first.corpus.content_hash()
    assert second.corpus.word_counts().tolist() == first.corpus.word_counts().tolist()
    assert second.qrels == first.qrels and second.queries == first.queries
    # the loader's first-record check, then the first, last and SPOT_CHECKS random records
    assert 0 < len(parses.of(corpus_file)) <= 1 + 2 + docstore.SPOT_CHECKS


def test_a_relevant_document_without_text_is_found_from_the_index(tmp_path, parses):
    folder = big_ifir_fiqa(tmp_path)
    corpus = folder / "fiqa-corpus.jsonl"
    with corpus.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"_id": "99001", "title": "", "text": ""}) + "\n")
    settle(corpus)
    data = json.loads((folder / "test_data.json").read_text())
    data[1]["corpus"].append({"_id": "99001"})
    data[1]["instructions"][0]["rel"].append(len(data[1]["corpus"]) - 1)
    (folder / "test_data.json").write_text(json.dumps(data))
    load_ifir(folder, "fiqa")
    parses.clear()
    bench = load_ifir(folder, "fiqa")
    assert "99001" in bench.qrels["877_1"] and "99001" not in bench.corpus
    assert bench.meta["relevant_docs_without_text"] == 1
    assert len(parses.of(corpus)) <= 1 + 2 + docstore.SPOT_CHECKS


def test_get_parses_only_the_requested_records(tmp_path, parses):
    path = write_corpus(tmp_path / "c.jsonl", [songtingyu_doc(i, words=40) for i in range(500)])
    IndexedCorpus([path]).ids()
    corpus = IndexedCorpus([path])
    corpus.ids()
    parses.clear()
    got = corpus.get(["d400", "d7", "d123", "missing"])
    assert sorted(json.loads(line)["_id"] for line in parses.of(path)) == ["d123", "d400", "d7"]
    assert list(got) == ["d7", "d123", "d400"]  # corpus order, unknown ids left out
    assert got == {d.id: d for d in streamed([path]) if d.id in got}


def test_iterating_an_indexed_corpus_streams_the_files_as_before(tmp_path):
    path = write_corpus(tmp_path / "c.jsonl", [songtingyu_doc(i) for i in range(20)])
    corpus = IndexedCorpus([path])
    assert list(corpus) == streamed([path]) and len(corpus) == 20 and "d3" in corpus and "d99" not in corpus


# --- when the cache must not be trusted -------------------------------------------------------------

def rewrite(path: Path, records: list[dict], how: str) -> None:
    """Change ``path``: new content of the same size, a different size, or only its mtime."""
    if how == "content":
        old = path.read_bytes()
        path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
        assert len(path.read_bytes()) == len(old)
    elif how == "size":
        write_corpus(path, records + [songtingyu_doc(999)], settled=False)
    settle(path, age_s=60)  # settled, and a different mtime than before


@pytest.mark.parametrize("how", ["content", "size", "mtime"])
def test_changing_the_corpus_file_rebuilds_its_index_and_drops_the_old_entry(tmp_path, how):
    records = [songtingyu_doc(i) for i in range(10, 30)]
    path = write_corpus(tmp_path / "c.jsonl", records)
    before = load_index([path])
    assert len(entries()) == 1
    swapped = records[:]
    swapped[0], swapped[1] = {**records[1], "_id": "d10"}, {**records[0], "_id": "d11"}  # same bytes, new texts
    rewrite(path, swapped, how)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        after = IndexedCorpus([path]).index()
    assert_matches_stream(after, [path])
    if how != "mtime":
        assert after.content_hash != before.content_hash
    assert len(entries()) == 1 and load_index([path]).content_hash == after.content_hash


def test_a_file_edited_in_place_and_given_its_old_mtime_back_is_indexed_again(tmp_path):
    # on the commit before, same size + the old mtime (touch -r) kept the stamp: the old index (its ids, its content
    # hash, so the runs keyed on it) served an old corpus, unless the spot check happened to read an edited record
    records = [songtingyu_doc(i) for i in range(100, 300)]
    path = write_corpus(tmp_path / "c.jsonl", records)
    before = load_index([path])
    stamp = path.stat()
    edited = records[:]
    edited[150], edited[151] = {**records[151], "_id": "d250"}, {**records[150], "_id": "d251"}  # same bytes
    path.write_text("".join(json.dumps(r) + "\n" for r in edited), encoding="utf-8")
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    assert path.stat().st_size == stamp.st_size and path.stat().st_mtime_ns == stamp.st_mtime_ns
    after = load_index([path])
    assert_matches_stream(after, [path])
    assert after.content_hash != before.content_hash


def test_a_file_written_moments_ago_is_indexed_but_not_cached(tmp_path):
    """Two writes of the same size within the file system's timestamp granularity would look
    alike; such a fresh file is re-indexed until it has settled."""
    path = write_corpus(tmp_path / "c.jsonl", [songtingyu_doc(1), songtingyu_doc(2)], settled=False)
    stamp = path.stat().st_mtime_ns
    assert load_index([path]).ids == ["d1", "d2"] and entries() == []
    write_corpus(path, [songtingyu_doc(3), songtingyu_doc(4)], settled=False)
    os.utime(path, ns=(stamp, stamp))
    assert load_index([path]).ids == ["d3", "d4"]


def damage(entry: Path, how: str) -> str:
    """Damage a cache entry; returns the name of the file the warning must name."""
    if how == "truncated records":
        data = (entry / "records.npy").read_bytes()
        (entry / "records.npy").write_bytes(data[: len(data) // 2])
        return "records.npy"
    if how == "zeroed ids":
        size = (entry / "index.json").stat().st_size
        (entry / "index.json").write_bytes(b"\0" * size)
        return "index.json"
    if how == "overwritten manifest":
        (entry / "manifest.json").write_text("not json at all")
        return "manifest.json"
    if how == "missing records":
        (entry / "records.npy").unlink()
        return "records.npy"
    if how == "other format version":
        manifest = json.loads((entry / "manifest.json").read_text())
        (entry / "manifest.json").write_text(json.dumps({**manifest, "format": 0}))
        return "manifest.json"
    # forged: valid checksums, but the first and last documents' offsets swapped
    table = np.load(entry / "records.npy")
    table[[0, -1]] = table[[-1, 0]]
    np.save(entry / "records.npy", table)
    manifest = json.loads((entry / "manifest.json").read_text())
    data = (entry / "records.npy").read_bytes()
    manifest["files"]["records.npy"] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (entry / "manifest.json").write_text(json.dumps(manifest))
    return "records.npy"


@pytest.mark.parametrize("how", ["truncated records", "zeroed ids", "overwritten manifest", "missing records",
                                 "other format version", "offsets swapped, checksums fixed"])
def test_a_damaged_index_warns_naming_the_file_and_is_rebuilt(tmp_path, how):
    path = write_corpus(tmp_path / "c.jsonl", [songtingyu_doc(i) for i in range(30)])
    load_index([path])
    [entry] = entries()
    name = damage(entry, how)
    expected = rf"^corpus index of .*c\.jsonl: .*{entry.name}/{name} .*removed, rebuilding it"
    with pytest.warns(CorpusIndexWarning, match=expected):
        index = IndexedCorpus([path]).index()
    assert_matches_stream(index, [path])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_matches_stream(load_index([path]), [path])  # rebuilt and cached again


def test_a_stale_record_met_by_get_warns_and_reads_from_a_rebuilt_index(tmp_path, monkeypatch):
    path = write_corpus(tmp_path / "c.jsonl", [songtingyu_doc(i) for i in range(30)])
    load_index([path])
    [entry] = entries()
    table = np.load(entry / "records.npy")
    table[[5, 6]] = table[[6, 5]]
    np.save(entry / "records.npy", table)
    manifest = json.loads((entry / "manifest.json").read_text())
    data = (entry / "records.npy").read_bytes()
    manifest["files"]["records.npy"] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (entry / "manifest.json").write_text(json.dumps(manifest))
    monkeypatch.setattr(docstore, "SPOT_CHECKS", 0)  # so the load's spot check misses the swap
    corpus = IndexedCorpus([path])
    with pytest.warns(CorpusIndexWarning, match="where the corpus index has 'd5'"):
        assert corpus.get(["d5"]) == {"d5": streamed([path])[5]}
    assert_matches_stream(load_index([path]), [path])


def test_get_after_the_file_changed_reads_the_new_file(tmp_path):
    path = write_corpus(tmp_path / "c.jsonl", [songtingyu_doc(i) for i in range(10)])
    corpus = IndexedCorpus([path])
    assert corpus.ids()[0] == "d0"
    rewrite(path, [songtingyu_doc(i) for i in range(100, 110)], "size")
    assert corpus.get(["d105"]) == {"d105": streamed([path])[5]}
    assert corpus.ids() == [d.id for d in streamed([path])]


def test_an_unwritable_cache_folder_warns_once_and_loading_still_works(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the instir home should be")
    monkeypatch.setenv("INSTIR_HOME", str(blocker))
    path = write_corpus(tmp_path / "c.jsonl", [songtingyu_doc(i) for i in range(10)])
    with pytest.warns(CorpusIndexWarning, match="corpus index of .*c.jsonl: folder .* cannot be written") as caught:
        first = IndexedCorpus([path])
        assert first.get(["d3"]) == {"d3": streamed([path])[3]}
        second = IndexedCorpus([path])
        assert second.content_hash() == Corpus.from_docs(streamed([path])).content_hash()
    assert len([w for w in caught if issubclass(w.category, CorpusIndexWarning)]) == 1


def test_two_builders_of_one_entry_at_once_both_get_a_valid_index(tmp_path, monkeypatch):
    path = write_corpus(tmp_path / "c.jsonl", [songtingyu_doc(i, words=30) for i in range(2000)])
    both_built = threading.Barrier(2, timeout=30)
    real = docstore.build_index

    def build_then_wait(*args, **kwargs):
        index = real(*args, **kwargs)
        both_built.wait()  # both write the entry at the same moment
        return index

    monkeypatch.setattr(docstore, "build_index", build_then_wait)
    results: list = [None, None]

    def load(k: int) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            results[k] = load_index([path])

    threads = [threading.Thread(target=load, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    monkeypatch.setattr(docstore, "build_index", real)
    for index in results:
        assert_matches_stream(index, [path])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_matches_stream(load_index([path]), [path])
    assert [p.name for p in entries()[0].iterdir()] and all(not p.name.endswith(".tmp")
                                                            for p in entries()[0].iterdir())


# --- bad input fails as it did ----------------------------------------------------------------------

BAD_CORPORA = {
    "malformed JSON": b'{"_id": "a", "text": "x"}\n{"_id": "b", "text": \n',
    "not an object": b'{"_id": "a", "text": "x"}\n["b"]\n',
    "missing id": b'{"_id": "a", "text": "x"}\n{"text": "y"}\n',
    "id of the wrong type": b'{"_id": ["a"], "text": "x"}\n',
    "empty text": b'{"_id": "a", "text": "x"}\n{"_id": "b", "text": "   "}\n',
    "text of the wrong type": b'{"_id": "a", "text": 3}\n',
    "title of the wrong type": b'{"_id": "a", "text": "x", "title": 7}\n',
    "duplicate id": b'{"_id": "a", "text": "x"}\n{"_id": "b", "text": "y"}\n{"_id": "a", "text": "z"}\n',
    "bytes that are not UTF-8": b'{"_id": "a", "text": "x"}\n{"_id": "b", "text": "caf\xe9"}\n',
    "a lone carriage return splits a line": b'{"_id": "a",\r "text": "x"}\n',
    "numeric ids": b'{"_id": 1, "text": "x"}\n{"_id": 2.5, "text": "y", "title": null}\n',
}


@pytest.mark.parametrize("skip_empty", [False, True])
@pytest.mark.parametrize("case", BAD_CORPORA)
def test_bad_corpus_input_raises_the_same_format_error_as_streaming(tmp_path, case, skip_empty):
    path = tmp_path / "corpus.jsonl"
    path.write_bytes(BAD_CORPORA[case])
    settle(path)
    stream = outcome(lambda: streamed([path], skip_empty))
    for via in (lambda: build_index([path], skip_empty=skip_empty).ids,
                lambda: load_index([path], skip_empty=skip_empty).ids,
                lambda: IndexedCorpus([path], skip_empty=skip_empty).ids(),
                lambda: [d.id for d in IndexedCorpus([path], skip_empty=skip_empty)]):
        got = outcome(via)
        assert got == (stream if stream[0] == "error" else ("ok", [d.id for d in stream[1]]))
    assert entries() == [] or stream[0] == "ok"


def test_a_missing_corpus_file_is_refused_as_the_readers_refuse_it(tmp_path):
    with pytest.raises(FormatError, match="file not found"):
        load_index([tmp_path / "absent.jsonl"])


def test_a_duplicate_id_across_corpus_shards_is_still_refused_by_the_loader(tmp_path):
    root = tmp_path / "hf"
    shutil.copytree(FIXTURES / "instructir-hf", root)
    docs = [json.loads(line) for line in (root / "corpus.jsonl").read_text().splitlines()]
    (root / "corpus.jsonl").unlink()
    write_corpus(root / "corpus" / "a.jsonl", docs)
    write_corpus(root / "corpus" / "b.jsonl", docs[:1])
    with pytest.raises(FormatError, match=r"duplicate document id .* \(first on a\.jsonl line 1\)"):
        load_instructir(root)


def test_jsonl_corpus_of_several_files_reads_past_an_empty_one_and_refuses_only_a_corpus_without_documents(tmp_path):
    empty = write_corpus(tmp_path / "a.jsonl", [])
    full = write_corpus(tmp_path / "b.jsonl", [{"_id": "d1", "text": "x"}])
    assert jsonl_corpus([empty, full]).ids() == ["d1"] and jsonl_corpus(full).ids() == ["d1"]
    with pytest.raises(FormatError, match=r"empty corpus \(no documents in its 2 files\)"):
        jsonl_corpus([empty, write_corpus(tmp_path / "c.jsonl", [])])


def test_an_id_with_a_lone_surrogate_escape_is_indexed_hashed_and_cached(tmp_path):
    """JSON may escape half a surrogate pair; such an id once made ``content_hash`` fail."""
    path = tmp_path / "c.jsonl"
    path.write_text('{"_id": "a\\ud800", "text": "x \\udfff y"}\n{"_id": "b", "text": "z"}\n', encoding="utf-8")
    settle(path)
    first = load_index([path])
    assert first.ids == ["a\ud800", "b"] and first.word_counts.tolist() == [3, 1]
    assert first.content_hash == Corpus.from_docs(streamed([path])).content_hash()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cached = load_index([path])
    assert cached.ids == first.ids and cached.content_hash == first.content_hash and len(entries()) == 1


# --- review: what the index holds, its messages, and the cache's own rules ------------------------------

def write_ids(path: Path, ids: list[str]) -> Path:
    return write_corpus(path, [{"_id": i, "text": f"text of {i}"} for i in ids])


def test_clash_text_lists_the_first_pairs_then_how_many_more(tmp_path):
    pairs = [("caf\u00e9", "cafe\u0301"), ("\u00f1", "n\u0303"), ("\u00fc", "u\u0308"), ("\u00e0", "a\u0300")]
    index = build_index([write_ids(tmp_path / "c.jsonl", [i for pair in pairs for i in pair])])
    assert index.id_clashes == ((0, 1), (2, 3), (4, 5), (6, 7))
    text = index.clash_text()
    assert text.count(") and ") == 3 and "; and 1 more pair;" in text
    assert "; and 2 more pairs;" in index.clash_text(limit=2)
    assert "more pair" not in index.clash_text(limit=4) and index.clash_text(limit=4).count(") and ") == 4
    three = build_index([write_ids(tmp_path / "d.jsonl", [i for pair in pairs[:3] for i in pair])])
    assert "more pair" not in three.clash_text()
    assert build_index([write_ids(tmp_path / "e.jsonl", ["a", "b"])]).clash_text() is None


def test_three_forms_of_one_id_are_each_paired_with_the_first(tmp_path):
    # the A with a ring above: one code point, A + a combining ring, the Angstrom sign (NFC: the first)
    index = build_index([write_ids(tmp_path / "c.jsonl", ["\u00c5", "A\u030a", "\u212b"])])
    assert index.id_clashes == ((0, 1), (0, 2))


def test_the_kelvin_sign_before_a_k_in_one_file_warns(tmp_path):
    path = write_ids(tmp_path / "c.jsonl", ["\u212a", "y", "K"])
    assert build_index([path]).id_clashes == ((0, 2),)


def test_the_arrays_of_an_index_are_read_only(tmp_path):
    corpus = IndexedCorpus([write_corpus(tmp_path / "c.jsonl", [songtingyu_doc(i) for i in range(3)])])
    with pytest.raises(ValueError, match="read-only"):
        corpus.word_counts()[0] = 99
    for index in (corpus.index(), IndexedCorpus(corpus.paths).index(), build_index(corpus.paths)):
        assert not any(a.flags.writeable for a in (index.file, index.offset, index.length, index.line,
                                                   index.word_counts))


def test_both_skip_empty_options_of_one_file_are_cached_side_by_side(tmp_path):
    path = write_corpus(tmp_path / "c.jsonl", [songtingyu_doc(i) for i in range(5)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for skip_empty in (True, False, True, False):
            assert_matches_stream(load_index([path], skip_empty=skip_empty), [path], skip_empty)
    assert len(entries()) == 2


def test_a_cached_index_of_a_file_without_a_final_newline_is_used_again(tmp_path, parses):
    path = tmp_path / "c.jsonl"
    path.write_text("\n".join(json.dumps(songtingyu_doc(i)) for i in range(50)), encoding="utf-8")
    settle(path)
    load_index([path])
    parses.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_matches_stream(load_index([path]), [path])


def test_an_index_with_no_documents_is_cached_and_loads_again(tmp_path):
    path = write_corpus(tmp_path / "c.jsonl", [{"_id": "e1", "text": ""}, {"_id": "e2", "text": " "}])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(2):
            index = load_index([path], skip_empty=True)
            assert (index.ids, index.skipped_ids, len(entries())) == ([], ["e1", "e2"], 1)


def test_corpora_of_one_file_name_in_two_folders_keep_their_own_cache_entries(tmp_path, parses):
    a = write_corpus(tmp_path / "a" / "corpus.jsonl", [songtingyu_doc(i) for i in range(20)])
    b = write_corpus(tmp_path / "b" / "corpus.jsonl", [songtingyu_doc(i) for i in range(20, 40)])
    load_index([a]), load_index([b])
    assert len(entries()) == 2
    parses.clear()
    assert load_index([a]).ids[0] == "d0" and load_index([b]).ids[0] == "d20"
    assert len(parses.of(a)) <= 2 + docstore.SPOT_CHECKS and len(parses.of(b)) <= 2 + docstore.SPOT_CHECKS


def test_a_corpus_read_before_its_file_changed_answers_from_the_new_file(tmp_path):
    path = write_corpus(tmp_path / "c.jsonl", [songtingyu_doc(i) for i in range(10)])
    corpus = IndexedCorpus([path])
    assert "d3" in corpus and corpus.get(["d3"]) == {"d3": streamed([path])[3]}
    rewrite(path, [songtingyu_doc(i) for i in range(100, 110)], "size")
    assert corpus.get(["d103"]) == {"d103": streamed([path])[3]} and corpus.get(["d3"]) == {}
    assert "d103" in corpus and "d3" not in corpus


def test_a_record_that_is_not_where_the_index_says_is_named_at_its_line(tmp_path):
    path = write_ids(tmp_path / "c.jsonl", [f"d{i}" for i in range(10, 20)])
    index = build_index([path])
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[4], lines[5] = lines[5], lines[4]  # the same bytes per line: only the ids moved
    path.write_text("".join(lines), encoding="utf-8")
    with pytest.raises(docstore.StaleIndexError) as caught:
        index.read([4])
    assert (caught.value.path, caught.value.where, caught.value.field) == (str(path), 5, "_id")
    assert "document 'd15' where the corpus index has 'd14'" in str(caught.value)


def test_a_removed_corpus_file_is_said_missing_without_a_damage_warning(tmp_path):
    path = write_corpus(tmp_path / "c.jsonl", [songtingyu_doc(i) for i in range(10)])
    corpus = IndexedCorpus([path])
    corpus.ids()
    path.unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(FormatError, match="file not found"):
            corpus.get(["d3"])


def test_an_empty_corpus_of_several_files_is_refused_naming_their_folder(tmp_path):
    empty = [write_corpus(tmp_path / "shards" / f"{k}.jsonl", []) for k in range(2)]
    with pytest.raises(FormatError) as caught:
        jsonl_corpus(empty)
    assert (caught.value.path, caught.value.where) == (str(tmp_path / "shards"), None)
    with pytest.raises(FormatError) as caught:
        jsonl_corpus(empty[0])
    assert caught.value.path == str(empty[0]) and str(caught.value).endswith("empty corpus (no documents)")


def test_an_id_in_two_files_is_refused_at_its_second_file_and_line(tmp_path):
    a = write_ids(tmp_path / "a.jsonl", ["x", "y", "z"])
    b = write_ids(tmp_path / "b.jsonl", ["w", "y"])
    with pytest.raises(FormatError) as caught:
        jsonl_corpus([a, b])
    assert (caught.value.path, caught.value.where, caught.value.field) == (str(b), 2, "_id")
    assert str(caught.value).endswith("duplicate document id 'y' (first on a.jsonl line 2)")


def forge(entry: Path, change) -> None:
    """Change a cache entry's index.json and records.npy with ``change(meta, table)``, checksums made to match (as a
    copy written by another tool, or an entry edited by hand, may be)."""
    meta = json.loads((entry / "index.json").read_text(encoding="utf-8"))
    table = np.load(entry / "records.npy")
    meta, table = change(meta, table)
    (entry / "index.json").write_text(json.dumps(meta), encoding="utf-8")
    np.save(entry / "records.npy", table)
    manifest = json.loads((entry / "manifest.json").read_text())
    for name in ("index.json", "records.npy"):
        data = (entry / name).read_bytes()
        manifest["files"][name] = {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (entry / "manifest.json").write_text(json.dumps(manifest))


def set_cell(row: int, column: int, value: int):
    def change(meta, table):
        table[row, column] = value
        return meta, table
    return change


FORGED = {
    "an id fewer than records": lambda meta, table: ({**meta, "ids": meta["ids"][:-1]}, table),
    "a clash beyond the ids": lambda meta, table: ({**meta, "id_clashes": [[0, len(meta["ids"])]]}, table),
    "a file number past the files": set_cell(3, 0, 1),
    "a negative word count": set_cell(3, 4, -1),
    "a negative length": set_cell(3, 2, -1),
    "a record past the end": set_cell(3, 2, 10**6),
}


@pytest.mark.parametrize("how", FORGED)
def test_an_entry_whose_parts_disagree_warns_and_is_rebuilt(tmp_path, how):
    path = write_corpus(tmp_path / "c.jsonl", [songtingyu_doc(i) for i in range(30)])
    load_index([path])
    [entry] = entries()
    forge(entry, FORGED[how])
    with pytest.warns(CorpusIndexWarning, match=rf"{entry.name}/(index\.json|records\.npy) .*removed, rebuilding it"):
        corpus = IndexedCorpus([path])
        assert_matches_stream(corpus.index(), [path])
    assert corpus.index().clash_text() is None


def test_a_file_given_its_old_mtime_back_is_indexed_again_without_a_damage_warning(tmp_path):
    path = write_ids(tmp_path / "c.jsonl", [f"d{i}" for i in range(10, 40)])
    load_index([path])
    stamp = path.stat()
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[::-1]), encoding="utf-8")
    os.utime(path, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_index([path]).ids == [f"d{i}" for i in range(39, 9, -1)]


def test_the_spot_check_reads_the_last_record(tmp_path, monkeypatch):
    path = write_ids(tmp_path / "c.jsonl", [f"d{i}" for i in range(10, 40)])
    load_index([path])
    [entry] = entries()

    def last_points_at_the_one_before(meta, table):
        table[-1, 1:4] = table[-2, 1:4]
        return meta, table

    forge(entry, last_points_at_the_one_before)
    monkeypatch.setattr(docstore, "SPOT_CHECKS", 0)
    with pytest.warns(CorpusIndexWarning, match="fails a spot check: .*'d38' where the corpus index has 'd39'"):
        assert_matches_stream(IndexedCorpus([path]).index(), [path])


def test_the_spot_check_reads_records_between_the_first_and_the_last(tmp_path):
    path = write_ids(tmp_path / "c.jsonl", [f"d{i}" for i in range(10, 40)])
    load_index([path])
    [entry] = entries()

    def middle_rotated(meta, table):
        table[1:-1, 1:4] = np.roll(table[1:-1, 1:4], 1, axis=0)
        return meta, table

    forge(entry, middle_rotated)
    with pytest.warns(CorpusIndexWarning, match="fails a spot check"):
        assert_matches_stream(IndexedCorpus([path]).index(), [path])


def test_an_indexed_corpus_over_files_repeating_an_id_gets_the_first(tmp_path):
    a = write_corpus(tmp_path / "a.jsonl", [{"_id": "y", "text": "first"}])
    b = write_corpus(tmp_path / "b.jsonl", [{"_id": "y", "text": "second"}])
    assert IndexedCorpus([a, b]).get(["y"])["y"].text == "first"


def test_a_warning_about_the_index_of_several_files_says_how_many_more(tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the instir home should be")
    monkeypatch.setenv("INSTIR_HOME", str(blocker))
    a = write_ids(tmp_path / "a.jsonl", ["x"])
    b, c = write_ids(tmp_path / "b.jsonl", ["y"]), write_ids(tmp_path / "c.jsonl", ["z"])
    with pytest.warns(CorpusIndexWarning, match=rf"^corpus index of {re.escape(str(a))} \(\+2 more files\): folder"):
        assert IndexedCorpus([a, b, c]).ids() == ["x", "y", "z"]


#: how the warning shows each form: a non-ASCII id also by its code points, as the two look alike on a terminal
KELVIN, K, NFD, NFC = "'\u212a' = '\\u212a'", "'K'", "'cafe\u0301' = 'cafe\\u0301'", "'caf\u00e9' = 'caf\\xe9'"


@pytest.mark.parametrize("first, second, shown", [(["\u212a"], ["K"], (KELVIN, K)), (["K"], ["\u212a"], (K, KELVIN)),
                                                  (["cafe\u0301"], ["caf\u00e9"], (NFD, NFC)),
                                                  (["caf\u00e9"], ["cafe\u0301"], (NFC, NFD))])
def test_two_forms_of_one_id_in_two_files_warn_naming_each_file_and_code_point(tmp_path, first, second, shown):
    a, b = write_ids(tmp_path / "a.jsonl", ["x", *first]), write_ids(tmp_path / "b.jsonl", second)
    with pytest.warns(docstore.IdFormWarning) as caught:
        assert jsonl_corpus([a, b]).ids() == ["x", *first, *second]
    (warning,) = caught
    assert str(warning.message).startswith(
        f"document ids that differ only in Unicode normalization (NFC / NFD): {shown[0]} ({a}, line 2) and "
        f"{shown[1]} ({b}, line 1);")


def test_jsonl_corpus_takes_a_path_given_as_text(tmp_path):
    path = write_ids(tmp_path / "c.jsonl", ["a", "b"])
    assert jsonl_corpus(str(path)).ids() == ["a", "b"]


def test_one_non_ascii_id_in_two_files_is_no_clash_of_forms(tmp_path):
    a, b = write_ids(tmp_path / "a.jsonl", ["caf\u00e9"]), write_ids(tmp_path / "b.jsonl", ["x", "caf\u00e9"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert IndexedCorpus([a, b]).index().id_clashes == ()
