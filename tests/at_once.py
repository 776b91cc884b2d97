"""Two builders of one cache entry at once, made to meet: the first is held inside its costly step until the
second has either said that it waits for the first or reached the step itself (the work done twice)."""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import Any

#: the words of the verified store's warning to a builder that waits for another
WAITS = "another process is building"


def two_builders(monkeypatch, owner: Any, step: str, build: Callable[[], Any], *,
                 counts: Callable[..., bool] = lambda *args: True, timeout: float = 60.0) -> tuple[Any, Any, list[str]]:
    """``build()`` in two threads, the first held inside ``owner.step`` (the calls ``counts`` picks) until the second
    warns that it waits or calls that step too; the first's result, the second's and the waiting warnings said."""
    inside, met, release = threading.Event(), threading.Event(), threading.Event()
    real, warn, calls, said = getattr(owner, step), warnings.warn, [], []

    def held(*args, **kwargs):
        if counts(*args):
            calls.append(1)
            if len(calls) == 1:
                inside.set()
                assert release.wait(timeout)
            else:
                met.set()  # a second build: the work done twice
        return real(*args, **kwargs)

    def noted(message, *args, **kwargs):
        if WAITS in str(message):
            said.append(str(message))
            met.set()
        return warn(message, *args, **kwargs)

    monkeypatch.setattr(owner, step, held)
    monkeypatch.setattr(warnings, "warn", noted)
    got: dict[str, Any] = {}
    threads = {name: threading.Thread(target=lambda name=name: got.__setitem__(name, build()))
               for name in ("first", "second")}
    threads["first"].start()
    try:
        assert inside.wait(timeout)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            threads["second"].start()
            assert met.wait(timeout)
            release.set()
            threads["second"].join(timeout)
    finally:
        release.set()
        threads["first"].join(timeout)
    return got["first"], got["second"], said
