"""What every stage's files and every HTML page of a report folder were made from, so that the
lab, plain papermill, the CLI and ``instir run`` writing one folder can never leave an index
that says "ok" over pages that disagree.

Two sections of the folder's record (:mod:`instir.report.record`):

- ``stages``: per notebook (the stage it calls), its last runs, newest first: the parameters
  it was called with, the digest of each earlier stage's folder it read (:data:`READS`), the
  digest of the folder it wrote and of each of its tables, when, and which front end ran it.
- ``pages``: per notebook, the HTML page of the folder and the stage run it shows.

:func:`stale_pages` compares them with the files as they are now: a page showing an older run of
its stage than the last one, and a stage whose inputs were rewritten after it read them (or whose
own files were changed by something else), are stale, each with the reason and what differs.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from instir import atomic
from instir.report.record import WRITES, Record, read_record, update_record
from instir.stamps import utc_now

#: Runs of a stage kept in the record (to name the parameters an older page or input came from).
HISTORY = 8

#: The earlier stages' folders each stage reads (the folder each writes: :data:`instir.report.record.WRITES`).
READS = {"01_data_exploration": (), "02_retrieval": (), "03_metrics": ("runs",),
         "04_judge_validation": ("runs", "metrics"), "05_paper_tables": ("runs", "metrics", "judge")}


def folder_tables(folder: Path) -> dict[str, str]:
    """The SHA-256 of each of a stage folder's tables (its top-level ``.csv`` files, by name: ``runs.csv``
    lists every run and changes with any of them, so the run files themselves, which reach gigabytes at
    real size, are never read here)."""
    if not folder.is_dir():
        return {}
    return {p.name: atomic.file_sha256(p) for p in sorted(folder.glob("*.csv"))
            if p.is_file() and not p.name.startswith(".")}


def folder_digest(folder: Path, tables: Mapping[str, str] | None = None) -> str | None:
    """SHA-256 over the names and digests of a stage folder's tables (``tables``, read when not given),
    None when the folder holds none."""
    tables = folder_tables(folder) if tables is None else tables
    if not tables:
        return None
    h = hashlib.sha256()
    for name, digest in tables.items():
        h.update(name.encode() + b"\0" + digest.encode() + b"\0")
    return h.hexdigest()


def set_aside_unrecorded(folder: Path, notebook: str) -> None:
    """Set aside (:func:`instir.atomic.set_aside`) each table of ``notebook``'s stage folder that its last
    recorded run did not leave there as it is now (a user's own file, or one edited since), before the
    stage writes the folder again: a stage replaces only what the kit can show it wrote."""
    stage_folder = folder / WRITES[notebook]
    found = folder_tables(stage_folder)
    last = (stage_records(folder).get(notebook) or [{}])[0]
    if not found or folder_digest(stage_folder, found) == last.get("output"):
        return
    made = last.get("tables") or {}
    for name in [name for name, digest in found.items() if made.get(name) != digest]:
        atomic.set_aside(stage_folder / name, f"{stage_folder / name} is not what {notebook}'s stage last wrote "
                         "there", "the stage writes its tables anew")


def stage_records(folder: str | Path, record: Record | None = None) -> dict[str, list[dict]]:
    """The ``stages`` of a report folder's record (``record``, read when not given): per notebook, its
    stage's runs, newest first."""
    record = read_record(folder) if record is None else record
    return {name: runs for name, runs in record.get("stages", {}).items() if runs}


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
                 inputs: Mapping[str, str | None]) -> dict:
    """Add a run of ``notebook``'s stage to the folder's record: its parameters, the digests of
    the folders it read (taken before it ran), the digests of the folder it wrote and its tables, who ran it."""
    written = folder / WRITES[notebook]
    tables = folder_tables(written)
    record = {"stamp": secrets.token_hex(8), "finished": utc_now("microseconds"), "by": by,
              "parameters": {name: _json_value(value) for name, value in parameters.items()},
              "inputs": dict(inputs), "output": folder_digest(written, tables), "tables": tables}
    records = stage_records(folder)
    records[notebook] = [record, *records.get(notebook, [])][:HISTORY]
    update_record(folder, stages=records)
    return record


def input_digests(folder: Path, notebook: str) -> dict[str, str | None]:
    """The digest of each folder ``notebook``'s stage reads, as it is now."""
    return {name: folder_digest(folder / name) for name in READS.get(notebook, ())}


def record_page(folder: Path, notebook: str, html: str) -> dict:
    """Note in the folder's record that ``html`` was rendered now from ``notebook``'s last stage
    run (none: a notebook without a stage, such as the tour)."""
    record = read_record(folder)
    runs = stage_records(folder, record).get(notebook) or [{}]
    page = {"html": html, "rendered": utc_now("microseconds"), "stamp": runs[0].get("stamp")}
    pages = page_records(folder, record)
    pages[notebook] = page
    update_record(folder, pages=pages)
    return page


@dataclass(frozen=True)
class Stale:
    """A notebook's page or files that disagree with the folder: ``reasons``, each one sentence."""

    notebook: str
    reasons: tuple[str, ...]


def _differences(old: Mapping[str, object], new: Mapping[str, object]) -> str:
    """``k 100 → 20; systems ['bm25', 'dense'] → ['bm25']`` (parameters that differ)."""
    def shown(value: object) -> str:
        return json.dumps(value, ensure_ascii=False)

    changed = [f"{name} {shown(old.get(name))} → {shown(new.get(name))}"
               for name in dict.fromkeys([*old, *new]) if old.get(name) != new.get(name)]
    return "; ".join(changed) if changed else "the same parameters"


def _described(run: dict) -> str:
    return f"at {str(run.get('finished', '?'))[:19].replace('T', ' ')} by {run.get('by', '?')}"


def stale_pages(folder: str | Path, record: Record | None = None) -> list[Stale]:
    """Every notebook of ``folder`` whose HTML page shows an older run of its stage than the
    folder's, whose stage read files an earlier stage has rewritten since, or whose own files were
    changed by something that recorded no run (in chain order), each with what differs (from
    ``record``, the folder's record, read once when not given)."""
    folder = Path(folder)
    record = read_record(folder) if record is None else record
    records, pages = stage_records(folder, record), page_records(folder, record)
    writer_of_folder = {name: notebook for notebook, name in WRITES.items()}
    stale = []
    for notebook in WRITES:
        runs = records.get(notebook)
        if not runs:
            continue
        last, reasons = runs[0], []
        page = pages.get(notebook)
        shows_older = bool(page and page.get("stamp") and page["stamp"] != last.get("stamp"))
        if shows_older and (folder / str(page.get("html"))).is_file():
            shown = next((run for run in runs if run.get("stamp") == page["stamp"]), None)
            what = _differences(shown["parameters"], last.get("parameters", {})) if shown else "parameters unknown"
            reasons.append(f"its page {page.get('html')} shows an earlier run; the stage ran again {_described(last)} "
                           f"({what})")
        if folder_digest(folder / WRITES[notebook]) != last.get("output"):
            reasons.append(f"{WRITES[notebook]}/ was changed after its last run ({_described(last)}) by a writer that "
                           "recorded none")
        for name, digest in (last.get("inputs") or {}).items():
            if folder_digest(folder / name) == digest:
                continue
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
