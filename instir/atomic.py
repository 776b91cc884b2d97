"""Atomic file writes: the content goes to a temporary file in the same folder, is flushed to
disk, then renamed over the target, so a crash leaves either the old file or the new one —
never a half-written file that looks complete (runs, embedding chunks, manifests)."""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path

import numpy as np


def write_bytes(path: str | Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` atomically."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: str | Path, text: str) -> None:
    """Replace ``path`` with UTF-8 ``text`` atomically."""
    write_bytes(path, text.encode("utf-8"))


def save_array(path: str | Path, array: np.ndarray) -> None:
    """Write ``array`` as a ``.npy`` file atomically."""
    buffer = io.BytesIO()
    np.save(buffer, array)
    write_bytes(path, buffer.getvalue())
