"""Qrels and runs in the shapes other IR tools hand them over, read into the kit's own:
qrels ``{qid: {docid: grade}}`` and a :class:`~instir.retrieval.runs.Run`.

:func:`qrels_of` takes a :class:`~instir.benchmarks.types.Benchmark`, a ``{qid: {docid: grade}}``
dict, a DataFrame (``qid``/``query_id`` + ``docid``/``docno``/``doc_id`` + ``relevance``/``label``/``grade``/``rel``,
PyTerrier's and the kit's column names), a qrels file path (TREC or BEIR TSV, as
:func:`instir.benchmarks.readers.read_qrels` reads them), a ranx ``Qrels`` or an iterable of
ir_measures / ir_datasets qrels (``query_id, doc_id, relevance``). :func:`run_of` takes a Run,
a DataFrame (``qid`` + docid column + ``score``), a ``{qid: {docid: score}}`` dict, a TREC run
path, a ranx ``Run`` or an iterable of ir_measures ``ScoredDoc`` (``query_id, doc_id, score``).
Neither imports ranx, ir_measures' types or PyTerrier: the objects are read by their shape.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from instir.benchmarks.readers import GRADE_LIMIT, check_id_column, grade
from instir.benchmarks.types import Benchmark, FormatError, Qrels, quoted
from instir.errors import UsageError
from instir.retrieval.runs import Run, read_run

#: column names of the document id, the grade and the score, as the kit, PyTerrier and ir_datasets name them;
#: PyTerrier's ``docno`` before ``docid``, which in its frames is the index's internal number
DOC_COLUMNS = ("docno", "docid", "doc_id")
GRADE_COLUMNS = ("relevance", "label", "grade", "rel")
QUERY_COLUMNS = ("qid", "query_id")
#: what an error about qrels given in memory names in place of a file
GIVEN_QRELS = "the given qrels"
#: and of a run given in memory
GIVEN_RUN = "the given run"


def qrels_of(qrels: object) -> Qrels:
    """``qrels`` in any of the shapes the module docstring lists, as ``{qid: {docid: grade}}``; ids holding a
    character no id may hold (:func:`instir.benchmarks.readers.check_id`: NUL, ESC …) are refused, and so is a
    benchmark's name where no such file is (it would read as a qrels file that is not found)."""
    if isinstance(qrels, Benchmark):
        return qrels.qrels
    if isinstance(qrels, (str, Path)):
        from instir.benchmarks import catalog
        from instir.benchmarks.readers import read_qrels

        if str(qrels) in catalog.entries() and not Path(qrels).exists():
            raise UsageError(f"{quoted(str(qrels))} is a benchmark's name, not a qrels file: pass the benchmark, "
                             f"instir.load_benchmark({quoted(str(qrels))})")
        return read_qrels(Path(qrels))[0]
    given = _given_qrels(qrels)
    check_id_column(given, GIVEN_QRELS, "query id")  # every query's, a query without judgments too
    check_id_column((d for docs in given.values() for d in docs), GIVEN_QRELS, "document id")
    return given


def _given_qrels(qrels: object) -> Qrels:
    if isinstance(qrels, pd.DataFrame):
        qid, doc, grade = (_column(qrels, QUERY_COLUMNS, "query id"), _column(qrels, DOC_COLUMNS, "document id"),
                           _column(qrels, GRADE_COLUMNS, "relevance"))
        return _judged(zip(qrels[qid].tolist(), qrels[doc].tolist(), _plain_grades(qrels[grade])), {})
    as_dict = _to_dict(qrels)
    if as_dict is not None:  # a query without judgments stays, as a benchmark's does
        return _judged(((q, d, g) for q, docs in as_dict.items() for d, g in docs.items()),
                       {_given_id(q, GIVEN_QRELS, "its query keys", "query id"): {} for q in as_dict})
    rows = _named_rows(qrels, "relevance")
    if rows is not None:
        return _judged(rows, {})
    raise UsageError(f"cannot read qrels from a {type(qrels).__name__}: give a Benchmark, a {{qid: {{docid: grade}}}} "
                     "dict, a DataFrame, a qrels file, a ranx Qrels or ir_measures qrels")


def _judged(rows: Iterable[tuple], out: Qrels) -> Qrels:
    """``out`` with each ``(query, document, grade)`` of ``rows`` added under a qrels file's rules: a grade is a
    whole number (:func:`~instir.benchmarks.readers.grade`: 0.5 is refused, never cut to 0) and a document is judged
    once per query (the two grades cannot both hold)."""
    for n, (q, d, value) in enumerate(rows, start=1):
        if type(q) is not str or type(d) is not str:  # strings need no check (the common case, at dict speed)
            q = _given_id(q, GIVEN_QRELS, f"row {n}", "query id")
            d = _given_id(d, GIVEN_QRELS, f"row {n}", "document id")
        docs = out.setdefault(q, {})
        if d in docs:
            raise FormatError(GIVEN_QRELS, _where(q, d), "document id", "the document is judged twice for this query")
        # an int needs no check (the common case, at dict speed); anything else the rule's
        docs[d] = value if type(value) is int and abs(value) <= GRADE_LIMIT else grade(value, GIVEN_QRELS,
                                                                                      _where(q, d), "relevance")
    return out


def _plain_grades(column: pd.Series) -> Iterable:
    """A numeric grade column as Python ints when every grade is whole and within ±GRADE_LIMIT, checked for the
    column at once (numpy's ints and floats, as a DataFrame holds them, read at the speed of plain ints); else the
    column as it is, for :func:`_judged` to refuse the first grade that breaks the rule, at its row."""
    values = column.to_numpy()
    if values.dtype.kind not in "iuf" or not len(values):
        return column
    if values.dtype.kind == "f":
        values = values.astype(np.float64)  # float16 cannot hold the limit it is compared with
    if values.dtype.kind == "f" and not (np.isfinite(values).all() and (values == np.trunc(values)).all()):
        return column
    return values.astype(np.int64).tolist() if np.abs(values).max() <= GRADE_LIMIT else column


def _given_id(value: object, source: str, where: str, name: str) -> str:
    """An id given in memory as text: a string as it is, anything else as ``str()`` writes it (an integer's
    digits), but no id at all (None, NaN, pandas' NA) and bytes are refused as :class:`FormatError` naming
    ``where`` and the field: ``str()`` made them the ids ``'None'``, ``'nan'`` and ``"b'd1'"``, judged or ranked as
    if they were documents (and a pandas string column's NA was a pyarrow traceback)."""
    if type(value) is str:
        return value
    if isinstance(value, (bytes, bytearray)) or (np.ndim(value) == 0 and pd.isna(value)):
        raise FormatError(source, where, name, f"expected an id (a string or a whole number), got {quoted(value)}")
    return str(value)


def _where(query: str, doc: str) -> str:
    """Where a judgment given in memory is, for an error about it."""
    return f"query {quoted(query)}, document {quoted(doc)}"


def run_of(run: object) -> Run:
    """``run`` in any of the shapes the module docstring lists, as a :class:`Run` (trec_eval's
    order: score descending, ties by document id descending)."""
    if isinstance(run, Run):
        return run
    if isinstance(run, (str, Path)):
        return read_run(run)
    if type(run).__module__.split(".")[0] == "ranx":
        converted = Run.from_ranx(run)  # keeps the kit's meta of a run that went to ranx and came back unchanged
        _check_ids(converted.df)
        return converted
    return Run(given_rows(run))


def given_rows(run: object) -> pd.DataFrame:
    """``qid``, ``docid``, ``score`` of a run in the order it was given (a frame's rows, a dict's
    insertion order; a Run, a file or a ranx run in trec_eval's order): what p-MRR's insertion
    tie rule ranks ties by, as the original FollowIR code's dicts did. Ids of a run given in memory
    are checked as a run file's are (:func:`instir.benchmarks.readers.check_id`)."""
    if isinstance(run, (Run, str, Path)) or type(run).__module__.split(".")[0] == "ranx":
        return run_of(run).df
    return _check_ids(_given_rows(run))


def _check_ids(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` (a run given in memory), once its ids passed :func:`check_id_column`."""
    check_id_column(rows["qid"], GIVEN_RUN, "query id")
    check_id_column(rows["docid"], GIVEN_RUN, "document id")
    return rows


def _given_rows(run: object) -> pd.DataFrame:
    if isinstance(run, pd.DataFrame):
        qid, doc = _column(run, QUERY_COLUMNS, "query id"), _column(run, DOC_COLUMNS, "document id")
        score = _column(run, ("score",), "score")
        for column, name in ((qid, "query id"), (doc, "document id")):
            missing = run[column].isna().to_numpy()
            if missing.any():  # astype(str) made it the id 'None' or 'nan', or kept it for pyarrow to fail on
                _given_id(run[column].iloc[int(missing.argmax())], GIVEN_RUN, f"row {int(missing.argmax()) + 1}", name)
        return pd.DataFrame({"qid": run[qid].astype(str), "docid": run[doc].astype(str),
                             "score": run[score].astype(float)})
    as_dict = _to_dict(run)
    if as_dict is not None:
        rows = [(q, d, s) for q, docs in as_dict.items() for d, s in docs.items()]
    else:
        rows = _named_rows(run, "score")
    if rows is None:
        raise UsageError(f"cannot read a run from a {type(run).__name__}: give a Run, a DataFrame, a "
                         "{qid: {docid: score}} dict, a TREC run file, a ranx Run or ir_measures ScoredDocs")
    return pd.DataFrame([(q if type(q) is str else _given_id(q, GIVEN_RUN, f"row {n}", "query id"),
                          d if type(d) is str else _given_id(d, GIVEN_RUN, f"row {n}", "document id"), float(s))
                         for n, (q, d, s) in enumerate(rows, start=1)], columns=["qid", "docid", "score"])


def _column(frame: pd.DataFrame, names: Iterable[str], what: str) -> str:
    """The column of ``frame`` that holds ``what``: the first of ``names`` it has (a document id: PyTerrier's
    ``docno`` over its internal ``docid``); two grade columns (``label`` and ``relevance``) are refused, as
    either could be meant."""
    found = [n for n in names if n in frame.columns]
    if not found:
        raise UsageError(f"the DataFrame has no {what} column (one of {', '.join(names)}); it has "
                         f"{', '.join(map(str, frame.columns))}")
    if len(found) > 1 and names is GRADE_COLUMNS:
        raise UsageError(f"the DataFrame has {len(found)} {what} columns ({', '.join(found)}): keep the one meant")
    return found[0]


def _to_dict(value: object) -> Mapping | None:
    """A nested ``{qid: {docid: value}}`` mapping: the value itself, or a ranx object's ``to_dict()``."""
    if isinstance(value, Mapping):
        if all(isinstance(v, Mapping) for v in value.values()):
            return value
        raise UsageError("a qrels or run dict maps each query id to a {docid: value} dict")
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict) and type(value).__module__.split(".")[0] == "ranx":
        return to_dict()
    return None


def _named_rows(value: object, field: str) -> list[tuple] | None:
    """``(query_id, doc_id, <field>)`` of an iterable of named tuples (ir_measures, ir_datasets), or None."""
    if not isinstance(value, Iterable) or isinstance(value, (str, bytes)):
        return None
    rows = []
    for item in value:
        if not all(hasattr(item, a) for a in ("query_id", "doc_id", field)):
            return None
        rows.append((item.query_id, item.doc_id, getattr(item, field)))
    return rows
