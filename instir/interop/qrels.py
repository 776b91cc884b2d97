"""Qrels (``{qid: {docid: grade}}``, :data:`instir.benchmarks.types.Qrels`) to ranx's ``Qrels`` and
PyTerrier's qrels frames (``qid``, ``docno``, ``label``). Back is :func:`instir.metrics.qrels_of`, which
reads both (and every other shape) under one rule; ``qrels_from_ranx`` and ``qrels_from_pyterrier`` are
its old names."""

from __future__ import annotations

from typing import Any

import pandas as pd

from instir.extras import require
from instir.metrics.inputs import qrels_of


def qrels_to_ranx(qrels: object, name: str | None = None) -> Any:
    """``qrels`` (any shape :func:`~instir.metrics.qrels_of` reads, grades whole numbers) as a ``ranx.Qrels`` (for
    ``ranx.evaluate`` / ``ranx.compare``). Queries with no judgment at all are left out, as a TREC qrels file cannot
    hold them; grades stay as they are (ranx counts grade ≥ 1 as relevant, as trec_eval does)."""
    ranx = require("ranx")
    out = ranx.Qrels(name=name)
    judged = [(q, docs) for q, docs in qrels_of(qrels).items() if docs]
    if judged:
        # Python strings (numba's unicode type): one compiled signature for any id length
        out.add_multi([q for q, _ in judged], [list(docs) for _, docs in judged],
                      [list(docs.values()) for _, docs in judged])
    return out


def qrels_to_pyterrier(qrels: object) -> pd.DataFrame:
    """``qrels`` (any shape :func:`~instir.metrics.qrels_of` reads, grades whole numbers) as a PyTerrier qrels frame:
    ``qid``, ``docno`` (strings), ``label`` (int), one row per judgment in the qrels' order (what ``pt.Evaluate``
    and ``pt.Experiment`` take)."""
    rows = [(q, d, g) for q, docs in qrels_of(qrels).items() for d, g in docs.items()]
    frame = pd.DataFrame(rows, columns=["qid", "docno", "label"])
    return frame.astype({"qid": "str", "docno": "str", "label": "int64"})
