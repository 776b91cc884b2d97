"""The FollowIR loader: the authors' release (jhu-clsp) and MTEB's copy (mteb) read to the same
instances, qrels, candidates and changed documents; loading by name from a data root and from the
folder itself; bad files refused in one line naming file, line and field; the bundled samples;
and a retriever's run on them holding exactly each instance's candidates."""

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from instir.benchmarks import FormatError, Query, catalog, load_benchmark
from instir.errors import UsageError
from instir.retrieval import make_retriever, retrieve

TOPICS = {  # topic: (query, original narrative, changed narrative)
    "301": ("endangered species", "Any effort to protect an endangered species.", "Only hunting bans."),
    "302": ("electric car batteries", "Range or charging of car batteries.", "Only charging time."),
}
DOCS = {f"d{i}": f"document {i} about batteries and species" for i in range(1, 7)}
QRELS_OG = {"301": {"d1": 1, "d2": 1, "d3": 0}, "302": {"d4": 2, "d5": 1}}
QRELS_CHANGED = {"301": {"d1": 1, "d2": 0, "d3": 0}, "302": {"d4": 1}}  # d5 unjudged after
TOP_RANKED = {"301": ["d1", "d2", "d3", "d6"], "302": ["d4", "d5", "d6"]}
# mteb 1.x create_qrel_diff: judged under og, another grade under changed (unjudged = 0)
CHANGED = {"301": ["d2"], "302": ["d4", "d5"]}


def _jsonl(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _parquet(path: Path, rows) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(list(rows)), path)
    return path


def _corpus_rows():
    return [{"_id": d, "title": "", "text": t} for d, t in DOCS.items()]


def _qrels_rows(qrels, suffix=""):
    return [{"query-id": q + suffix, "corpus-id": d, "score": float(g)} for q, docs in qrels.items()
            for d, g in docs.items()]


def write_jhu(folder: Path) -> Path:
    """The authors' release: jhu-clsp/<dataset>-instructions."""
    _jsonl(folder / "corpus.jsonl", _corpus_rows())
    _jsonl(folder / "queries.jsonl", [{"_id": t, "text": q, "instruction_og": og, "instruction_changed": ch}
                                      for t, (q, og, ch) in TOPICS.items()])
    _jsonl(folder / "top_ranked.jsonl", [{"qid": t, "pid": d} for t, docs in TOP_RANKED.items() for d in docs])
    _jsonl(folder / "qrels_og" / "test.jsonl", _qrels_rows(QRELS_OG))
    _jsonl(folder / "qrels_changed" / "test.jsonl", _qrels_rows(QRELS_CHANGED))
    return folder


def write_mteb(folder: Path, parquet: bool = False) -> Path:
    """MTEB 2.26's copy: mteb/<Dataset>InstructionRetrieval, one file per config folder."""
    instances = [(t + s, q, og if s == "-og" else ch) for t, (q, og, ch) in TOPICS.items() for s in ("-og", "-changed")]
    write = _parquet if parquet else _jsonl
    ext = "parquet" if parquet else "jsonl"
    _jsonl(folder / "corpus" / "test.jsonl", _corpus_rows())
    _jsonl(folder / "queries" / "test.jsonl", [{"_id": i, "text": q} for i, q, _ in instances])
    _jsonl(folder / "instruction" / "test.jsonl", [{"query-id": i, "instruction": ins} for i, _, ins in instances])
    write(folder / "qrels" / f"test.{ext}", _qrels_rows(QRELS_OG, "-og") + _qrels_rows(QRELS_CHANGED, "-changed"))
    write(folder / "top_ranked" / f"test.{ext}", [{"query-id": i, "corpus-ids": TOP_RANKED[i.rsplit("-", 1)[0]]}
                                                  for i, _, _ in instances])
    _jsonl(folder / "qrel_diff" / "qrel_diff.jsonl", [{"query-id": t, "corpus-ids": d} for t, d in CHANGED.items()])
    return folder


def _load(folder: Path):
    return load_benchmark("followir/core17", root=folder)


def _error(folder: Path) -> FormatError:
    with pytest.raises(FormatError) as info:
        _load(folder)
    assert "\n" not in str(info.value)
    return info.value


def _edit_jsonl(path: Path, n: int, change) -> None:
    """Apply ``change`` to the record on line ``n`` (1-based) of a JSON-lines file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[n - 1])
    change(record)
    lines[n - 1] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


# --------------------------------------------------------------------------------- both layouts


@pytest.fixture
def jhu(tmp_path):
    return write_jhu(tmp_path / "jhu")


@pytest.mark.parametrize("parquet", [False, True], ids=["jsonl", "parquet"])
def test_both_layouts_give_the_same_instances_qrels_candidates_and_changed_documents(tmp_path, jhu, parquet):
    release, copy = _load(jhu), _load(write_mteb(tmp_path / "mteb", parquet))
    assert (release.layout, copy.layout) == ("jhu-clsp", "mteb")
    expected = {t + s: Query(t + s, q, og if s == "-og" else ch, group=t, subset="core17")
                for t, (q, og, ch) in TOPICS.items() for s in ("-og", "-changed")}
    assert release.queries == copy.queries == expected
    assert list(release.queries) == list(copy.queries)
    judged = {**{t + "-og": d for t, d in QRELS_OG.items()}, **{t + "-changed": d for t, d in QRELS_CHANGED.items()}}
    assert release.qrels == copy.qrels == judged
    assert release.meta["top_ranked"] == copy.meta["top_ranked"] == {q: TOP_RANKED[q.rsplit("-", 1)[0]]
                                                                     for q in expected}
    assert release.meta["changed"] == copy.meta["changed"] == CHANGED
    assert {d.id for d in release.corpus} == {d.id for d in copy.corpus} == set(DOCS)
    assert not release.is_sample and not copy.is_sample


def test_release_changed_documents_are_the_og_judgments_graded_otherwise_after(tmp_path):
    # 301: d2 1 -> 0; d3 0 -> 0 stays; 302: d4 2 -> 1 (another grade), d5 1 -> unjudged (0)
    assert _load(write_jhu(tmp_path / "jhu")).meta["changed"] == {"301": ["d2"], "302": ["d4", "d5"]}


def test_loads_by_name_from_a_data_root_in_the_cache_layout(tmp_path):
    for layout, writer in (("jhu-clsp", write_jhu), ("mteb", write_mteb)):
        root = tmp_path / layout
        writer(root / "followir" / layout / "core17")
        bench = load_benchmark("followir/core17", root=root)
        assert bench.layout == layout and bench.source == str(root / "followir" / layout / "core17")
        assert bench.meta["changed"] == CHANGED and len(bench.queries) == 4


def test_loads_from_the_folder_holding_the_subset(tmp_path):
    write_jhu(tmp_path / "data" / "core17")
    assert _load(tmp_path / "data").source == str(tmp_path / "data" / "core17")


# ------------------------------------------------------------------------------------ bad files


def test_jhu_candidate_not_in_the_corpus_names_its_line(jhu):
    _edit_jsonl(jhu / "top_ranked.jsonl", 6, lambda r: r.update(pid="ghost"))  # 302's second candidate
    err = _error(jhu)
    assert err.path.endswith("top_ranked.jsonl") and "'ghost'" in str(err) and "not in the corpus" in str(err)
    assert (err.where, err.field) == (6, "pid")



def test_jhu_candidate_id_holding_a_control_character_is_refused_as_an_id_at_its_line(jhu):
    # pytrec_eval cuts an id at NUL: "d5\x00x" is refused for what it holds, as every id field is
    _edit_jsonl(jhu / "top_ranked.jsonl", 6, lambda r: r.update(pid="d5\x00x"))
    err = _error(jhu)
    assert err.path.endswith("top_ranked.jsonl") and (err.where, err.field) == (6, "pid")
    assert "U+0000" in str(err) and "not in the corpus" not in str(err)

def test_mteb_candidate_not_in_the_corpus_names_its_line(tmp_path):
    folder = write_mteb(tmp_path / "mteb")
    _edit_jsonl(folder / "top_ranked" / "test.jsonl", 3, lambda r: r["corpus-ids"].append("ghost"))
    err = _error(folder)
    assert err.path.endswith("top_ranked/test.jsonl") and "'ghost'" in str(err) and "'302-og'" in str(err)
    assert (err.where, err.field) == (3, "corpus-ids")


def test_mteb_query_id_without_og_or_changed_suffix_is_refused(tmp_path):
    folder = write_mteb(tmp_path / "mteb")
    _edit_jsonl(folder / "queries" / "test.jsonl", 2, lambda r: r.update(_id="301"))
    _edit_jsonl(folder / "instruction" / "test.jsonl", 2, lambda r: r.update({"query-id": "301"}))
    err = _error(folder)
    assert err.path.endswith("queries/test.jsonl") and err.field == "_id"
    assert "'301' ends neither in -og nor in -changed" in str(err)
    assert err.where == 2


def test_mteb_second_instruction_for_a_query_is_refused_naming_the_first(tmp_path):
    # one rule for every family's instruction config (readers.read_instructions): the last one no longer wins
    folder = write_mteb(tmp_path / "mteb")
    path = folder / "instruction" / "test.jsonl"
    first = json.loads(path.read_text().splitlines()[0])
    with path.open("a") as fh:
        fh.write(json.dumps({**first, "instruction": "Another instruction."}) + "\n")
    err = _error(folder)
    assert err.path == str(path) and err.field == "query-id" and err.where == len(path.read_text().splitlines())
    assert f"duplicate instruction for query '{first['query-id']}' (first on line 1)" in str(err)


def test_mteb_query_without_an_instruction_is_refused_at_the_query_line(tmp_path):
    # one rule for every family's instruction config (readers.read_instructions): before it, FollowIR alone
    # named the instruction file with no line, where InstructIR and IFIR named the query's file and line
    folder = write_mteb(tmp_path / "mteb")
    path = folder / "instruction" / "test.jsonl"
    path.write_text("".join(line + "\n" for line in path.read_text().splitlines() if "302-changed" not in line))
    err = _error(folder)
    assert err.path == str(folder / "queries" / "test.jsonl") and (err.where, err.field) == (4, "_id")
    assert "no instruction for query '302-changed' in instruction/test.jsonl" in str(err)


def test_jhu_duplicate_topic_id_names_the_line_it_was_first_on(jhu):
    # one rule for every reader's duplicate ids (readers.check_unique): FollowIR's said "duplicate topic id" only
    _edit_jsonl(jhu / "queries.jsonl", 2, lambda r: r.update(_id="301"))
    err = _error(jhu)
    assert err.path == str(jhu / "queries.jsonl") and (err.where, err.field) == (2, "_id")
    assert "duplicate topic id '301' (first on line 1)" in str(err)


def test_mteb_duplicate_query_id_names_the_shard_and_line_it_was_first_on(tmp_path):
    folder = write_mteb(tmp_path / "mteb")
    first = (folder / "queries" / "test.jsonl").read_text().splitlines()[2]
    path = _jsonl(folder / "queries" / "test2.jsonl", [json.loads(first)])
    err = _error(folder)
    assert err.path == str(path) and (err.where, err.field) == (1, "_id")
    assert f"duplicate query id '{json.loads(first)['_id']}' (first on test.jsonl line 3)" in str(err)


def test_jhu_missing_changed_instruction_names_line_and_field(jhu):
    _edit_jsonl(jhu / "queries.jsonl", 2, lambda r: r.pop("instruction_changed"))
    err = _error(jhu)
    assert err.path.endswith("queries.jsonl") and (err.where, err.field) == (2, "instruction_changed")
    assert "missing" in str(err)


@pytest.mark.parametrize(("layout", "relative"), [("jhu-clsp", "queries.jsonl"), ("mteb", "instruction/test.jsonl"),
                                                  ("jhu-clsp", "qrels_changed/test.jsonl")])
def test_malformed_json_line_names_file_and_line(tmp_path, layout, relative):
    folder = write_jhu(tmp_path / "d") if layout == "jhu-clsp" else write_mteb(tmp_path / "d")
    path = folder / relative
    lines = path.read_text().splitlines()
    lines[1] = lines[1][:-3]  # truncated record on line 2
    path.write_text("\n".join(lines) + "\n")
    err = _error(folder)
    assert err.path == str(path) and err.where == 2 and "malformed JSON" in str(err)


def test_jhu_missing_qrels_file_is_named(jhu):
    (jhu / "qrels_changed" / "test.jsonl").unlink()
    err = _error(jhu)
    assert err.path == str(jhu / "qrels_changed" / "test.jsonl") and "file not found" in str(err)


def test_a_qrels_name_that_is_no_regular_file_is_named_for_what_it_is_not_called_missing(jhu):
    # on main before the loaders shared one file finder: "file not found" (FollowIR alone skipped non-files)
    path = jhu / "qrels_changed" / "test.jsonl"
    path.unlink()
    os.mkfifo(path)
    err = _error(jhu)
    assert err.path == str(path) and "FIFO" in str(err)


def test_a_release_query_file_that_is_no_regular_file_is_named_for_what_it_is_not_called_missing(jhu):
    # before FollowIR used the shared finder (readers.find_files): "no FollowIR files found"
    path = jhu / "queries.jsonl"
    path.unlink()
    os.mkfifo(path)
    err = _error(jhu)
    assert err.path == str(path) and "FIFO" in str(err)


def test_mteb_config_in_several_shards_reads_every_shard(tmp_path):
    # before FollowIR used the shared finder: "2 files where one was expected" (InstructIR read every shard)
    one, sharded = write_mteb(tmp_path / "one"), write_mteb(tmp_path / "sharded")
    for config in ("corpus", "queries", "instruction", "qrels", "top_ranked"):
        path = sharded / config / "test.jsonl"
        lines = path.read_text().splitlines(keepends=True)
        path.unlink()
        for k, half in enumerate((lines[:len(lines) // 2], lines[len(lines) // 2:])):
            (sharded / config / f"test-{k:05d}-of-00002.jsonl").write_text("".join(half))
    expected, bench = _load(one), _load(sharded)
    assert (bench.queries, bench.qrels) == (expected.queries, expected.qrels)
    assert bench.meta["top_ranked"] == expected.meta["top_ranked"] and bench.corpus.ids() == expected.corpus.ids()
    assert len(bench.meta["files"]["queries"]) == 2


def test_mteb_pair_judged_in_two_qrels_shards_is_refused(tmp_path):
    folder = write_mteb(tmp_path / "mteb")
    _jsonl(folder / "qrels" / "test2.jsonl", _qrels_rows({"301": {"d1": 1}}, "-og"))
    err = _error(folder)
    assert err.path == str(folder / "qrels" / "test2.jsonl") and (err.where, err.field) == (1, "corpus-id")
    assert "judged in an earlier qrels file too" in str(err)


def test_mteb_document_id_repeated_across_corpus_shards_is_refused_naming_the_first(tmp_path):
    # one rule for every loader's corpus files (docstore.jsonl_corpus): FollowIR's IndexedCorpus kept the first
    folder = write_mteb(tmp_path / "mteb")
    path = _jsonl(folder / "corpus" / "test2.jsonl", _corpus_rows()[1:2])
    err = _error(folder)
    assert err.path == str(path) and (err.where, err.field) == (1, "_id")
    assert "duplicate document id 'd2' (first on test.jsonl line 2)" in str(err)


@pytest.mark.parametrize("layout", ["jhu-clsp", "mteb"])
def test_a_corpus_without_documents_is_refused_as_empty(tmp_path, layout):
    # one rule for every loader's corpus files (docstore.jsonl_corpus): FollowIR's said the candidates were
    # not in the corpus
    folder = write_jhu(tmp_path / "d") if layout == "jhu-clsp" else write_mteb(tmp_path / "d")
    path = folder / ("corpus.jsonl" if layout == "jhu-clsp" else "corpus/test.jsonl")
    path.write_text("\n")
    err = _error(folder)
    assert err.path == str(path) and "empty corpus (no documents)" in str(err)


def test_mteb_missing_qrels_config_is_named(tmp_path):
    folder = write_mteb(tmp_path / "mteb")
    shutil.rmtree(folder / "qrels")
    err = _error(folder)
    assert err.path == str(folder / "qrels") and "file not found" in str(err) and "qrels config" in str(err)


def test_jhu_unknown_topic_in_top_ranked_names_its_line(jhu):
    with (jhu / "top_ranked.jsonl").open("a") as fh:
        fh.write(json.dumps({"qid": "999", "pid": "d1"}) + "\n")  # line 8
    err = _error(jhu)
    assert err.path.endswith("top_ranked.jsonl") and err.field == "qid" and "unknown topic id '999'" in str(err)
    assert err.where == 8


def test_mteb_unknown_query_in_top_ranked_is_refused(tmp_path):
    folder = write_mteb(tmp_path / "mteb")
    with (folder / "top_ranked" / "test.jsonl").open("a") as fh:
        fh.write(json.dumps({"query-id": "999-og", "corpus-ids": ["d1"]}) + "\n")
    err = _error(folder)
    assert err.path.endswith("top_ranked/test.jsonl") and "unknown query id '999-og'" in str(err)


def test_folder_without_followir_files_is_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    err = _error(tmp_path / "empty")
    assert "no FollowIR files found" in str(err)


# ---------------------------------------------------------------------------- the bundled samples


@pytest.fixture(scope="module", params=["core17", "news21"])
def followir_sample(request):
    return load_benchmark(f"followir-sample/{request.param}")


def test_samples_load_as_samples_with_a_candidate_list_for_every_instance(followir_sample):
    expected = "jhu-clsp" if followir_sample.name.endswith("core17") else "mteb"
    assert followir_sample.is_sample and followir_sample.layout == expected
    candidates = followir_sample.meta["top_ranked"]
    assert set(candidates) == set(followir_sample.queries) and all(candidates.values())
    assert all(q.endswith(("-og", "-changed")) and followir_sample.queries[q].group == q.rsplit("-", 1)[0]
               for q in followir_sample.queries)
    assert set(followir_sample.meta["changed"]) == {q.group for q in followir_sample.queries.values()}
    assert all(followir_sample.meta["changed"].values())


def test_samples_are_labelled_sample_everywhere(followir_sample):
    assert "SAMPLE" in (catalog.SAMPLE_ROOT / "followir-sample" / "README.md").read_text().splitlines()[0]
    assert "SAMPLE" in followir_sample.label
    assert all(q.startswith("sample-") for q in followir_sample.queries)
    assert all(d.startswith("sample-") for d in followir_sample.corpus.ids())


def test_bm25_run_on_a_sample_holds_exactly_each_instances_candidates(followir_sample):
    run = retrieve(followir_sample, make_retriever("bm25"))
    held = run.df.groupby("qid")["docid"].apply(list).to_dict()
    assert set(held) == set(followir_sample.queries)
    for qid, docs in followir_sample.meta["top_ranked"].items():
        assert sorted(held[qid]) == sorted(docs), qid


def test_a_shard_that_is_no_regular_file_is_refused_and_a_hidden_folder_is_no_shard(tmp_path):
    # before, a qrels shard left a broken link (a Hugging Face blob missing) was skipped: the config loaded with
    # fewer judgments, silently; and corpus/.ipynb_checkpoints/ was read as a shard (a duplicate of every id)
    folder = write_mteb(tmp_path / "mteb")
    path = folder / "qrels" / "test.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.unlink()
    (folder / "qrels" / "a.jsonl").write_text("".join(lines[:2]))
    (folder / "qrels" / "b.jsonl").symlink_to(tmp_path / "missing-blob")
    err = _error(folder)
    assert err.path == str(folder / "qrels" / "b.jsonl") and "broken" in str(err)
    clean = write_mteb(tmp_path / "clean")
    expected = _load(clean)
    checkpoints = clean / "corpus" / ".ipynb_checkpoints"
    checkpoints.mkdir()
    shutil.copy(clean / "corpus" / "test.jsonl", checkpoints / "test-checkpoint.jsonl")
    assert _load(clean).corpus.ids() == expected.corpus.ids()


def test_mteb_queries_config_without_queries_or_a_topic_changed_twice_is_refused(tmp_path):
    # before, an empty queries config said "unknown query id '301-og' (not in no file)" at the instruction file,
    # and a second qrel_diff entry for a topic replaced the first without a word
    folder = write_mteb(tmp_path / "empty")
    (folder / "queries" / "test.jsonl").write_text("")
    err = _error(folder)
    assert err.path == str(folder / "queries" / "test.jsonl") and "no queries found" in str(err)
    folder = write_mteb(tmp_path / "twice")
    with open(folder / "qrel_diff" / "qrel_diff.jsonl", "a") as out:
        out.write(json.dumps({"query-id": "301", "corpus-ids": []}) + "\n")
    err = _error(folder)
    assert (err.where, err.field) == (3, "query-id") and "first on line 1" in str(err)


def test_a_config_in_two_forms_is_refused_naming_both_never_read_in_part(tmp_path):
    # before, qrels/ holding test.parquet and a test.jsonl shard read the parquet shard only (the finder's first
    # pattern won): the judgments in the jsonl shard were dropped without a word
    folder = write_mteb(tmp_path / "mteb", parquet=True)
    _jsonl(folder / "qrels" / "extra.jsonl", _qrels_rows({"301": {"d6": 1}}, "-og"))
    err = _error(folder)
    assert err.path == str(folder / "qrels" / "extra.jsonl")
    assert "two forms" in str(err) and "qrels/test.parquet" in str(err)
    # two names of one config too (MTEB's instruction/, the kit's older instructions/): a review found one read
    folder = write_mteb(tmp_path / "named", parquet=True)
    shutil.copytree(folder / "instruction", folder / "instructions")
    err = _error(folder)
    assert err.path == str(folder / "instructions" / "test.jsonl") and "two forms of one file" in str(err)


@pytest.mark.parametrize("entry, field, message", [
    ({"query-id": "399", "corpus-ids": ["d1"]}, "query-id", "unknown topic '399'"),
    ({"query-id": "302", "corpus-ids": ["d4", "d99"]}, "corpus-ids", "changed document 'd99' of topic '302'"),
])
def test_a_qrel_diff_naming_a_topic_or_document_the_data_lacks_is_refused_at_its_line(tmp_path, entry, field, message):
    # before, a stray topic made p-MRR warn on every evaluation that the run lacked it, and a document not in the
    # corpus counted as unmoved in both rankings: a p-MRR pulled towards 0, silently
    folder = write_mteb(tmp_path / "mteb")
    path = folder / "qrel_diff" / "qrel_diff.jsonl"
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    _jsonl(path, [row for row in lines if row["query-id"] != entry["query-id"]] + [entry])
    err = _error(folder)
    assert (err.path, err.field) == (str(path), field) and message in str(err)


def test_jhu_judgment_of_a_document_not_in_the_corpus_names_its_qrels_line(jhu):
    with (jhu / "qrels_changed" / "test.jsonl").open("a") as fh:
        fh.write(json.dumps({"query-id": "301", "corpus-id": "ghost", "score": 1}) + "\n")  # line 5
    err = _error(jhu)
    assert err.path.endswith(os.path.join("qrels_changed", "test.jsonl")) and (err.where, err.field) == (5, "corpus-id")
    assert "unknown document id 'ghost'" in str(err)


def test_jhu_candidate_listed_twice_for_a_topic_names_the_second_line(jhu):
    with (jhu / "top_ranked.jsonl").open("a") as fh:
        fh.write(json.dumps({"qid": "301", "pid": "d2"}) + "\n")  # line 8; 301's second candidate again
    err = _error(jhu)
    assert err.path.endswith("top_ranked.jsonl") and (err.where, err.field) == (8, "pid")
    assert "lists candidate 'd2' twice" in str(err)


def test_jhu_topic_without_candidates_in_top_ranked_is_refused(jhu):
    path = jhu / "top_ranked.jsonl"
    path.write_text("".join(line + "\n" for line in path.read_text().splitlines() if '"302"' not in line))
    err = _error(jhu)
    assert err.path.endswith("top_ranked.jsonl") and "no candidate list for query '302-og'" in str(err)


def test_mteb_configs_as_single_files_beside_each_other_load_as_the_mteb_layout(tmp_path):
    # _config_patterns: a config is <name>/**/*.jsonl or one <name>.jsonl; a flat queries.jsonl without qrels_og/
    # is MTEB's copy, not the jhu-clsp release
    folder = write_mteb(tmp_path / "mteb")
    for name in ("corpus", "queries", "instruction", "qrels", "top_ranked"):
        (folder / name / "test.jsonl").rename(folder / f"{name}.jsonl")
        (folder / name).rmdir()
    bench = _load(folder)
    assert bench.layout == "mteb" and bench.meta["changed"] == CHANGED


def test_a_document_judged_zero_before_and_relevant_after_is_a_changed_document(jhu):
    # mteb 1.x create_qrel_diff keeps every og-judged document whose grade differs under the changed instruction,
    # in either direction: 301's d3 goes from 0 to 1
    _edit_jsonl(jhu / "qrels_changed" / "test.jsonl", 3, lambda r: r.update(score=1.0))
    assert _load(jhu).meta["changed"] == {"301": ["d2", "d3"], "302": ["d4", "d5"]}


@pytest.mark.parametrize("qid", ["-og", "-changed"])
def test_mteb_query_id_that_is_only_a_form_suffix_is_refused_at_its_line(tmp_path, qid):
    # before, "-og" passed the suffix check and Forms.split raised a UsageError naming no file, line or field
    folder = write_mteb(tmp_path / "mteb")
    for name in ("queries", "instruction", "qrels", "top_ranked"):
        path = folder / name / "test.jsonl"
        path.write_text(path.read_text().replace(f'"301{qid}"', f'"{qid}"'))
    err = _error(folder)
    assert err.path.endswith(os.path.join("queries", "test.jsonl")) and (err.where, err.field) == (
        1 if qid == "-og" else 2, "_id")
    assert f"query id '{qid}' names no topic" in str(err)


def test_an_instance_id_is_split_at_the_longest_form_name_that_ends_it():
    from instir.benchmarks.forms import Forms

    forms = Forms(("b", "a-b"), "b")
    assert forms.split("q-a-b") == ("q", "a-b") and forms.split("q-b") == ("q", "b")
    with pytest.raises(UsageError, match="'q7b' is of none of the forms b, a-b"):
        forms.split("q7b")  # a form name not after a dash ends no instance id


def test_the_changed_documents_are_those_regraded_on_the_first_other_form_by_default():
    from instir.benchmarks.forms import Forms

    forms = Forms(("og", "changed", "reversed"), "og")
    qrels = {"t-og": {"a": 1, "b": 1, "c": 0}, "t-changed": {"a": 1, "b": 0}, "t-reversed": {"a": 0, "b": 1, "c": 2}}
    assert forms.regraded(qrels) == {"t": ["b"]}
    assert forms.regraded(qrels, "reversed") == {"t": ["a", "c"]}


@pytest.mark.parametrize("names, reference", [(("og", "og", "changed"), "og"), (("og", "changed"), "reversed")])
def test_forms_named_twice_or_a_reference_among_none_of_them_are_refused(names, reference):
    from instir.benchmarks.forms import Forms

    with pytest.raises(UsageError, match="forms are two or more distinct names with the reference among them"):
        Forms(names, reference)


def test_an_id_that_is_only_a_form_suffix_names_no_query():
    forms = catalog.family("followir").forms
    assert forms.split("301-og") == ("301", "og") and forms.split("a-changed") == ("a", "changed")
    for qid in ("-og", "-changed", "301"):
        with pytest.raises(UsageError):
            forms.split(qid)
