"""Atomic file writes: the content goes to a temporary file in the same folder, is flushed to
disk, then renamed over the target, so a crash leaves either the old file or the new one —
never a half-written file that looks complete (runs, embedding chunks, manifests).

The files get the mode a plain ``open(path, "w")`` would give them (``0o666`` less the
process umask: ``0644`` under the usual ``022``), not the ``0600`` of a bare
:func:`tempfile.mkstemp`, so a team can share a reports folder or an embedding cache.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np


def _umask() -> int:
    """The process umask, read without changing it where Linux reports it; elsewhere by
    setting and restoring it (the only portable way)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode a newly created file gets from ``open``: ``0o666`` less the umask."""
    return 0o666 & ~_umask()


@contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """A temporary path beside ``path`` (mode from :func:`file_mode`) for the caller to
    write; on a clean exit it is renamed over ``path``, on any error (or interrupt) it is
    removed. For writers that need a file name (e.g. a memory-mapped ``.npy``); the caller
    flushes its data before leaving the block."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.close(fd)
        os.chmod(tmp, file_mode())
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_bytes(path: str | Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically."""
    with replacing(path) as tmp, open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def write_text(path: str | Path, text: str) -> None:
    """Replace ``path`` with UTF-8 ``text`` atomically."""
    write_bytes(path, text.encode("utf-8"))


def save_array(path: str | Path, array: np.ndarray) -> None:
    """Write ``array`` as a ``.npy`` file atomically."""
    buffer = io.BytesIO()
    np.save(buffer, array)
    write_bytes(path, buffer.getvalue())


def file_sha256(path: str | Path) -> str:
    """SHA-256 of a file's bytes, read in 4 MB blocks (checksums of downloads, caches, runs)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(1 << 22):
            h.update(block)
    return h.hexdigest()


def write_frame(path: str | Path, frame) -> None:
    """Write a pandas DataFrame atomically, as CSV or Parquet by the file's suffix, without its
    index (the tables stages hand each other)."""
    path = Path(path)
    if path.suffix == ".csv":
        write_text(path, frame.to_csv(index=False))
    elif path.suffix == ".parquet":
        buffer = io.BytesIO()
        frame.to_parquet(buffer, index=False)
        write_bytes(path, buffer.getvalue())
    else:
        raise ValueError(f"{path}: write_frame writes .csv or .parquet files")
