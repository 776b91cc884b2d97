"""The instir cache root, on the ground floor: every cache (corpus indexes, BM25 indexes,
embeddings, judgments, rerank scores, dequantised models, fetched benchmarks) lives under it,
and deleting it is always safe (each cache is rebuilt on demand)."""

from __future__ import annotations

import os
from pathlib import Path

from instir.inputs import expanded

#: Environment variable naming the cache root.
HOME_VAR = "INSTIR_HOME"


def instir_home() -> Path:
    """The instir cache folder: ``$INSTIR_HOME``, default ``~/.cache/instir``; resolved (a relative one is taken from
    the current folder, ``..`` and symlinks followed), so that the records that name a cache entry say the same
    whatever the spelling, and a process that starts elsewhere (a report's kernel) is handed the same folder."""
    return expanded(os.environ.get(HOME_VAR) or "~/.cache/instir").resolve()
