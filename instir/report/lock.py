"""One ``instir run`` at a time per report folder: a lock file (``.instir-run.lock``) held with
``flock`` for the whole run, holding who took it (pid, host, start time), so a second run into
the same folder is refused with a line naming the holder, and the index can tell a report that
is still running from one whose run was interrupted (the lock is released when the process
ends, however it ends)."""

from __future__ import annotations

import fcntl
import json
import os
import socket
from datetime import datetime, timezone
from pathlib import Path

from instir.errors import UsageError

LOCK_FILE = ".instir-run.lock"


class RunLock:
    """The lock of ``folder`` as a context manager: entering takes it or raises
    :class:`instir.errors.UsageError` naming the run that holds it."""

    def __init__(self, folder: str | Path):
        self.path = Path(folder) / LOCK_FILE
        self._fd: int | None = None

    def __enter__(self) -> "RunLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = holder_of(self.path.parent) or {}
            raise UsageError(f"another instir run (pid {holder.get('pid', '?')} on {holder.get('host', '?')}, started "
                             f"{holder.get('started', '?')}) is writing into {self.path.parent}: wait for it to "
                             "finish, or give another --out") from None
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                 "started": datetime.now(timezone.utc).isoformat(timespec="seconds")}).encode())
        self._fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def holder_of(folder: str | Path) -> dict | None:
    """Who holds the lock of ``folder`` (pid, host, started), or None when no run holds it."""
    path = Path(folder) / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                return json.loads(path.read_text(encoding="utf-8") or "{}")
            except (OSError, json.JSONDecodeError):
                return {}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
