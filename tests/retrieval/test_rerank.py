"""The rerank stage with a counting fake reranker: top-depth cut, authors' query split,
sidecar provenance, run reuse, score cache (a rerun scores nothing) and resume after a crash."""

import hashlib
import json
import math
import sqlite3
from contextlib import closing

import pytest
from says import raises_saying

from instir.benchmarks.types import FormatError, Query
from instir.errors import UserError
from instir.retrieval import retrieve
from instir.retrieval.lexical import BM25Retriever
from instir.retrieval.rerank import query_parts, rerank
from instir.retrieval.runs import Run, read_run, run_is_complete, write_run
from instir.retrieval.score_cache import ScoreCache


class WordOverlap:
    """Scores a prompt by how many of its query words appear in its document; counts calls."""

    name = "overlap"

    def __init__(self, batch_size=3, fail_after=None):
        self.batch_size = batch_size
        self.calls = 0
        self.inputs = []
        self.fail_after = fail_after

    def identity(self):
        return {"kind": "fake", "template": "Q: {query} | D: {text}", "template_name": "fake"}

    def model_input(self, query, instruction, text):
        return f"Q: {f'{query} {instruction}'.strip()} | D: {text}"

    def score(self, inputs):
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise RuntimeError("killed")
        self.calls += 1
        self.inputs.extend(inputs)
        out = []
        for item in inputs:
            q, d = item[3:].split(" | D: ")
            out.append(len(set(q.lower().split()) & set(d.lower().split())) + len(d) / 1000)
        return out


@pytest.fixture
def first_stage(toy_benchmark, tmp_path):
    bench = toy_benchmark()
    run = retrieve(bench, BM25Retriever(), k=6, out_dir=tmp_path / "runs")
    return bench, run


def test_rerank_rescores_exactly_the_top_depth_documents_of_each_query(first_stage, tmp_path):
    bench, run = first_stage
    fake = WordOverlap()
    out = rerank(run, bench, fake, depth=3, cache=tmp_path / "s.sqlite", progress=False)
    top = run.top(3).df
    assert sorted(zip(out.df["qid"], out.df["docid"])) == sorted(zip(top["qid"], top["docid"]))
    assert len(fake.inputs) == len(top)
    expected = dict(zip(fake.inputs, fake.score(fake.inputs)))
    docs = {d.id: d for d in bench.corpus}
    for qid, docid, score in zip(out.df["qid"], out.df["docid"], out.df["score"]):
        q = bench.queries[qid]
        prompt = f"Q: {q.query} {q.instruction} | D: {docs[docid].text}"
        assert score == pytest.approx(expected[prompt], rel=1e-6)


def test_authors_split_gives_a_bare_query_twice_and_fields_keep_it_once():
    bare = Query("1", "wine cabinet")
    assert query_parts(bare, "authors") == ("wine cabinet", "wine cabinet")
    assert query_parts(bare, "fields") == ("wine cabinet", "")
    instructed = Query("1_1", "wine cabinet", "I am a sommelier")
    assert query_parts(instructed, "authors") == ("wine cabinet", "I am a sommelier")


def test_sidecar_records_reranker_first_stage_hash_and_depth(first_stage, tmp_path):
    bench, run = first_stage
    out = rerank(run, bench, WordOverlap(), depth=2, out_dir=tmp_path / "rr", cache=tmp_path / "s.sqlite",
                 progress=False)
    assert run_is_complete(out.meta["path"])
    side = json.loads((tmp_path / "rr" / (out.meta["path"].split("/")[-1] + ".json")).read_text())
    assert side["first_stage"]["path"] == run.meta["path"]
    assert side["first_stage"]["trec_sha256"] == hashlib.sha256(open(run.meta["path"], "rb").read()).hexdigest()
    assert side["depth"] == 2 and side["reranker"]["name"] == "overlap"
    assert side["template"] == {"name": "fake", "prompt": "Q: {query} | D: {text}"}
    assert side["query_split"] == "authors" and side["doc_field"] == "indexed"


def test_a_reranked_runs_k_is_what_it_ranks_not_the_depth_asked(first_stage, tmp_path):
    # a first stage of at most 6 reranked at depth 100 ranks what it held: on the commit before its sidecar said k 100,
    # so the paper comparison took it as deep enough for nDCG@20
    bench, run = first_stage
    out = rerank(run, bench, WordOverlap(), depth=100, out_dir=tmp_path / "rr", cache=tmp_path / "s.sqlite",
                 progress=False)
    side = json.loads((tmp_path / "rr" / (out.meta["path"].split("/")[-1] + ".json")).read_text())
    assert side["depth"] == 100 and side["k"] == run.meta["k"] == 6  # the depth its first stage was retrieved at
    assert out.depth == run.depth < 6  # a query matches fewer documents: ranked all the same


def test_a_reranked_run_of_an_uneven_first_stage_is_as_deep_as_its_shallowest_query(first_stage, tmp_path):
    # before, a first stage of one's own (no sidecar) ranking one query 2 deep and the rest deeper gave the reranked
    # run's sidecar k = its deepest query: a vouched k, which the paper comparison took as every query's depth
    bench, run = first_stage
    shallow = run.df[(run.df["qid"] != run.df["qid"].iloc[0]) | (run.df["rank"] <= 2)]
    write_run(Run(shallow[["qid", "docid", "score"]]), tmp_path / "mine.trec")
    (tmp_path / "mine.trec.json").unlink(missing_ok=True)
    mine = read_run(tmp_path / "mine.trec")
    assert mine.depth > 2
    out = rerank(tmp_path / "mine.trec", bench, WordOverlap(), depth=100, out_dir=tmp_path / "rr",
                 cache=tmp_path / "s.sqlite", progress=False)
    side = json.loads((tmp_path / "rr" / (out.meta["path"].split("/")[-1] + ".json")).read_text())
    assert side["k"] == 2


def test_complete_reranked_run_is_reused_without_scoring(first_stage, tmp_path):
    bench, run = first_stage
    kwargs = dict(depth=3, out_dir=tmp_path / "rr", cache=tmp_path / "s.sqlite", progress=False)
    first = rerank(run.meta["path"], bench, WordOverlap(), **kwargs)
    again = WordOverlap()
    second = rerank(run.meta["path"], bench, again, **kwargs)
    assert second.meta["reused"] and again.calls == 0
    assert second.df.equals(read_run(first.meta["path"]).df)


def test_warm_rerun_makes_zero_model_calls(first_stage, tmp_path):
    bench, run = first_stage
    cache = ScoreCache(tmp_path / "s.sqlite")
    cold = rerank(run, bench, WordOverlap(), depth=4, cache=cache, progress=False)
    warm_reranker = WordOverlap()
    warm = rerank(run, bench, warm_reranker, depth=4, cache=cache, progress=False)
    assert warm_reranker.calls == 0 and warm.meta["scored"] == 0
    assert warm.df.equals(cold.df)


def test_killed_rerank_resumes_scoring_only_what_is_missing(first_stage, tmp_path):
    bench, run = first_stage
    cache = ScoreCache(tmp_path / "s.sqlite")
    with pytest.raises(RuntimeError, match="killed"):
        rerank(run, bench, WordOverlap(batch_size=3, fail_after=2), depth=4, cache=cache, progress=False)
    with closing(sqlite3.connect(cache.path)) as db:
        assert db.execute("SELECT COUNT(*) FROM scores").fetchone()[0] == 6
    resumed = WordOverlap(batch_size=3)
    out = rerank(run, bench, resumed, depth=4, cache=cache, progress=False)
    assert out.meta["scored"] == out.meta["pairs"] - 6 == len(resumed.inputs)


def test_the_score_cache_keeps_the_judgment_caches_rules(first_stage, tmp_path):
    """One store for both caches: a stored score that is not finite is scored again and replaced, and a file
    holding what the kit does not make (a trigger that rewrites scores) is set aside, never trusted."""
    bench, run = first_stage
    path = tmp_path / "s.sqlite"
    cold = rerank(run, bench, WordOverlap(), depth=4, cache=ScoreCache(path), progress=False)
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("UPDATE scores SET score = 9e999 WHERE rowid = (SELECT MIN(rowid) FROM scores)")
    again = WordOverlap()
    assert rerank(run, bench, again, depth=4, cache=ScoreCache(path), progress=False).df.equals(cold.df)
    assert len(again.inputs) == 1
    with closing(sqlite3.connect(path)) as db, db:
        assert db.execute("SELECT COUNT(*) FROM scores WHERE abs(score) > 1e308").fetchone() == (0,)
        db.execute("CREATE TRIGGER lift AFTER INSERT ON scores BEGIN UPDATE scores SET score = 1e6; END")
    with pytest.warns(UserWarning, match=rf"score cache {path} holds what the kit does not make \(trigger 'lift'\)"):
        fresh = WordOverlap()
        assert rerank(run, bench, fresh, depth=4, cache=ScoreCache(path), progress=False).df.equals(cold.df)
    assert fresh.calls > 0 and len(list(tmp_path.glob("s.sqlite.set-aside-*"))) == 1


def test_changed_first_stage_file_is_a_new_key(first_stage, tmp_path):
    bench, run = first_stage
    kwargs = dict(depth=2, out_dir=tmp_path / "rr", cache=tmp_path / "s.sqlite", progress=False)
    rerank(run.meta["path"], bench, WordOverlap(), **kwargs)
    shifted = Run(run.df.assign(score=run.df["score"] + 1.0), {})
    other = tmp_path / "other.trec"
    write_run(shifted, other)
    out = rerank(other, bench, WordOverlap(), **kwargs)
    assert not out.meta.get("reused")
    assert out.meta["first_stage"]["trec_sha256"] == hashlib.sha256(other.read_bytes()).hexdigest()
    assert out.meta["first_stage"]["trec_sha256"] != hashlib.sha256(open(run.meta["path"], "rb").read()).hexdigest()


def test_unknown_document_is_refused_with_the_run_file(toy_benchmark, tmp_path):
    bench = toy_benchmark()
    path = write_run(Run.from_scores({"1_1": {"10_1": 2.0, "nope": 1.0}}), tmp_path / "bad.trec")
    with pytest.raises(FormatError, match=r"bad\.trec.*docid.*not in the corpus"):
        rerank(path, bench, WordOverlap(), cache=tmp_path / "s.sqlite", progress=False)


def test_a_first_stage_retrieved_on_another_benchmark_is_refused_naming_both(first_stage, tmp_path):
    # a sample's ids are its benchmark's too: the reranked run was labelled the full benchmark, no longer a sample
    from dataclasses import replace

    from instir.errors import UsageError

    bench, run = first_stage
    other = replace(bench, name="ifir/fiqa")
    with pytest.raises(UsageError, match=rf"{run.meta['path']} was retrieved on '{bench.name}' \(its sidecar\), not "
                                         "on 'ifir/fiqa': rerank it with the benchmark it was made from"):
        rerank(run.meta["path"], other, WordOverlap(), cache=tmp_path / "s.sqlite", progress=False)
    assert rerank(run.meta["path"], bench, WordOverlap(), cache=tmp_path / "s.sqlite", progress=False).df.size


def test_a_reranker_sees_a_documents_title_with_its_text_as_followirs_authors_gave_it(tmp_path):
    # found by a review against the authors' code: the rerank stage passed the text alone, so every FollowIR
    # reranker card scored news articles without their headlines (mteb's search_cross_encoder joins them)
    from instir.benchmarks import load_benchmark

    bench = load_benchmark("followir-sample/core17")
    run = retrieve(bench, BM25Retriever(show_progress=False), k=3)
    reranker = WordOverlap()
    rerank(run, bench, reranker, depth=1, cache=tmp_path / "s.sqlite", progress=False)
    docs = bench.corpus.get({d for d in run.df["docid"]})
    assert all(doc.title for doc in docs.values())
    shown = {item.split(" | D: ")[1] for item in reranker.inputs}
    assert shown <= {f"{doc.title} {doc.text}".strip() for doc in docs.values()} and shown


@pytest.mark.parametrize("extra", [-1, 1])
def test_a_reranker_that_returns_another_number_of_scores_than_inputs_is_refused_naming_it(first_stage, tmp_path,
                                                                                           extra):
    # one score short would leave a pair unscored (a KeyError); one too many would pair scores with the wrong inputs
    bench, run = first_stage

    class Miscounting(WordOverlap):
        def score(self, inputs):
            scores = super().score(inputs)
            return scores[:-1] if extra < 0 else [*scores, 0.0]

    cache = tmp_path / "s.sqlite"
    with raises_saying(ValueError, "reranker overlap returned", "scores for 3 inputs"):
        rerank(run, bench, Miscounting(batch_size=3), depth=3, cache=cache, progress=False)


def test_a_reranker_score_that_is_not_a_number_is_refused_naming_its_document_and_not_stored(first_stage, tmp_path):
    # a NaN met the score cache's NOT NULL column: a bare sqlite3.IntegrityError, and its batch's other scores lost
    bench, run = first_stage

    class FirstOfEachBatchNaN(WordOverlap):
        def score(self, inputs):
            return [math.nan, *super().score(inputs)[1:]]

    cache, broken = tmp_path / "s.sqlite", FirstOfEachBatchNaN(batch_size=3)
    with raises_saying(UserError, "run score of document", "expected a finite number, got nan"):
        rerank(run, bench, broken, depth=3, cache=cache, progress=False)
    fake = WordOverlap(batch_size=3)
    rerank(run, bench, fake, depth=3, cache=cache, progress=False)
    assert len(fake.inputs) == broken.calls  # only the inputs scored NaN are scored again


@pytest.mark.parametrize("depth", [0, -3, "10", 2.5, True])
def test_a_depth_below_one_is_refused_before_any_scoring(first_stage, tmp_path, depth):
    # a depth that is no whole number ("10", 2.5) was a TypeError from inside, or a run cut at a fraction
    bench, run = first_stage
    fake = WordOverlap()
    with raises_saying(UserError, "rerank(…, depth) takes a whole number of at least 1", repr(depth)):
        rerank(run, bench, fake, depth=depth, cache=tmp_path / "s.sqlite", progress=False)
    assert fake.calls == 0


def test_the_first_stored_score_of_an_input_is_kept_when_another_process_scores_it_again(tmp_path):
    # two processes sharing the cache may score one input twice (GPU non-determinism, another batch): the first
    # answer stays, so every run made from the cache sees one score per input
    cache = ScoreCache(tmp_path / "s.sqlite")
    identity = {"kind": "fake"}
    cache.put(identity, [("input-1", 0.25)])
    cache.put(identity, [("input-1", 0.75), ("input-2", 0.5)])
    assert cache.get(identity, ["input-1", "input-2"]) == {"input-1": 0.25, "input-2": 0.5}
    cache.close()


def test_the_score_cache_finds_every_stored_input_of_a_batch_longer_than_one_lookup(tmp_path):
    cache = ScoreCache(tmp_path / "s.sqlite")
    identity = {"model": "m"}
    keys = [ScoreCache.input_key(f"input {n}") for n in range(1001)]
    cache.put(identity, [(key, float(n)) for n, key in enumerate(keys)])
    assert cache.get(identity, keys) == {key: float(n) for n, key in enumerate(keys)}
    cache.close()


def test_a_stored_score_that_is_not_a_number_is_missing_not_returned(tmp_path):
    path = tmp_path / "s.sqlite"
    cache = ScoreCache(path)
    identity, keys = {"model": "m"}, [ScoreCache.input_key("a"), ScoreCache.input_key("b")]
    cache.put(identity, [(keys[0], 1.0), (keys[1], 2.0)])
    cache.close()
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("UPDATE scores SET score = x'00' WHERE input_sha256 = ?", (keys[0],))
    cache = ScoreCache(path)
    assert cache.get(identity, keys) == {keys[1]: 2.0}
    cache.close()


def test_the_score_cache_lives_in_the_instir_home_as_rerank_scores_sqlite(own_home):
    from instir.retrieval.score_cache import default_score_cache_path

    assert default_score_cache_path() == own_home / "rerank-scores.sqlite"


@pytest.mark.parametrize("digest", ["84cb4dcf" * 8, None], ids=["a local folder's files", "a Hub id alone"])
def test_scores_an_earlier_kit_stored_under_a_rerankers_files_digest_are_said_not_reused_once(tmp_path, digest):
    # a kit before 2026-12-06 keyed a reranker by its files' digest (local_files_sha256; None for a Hub id), today by
    # its weights' fingerprint: its scores are not served (the digest missed a checkpoint changed in its middle), and
    # the rerun that scores every pair again says why, once, instead of paying for them again without a word
    import warnings

    earlier = {"kind": "cross-encoder", "model": "/models/ce", "revision": None, "dtype": "float32",
               "max_length": None, "local_files_sha256": digest,
               "template": ["{query} {instruction}", "{text}"]}
    today = {**{k: v for k, v in earlier.items() if k != "local_files_sha256"}, "fingerprint": "65bfd9cb" * 8}
    keys = [ScoreCache.input_key(text) for text in ("a", "b")]
    cache = ScoreCache(tmp_path / "s.sqlite")
    cache.put(earlier, [(keys[0], 0.5), (keys[1], 0.25)])  # the rows the earlier kit wrote

    def said(identity):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert cache.get(identity, keys) == {}
        return [str(w.message) for w in caught]

    try:
        assert said({**today, "dtype": "float16"}) == []  # another reranker's settings: nothing of its own there
        (message,) = said(today)  # before: scored again without a word
        assert message == (f"score cache {cache.path}: 2 score(s) of /models/ce stored by an earlier kit under its "
                           "files' digest or its Hub id alone, not its weights' fingerprint, are not reused: they are "
                           "scored again")
        assert said(today) == []  # once
        assert cache.get(earlier, keys) == dict(zip(keys, (0.5, 0.25)))  # its own identity still finds them
    finally:
        cache.close()


_EARLIER = {"kind": "cross-encoder", "model": "/models/ce", "revision": None, "dtype": "float32", "max_length": None,
            "local_files_sha256": "84cb4dcf" * 8, "template": ["{query} {instruction}", "{text}"]}
_TODAY = {**{k: v for k, v in _EARLIER.items() if k != "local_files_sha256"}, "fingerprint": "65bfd9cb" * 8}


@pytest.mark.parametrize("stored, asked, n", [
    ([_EARLIER, _TODAY], _TODAY, 2),  # its own scores are found: nothing is scored again
    ([{**_TODAY, "fingerprint": "0badf00d" * 8}], _TODAY, 2),  # another checkpoint's scores, not an earlier kit's
    ([_EARLIER], {k: v for k, v in _TODAY.items() if k != "fingerprint"}, 2),  # no fingerprint asked for
    ([_EARLIER], _TODAY, 0),  # nothing asked for, nothing scored
], ids=["its own scores found", "another checkpoint", "no fingerprint", "no input"])
def test_no_earlier_kit_is_said_where_none_of_its_scores_is_what_the_rerun_pays_for(tmp_path, stored, asked, n):
    import warnings

    keys = [ScoreCache.input_key(text) for text in ("a", "b")]
    cache = ScoreCache(tmp_path / "s.sqlite")
    try:
        for identity in stored:
            cache.put(identity, [(keys[0], 0.5), (keys[1], 0.25)])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            cache.get(asked, keys[:n])
        assert [str(w.message) for w in caught] == []
    finally:
        cache.close()
