"""Record readers shared by every benchmark loader: JSON lines, JSON arrays, Parquet and
qrels files, each raising :class:`FormatError` that names file, line and field.

Encodings and size limits are in docs/formats.md; sizes are checked before any tokenizer,
stemmer or model sees the text. Relevance grades are integers: ``2``, ``"2"``, ``2.0`` and ``-1``
are read (negative grades are non-relevant, as in trec_eval), while ``0.9``, ``1.5``, ``inf`` or
``true`` are refused rather than truncated (a truncated 0.9 would silently drop a query from
every average). Whitespace-separated files (TREC qrels and runs) are read as trec_eval reads
them: fields split on ASCII spaces and tabs, numbers in ASCII digits; a fullwidth ``１`` or a
no-break space inside an id, which Python would read as 1 or strip, is refused.
"""

from __future__ import annotations

import codecs
import csv
import glob
import itertools
import json
import math
import numbers
import os
import re
import sys
import unicodedata
from collections.abc import Container, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from instir.benchmarks.types import Doc, FormatError, Qrels, quoted
from instir.errors import UsageError
from instir.inputs import CONTROLS, INVISIBLE, char_class, code_point_runs, file_problem

#: Longest document read, in characters (title and text together): ten million, some 2,000 pages
#: of text; IFIR's longest legal documents hold a few hundred thousand.
MAX_DOC_CHARS = 10_000_000
#: Environment variable that sets another document limit (a positive whole number).
MAX_DOC_CHARS_VAR = "INSTIR_MAX_DOC_CHARS"
#: what a JSON value nested deeper than Python parses is refused with (a hostile ``[[[…`` line is a RecursionError)
TOO_DEEP = "JSON nested deeper than Python reads (no record of these files nests more than a few levels)"
#: what a JSON number of more digits than Python reads (4300) is refused with (it was Python's ValueError, a traceback)
TOO_MANY_DIGITS = "a number of more than 4300 digits (more than Python reads; no record of these files holds one)"


#: The largest document limit the environment may set: twelve times it plus 2^20 (:func:`line_limit`) is the most
#: characters a line is read in at once, which must fit in a C ``ssize_t``.
MAX_DOC_CHARS_CEILING = (sys.maxsize - (1 << 20) - 2) // 12


def max_doc_chars() -> int:
    """The document limit in force: ``$INSTIR_MAX_DOC_CHARS`` when set (1 to :data:`MAX_DOC_CHARS_CEILING`), else
    :data:`MAX_DOC_CHARS`."""
    text = os.environ.get(MAX_DOC_CHARS_VAR, "").strip()
    if not text:
        return MAX_DOC_CHARS
    if not (text.isascii() and text.isdigit()) or len(text) > 19 or not 1 <= int(text) <= MAX_DOC_CHARS_CEILING:
        raise UsageError(f"{MAX_DOC_CHARS_VAR} must be a positive whole number of characters (at most "
                         f"{MAX_DOC_CHARS_CEILING:,}), got {quoted(text)}")
    return int(text)


def line_limit() -> int:
    """The longest line of an input text file, in characters: room for a document at the limit
    written with JSON escapes (a character past U+FFFF, an emoji, is twelve: ``\\ud83d\\ude00``, as ``json.dumps``
    writes it) and its other fields."""
    return 12 * max_doc_chars() + (1 << 20)


def _too_long(path: Path, n: int, length: int, limit: int) -> FormatError:
    return FormatError(path, n, None, f"line of {length:,} characters, more than the {limit:,} one record may hold "
                                      f"(a document may hold {max_doc_chars():,}; {MAX_DOC_CHARS_VAR} changes that)")


def check_file(path: Path, what: str = "file") -> None:
    """Raise :class:`FormatError` unless ``path`` is a regular file (or a link to one): ``<what>
    not found``, or what it is instead (:func:`instir.inputs.file_problem`: a directory, a FIFO, a
    device such as ``/dev/zero``, a symlink loop), before anything tries to read it."""
    problem = file_problem(path)
    if problem is not None:
        raise FormatError(path, None, None, f"{what} {problem}" if problem.startswith("not found") else problem)


#: The first bytes of the files a text file is most often mistaken for, and what to do: "save it as UTF-8" told a
#: user with a gzip'd run to re-save it in an editor.
BINARY_FORMATS = ((b"\x1f\x8b", "gzip-compressed, not text: decompress it first (gunzip)"),
                  (b"PK\x03\x04", "a zip archive, not text: unpack it first (unzip)"),
                  (b"\x28\xb5\x2f\xfd", "zstd-compressed, not text: decompress it first (unzstd)"),
                  (b"BZh", "bzip2-compressed, not text: decompress it first (bunzip2)"),
                  (b"\xfd7zXZ\x00", "xz-compressed, not text: decompress it first (unxz)"),
                  (b"PAR1", "a Parquet file, not text: this file is read as text (a Parquet table is read only under "
                            "a .parquet name, where one is taken)"))


def decode_utf8(path: Path, data: bytes, first_line: int = 1) -> str:
    """``data`` (from ``path``, starting at line ``first_line``) as text; bytes that are not
    UTF-8 raise :class:`FormatError` naming the line and the byte's column, or, at the start of a file
    that is compressed or a Parquet table (:data:`BINARY_FORMATS`), saying so."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        binary = next((said for magic, said in BINARY_FORMATS if data.startswith(magic)), None)
        if first_line == 1 and binary is not None:
            raise FormatError(path, None, None, binary) from None
        line = first_line + data.count(b"\n", 0, err.start)
        column = err.start - data.rfind(b"\n", 0, err.start)
        raise FormatError(path, line, None, f"not UTF-8 text (byte 0x{data[err.start]:02x} at column {column}); "
                                            "save the file as UTF-8") from None


def read_text(path: Path) -> str:
    """A whole UTF-8 text file, without its byte-order mark if it has one (:func:`check_file` first: a FIFO
    would block the read for ever)."""
    check_file(path)
    data = Path(path).read_bytes()
    return decode_utf8(path, data.removeprefix(codecs.BOM_UTF8))


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line_number, line)`` of a UTF-8 text file, streaming, line endings kept (as with
    ``newline=""``); a byte-order mark is skipped. A line longer than :func:`line_limit` raises
    :class:`FormatError` with its line number and length, having held at most that much of it.
    Bytes that are not UTF-8 raise :class:`FormatError` naming the line: the file is then
    scanned again line by line, since the decoder reads ahead and cannot say which line held them. A path that
    is no regular file is refused first (:func:`check_file`)."""
    check_file(path)
    limit = line_limit()
    try:
        with Path(path).open(encoding="utf-8-sig", newline="") as fh:
            readline, n = fh.readline, 0
            while line := readline(limit + 2):  # room for the line's own ending
                n += 1
                if len(line) > limit and len(line.rstrip("\r\n")) > limit:
                    length = len(line.rstrip("\r\n"))
                    while not line.endswith(("\n", "\r")) and (line := readline(1 << 20)):
                        length += len(line.rstrip("\r\n"))  # the rest is counted, never held
                    raise _too_long(path, n, length, limit)
                yield n, line
    except UnicodeDecodeError:
        with Path(path).open("rb") as fh:
            for n, raw in enumerate(fh, start=1):
                decode_utf8(path, raw.removeprefix(codecs.BOM_UTF8) if n == 1 else raw, n)
        raise  # not reached: the scan above raises at the bad line


#: Whitespace as trec_eval splits fields on it (C ``isspace``): ASCII only.
ASCII_SPACE = " \t\n\r\f\v"
_ASCII_FIELDS = re.compile(f"[{re.escape(ASCII_SPACE)}]+")
#: A number as trec_eval's ``atof``/``atol`` read it: ASCII digits, an optional sign, point and exponent.
_ASCII_NUMBER = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|(?i:inf|infinity|nan))")
#: Characters that look like a space or like nothing, which trec_eval keeps inside an id while
#: Python's ``split()`` / ``strip()`` (and so other tools) treat them as separators.
ODD_SPACES = "\x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200C))) + "\u2028\u2029\u202f\u205f\u2060\u3000\ufeff"
#: Every character an id may not hold (:func:`check_id`: these and the space), as a regular expression class;
#: :data:`REFUSED_IN_IDS_RE2` is the same class for pyarrow's RE2.
_REFUSED = "".join(dict.fromkeys(" " + CONTROLS + ODD_SPACES + INVISIBLE))
_REFUSED_IN_IDS = char_class(_REFUSED)
REFUSED_IN_IDS_RE2 = "[" + "".join(f"\\x{{{first:x}}}-\\x{{{last:x}}}" for first, last in code_point_runs(_REFUSED)) \
    + "]"
#: The record fields that hold a query or a document id (BEIR, MTEB, IFIR and FollowIR layouts): every reader
#: reads them through :func:`field_str`, which checks them with :func:`check_id`.
ID_FIELDS = frozenset({"_id", "query-id", "corpus-id", "qid", "pid"})


def ascii_fields(line: str) -> list[str]:
    """The fields of a whitespace-separated line (TREC runs and qrels) split as trec_eval splits
    them: on ASCII whitespace only (:data:`ASCII_SPACE`), so a no-break space stays inside its field (and is then
    refused by :func:`check_id`)."""
    return _ASCII_FIELDS.split(line.strip(ASCII_SPACE)) if line.strip(ASCII_SPACE) else []


def _char(c: str) -> str:
    return f"U+{ord(c):04X} {unicodedata.name(c, 'a control character' if c in CONTROLS else 'unnamed character')}"


def check_id(value: str, path: Path, where: int | str, name: str) -> str:
    """``value`` (a query or document id read from a file) unless it holds a space (no TREC file could hold the
    id), a control character (NUL, ESC, a tab …), a character that is a space to some tools and part of the id to
    trec_eval (a no-break space, a zero-width space …) or an invisible one (:data:`instir.inputs.INVISIBLE`: a
    bidirectional override …): then :class:`FormatError` naming the file, line, field and the character. Every reader
    checks its ids here, before any scorer sees them."""
    refused = _REFUSED_IN_IDS.search(value)
    if refused is None:
        return value
    c = refused.group()
    why = ("a TREC run or qrels line cannot hold it (its fields are separated by spaces)" if c == " "
           else "no id may hold a control character (pytrec_eval cuts an id at NUL, a terminal acts on ESC)"
           if c in CONTROLS else "trec_eval keeps it in the id, other tools read it as a space" if c in ODD_SPACES
           else "it shows as nothing or reorders what is shown, so two different ids would read alike")
    raise FormatError(path, where, name, f"{quoted(value)} holds {_char(c)} at character {refused.start() + 1}: "
                                         f"{why}; remove it")


def check_id_column(ids, source: str | Path, name: str) -> None:
    """:func:`check_id` over a column of ids given in memory (a DataFrame's, a dict's keys), at pyarrow's
    speed: :class:`FormatError` naming ``source``, the row (from 1) and ``name`` at the first refused id."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = pa.array(list(ids), type=pa.string())
    hits = pc.match_substring_regex(values, REFUSED_IN_IDS_RE2)
    if pc.any(hits).as_py():
        row = pc.index(hits, True).as_py()
        check_id(values[row].as_py(), source, f"row {row + 1}", name)


def ascii_number(text: str, path: Path, where: int | str, name: str, expected: str) -> str:
    """``text`` stripped of ASCII spaces, when it is a number written as trec_eval reads one
    (ASCII digits, sign, point, exponent); otherwise :class:`FormatError`: a fullwidth ``１`` or
    an Arabic-Indic digit that Python's ``int()`` would read, an underscore, a no-break space."""
    bare = text.strip(ASCII_SPACE)
    if _ASCII_NUMBER.fullmatch(bare):
        return bare
    odd = next((c for c in bare if not c.isascii()), None)
    why = f" ({_char(odd)}: trec_eval does not read it as a digit or a space)" if odd else ""
    raise FormatError(path, where, name, f"expected {expected}, got {quoted(text)}{why}")


#: Largest grade magnitude: trec_eval and pytrec_eval keep grades in a C ``long`` (32 bits on
#: some platforms).
GRADE_LIMIT = 2**31 - 1


def grade(value: Any, path: Path, where: int | str, name: str = "score") -> int:
    """A relevance grade as an int: integers, integral floats (``2.0``) and their text forms in
    ASCII (:func:`ascii_number`: ``"１"`` is refused, as trec_eval would not read it as 1).
    Anything else (fractions, infinities, NaN, booleans, text, beyond ±:data:`GRADE_LIMIT`)
    raises :class:`FormatError`."""
    number: Any = value
    if isinstance(value, str):
        text = ascii_number(value, path, where, name, "an integer grade")
        try:
            number = int(text)
        except ValueError:
            number = float(text)
    if isinstance(number, bool):
        pass  # refused below: True is no grade
    elif isinstance(number, numbers.Integral):
        number = int(number)  # numpy's integers too, as a DataFrame or an array hands them over
    elif isinstance(number, numbers.Real) and math.isfinite(number) and float(number).is_integer():
        number = int(number)
    if not isinstance(number, int) or isinstance(number, bool):
        raise FormatError(path, where, name, f"expected an integer grade, got {quoted(value)} "
                                             "(grades are whole numbers; fractions are not rounded)")
    if abs(number) > GRADE_LIMIT:
        raise FormatError(path, where, name, f"grade {quoted(value)} is beyond ±{GRADE_LIMIT}")
    return number


def read_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line_number, record)`` from a ``.jsonl`` or ``.parquet`` file, streaming.

    Parquet rows are numbered from 1 like lines, so messages read the same for both.
    """
    path = Path(path)
    check_file(path)
    if path.suffix == ".parquet":
        yield from _parquet_records(path)
        return
    for n, line in text_lines(path):
        record = json_line(line, path, n)
        if record is not None:
            yield n, record


def json_line(line: str, path: Path, n: int) -> dict[str, Any] | None:
    """The JSON object on line ``n`` of a JSON-lines file, ``None`` for a blank line; anything
    else raises :class:`FormatError` (shared by :func:`read_records` and the corpus index,
    which reads single lines by their byte offsets)."""
    if not line.strip():
        return None
    if line.startswith(codecs.BOM_UTF8.decode("utf-8")):  # files joined with cat: each kept its own
        raise FormatError(path, n, None, "a byte-order mark (U+FEFF) starts this line, inside the file (files joined "
                                         "with cat keep each one's); remove it")
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        raise FormatError(path, n, None, f"malformed JSON ({err.msg} at column {err.colno})") from None
    except RecursionError:
        raise FormatError(path, n, None, TOO_DEEP) from None
    except ValueError:  # Python's limit on the digits of an int
        raise FormatError(path, n, None, TOO_MANY_DIGITS) from None
    return json_object(record, path, n)


def json_object(value: Any, path: Path, where: int | str) -> dict[str, Any]:
    """``value`` when it is a JSON object (a record), else :class:`FormatError` at ``where`` saying what it is."""
    if not isinstance(value, dict):
        raise FormatError(path, where, None, f"expected a JSON object, got {type(value).__name__}")
    return value


def _parquet_records(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = 0
    try:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=4096):
            for row in batch.to_pylist():
                n += 1
                yield n, row
    except (pa.ArrowException, OSError) as err:
        where = None if n == 0 else f"after row {n}"
        raise FormatError(path, where, None, f"not a readable Parquet file ({err})") from None


def read_json_array(path: Path) -> list[Any]:
    """A whole-file JSON array (IFIR's ``test_data.json``)."""
    path = Path(path)
    text = read_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise FormatError(path, err.lineno, None, f"malformed JSON ({err.msg} at column {err.colno})") from None
    except RecursionError:
        raise FormatError(path, None, None, TOO_DEEP) from None
    except ValueError:  # Python's limit on the digits of an int: the line of the first such run of digits
        long = re.search(r"[0-9]{4301,}", text)
        raise FormatError(path, text.count("\n", 0, long.start()) + 1 if long else None, None, TOO_MANY_DIGITS) \
            from None
    if not isinstance(data, list):
        raise FormatError(path, None, None, f"expected a JSON array at top level, got {type(data).__name__}")
    return data


def first_place(first: Path, at: int | str, path: Path) -> str:
    """Where something was first seen, said from ``path`` (the file of the second): ``on line 3``,
    ``at array index 2``, and with the file's name when it is another file (``on queries.jsonl line 3``)."""
    file = "" if Path(first) == Path(path) else f"{Path(first).name} " if Path(first).parent == Path(path).parent \
        else f"{first} "
    return f"on {file}line {at}" if isinstance(at, int) else f"at {file}{at}"


def check_unique(seen: dict[str, tuple[Path, int | str]], value: str, path: Path, where: int | str, field: str,
                 what: str = "query id") -> None:
    """Note that ``value`` (an id read at ``path``, ``where``) is in ``seen``, or, when it already is, raise
    :class:`FormatError` at this one: ``duplicate <what> 'x' (first on line 3)`` (:func:`first_place`). One rule
    and one message for every reader's duplicate ids."""
    if value in seen:
        first = first_place(*seen[value], path)
        raise FormatError(path, where, field, f"duplicate {what} {quoted(value)} (first {first})")
    seen[value] = (path, where)


def read_instructions(paths: Sequence[Path],
                      queries: Mapping[str, tuple[Path, int | str]]) -> dict[str, tuple[str, Path, int]]:
    """MTEB's instruction config (records of ``query-id`` and ``instruction``) across ``paths``: each query's
    instruction with the file and line that hold it. One rule for every family's reader, given ``queries`` (each
    query id with the file and line that hold it): an id not among them is refused at its instruction's line, a
    query given a second instruction naming the first one's line, and every query must have one (a query without
    is refused at its own file and line, as every other mistake in a query is)."""
    found: dict[str, tuple[str, Path, int]] = {}
    seen: dict[str, tuple[Path, int | str]] = {}
    for path in paths:
        for n, rec in read_records(path):
            qid = field_str(rec, "query-id", path, n)
            if qid not in queries:
                query_files = _files_name(file for file, _ in queries.values())
                raise FormatError(path, n, "query-id", f"unknown query id {quoted(qid)} (not in {query_files})")
            check_unique(seen, qid, path, n, "query-id", "instruction for query")
            found[qid] = (field_str(rec, "instruction", path, n), path, n)
    for qid, (path, n) in queries.items():
        if qid not in found:
            raise FormatError(path, n, "_id", f"no instruction for query {quoted(qid)} in {_files_name(paths)}")
    return found


def _files_name(paths: Iterable[Path]) -> str:
    """How a message names a config's files: ``<folder>/<file>`` for one, ``<folder>/`` for its shards."""
    distinct = list(dict.fromkeys(Path(p) for p in paths))
    if not distinct:
        return "no file"
    first = distinct[0]
    return f"{first.parent.name}/{first.name}" if len(distinct) == 1 else f"{first.parent.name}/"


def field_str(record: dict, name: str, path: Path, where: int | str, *, required: bool = True) -> str:
    """A string field of a record; ids given as numbers are accepted and turned into strings, and an id
    field (:data:`ID_FIELDS`) is checked by :func:`check_id`."""
    value = record.get(name)
    if value is None:
        if required:
            raise FormatError(path, where, name, "missing (expected a string)")
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise FormatError(path, where, name, f"expected a string, got {type(value).__name__}")
    if required and not value.strip():
        raise FormatError(path, where, name, "empty (expected a non-empty string)")
    return check_id(value, path, where, name) if name in ID_FIELDS else value


def iter_corpus_docs(path: Path, *, skip_empty: bool = False) -> Iterator[Doc]:
    """Documents of a BEIR-style corpus file (``_id``, ``text``, optional/null ``title``).

    ``skip_empty`` drops documents whose text is empty (IFIR skips them when indexing);
    otherwise an empty text is an error. Duplicate ids are an error either way.
    """
    seen: set[str] = set()
    for n, rec in read_records(path):
        doc = corpus_doc(rec, path, n, skip_empty=skip_empty)
        if doc is None:
            continue
        if doc.id in seen:
            raise FormatError(path, n, "_id", f"duplicate document id {quoted(doc.id)}")
        seen.add(doc.id)
        yield doc


def corpus_doc(rec: dict[str, Any], path: Path, n: int | str, *, skip_empty: bool = False) -> Doc | None:
    """One corpus record as a :class:`Doc`, validated as :func:`iter_corpus_docs` does (less
    the duplicate check, which needs the whole file); ``None`` when ``skip_empty`` drops it."""
    doc_id = field_str(rec, "_id", path, n)
    text = rec.get("text")
    if text is None or (isinstance(text, str) and not text.strip()):
        if skip_empty and (text is None or isinstance(text, str)):
            return None
        raise FormatError(path, n, "text", "missing or empty (expected the document text)")
    if not isinstance(text, str):
        raise FormatError(path, n, "text", f"expected a string, got {type(text).__name__}")
    title = rec.get("title") or ""
    if not isinstance(title, str):
        raise FormatError(path, n, "title", f"expected a string or null, got {type(title).__name__}")
    limit = max_doc_chars()
    if len(text) + len(title) > limit:
        raise FormatError(path, n, "title" if len(title) > len(text) else "text",
                          f"document {quoted(doc_id)} holds {len(text) + len(title):,} characters, more than the "
                          f"{limit:,} a document may hold ({MAX_DOC_CHARS_VAR} changes that)")
    return Doc(id=doc_id, text=text, title=title)


#: The first header field of a qrels TSV (BEIR's ``query-id``, the InstructIR release's ``qid`` …).
QRELS_HEADS = ("qid", "query-id", "query_id", "query")


def qrels_fields(path: Path) -> tuple[str, str, str]:
    """The names an error gives the query, document and grade fields of a qrels file: a TSV's header's where it has
    one (the InstructIR release's ``qid``, ``pid``, ``score``), else the Hugging Face and MTEB layouts' ``query-id``,
    ``corpus-id`` and ``score``."""
    if Path(path).suffix not in (".jsonl", ".parquet"):
        first = next((line for _, line in text_lines(Path(path))), "").rstrip("\r\n").split("\t")
        if first[0].strip().lower() in QRELS_HEADS and len(first) in (3, 4):
            return first[0].strip(), first[-2].strip(), first[-1].strip()
    return "query-id", "corpus-id", "score"


def read_qrels(path: Path) -> tuple[Qrels, dict[tuple[str, str], int]]:
    """Read qrels from a TSV (``qid pid score`` with or without header, as BEIR and the
    InstructIR release write it), a 4-column TREC qrels file, or JSON lines / Parquet with
    ``query-id``/``corpus-id``/``score`` (the Hugging Face and MTEB layouts).

    Returns the qrels and, for error messages later, the line of each (qid, docid) pair.
    """
    path = Path(path)
    qrels: Qrels = {}
    lines: dict[tuple[str, str], int] = {}
    query_field, doc_field, grade_field = qrels_fields(path)

    def add(qid: str, did: str, value: Any, n: int) -> None:
        g = grade(value, path, n, grade_field)
        if (qid, did) in lines:
            raise FormatError(path, n, doc_field, f"duplicate judgment for ({quoted(qid)}, {quoted(did)}) "
                                                  f"(first on line {lines[(qid, did)]})")
        qrels.setdefault(qid, {})[did] = g
        lines[(qid, did)] = n

    if path.suffix in (".jsonl", ".parquet"):
        for n, rec in read_records(path):
            if rec.get("score") is None:  # no grade is no judgment: never read as relevant
                raise FormatError(path, n, "score", "missing (expected an integer grade)")
            add(field_str(rec, "query-id", path, n), field_str(rec, "corpus-id", path, n), rec["score"], n)
    else:
        rows = csv.reader((line for _, line in text_lines(path)), delimiter="\t")
        for row in rows:
            n = rows.line_num  # one source item per line, so this is the row's (last) line
            if not row or not "".join(row).strip():
                continue
            if len(row) == 1 or any(_ASCII_FIELDS.search(field.strip(ASCII_SPACE)) for field in row):
                row = ascii_fields("\t".join(row))  # spaces, or tabs and spaces mixed: split as trec_eval splits
            if n == 1 and row[0].strip().lower() in QRELS_HEADS:
                continue
            if len(row) == 3:
                qid, did, value = row
            elif len(row) == 4:
                qid, _, did, value = row
            else:
                raise FormatError(path, n, None, f"expected 3 columns (qid, pid, score) or TREC's 4 (qid, iteration, "
                                                 f"docid, grade), separated by tabs or spaces, got {len(row)}")
            add(check_id(qid.strip(ASCII_SPACE), path, n, query_field),
                check_id(did.strip(ASCII_SPACE), path, n, doc_field), value, n)
    if not qrels:
        raise FormatError(path, None, None, "no judgments found")
    return qrels, lines


def check_qrels(qrels: Qrels, lines: dict[tuple[str, str], int], path: Path,
                query_ids: Container[str], doc_ids: Container[str]) -> None:
    """Raise if a judgment points at a query or a document the benchmark does not have (naming the field as the
    file does: :func:`qrels_fields`)."""
    for (qid, did), n in lines.items():
        if qid not in query_ids:
            raise FormatError(path, n, qrels_fields(path)[0], f"unknown query id {quoted(qid)} (not in the query file)")
        if did not in doc_ids:
            raise FormatError(path, n, qrels_fields(path)[1], f"unknown document id {quoted(did)} (not in the corpus)")


def read_qrels_files(paths: Sequence[Path], query_ids: Container[str], doc_ids: Container[str]) -> Qrels:
    """The judgments of one or more qrels files (a setting's files, a config's shards), each checked
    against the queries and the corpus (:func:`check_qrels`): one rule for every family's loader. A
    pair judged in an earlier file is refused, as :func:`read_qrels` refuses it twice in one file."""
    merged: Qrels = {}
    for path in paths:
        qrels, lines = read_qrels(path)
        check_qrels(qrels, lines, path, query_ids, doc_ids)
        for (qid, did), n in lines.items():
            if did in merged.get(qid, {}):
                raise FormatError(path, n, qrels_fields(path)[1],
                                  f"({quoted(qid)}, {quoted(did)}) is judged in an earlier qrels file too")
        for qid, rel in qrels.items():
            merged.setdefault(qid, {}).update(rel)
    return merged


def data_folder(root: str | Path, subset: str | None) -> Path:
    """The folder of one benchmark inside ``root``: ``root/<subset>`` when it exists (a family's
    data root), else ``root`` itself (the benchmark's own folder given directly)."""
    root = Path(root)
    if subset is None or (root / subset).is_dir():
        return root / subset if subset else root
    if root.is_dir():
        return root
    raise FormatError(root, None, None, f"folder not found (expected a data root holding {subset}/)")


def find_files(folder: Path, patterns: Sequence[str]) -> list[Path]:
    """The files of the first of ``patterns`` (globs under ``folder``, tried in order) that matches
    any, hidden ones aside (``.ipynb_checkpoints/``, ``.cache/``: no shard of a dataset). A name that
    is there but no regular file (a FIFO, a folder, a broken link, a symlink loop) counts as found, a
    shard's as a plain name's, so its reader says what it is instead of the loader saying the file is
    missing or reading the config without it. ``patterns`` are the forms of one thing (``corpus.jsonl``,
    ``corpus.parquet``, ``corpus/``; MTEB's ``data/`` or ``qrels/test.jsonl``): two of them here are refused,
    as reading either would leave the other unread, silently."""
    found = [(pattern, hits) for pattern in patterns if (hits := _matches(folder, pattern))]
    if len(found) > 1:
        (_, first), (_, second) = found[:2]
        raise FormatError(second[0], None, None,
                          f"{first[0].relative_to(folder)} and {second[0].relative_to(folder)} are two forms of one "
                          "file here: keep one, so that no part of it is left unread")
    return found[0][1] if found else []


def _matches(folder: Path, pattern: str) -> list[Path]:
    """:func:`find_files`'s hits of one pattern."""
    if not glob.has_magic(pattern):
        return [folder / pattern] if os.path.lexists(folder / pattern) else []
    return sorted(p for p in folder.glob(pattern)
                  if not any(part.startswith(".") for part in p.relative_to(folder).parts))


def require_files(folder: Path, patterns: Sequence[str], needs: str, hint: str = "") -> list[Path]:
    """:func:`find_files`, or a :class:`FormatError` at the first pattern (its part before any
    wildcard: ``qrels/**/*.parquet`` names the folder ``qrels``): ``file not found (<needs> needs
    <patterns>)<hint>``. One rule and one message for every family's loader."""
    found = find_files(folder, patterns)
    if not found:
        parts = Path(patterns[0]).parts
        fixed = list(itertools.takewhile(lambda part: not glob.has_magic(part), parts))
        raise FormatError(folder.joinpath(*fixed), None, None,
                          f"file not found ({needs} needs {' or '.join(patterns)}){hint}")
    return found
