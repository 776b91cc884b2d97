"""The judgment cache's row checksums: a row edited by hand is never served but judged again and
replaced, and an untouched cache still hits (a cache made before checksums is set aside: test_cache_schema);
and closing the cache leaves no write-ahead log beside it."""

import sqlite3
import subprocess
import sys
import textwrap
import warnings
from contextlib import closing
from pathlib import Path

import pytest
from judge_fakes import numbered_requests, stored_rows
from says import warns_saying
from scripted_judge import ScriptedJudge

from instir.judge.cache import CachedJudge, JudgmentCache, request_key, row_checksum
from instir.judge.types import Judgment

SCORES = [2.0, 0.0, 1.5, 3.0]


def judged(path, requests=None):
    """A fresh CachedJudge over ``path`` (a scripted backend scoring passage i with SCORES[i])
    and its judgments of ``requests`` (default: four numbered requests)."""
    requests = requests or numbered_requests(len(SCORES))
    backend = ScriptedJudge({r.passage: s for r, s in zip(requests, SCORES)})
    with CachedJudge(backend, path) as judge:
        return judge, backend, judge.judge(requests)


def edit(path, sql, *params):
    """Change the cache file behind the kit's back, as a person with the sqlite3 shell would."""
    with closing(sqlite3.connect(path)) as db, db:
        assert db.execute(sql, params).rowcount >= 1


def fields(judgment):
    return {**vars(judgment), "from_cache": None}


def test_an_edited_weighted_value_is_judged_again_and_replaced(tmp_path):
    path = tmp_path / "c.sqlite"
    _, _, first = judged(path)
    edit(path, "UPDATE judgments SET weighted = -9.3 WHERE raw = '0.0'")  # InstFol 0.0 would become -9.3
    with warns_saying(UserWarning, str(path), "1 stored judgment", "checksum", "judging them again"):
        judge, backend, again = judged(path)
    assert len(backend.requests) == 1 and backend.requests[0].passage == "passage number 1"
    assert judge.stats.hits == 3 and judge.stats.judged == 1
    assert [fields(j) for j in again] == [fields(j) for j in first]
    rows = stored_rows(path).set_index("raw")
    assert rows.loc["0.0", "weighted"] == 0.0 and rows.loc["0.0", "attempts"] == 2  # the edited row was replaced
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        judge, backend, third = judged(path)
    assert backend.requests == [] and judge.stats.hits == 4 and [j.weighted for j in third] == SCORES


@pytest.mark.parametrize("column, value", [("weighted", 2.5), ("score", 3), ("completion_tokens", 7),
                                           ("probs", '{"0": 1}'), ("weighting", "parsed"), ("raw", "edited"),
                                           ("served_model", "other"), ("rubric", "other-rubric"), ("error", "made up"),
                                           ("latency_s", None)])
def test_an_edit_of_any_stored_field_is_a_miss(tmp_path, column, value):
    path = tmp_path / "c.sqlite"
    [request] = numbered_requests(1)
    made = Judgment(score=2, weighted=2.0, probs={"2": 1.0}, weighting="logprobs", raw="2", latency_s=0.5,
                    served_model="m-2024")
    with JudgmentCache(path) as cache:
        cache.store("b", "m", request, made)
    edit(path, f"UPDATE judgments SET {column} = ?", value)
    with JudgmentCache(path) as cache, pytest.warns(UserWarning, match="1 stored judgment"):
        assert cache.lookup("b", "m", [request_key(request)]) == {}


def test_several_edited_rows_give_one_warning_with_their_count(tmp_path):
    path = tmp_path / "c.sqlite"
    judged(path)
    edit(path, "UPDATE judgments SET weighted = weighted + 1 WHERE raw != '2.0'")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        judge, backend, _ = judged(path)
    assert [str(w.message).split(": ")[1] for w in caught] == ["3 stored judgment(s) do not match their checksum "
                                                               "(edited or damaged)"]
    assert len(backend.requests) == 3 and judge.stats.hits == 1



def test_the_row_checksum_is_the_documented_digest_so_existing_caches_keep_hitting():
    """Every stored row's checksum is compared with this function's: a release that changed it (NULLs kept, another
    key order, separators or digest size) would take every existing cache as edited and pay every judgment again.
    The rule (row_checksum's docstring): BLAKE2b, 16 bytes, hex, of the JSON object of the columns that are not
    NULL, keys sorted, no spaces; the text below is written out by hand from it, and the hex is its digest (computed
    once with hashlib, which holds it fixed whatever the kit's code becomes)."""
    import hashlib

    values = ("b", "m", "v", "0" * 64, "r", 2, 2.0, None, "parsed", "2", None, None, None, None, None, None, None)
    text = ('{"backend":"b","model":"m","raw":"2","rubric":"r","rubric_version":"v","score":2,'
            f'"text_sha256":"{"0" * 64}","weighted":2.0,"weighting":"parsed"}}')
    golden = "73bf26ae4ac75e00fa186fa28f58115b"
    assert hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest() == golden
    assert row_checksum(*values) == golden

def test_an_untouched_cache_hits_without_a_warning(tmp_path):
    path = tmp_path / "c.sqlite"
    _, _, first = judged(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        judge, backend, again = judged(path)
    assert backend.requests == [] and judge.stats.hits == 4
    assert [fields(j) for j in again] == [fields(j) for j in first] and all(j.from_cache for j in again)
    assert stored_rows(path)["checksum"].str.fullmatch("[0-9a-f]{32}").all()


def test_a_store_that_keeps_an_edited_success_does_not_bless_it(tmp_path):
    """Another process storing the same key while the edited row is still there keeps the stored
    success (first answer wins) and must not give the edited values a fresh checksum."""
    path = tmp_path / "c.sqlite"
    [request] = numbered_requests(1)
    good = Judgment(score=2, weighted=2.0, probs=None, weighting="logprobs", raw="2")
    with JudgmentCache(path) as cache:
        cache.store("b", "m", request, good)
    edit(path, "UPDATE judgments SET weighted = -9.3")
    with JudgmentCache(path) as other:  # has not looked the key up: the row is kept as it is
        other.store("b", "m", request, good)
    with JudgmentCache(path) as cache:
        with pytest.warns(UserWarning, match="1 stored judgment"):
            assert cache.lookup("b", "m", [request_key(request)]) == {}
        cache.store("b", "m", request, good)  # after a lookup that missed, the store replaces the row
        [got] = cache.lookup("b", "m", [request_key(request)]).values()
    assert got.weighted == 2.0


def test_closing_the_cache_leaves_no_write_ahead_log(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = JudgmentCache(path)
    [request] = numbered_requests(1)
    cache.store("b", "m", request, Judgment(score=1, weighted=1.0, probs=None, weighting="parsed", raw="1"))
    assert (tmp_path / "c.sqlite-wal").exists()  # WAL mode: the write went to the log first
    cache.close()
    cache.close()  # a second close does nothing
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.sqlite"]
    with JudgmentCache(path) as again:
        assert again.lookup("b", "m", [request_key(request)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.sqlite"]


def test_a_cache_never_closed_is_checkpointed_at_exit(tmp_path):
    """``instir judge`` and the judge stage hand their judge on without closing it: the cache is
    closed, its log checkpointed and removed, when the interpreter exits."""
    path = tmp_path / "c.sqlite"
    script = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from judge_fakes import numbered_requests
        from instir.judge.cache import JudgmentCache
        from instir.judge.types import Judgment
        KEEP = JudgmentCache({str(path)!r})
        for r in numbered_requests(20):
            KEEP.store("b", "m", r, Judgment(score=1, weighted=1.0, probs=None, weighting="parsed", raw="1"))
        assert os.path.exists({str(path) + "-wal"!r})
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.sqlite"]
    assert len(stored_rows(path)) == 20
