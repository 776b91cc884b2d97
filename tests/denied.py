"""Permission refusals made in-process, as another account's files give them: root, which runs this suite in CI
here, ignores file permissions, so a test asks ``os.open`` to refuse instead."""

from __future__ import annotations

import os


def refuse_open(monkeypatch, path, flags: int = 0) -> None:
    """Make ``os.open`` of ``path`` raise ``PermissionError``: every open, or only those asking one of ``flags``
    (``os.O_CREAT``: a file that cannot be made; ``os.O_RDWR | os.O_WRONLY``: one opened for writing)."""
    real_open = os.open

    def open_(name, mode, *args, **kwargs):
        if str(name) == str(path) and (not flags or mode & flags):
            raise PermissionError(13, "Permission denied", str(name))
        return real_open(name, mode, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)
