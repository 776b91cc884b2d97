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
    """The instir cache folder: ``$INSTIR_HOME``, default ``~/.cache/instir``."""
    return expanded(os.environ.get(HOME_VAR) or "~/.cache/instir")
