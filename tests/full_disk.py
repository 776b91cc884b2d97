"""Full disks for the tests, without root.

- :func:`run_on_full_disk`: a real small tmpfs, mounted in a private mount namespace
  (``unshare -rm``, where the kernel lets a user make one; the test is skipped elsewhere), and a
  Python script run there that fills it and reports what it saw. This is the disk a user has:
  a memory-mapped write gets ``SIGBUS``, a plain one ``ENOSPC``, SQLite ``database or disk is
  full``.
- :class:`SimulatedDisk`: in process, everywhere. ``os.write`` and ``os.posix_fallocate`` on
  the files it watches fail with ``ENOSPC`` (no file name, as the kernel's) once ``free`` bytes
  went to them. The kit's writers (:mod:`instir.atomic`) write through ``os.write``.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: what every script run on a full disk starts with
PRELUDE = '''
import json, os, sys
from pathlib import Path
DISK = Path(os.environ["FULL_DISK"])

def fill(free):
    """Leave about ``free`` bytes on DISK (tmpfs counts 4 KiB pages)."""
    st = os.statvfs(DISK)
    with open(DISK / ".filler", "ab") as fh:
        fh.write(b"\\0" * max(0, st.f_bavail * st.f_frsize - free))

def unfill():
    (DISK / ".filler").unlink(missing_ok=True)

def listing(folder=None):
    folder = Path(folder or DISK)
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.name != ".filler")

def report(**values):
    print("RESULT " + json.dumps(values, default=str), flush=True)
'''


@functools.cache
def tmpfs_unavailable() -> str | None:
    """Why no tmpfs can be mounted here without root (None when one can)."""
    unshare = shutil.which("unshare")
    if unshare is None or not sys.platform.startswith("linux"):
        return "needs Linux and unshare(1)"
    with tempfile.TemporaryDirectory() as probe:
        try:
            done = subprocess.run([unshare, "-rm", "sh", "-c", f"mount -t tmpfs -o size=64k tmpfs {probe}"],
                                  capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.TimeoutExpired) as err:
            return f"unshare failed: {err}"
    if done.returncode != 0:
        return f"cannot mount a tmpfs in a user namespace: {done.stderr.strip()[:200]}"
    return None


def run_on_full_disk(tmp_path: Path, script: str, *, size_kib: int, timeout: float = 120) -> tuple[dict, str]:
    """Run ``script`` (after :data:`PRELUDE`) with a fresh ``size_kib`` tmpfs at ``DISK``
    (``tmp_path/disk``, mounted only for the script); returns what it passed to ``report()``
    and its whole output. Skips the test where no tmpfs can be mounted."""
    reason = tmpfs_unavailable()
    if reason:
        pytest.skip(reason)
    disk = tmp_path / "disk"
    disk.mkdir()
    path = tmp_path / "on_full_disk.py"
    path.write_text(PRELUDE + textwrap.dedent(script), encoding="utf-8")
    env = {**os.environ, "FULL_DISK": str(disk), "PYTHONPATH": os.pathsep.join(
        [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]), "INSTIR_PROGRESS": "0"}
    command = f'mount -t tmpfs -o size={size_kib}k tmpfs "$FULL_DISK" && exec "$0" "$1"'
    done = subprocess.run([shutil.which("unshare"), "-rm", "sh", "-c", command, sys.executable, str(path)],
                          capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp_path)
    output = done.stdout + done.stderr
    results = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and results, f"rc {done.returncode}:\n{output[-4000:]}"
    return json.loads(results[-1].removeprefix("RESULT ")), output


class SimulatedDisk:
    """A disk with ``free`` bytes left for the files ``watch`` accepts (their path); every other
    file writes as usual. Writes past the space fail as the kernel's do: a short write, then
    ``OSError(ENOSPC)`` naming no file."""

    def __init__(self, monkeypatch, watch: Callable[[Path], bool], free: int = 0, code: int = errno.ENOSPC):
        if not Path("/proc/self/fd").is_dir():
            pytest.skip("needs /proc/self/fd to tell which file a descriptor writes")
        self.watch, self.free, self.code = watch, free, code
        self.refused: list[Path] = []
        self._write, self._fallocate = os.write, getattr(os, "posix_fallocate", None)
        monkeypatch.setattr(os, "write", self.write)
        if self._fallocate is not None:
            monkeypatch.setattr(os, "posix_fallocate", self.fallocate)

    @classmethod
    def under(cls, monkeypatch, folder: Path, free: int = 0, code: int = errno.ENOSPC) -> "SimulatedDisk":
        """The disk holding ``folder``: every file under it is watched."""
        folder = Path(folder).resolve()
        return cls(monkeypatch, lambda path: path.is_relative_to(folder), free, code)

    def _watched(self, fd: int) -> Path | None:
        try:
            path = Path(os.readlink(f"/proc/self/fd/{fd}").removesuffix(" (deleted)"))
        except OSError:
            return None
        return path if self.watch(path) else None

    def _refuse(self, path: Path):
        self.refused.append(path)
        return OSError(self.code, os.strerror(self.code))

    def write(self, fd: int, data) -> int:
        path = self._watched(fd)
        if path is None:
            return self._write(fd, data)
        if self.free <= 0:
            raise self._refuse(path)
        written = self._write(fd, memoryview(data)[:self.free])
        self.free -= written
        return written

    def fallocate(self, fd: int, offset: int, length: int) -> None:
        path = self._watched(fd)
        if path is not None and offset + length - os.fstat(fd).st_size > self.free:
            raise self._refuse(path)
        self._fallocate(fd, offset, length)
