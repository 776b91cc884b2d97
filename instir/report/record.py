"""The one record of a report folder, ``report.json``: one typed schema (:class:`Record`), one writer
(:func:`update_record`: atomic, each writer replacing only its own sections) and one reader
(:func:`read_record`) that never raises into a run, a stage or the index.

Sections, each written by one part of the kit:

- the run (``status``, ``parameters``, ``notebooks`` …): what ``instir run`` ran (:mod:`instir.pipeline`);
- ``stages`` and ``pages``: what each stage's files and each HTML page were made from
  (:mod:`instir.report.provenance`);
- ``datasets``: the benchmarks the notebooks loaded, by name (:func:`instir.report.manifest.record_dataset`);
- ``sweep``: the last sweep's cells (:mod:`instir.distributed.cells`);
- ``made``: what the kit left in each stage folder, file by file (:func:`instir.report.provenance.replacing`),
  and of the folder's executed notebooks and pages (:func:`instir.report.provenance.record_page`).

A record that cannot be read (not JSON, not an object) reads as empty, and a section, or an entry of one, that
does not fit the schema (a wrong type, an infinite time, an unknown stage folder) is left out, with one warning
naming the file and what was left out (a key that is no section, a newer kit's or another tool's, is never read and
is written back as it is): a damaged folder never blocks another report, and the next writer remakes
the record. A ``report.json`` the kit cannot have written (another tool's: a JSON list, or an object holding none of
the sections; a folder, a FIFO, a symlink) is set aside by the next writer (:func:`instir.atomic.set_aside`), with a
warning.
"""

from __future__ import annotations

import functools
import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    TypeAdapter,
    ValidationError,
    WrapValidator,
)

from instir import atomic
from instir.errors import quoted
from instir.inputs import file_problem

#: The record's file in each report folder.
REPORT_FILE = "report.json"
#: The largest record read (a real one holds kilobytes): a larger file is not instir's record.
MAX_RECORD_BYTES = 64 << 20
#: The folder each notebook's stage writes, in chain order (the names ``stages[...].inputs`` may hold).
WRITES = {"01_data_exploration": "data", "02_retrieval": "runs", "03_metrics": "metrics",
          "04_judge_validation": "judge", "05_paper_tables": "paper_tables"}
#: The folders a stage run may name among its inputs.
StageFolder = Literal[tuple(WRITES.values())]  # type: ignore[valid-type]
#: A folder of ``made``: a stage folder, or ``.`` for the report folder's own executed notebooks and pages.
MadeIn = Literal[(".", *WRITES.values())]  # type: ignore[valid-type]


class RecordWarning(UserWarning):
    """A report record (or a section of it) that could not be read and was left out."""


class _Part(BaseModel):
    """A part of a section: its fields typed, no infinity or NaN; keys it does not name are kept as they are."""

    model_config = ConfigDict(extra="allow", allow_inf_nan=False)


def _in_folder(name: str) -> str:
    """A file name in the report folder itself (no path: an edited record cannot link outside it)."""
    if name and not atomic.plain_name(name):
        raise ValueError(f"{name!r} is not a file name in the report folder")
    return name


#: A file of the report folder, by its name there.
FileName = Annotated[str, AfterValidator(_in_folder)]


class NotebookEntry(_Part):
    """One notebook ``instir run`` ran: file names relative to the folder, its status and times."""

    name: str
    source: str = ""
    executed: FileName = ""
    html: FileName | None = None
    wall_s: float | None = None
    render_s: float | None = None
    status: str = "unknown"
    error: str | None = None


class Manifest(_Part):
    """The environment a run ran in (:func:`instir.report.manifest.environment_manifest`)."""

    python: str = ""
    platform: str = ""
    packages: dict[str, str | None] = Field(default_factory=dict)
    models: list[dict[str, str | None]] = Field(default_factory=list)
    git: dict[str, str | bool | None] | None = None
    created: str = ""


class StageRun(_Part):
    """One run of a notebook's stage: its parameters, the digests of the folders it read and wrote, who ran it, and
    what it left incomplete (one line each; the judge stage's failed judgments), which ends ``instir run`` with
    status 1."""

    stamp: str | None = None
    finished: str = ""
    by: str = ""
    parameters: dict[str, Any] = Field(default_factory=dict)
    inputs: dict[StageFolder, str | None] = Field(default_factory=dict)
    output: str | None = None
    incomplete: list[str] = Field(default_factory=list)


class Page(_Part):
    """A notebook's HTML page and the stage run (``stamp``) it shows."""

    html: FileName
    rendered: str = ""
    stamp: str | None = None


def _unknown_if_damaged(value: Any, handler: Any) -> Any:
    """The value as its field holds it, or None (unknown) where it does not fit."""
    try:
        return handler(value)
    except ValidationError:
        return None


class Dataset(_Part):
    """A benchmark a notebook loaded: its revision, layout, source, whether it is a bundled sample, and whether
    it is the data the papers measured (``verified``; ``check`` says how it was verified or why not:
    :func:`instir.benchmarks.fetch.data_check`). A record of an earlier version has neither: unknown, as a
    damaged one is (``"verified": "maybe"`` keeps the benchmark, unverified, where dropping it would leave the
    others to say "verified")."""

    revision: str | None = None
    layout: str | None = None
    source: str | None = None
    sample: bool = False
    verified: Annotated[StrictBool | None, WrapValidator(_unknown_if_damaged)] = None
    check: Annotated[str | None, WrapValidator(_unknown_if_damaged)] = None


#: The sections and their types; the run's fields first.
SECTIONS: dict[str, Any] = {
    "status": str, "out_dir": str, "parameters": dict[str, Any], "defaults": dict[str, str], "show_code": bool,
    "kernel": str, "started": str, "manifest": Manifest, "planned": list[str],
    "notebooks": list[NotebookEntry], "wall_s": float, "finished": str | None, "error": str | None,
    "stages": dict[str, list[StageRun]], "pages": dict[str, Page], "datasets": dict[str, Dataset],
    "sweep": dict[str, Any], "made": dict[MadeIn, dict[FileName, str]],
}
#: The sections ``instir run`` writes: the run.
RUN_SECTIONS = tuple(name for name in SECTIONS if name not in ("stages", "pages", "datasets", "sweep", "made"))


@functools.lru_cache(maxsize=None)
def _adapter(kind: Any) -> TypeAdapter:
    """A validator of ``kind`` as the sections' (no infinite or missing number)."""
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        return TypeAdapter(kind)
    return TypeAdapter(kind, config=ConfigDict(allow_inf_nan=False))


#: (file, modification time) of the records already warned about, so a record read again is not warned twice.
_WARNED: set[tuple[str, int]] = set()


class Record(dict):
    """A report folder's record: ``{section: value}`` of the sections :data:`SECTIONS` names that were
    present and valid, as JSON holds them (plain dicts and lists); ``problem`` says what was left out."""

    problem: str | None = None
    #: the keys of the file that are no section of this kit's (a newer kit's, another tool's), as the file holds
    #: them: never read, written back as they are by :func:`update_record`
    others: Mapping[str, Any] = MappingProxyType({})  # read_record gives each record a dict of its own
    #: whether the file is another tool's (a JSON value that is not an object, or an object holding no section of
    #: instir's record): :func:`update_record` keeps it aside rather than write over it
    foreign: bool = False

    @property
    def is_run(self) -> bool:
        """Whether ``instir run`` wrote it (it lists notebooks), not only a stage, a sweep or the lab."""
        return "notebooks" in self and "status" in self


def record_path(folder: str | Path) -> Path:
    """The record file of ``folder``."""
    return Path(folder) / REPORT_FILE


def read_record(folder: str | Path) -> Record:
    """The record of ``folder``: empty when there is none or it is not a JSON object; its valid sections
    otherwise. What was left out is said once, in a :class:`RecordWarning` naming the file."""
    path = record_path(folder)
    problem = file_problem(path)  # a FIFO would block the read for ever, /dev/zero never end it
    if problem == "not found":
        return Record()
    if problem is None and path.stat().st_size > MAX_RECORD_BYTES:
        problem = f"larger than {MAX_RECORD_BYTES >> 20} MiB"
    if problem is not None:
        return _damaged(path, f"unreadable ({problem})")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Record()
    except (OSError, UnicodeDecodeError) as err:
        return _damaged(path, f"unreadable ({err})")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as err:
        return _damaged(path, f"not JSON ({err})")
    if not isinstance(data, dict):  # another tool's file: no record of instir's, nothing damaged
        _warn(path, f"not a JSON object (a {type(data).__name__}): not instir's record")
        record = Record()
        record.foreign = True
        return record
    record, dropped = Record(), []
    record.others, record.foreign = {}, bool(data) and not any(name in SECTIONS for name in data)
    for name, value in data.items():
        if name not in SECTIONS:  # another version's or another tool's key: kept out of the schema, never trusted
            try:
                json.dumps(value, ensure_ascii=False).encode("utf-8")  # one a record can hold again (no lone surrogate)
                record.others[name] = value
            except (ValueError, RecursionError):
                pass
            continue
        try:
            record[name] = _fitting(SECTIONS[name], value, name, dropped)
        except _UNFIT:
            dropped.append(name)
    if dropped:
        shown = ", ".join(dropped[:8]) + (f" and {len(dropped) - 8} more" if len(dropped) > 8 else "")
        _damaged(path, f"left out what does not fit instir's record: {shown}", record)
    return record


_UNFIT = (ValidationError, RecursionError, ValueError)


def _fitting(kind: Any, value: Any, where: str, dropped: list[str]) -> Any:
    """``value`` as the schema's ``kind`` holds it; of a mapping or a list that does not fit as a whole, the
    entries that do (entries of entries alike), the others named in ``dropped``: one damaged entry costs only itself
    (a stray key in ``made`` left every folder's files unvouched, one old stage run a stage's whole history).
    Raises what validation raises for anything else."""
    adapter = _adapter(kind)
    try:
        fitted = adapter.dump_python(adapter.validate_python(value), mode="json")
        json.dumps(fitted, ensure_ascii=False).encode("utf-8")  # a lone surrogate ("\ud800"): no record can hold it
        return fitted
    except _UNFIT:
        if not (get_origin(kind) is dict and isinstance(value, dict) or get_origin(kind) is list
                and isinstance(value, list)):
            raise
    *key_kind, item_kind = get_args(kind)
    kept: dict | list = {} if key_kind else []
    start = len(dropped)
    for key, item in value.items() if key_kind else enumerate(value):
        entry = f"{where}[{quoted(key)}]"
        try:
            if key_kind:
                _adapter(key_kind[0]).validate_python(key)
                kept[key] = _fitting(item_kind, item, entry, dropped)
            else:
                kept.append(_fitting(item_kind, item, entry, dropped))
        except _UNFIT:
            dropped.append(entry)
    if value and not kept:  # nothing fits: the whole is left out, named once
        del dropped[start:]
        raise ValueError(where)
    return kept



def update_record(folder: str | Path, **sections: Any) -> Record:
    """Write ``sections`` into ``folder``'s record (atomically, every other section as it was; a section
    given as None is removed) and return the record written. The caller holds the folder's lock."""
    unknown = set(sections) - set(SECTIONS)
    if unknown:
        raise ValueError(f"not sections of a report record: {', '.join(sorted(unknown))}")
    atomic.set_aside_other(record_path(folder), "instir's record")  # a folder, a FIFO, a link: kept aside
    record = read_record(folder)
    if record.foreign:
        atomic.set_aside(record_path(folder), f"{record_path(folder)} is another tool's file, not instir's record",
                         "the kit writes the folder's record there")
        record = Record()
    for name, value in sections.items():
        if value is None:
            record.pop(name, None)
        else:
            adapter = _adapter(SECTIONS[name])
            record[name] = adapter.dump_python(adapter.validate_python(value), mode="json")
    ordered = Record({name: record[name] for name in SECTIONS if name in record})
    atomic.write_text(record_path(folder), json.dumps({**ordered, **record.others}, indent=2, ensure_ascii=False))
    return ordered


def _damaged(path: Path, problem: str, record: Record | None = None) -> Record:
    """``record`` (empty by default) with ``problem`` set, said in a :class:`RecordWarning`."""
    record = Record() if record is None else record
    record.problem = problem
    _warn(path, f"{problem}; the next writer remakes it")
    return record


def _warn(path: Path, message: str) -> None:
    """``message`` about ``path`` in a :class:`RecordWarning`, once per version of the file."""
    try:
        key = (str(path), path.stat().st_mtime_ns)
    except OSError:
        key = (str(path), 0)
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(f"{path}: {message}", RecordWarning, stacklevel=4)
