"""Record readers shared by every benchmark loader: JSON lines, JSON arrays, Parquet and
qrels files, each raising :class:`FormatError` that names file, line and field."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from instir.benchmarks.types import Corpus, Doc, FormatError, Qrels


def read_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, record)`` from a ``.jsonl`` or ``.parquet`` file, streaming.

    Parquet rows are numbered from 1 like lines, so messages read the same for both.
    """
    path = Path(path)
    if not path.is_file():
        raise FormatError(path, None, None, "file not found")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        n = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=4096):
            for row in batch.to_pylist():
                n += 1
                yield n, row
        return
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise FormatError(path, n, None, f"malformed JSON ({err.msg} at column {err.colno})") from None
            if not isinstance(record, dict):
                raise FormatError(path, n, None, f"expected a JSON object, got {type(record).__name__}")
            yield n, record


def read_json_array(path: Path) -> list[Any]:
    """A whole-file JSON array (IFIR's ``test_data.json``)."""
    path = Path(path)
    if not path.is_file():
        raise FormatError(path, None, None, "file not found")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise FormatError(path, err.lineno, None, f"malformed JSON ({err.msg} at column {err.colno})") from None
    if not isinstance(data, list):
        raise FormatError(path, None, None, f"expected a JSON array at top level, got {type(data).__name__}")
    return data


def field_str(record: dict, name: str, path: Path, where: int | str, *, required: bool = True,
              allow_empty: bool = False) -> str:
    """A string field of a record; ids given as numbers are accepted and turned into strings."""
    value = record.get(name)
    if value is None:
        if required:
            raise FormatError(path, where, name, "missing (expected a string)")
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise FormatError(path, where, name, f"expected a string, got {type(value).__name__}")
    if required and not allow_empty and not value.strip():
        raise FormatError(path, where, name, "empty (expected a non-empty string)")
    return value


def iter_corpus_docs(path: Path, *, skip_empty: bool = False) -> Iterator[Doc]:
    """Documents of a BEIR-style corpus file (``_id``, ``text``, optional/null ``title``).

    ``skip_empty`` drops documents whose text is empty (IFIR skips them when indexing);
    otherwise an empty text is an error. Duplicate ids are an error either way.
    """
    seen: set[str] = set()
    for n, rec in read_records(path):
        doc_id = field_str(rec, "_id", path, n)
        text = rec.get("text")
        if text is None or (isinstance(text, str) and not text.strip()):
            if skip_empty and (text is None or isinstance(text, str)):
                continue
            raise FormatError(path, n, "text", "missing or empty (expected the document text)")
        if not isinstance(text, str):
            raise FormatError(path, n, "text", f"expected a string, got {type(text).__name__}")
        title = rec.get("title") or ""
        if not isinstance(title, str):
            raise FormatError(path, n, "title", f"expected a string or null, got {type(title).__name__}")
        if doc_id in seen:
            raise FormatError(path, n, "_id", f"duplicate document id {doc_id!r}")
        seen.add(doc_id)
        yield Doc(id=doc_id, text=text, title=title)


def jsonl_corpus(path: Path, *, skip_empty: bool = False) -> Corpus:
    """A streamed :class:`Corpus` over one corpus file; raises at once if it is missing or empty."""
    path = Path(path)
    first = next(iter_corpus_docs(path, skip_empty=skip_empty), None)
    if first is None:
        raise FormatError(path, None, None, "empty corpus (no documents)")
    return Corpus(lambda: iter_corpus_docs(path, skip_empty=skip_empty), [path])


def read_qrels(path: Path) -> tuple[Qrels, dict[tuple[str, str], int]]:
    """Read qrels from a TSV (``qid pid score`` with or without header, as BEIR and the
    InstructIR release write it), a 4-column TREC qrels file, or JSON lines / Parquet with
    ``query-id``/``corpus-id``/``score`` (the Hugging Face and MTEB layouts).

    Returns the qrels and, for error messages later, the line of each (qid, docid) pair.
    """
    path = Path(path)
    qrels: Qrels = {}
    lines: dict[tuple[str, str], int] = {}

    def add(qid: str, did: str, grade: Any, n: int) -> None:
        try:
            g = int(float(grade))
        except (TypeError, ValueError):
            raise FormatError(path, n, "score", f"expected a number, got {grade!r}") from None
        if (qid, did) in lines:
            raise FormatError(path, n, "corpus-id", f"duplicate judgment for ({qid!r}, {did!r}) (first on line {lines[(qid, did)]})")
        qrels.setdefault(qid, {})[did] = g
        lines[(qid, did)] = n

    if path.suffix in (".jsonl", ".parquet"):
        for n, rec in read_records(path):
            add(field_str(rec, "query-id", path, n), field_str(rec, "corpus-id", path, n), rec.get("score", 1), n)
    else:
        if not path.is_file():
            raise FormatError(path, None, None, "file not found")
        with path.open(encoding="utf-8", newline="") as fh:
            for n, row in enumerate(csv.reader(fh, delimiter="\t"), start=1):
                if not row or not "".join(row).strip():
                    continue
                if len(row) == 1:
                    row = row[0].split()
                if n == 1 and row[0].strip().lower() in ("qid", "query-id", "query_id", "query"):
                    continue
                if len(row) == 3:
                    qid, did, grade = row
                elif len(row) == 4:
                    qid, _, did, grade = row
                else:
                    raise FormatError(path, n, None, f"expected 3 tab-separated columns (qid, pid, score), got {len(row)}")
                add(qid.strip(), did.strip(), grade.strip(), n)
    if not qrels:
        raise FormatError(path, None, None, "no judgments found")
    return qrels, lines


def check_qrels(qrels: Qrels, lines: dict[tuple[str, str], int], path: Path,
                query_ids: set[str] | frozenset[str], doc_ids: frozenset[str]) -> None:
    """Raise if a judgment points at a query or a document the benchmark does not have."""
    for (qid, did), n in lines.items():
        if qid not in query_ids:
            raise FormatError(path, n, "query-id", f"unknown query id {qid!r} (not in the query file)")
        if did not in doc_ids:
            raise FormatError(path, n, "corpus-id", f"unknown document id {did!r} (not in the corpus)")
