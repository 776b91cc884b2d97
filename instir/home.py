"""The instir cache root, on the ground floor: every cache (corpus indexes, BM25 indexes,
embeddings, judgments, rerank scores, dequantised models, fetched benchmarks) lives under it,
and deleting it is always safe (each cache is rebuilt on demand)."""

from __future__ import annotations

import os
from pathlib import Path

from instir.errors import UsageError

#: Environment variable naming the cache root.
HOME_VAR = "INSTIR_HOME"


def instir_home() -> Path:
    """The instir cache folder: ``$INSTIR_HOME``, default ``~/.cache/instir`` (a :class:`UsageError` when it is
    there and no folder: every cache would fail under it, late and one by one)."""
    home = Path(os.environ.get(HOME_VAR) or "~/.cache/instir").expanduser()
    if home.exists() and not home.is_dir():
        raise UsageError(f"${HOME_VAR}: {home} is not a folder (the root of instir's caches: name a folder, or "
                         "leave it unset for ~/.cache/instir)")
    return home
