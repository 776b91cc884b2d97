"""Runs: ranked lists per query as a DataFrame, read from and written to TREC run files with
a JSON sidecar that holds everything needed to reproduce them.

Ordering (the kit and trec_eval agree on it). trec_eval ignores the rank column of a run
file: it reads each score into a C ``float`` (single precision), sorts by score descending
and breaks ties by document id *descending* in ``strcmp`` (byte) order (``comp_sim_docno``
in ``form_res_rels.c``; pytrec_eval runs the same code). Every :class:`Run` is held in
exactly that order: score rounded to float32 descending, then docid descending. Scores are
then made *strictly* decreasing within each query by lowering each tied score by the fewest
float32 steps (ulps) needed, so any tool — trec_eval, pytrec_eval, ir-measures, ranx, a
spreadsheet — sees the same order whatever its own tie-break. Scores are therefore kept at
float32 precision (what trec_eval uses anyway); ranks are 1-based and recomputed, never read.

Files: ``<name>.trec`` (``qid Q0 docid rank score tag``) and ``<name>.trec.json``. Both are
written atomically (temporary file + ``os.replace``), the sidecar last and holding the
SHA-256 of the TREC text: a run whose sidecar is missing or whose hash does not match is
not complete (:func:`run_is_complete`), so a crash never leaves a half run that looks done.
"""

from __future__ import annotations

import base64
import codecs
import copy
import hashlib
import json
import math
import os
import platform
import re
import warnings
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from instir import atomic
from instir.benchmarks.readers import (
    REFUSED_IN_IDS_RE2,
    ascii_fields,
    ascii_number,
    check_file,
    check_id,
    decode_utf8,
)
from instir.benchmarks.types import Benchmark, FormatError, quoted
from instir.errors import UsageError, expect
from instir.extras import package_versions
from instir.inputs import file_problem, read_json
from instir.stamps import utc_now

RUN_COLUMNS = ("qid", "docid", "score", "rank")
#: The bytes the fast path reads: printable ASCII, line ends and UTF-8's multi-byte text. Any other (a tab, NUL,
#: ESC: a control character, which no id may hold) sends the file to the slow path, which names its line.
_FAST_BYTES = bytes(range(0x20, 0x7F)) + b"\n\r" + bytes(range(0x80, 0x100))
TREC_FIELDS = ("qid", "Q0", "docid", "rank", "score", "tag")
#: The largest score magnitude a run holds: scores are single-precision floats, as trec_eval reads them (a C
#: ``float``); a larger one would become infinity there and here, or NaN once a tie below it is broken.
MAX_SCORE = float(np.finfo(np.float32).max)
SIDECAR_FORMAT = "instir-run/1"
_VERSIONED = ("instir", "numpy", "pandas", "pyarrow", "bm25s", "PyStemmer", "sentence-transformers", "torch",
              "transformers", "ir-measures")


def score_problem(score: float) -> str | None:
    """What makes ``score`` no run score (NaN, infinity, beyond :data:`MAX_SCORE`), None when it is one: the one
    rule of a run's scores, whether read from a TREC run file, an MTEB prediction file or given in memory. An int
    of any size is compared as it is (a float of it could overflow)."""
    if isinstance(score, float) and not math.isfinite(score):
        return f"expected a finite number, got {score!r}"
    if abs(score) > MAX_SCORE:
        try:
            shown = f"{score:.6g}"
        except OverflowError:  # an int beyond float64 (an MTEB prediction file's has up to 400 digits)
            from decimal import Decimal

            shown = f"{Decimal(score):.6g}"
        return (f"the score {shown} does not fit a 32-bit float, in which runs hold scores (trec_eval reads "
                "scores as single-precision floats)")
    return None


def _check_scores(scores: np.ndarray, qid_at: Callable[[int], str], docid_at: Callable[[int], str]) -> None:
    """Refuse the first score of ``scores`` (float64) that :func:`score_problem` refuses, naming its query
    (``qid_at(i)``) and document (``docid_at(i)``): checked at once for the array, named for the first bad one."""
    bad = np.flatnonzero(~(np.abs(scores) <= MAX_SCORE))  # NaN compares False: refused with infinity
    if len(bad):
        i = int(bad[0])
        raise UsageError(f"run score of document {quoted(docid_at(i))} for query {quoted(qid_at(i))}: "
                         f"{score_problem(float(scores[i]))}")


def _check_room(lowered: np.ndarray, qid_at: Callable[[int], str]) -> None:
    """Refuse tied scores that cannot be made strictly decreasing within :data:`MAX_SCORE`: ``lowered`` holds the
    scores as :func:`_ordered_ints` after the ties are broken, in run order (``qid_at(i)``: the query of the i-th);
    ties at the lowest score a run holds would go to minus infinity, then NaN."""
    below = np.flatnonzero(lowered < _LOWEST)
    if len(below):
        raise UsageError(f"run scores of query {quoted(qid_at(int(below[0])))} are tied at or near {-MAX_SCORE:.6g}, "
                         "the lowest 32-bit float, with no room below to break the ties (a run lowers each tied "
                         "score by the fewest float steps): raise them")


def _ordered_ints(s32: np.ndarray) -> np.ndarray:
    """float32 values as int64 whose order is the float order (sign-magnitude → two's complement)."""
    bits = s32.view(np.int32).astype(np.int64)
    return np.where(bits >= 0, bits, -(bits & 0x7FFFFFFF))


def _floats_from_ordered(o: np.ndarray) -> np.ndarray:
    """The float32 values of :func:`_ordered_ints` values."""
    bits = np.where(o >= 0, o, (-o) | 0x80000000).astype(np.uint32)
    return bits.view(np.float32)


#: :data:`MAX_SCORE` below zero, as :func:`_ordered_ints` orders it: the lowest score a run holds.
_LOWEST = int(_ordered_ints(np.array([-MAX_SCORE], dtype=np.float32))[0])


def _arrow_strings(values) -> pa.Array:
    """A column of ids as an Arrow string array (zero-copy for pandas' Arrow-backed ``str``)."""
    arr = pa.array(values) if isinstance(values, pd.Series) and values.dtype == "str" else \
        pa.array(np.asarray(values, dtype=object).astype(str), type=pa.string())
    if isinstance(arr, pa.ChunkedArray):  # e.g. a column built by pd.concat
        arr = arr.combine_chunks()
    if arr.null_count:
        raise ValueError("run ids must not be missing")
    return arr


def _to_str_series(arr: pa.Array) -> pd.Series:
    return pd.Series(arr.to_pandas(types_mapper={pa.string(): pd.StringDtype("pyarrow", na_value=np.nan),
                                                 pa.large_string(): pd.StringDtype("pyarrow", na_value=np.nan)}.get))


def _doc_order(doc_ids: pa.Array) -> np.ndarray:
    """Position of each id in byte-wise (``strcmp``) ascending order."""
    order = np.empty(len(doc_ids), dtype=np.int64)
    order[pc.sort_indices(doc_ids).to_numpy()] = np.arange(len(doc_ids))
    return order


def tie_ranks(doc_ids: Sequence[str] | np.ndarray | pa.Array) -> np.ndarray:
    """Each document's place in trec_eval's order among equal scores (document id descending, byte-wise; 0 goes
    first). Every top-k the kit cuts keeps tied documents in this order (:mod:`instir.retrieval.topk`, BM25), so a
    run cut at k holds the top k of any deeper run as trec_eval reads it."""
    arr = doc_ids if isinstance(doc_ids, pa.Array) else _arrow_strings(doc_ids)
    return len(arr) - 1 - _doc_order(arr)


def _with_ties(meta: dict, tied: np.ndarray) -> dict:
    """``meta`` with the ties a canonical form broke recorded (``ties``: the row count and a bit a row, set where the
    row's score equalled the one before it, packed and base64-encoded), for :func:`tied_again`; without one when none
    was broken. A run made from part of another (:meth:`Run.top`, :func:`drop_self_hits`) is made from its
    :func:`tied_again` frame, so its own ties are found again."""
    if not tied.any():  # a record another frame left (the run this one was cut from) says nothing of this one
        return {key: value for key, value in meta.items() if key != "ties"}
    return {**meta, "ties": {"rows": len(tied), "bits": base64.b64encode(np.packbits(tied)).decode("ascii")}}


def tied_again(run: "Run") -> pd.DataFrame:
    """``run``'s frame with the ties its canonical form broke made ties again, for a rule that reads ties (p-MRR's
    insertion order): each tied document, lowered one float32 step below the one before it, takes the score of the
    first of its tie. Only the ties the run recorded when it broke them (``meta["ties"]``, kept in its sidecar) are
    read, and only where the frame still shows each of them (one step below, a smaller id): a record of another frame
    (a run cut or filtered since) is not used, so nothing is read as tied that was not."""
    df, record = run.df, run.meta.get("ties") if isinstance(run.meta, Mapping) else None
    try:
        bits = np.unpackbits(np.frombuffer(base64.b64decode(record["bits"]), np.uint8))[:len(df)].astype(bool)
        if record["rows"] != len(df) or len(bits) != len(df) or bits[:1].any():
            return df
    except (TypeError, KeyError, ValueError):
        return df
    steps = _ordered_ints(df["score"].to_numpy(np.float32))
    qids, docs = df["qid"].to_numpy(), _doc_order(_arrow_strings(df["docid"]))
    broken = (qids[1:] == qids[:-1]) & (steps[:-1] - steps[1:] == 1) & (docs[:-1] > docs[1:])
    if not broken[bits[1:]].all():
        return df
    first = np.maximum.accumulate(np.where(~bits, np.arange(len(df)), 0))
    return df.assign(score=df["score"].to_numpy()[first])


def _trec_order(qcodes: np.ndarray, scores: np.ndarray, doc_order: np.ndarray) -> np.ndarray:
    """The row order by query code, then score descending, then docid descending (ids unique
    per query): the rows' own order when they already are in it, as :func:`write_run` and the
    retrievers leave them (one linear check instead of a sort)."""
    same = qcodes[1:] == qcodes[:-1]
    ahead = (scores[1:] < scores[:-1]) | ((scores[1:] == scores[:-1]) & (doc_order[1:] < doc_order[:-1]))
    if bool(((qcodes[1:] > qcodes[:-1]) | (same & ahead)).all()):
        return np.arange(len(qcodes))
    return np.lexsort((-doc_order, -scores, qcodes))


def _canonical(df: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """Sort like trec_eval (float32 score desc, docid desc), 1-based ranks, strictly
    decreasing float32 scores per query; queries keep their first-appearance order. Also returns, a bit a row,
    where a tie was broken (the row's float32 score equalled the one before it)."""
    if not isinstance(df, pd.DataFrame):
        raise UsageError(f"Run takes a DataFrame with columns qid, docid, score, got a {type(df).__name__}"
                         + ("; for {qid: {docid: score}}: Run.from_scores(...)" if isinstance(df, Mapping) else ""))
    missing = [c for c in ("qid", "docid", "score") if c not in df.columns]
    if missing:
        raise ValueError(f"a run needs columns qid, docid, score; missing {missing}")
    scores = pd.to_numeric(df["score"], errors="raise").to_numpy(dtype=np.float64)
    _check_scores(scores, lambda i: str(df["qid"].iloc[i]), lambda i: str(df["docid"].iloc[i]))
    qarr, darr = _arrow_strings(df["qid"]), _arrow_strings(df["docid"])
    qenc, denc = qarr.dictionary_encode(), darr.dictionary_encode()
    qcodes = qenc.indices.to_numpy().astype(np.int64)
    dcodes = denc.indices.to_numpy().astype(np.int64)
    ndocs = len(denc.dictionary)
    n = len(scores)
    pair = np.sort(qcodes * ndocs + dcodes)
    same = np.flatnonzero(pair[1:] == pair[:-1])
    if len(same):
        q, d = divmod(int(pair[same[0]]), ndocs)
        raise ValueError(f"duplicate document {quoted(denc.dictionary[d].as_py())} for query "
                         f"{quoted(qenc.dictionary[q].as_py())} in run")
    s32 = scores.astype(np.float32)
    order = _trec_order(qcodes, s32, _doc_order(denc.dictionary)[dcodes])
    qsorted, s32 = qcodes[order], s32[order]
    starts = np.r_[0, np.flatnonzero(np.diff(qsorted)) + 1] if n else np.zeros(0, dtype=np.int64)
    pos = np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))
    # strictly decreasing: o'_i = min(o_i, o'_{i-1} - 1)  <=>  (o'_i + i) = cummin(o_i + i) per query
    lowered = pd.Series(_ordered_ints(s32) + pos).groupby(qsorted).cummin().to_numpy() - pos
    _check_room(lowered, lambda i: qenc.dictionary[int(qsorted[i])].as_py())
    kept = bool((order == np.arange(n)).all())  # already in trec_eval's order (a file the kit wrote): ids as given
    columns = (_to_str_series(qarr if kept else qenc.dictionary.take(qsorted)),
               _to_str_series(darr if kept else denc.dictionary.take(dcodes[order])),
               _floats_from_ordered(lowered).astype(np.float64), (pos + 1).astype(np.int64))
    tied = np.r_[False, (qsorted[1:] == qsorted[:-1]) & (s32[1:] == s32[:-1])] if n else np.zeros(0, dtype=bool)
    return pd.DataFrame(dict(zip(RUN_COLUMNS, columns))), tied


class ShallowRunsWarning(UserWarning):
    """A run ranks fewer documents per query than a cutoff asked of it (and than a query can have ranked):
    the ranks past its depth count as non-relevant (``evaluate``, InstFol's ``k``)."""


@dataclass
class Run:
    """A ranked list per query: ``df`` has columns qid (str), docid (str), score (float),
    rank (int, 1-based), in trec_eval order (see the module docstring); ``meta`` is the
    sidecar content (benchmark, setting, retriever, template, k, ...; read from a file, also versions and counts).

    Any frame with qid/docid/score columns is accepted and put into canonical order; its
    own rank column, if any, is ignored (as trec_eval ignores it).
    """

    df: pd.DataFrame
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.df, tied = _canonical(self.df)
        self.meta = _with_ties(self.meta, tied)

    @classmethod
    def from_scores(cls, scores: Mapping[str, Mapping[str, float]], meta: dict | None = None) -> "Run":
        """A run from ``{qid: {docid: score}}`` (the pytrec_eval / BEIR results shape)."""
        rows = [(q, d, s) for q, docs in scores.items() for d, s in docs.items()]
        df = pd.DataFrame(rows, columns=["qid", "docid", "score"]) if rows else _empty_frame()
        return cls(df, dict(meta or {}))

    @classmethod
    def from_arrays(cls, qids: Sequence[str], doc_ids: Sequence[str] | np.ndarray, indices: np.ndarray,
                    scores: np.ndarray, meta: dict | None = None, *, keep: np.ndarray | None = None) -> "Run":
        """A run from top-k matrices (what bm25s and dense search return): row i of
        ``indices`` (into ``doc_ids``) and ``scores`` belongs to ``qids[i]``; ``keep`` (same
        shape, bool) drops entries (e.g. non-matches). Same result as building the frame and
        calling ``Run(df)``, but sorted row by row, which is several times faster."""
        indices, scores = np.asarray(indices), np.asarray(scores)
        if indices.shape != scores.shape or indices.ndim != 2 or indices.shape[0] != len(qids):
            raise ValueError(f"indices {indices.shape} and scores {scores.shape} must be (len(qids)={len(qids)}, k)")
        keep = np.ones(indices.shape, dtype=bool) if keep is None else np.asarray(keep, dtype=bool)
        qarr, darr = _arrow_strings(qids), _arrow_strings(doc_ids)
        if len(pc.unique(qarr)) != len(qarr):
            raise ValueError("query ids of the rows must be unique")
        rows, cols = np.nonzero(keep)
        _check_scores(scores[rows, cols].astype(np.float64), lambda i: qarr[int(rows[i])].as_py(),
                      lambda i: darr[int(indices[rows[i], cols[i]])].as_py())
        width = indices.shape[1]
        distinct = np.sort(np.where(keep, indices, -1 - np.arange(width)), axis=1)
        rows, cols = np.nonzero(distinct[:, 1:] == distinct[:, :-1])
        if len(rows):
            raise ValueError(f"duplicate document {quoted(darr[int(distinct[rows[0], cols[0]])].as_py())} "
                             f"for query {quoted(qarr[int(rows[0])].as_py())}")
        s32 = np.where(keep, scores.astype(np.float32), -np.inf).astype(np.float32)
        order = np.lexsort((tie_ranks(darr)[indices], -s32), axis=1)  # kept entries first
        indices = np.take_along_axis(indices, order, axis=1)
        s32 = np.take_along_axis(s32, order, axis=1)
        kept = np.take_along_axis(keep, order, axis=1)
        pos = np.arange(width)
        lowered = np.minimum.accumulate(_ordered_ints(s32) + pos, axis=1) - pos
        _check_room(np.where(kept, lowered, _LOWEST), lambda i: qarr[i // width].as_py())
        strict = _floats_from_ordered(np.where(kept, lowered, _LOWEST))
        tied = np.zeros(kept.shape, dtype=bool)
        tied[:, 1:] = (s32[:, 1:] == s32[:, :-1]) & kept[:, 1:]
        df = pd.DataFrame({
            "qid": _to_str_series(qarr.take(np.repeat(np.arange(len(qarr)), kept.sum(axis=1)))),
            "docid": _to_str_series(darr.take(indices[kept])),
            "score": strict[kept].astype(np.float64),
            "rank": np.broadcast_to(pos + 1, kept.shape)[kept].astype(np.int64),
        })
        return cls._canonical_frame(df, _with_ties(dict(meta or {}), tied[kept]))

    @classmethod
    def _canonical_frame(cls, df: pd.DataFrame, meta: dict) -> "Run":
        """A Run around a frame already in canonical form (skips sorting again)."""
        run = object.__new__(cls)
        run.df, run.meta = df, meta
        return run

    def __len__(self) -> int:
        return len(self.df)

    @property
    def qids(self) -> list[str]:
        """Query ids in run order."""
        return list(pd.unique(self.df["qid"]))

    @property
    def depth(self) -> int:
        """The most documents the run ranks for one query (0 for an empty run): how deep a measure can look."""
        return int(self.df["qid"].value_counts().max()) if len(self.df) else 0

    def top(self, k: int) -> "Run":
        """The first ``k`` documents of every query; its ``k`` no more than the run's own (the k it was retrieved at,
        else the most documents it ranks for a query): a run 10 deep cut at 100 is still 10 deep."""
        frame = tied_again(self)
        return Run(frame[frame["rank"] <= k], {**self.meta, "k": min(k, self.meta.get("k") or self.depth)})

    def to_dict(self) -> dict[str, dict[str, float]]:
        """``{qid: {docid: score}}`` for pytrec_eval / ir-measures."""
        out: dict[str, dict[str, float]] = {}
        for q, d, s in zip(self.df["qid"].tolist(), self.df["docid"].tolist(), self.df["score"].tolist()):
            out.setdefault(q, {})[d] = s
        return out

    # ------------------------------------------------------------ other libraries (extra: interop)

    def to_ranx(self, name: str | None = None) -> Any:
        """This run as a ``ranx.Run`` (``pip install 'instir[interop]'``), for ``ranx.evaluate``,
        ``ranx.compare`` and ``ranx.fuse``.

        ``name`` (default: :func:`meta_name` of ``meta``) is the name ranx's reports print; order
        and metadata: ``docs/interop.md``."""
        from instir.extras import require

        ranx = require("ranx")
        out = ranx.Run(name=name or meta_name(self.meta))
        qids, docids, scores = _blocks(self.df)
        if qids:
            out.add_multi(qids, docids, scores)
        out.metadata["instir"] = _stash(self)
        return out

    @classmethod
    def from_ranx(cls, run: Any, meta: dict | None = None) -> "Run":
        """A :class:`Run` from a ``ranx.Run`` in the kit's order (queries without documents, as
        ``make_comparable`` adds, have no rows): a run from :meth:`to_ranx` unchanged since gets
        back its ``meta`` and query order, any other ``source: ranx`` (``docs/interop.md``);
        ``meta`` given here replaces either."""
        scores = {q: dict(docs) for q, docs in run.to_dict().items() if len(docs)}
        stash = (getattr(run, "metadata", None) or {}).get("instir")
        return _restored(cls.from_scores(scores), stash, meta, {"source": "ranx"}, getattr(run, "name", None))

    def to_pyterrier(self) -> pd.DataFrame:
        """This run as a PyTerrier result frame: ``qid``, ``docno``, ``score``, ``rank`` (0-based,
        as PyTerrier numbers it), rows in the kit's order; ``attrs["instir"]`` keeps what
        :meth:`from_pyterrier` restores (``docs/interop.md``). Needs no PyTerrier."""
        frame = pd.DataFrame({"qid": self.df["qid"], "docno": self.df["docid"], "score": self.df["score"],
                              "rank": self.df["rank"] - 1})
        frame.attrs["instir"] = _stash(self)
        return frame

    @classmethod
    def from_pyterrier(cls, frame: pd.DataFrame, meta: dict | None = None) -> "Run":
        """A :class:`Run` from a PyTerrier result frame (``qid``, ``docno``, ``score``; other
        columns such as ``query``, ``text``, ``features`` are left out).

        The ``rank`` column is not read: the frame is ordered as ``pt.Evaluate`` scores it; a frame
        from :meth:`to_pyterrier` unchanged since gets back its ``meta``, any other
        ``source: pyterrier`` (``docs/interop.md``). ``meta`` given here replaces either."""
        missing = [c for c in ("qid", "docno", "score") if c not in frame.columns]
        if missing:
            raise ValueError(f"a PyTerrier result frame needs columns qid, docno, score; missing {missing}")
        run = cls(pd.DataFrame({"qid": frame["qid"].astype(str), "docid": frame["docno"].astype(str),
                                "score": frame["score"]}))
        names = pd.unique(frame["name"]) if "name" in frame.columns else []
        name = str(names[0]) if len(names) == 1 else None
        return _restored(run, frame.attrs.get("instir"), meta, {"source": "pyterrier"}, name)


def _empty_frame() -> pd.DataFrame:
    return pd.DataFrame({"qid": pd.array([], dtype="str"), "docid": pd.array([], dtype="str"),
                         "score": np.zeros(0), "rank": np.zeros(0, dtype=np.int64)})


def meta_name(meta: Mapping | None) -> str | None:
    """The name a run goes by in other tools (ranx's ``Run.name``): ``meta["name"]``, else the
    system card's name, else the retriever's name, else a one-word TREC ``tag`` other than the
    writer's default ``instir``; None when meta holds none of them."""
    meta = meta or {}
    for candidate in (meta.get("name"), (meta.get("system") or {}).get("name"),
                      (meta.get("retriever") or {}).get("name")):
        if isinstance(candidate, str) and candidate:
            return candidate
    tag = meta.get("tag")
    return tag if isinstance(tag, str) and tag and tag != "instir" else None


def content_sha256(run: Run) -> str:
    r"""SHA-256 over every row's query id, document id and float32 score (shortest round-trip
    text), in run order, each row as ``qid\x00docid\x00score\x00\x01``: equal for two runs exactly when they
    hold the same ranked lists in the same query order. :meth:`Run.to_ranx` and
    :meth:`Run.to_pyterrier` record it, so metadata is restored only to an unchanged run."""
    df = run.df
    big = pa.large_string()
    lines = pc.binary_join_element_wise(
        _arrow_strings(df["qid"]).cast(big), _arrow_strings(df["docid"]).cast(big),
        pa.array(df["score"].to_numpy().astype(np.float32), type=pa.float32()).cast(big),
        pa.scalar("\x01", big), pa.scalar("\x00", big))
    return hashlib.sha256(_joined(lines)).hexdigest()


def _joined(lines: pa.Array) -> bytes:
    """The bytes of a (large) string array's values, back to back."""
    if not len(lines):
        return b""
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset:lines.offset + len(lines) + 1]
    return lines.buffers()[2].to_pybytes()[offsets[0]:offsets[-1]]


def _blocks(df: pd.DataFrame) -> tuple[list[str], list[list[str]], list[list[float]]]:
    """Query ids in run order with each query's document ids and scores (a canonical frame holds
    each query's rows together)."""
    qids = df["qid"].tolist()
    if not qids:
        return [], [], []
    starts = [0, *np.flatnonzero(df["qid"].to_numpy()[1:] != df["qid"].to_numpy()[:-1]) + 1, len(qids)]
    docids, scores = df["docid"].tolist(), df["score"].tolist()
    spans = list(zip(starts[:-1], starts[1:]))
    return [qids[a] for a, _ in spans], [docids[a:b] for a, b in spans], [scores[a:b] for a, b in spans]


def _stash(run: Run) -> dict:
    """What another library's object keeps of a run for the way back: a JSON copy of ``meta``
    (later edits of either side do not leak), the query order and the content hash."""
    return {"meta": json.loads(json.dumps(run.meta, default=str)), "queries": run.qids,
            "sha256": content_sha256(run)}


def _restored(run: Run, stash: object, meta: dict | None, source: dict, name: str | None) -> Run:
    """``run`` with the query order and meta of ``stash`` when its content hash matches the
    run's (in that order); else with ``source`` and ``name`` as meta. ``meta`` replaces either."""
    if isinstance(stash, dict) and isinstance(stash.get("queries"), list):
        order = {q: i for i, q in enumerate(stash["queries"])}
        if set(order) == set(run.qids):
            position = run.df["qid"].map(order).to_numpy()
            candidate = run.df.iloc[np.argsort(position, kind="stable")].reset_index(drop=True)
            restored = Run._canonical_frame(candidate, copy.deepcopy(stash.get("meta") or {}))
            if content_sha256(restored) == stash.get("sha256"):
                if meta is not None:
                    restored.meta = dict(meta)
                return restored
    if meta is not None:
        run.meta = dict(meta)
        return run
    run.meta = {**source, **({"name": name} if name else {})}
    if name and not any(c.isspace() for c in name):
        run.meta["tag"] = name
    return run


def same_rankings(a: Run, b: Run) -> bool:
    """Whether two runs rank the same documents with the same scores for every query (the order of the queries
    aside): a copy of a run, or a file read twice, is one run however it was handed over."""
    if a is b:
        return True
    if len(a.df) != len(b.df):
        return False
    x, y = (run.df.sort_values(["qid", "rank"], kind="stable") for run in (a, b))
    return all(np.array_equal(x[c].to_numpy(dtype=object), y[c].to_numpy(dtype=object)) for c in ("qid", "docid")) \
        and np.array_equal(x["score"].to_numpy(dtype=np.float64), y["score"].to_numpy(dtype=np.float64))


def as_run(obj: Run | pd.DataFrame) -> Run:
    """A :class:`Run` from a Run (returned as is) or a bare DataFrame with qid/docid/score."""
    if isinstance(obj, Run):
        return obj
    if isinstance(obj, pd.DataFrame):
        return Run(obj)
    raise TypeError(f"expected a Run or a pandas DataFrame, got {type(obj).__name__}")


# ---------------------------------------------------------------- writing

def sidecar_path(path: str | Path) -> Path:
    """The JSON sidecar of a TREC run file: ``<path>.json``."""
    path = Path(path)
    return path.with_name(path.name + ".json")


def _library_versions() -> dict[str, str]:
    installed = {dist: version for dist, version in package_versions(_VERSIONED).items() if version is not None}
    return {"python": platform.python_version(), **installed}


def trec_bytes(run: Run, tag: str = "instir") -> bytes:
    """The TREC text of a run (``qid Q0 docid rank score tag``), scores in shortest float32 form."""
    if not tag or any(c.isspace() for c in tag):
        raise ValueError(f"run tag must be one word without whitespace, got {quoted(tag)}")
    df = run.df
    ids = {col: _arrow_strings(df[col]) for col in ("qid", "docid")}
    for col, arr in ids.items():
        bad = pc.or_(pc.match_substring_regex(arr, r"\s"), pc.equal(pc.utf8_length(arr), 0))
        if pc.any(bad).as_py():
            raise ValueError(f"{col} {quoted(arr.filter(bad)[0].as_py())} is empty or contains whitespace: "
                             "not writable as TREC")
    # One "qid Q0 docid rank score tag\n" string per row, joined by Arrow (its float32 → text
    # is the shortest round-trip form, as its CSV writer gives): no CSV quoting is involved,
    # so an id holding '"' is written literally, as read_run reads it back.
    big = pa.large_string()  # 64-bit offsets: the joined text may pass 2 GiB
    lines = pc.binary_join_element_wise(
        ids["qid"].cast(big), pa.scalar("Q0", big), ids["docid"].cast(big),
        pa.array(df["rank"].to_numpy(), type=pa.int64()).cast(big),
        pa.array(df["score"].to_numpy().astype(np.float32), type=pa.float32()).cast(big),
        pa.scalar(f"{tag}\n", big), pa.scalar(" ", big))
    return _joined(lines)


def write_run(run: Run, path: str | Path, *, tag: str | None = None) -> Path:
    """Write ``run`` as a TREC file plus its JSON sidecar, atomically, sidecar last.

    The sidecar holds ``run.meta`` plus the TREC text's SHA-256, row/query counts, library
    versions and the write time. Returns the TREC path.
    """
    expect(run, Run, "write_run(run, …)", "; a DataFrame of qid, docid, score is one as instir.Run(frame)")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tag = tag or run.meta.get("tag") or "instir"
    data = trec_bytes(run, tag)
    sidecar = {
        **run.meta,
        "format": SIDECAR_FORMAT,
        "tag": tag,
        "rows": len(run.df),
        "queries": int(run.df["qid"].nunique()),
        "versions": _library_versions(),
        "written_at": utc_now(),
        "trec_sha256": hashlib.sha256(data).hexdigest(),
    }
    text = json.dumps(sidecar, indent=2, sort_keys=True, default=str).encode()
    atomic.write_bytes(path, data)
    atomic.write_bytes(sidecar_path(path), text)
    return path


def read_sidecar(path: str | Path, data: bytes | None = None) -> dict | None:
    """The sidecar of a TREC run if it exists and matches the file's content hash, else None; ``data``: the file's
    bytes where the caller has read them (:func:`read_run`), hashed instead of reading the file again."""
    meta = read_json(sidecar_path(path))
    if not isinstance(meta, dict) or file_problem(path) is not None:
        return None
    try:
        digest = atomic.file_sha256(path) if data is None else hashlib.sha256(data).hexdigest()
        return meta if meta.get("trec_sha256") == digest else None
    except OSError:
        return None


def _query_depths(run: Run | Mapping[str, Mapping], queries: Collection[str] | None) -> pd.Series:
    """The documents ``run`` ranks for each query it answers (a Series by query id), of ``queries`` only when
    given: what :func:`ranked_depth` and :func:`shallowest_query` measure."""
    if isinstance(run, Mapping):
        counts = pd.Series({str(q): len(docs) for q, docs in run.items() if docs}, dtype="int64")
    else:
        counts = run.df["qid"].value_counts(sort=False)
    return counts if queries is None else counts[[q in queries for q in counts.index.tolist()]]


def ranked_depth(run: Run | Mapping[str, Mapping], k: object = None, queries: Collection[str] | None = None, *,
                 depths: pd.Series | None = None) -> int:
    """How deep ``run`` ranks, as a verdict, a depth note and ``runs.csv`` take it (the one rule of a run's depth):
    ``k`` where its vouched sidecar says the depth asked (a query may match fewer documents), else what every query
    reaches, the fewest documents it ranks for one (a query ranked 10 deep scores nDCG@20 on 10, however deep the
    rest). Only ``queries`` count when given (the benchmark's): a line of a query the benchmark lacks scores nothing,
    so it sets no depth; a query the run does not answer neither (it scores 0, named as missing by
    :func:`check_run_ids`). 0 when no query counts. ``run`` may be MTEB's ``{qid: {doc: score}}``; ``depths``: its
    :func:`_query_depths` over ``queries`` where the caller has counted them."""
    if k:
        return int(k)
    depths = _query_depths(run, queries) if depths is None else depths
    return int(depths.min()) if len(depths) else 0


def shallowest_query(run: Run | Mapping[str, Mapping], queries: Collection[str] | None = None, *,
                     depths: pd.Series | None = None) -> str | None:
    """The query (of ``queries`` when given, as :func:`ranked_depth` counts them) that ranks the fewest documents
    where another ranks more: the one that sets a measured depth, which a depth note names (a run cut short for
    one query looks as deep as the rest); None when every such query ranks as many. ``depths``: as
    :func:`ranked_depth` takes them."""
    depths = _query_depths(run, queries) if depths is None else depths
    return str(depths.idxmin()) if len(depths) and depths.min() < depths.max() else None


def ranked_phrase(depth: int, shallowest: str | None, unit: str = "documents", per: str = "query") -> str:
    """How a note says a run's ``depth`` (:func:`ranked_depth`): ``ranks at most 5 documents per query``, or, where
    one query (``shallowest``, :func:`shallowest_query`) ranks fewer than the rest, ``ranks 5 documents for query
    'q' (its shallowest query: the others rank more)``, so a query cut short is named, not hidden in a mean."""
    if shallowest is None:
        return f"ranks at most {depth} {unit} per {per}"
    return f"ranks {depth} {unit} for {per} {quoted(shallowest)} (its shallowest {per}: the others rank more)"


def run_windowing(meta: Mapping | None) -> str:
    """The long-text windowing a run's dense encoder used, from its sidecar (or ``run.meta``):
    ``"ifir"``, ``"clean"`` or ``"none"``; ``"n/a"`` for a run without a dense encoder (BM25);
    ``"unknown"`` without metadata. A hybrid run reports its dense part; sidecars written before
    the modes were named (``long_doc_windows``) read as ``"clean"`` or ``"none"``."""
    if not meta:
        return "unknown"
    params = (meta.get("retriever") or {}).get("params") or {}
    dense = params.get("dense", params)
    if "windowing" in dense:
        return dense["windowing"] or "none"
    if "long_doc_windows" in dense:
        return "clean" if dense["long_doc_windows"] else "none"
    return "n/a"


def run_template(meta: Mapping | None) -> str:
    """The name of the template a run's queries were formatted with, from its sidecar (or ``run.meta``);
    ``"unknown"`` where none says (a run of one's own, MTEB's predictions)."""
    template = (meta or {}).get("template")
    name = template.get("name") if isinstance(template, Mapping) else None
    return name if isinstance(name, str) and name else "unknown"


def run_engine(meta: Mapping | None) -> str:
    """The BM25 engine behind a run, from its sidecar (or ``run.meta``): ``anserini`` or
    ``elasticsearch`` (Lucene, as :mod:`instir.retrieval.lucene` runs them), ``rank_bm25``
    (:mod:`instir.retrieval.okapi`), ``bm25s`` (the kit's fast path), ``mixed`` where its parts name
    different engines, ``n/a`` for a run without BM25, ``unknown`` without metadata. A hybrid run reports its
    lexical part."""
    if not meta:
        return "unknown"
    found = []

    def walk(value: object) -> None:
        if isinstance(value, Mapping):
            if isinstance(value.get("engine"), str):
                found.append(value["engine"])
            for item in value.values():
                walk(item)
        elif isinstance(value, list):  # a hybrid's components: its lexical part's engine is only there
            for item in value:
                walk(item)

    walk(meta.get("search"))
    names = {name.split()[0].lower() for name in found if name.strip()}
    return next(iter(names)) if len(names) == 1 else "mixed" if names else "n/a"


def run_is_complete(path: str | Path) -> bool:
    """True when the TREC file and its sidecar exist and the sidecar's hash matches the file."""
    return read_sidecar(path) is not None


# ---------------------------------------------------------------- reading

def _parse_slowly(path: Path, text: str) -> tuple[pd.DataFrame, list[int]]:
    """Whitespace-tolerant line-by-line parse, and the rank column in line order; raises FormatError at the first
    bad line."""
    rows: list[tuple[str, str, float]] = []
    ranks: list[int] = []
    seen: dict[tuple[str, str], int] = {}
    for n, line in enumerate(re.split(r"\r\n|\r|\n", text), start=1):  # lines end as pyarrow ends them
        parts = ascii_fields(line)
        if not parts:
            continue
        if len(parts) != 6:
            raise FormatError(path, n, None, f"expected 6 whitespace-separated fields "
                                             f"({' '.join(TREC_FIELDS)}), got {len(parts)}")
        qid, _, docid, rank, score, _ = parts
        check_id(qid, path, n, "qid")
        check_id(docid, path, n, "docid")
        digits = ascii_number(rank, path, n, "rank", "an integer")
        try:
            ranks.append(int(digits))
        except ValueError:
            raise FormatError(path, n, "rank", f"expected an integer, got {quoted(rank)}") from None
        value = float(ascii_number(score, path, n, "score", "a number"))
        problem = score_problem(value)
        if problem is not None:
            raise FormatError(path, n, "score", problem)
        if (qid, docid) in seen:
            raise FormatError(path, n, "docid", f"document {quoted(docid)} listed twice for query {quoted(qid)} "
                                                f"(first on line {seen[(qid, docid)]})")
        seen[(qid, docid)] = n
        rows.append((qid, docid, value))
    return (pd.DataFrame(rows, columns=["qid", "docid", "score"]) if rows else _empty_frame()), ranks


def _lowest_first(query: np.ndarray, rank: np.ndarray, score: np.ndarray) -> bool:
    """Whether a run file's rank column puts the lowest score first in every query (``query``: each line's query
    as an integer code; lines in file order, a query's lines together or not): a later rank of a query never
    scores lower, and some score higher. Such a run was written for "lower is better" (a distance), which
    trec_eval, ranking by score, reads upside down."""
    if not bool((query[1:] >= query[:-1]).all()):  # each query's lines together, in file order (as written, they are)
        order = np.argsort(query, kind="stable")
        query, rank, score = query[order], rank[order], score[order]
    step = (query[1:] == query[:-1]) & (np.diff(rank) > 0)
    rises = np.diff(score)[step]
    return bool(rises.size and (rises >= 0).all() and (rises > 0).any())


def read_run(path: str | Path) -> Run:
    """Read a TREC run file (``qid Q0 docid rank score tag``); the rank column is checked but
    not used (order comes from the scores, as in trec_eval). Its sidecar becomes ``meta``
    when it matches the file; otherwise meta says where the run came from.

    Fields are separated by whitespace and never quoted (as trec_eval reads them): a ``"``
    is part of an id like any other character. A UTF-8 byte-order mark is skipped. An empty
    file is an empty run (every query scores 0) only when its sidecar matches and says it
    has 0 rows, as :func:`write_run` leaves it; any other empty file is refused.
    Bad lines raise :class:`FormatError` naming the file, line and field.
    """
    expect(path, (str, os.PathLike), "read_run(path)")
    path = Path(path)
    check_file(path, "run file")
    data = path.read_bytes()
    text = data.removeprefix(codecs.BOM_UTF8)
    if not text or text.isspace():  # a byte-order mark alone is an empty file too (no stripped copy of the file)
        meta = read_sidecar(path, data)
        if meta is None or meta.get("rows") != 0:
            raise FormatError(path, None, None, "empty run file (no sidecar records it as a run with 0 rows)")
        return Run(_empty_frame(), {**meta, "path": str(path)})
    body = pa.py_buffer(data)[len(codecs.BOM_UTF8):] if data.startswith(codecs.BOM_UTF8) else pa.py_buffer(data)
    try:
        if data.translate(None, _FAST_BYTES):  # a C loop over the file: milliseconds where a regex takes 0.1 s/M ids
            raise ValueError("a control character")
        table = pacsv.read_csv(pa.BufferReader(body),
                               read_options=pacsv.ReadOptions(column_names=list(TREC_FIELDS)),
                               parse_options=pacsv.ParseOptions(delimiter=" ", quote_char=False, double_quote=False,
                                                                escape_char=False, newlines_in_values=False),
                               convert_options=pacsv.ConvertOptions(column_types={
                                   "qid": pa.string(), "Q0": pa.string(), "docid": pa.string(),
                                   "rank": pa.int64(), "score": pa.float64(), "tag": pa.string()}))
        for column in ("qid", "docid"):  # a C1 control or a no-break space kept in an id: the slow path names its line
            ids = table[column]
            if (not pc.all(pc.string_is_ascii(ids)).as_py()
                    and pc.any(pc.match_substring_regex(ids, REFUSED_IN_IDS_RE2)).as_py()):
                raise ValueError(f"a {column} holds a character ids may not hold")
        tags = table["tag"].unique().to_pylist()
        qids = table["qid"].combine_chunks()
        frame = pd.DataFrame({"qid": _to_str_series(qids), "docid": _to_str_series(table["docid"].combine_chunks()),
                              "score": table["score"].to_numpy()})
        codes = pc.dictionary_encode(qids).indices.to_numpy(zero_copy_only=False)
        reversed_ranks = _lowest_first(codes, table["rank"].to_numpy(), frame["score"].to_numpy())
        run = Run(frame)  # a NaN score or a document listed twice: the slow path names its line
    except (pa.ArrowInvalid, ValueError):
        # slow path: tolerant of other whitespace, and names the first bad line
        text = decode_utf8(path, body.to_pybytes())
        frame, ranks = _parse_slowly(path, text)
        reversed_ranks = _lowest_first(pd.factorize(frame["qid"])[0], np.asarray(ranks), frame["score"].to_numpy())
        run = Run(frame)
        tags = sorted({line.split()[-1] for line in text.splitlines() if line.strip()})
    if reversed_ranks:
        warnings.warn(f"{path}: in every query the rank column puts the lowest score first; trec_eval and the kit "
                      "rank by score, highest first, so rank 1 is read as the last (if lower is better for this "
                      "system, negate its scores)", stacklevel=2)
    meta = read_sidecar(path, data) or {"source": "external", "tag": tags[0] if len(tags) == 1 else tags,
                                  **({"ties": run.meta["ties"]} if "ties" in run.meta else {})}  # the file's own
    run.meta = {**meta, "path": str(path)}
    return run


# ---------------------------------------------------------------- checks and filters

def drop_self_hits(run: Run | pd.DataFrame) -> Run:
    """Remove documents whose id equals the query id, as the official InstructIR code does
    before scoring; ranks are recomputed and the count is recorded in ``meta``."""
    run = as_run(run)
    self_hit = (run.df["qid"] == run.df["docid"]).to_numpy()
    meta = {**run.meta, "self_hits_dropped": int(self_hit.sum()) + int(run.meta.get("self_hits_dropped", 0))}
    if not self_hit.any():
        return Run._canonical_frame(run.df, meta)
    return Run(tied_again(run)[~self_hit], meta)


@dataclass
class RunIdCheck:
    """Ids of a run that the benchmark does not know (reported, never silently dropped), benchmark
    queries the run does not answer, and the run's ``depth`` (:func:`ranked_depth` over the benchmark's queries):
    the k it was retrieved at where its metadata says it (a query may match fewer documents: Lucene and bm25s rank
    only those that match), else the fewest documents it ranks for a query of the benchmark, that query
    ``shallowest`` where others rank more (:func:`shallowest_query`; None otherwise); and ``other_data``, what of
    the benchmark's data (``corpus``, ``queries``) its sidecar says it was not retrieved over (filled in where it is
    scored: :func:`instir.metrics.scoring.data_differs`); ``mean_of``: under MTEB's protocol, the number of queries
    its mean is over (a query the run leaves out is left out of it), None under the authors' (such a query scores 0)."""

    unknown_qids: list[str]
    unknown_docids: list[str]
    rows_with_unknown_qid: int
    rows_with_unknown_docid: int
    missing_qids: list[str]
    depth: int = 0
    shallowest: str | None = None
    other_data: list[str] = field(default_factory=list)
    mean_of: int | None = None

    @property
    def ok(self) -> bool:
        """True when every query and document id of the run is in the benchmark."""
        return not self.unknown_qids and not self.unknown_docids

    def summary(self, limit: int = 5) -> str:
        """One human-readable paragraph for logs and notebooks: counts, and the first
        ``limit`` ids of each kind, each capped by :func:`~instir.benchmarks.types.quoted`."""
        def few(ids: list[str]) -> str:
            more = f", … (+{len(ids) - limit})" if len(ids) > limit else ""
            return ", ".join(quoted(i) for i in ids[:limit]) + more

        parts = []
        if self.unknown_qids:
            parts.append(f"{len(self.unknown_qids)} query ids not in the benchmark "
                         f"({self.rows_with_unknown_qid} rows): {few(self.unknown_qids)}")
        if self.unknown_docids:
            parts.append(f"{len(self.unknown_docids)} document ids not in the corpus "
                         f"({self.rows_with_unknown_docid} rows): {few(self.unknown_docids)}")
        if self.missing_qids:
            counted = ("they score 0" if self.mean_of is None else
                       f"left out of MTEB's mean, which is over the {self.mean_of} queries of the run")
            parts.append(f"{len(self.missing_qids)} benchmark queries have no results ({counted}): "
                         f"{few(self.missing_qids)}")
        return "; ".join(parts) if parts else "all run ids are in the benchmark"


def refuse_unanswered(run: Run, asked: Sequence[str], queries: Collection[str], where: str) -> None:
    """Refuse in one line a run none of whose query ids (``asked``) is one of ``queries`` (of ``where``): a run of
    another benchmark, or another setting's ids, would score 0 on every measure without a word."""
    if len(asked) and not any(q in queries for q in asked):
        named = f" {run.meta['path']}" if run.meta.get("path") else ""
        raise UsageError(f"the run{named} answers none of the {len(queries):,} queries of {where} (its first query "
                         f"id: {quoted(str(asked[0]))}): a run of another benchmark? it would score 0 on every measure")


def check_run_ids(run: Run | pd.DataFrame, benchmark: Benchmark) -> RunIdCheck:
    """Compare a (bring-your-own) run's ids with the benchmark's queries and corpus; a run that answers none of
    its queries is refused (:func:`refuse_unanswered`)."""
    run = as_run(run)
    known_d = benchmark.corpus.id_set()
    # the run's distinct ids against the benchmark's sets: a run holds far fewer distinct documents
    # than a large corpus, whose id set pandas' isin would copy on every call
    asked = run.df["qid"].unique().tolist()  # a list: iterating Arrow's scalars costs several times more
    refuse_unanswered(run, asked, benchmark.queries, benchmark.name)
    unknown_q = sorted(q for q in asked if q not in benchmark.queries)
    unknown_d = sorted(d for d in run.df["docid"].unique().tolist() if d not in known_d)
    bad_q = run.df["qid"].isin(unknown_q).to_numpy()
    bad_d = run.df["docid"].isin(unknown_d).to_numpy()
    run_q = set(asked)
    k = run.meta.get("k")
    depths = None if k else _query_depths(run, benchmark.queries)  # counted once for the depth and its query
    return RunIdCheck(
        unknown_qids=unknown_q,
        unknown_docids=unknown_d,
        rows_with_unknown_qid=int(bad_q.sum()),
        rows_with_unknown_docid=int(bad_d.sum()),
        missing_qids=[q for q in benchmark.queries if q not in run_q],
        depth=ranked_depth(run, k, benchmark.queries, depths=depths),
        shallowest=None if k else shallowest_query(run, benchmark.queries, depths=depths),
    )
