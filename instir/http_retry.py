"""POST with retries for the OpenAI-compatible HTTP clients (the judge's chat completions and
the embeddings backend): 408/409/429/5xx answers, timeouts and connection errors are retried
with exponential backoff and jitter, or after what a ``Retry-After`` header says (capped);
other 4xx answers fail at once, and a redirect is never followed (it would carry the key to
another host) but named by its ``Location``. Server text kept in errors goes through ``scrub``
*before* it is cut to :data:`ERROR_BODY_CHARS` (some servers echo the API key; cutting first
could keep part of it).

Every attempt is bounded by wall clock and by size, whatever the server does: ``deadline_s``
covers connect, headers and body together (a server that trickles one byte at a time passes
every per-read timeout), enforced by shutting the attempt's socket down when the time is up
(:class:`_Deadline`, over httpx's ``trace`` extension; :meth:`Endpoint.client` opens a new connection
per request so every attempt's socket is seen); the body is streamed and cut at ``max_bytes``, so a
flood costs at most that much memory per request in flight."""

from __future__ import annotations

import email.utils
import logging
import math
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from instir.errors import UsageError
from instir.parameters import MAX_SECONDS, MIN_PER_MINUTE, count_within, positive_number
from instir.secrets import mask_secret, refuse_url_credentials, require_env_name

log = logging.getLogger(__name__)

#: HTTP statuses worth retrying besides 5xx: request timeouts, conflicts and rate limits.
RETRY_STATUSES = frozenset({408, 409, 429})

#: Characters of a server's error body kept in an error message.
ERROR_BODY_CHARS = 300

#: Bytes of a successful answer read at most (:meth:`Endpoint.post`'s default ``max_bytes``).
MAX_ANSWER_BYTES = 64 << 20

#: Bytes of an error answer read (enough for any message worth keeping; the rest is not read).
MAX_ERROR_BYTES = 64 << 10

#: Requests a client runs at once at most: each is a thread and a connection to a (paid) API.
MAX_CONCURRENCY = 64

#: Requests that gave up on connection errors since the last one answered, after which an :class:`Endpoint` sends a
#: request only when a TCP connect to its host answers (a server that died mid-run fails the rest at once, not after
#: every retry).
DOWN_AFTER = 3


def check_concurrency(value: object, what: str = "concurrency") -> int:
    """``value`` as a count of requests in flight, refused in one line when it is no whole number
    in 1..:data:`MAX_CONCURRENCY` (a typo of 10,000 would start that many threads against a paid API)."""
    return count_within(value, 1, MAX_CONCURRENCY, what)


class _Deadline:
    """Shuts down the sockets one attempt opens once ``seconds`` have passed since it began:
    a blocked read then returns at once and httpx raises, which the attempt reports as a
    deadline. Sockets are learnt from httpx's ``trace`` extension (:meth:`trace`)."""

    def __init__(self, seconds: float):
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def trace(self, event: str, info: dict) -> None:
        """httpx's trace callback: keep the socket of each connection the attempt opens."""
        if event not in ("connection.connect_tcp.complete", "connection.start_tls.complete"):
            return
        stream = info.get("return_value")
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is None:
            return
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)

    def cancel(self) -> None:
        """Stop the timer (the attempt ended in time)."""
        self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


class _TooLarge(Exception):
    """An answer longer than the bytes allowed."""


def _read_capped(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """The streamed body of ``response`` up to ``max_bytes`` (decoded) bytes, and whether it was
    longer; reading stops at the first chunk past the cap (the rest is never read)."""
    chunks, size = [], 0
    for chunk in response.iter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            return b"".join(chunks)[:max_bytes], True
    return b"".join(chunks), False


def _answer(response: httpx.Response, max_bytes: int) -> httpx.Response:
    """A read copy of streamed ``response`` holding its body (an error answer cut to
    :data:`MAX_ERROR_BYTES`), with the headers that described the transfer dropped; raises
    :class:`_TooLarge` for a successful answer longer than ``max_bytes``."""
    content, longer = _read_capped(response, max_bytes if response.is_success else MAX_ERROR_BYTES)
    if longer and response.is_success:
        raise _TooLarge
    headers = [(k, v) for k, v in response.headers.items()
               if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")]
    return httpx.Response(response.status_code, headers=headers, content=content, request=response.request)


class RequestFailed(Exception):
    """A request that failed for good (non-retryable status, or retries exhausted)."""


@dataclass(frozen=True)
class RetryPolicy:
    """At most ``max_retries`` retries; waits ``backoff_s`` doubling per attempt, capped at
    ``max_backoff_s`` (a ``Retry-After`` wait is capped likewise)."""

    max_retries: int = 6
    backoff_s: float = 1.0
    max_backoff_s: float = 60.0

    def backoff(self, attempt: int) -> float:
        """The jittered wait before retry number ``attempt + 1``."""
        return min(self.max_backoff_s, self.backoff_s * 2.0 ** min(attempt, 64)) * random.uniform(0.5, 1.0)

    def retry_after(self, response: httpx.Response) -> float | None:
        """Seconds a ``Retry-After`` header asks for (delta or HTTP date), capped; None if absent."""
        value = response.headers.get("retry-after")
        if not value:
            return None
        try:
            seconds = float(value)
        except ValueError:
            try:
                when = email.utils.parsedate_to_datetime(value)
            except (TypeError, ValueError):
                return None
            seconds = when.timestamp() - time.time()
        return min(self.max_backoff_s, max(0.0, seconds))


class Pace:
    """At most ``per_minute`` requests started in any minute, spread evenly (None: no limit): each request takes the
    next free start, 60 / ``per_minute`` seconds after the one before, and waits for it. Shared by every thread of a
    client, and by every attempt (a retry is a request the provider counts), so a provider's rate limit holds
    whatever the concurrency and however many requests one call brings."""

    def __init__(self, per_minute: float | None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self.interval = 0.0 if per_minute is None else 60.0 / positive_number(
            per_minute, where="requests_per_minute", at_least=MIN_PER_MINUTE)  # one a day: a wait a clock holds
        self.clock, self.sleep = clock, sleep
        self._next, self._lock = -math.inf, threading.Lock()

    def wait(self) -> None:
        """Block until this request's start comes."""
        if not self.interval:
            return
        with self._lock:
            now = self.clock()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            self.sleep(start - now)


class Endpoint:
    """An OpenAI-compatible server as the kit's clients (the judge, the embeddings backend) call it, under one set of
    rules: ``base_url`` holds no credentials (refused); the key is read at request time from the environment
    variable *named* ``api_key_env`` (checked to be a name, never a key: :func:`~instir.secrets.require_env_name`)
    and sent only in ``auth_header`` (``Authorization: Bearer <key>``; the key alone in another header, as Azure's
    ``api-key``); ``query_params`` go with every request (Azure's ``api-version``); every attempt ends within
    ``timeout_s`` seconds and starts at most ``requests_per_minute`` a minute (:class:`Pace`); and a server's text is
    masked of the key (:meth:`scrub`) before the kit keeps or shows it."""

    def __init__(self, base_url: str, *, api_key_env: str = "OPENAI_API_KEY", auth_header: str = "Authorization",
                 query_params: Mapping[str, str] | None = None, timeout_s: float = 60.0,
                 requests_per_minute: float | None = None):
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not 0 < timeout_s <= MAX_SECONDS:
            # past a day, the socket's wait overflows: every attempt failed with "timestamp out of range"
            raise UsageError(f"timeout must be a positive number of seconds, at most {MAX_SECONDS:,} (a day), got "
                             f"{timeout_s!r}")
        refuse_url_credentials(base_url, "base_url")
        self.base_url = base_url.rstrip("/")
        self.api_key_env = require_env_name(api_key_env, "api_key_env")
        self.auth_header, self.query_params, self.timeout_s = auth_header, dict(query_params or {}), timeout_s
        self.pace = Pace(requests_per_minute)
        self._lock, self._refused_in_row = threading.Lock(), 0

    def __repr__(self) -> str:
        return f"Endpoint(base_url={self.base_url!r}, api_key_env={self.api_key_env!r})"

    def headers(self) -> dict[str, str]:
        """The key's header, read from the environment now (none when the variable is unset or empty)."""
        key = os.environ.get(self.api_key_env, "")
        if not key:
            return {}
        return {self.auth_header: f"Bearer {key}" if self.auth_header.lower() == "authorization" else key}

    def scrub(self, text: str | None) -> str | None:
        """``text`` with the key masked (some servers echo it, and so may a model)."""
        return mask_secret(text, os.environ.get(self.api_key_env, ""))

    def client(self) -> httpx.Client:
        """An HTTP client for :meth:`post` to this server: ``timeout_s`` per connect and read, no
        redirects followed, and no connection kept alive between requests (a reused connection is
        opened before its request's deadline starts, so it could not be cut when time is up)."""
        return httpx.Client(base_url=self.base_url, timeout=self.timeout_s, follow_redirects=False,
                            limits=httpx.Limits(max_keepalive_connections=0))

    def post(self, http: httpx.Client, path: str, body: Any, *, policy: RetryPolicy, what: str,
             max_bytes: int = MAX_ANSWER_BYTES) -> httpx.Response:
        """POST ``body`` as JSON to ``path`` through ``http`` (a :meth:`client`) with this server's key (read
        per attempt: :meth:`headers`), query parameters, pace and masking (:meth:`scrub`); the successful response
        (its body read), or :class:`RequestFailed`. Each attempt ends within ``timeout_s`` seconds and reads at
        most ``max_bytes`` of an answer; a longer answer fails at once (it is not retried). After :data:`DOWN_AFTER`
        requests gave up on connection errors since the last success, a request is sent only if the host takes a
        TCP connect (:func:`unreachable`: always, through a proxy); else it fails at once, unsent (a rerun resumes
        what failed)."""
        if self._refused_in_row >= DOWN_AFTER:
            why = unreachable(self.base_url, min(self.timeout_s, 5.0))
            if why:
                raise RequestFailed(f"connection error: not sent, {why} ({self._refused_in_row} requests failed to "
                                    "connect since the last answer)")
        attempt = 0
        while True:
            wait: float | None = None
            self.pace.wait()
            deadline = _Deadline(self.timeout_s)
            try:
                with http.stream("POST", path, json=body, headers={"Accept-Encoding": "identity", **self.headers()},
                                 params=self.query_params or None, extensions={"trace": deadline.trace}) as streamed:
                    response = _answer(streamed, max_bytes)
            except _TooLarge:
                raise RequestFailed(f"the answer is larger than {max_bytes} bytes (cut there, the rest not read)") \
                    from None
            except (httpx.TimeoutException, httpx.TransportError) as err:
                if deadline.expired:
                    reason = f"timeout: no complete answer within {self.timeout_s:g} s (the deadline of an attempt)"
                elif isinstance(err, httpx.TimeoutException):
                    reason = f"timeout ({type(err).__name__})"
                else:
                    reason = f"connection error ({type(err).__name__})"
            else:
                if response.is_success:
                    with self._lock:
                        self._refused_in_row = 0
                    return response
                reason = f"HTTP {response.status_code}: {self.scrub(response.text)[:ERROR_BODY_CHARS]}"
                if response.is_redirect:
                    location = self.scrub(response.headers.get("location", "(no Location header)"))[:ERROR_BODY_CHARS]
                    raise RequestFailed(f"HTTP {response.status_code} redirect to {location} (not followed, so the "
                                        "key is never sent on: give that URL as the base URL if you trust it)")
                if response.status_code not in RETRY_STATUSES and response.status_code < 500:
                    raise RequestFailed(reason)
                wait = policy.retry_after(response)
            finally:
                deadline.cancel()
            if attempt == policy.max_retries:
                if reason.startswith("connection error"):
                    with self._lock:
                        self._refused_in_row += 1
                raise RequestFailed(f"gave up after {attempt + 1} attempts; last: {reason}")
            wait = policy.backoff(attempt) if wait is None else wait
            attempt += 1
            # INFO, not WARNING: an outage would print one line per retry of every request into a report
            log.info("%s failed (%s); retry %d/%d in %.2f s", what, reason.split(":")[0], attempt,
                     policy.max_retries, wait)
            time.sleep(wait)


def through_proxy(base_url: str) -> bool:
    """Whether requests to ``base_url`` go through a proxy the environment names (``HTTP_PROXY``, ``HTTPS_PROXY``,
    ``ALL_PROXY``, less ``NO_PROXY``), as httpx sends them: a TCP connect to its host then says nothing."""
    from urllib.parse import urlsplit
    from urllib.request import getproxies, proxy_bypass

    try:
        parts = urlsplit(base_url)
        host = parts.hostname or ""
    except ValueError:  # no URL: nothing to send through a proxy
        return False
    proxies = getproxies()
    return bool(proxies.get(parts.scheme) or proxies.get("all")) and not proxy_bypass(host)


def unreachable(base_url: str, timeout_s: float = 5.0) -> str | None:
    """Why nothing answers at ``base_url``'s host and port within ``timeout_s`` (a TCP connect,
    no request sent), or None when something does: checked before a long run starts, so a dead
    endpoint fails in seconds instead of after every retry of every request. None too for a URL reached through a
    proxy (:func:`through_proxy`): only the proxy knows whether its host answers."""
    if through_proxy(base_url):
        return None
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(base_url)
    except ValueError as err:  # "http://[::1": no URL to connect to
        return f"{base_url!r} is not a URL ({err})"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{base_url!r} is not an http(s) URL"
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:  # a port that is no number in 0..65535: no connection to try
        return f"{base_url!r} has no valid port"
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout_s):
            return None
    except OSError as err:
        return f"nothing answers at {parts.hostname}:{port} ({err.strerror or type(err).__name__})"
    except UnicodeError:  # a host name no DNS query can hold ("a..b", a label past 63 characters)
        return f"{base_url!r} has no valid host name"
