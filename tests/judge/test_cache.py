"""The SQLite judgment cache: keys, failures, resume after SIGKILL, two processes at once,
and no API key in any file it writes."""

import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from contextlib import closing
from pathlib import Path

import pytest
from denied import refuse_open
from judge_fakes import FakeChatServer, Reply, numbered_requests, scored_reply, stored_rows
from says import raises_saying
from scripted_judge import ScriptedJudge

from instir.errors import UserError
from instir.judge.baseline import BaselineJudge
from instir.judge.cache import CachedJudge, JudgmentCache, request_key
from instir.judge.chat import OpenAICompatibleJudge
from instir.judge.rubrics import rubric_for
from instir.judge.types import JudgeRequest, Judgment
from instir.sqlite_store import CorruptStoreError

HERE = Path(__file__).parent
WORKER = HERE / "judge_worker.py"


def scripted(requests, value=2.0):
    return ScriptedJudge({r.passage: value for r in requests})


def test_second_run_is_served_from_the_cache(tmp_path):
    requests = numbered_requests(5)
    backend = scripted(requests)
    first = CachedJudge(backend, tmp_path / "c.sqlite").judge(requests)
    again = CachedJudge(backend, tmp_path / "c.sqlite")
    second = again.judge(requests)
    assert len(backend.requests) == 5
    assert again.stats.hits == 5 and again.stats.judged == 0
    assert [j.weighted for j in second] == [j.weighted for j in first] == [2.0] * 5
    assert all(j.from_cache for j in second) and not any(j.from_cache for j in first)
    assert second[0].latency_s == 0.5 and second[0].cost == 0.001


def test_stored_judgment_keeps_every_field(tmp_path):
    [request] = numbered_requests(1)
    made = Judgment(score=2, weighted=1.75, probs={"1": 0.25, "2": 0.75}, weighting="logprobs", raw='{"score": 2}',
                    latency_s=0.25, prompt_tokens=300, completion_tokens=12, cost=1e-4)
    with JudgmentCache(tmp_path / "c.sqlite") as cache:
        cache.store("b", "m", request, made)
        [(key, got)] = cache.lookup("b", "m", [request_key(request)]).items()
    assert got == Judgment(**{**vars(made), "from_cache": True})


def test_key_separates_backend_model_rubric_and_text(tmp_path):
    [request] = numbered_requests(1)
    other_rubric = JudgeRequest(request.query, request.instruction, request.passage, rubric_for("fiqa", 2))
    other_text = JudgeRequest(request.query, request.instruction, request.passage + ".", rubric_for("fiqa", 3))
    with JudgmentCache(tmp_path / "c.sqlite") as cache:
        cache.store("b", "m", request, Judgment(score=1, weighted=1.0, probs=None, weighting="parsed", raw="1"))
        assert cache.lookup("b", "m", [request_key(request)])
        assert not cache.lookup("b2", "m", [request_key(request)])
        assert not cache.lookup("b", "m2", [request_key(request)])
        assert not cache.lookup("b", "m", [request_key(other_rubric)])
        assert not cache.lookup("b", "m", [request_key(other_text)])


def test_duplicate_requests_are_judged_once(tmp_path):
    requests = numbered_requests(3) * 2
    backend = scripted(requests)
    out = CachedJudge(backend, tmp_path / "c.sqlite").judge(requests)
    assert len(backend.requests) == 3 and all(j.ok for j in out)


def test_failures_are_stored_as_failures_and_retried_next_run(tmp_path):
    requests = numbered_requests(4)
    backend = ScriptedJudge({requests[0].passage: 1.0, requests[1].passage: 3.0})  # 2 and 3 fail
    path = tmp_path / "c.sqlite"
    first = CachedJudge(backend, path)
    out = first.judge(requests)
    assert [j.ok for j in out] == [True, True, False, False] and first.stats.failed == 2
    rows = stored_rows(path).set_index("raw")
    assert rows.loc["???", "score"].isna().all() and rows.loc["???", "error"].notna().all()

    backend.scores.update({requests[2].passage: 0.0, requests[3].passage: 2.0})
    backend.requests.clear()
    second = CachedJudge(backend, path)
    out = second.judge(requests)
    assert [r.passage for r in backend.requests] == [requests[2].passage, requests[3].passage]
    assert [j.weighted for j in out] == [1.0, 3.0, 0.0, 2.0]
    frame = stored_rows(path)
    assert frame["error"].isna().all() and sorted(frame["attempts"]) == [1, 1, 2, 2]


def test_stored_success_is_never_replaced_by_a_failure(tmp_path):
    [request] = numbered_requests(1)
    with JudgmentCache(tmp_path / "c.sqlite") as cache:
        cache.store("b", "m", request, Judgment(score=3, weighted=3.0, probs=None, weighting="parsed", raw="3"))
        cache.store("b", "m", request, Judgment.failure("late failure"))
        [got] = cache.lookup("b", "m", [request_key(request)]).values()
    assert got.ok and got.score == 3


def test_backend_that_reports_only_at_the_end_is_still_stored(tmp_path):
    class Quiet(ScriptedJudge):
        def judge(self, requests, on_result=None):
            return super().judge(requests)

    requests = numbered_requests(3)
    CachedJudge(Quiet({r.passage: 1.0 for r in requests}), tmp_path / "c.sqlite").judge(requests)
    assert len(stored_rows(tmp_path / "c.sqlite")) == 3


def test_cache_file_is_in_wal_mode(tmp_path):
    JudgmentCache(tmp_path / "c.sqlite").close()
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_a_damaged_cache_is_named_with_the_command_to_move_it_aside(tmp_path):
    path = tmp_path / "judgments.sqlite"
    JudgmentCache(path).close()
    garbage = path.read_bytes()[:16] + b"\xff" * 84 + path.read_bytes()[100:]  # the header past SQLite's mark
    path.write_bytes(garbage)
    with pytest.raises(CorruptStoreError) as err:
        CachedJudge(scripted([]), path)
    message = str(err.value)
    assert message.startswith(f"{path}: judgment cache is damaged (file is not a database)")
    assert message.endswith(f"mv {path} {path}.corrupt")
    assert isinstance(err.value, ValueError)  # an expected error: the CLI prints it in one line
    assert path.read_bytes() == garbage  # nothing is overwritten or deleted


def test_a_damaged_page_met_at_lookup_is_named_too(tmp_path):
    path = tmp_path / "judgments.sqlite"
    requests = numbered_requests(400)
    with JudgmentCache(path) as cache:
        for r in requests:
            cache.store("b", "m", r, Judgment(score=1, weighted=1.0, probs=None, weighting="parsed", raw="x" * 200))
    data = bytearray(path.read_bytes())  # closing the last connection folded the WAL into the file
    data[3 * 4096:-4096] = b"\x5a" * (len(data) - 4 * 4096)
    path.write_bytes(bytes(data))
    cache = JudgmentCache(path)  # the schema page is intact: opening works
    with pytest.raises(CorruptStoreError, match="database disk image is malformed"):
        cache.lookup("b", "m", [request_key(r) for r in requests])
    cache.close()


def test_a_busy_database_is_not_reported_as_damaged(tmp_path):
    path = tmp_path / "judgments.sqlite"
    JudgmentCache(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        cache = JudgmentCache(path, busy_timeout_s=0.05)
        [request] = numbered_requests(1)
        with pytest.raises(sqlite3.OperationalError, match="locked") as err:
            cache.store("b", "m", request, Judgment(score=1, weighted=1.0, probs=None, weighting="parsed", raw="1"))
        assert not isinstance(err.value, CorruptStoreError)
        cache.close()
    finally:
        holder.execute("ROLLBACK")
        holder.close()



def test_a_store_that_failed_mid_write_rolls_back_and_takes_the_next_judgment(tmp_path):
    """A write that fails inside its transaction (a value SQLite cannot bind here; Ctrl-C in a notebook alike) is
    rolled back: left open, every later store of the process would fail ("cannot start a transaction within a
    transaction": judgments paid for and not kept) and every other process sharing the cache meet a locked file."""
    path = tmp_path / "judgments.sqlite"
    [request] = numbered_requests(1)
    cache = JudgmentCache(path, busy_timeout_s=0.2)
    unbindable = Judgment(score=1, weighted=1.0, probs=None, weighting="parsed", raw="1", prompt_tokens=object())
    with pytest.raises(sqlite3.ProgrammingError):
        cache.store("b", "m", request, unbindable)
    cache.store("b", "m", request, Judgment(score=1, weighted=1.0, probs=None, weighting="parsed", raw="1"))
    assert cache.lookup("b", "m", [request_key(request)])[request_key(request)].weighted == 1.0
    with closing(sqlite3.connect(path, timeout=0.2, isolation_level=None)) as other:
        other.execute("BEGIN IMMEDIATE")  # another process can write
        other.execute("ROLLBACK")
    cache.close()

def slow_valid(delay):
    def reply(body):
        r = scored_reply(2)
        r.delay_s = delay
        return r
    return reply


def worker(db, url, start, n, concurrency):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, str(WORKER), str(db), url, str(start), str(n), str(concurrency)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.processes
def test_run_killed_mid_way_resumes_without_paying_twice(tmp_path):
    n, concurrency, db = 40, 2, tmp_path / "c.sqlite"
    with FakeChatServer(responder=slow_valid(0.05)) as server:
        proc = worker(db, server.url, 0, n, concurrency)
        deadline = time.monotonic() + 60
        while server.count < 12 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert proc.returncode == -signal.SIGKILL
        calls_before = server.count
        stored = len(stored_rows(db))
        assert 0 < stored <= calls_before < n

        rerun = worker(db, server.url, 0, n, concurrency)
        out, err = rerun.communicate(timeout=120)
        assert rerun.returncode == 0, err
        stats = json.loads(out)
    assert stats["ok"] == n and stats["hits"] == stored and stats["judged"] == n - stored
    assert n <= server.count <= n + concurrency  # only requests in flight at the kill are paid twice
    frame = stored_rows(db)
    assert len(frame) == n and frame["error"].isna().all()


def _kit_table(tmp_path) -> str:
    """The SQL of the table a new cache holds (a file holding anything else is set aside on opening)."""
    JudgmentCache(tmp_path / "model.sqlite").close()
    with closing(sqlite3.connect(tmp_path / "model.sqlite")) as db:
        return db.execute("SELECT sql FROM sqlite_master").fetchone()[0]


@pytest.mark.parametrize("own_id", [None, 7], ids=["a new cache", "a cache that has its id"])
def test_opening_waits_for_another_process_writing_the_cache(tmp_path, own_id):
    """Switching a cache to WAL while another connection holds a write lock fails at once
    (SQLite calls no busy handler there; two processes opening a new cache together under
    load met it): opening waits for the lock as a write does. A file that already carries its id has no id
    transaction to wait in on opening: in rollback mode it waits all the same, not "database is locked"."""
    import threading

    db = tmp_path / "c.sqlite"
    writer = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    writer.execute(_kit_table(tmp_path))
    if own_id is not None:
        writer.execute(f"PRAGMA user_version = {own_id}")
    writer.execute("BEGIN IMMEDIATE")
    threading.Timer(0.3, writer.execute, ("COMMIT",)).start()
    start = time.monotonic()
    cache = JudgmentCache(db, busy_timeout_s=10)
    assert 0.25 <= time.monotonic() - start < 10
    with closing(sqlite3.connect(db)) as reader:
        assert reader.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        if own_id is not None:
            assert reader.execute("PRAGMA user_version").fetchone() == (own_id,)  # its id, kept
    cache.close()
    writer.close()


def test_a_cache_locked_for_longer_than_the_busy_timeout_is_named(tmp_path):
    db = tmp_path / "c.sqlite"
    writer = sqlite3.connect(db, isolation_level=None)
    writer.execute(_kit_table(tmp_path))
    writer.execute("BEGIN IMMEDIATE")
    with pytest.raises(UserError, match=f"cannot open the judgment cache {db}: database is locked"):
        JudgmentCache(db, busy_timeout_s=0.2)
    writer.close()


@pytest.mark.processes
def test_two_processes_share_one_cache(tmp_path):
    db = tmp_path / "c.sqlite"
    second_waits = threading.Event()

    def held_until_the_second_waits(body):  # the first judges until the second is known to wait for it
        second_waits.wait(timeout=60)
        return scored_reply(2)

    with FakeChatServer(responder=held_until_the_second_waits) as server:
        a = worker(db, server.url, 0, 60, 4)
        deadline = time.monotonic() + 60
        while server.count < 1 and time.monotonic() < deadline and a.poll() is None:
            time.sleep(0.01)  # the first one holds the cache: its first request is in
        b = worker(db, server.url, 30, 60, 4)
        said = b.stderr.readline()  # its first line, before it judges anything
        second_waits.set()
        out_b, err_b = b.communicate(timeout=120)
        results = [a.communicate(timeout=120), (out_b, said + err_b)]
    for p, (out, err) in zip((a, b), results):
        assert p.returncode == 0, err
        assert json.loads(out)["ok"] == 60
    frame = stored_rows(db)
    assert len(frame) == 90 and frame["error"].isna().all() and (frame["attempts"] == 1).all()
    assert server.count == 90  # the 30 both need are paid once (they were paid twice, up to 120 calls)
    assert sum("waiting for it to finish" in err for _, err in results) == 1  # the second one says why it waits


class _Records(logging.Handler):
    """Every record logged while it is attached (the suite runs without pytest's log capture)."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []

    def emit(self, record):
        self.texts.append(self.format(record))


@pytest.fixture
def logged():
    """The texts of every record any logger emits during the test, at every level (the root logger's and those of
    the loggers that do not pass their records on to it)."""
    root, handler = logging.getLogger(), _Records()
    loggers = [root] + [logger for logger in root.manager.loggerDict.values()
                        if isinstance(logger, logging.Logger) and not logger.propagate]
    level = root.level
    for logger in loggers:
        logger.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield handler.texts
    for logger in loggers:
        logger.removeHandler(handler)
    root.setLevel(level)


def test_api_key_appears_in_no_file_or_log(tmp_path, monkeypatch, logged):
    secret = "sk-never-write-me-8c1f2a"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    folder = tmp_path / "out"
    script = [Reply(429, '{"error": "rate limited"}', {"Retry-After": "0"}),
              Reply(401, f'{{"error": "bad key {secret}"}}')]
    with FakeChatServer(script) as server:
        backend = OpenAICompatibleJudge("fake-model", server.url, backoff_s=0.001, progress=False, concurrency=1)
        out = CachedJudge(backend, folder / "judgments.sqlite").judge(numbered_requests(3))
    assert all(h["Authorization"] == f"Bearer {secret}" for h, _ in server.received)  # the key was used
    [failed] = [j for j in out if not j.ok]
    assert failed.error.startswith("HTTP 401") and "bad key ***" in failed.error  # an echoed key is masked
    assert logged and not any(secret in text for text in logged)
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"judgments.sqlite"}
    for p in files:
        assert secret.encode() not in p.read_bytes(), p


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_a_lock_path_that_is_no_file_is_named_not_waited_on(tmp_path, kind):
    lock = tmp_path / "c.sqlite-lock"
    os.mkfifo(lock) if kind == "fifo" else lock.mkdir()
    judge = CachedJudge(BaselineJudge(), tmp_path / "c.sqlite")
    with raises_saying(UserError, str(lock), "the kit keeps the lock of the judgment cache's writers there"):
        judge.judge(numbered_requests(1))


def test_a_new_cache_in_a_group_folder_can_be_written_by_the_group(tmp_path):
    # SQLite made the file 0644 whatever the umask: in a shared folder (umask 002) another account of the group could
    # not store a judgment, and its -wal and -shm, made with the file's mode, then locked out the owner too
    old = os.umask(0o002)
    try:
        JudgmentCache(tmp_path / "c.sqlite").close()
    finally:
        os.umask(old)
    assert (tmp_path / "c.sqlite").stat().st_mode & 0o777 == 0o664


def test_a_cache_another_account_cannot_write_is_refused_when_opened_naming_the_file(tmp_path, monkeypatch):
    # another account's read-only -shm beside a group's cache let it open, judge (and pay) and then fail at the first
    # stored judgment with "database error: attempt to write a readonly database", naming no file
    db = tmp_path / "c.sqlite"
    JudgmentCache(db).close()
    shm = Path(f"{db}-shm")
    shm.write_bytes(b"")
    real_access = os.access

    def access(path, mode, **kwargs):  # readable, as another account's 0644 file is; not writable
        return not (str(path) == str(shm) and mode & os.W_OK) and real_access(path, mode, **kwargs)

    monkeypatch.setattr(os, "access", access)
    with raises_saying(UserError, "cannot open the judgment cache", str(db), str(shm), "cannot be written"):
        JudgmentCache(db)


def test_a_cache_named_through_a_symlink_is_refused_for_a_log_beside_the_file_it_leads_to_it_cannot_write(
        tmp_path, monkeypatch):
    # SQLite writes the -shm beside the file the link leads to: one this account cannot write there is refused when
    # opened, before anything is paid for, as it is for a cache named directly
    db = tmp_path / "shared" / "c.sqlite"
    db.parent.mkdir()
    JudgmentCache(db).close()
    shm = Path(f"{db}-shm")
    shm.write_bytes(b"")
    link = tmp_path / "mine" / "c.sqlite"
    link.parent.mkdir()
    link.symlink_to(db)
    real_access = os.access

    def access(path, mode, **kwargs):  # readable, as another account's 0644 file is; not writable
        return not (str(path) == str(shm) and mode & os.W_OK) and real_access(path, mode, **kwargs)

    monkeypatch.setattr(os, "access", access)
    with raises_saying(UserError, "cannot open the judgment cache", str(shm), "cannot be written"):
        JudgmentCache(link)


def test_a_cache_refused_for_its_log_another_account_cannot_share_is_not_created(tmp_path, monkeypatch):
    # refused before anything is made: no empty store is left beside the log that refused it
    db = tmp_path / "c.sqlite"
    wal = Path(f"{db}-wal")
    wal.write_bytes(b"")
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: str(path) != str(wal) and real_access(path, mode, **kw))
    with raises_saying(UserError, "cannot open the judgment cache", str(wal), "cannot be written"):
        JudgmentCache(db)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.sqlite-wal"]


def test_a_cache_file_that_cannot_be_created_is_refused_in_one_line_naming_it(tmp_path, monkeypatch):
    db = tmp_path / "c.sqlite"
    refuse_open(monkeypatch, db, os.O_CREAT)
    with raises_saying(UserError, f"cannot open the judgment cache {db}: Permission denied"):
        JudgmentCache(db)


def test_a_cache_whose_folder_cannot_be_made_is_refused_naming_the_cache_and_the_folder(tmp_path, monkeypatch):
    # INSTIR_HOME unset and $HOME not writable: `instir judge` said only "Permission denied: ~/.cache"
    home = tmp_path / "home"
    home.mkdir()
    real_mkdir = os.mkdir

    def mkdir(path, *args, **kwargs):  # a folder nothing can be made in: the missing one made there is named
        if Path(path).parent == home:
            raise PermissionError(13, "Permission denied", str(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)
    db = home / ".cache" / "instir" / "judgments.sqlite"
    with raises_saying(UserError, "cannot open the judgment cache", str(db), f"(Permission denied: {home / '.cache'})"):
        JudgmentCache(db)
