"""POST with retries for the OpenAI-compatible HTTP clients (the judge's chat completions and
the embeddings backend): 408/409/429/5xx answers, timeouts and connection errors are retried
with exponential backoff and jitter, or after what a ``Retry-After`` header says (capped);
other 4xx answers fail at once. Server text kept in errors goes through ``scrub`` *before* it is
cut to :data:`ERROR_BODY_CHARS` (some servers echo the API key; cutting first could keep part of it)."""

from __future__ import annotations

import email.utils
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

log = logging.getLogger(__name__)

#: HTTP statuses worth retrying besides 5xx: request timeouts, conflicts and rate limits.
RETRY_STATUSES = frozenset({408, 409, 429})

#: Characters of a server's error body kept in an error message.
ERROR_BODY_CHARS = 300


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
        return min(self.max_backoff_s, self.backoff_s * 2 ** attempt) * random.uniform(0.5, 1.0)

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


def post_with_retries(client: httpx.Client, path: str, body: Any, *, policy: RetryPolicy,
                      headers: Callable[[], Mapping[str, str]] = dict, params: Mapping[str, str] | None = None,
                      scrub: Callable[[str], str] = str, what: str = "request") -> httpx.Response:
    """POST ``body`` as JSON to ``path``; the successful response, or :class:`RequestFailed`.
    ``headers`` is called per attempt (so a key is read from the environment when sent)."""
    attempt = 0
    while True:
        wait: float | None = None
        try:
            response = client.post(path, json=body, headers=dict(headers()), params=params or None)
        except httpx.TimeoutException as err:
            reason = f"timeout ({type(err).__name__})"
        except httpx.TransportError as err:
            reason = f"connection error ({type(err).__name__})"
        else:
            if response.is_success:
                return response
            reason = f"HTTP {response.status_code}: {scrub(response.text)[:ERROR_BODY_CHARS]}"
            if response.status_code not in RETRY_STATUSES and response.status_code < 500:
                raise RequestFailed(reason)
            wait = policy.retry_after(response)
        if attempt == policy.max_retries:
            raise RequestFailed(f"gave up after {attempt + 1} attempts; last: {reason}")
        wait = policy.backoff(attempt) if wait is None else wait
        attempt += 1
        # INFO, not WARNING: an outage would print one line per retry of every request into a report
        log.info("%s failed (%s); retry %d/%d in %.2f s", what, reason.split(":")[0], attempt,
                 policy.max_retries, wait)
        time.sleep(wait)


def unreachable(base_url: str, timeout_s: float = 5.0) -> str | None:
    """Why nothing answers at ``base_url``'s host and port within ``timeout_s`` (a TCP connect,
    no request sent), or None when something does: checked before a long run starts, so a dead
    endpoint fails in seconds instead of after every retry of every request."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{base_url!r} is not an http(s) URL"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout_s):
            return None
    except OSError as err:
        return f"nothing answers at {parts.hostname}:{port} ({err.strerror or type(err).__name__})"
