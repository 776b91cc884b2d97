"""Assertions on what a message tells the user rather than on its wording: the names in it (the
file, the line, the field, the bad value, the suggestion), in the order the user reads them, on one
line. A reworded message passes; a message that drops a name fails."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest


def says(message: str, *parts: str) -> str:
    """Assert that ``message`` is one line holding each of ``parts`` in order; return it."""
    assert "\n" not in message.strip(), f"not one line: {message!r}"
    position = 0
    for part in parts:
        found = message.find(part, position)
        assert found >= 0, f"{part!r} not in {message[position:]!r}"
        position = found + len(part)
    return message


@contextlib.contextmanager
def raises_saying(kind: type[BaseException], *parts: str) -> Iterator[pytest.ExceptionInfo]:
    """``pytest.raises(kind)`` whose error :func:`says` each of ``parts``."""
    with pytest.raises(kind) as info:
        yield info
    says(str(info.value.args[0]) if info.value.args else str(info.value), *parts)


@contextlib.contextmanager
def warns_saying(kind: type[Warning], *parts: str) -> Iterator[pytest.WarningsRecorder]:
    """``pytest.warns(kind)`` of which one warning :func:`says` each of ``parts``."""
    with pytest.warns(kind) as record:
        yield record
    messages = [str(w.message) for w in record if issubclass(w.category, kind)]
    for message in messages:
        with contextlib.suppress(AssertionError):
            says(message, *parts)
            return
    raise AssertionError(f"no {kind.__name__} names {parts}: {messages}")
