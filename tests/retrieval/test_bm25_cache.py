"""BM25 indexes are built once per corpus, setting and document format, kept on disk (verified,
memory-mapped) and in the retriever: a fresh retriever loads instead of building and gets the
same run; damaged entries and unwritable folders cost a warning, never a wrong result."""

import json
import threading
import warnings
from pathlib import Path

import bm25s
import numpy as np
import pandas as pd
import pytest
import Stemmer
from at_once import two_builders
from says import warns_saying
from toy import toy_family

from instir import verified_store
from instir.benchmarks import load_benchmark
from instir.benchmarks.types import Benchmark, Corpus, Doc, Query
from instir.formatting import Template, get_template
from instir.retrieval import bm25_build, bm25_cache, retrieve, run_key
from instir.retrieval.bm25_cache import BM25IndexCache, default_cache_dir
from instir.retrieval.lexical import LUCENE_ENGLISH_STOPWORDS, BM25Retriever

pytestmark = pytest.mark.usefixtures("own_home")  # each test starts from an empty default cache

SAMPLES = ("instructir-sample", "ifir-sample/fiqa")


@pytest.fixture
def builds(monkeypatch):
    """Counts index builds (the corpus spilled as triples, :func:`instir.retrieval.bm25_build.spill`);
    ``builds.refuse()`` makes a build fail the test."""

    class Counter:
        n = 0
        refused = False

        def refuse(self):
            self.refused = True

    counter = Counter()
    original = bm25_build.spill

    def spill(*args, **kwargs):
        assert not counter.refused, "the index was built where it should have been loaded"
        counter.n += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(bm25_build, "spill", spill)
    return counter


def bm25(**kwargs) -> BM25Retriever:
    return BM25Retriever(show_progress=False, **kwargs)


def entries(root: Path | None = None) -> list[Path]:
    root = root or default_cache_dir()
    return sorted(p for p in root.iterdir() if not p.name.startswith(".")) if root.is_dir() else []


def assert_same_run(a, b):
    pd.testing.assert_frame_equal(a.df, b.df, check_exact=True)


def small(docs, name="lexical-test") -> Benchmark:
    queries = [Query("q1", "apple cherry"), Query("q2", "banana")]
    return Benchmark(name, "hand-made", "local", "instructed", Corpus.from_docs(docs),
                     {q.id: q for q in queries}, {q.id: {} for q in queries}, family=toy_family(name))


DOCS = [Doc("d1", "apple banana apple"), Doc("d2", "banana cherry"), Doc("d3", "cherry cherry date"),
        Doc("d4", "zebra banana")]
PLAIN = dict(k1=1.2, b=0.75, stemmer="none", stopwords="none")


@pytest.mark.parametrize("name", SAMPLES)
def test_a_fresh_retriever_loads_the_stored_index_and_returns_the_same_run(name, builds, tmp_path):
    bench = load_benchmark(name)
    built = retrieve(bench, bm25(), k=10, out_dir=tmp_path / "a")
    assert builds.n == 1 and built.meta["search"]["index"]["origin"] == "built"
    entry = Path(built.meta["search"]["index"]["cache_entry"])
    assert entry.parent == default_cache_dir() and (entry / verified_store.MANIFEST).is_file()

    builds.refuse()  # a new process: a fresh retriever, a freshly read benchmark
    loaded = retrieve(load_benchmark(name), bm25(), k=10, out_dir=tmp_path / "b")
    assert loaded.meta["search"]["index"] | {"seconds": 0} == {
        "origin": "loaded", "cache_entry": str(entry), "cache_key": built.meta["search"]["index"]["cache_key"],
        "seconds": 0, "reused_in_memory": False}
    assert_same_run(built, loaded)
    assert (Path(built.meta["path"]).read_text() == Path(loaded.meta["path"]).read_text())  # TREC rows


def test_the_instructed_and_query_only_runs_of_one_retriever_index_once(builds, monkeypatch):
    loads = []
    original = BM25IndexCache.load_or_build
    monkeypatch.setattr(BM25IndexCache, "load_or_build", lambda self, *a: loads.append(a[0]) or original(self, *a))
    retriever = bm25()
    instructed = retrieve(load_benchmark("instructir-sample"), retriever, k=10)
    query_only = retrieve(load_benchmark("instructir-sample", "query-only"), retriever, k=10)
    bare = retrieve(load_benchmark("instructir-sample"), retriever, template="query-only", k=10)
    assert builds.n == 1 and len(loads) == 1  # one cache look-up (a miss), one build, no loads after it
    assert [r.meta["search"]["index"]["reused_in_memory"] for r in (instructed, query_only, bare)] == \
        [False, True, True]
    assert len(entries()) == 1

    ifir = load_benchmark("ifir-sample/fiqa")
    retrieve(ifir, retriever, k=10)
    retrieve(ifir, retriever, template="query-only", k=10)
    assert builds.n == 2


def test_a_new_k_or_a_template_formatting_documents_alike_never_reindexes(builds):
    bench = load_benchmark("instructir-sample")
    retriever = bm25()
    runs = [retriever.search(bench, get_template(name), k) for name, k in
            (("instructir", 10), ("instructir", 3), ("instructir-query-first", 10), ("mteb", 5))]
    assert builds.n == 1 and len(entries()) == 1
    builds.refuse()
    fresh = bm25().search(bench, get_template("instructir"), 3)
    assert_same_run(fresh, runs[1])
    assert fresh.meta["index"]["origin"] == "loaded"


def test_the_cache_options_leave_the_run_key_unchanged(tmp_path):
    bench = load_benchmark("instructir-sample")
    template = get_template("instructir")
    plain = run_key(bench, BM25Retriever(), template, 10)
    assert run_key(bench, BM25Retriever(cache_dir=tmp_path, keep_indexes=3), template, 10) == plain
    assert run_key(bench, BM25Retriever(cache=False), template, 10) == plain
    assert BM25Retriever(cache_dir=tmp_path).params() == BM25Retriever().params()


def test_changed_settings_corpus_or_document_format_make_new_entries(builds):
    base = small(DOCS)
    query_only = get_template("query-only")
    bm25(**PLAIN).search(base, query_only, 5)
    variants = [
        (small(DOCS), bm25(**{**PLAIN, "k1": 0.9}), query_only),
        (small(DOCS), bm25(**{**PLAIN, "b": 0.4}), query_only),
        (small(DOCS), bm25(**{**PLAIN, "stemmer": "porter"}), query_only),
        (small(DOCS), bm25(**{**PLAIN, "stopwords": "lucene"}), query_only),
        (small(DOCS), bm25(**{**PLAIN, "stopwords": ["zebra"]}), query_only),
        (small(DOCS), bm25(**{**PLAIN, "method": "robertson"}), query_only),
        (small([*DOCS[:3], Doc("d4", "zebra banana banana")]), bm25(**PLAIN), query_only),  # content
        (small([*DOCS[:3], Doc("d5", "zebra banana")]), bm25(**PLAIN), query_only),  # an id
        (small(DOCS), bm25(**PLAIN), get_template("instructir-repllama")),  # docs '{text}</s>'
    ]
    for bench, retriever, template in variants:
        retriever.search(bench, template, 5)
    assert builds.n == len(entries()) == 1 + len(variants)

    same = [(small(DOCS, name="another-name"), bm25(**PLAIN), get_template("ifir")),
            (small(DOCS), bm25(**PLAIN, n_threads=1, keep_indexes=2), get_template("mteb"))]
    for bench, retriever, template in same:
        retriever.search(bench, template, 2)
    assert builds.n == len(entries()) == 1 + len(variants)


def test_the_domain_word_and_titles_count_only_where_the_document_format_uses_them(builds):
    def with_subset(docs, subset):
        queries = {"q1": Query("q1", "apple", subset=subset)}
        return Benchmark("t", "hand-made", "local", "instructed", Corpus.from_docs(docs), queries, {"q1": {}})

    domains = {"fiqa": "financial", "cds": "biomedical"}
    by_domain = Template("by-domain", "raw", "", "{query}", doc="{domain}: {text}", domains=domains)
    unused = Template("unused-domain", "raw", "", "{query}", doc="{text}", domains=domains)
    docs = [Doc("d1", "apple pie", "title"), Doc("d2", "cherry")]
    runs = [bm25(**PLAIN).search(with_subset(docs, subset), template, 5)
            for template in (by_domain, unused) for subset in ("fiqa", "cds")]
    assert builds.n == 3  # one entry per domain word, one for both subsets without it
    assert_same_run(runs[2], runs[3])

    titles_only = Template("titles", "raw", "", "{query}", doc="{title}")
    split = with_subset([Doc("d1", "pie", "apple"), Doc("d2", "pie", "cherry")], "")
    unsplit = with_subset([Doc("d1", "apple pie"), Doc("d2", "pie", "cherry")], "")
    assert split.corpus.content_hash() == unsplit.corpus.content_hash()  # same "title text" …
    assert len(bm25(**PLAIN).search(split, titles_only, 5)) == 1
    assert len(bm25(**PLAIN).search(unsplit, titles_only, 5)) == 0  # … other titles: its own entry
    assert builds.n == 5


def _damage_truncate(entry):
    path = entry / "data.csc.index.npy"
    path.write_bytes(path.read_bytes()[:-8])
    return path.name, "bytes"


def _damage_zero(entry):
    path = entry / "vocab.index.json"
    path.write_bytes(b"\0" * path.stat().st_size)
    return path.name, "checksum"


def _damage_zero_npy_header(entry):
    path = entry / "indices.csc.index.npy"
    data = bytearray(path.read_bytes())
    data[:16] = b"\0" * 16
    path.write_bytes(bytes(data))
    return path.name, "header"


def _damage_delete(entry):
    (entry / "indptr.csc.index.npy").unlink()
    return "indptr.csc.index.npy", "missing"


def _damage_manifest(entry):
    path = entry / verified_store.MANIFEST
    path.write_text(path.read_text()[:100])
    return verified_store.MANIFEST, "manifest"


def _damage_manifest_gone(entry):
    (entry / verified_store.MANIFEST).unlink()
    return verified_store.MANIFEST, "missing"


def _damage_ids(entry):
    path = entry / bm25_cache.DOC_IDS
    ids = json.loads(path.read_text())
    ids[0], ids[1] = ids[1], ids[0]
    path.write_text(json.dumps(ids))
    return path.name, "checksum"


def _damage_unlisted(entry):
    # a manifest (of another kit, or edited) that no longer lists one of the index's files, that file gone with it
    name = bm25_cache.BM25S_FILES[0]
    manifest = json.loads((entry / verified_store.MANIFEST).read_text())
    del manifest["files"][name]
    (entry / verified_store.MANIFEST).write_text(json.dumps(manifest))
    (entry / name).unlink()
    return verified_store.MANIFEST, f"does not list {name}"


DAMAGE = [_damage_truncate, _damage_zero, _damage_zero_npy_header, _damage_delete, _damage_manifest,
          _damage_manifest_gone, _damage_ids, _damage_unlisted]


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda f: f.__name__.removeprefix("_damage_"))
def test_a_damaged_entry_warns_is_rebuilt_and_gives_the_same_run(damage, builds):
    bench = load_benchmark("ifir-sample/fiqa")
    template = get_template("ifir")
    first = bm25().search(bench, template, 10)
    entry = Path(first.meta["index"]["cache_entry"])
    name, problem = damage(entry)
    with pytest.warns(UserWarning, match=rf"{name}.*{problem}"):
        again = bm25().search(bench, template, 10)
    assert builds.n == 2 and again.meta["index"]["origin"] == "built"
    assert_same_run(first, again)
    builds.refuse()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_same_run(first, bm25().search(bench, template, 10))  # the rebuilt entry is whole
    assert [p.name for p in default_cache_dir().iterdir()] == [entry.name]  # nothing left aside


def test_stored_ids_that_are_not_the_corpus_ids_are_refused(builds, monkeypatch):
    bench = small(DOCS)
    bm25(**PLAIN).search(bench, get_template("query-only"), 5)
    monkeypatch.setattr(Corpus, "ids", lambda self: ["d1", "d2", "d4", "d3"])
    with warns_saying(UserWarning, "doc_ids.json", "4 document ids"):
        bm25(**PLAIN).index(bench, get_template("query-only"))
    assert builds.n == 2


def test_beyond_the_hash_budget_sizes_and_headers_are_still_checked(builds, monkeypatch):
    monkeypatch.setattr(verified_store, "FULL_HASH_BYTES", 0)
    bench = small(DOCS)
    first = bm25(**PLAIN).search(bench, get_template("query-only"), 5)
    entry = Path(first.meta["index"]["cache_entry"])
    bm25(**PLAIN).search(bench, get_template("query-only"), 5)  # loads without hashing
    assert builds.n == 1
    _damage_zero_npy_header(entry)
    with warns_saying(UserWarning, "indices.csc.index.npy", ".npy header"):
        assert_same_run(first, bm25(**PLAIN).search(bench, get_template("query-only"), 5))
    params = entry / "params.index.json"
    params.write_bytes(b"{" * params.stat().st_size)  # same size, unchecked by a hash: bm25s cannot read it
    with pytest.warns(UserWarning, match=rf"{entry.name} cannot be loaded"):
        assert_same_run(first, bm25(**PLAIN).search(bench, get_template("query-only"), 5))
    assert builds.n == 3


def test_an_unwritable_cache_folder_warns_and_still_retrieves(builds, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    bench = load_benchmark("instructir-sample")
    retriever = bm25(cache_dir=blocker / "bm25")
    with pytest.warns(UserWarning, match=r"cannot be written.*kept in memory only"):
        run = retrieve(bench, retriever, k=10)
    assert run.meta["search"]["index"]["cache_entry"] is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bare = retrieve(bench, retriever, template="query-only", k=10)  # held in memory: no second build
        assert_same_run(run, retrieve(bench, bm25(cache=False), k=10))
    assert builds.n == 2 and bare.meta["search"]["index"]["reused_in_memory"]
    assert not (tmp_path / "home" / "bm25").exists()  # cache=False wrote no index either


def test_concurrent_builders_leave_one_valid_entry(builds):
    bench = load_benchmark("ifir-sample/fiqa")
    template = get_template("ifir")
    start = threading.Barrier(4)
    runs, errors = [], []

    def build():
        try:
            start.wait()
            runs.append(bm25().search(bench, template, 10))
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=build) for _ in range(4)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", "BM25 index cache: another process is building")  # the others wait
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert not errors and len(runs) == 4 and builds.n == 1
    for run in runs[1:]:
        assert_same_run(runs[0], run)
    builds.refuse()
    assert_same_run(runs[0], bm25().search(bench, template, 10))
    assert [p.name for p in default_cache_dir().iterdir()] == [Path(runs[0].meta["index"]["cache_entry"]).name]


def test_two_builders_of_one_index_at_once_build_it_once_and_the_second_loads_it(builds, monkeypatch):
    """Two ``instir retrieve`` of one corpus into one INSTIR_HOME at once both tokenised and indexed it (each run's
    sidecar said ``origin: built``; the last to publish replaced the first's entry): the second now waits for the
    first, with one warning naming the entry, and loads what it published."""
    bench, template = small(DOCS), get_template("query-only")
    name = bm25_cache.entry_key(bm25(**PLAIN).index_description(bench, template))[:32]
    built, loaded, said = two_builders(monkeypatch, bm25_build, "spill", lambda: bm25(**PLAIN).index(bench, template))
    assert len(said) == 1 and name in said[0] and "waiting" in said[0]
    assert builds.n == 1
    assert (built.source["origin"], loaded.source["origin"]) == ("built", "loaded")
    assert built.source["cache_entry"] == loaded.source["cache_entry"]
    assert [p.name for p in default_cache_dir().iterdir()] == [Path(built.source["cache_entry"]).name]


def test_the_last_writer_wins(builds):
    bench = small(DOCS)
    template = get_template("query-only")
    first = bm25(**PLAIN, cache=False).index(bench, template)
    cache = BM25IndexCache()
    key = first.source["cache_key"]
    description = bm25(**PLAIN).index_description(bench, template)
    for _ in range(2):
        entry = cache.store(key, description, lambda folder: first.model.save(folder, show_progress=False),
                            list(first.doc_ids))
    build = json.loads((entry / verified_store.MANIFEST).read_text())["build"]
    assert cache.load(key, bench.corpus.ids()) is not None
    assert json.loads((entry / verified_store.MANIFEST).read_text())["build"] == build
    assert [p.name for p in cache.root.iterdir()] == [entry.name]


def test_a_retriever_keeps_only_its_last_indexes(builds):
    one, two = small(DOCS), small([*DOCS, Doc("d9", "fig")])
    template = get_template("query-only")
    retriever = bm25(**PLAIN)
    origins = [retriever.search(bench, template, 3).meta["index"] for bench in (one, two, one)]
    assert [(o["origin"], o["reused_in_memory"]) for o in origins] == \
        [("built", False), ("built", False), ("loaded", False)]
    retriever = bm25(**PLAIN, keep_indexes=2)
    origins = [retriever.search(bench, template, 3).meta["index"] for bench in (one, two, one)]
    assert [o["reused_in_memory"] for o in origins] == [False, False, True]
    assert builds.n == 2
    with pytest.raises(ValueError, match="keep_indexes"):
        bm25(keep_indexes=0)


@pytest.mark.parametrize("settings", [dict(stemmer="porter", stopwords="lucene"), dict(stemmer="none",
                                                                                     stopwords="none")])
def test_streamed_tokenisation_scores_exactly_as_tokenising_every_text_at_once(settings):
    """The build streams documents through bm25s's Tokenizer; the index it gives scores and ranks
    (ties included) exactly as the former list-of-texts ``bm25s.tokenize`` build did."""
    bench = load_benchmark("instructir-sample")
    extra = [Doc("empty", ""), Doc("stop", "the a of I x 3"), Doc("dup1", "saffron paella"),
             Doc("dup2", "saffron paella")]  # no tokens, stop words only, tied documents
    corpus = Corpus.from_docs([*bench.corpus, *extra])
    bench = Benchmark("instructir-sample", "hand-made", "local", "instructed", corpus, bench.queries, bench.qrels)
    template = get_template("instructir")
    index = bm25(k1=0.9, b=0.4, cache=False, **settings).index(bench, template)

    stemmer = Stemmer.Stemmer("porter") if settings["stemmer"] == "porter" else None
    stopwords = list(LUCENE_ENGLISH_STOPWORDS) if settings["stopwords"] == "lucene" else []
    former = bm25s.BM25(k1=0.9, b=0.4, method="lucene")
    former.index(bm25s.tokenize([template.format_doc(d) for d in corpus], stopwords=stopwords, stemmer=stemmer,
                                show_progress=False), show_progress=False)
    queries = [template.format_query(q) for q in bench.queries.values()] + ["saffron paella", "the of", ""]
    tokens = bm25s.tokenize(queries, stopwords=stopwords, stemmer=stemmer, return_ids=False, show_progress=False)
    top_old, scores_old = former.retrieve(tokens, k=len(corpus), show_progress=False)
    top_new, scores_new = index.model.retrieve(tokens, k=len(corpus), show_progress=False)
    np.testing.assert_array_equal(scores_new, scores_old)
    np.testing.assert_array_equal(top_new, top_old)
    assert (scores_old[:, 1:] == scores_old[:, :-1]).any()  # the comparison covers ties
    assert list(index.doc_ids) == corpus.ids()


def test_a_pickled_retriever_leaves_its_indexes_behind(builds):
    import pickle

    retriever = bm25(**PLAIN)
    retriever.search(small(DOCS), get_template("query-only"), 3)
    copy = pickle.loads(pickle.dumps(retriever))
    assert copy.params() == retriever.params() and len(pickle.dumps(retriever)) < 2000
    assert copy.search(small(DOCS), get_template("query-only"), 3).meta["index"]["origin"] == "loaded"


def test_a_retriever_drops_the_least_recently_used_index_first(builds):
    one, two, three = small(DOCS), small([*DOCS, Doc("d9", "fig")]), small([*DOCS, Doc("d8", "kiwi")])
    template = get_template("query-only")
    retriever = bm25(**PLAIN, keep_indexes=2)
    used = [retriever.search(bench, template, 3).meta["index"]["reused_in_memory"]
            for bench in (one, two, one, three, one, two)]
    # one was used after two, so three's index displaces two's, and one is still held
    assert used == [False, False, True, False, True, False]



@pytest.mark.parametrize("change", ["lucene stop words", "token limit", "PyStemmer version"])
def test_a_changed_stop_list_token_limit_or_stemmer_version_is_a_new_index_not_the_stored_one(change, builds,
                                                                                             monkeypatch):
    from instir.retrieval import bm25_tokens, lexical

    template = get_template("query-only")
    settings = {**PLAIN, "stopwords": "lucene", "stemmer": "porter"}
    before = bm25(**settings).search(small(DOCS), template, 5)
    if change == "lucene stop words":  # q2 is "banana": a stop word now, so it finds nothing
        monkeypatch.setattr(lexical, "LUCENE_ENGLISH_STOPWORDS", (*LUCENE_ENGLISH_STOPWORDS, "banana"))
    elif change == "token limit":
        monkeypatch.setattr(bm25_tokens, "MAX_TOKEN_CHARS", 100)
    else:
        real = lexical.package_version
        monkeypatch.setattr(lexical, "package_version", lambda name: "999.0" if name == "PyStemmer" else real(name))
    after = bm25(**settings).search(small(DOCS), template, 5)  # a kit or PyStemmer that changed: its own index
    assert builds.n == 2 and after.meta["index"]["origin"] == "built"
    assert ("q2" in set(after.df["qid"])) == (change != "lucene stop words") and "q2" in set(before.df["qid"])


def test_the_bm25_index_cache_lives_in_the_instir_home_under_bm25(own_home):
    assert default_cache_dir() == own_home / "bm25"
