"""Qrels (``{qid: {docid: grade}}``, :data:`instir.benchmarks.types.Qrels`) to and from ranx's
``Qrels`` and PyTerrier's qrels frames (``qid``, ``docno``, ``label``)."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import Any

import pandas as pd

from instir.benchmarks.types import Qrels, quoted
from instir.extras import require


def _grade(query: object, doc: object, grade: object) -> int:
    """A judgment's grade as an int: a whole number only (2.7 or 0.5 cut to 2 or 0 would change what is relevant)."""
    if isinstance(grade, bool) or not isinstance(grade, numbers.Real) or not math.isfinite(grade) or grade % 1:
        raise ValueError(f"qrels grade of document {quoted(doc)} for query {quoted(query)} must be a whole number, "
                         f"got {quoted(grade)}")
    return int(grade)


def qrels_to_ranx(qrels: Mapping[str, Mapping[str, int]], name: str | None = None) -> Any:
    """``qrels`` as a ``ranx.Qrels`` (for ``ranx.evaluate`` / ``ranx.compare``). Queries with no
    judgment at all are left out, as a TREC qrels file cannot hold them; grades stay as they are
    (ranx counts grade ≥ 1 as relevant, as trec_eval does)."""
    ranx = require("ranx")
    out = ranx.Qrels(name=name)
    judged = [(q, docs) for q, docs in qrels.items() if docs]
    if judged:
        # Python strings (numba's unicode type): one compiled signature for any id length
        out.add_multi([str(q) for q, _ in judged], [[str(d) for d in docs] for _, docs in judged],
                      [[_grade(q, d, g) for d, g in docs.items()] for q, docs in judged])
    return out


def qrels_from_ranx(qrels: Any) -> Qrels:
    """A ``ranx.Qrels`` as the kit's ``{qid: {docid: grade}}`` (queries in ranx's order, by id)."""
    return {str(q): {str(d): int(g) for d, g in docs.items()} for q, docs in qrels.to_dict().items() if len(docs)}


def qrels_to_pyterrier(qrels: Mapping[str, Mapping[str, int]]) -> pd.DataFrame:
    """``qrels`` as a PyTerrier qrels frame: ``qid``, ``docno`` (strings), ``label`` (int), one
    row per judgment in the qrels' order (what ``pt.Evaluate`` and ``pt.Experiment`` take)."""
    rows = [(str(q), str(d), _grade(q, d, g)) for q, docs in qrels.items() for d, g in docs.items()]
    frame = pd.DataFrame(rows, columns=["qid", "docno", "label"])
    return frame.astype({"qid": "str", "docno": "str", "label": "int64"})


def qrels_from_pyterrier(frame: pd.DataFrame) -> Qrels:
    """A PyTerrier qrels frame (``qid``, ``docno``, ``label``; other columns such as
    ``iteration`` are ignored) as ``{qid: {docid: grade}}``. A document judged twice for one
    query is refused, since the two grades cannot both hold."""
    missing = [c for c in ("qid", "docno", "label") if c not in frame.columns]
    if missing:
        raise ValueError(f"a PyTerrier qrels frame needs columns qid, docno, label; missing {missing}")
    labels = pd.to_numeric(frame["label"], errors="raise")
    if not (labels == labels.round()).all():
        raise ValueError("qrels labels must be whole numbers")
    out: Qrels = {}
    for q, d, g in zip(frame["qid"].astype(str), frame["docno"].astype(str), labels.astype("int64")):
        docs = out.setdefault(q, {})
        if d in docs:
            raise ValueError(f"document {quoted(d)} is judged twice for query {quoted(q)}")
        docs[d] = int(g)
    return out
