"""The judgment cache holds only what the kit writes, and moves only what it wrote: a file that is no judgment
cache (a TREC run, the user's own SQLite database) is refused in one line and left as it is; a cache whose schema
differs (a trigger that rewrites stored scores, a dropped checksum column, a view, an earlier version's table) is
set aside with a warning, kept, and never read or re-sealed; a stored judgment outside its rubric's range (a
weighted score of 1e300 with a checksum recomputed to match) is judged again, so no InstFol is made from it;
another database's write-ahead log beside the cache is set aside before SQLite could replay it, while the cache's
own log (a killed run's) is replayed."""

import sqlite3
import warnings
from contextlib import closing

import pytest
from judge_fakes import numbered_requests, stored_rows
from says import raises_saying, says, warns_saying
from scripted_judge import ScriptedJudge

from instir.errors import UsageError
from instir.judge.cache import CachedJudge, row_checksum
from instir.judge.scoring import judgment_from_chat
from instir.retrieval.score_cache import ScoreCache

SCORES = [2.0, 0.0, 1.5, 3.0]


def judged(path):
    """A fresh CachedJudge over ``path`` judging four requests: (the judge, its backend, the judgments)."""
    requests = numbered_requests(len(SCORES))
    backend = ScriptedJudge({r.passage: s for r, s in zip(requests, SCORES)})
    with CachedJudge(backend, path) as judge:
        return judge, backend, judge.judge(requests)


def edit(path, *statements):
    """Change the cache behind the kit's back, as a person with the sqlite3 shell (and the kit's checksum
    function) could."""
    with closing(sqlite3.connect(path)) as db, db:
        db.create_function("instir_row_checksum", 17, row_checksum, deterministic=True)
        for sql in statements:
            db.execute(sql)


def set_aside(path):
    return sorted(path.parent.glob(f"{path.name}.set-aside-*"))


@pytest.mark.parametrize("change", [
    ("CREATE TRIGGER lift AFTER UPDATE ON judgments BEGIN UPDATE judgments SET weighted = 3, score = 3 "
     "WHERE text_sha256 = new.text_sha256 AND weighted < 3; END",),
    ("ALTER TABLE judgments DROP COLUMN checksum", "UPDATE judgments SET weighted = 3, score = 3"),
    ("CREATE VIEW best AS SELECT * FROM judgments WHERE weighted = 3",),
    ("CREATE TABLE notes (text TEXT)",),
    ("CREATE INDEX by_model ON judgments (model)",),
], ids=["a trigger", "a dropped checksum column", "a view", "another table", "an index"])
def test_a_cache_holding_what_the_kit_does_not_make_is_set_aside_and_never_trusted(tmp_path, change):
    path = tmp_path / "judgments.sqlite"
    judged(path)
    edit(path, *change)
    with pytest.warns(UserWarning, match=rf"judgment cache {path} .*: set aside as {path}.set-aside-"):
        judge, backend, got = judged(path)
    assert len(backend.requests) == len(SCORES) and judge.stats.hits == 0  # everything judged again
    assert [j.weighted for j in got] == SCORES
    (aside,) = set_aside(path)
    assert len(stored_rows(aside)) == len(SCORES)  # kept for inspection
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("SELECT type, name FROM sqlite_master").fetchall() == [("table", "judgments")]
    judge, backend, _ = judged(path)  # the new cache is the kit's: served as usual
    assert backend.requests == [] and judge.stats.hits == len(SCORES)


def test_a_cache_of_an_earlier_version_is_set_aside_not_sealed(tmp_path):
    path = tmp_path / "judgments.sqlite"
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("CREATE TABLE judgments (backend TEXT NOT NULL, model TEXT NOT NULL, rubric_version TEXT NOT NULL, "
                   "text_sha256 TEXT NOT NULL, rubric TEXT NOT NULL, score INTEGER, weighted REAL, raw TEXT NOT NULL, "
                   "PRIMARY KEY (backend, model, rubric_version, text_sha256)) WITHOUT ROWID")
    with pytest.warns(UserWarning, match="has tables other than the kit's"):
        judge, backend, _ = judged(path)
    assert len(backend.requests) == len(SCORES) and len(set_aside(path)) == 1


def _other_database(path):
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("CREATE TABLE results (x)")
        db.execute("INSERT INTO results VALUES (42)")


@pytest.mark.parametrize("make, said", [
    (lambda path: path.write_text("q1 Q0 d1 1 2.0 t\n"), "not an SQLite database"),
    (lambda path: path.write_bytes(b"SQLite"), "not an SQLite database"),
    (_other_database, "an SQLite database without its table 'judgments'; it holds table 'results'"),
], ids=["a TREC run", "a few bytes", "another SQLite database"])
def test_a_file_that_is_no_judgment_cache_is_refused_in_one_line_and_left_untouched(tmp_path, make, said):
    # on the commit before: a TREC run was "damaged" with `mv … .corrupt` suggested, and the user's own database
    # was renamed to .set-aside-… with a warning and a judgment cache made under its name
    path = tmp_path / "mine.sqlite"
    make(path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with raises_saying(UsageError, str(path), "is not a judgment cache", said, "name a new file or an instir "
                                                                                "judgment cache"):
        CachedJudge(ScriptedJudge({}), path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_the_score_cache_refuses_another_database_as_the_judgment_cache_does(tmp_path):
    path = tmp_path / "theirs.db"
    _other_database(path)
    before = path.read_bytes()
    with raises_saying(UsageError, str(path), "is not a score cache", "'rerankers', 'scores'", "table 'results'"):
        ScoreCache(path)
    assert [p.name for p in tmp_path.iterdir()] == ["theirs.db"] and path.read_bytes() == before


@pytest.mark.parametrize("change, said", [
    *((f"weighted = {w}", "1 stored judgment(s) outside their rubric's range") for w in ("1e300", "-1", "5.5")),
    ("score = 9", "1 stored judgment(s) outside their rubric's range"),  # above the 0-3 rubric's top step
    ("probs = '{\"0\": 1.5}'", "1 stored judgment(s) unreadable"),  # a probability above 1: read back as a failure
    ("probs = 'not json'", "1 stored judgment(s) unreadable"),  # no distribution at all: the same
], ids=["weighted 1e300", "weighted -1", "weighted 5.5", "a score outside the rubric", "a probability above one",
        "probabilities that are no JSON"])
def test_a_stored_success_that_cannot_be_one_is_judged_once_again_and_replaced(tmp_path, change, said):
    """Even with its checksum recomputed to match, it is never served; it is judged again once, and the new
    judgment replaces it (a row kept as a success would be paid for again on every run, never replaced)."""
    path = tmp_path / "judgments.sqlite"
    judged(path)
    columns = ("backend, model, rubric_version, text_sha256, rubric, score, weighted, probs, weighting, raw, error, "
               "latency_s, prompt_tokens, completion_tokens, cost, served_model, warning")
    edit(path, f"UPDATE judgments SET {change} WHERE raw = '0.0'",
         f"UPDATE judgments SET checksum = instir_row_checksum({columns})")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        judge, backend, got = judged(path)
    assert len(backend.requests) == 1 and [j.weighted for j in got] == SCORES
    assert all(j.score is None or j.score <= 3 for j in got)
    assert stored_rows(path)["weighted"].max() <= 3  # replaced by the new judgment
    assert any(said in str(w.message) for w in seen)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        judge, backend, got = judged(path)  # the replacement is served
    assert backend.requests == [] and judge.stats.hits == len(SCORES) and [j.weighted for j in got] == SCORES


def test_an_answer_above_the_rubrics_top_step_that_the_backend_takes_is_kept_not_paid_for_again(tmp_path):
    """The official weighting takes answers and digits to 5 on every rubric (geval.py); the cache keeps what the
    backend took (it judged them again on every lookup: paid twice in a run and again on every rerun)."""
    requests = numbered_requests(3, subset="fiqa", level=1)  # a 0-1 rubric
    assert requests[0].rubric.max_score == 1
    answers = {r.passage: judgment_from_chat('{"score": 5, "reason": "r"}', None, r.rubric) for r in requests}
    assert all(j.ok and j.weighted == 5.0 for j in answers.values())

    class Answering(ScriptedJudge):
        def judge(self, batch, on_result=None):
            self.requests.extend(batch)
            return [answers[r.passage] for r in batch]

    path = tmp_path / "judgments.sqlite"
    for run in range(2):
        backend = Answering({})
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with CachedJudge(backend, path) as judge:
                got = judge.judge(requests + requests)  # a passage in both lists of an instance
        assert [j.weighted for j in got] == [5.0] * 6
        assert len(backend.requests) == (3 if run == 0 else 0)


_CRASH = """
import os, sys
from instir.judge.cache import JudgmentCache
from instir.judge.rubrics import rubric_for
from instir.judge.types import Judgment, JudgeRequest
cache = JudgmentCache(sys.argv[1])
rubric = rubric_for("fiqa", 3)
for i in range(int(sys.argv[2]), int(sys.argv[3])):
    request = JudgeRequest("how should I save for retirement?", "I am 30 and have student debt.", f"passage number {i}",
                           rubric)
    cache.store("scripted", "script-v1", request, Judgment(score=1, weighted=1.0, probs=None, weighting="parsed",
                                                           raw="1"))
os._exit(0)  # killed: nothing closes the cache, its write-ahead log stays
"""


def _killed_after_storing(path, first, last):
    """Judgments of passages ``first``..``last - 1`` stored into ``path`` by a process killed before it closed."""
    import subprocess
    import sys

    subprocess.run([sys.executable, "-c", _CRASH, str(path), str(first), str(last)], check=True)
    assert path.with_name(path.name + "-wal").stat().st_size > 0


def test_a_log_of_another_database_that_rewrote_only_a_table_page_is_set_aside_too(tmp_path):
    """Such a log holds no frame of the first page, so the header id could not tell it apart; on the commit
    before every transaction stamped the id, SQLite replayed it over the cache and paid judgments vanished."""
    import shutil

    path = tmp_path / "judgments.sqlite"
    judged(path)
    other = tmp_path / "other" / "judgments.sqlite"
    other.parent.mkdir()
    shutil.copy(path, other)  # a colleague's copy, then a row deleted there, its log still open
    with closing(sqlite3.connect(other, isolation_level=None)) as db:
        db.execute("DELETE FROM judgments WHERE text_sha256 IN (SELECT text_sha256 FROM judgments LIMIT 2)")
        wal = other.with_name(other.name + "-wal").read_bytes()
        assert wal[32:36] != (1).to_bytes(4, "big")  # its first frame is a table page, not the first page
        path.with_name(path.name + "-wal").write_bytes(wal)
    with warns_saying(UserWarning, "write-ahead log", "not its own", "set aside"):
        judge, backend, got = judged(path)
    assert backend.requests == [] and judge.stats.hits == len(SCORES) and [j.weighted for j in got] == SCORES
    assert len(stored_rows(path)) == len(SCORES)


_HOT_JOURNAL = """
import os, sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA journal_mode=DELETE")
db.execute("PRAGMA cache_size=1")  # pages spill into the file mid-transaction: the journal is hot
db.execute("BEGIN")
db.execute("DELETE FROM judgments")
os._exit(0)
"""


@pytest.mark.parametrize(("log", "called"), [("-wal", "write-ahead log"), ("-journal", "rollback journal")])
def test_another_databases_log_beside_the_cache_is_set_aside_and_no_judgment_is_lost(tmp_path, log, called):
    """On main SQLite replayed the foreign write-ahead log over the cache: its paid judgments vanished without a
    word. A store in WAL mode never writes a rollback journal; until this stop SQLite rolled another database's
    hot one into the cache (in a trial, 40 judgments became 39 rows, 21 of them readable)."""
    import shutil
    import subprocess
    import sys

    path = tmp_path / "judgments.sqlite"
    judged(path)  # four judgments, closed cleanly: no log beside it
    other = tmp_path / "other" / "judgments.sqlite"
    other.parent.mkdir()
    _killed_after_storing(other, 100, 177)  # another cache's 77 judgments, its write-ahead log left
    if log == "-journal":
        subprocess.run([sys.executable, "-c", _HOT_JOURNAL, str(other)], check=True)
    shutil.copy(other.with_name(other.name + log), path.with_name(path.name + log))
    with warns_saying(UserWarning, called, "set aside"):
        judge, backend, got = judged(path)
    assert backend.requests == [] and judge.stats.hits == len(SCORES) and [j.weighted for j in got] == SCORES
    assert len(stored_rows(path)) == len(SCORES)
    (aside,) = tmp_path.glob(f"judgments.sqlite.set-aside-*{log}")
    assert aside.stat().st_size > 0


def test_the_caches_own_log_left_by_a_killed_process_is_replayed(tmp_path):
    path = tmp_path / "judgments.sqlite"
    _killed_after_storing(path, 0, len(SCORES))  # the judge's own four passages, paid before the kill
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        judge, backend, _ = judged(path)
    assert backend.requests == [] and judge.stats.hits == len(SCORES)


def test_a_new_cache_carries_its_id_in_its_own_header_before_its_first_judgment(tmp_path):
    """The log check reads the id in the file's header: a new cache that got it only through its first log would,
    killed before a checkpoint, say 0 there, and another database's log beside it would be replayed."""
    path = tmp_path / "judgments.sqlite"
    cache = CachedJudge(ScriptedJudge({}), path)
    header_id = int.from_bytes(path.read_bytes()[60:64], "big")
    assert header_id != 0
    cache.close()
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (header_id,)


_OPEN = """
import sys
from instir.errors import UserError
from instir.judge.cache import JudgmentCache
try:
    JudgmentCache(sys.argv[1])
except UserError as err:
    print(err)
"""


@pytest.mark.processes
@pytest.mark.parametrize("fifo", ["judgments.sqlite-wal", "judgments.sqlite"])
def test_a_fifo_in_place_of_the_cache_or_its_log_is_refused_not_waited_on(tmp_path, fifo):
    """Reading a FIFO blocks for ever: opening the cache names it instead (in a process of its own, so that a
    regression fails here rather than hanging the suite)."""
    import os
    import subprocess
    import sys

    path = tmp_path / "judgments.sqlite"
    judged(path)
    (tmp_path / fifo).unlink(missing_ok=True)
    os.mkfifo(tmp_path / fifo)
    done = subprocess.run([sys.executable, "-c", _OPEN, str(path)], capture_output=True, text=True, timeout=20)
    assert done.returncode == 0, done.stderr
    says(done.stdout, f"cannot open the judgment cache {path}", str(tmp_path / fifo), "is a FIFO")


def test_a_log_holding_the_caches_id_and_another_is_set_aside_too(tmp_path):
    """A log of a copy of the cache whose id was then changed holds first pages of both ids: it is not the cache's
    own log (only its own id may appear), so it is set aside, never replayed."""
    import shutil

    path = tmp_path / "judgments.sqlite"
    judged(path)
    with closing(sqlite3.connect(path)) as db:
        (own,) = db.execute("PRAGMA user_version").fetchone()
    other = tmp_path / "other" / "judgments.sqlite"
    other.parent.mkdir()
    shutil.copy(path, other)
    with closing(sqlite3.connect(other, isolation_level=None)) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA wal_autocheckpoint=0")
        db.execute(f"PRAGMA user_version = {own}")  # a first page with the cache's id
        db.execute("DELETE FROM judgments WHERE raw = '2.0'")
        db.execute("PRAGMA user_version = 99")  # and one with another id
        db.execute("DELETE FROM judgments WHERE raw = '0.0'")
        wal = other.with_name(other.name + "-wal").read_bytes()
    path.with_name(path.name + "-wal").write_bytes(wal)
    with warns_saying(UserWarning, "write-ahead log", "not its own", "set aside"):
        judge, backend, got = judged(path)
    assert backend.requests == [] and judge.stats.hits == len(SCORES) and [j.weighted for j in got] == SCORES
    with closing(sqlite3.connect(path)) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (own,)


def test_a_cache_named_through_a_symlink_checks_the_logs_beside_the_file_it_leads_to(tmp_path):
    """SQLite keeps the logs beside the file a symlink leads to: on the commit before, only those beside the link
    were checked, so another database's log beside a shared cache was replayed and its paid judgments were lost."""
    import shutil

    path = tmp_path / "shared" / "judgments.sqlite"
    path.parent.mkdir()
    judged(path)
    link = tmp_path / "mine" / "judgments.sqlite"
    link.parent.mkdir()
    link.symlink_to(path)
    other = tmp_path / "other" / "judgments.sqlite"
    other.parent.mkdir()
    shutil.copy(path, other)
    with closing(sqlite3.connect(other, isolation_level=None)) as db:  # a colleague's copy, emptied, its log open
        db.execute("PRAGMA wal_autocheckpoint=0")
        db.execute("DELETE FROM judgments")
        shutil.copy(other.with_name(other.name + "-wal"), path.with_name(path.name + "-wal"))
    with warns_saying(UserWarning, "write-ahead log", "not its own", "set aside"):
        judge, backend, got = judged(link)
    assert backend.requests == [] and judge.stats.hits == len(SCORES) and [j.weighted for j in got] == SCORES
    assert len(stored_rows(path)) == len(SCORES)
    with judge.cache.exclusive():  # its lock too lies beside the file: two links to one cache share one lock
        assert path.with_name(path.name + "-lock").is_file() and not link.with_name(link.name + "-lock").exists()
