"""Test helpers for the judge tests: a real OpenAI-style HTTP server on 127.0.0.1 whose
replies follow a script, chat-completion and embeddings bodies, and request builders. No pytest
imports: ``perf/`` scripts use the server too."""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd

from instir.judge.rubrics import rubric_for
from instir.judge.types import JudgeRequest

#: placeholder in a :class:`Reply` body for the request's Authorization header
ECHO_AUTH = "%AUTHORIZATION%"
#: placeholder in a :class:`Reply` body for the model the request asked for (as a server answers)
ECHO_MODEL = "%MODEL%"


@dataclass
class Reply:
    """One scripted HTTP answer. :data:`ECHO_AUTH` anywhere in the body is replaced by the
    request's ``Authorization`` header, as a server that echoes credentials would do, and
    :data:`ECHO_MODEL` by the model the request asked for."""

    status: int = 200
    body: str | dict = ""
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


def chat_body(content: str, tokens: list[tuple[str, dict[str, float]]] | None = None,
              usage: tuple[int, int] = (100, 10), model: str = ECHO_MODEL) -> dict:
    """An OpenAI chat-completion body. ``tokens`` = [(token, {alternative: probability})] whose
    texts concatenate to ``content``; each token's own logprob is taken from its alternatives.
    ``model``: the model the server says answered (default: the one asked for)."""
    logprobs = None
    if tokens is not None:
        logprobs = {"content": [
            {"token": tok, "logprob": math.log(alts.get(tok, 1.0)),
             "top_logprobs": [{"token": t, "logprob": math.log(p)} for t, p in alts.items()]}
            for tok, alts in tokens]}
    return {"id": "x", "object": "chat.completion", "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "logprobs": logprobs, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}}


def scored_reply(score: int, p_score: float = 0.7) -> Reply:
    """A valid answer ``{"score": s, ...}`` whose score token puts ``p_score`` on ``s`` and the
    rest on its neighbour digit."""
    other = str(score - 1 if score > 0 else score + 1)
    tokens = [('{"', {}), ("score", {}), ('":', {}), (" ", {}),
              (str(score), {str(score): p_score, other: 1 - p_score}), (', "reason": "ok"}', {})]
    return Reply(body=chat_body("".join(t for t, _ in tokens), tokens))


#: length of :func:`fake_vector`'s vectors
DIM = 8


def fake_vector(text: str) -> list[float]:
    """A deterministic vector per exact text (what the fake /v1/embeddings returns)."""
    digest = hashlib.sha256(text.encode()).digest()
    return [(b - 127.5) / 64 for b in digest[:DIM]]


def embeddings_reply(body: dict) -> Reply:
    """A /v1/embeddings answer of :func:`fake_vector` for each input, listed in reverse order (the
    index field orders them)."""
    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
    data = [{"object": "embedding", "index": i, "embedding": fake_vector(t)} for i, t in enumerate(texts)]
    return Reply(body={"object": "list", "data": list(reversed(data)), "model": body["model"]})


class FakeChatServer:
    """An OpenAI-compatible ``/v1/chat/completions`` endpoint on loopback, in a thread.

    Replies come from ``script`` in order, then from ``responder(request_body)`` (default: a
    valid answer scoring 1). Every request's headers and JSON body are recorded in ``received``;
    ``max_in_flight`` is the most requests handled at once.
    """

    def __init__(self, script: list[Reply] | None = None,
                 responder: Callable[[dict], Reply] | None = None):
        self.script = list(script or [])
        self.responder = responder or (lambda body: scored_reply(1))
        self.received: list[tuple[dict[str, str], dict]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.paths: list[str] = []  # each request's path and query, as received
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server naming)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                with server._lock:
                    server.received.append((dict(self.headers), body))
                    server.paths.append(self.path)
                    reply = server.script.pop(0) if server.script else None
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                reply = reply or server.responder(body)
                time.sleep(reply.delay_s)
                with server._lock:
                    server.in_flight -= 1
                payload = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
                payload = payload.replace(ECHO_AUTH, self.headers.get("Authorization", ""))
                payload = payload.replace(ECHO_MODEL, json.dumps(str(body.get("model", "")))[1:-1])
                try:
                    self.send_response(reply.status)
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload.encode())))
                    self.end_headers()
                    self.wfile.write(payload.encode())
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and hung up

            def log_message(self, *args):
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass

        self._httpd = Server(("127.0.0.1", 0), Handler)
        # serve_forever polls for shutdown every 0.5 s by default: every test would wait that long on exit
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01},
                                        daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def count(self) -> int:
        with self._lock:
            return len(self.received)

    def __enter__(self) -> "FakeChatServer":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def numbered_requests(n: int, start: int = 0, subset: str = "fiqa", level: int | None = 3) -> list[JudgeRequest]:
    """``n`` distinct requests ``passage number start..start+n-1`` on one rubric."""
    rubric = rubric_for(subset, level)
    return [JudgeRequest("how should I save for retirement?", "I am 30 and have student debt.",
                           f"passage number {i}", rubric) for i in range(start, start + n)]


def stored_rows(cache: str | Path) -> pd.DataFrame:
    """Every row of the judgment cache file ``cache``, oldest first (``probs`` as JSON text)."""
    with contextlib.closing(sqlite3.connect(cache)) as db:
        return pd.read_sql_query("SELECT * FROM judgments ORDER BY created_at", db)


def flaky_baseline(monkeypatch) -> list[JudgeRequest]:
    """Make the baseline backend fail every fourth request it has not been sent before (as a flaky server answers
    without JSON now and then), so a rerun judges what failed; returns every request sent, in order."""
    from instir.judge import BaselineJudge
    from instir.judge.types import Judgment

    sent: list[JudgeRequest] = []
    original = BaselineJudge.judge

    def flaky(self, requests, on_result=None):
        out = []
        for i, (request, judgment) in enumerate(zip(requests, original(self, requests))):
            if request not in sent and len(sent) % 4 == 0:
                judgment = Judgment.failure("malformed answer: no JSON", raw="no idea")
            sent.append(request)
            out.append(judgment)
            if on_result is not None:
                on_result(i, judgment)
        return out

    monkeypatch.setattr(BaselineJudge, "judge", flaky)
    return sent
