"""What the kit stamps into what it writes: the time (UTC, ISO 8601) and the digest of a JSON value
(cache keys, run names). One rule each, so two records never disagree on how a time or a key is made."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from typing import Any


def utc_now(timespec: str = "seconds") -> str:
    """The time now in UTC as ISO 8601 (``2026-12-05T21:11:04+00:00``), to ``timespec``."""
    return datetime.now(timezone.utc).isoformat(timespec=timespec)


def json_sha256(value: Any, *, ensure_ascii: bool = True) -> str:
    """SHA-256 of ``value`` as sorted-key JSON (a value JSON cannot hold written as its ``str``): the key of
    whatever ``value`` describes. ``ensure_ascii`` is part of the bytes hashed, so a store keeps its choice."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=ensure_ascii, default=str)
    return hashlib.sha256(text.encode()).hexdigest()
