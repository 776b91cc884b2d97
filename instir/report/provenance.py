"""What every stage's files and every HTML page of a report folder were made from, so that the
lab, plain papermill, the CLI and ``instir run`` writing one folder can never leave an index
that says "ok" over pages that disagree.

Three sections of the folder's record (:mod:`instir.report.record`):

- ``stages``: per notebook (the stage it calls), its last runs, newest first: the parameters
  it was called with, the digest of each earlier stage's folder it read (:data:`READS`), the
  digest of the folder it wrote, when, and which front end ran it.
- ``pages``: per notebook, the HTML page of the folder and the stage run it shows.
- ``made``: per stage folder, the files the kit left there (:func:`replacing`); under ``.``, the executed
  notebooks and pages of the folder itself (:func:`record_page`).

:func:`stale_pages` compares them with the files as they are now: a page showing an older run of
its stage than the last one, and a stage whose inputs were rewritten after it read them (or whose
own files were changed by something else), are stale, each with the reason and what differs.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import secrets
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from instir import atomic
from instir.inputs import read_json
from instir.report.record import WRITES, Record, read_record, update_record
from instir.stamps import utc_now

#: Runs of a stage kept in the record (to name the parameters an older page or input came from).
HISTORY = 8

#: The earlier stages' folders each stage reads (the folder each writes: :data:`instir.report.record.WRITES`).
READS = {"01_data_exploration": (), "02_retrieval": (), "03_metrics": ("runs",),
         "04_judge_validation": ("runs", "metrics"), "05_paper_tables": ("runs", "metrics", "judge")}


def folder_digest(folder: Path) -> str | None:
    """SHA-256 over the names and bytes of a stage folder's tables (its top-level ``.csv`` files), None when it holds
    none; and, where a run the folder lists (``runs.csv``'s ``run_file``) is gone or changed since its sidecar, over
    those runs' names too, so the pages made from them read as stale. A run file, which reaches gigabytes at real
    size, is read only when it is newer than its sidecar (written last, :func:`instir.retrieval.runs.write_run`);
    a folder whose runs are as written keeps the digest of its tables alone, the one its record holds."""
    if not folder.is_dir():
        return None
    files = sorted(p for p in folder.glob("*.csv") if p.is_file() and not p.name.startswith("."))
    if not files:
        return None
    h = hashlib.sha256()
    for path in files:
        h.update(path.name.encode() + b"\0" + atomic.file_sha256(path).encode() + b"\0")
    for name, state in _runs_not_as_written(folder):
        h.update(f"run|{name}|{state}".encode() + b"\0")
    return h.hexdigest()


def _runs_not_as_written(folder: Path) -> list[tuple[str, str]]:
    """The runs ``folder/runs.csv`` lists that are gone or changed since their sidecar, with which; [] elsewhere."""
    from instir.retrieval.runs import read_sidecar, sidecar_path

    table = folder / "runs.csv"
    if not table.is_file():
        return []
    try:
        with table.open(encoding="utf-8", newline="") as fh:
            listed = sorted({row.get("run_file") or "" for row in csv.DictReader(fh)} - {""})
    except (OSError, UnicodeDecodeError, csv.Error):
        return []  # a damaged table: its own digest says it changed
    found = []
    for name in listed:
        path = folder.parent / name
        if not path.is_file():
            found.append((name, "gone"))
            continue
        try:
            newer = path.stat().st_mtime_ns > sidecar_path(path).stat().st_mtime_ns
        except OSError:  # a run without a sidecar (brought by the user): nothing to hold it against
            continue
        if newer and read_sidecar(path) is None:
            found.append((name, "changed since its sidecar"))
    return found


def _kit_paths(folder: Path) -> list[Path]:
    """The files of a report's stage ``folder`` that the kit may replace: in ``runs/``, its table (each run file
    has its sidecar); elsewhere every top-level file but hidden ones, those set aside and the judgment store's
    (``*.sqlite*``: :mod:`instir.sqlite_store` keeps its own)."""
    if not folder.is_dir():
        return []
    files = [folder / "runs.csv"] if folder.name == "runs" else folder.iterdir()
    return sorted(p for p in files if p.is_file() and not p.name.startswith(".") and atomic.ASIDE not in p.name
                  and ".sqlite" not in p.name)


def kit_files(folder: Path) -> dict[str, str]:
    """The SHA-256 of each file of a report's stage ``folder`` that the kit may replace (:func:`_kit_paths`), by
    name."""
    return {p.name: atomic.file_sha256(p) for p in _kit_paths(folder)}


def _inodes(folder: Path) -> dict[str, int]:
    """The inode of each of :func:`_kit_paths`, by name: a file the kit writes is a new one (an atomic replace)."""
    found = {}
    for path in _kit_paths(folder):
        with contextlib.suppress(OSError):
            found[path.name] = path.stat().st_ino
    return found


#: The stage folders of the report whose writes a :func:`replacing` block of this process covers.
_REPLACING: set[Path] = set()


def _left(folder: Path, inodes: Mapping[str, int], made: Mapping[str, str]) -> dict[str, str]:
    """What the kit has left in ``folder`` after a block that began with its files' ``inodes`` and ``made``: what
    the block wrote (a new file: the kit writes by atomic replace) and, of the rest, what it had noted."""
    written = {file for file, inode in _inodes(folder).items() if inodes.get(file) != inode}
    return {file: digest if file in written else made[file]
            for file, digest in kit_files(folder).items() if file in written or file in made}


def _names_to(value: object, kind: type) -> bool:
    """Whether ``value`` (from a journal) maps file names to values of ``kind``, as :func:`replacing` writes it."""
    return isinstance(value, dict) and all(atomic.plain_name(k) and type(v) is kind for k, v in value.items())


@contextlib.contextmanager
def replacing(root: Path, name: str) -> Iterator[None]:
    """Run a block that writes the stage folder ``name`` of report ``root``, keeping
    (:func:`instir.atomic.keeping`) each file there that the kit did not leave as it is now (a file of one's own,
    or one edited since) which the block replaces or removes; then, whether the block ended or failed, note in
    the record (``made``) what the kit left there (:func:`_left`). A journal beside the record holds the block's
    start until then, so the next block notes what a killed one wrote. A block within another for the same
    folder is the outer one's."""
    folder, journal = root / name, root / f".instir-replacing-{name}.json"
    if folder.resolve() in _REPLACING:
        yield
        return
    record, pending = read_record(root), read_json(journal)
    made = record.get("made", {}).get(name)
    if isinstance(pending, dict) and _names_to(pending.get("inodes"), int) and _names_to(pending.get("made"), str):
        made = _left(folder, pending["inodes"], pending["made"])  # a block killed before its end; else damaged
    found, inodes = kit_files(folder), _inodes(folder)
    if made is None:  # a record of an earlier version: the tables a stage wrote or read as they are are the kit's
        known = {run.get("output") if WRITES[notebook] == name else (run.get("inputs") or {}).get(name)
                 for notebook, runs in stage_records(root, record).items() for run in runs}
        vouched = folder_digest(folder) in known - {None}
        made = {file: digest for file, digest in found.items() if vouched and file.endswith(".csv")}
    foreign = [folder / file for file, digest in found.items() if made.get(file) != digest]
    _REPLACING.add(folder.resolve())
    atomic.set_aside_other(journal, "the journal of a stage's writes")  # a folder, a FIFO, a link: kept aside
    atomic.write_text(journal, json.dumps({"inodes": inodes, "made": made}))
    try:
        with atomic.keeping(foreign, f"{folder} held files the kit did not leave there as they are"):
            yield
    finally:
        _REPLACING.discard(folder.resolve())
        left, noted = _left(folder, inodes, made), read_record(root).get("made", {})
        with contextlib.suppress(OSError):  # unnoted, the kit's files are kept aside once more when replaced
            if left != noted.get(name, {}):
                update_record(root, made={**noted, name: left})
            journal.unlink(missing_ok=True)


def stage_records(folder: str | Path, record: Record | None = None) -> dict[str, list[dict]]:
    """The ``stages`` of a report folder's record (``record``, read when not given): per notebook, its
    stage's runs, newest first."""
    record = read_record(folder) if record is None else record
    return {name: runs for name, runs in record.get("stages", {}).items() if runs}


def incomplete_stages(folder: str | Path, record: Record | None = None, since: str | None = None) -> dict[str, list]:
    """What each notebook's newest stage run left incomplete (:attr:`~instir.report.record.StageRun.incomplete`), by
    notebook; ``since`` (an ISO time, such as an ``instir run``'s start): only the runs finished since then."""
    out = {}
    for name, runs in stage_records(folder, record).items():
        run = runs[0]
        try:
            recent = since is None or datetime.fromisoformat(run.get("finished", "")) >= datetime.fromisoformat(since)
        except ValueError:  # no time recorded: not this run's
            recent = False
        if run.get("incomplete") and recent:
            out[name] = list(run["incomplete"])
    return out


def page_records(folder: str | Path, record: Record | None = None) -> dict[str, dict]:
    """The ``pages`` of a report folder's record (``record``, read when not given): per notebook, its HTML
    page and the stage run it shows."""
    return dict((read_record(folder) if record is None else record).get("pages", {}))


def _json_value(value: object) -> object:
    """A parameter as the record holds it (a path or a spec as its text)."""
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError):
        return str(value)


def record_stage(folder: Path, notebook: str, parameters: Mapping[str, object], by: str,
                 inputs: Mapping[str, str | None], incomplete: Sequence[str] = ()) -> dict:
    """Add a run of ``notebook``'s stage to the folder's record: its parameters, the digests of
    the folders it read (taken before it ran), the digest of the folder it wrote, who ran it, and what
    it left incomplete (one line each)."""
    record = {"stamp": secrets.token_hex(8), "finished": utc_now("microseconds"), "by": by,
              "parameters": {name: _json_value(value) for name, value in parameters.items()},
              "inputs": dict(inputs), "output": folder_digest(folder / WRITES[notebook]),
              "incomplete": list(incomplete)}
    records = stage_records(folder)
    records[notebook] = [record, *records.get(notebook, [])][:HISTORY]
    update_record(folder, stages=records)
    return record


def input_digests(folder: Path, notebook: str) -> dict[str, str | None]:
    """The digest of each folder ``notebook``'s stage reads, as it is now."""
    return {name: folder_digest(folder / name) for name in READS.get(notebook, ())}


def record_page(folder: Path, notebook: str, html: str) -> dict:
    """Note in the folder's record that ``html`` was rendered now from ``notebook``'s last stage
    run (none: a notebook without a stage, such as the tour), and in ``made`` (under ``.``) that the kit left
    the page and its executed notebook as they are now (:func:`made_digest`)."""
    record = read_record(folder)
    runs = stage_records(folder, record).get(notebook) or [{}]
    page = {"html": html, "rendered": utc_now("microseconds"), "stamp": runs[0].get("stamp")}
    pages = page_records(folder, record)
    pages[notebook] = page
    update_record(folder, pages=pages, made=_noted(record, [folder / html, folder / f"{notebook}.ipynb"]))
    return page


def note_made(folder: Path, paths: Iterable[Path]) -> None:
    """Note in ``made`` (under ``.``) that the kit left report files ``paths`` as they are now: an executed
    notebook it published without a page (a run interrupted)."""
    update_record(folder, made=_noted(read_record(folder), paths))


def _noted(record: Record, paths: Iterable[Path]) -> dict:
    """The record's ``made`` with ``paths`` (report files, those that exist) noted under ``.``."""
    made = record.get("made", {})
    return {**made, ".": {**made.get(".", {}), **{path.name: made_digest(path) for path in paths if path.is_file()}}}


#: The tag of the cells papermill adds to an executed notebook whose run failed (its ``ERROR_MARKER_TAG``).
PAPERMILL_ERROR_TAG = "papermill-error-cell-tag"


def made_digest(path: Path) -> str:
    """What ``made`` holds of a report's page: the SHA-256 of its bytes; of an executed notebook, of its cells
    (each one's type and source, the parameters papermill injected included) but the error notes papermill adds
    to a run that failed, because papermill saves the notebook once more after the last cell has noted it (adding
    outputs and times), a failed run writes the same cells, and only an edit changes one."""
    try:
        cells = json.loads(path.read_bytes())["cells"] if path.suffix == ".ipynb" else None
        kept = None if cells is None else [[c["cell_type"], "".join(c["source"])] for c in cells
                                           if PAPERMILL_ERROR_TAG not in c.get("metadata", {}).get("tags", [])]
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        kept = None
    if kept is None:
        return atomic.file_sha256(path)
    return "cells:" + hashlib.sha256(json.dumps(kept).encode()).hexdigest()


@contextlib.contextmanager
def keeping_edits(folder: Path, paths: Iterable[Path]) -> Iterator[None]:
    """Run a block that replaces or removes report files ``paths`` (executed notebooks, pages), keeping those the
    record does not show the kit left as they are (:func:`unvouched`) as :func:`instir.atomic.keeping` keeps them."""
    with atomic.keeping(unvouched(folder, paths), f"{folder} held a notebook or page the kit cannot show it left "
                                                  "as it is (edited since, or not noted in its record)"):
        yield


def unvouched(folder: Path, paths: Iterable[Path]) -> list[Path]:
    """Those of ``paths`` (a report folder's executed notebooks and pages) that exist and that the record's ``made``
    does not note as the kit left them (:func:`record_page`): edited since, or never noted (a record damaged,
    missing or from before pages were noted), so not the kit's to replace."""
    own = read_record(folder).get("made", {}).get(".", {})
    return [path for path in paths if path.is_file() and own.get(path.name) != made_digest(path)]


@dataclass(frozen=True)
class Stale:
    """A notebook's page or files that disagree with the folder: ``reasons``, each one sentence."""

    notebook: str
    reasons: tuple[str, ...]


def _differences(old: Mapping[str, object], new: Mapping[str, object]) -> str:
    """``k 100 → 20; systems ['bm25', 'dense'] → ['bm25']`` (parameters that differ; an empty text, a notebook's way
    of leaving a parameter unset, is no different from the API's None or a parameter not given)."""
    def shown(value: object) -> str:
        return json.dumps(value, ensure_ascii=False)

    def unset(value: object) -> object:
        return None if value == "" else value

    changed = [f"{name} {shown(old.get(name))} → {shown(new.get(name))}"
               for name in dict.fromkeys([*old, *new]) if unset(old.get(name)) != unset(new.get(name))]
    return "; ".join(changed) if changed else "the same parameters"


def _described(run: dict) -> str:
    return f"at {str(run.get('finished', '?'))[:19].replace('T', ' ')} by {run.get('by', '?')}"


def rewritten_inputs(folder: str | Path, notebook: str, record: Record | None = None) -> list[str]:
    """The stage folders (:data:`READS`) that ``notebook``'s stage last read and that were written again since (their
    digest differs): what it computed came from other files than the folder holds now. Empty when it never ran or
    read nothing."""
    runs = stage_records(folder, record).get(notebook)
    inputs = (runs[0].get("inputs") or {}) if runs else {}
    return [name for name, digest in inputs.items() if folder_digest(Path(folder) / name) != digest]


def stale_pages(folder: str | Path, record: Record | None = None) -> list[Stale]:
    """Every notebook of ``folder`` whose HTML page is gone or was changed since the kit rendered it, shows an older
    run of its stage than the folder's, whose stage read files an earlier stage has rewritten since, or whose own
    files were changed by something that recorded no run (in chain order), each with what differs (from
    ``record``, the folder's record, read once when not given)."""
    folder = Path(folder)
    record = read_record(folder) if record is None else record
    records, pages = stage_records(folder, record), page_records(folder, record)
    writer_of_folder = {name: notebook for notebook, name in WRITES.items()}
    stale = []
    own = record.get("made", {}).get(".", {})
    for notebook in dict.fromkeys([*WRITES, *pages]):
        page, reasons = pages.get(notebook), []
        if page and isinstance(page.get("html"), str) and page["html"] in own:  # the kit noted the page it rendered
            shown = folder / page["html"]
            if not shown.is_file():
                reasons.append(f"its page {page['html']} is gone")
            elif made_digest(shown) != own[page["html"]]:
                reasons.append(f"its page {page['html']} was changed after the kit rendered it")
        runs = records.get(notebook) if notebook in WRITES else None
        if not runs:
            if reasons:
                stale.append(Stale(notebook, tuple(reasons)))
            continue
        last = runs[0]
        shows_older = bool(page and page.get("stamp") and page["stamp"] != last.get("stamp"))
        if shows_older and (folder / str(page.get("html"))).is_file():
            shown = next((run for run in runs if run.get("stamp") == page["stamp"]), None)
            what = _differences(shown["parameters"], last.get("parameters", {})) if shown else "parameters unknown"
            reasons.append(f"its page {page.get('html')} shows an earlier run; the stage ran again {_described(last)} "
                           f"({what})")
        if folder_digest(folder / WRITES[notebook]) != last.get("output"):
            reasons.append(f"{WRITES[notebook]}/ was changed after its last run ({_described(last)}) by a writer that "
                           "recorded none")
        for name in rewritten_inputs(folder, notebook, record):
            digest = last["inputs"][name]
            producer = writer_of_folder[name]  # the record's schema admits only the stages' folders
            made = records.get(producer) or []
            read = next((run for run in made if run.get("output") == digest), None)
            what = (f" ({_differences(read['parameters'], made[0].get('parameters', {}))})"
                    if read and made else "")
            reasons.append(f"it read {name}/, which {producer} wrote again {_described(made[0]) if made else 'since'}"
                           f"{what}")
        if reasons:
            stale.append(Stale(notebook, tuple(reasons)))
    return stale
