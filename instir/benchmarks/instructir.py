"""InstructIR (arXiv:2402.14334) in its three published layouts and five settings.

The layout (``github``: the authors' release, ``hf``: ``kaist-ai/InstructIR``, ``mteb``:
``mteb/InstructIR-mteb``) is detected from the files under ``root`` and recorded in
``Benchmark.layout``; only the GitHub release has the files of the four analysis settings. A
Hugging Face ``queries.jsonl`` beside the GitHub files must agree with them instance by instance.
Every instance must be judged: evaluators silently drop unjudged queries, which would shift
every average. The files of each layout and setting are in docs/formats.md.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from instir.benchmarks import catalog
from instir.benchmarks.docstore import jsonl_corpus
from instir.benchmarks.readers import (
    check_unique,
    field_str,
    find_files,
    read_instructions,
    read_qrels_files,
    read_records,
    require_files,
)
from instir.benchmarks.types import Benchmark, Corpus, FormatError, Qrels, Query, quoted
from instir.errors import unknown

#: Setting names accepted by :func:`load_instructir` (the family spec's).
INSTRUCTIR_SETTINGS = catalog.family("instructir").settings

_SEP = "[SEP]"

# File patterns per dataset config, the forms of one file: find_files takes the one present, two are refused.
_CORPUS = ("corpus.jsonl", "corpus.parquet", "corpus/**/*.parquet", "corpus/**/*.jsonl")
_QUERIES = ("queries.jsonl", "queries.parquet", "queries/**/*.parquet", "queries/**/*.jsonl")
_INSTRUCTIONS = ("instruction.jsonl", "instruction.parquet", "instruction/**/*.parquet",
                 "instruction/**/*.jsonl")
_TEST_QRELS = ("qrels/test.tsv", "qrels/test.jsonl", "qrels/test.parquet")
_MTEB_QRELS = ("data/**/*.parquet", "data/**/*.jsonl", "qrels/test.jsonl", "qrels/test.tsv",
               "qrels/test.parquet")
_GITHUB_INSTRUCTIONS = "only_instruction_queries.jsonl"
_GITHUB_MARKERS = (_GITHUB_INSTRUCTIONS, "only_queries.jsonl")

# A query-file shape turns one record into (query, instruction).
_Shape = Callable[[dict, Path, int], tuple[str, str]]
_Where = dict[str, tuple[Path, int]]


def group_of(query_id: str) -> str:
    """The original MS MARCO query id of an instance: the id before its last ``_``
    (``"1078446_6"`` and the paraphrase ``"1078446_6.1"`` both give ``"1078446"``); an id
    without ``_`` (a bare query) is its own group."""
    head, sep, _ = query_id.rpartition("_")
    return head if sep else query_id


def load(root: str | Path, *, subset: str | None, setting: str, name: str, revision: str,
         is_sample: bool) -> Benchmark:
    """The family's loader (the catalog's ``loader``): :func:`load_instructir` (no subsets)."""
    return load_instructir(root, setting, name=name, revision=revision, is_sample=is_sample)


def load_instructir(root: str | Path, setting: str = "instructed", *, name: str = "instructir",
                    revision: str = "local", is_sample: bool = False) -> Benchmark:
    """Read InstructIR from ``root`` in any of its layouts, in one of ``INSTRUCTIR_SETTINGS``.

    Each query keeps its parts apart (bare query, instruction), grouped by the original
    query id (:func:`group_of`); level is ``None`` and subset ``""``. Malformed records,
    duplicate ids, a missing ``[SEP]``, judgments of unknown queries or documents, unjudged
    instances and missing files raise :class:`FormatError` naming file, line and field.
    """
    if setting not in INSTRUCTIR_SETTINGS:
        raise unknown("InstructIR setting", setting, INSTRUCTIR_SETTINGS)
    root = Path(root)
    if not root.is_dir():
        raise FormatError(root, None, None, "not a directory (expected an InstructIR download)")
    layout = _detect_layout(root)
    if setting == "instructed":
        queries, where, query_files, qrels_files = _instructed(root, layout)
    else:
        query_name, shape, qrels_name = _ANALYSIS_SETTINGS[setting]
        query_files = _require(root, (query_name,), setting, layout)
        queries, where = _read_queries(query_files, shape)
        qrels_files = _require(root, (qrels_name,), setting, layout)
    corpus = _corpus(root, setting, layout)
    qrels = read_qrels_files(qrels_files, queries, corpus.id_set())
    _check_judged(queries, where, qrels, qrels_files)
    return Benchmark(
        name=name, layout=layout, revision=revision, setting=setting, corpus=corpus,
        queries=queries, qrels=qrels, source=str(root), is_sample=is_sample,
        meta={
            "query_order": "query-first" if setting == "order-sensitivity" else "instruction-first",
            "files": {
                "queries": [p.relative_to(root).as_posix() for p in query_files],
                "qrels": [p.relative_to(root).as_posix() for p in qrels_files],
                "corpus": [p.relative_to(root).as_posix() for p in corpus.paths],
            },
        },
    )


# --- query-file shapes ---------------------------------------------------------------------

def _text(rec: dict, path: Path, n: int) -> str:
    return field_str(rec, "text", path, n).strip()


def _origin_query(rec: dict, path: Path, n: int, *, required: bool) -> str:
    """``metadata.origin_query`` (a dict, or a JSON string as Parquet exports may hold it)."""
    meta = rec.get("metadata")
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except (ValueError, RecursionError):  # no JSON, too deep, or an int of more than 4300 digits
            raise FormatError(path, n, "metadata", "not a JSON object") from None
    origin = meta.get("origin_query") if isinstance(meta, dict) else None
    return field_str({"metadata.origin_query": origin}, "metadata.origin_query", path, n,
                     required=required).strip()


def _split_sep(text: str, path: Path, n: int) -> tuple[str, str]:
    head, sep, tail = text.partition(_SEP)
    if not sep:
        raise FormatError(path, n, "text", f"no '{_SEP}' between instruction and query")
    return head.strip(), tail.strip()


def _bare(rec: dict, path: Path, n: int) -> tuple[str, str]:
    """``only_queries.jsonl`` and MTEB ``queries``: the text is the bare query."""
    return _text(rec, path, n), ""


def _instruction_only(rec: dict, path: Path, n: int) -> tuple[str, str]:
    """``only_instruction_queries.jsonl``: text = instruction, ``metadata.origin_query`` = query."""
    return _origin_query(rec, path, n, required=True), _text(rec, path, n)


def _instruction_first(rec: dict, path: Path, n: int) -> tuple[str, str]:
    """``"<instruction> [SEP] <query>"`` (``queries.jsonl``, prompt-sensitivity files); an
    ``origin_query`` in the metadata must equal the query part."""
    instruction, query = _split_sep(_text(rec, path, n), path, n)
    origin = _origin_query(rec, path, n, required=False)
    if origin and origin != query:
        raise FormatError(path, n, "text",
                          f"query part {quoted(query)} differs from metadata.origin_query {quoted(origin)}")
    return query, instruction


def _query_first(rec: dict, path: Path, n: int) -> tuple[str, str]:
    """``"] <query> [SEP] <instruction> ["`` (order sensitivity): the brackets are stray
    leftovers of the authors' string building and are dropped."""
    return _split_sep(_text(rec, path, n).removeprefix("]").removesuffix("["), path, n)


_ANALYSIS_SETTINGS: dict[str, tuple[str, _Shape, str]] = {
    "query-only": ("only_queries.jsonl", _bare, "qrels/for_only_query_test.tsv"),
    "order-sensitivity": ("analysis_order_sensitivity/new_queries.jsonl", _query_first, "qrels/test.tsv"),
    "prompt-sensitivity": ("analysis_prompt_sensitivity/og_queries.jsonl", _instruction_first,
                           "analysis_prompt_sensitivity/qrels/test.tsv"),
    "prompt-paraphrases": ("analysis_prompt_sensitivity/5new_queries.jsonl", _instruction_first,
                           "analysis_prompt_sensitivity/qrels/5_test.tsv"),
}


# --- files and layouts -----------------------------------------------------------------------

def _require(root: Path, patterns: tuple[str, ...], setting: str, layout: str, hint: str = "") -> list[Path]:
    return require_files(root, patterns, f"setting {setting!r} (layout {layout!r})", hint)


def _detect_layout(root: Path) -> str:
    if any((root / marker).is_file() for marker in _GITHUB_MARKERS):
        return "github"
    if find_files(root, _INSTRUCTIONS):
        return "mteb"
    if find_files(root, _QUERIES):
        return "hf"
    raise FormatError(root, None, None, (
        "no InstructIR files recognised; expected only_instruction_queries.jsonl (GitHub release), "
        "queries.jsonl + corpus.jsonl + qrels/test.tsv (Hugging Face kaist-ai/InstructIR), or "
        "corpus/, queries/, instruction/, data/ (mteb/InstructIR-mteb)"))


def _corpus(root: Path, setting: str, layout: str) -> Corpus:
    """The corpus of any layout: its files (one, or a config's shards) by the shared finder, read by
    :func:`jsonl_corpus` (no document, or an id in two files, is refused there)."""
    hint = ("; the GitHub release has no corpus: put corpus.jsonl from Hugging Face "
            "kaist-ai/InstructIR beside its files") if layout == "github" else ""
    return jsonl_corpus(_require(root, _CORPUS, setting, layout, hint))


def _read_queries(paths: list[Path], shape: _Shape) -> tuple[dict[str, Query], _Where]:
    """Query instances in file order, with the (file, line) of each for later messages."""
    queries: dict[str, Query] = {}
    where: _Where = {}
    for path in paths:
        for n, rec in read_records(path):
            qid = field_str(rec, "_id", path, n)
            check_unique(where, qid, path, n, "_id")
            query, instruction = shape(rec, path, n)
            if not query:
                raise FormatError(path, n, "text", "empty query")
            if shape is not _bare and not instruction:
                raise FormatError(path, n, "text", "empty instruction")
            queries[qid] = Query(id=qid, query=query, instruction=instruction, group=group_of(qid))
    if not queries:
        raise FormatError(paths[0], None, None, "no queries found")
    return queries, where


def _instructed(root: Path, layout: str) -> tuple[dict[str, Query], _Where, list[Path], list[Path]]:
    """Instances, their locations, query files and qrels files of the instructed setting."""
    if layout == "mteb":
        query_files = _require(root, _QUERIES, "instructed", layout)
        instruction_files = _require(root, _INSTRUCTIONS, "instructed", layout)
        bare, where = _read_queries(query_files, _bare)
        queries = _attach_instructions(bare, where, instruction_files)
        return queries, where, query_files + instruction_files, _require(root, _MTEB_QRELS, "instructed", layout)
    if layout == "github":
        query_files = _require(root, (_GITHUB_INSTRUCTIONS,), "instructed", layout)
        queries, where = _read_queries(query_files, _instruction_only)
        combined_files = find_files(root, _QUERIES)
        if combined_files:
            _check_agree(queries, query_files[0], *_read_queries(combined_files, _instruction_first))
            query_files = query_files + combined_files
    else:
        query_files = _require(root, _QUERIES, "instructed", layout)
        queries, where = _read_queries(query_files, _instruction_first)
    return queries, where, query_files, _require(root, _TEST_QRELS, "instructed", layout)


def _attach_instructions(bare: dict[str, Query], where: _Where, paths: list[Path]) -> dict[str, Query]:
    """MTEB keeps instructions in their own config (``query-id``, ``instruction``)."""
    instructions = read_instructions(paths, where)
    return {qid: Query(id=q.id, query=q.query, instruction=instructions[qid][0].strip(), group=q.group)
            for qid, q in bare.items()}


def _check_agree(primary: dict[str, Query], primary_path: Path, other: dict[str, Query], where: _Where) -> None:
    """``queries.jsonl`` beside the GitHub files must hold the same instances."""
    for qid, q in other.items():
        path, n = where[qid]
        p = primary.get(qid)
        if p is None:
            raise FormatError(path, n, "_id", f"instance {quoted(qid)} is not in {primary_path.name}")
        if (p.query, p.instruction) != (q.query, q.instruction):
            raise FormatError(path, n, "text", f"instance {quoted(qid)} disagrees with {primary_path.name} "
                                               "(instruction or query differs)")
    missing = [qid for qid in primary if qid not in other]
    if missing:
        path = next(iter(where.values()))[0]
        raise FormatError(path, None, "_id", f"{len(missing)} instances of {primary_path.name} are missing "
                                             f"(first: {quoted(missing[0])})")


def _check_judged(queries: dict[str, Query], where: _Where, qrels: Qrels, qrels_files: list[Path]) -> None:
    for qid in queries:
        if qid not in qrels:
            path, n = where[qid]
            names = ", ".join(p.name for p in qrels_files)
            raise FormatError(path, n, "_id", f"instance {quoted(qid)} has no judgments in {names}")
