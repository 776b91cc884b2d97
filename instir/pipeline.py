"""Batch reports: execute notebooks in order with papermill, render each to a self-contained
HTML page with nbconvert, record what ran (parameters, wall times, environment manifest)
in the report folder, and rebuild ``reports/index.html``.

Layout of one run (``out_dir = reports/NAME``)::

    reports/index.html          every report folder, rebuilt after each run
    reports/NAME/report.json    the folder's record: parameters, per-notebook status and times, manifest
    reports/NAME/01_x.ipynb     the executed notebook (kept, also when it failed)
    reports/NAME/01_x.html      its HTML page (code hidden unless show_code)

Notebooks run with ``out_dir`` as working directory and exchange data only through files
there. A failing notebook stops the chain: its executed notebook and HTML (code shown) are
kept, the index is written, and :class:`NotebookFailed` names notebook, cell and exception.
Secrets never travel as parameters (:func:`check_parameters`); notebooks read keys from the
environment themselves.
"""

from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from instir import atomic
from instir.errors import UsageError, quoted, shorten, unknown
from instir.inputs import expanded, file_problem, read_head
from instir.parameters import home_path
from instir.report.index import INDEX_FILE, check_index_owned, index_folder, write_index
from instir.report.layout import NOTEBOOK_PATTERN, check_report_folder, text_path, user_path
from instir.report.lock import FolderLock
from instir.report.manifest import environment_manifest
from instir.report.provenance import keeping_edits, note_made, record_page, stage_records
from instir.report.record import RUN_SECTIONS, NotebookEntry, update_record
from instir.secrets import leaked_secret, refuse_url_credentials, require_env_name
from instir.stamps import utc_now
from instir.terminal import terminal_text

if TYPE_CHECKING:
    from instir.stages.request import RunRequest

#: nbconvert template (under instir/report/templates) without CDN scripts
TEMPLATE_DIR = Path(__file__).resolve().parent / "report" / "templates"
TEMPLATE_NAME = "instir_offline"

#: parameter names that look like credentials (``api_key``, ``hf_token``, ``password`` …)
SECRET_NAME = re.compile(
    r"(?:^|[_.-])(?:api[_-]?key|key|token|secret|password|passwd|credentials?|auth)(?:$|[_.-])", re.IGNORECASE
)

#: Notebook parameters that name a folder: resolved where the user typed them (``instir run``),
#: absolute for the kernels, and written with the home folder as ``~`` into report.json and the index.
PATH_PARAMETERS = ("out_dir", "data_root")


@dataclass
class ReportResult:
    """A report run: its folder, parameters, the notebooks it will run (``planned``) and those
    it ran (in order), total wall time, environment manifest and status (``running``, ``ok``,
    ``failed`` or ``interrupted`` by Ctrl-C; the index says ``interrupted`` also for a ``running`` one no
    process holds)."""

    out_dir: Path
    parameters: dict
    defaults: dict
    show_code: bool
    kernel: str
    started: str
    manifest: dict
    planned: list[str] = field(default_factory=list)
    notebooks: list[NotebookEntry] = field(default_factory=list)
    wall_s: float = 0.0
    finished: str | None = None
    status: str = "running"
    error: str | None = None

    @property
    def index(self) -> Path:
        """The ``index.html`` that lists this report (:func:`instir.report.index.index_folder`:
        beside ``out_dir`` in a reports root, else inside it)."""
        return index_folder(self.out_dir) / INDEX_FILE

    def to_json(self) -> dict:
        """The run as the folder's record holds it (:func:`_save`)."""
        data = {**asdict(self), "notebooks": [entry.model_dump() for entry in self.notebooks]}
        data["out_dir"] = home_path(self.out_dir)
        for name in PATH_PARAMETERS:  # a report may be published: no user's home folder in it
            if isinstance(data["parameters"].get(name), str) and data["parameters"][name]:
                data["parameters"][name] = home_path(data["parameters"][name])
        return data


class NotebookFailed(RuntimeError):
    """A notebook of the chain raised: the message names the notebook, the cell and the
    exception; ``result`` is the report so far (the failed notebook last)."""

    def __init__(self, message: str, result: ReportResult):
        super().__init__(message)
        self.result = result


def check_parameters(parameters: Mapping[str, object]) -> None:
    """Refuse parameters that could carry a secret into notebooks, outputs or HTML: a name
    that looks like a key/token/password; a value containing something shaped like an API key
    (a known key prefix) or the value of an environment variable whose name says KEY, TOKEN, SECRET, PASSWORD, PASSWD
    or CREDENTIAL, in any of its forms (:func:`instir.secrets.leaked_secret`). A name
    ending in ``_env`` (such as ``judge_api_key_env``) is allowed when its value is an
    environment variable's *name* that does not itself look like a key
    (:func:`instir.secrets.require_env_name`): that is how notebooks learn where to read a key.
    A URL with credentials in it (user-info, a key-like query parameter) is refused too
    (:func:`instir.secrets.refuse_url_credentials`). Also refuses values JSON cannot hold (NaN and infinity
    among them: a notebook would read ``nan`` as a name it does not know). Messages name the parameter or
    variable, never the value."""
    if not isinstance(parameters, Mapping):
        raise UsageError(f"parameters are a mapping {{name: value}}, got a {type(parameters).__name__}")
    for name, value in parameters.items():
        for item in value if isinstance(value, list) else [value]:
            refuse_url_credentials(item, f"parameter {name!r}")
        if str(name).endswith("_env"):
            require_env_name(value, f"parameter {name!r}")
        elif SECRET_NAME.search(str(name)):
            raise UsageError(f"parameter {name!r} looks like a secret; pass keys through environment variables only")
    try:
        json.dumps(dict(parameters), allow_nan=False)
    except (TypeError, ValueError) as err:  # ValueError: NaN, an int of more digits than Python writes, or a circle
        said = "a number of more than 4300 digits" if "4300" in str(err) else str(err)
        raise UsageError(f"parameters must be JSON values (strings, numbers, lists, dicts): {said}") from None
    for name, value in parameters.items():
        found = leaked_secret(json.dumps(value, ensure_ascii=False))  # non-ASCII text as it is, not \u-escaped
        if found:
            raise UsageError(f"parameter {name!r} contains {found}; secrets are read from the environment by the "
                             "notebooks, never passed as parameters")


#: The largest output (characters of its text, or of all its representations together: an image's base64 and its
#: ``text/plain``) a page embeds: a larger one is left out of the page with a note naming the executed notebook
#: that keeps it, so rendering stays bounded in time and memory (nbconvert takes minutes and gigabytes over a
#: 100 MB image or 50 MB of text).
MAX_EMBEDDED_OUTPUT = 2_000_000
#: The most characters of outputs one page embeds in all: past it each further output is left out with a note, as
#: one over :data:`MAX_EMBEDDED_OUTPUT` is (sixty images of 1.9 MB each made a 112 MB page, rendered at 1 GB).
MAX_EMBEDDED_PAGE = 10 * MAX_EMBEDDED_OUTPUT
#: The most outputs one page embeds: each costs nbconvert about half a millisecond whatever its size (50,000 outputs
#: of a few characters took 27 s to render).
MAX_EMBEDDED_OUTPUTS = 10_000


def _output_size(output) -> int:
    """Characters an output would put into a page: its text, each of its representations, its traceback."""
    if output.get("output_type") == "stream":
        return len(output.get("text", ""))
    if output.get("output_type") == "error":
        return sum(len(line) for line in output.get("traceback", []))
    return sum(len(value) if isinstance(value, str) else len(json.dumps(value)) for value in
               output.get("data", {}).values())


def _bounded(notebook, executed: Path):
    """``notebook`` with every output over :data:`MAX_EMBEDDED_OUTPUT` replaced by a one-line note, and the outputs
    past the page's :data:`MAX_EMBEDDED_PAGE` characters or :data:`MAX_EMBEDDED_OUTPUTS` outputs in all by one note
    per cell; without its saved widget state (the page has no widget manager to read it: 50 MB of it were copied
    into the page whole)."""
    import nbformat

    def note(text: str):
        return nbformat.v4.new_output("stream", name="stdout", text=f"[{text}]\n")

    notebook.metadata.pop("widgets", None)
    embedded = shown = 0
    for number, cell in enumerate(notebook.cells, start=1):
        if not cell.get("outputs"):
            continue
        kept, left, left_size = [], 0, 0
        for output in cell.outputs:
            size = _output_size(output)
            if size > MAX_EMBEDDED_OUTPUT:
                kept.append(note(f"An output of {size:,} characters is left out of this page (more than "
                                 f"{MAX_EMBEDDED_OUTPUT:,}); it is in {executed.name}, cell {number}."))
            elif embedded + size > MAX_EMBEDDED_PAGE or shown >= MAX_EMBEDDED_OUTPUTS:
                left, left_size = left + 1, left_size + size
            else:
                embedded, shown = embedded + size, shown + 1
                kept.append(output)
        if left:  # one note for them all: 300,000 small outputs past the bound made 300,000 notes
            kept.append(note(f"{left:,} output(s) of {left_size:,} characters in all are left out of this page (it "
                             f"holds {MAX_EMBEDDED_PAGE:,} characters of outputs or {MAX_EMBEDDED_OUTPUTS:,} outputs "
                             f"at most); they are in {executed.name}, cell {number}."))
        cell.outputs = kept
    return notebook


def render_html(executed: Path, html_path: Path, *, show_code: bool = False) -> Path:
    """Render an executed notebook to one self-contained HTML file (inline CSS and images,
    no CDN scripts); code cells and prompts are left out unless ``show_code`` or the notebook
    asks to show them (metadata ``instir.show_code``: the tour, whose code is what it teaches).
    An output over :data:`MAX_EMBEDDED_OUTPUT`, or past :data:`MAX_EMBEDDED_PAGE` characters or
    :data:`MAX_EMBEDDED_OUTPUTS` outputs in all, is left out with a note saying where it is.
    The page links to the index that lists its folder (:func:`instir.report.index.index_folder`)."""
    import nbformat
    from nbconvert import HTMLExporter

    notebook = _bounded(nbformat.read(executed, as_version=4), executed)
    show_code = show_code or bool(notebook.metadata.get("instir", {}).get("show_code"))
    index = "../index.html" if index_folder(html_path.parent) != html_path.parent else "index.html"

    exporter = HTMLExporter(
        template_name=TEMPLATE_NAME,
        extra_template_basedirs=[str(TEMPLATE_DIR)],
        exclude_input=not show_code,
        exclude_input_prompt=not show_code,
        exclude_output_prompt=not show_code,
    )
    resources = {"instir_index": index, "metadata": {"name": executed.stem, "path": str(executed.parent)}}
    body, _ = exporter.from_notebook_node(notebook, resources=resources)
    atomic.write_text(html_path, body)  # a full disk leaves no truncated page (the error names it)
    return html_path


@dataclass(frozen=True)
class NotebookParameter:
    """One parameter of a chain's parameters cells: ``default`` as written in the cell, its
    ``kind`` (``int``, ``float``, ``bool``, ``str``, ``list``, ``dict``; ``""`` when the default
    says nothing, e.g. ``None``), the cell's comment as ``help``, and the notebooks that take it."""

    name: str
    default: str
    kind: str
    help: str
    notebooks: tuple[str, ...]

    @property
    def value(self) -> object:
        """The default as a Python value (``None`` when it is not a literal)."""
        try:
            return ast.literal_eval(self.default)
        except (ValueError, SyntaxError):
            return None


#: parameter kinds, by the type of a literal default
_KINDS = {bool: "bool", int: "int", float: "float", str: "str", list: "list", tuple: "list", dict: "dict"}


def notebook_parameters(notebooks: Sequence[Path]) -> dict[str, NotebookParameter]:
    """Every parameter of the notebooks' parameters cells (papermill's reading of them), first
    definition first; its kind is the cell's annotation (``k: int = 10``) or else the type of
    its literal default."""
    import papermill

    found: dict[str, NotebookParameter] = {}
    for path in notebooks:
        try:
            inspected = papermill.inspect_notebook(str(path))
        except Exception as err:  # noqa: BLE001 - nbformat raises several kinds for a file that is no notebook
            raise UsageError(f"{path}: not a notebook papermill can read ({type(err).__name__}: "
                             f"{' '.join(str(err).split())[:200]})") from None
        for name, info in inspected.items():
            if name in found:
                found[name] = replace(found[name], notebooks=(*found[name].notebooks, path.name))
                continue
            annotated = info["inferred_type_name"]
            param = NotebookParameter(name, info["default"], "", info["help"], (path.name,))
            kind = annotated if annotated in _KINDS.values() else _KINDS.get(type(param.value), "")
            found[name] = replace(param, kind=kind)
    return found


#: parameters ``instir run`` sets itself (they need not be in a parameters cell)
PIPELINE_PARAMETERS = ("out_dir",)


def _is_kind(value: object, kind: str) -> bool:
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    types = {"bool": bool, "str": str, "list": list, "dict": dict}
    return kind not in types or isinstance(value, types[kind])


_KIND_WORDS = {"int": "a whole number", "float": "a number", "bool": "true or false", "str": "a string",
               "list": "a list", "dict": "a JSON object"}


def _shown(value: object) -> str:
    """``value`` as JSON writes it (``true``, ``null``), cut as :func:`~instir.errors.quoted` cuts a value; one JSON
    cannot write (an int of more than 4300 digits) as :func:`~instir.errors.quoted` shows it."""
    try:
        return shorten(json.dumps(value))
    except (TypeError, ValueError):
        return quoted(value)


def validate_parameters(parameters: Mapping[str, object], known: Mapping[str, NotebookParameter]) -> RunRequest:
    """Refuse, before any kernel starts, a parameter that no notebook of the chain takes (with
    the closest known name), a value of another kind than the default's, and whatever the run
    request the parameters make refuses (:func:`instir.stages.request.notebook_request`: a
    benchmark, retriever, system card or judge backend name that does not exist, a count below 1,
    a system given twice, a key where a variable name goes); returns that request."""
    from instir.stages.request import notebook_request

    for name, value in parameters.items():
        if name in PIPELINE_PARAMETERS:
            continue
        if name not in known:
            raise unknown("notebook parameter", name, known, more=" (see instir run --help)")
        param = known[name]
        if not _is_kind(value, param.kind):
            raise UsageError(f"parameter {name!r} expects {_KIND_WORDS[param.kind]} (default: {param.default}), "
                             f"got {_shown(value)}")
        if param.kind == "list" and param.value:
            element = _KINDS.get(type(param.value[0]), "")
            for item in value:
                if element and not _is_kind(item, element):
                    raise UsageError(f"parameter {name!r} expects a list of {element} values "
                                     f"(default: {param.default}), got {_shown(item)} in it")
    defaults = {name: param.value for name, param in known.items() if param.kind}
    return notebook_request({**defaults, **{k: v for k, v in parameters.items() if k not in PIPELINE_PARAMETERS}})


def check_judge_endpoint(values: Mapping[str, object], timeout_s: float = 5.0) -> None:
    """With ``judge_backend = "openai"``, refuse a ``judge_base_url`` where nothing answers within
    ``timeout_s`` (:func:`instir.judge.factory.require_reachable`)."""
    if values.get("judge_backend") == "openai":
        from instir.judge.factory import require_reachable

        require_reachable(str(values.get("judge_base_url") or ""), timeout_s, where="parameter 'judge_base_url'")


def find_notebooks(folder: str | Path) -> list[Path]:
    """The report notebooks of a folder (``NN_name.ipynb``) in order."""
    return sorted(Path(folder).glob(NOTEBOOK_PATTERN))


def run_reports(notebooks: str | Path | Sequence[str | Path], parameters: Mapping[str, object], out_dir: str | Path, *,
                show_code: bool = False, kernel: str | None = None) -> ReportResult:
    """Execute ``notebooks`` in order into ``out_dir``, each with the ``parameters`` its
    parameters cell declares, render each to HTML, write ``out_dir/report.json`` and rebuild
    the ``index.html`` that lists it: next to ``out_dir`` in a reports root, else inside it
    (:func:`instir.report.index.index_folder`). Raises :class:`NotebookFailed` when a notebook fails
    (after saving everything). ``kernel``: a Jupyter kernel's name, or None for this Python's own (the
    environment that runs the chain: a user's ``python3`` kernel spec may run another Python, without the kit).
    Before any kernel starts, :class:`instir.errors.UsageError` (a
    ``ValueError``) for secret-looking parameters and for those :func:`validate_parameters`
    refuses, and ``FileNotFoundError`` for a missing notebook; a folder another ``instir run`` is
    writing into (:class:`instir.report.lock.FolderLock`) and an ``index.html`` there that instir
    did not write are refused too."""
    from instir.stages.request import check_runnable

    given = [notebooks] if isinstance(notebooks, (str, os.PathLike)) else notebooks
    given = list(given) if isinstance(given, Iterable) else [given]
    if not all(isinstance(n, (str, os.PathLike)) for n in given):
        raise UsageError(f"run_reports(notebooks, …) takes a notebook's path or a list of them, got "
                         f"{quoted(notebooks)}")
    paths = [text_path(Path(n).resolve()) for n in given]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"notebook(s) not found: {', '.join(missing)}")
    if not paths:
        raise UsageError("no notebooks to run")
    unnamed = next((p for p in paths if not atomic.plain_name(p.name)), None)
    if unnamed is not None:
        raise UsageError(f"notebook {unnamed}: a name with a backslash cannot name its report page; rename it")
    unshown = next((p for p in paths if terminal_text(p.stem) != p.stem), None)  # its progress bar, its index row
    if unshown is not None:
        raise UsageError(f"notebook {terminal_text(unshown)}: its name holds a control character or an invisible mark, "
                         "which a terminal acts on and a page shows as nothing or reordered; rename it")
    check_parameters(parameters)
    options = kernel_options(kernel)
    known = notebook_parameters(paths)
    check_runnable(validate_parameters(parameters, known))
    check_judge_endpoint({**{name: p.value for name, p in known.items()}, **parameters})
    out = check_report_folder(text_path(expanded(out_dir).resolve()))
    if out.exists() and not out.is_dir():
        raise UsageError(f"the report folder {out} is a file, not a folder; choose another --out")
    check_apart_from_sources(out, paths)
    check_index_owned(index_folder(out))
    out.mkdir(parents=True, exist_ok=True)
    with FolderLock(out, "instir run"):
        return _run_chain(paths, parameters, known, out, show_code=show_code, options=options)


def check_apart_from_sources(out: Path, notebooks: Sequence[Path]) -> None:
    """Refuse (:class:`UsageError`, before anything is written) a report folder where the run would replace
    a file no run wrote: the folder of a notebook it would run (by any path: ``out`` is resolved), or an
    ``NN_name.ipynb`` or ``NN_name.html`` there that is not an executed copy (papermill's record of the run
    is in its metadata) or a page of the kit's (:data:`PAGE_MARK`) — a lab's working copy, say. A report
    folder inside or around the notebooks' folder is fine: the kit writes only in the folder itself."""
    for source in sorted({p.parent for p in notebooks}):
        if out == source:
            raise UsageError(f"the report folder {out} is the notebooks' folder: a run replaces the NN_name.ipynb "
                             "it writes there, which would be the notebooks themselves; choose another --out")
    for path in notebooks:
        for target, written, what in ((out / path.name, _executed_copy, "an executed notebook (papermill's record "
                                       "of a run in its metadata)"),
                                      (out / f"{path.stem}.html", _kit_page, "a report page the kit rendered")):
            if not target.exists():
                continue
            problem = file_problem(target)  # reading a FIFO to find out would block for ever
            if problem is not None or not written(target):
                raise UsageError(f"{target} {problem or f'is not {what}'}, and this run would replace it: move it "
                                 "or choose another --out")


#: What every page the kit renders holds (its link back to the index), near the top of the body.
PAGE_MARK = b'class="instir-nav"'


def _papermill_record(path: Path) -> dict | None:
    """Papermill's record of the run that executed the notebook at ``path`` (its metadata), or None: not a
    notebook papermill executed, or unreadable."""
    try:
        with path.open("rb") as fh:
            notebook = json.load(fh)
    except (OSError, ValueError, RecursionError):
        return None
    meta = notebook.get("metadata") if isinstance(notebook, dict) else None
    record = meta.get("papermill") if isinstance(meta, dict) else None
    return record if isinstance(record, dict) else None


def _executed_copy(path: Path) -> bool:
    """Whether ``path`` is a notebook papermill executed (its metadata records the run)."""
    return _papermill_record(path) is not None


def _kit_page(path: Path) -> bool:
    """Whether ``path`` is a page the kit rendered (:data:`PAGE_MARK` in its first MiB)."""
    return PAGE_MARK in (read_head(path, 1 << 20) or b"")


def _run_chain(paths: Sequence[Path], parameters: Mapping[str, object], known: Mapping[str, NotebookParameter],
               out: Path, *, show_code: bool, options: Mapping[str, object]) -> ReportResult:
    """:func:`run_reports` once the folder is this run's (``options``: papermill's for the kernel,
    :func:`kernel_options`): report.json and the index say at once that the run started and what it will run, then
    each notebook in turn."""
    from tqdm import tqdm

    from instir.progress import enabled as progress_enabled
    from instir.progress import relay_to_console

    # Notebooks exchange files through their out_dir: always the report folder in batch runs.
    # The defaults as written in the cells tell which values a run used where it set none.
    whose = " (this Python's own)" if "kernel_manager_class" in options else ""  # --kernel python3 may run another
    result = ReportResult(out_dir=out, parameters={**parameters, "out_dir": str(out)},
                          defaults={name: p.default for name, p in known.items()}, show_code=show_code,
                          kernel=f"{options['kernel_name']}{whose}", started=utc_now(), manifest=environment_manifest(),
                          planned=[p.stem for p in paths])
    try:
        _save(result)
        write_index(result.index.parent)
        start = time.perf_counter()
        bars = progress_enabled()  # read before the kernels' environment switches the bars off
        for path in tqdm(paths, desc="notebooks", unit="notebook", disable=not bars):
            own = {name: value for name, value in result.parameters.items()
                   if name in known and path.name in known[name].notebooks}
            # the kernels' bars are off (the pages stay clean) and report to a line of this console instead
            with relay_to_console(path.stem) if bars else contextlib.nullcontext(), _batch_environment():
                step, exc, unwritten = _run_one(path, result, own, options, cell_bar=bars)
            result.notebooks.append(step)
            if step.html:  # which stage run the page shows, and that the kit left it and its notebook
                record_page(out, path.stem, step.html)
            elif step.executed:  # a notebook whose page could not be rendered
                note_made(out, [out / step.executed])
            result.wall_s = time.perf_counter() - start
            if unwritten is not None:  # a file of the report could not be written: ends the run (rc 2 in the CLI)
                result.error = step.error
                raise unwritten
            if exc is not None:
                _end(result, "failed", step.error)
                raise NotebookFailed(step.error or path.name, result) from exc
            _save(result)
        _end(result, "ok")
    except NotebookFailed:
        raise
    except OSError as err:  # a report file could not be written (a full disk, an I/O error): said as far as it can be
        _end(result, "failed", write_failure(err), best_effort=True)
        raise
    except Exception as err:  # what no one foresaw: the record and the index never say "running" ever after
        _end(result, "failed", f"{type(err).__name__}: {err}", best_effort=True)
        raise
    except KeyboardInterrupt:  # Ctrl-C: the record and the folder's index said "running" ever after
        _end(result, "interrupted", best_effort=True)
        raise
    return result


def _end(result: ReportResult, status: str, error: str | None = None, *, best_effort: bool = False) -> None:
    """End ``result`` as ``status`` in report.json and the index; ``error`` unless one is said already (the file a
    notebook could not write). ``best_effort`` (the run is ending on an error or Ctrl-C): as far as they can still
    be written (a failed write's temporary file is gone, so its space is free again)."""
    result.status, result.finished, result.error = status, utc_now(), result.error or error
    with contextlib.suppress(OSError) if best_effort else contextlib.nullcontext():
        _save(result)
    with contextlib.suppress(OSError, UsageError) if best_effort else contextlib.nullcontext():
        write_index(result.index.parent)


def write_failure(err: OSError) -> str:
    """One line for a file the report could not write: ``could not write /r/03_metrics.html: No
    space left on device``."""
    return f"could not write {err.filename}: {err.strerror}" if err.filename else f"could not write: {err}"


def _batch_environment() -> contextlib.AbstractContextManager[None]:
    """The environment kernels inherit while they run: progress bars off, the kit's and the
    libraries' (:data:`instir.progress.QUIET_BARS`; they would only clutter the HTML), and
    ``MPLBACKEND`` unset, because a backend such as ``Agg`` (common in CI and test setups) stops
    ipykernel from choosing the inline backend, so the figures would be missing from the reports; the
    families' folders and the cache folder absolute (the kernels run in the report's folder)."""
    from instir.benchmarks.catalog import FAMILIES_VAR, families_var
    from instir.home import HOME_VAR, instir_home
    from instir.progress import ENV_VAR, QUIET_BARS, environment

    return environment({ENV_VAR: "0", **QUIET_BARS, "MPLBACKEND": None, FAMILIES_VAR: families_var() or None,
                        HOME_VAR: str(instir_home()) if os.environ.get(HOME_VAR) else None})


def kernel_options(kernel: str | None) -> dict[str, object]:
    """papermill's options for each notebook's kernel. None: this Python's own IPython kernel (a user-level ``python3``
    kernel spec, found before the environment's own, may run another Python that lacks the kit or holds another
    version of it, while report.json records this one's). A name: that installed kernel, refused (naming those that
    are) before any folder is made rather than a chain whose every notebook fails. An IPython kernel starts with the
    arguments that keep its start-up warnings (``Kernel is running over TCP without encryption``, on the terminal of a
    batch run) out of the output, errors still shown; other kernels get none (they may not take the option)."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel, get_kernel_spec

    quiet = ["--IPKernelApp.log_level=ERROR"]
    if kernel is None:
        from jupyter_client.kernelspec import NATIVE_KERNEL_NAME
        from jupyter_client.manager import AsyncKernelManager
        from traitlets import default

        class ThisPythonKernel(AsyncKernelManager):
            """The IPython kernel of ``sys.executable``: kernel specs in Jupyter's folders are not looked at."""

            @default("kernel_spec_manager")
            def _no_kernel_folders(self) -> KernelSpecManager:
                return KernelSpecManager(kernel_dirs=[], parent=self)

        return {"kernel_name": NATIVE_KERNEL_NAME, "kernel_manager_class": ThisPythonKernel, "extra_arguments": quiet}
    try:
        argv = get_kernel_spec(kernel).argv
    except NoSuchKernel:
        raise unknown("Jupyter kernel", kernel, sorted(KernelSpecManager().find_kernel_specs()),
                      more=" (jupyter kernelspec list)") from None
    return {"kernel_name": kernel, "extra_arguments": quiet if any("ipykernel" in part for part in argv) else []}


def _keeping_saved(out_dir: Path, paths: tuple[Path, ...]) -> contextlib.AbstractContextManager:
    """Keep each of ``paths`` that exists (saved by something else while the notebook ran: the run removed them
    before it) when the block replaces it."""
    return atomic.keeping([p for p in paths if p.is_file()], f"{out_dir} had a notebook or page saved while the kit "
                                                             "ran it")


def _run_one(path: Path, result: ReportResult, parameters: Mapping[str, object], options: Mapping[str, object], *,
             cell_bar: bool = False) -> tuple[NotebookEntry, BaseException | None, OSError | None]:
    """Execute and render one notebook with ``parameters`` (those of the run its parameters cell
    declares: papermill would warn of any other); a failure is returned, not raised, and when it is a file
    that could not be written (the executed notebook, its page: a full disk, an I/O error) that
    ``OSError`` too, naming the file. ``cell_bar`` shows the notebook's cells as a second progress
    bar under the notebooks' one (a long notebook moves)."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    executed = result.out_dir / path.name
    html = result.out_dir / f"{path.stem}.html"
    with keeping_edits(result.out_dir, (executed, html)):
        for stale in (executed, html):  # from an earlier run into the same folder
            stale.unlink(missing_ok=True)
    # papermill writes the notebook after every cell with a plain open(): it writes a hidden
    # temporary (still ending in .ipynb) that becomes the executed notebook once papermill is done
    partial = result.out_dir / f".{path.stem}.partial.ipynb"
    partial.unlink(missing_ok=True)  # a killed run's; or a link to a file elsewhere, which papermill's open() writes
    error: str | None = None
    failure: BaseException | None = None
    unwritten: OSError | None = None
    t0 = time.perf_counter()
    try:
        papermill.execute_notebook(str(path), str(partial), parameters=dict(parameters), cwd=str(result.out_dir),
                                   progress_bar={"desc": path.stem, "leave": False, "position": 1,
                                                 "disable": False} if cell_bar else False, **options)
    except PapermillExecutionError as err:
        failure = err
        cell = "\n".join(str(err.source).splitlines()[:5])
        error = (f"{path.name} failed in cell {err.cell_index} (In [{err.exec_count}]): {err.ename}: {err.evalue}\n"
                 f"--- cell source ---\n{cell}\n--- executed notebook kept at {executed} ---")
    except Exception as err:  # kernel death, missing kernel, unreadable notebook: still stop the chain cleanly
        failure = err
        error = f"{path.name} could not be executed: {type(err).__name__}: {err}"
        if isinstance(err, OSError) and atomic.device_error(err):  # papermill could not write the notebook
            unwritten = atomic.named(err, executed, partial)
    except BaseException:  # interrupted: keep the cells that ran when papermill left a whole notebook
        with contextlib.suppress(Exception), _keeping_saved(result.out_dir, (executed,)):
            _publish_executed(partial, executed)
            note_made(result.out_dir, [executed])  # the kit's, for the next run
        partial.unlink(missing_ok=True)
        raise
    wall = time.perf_counter() - t0
    html_name, render = None, 0.0
    with _keeping_saved(result.out_dir, (executed, html)):
        if unwritten is None and partial.is_file():
            try:
                _publish_executed(partial, executed)
            except OSError as err:
                failure = unwritten = err
        partial.unlink(missing_ok=True)
        if executed.is_file() and unwritten is None:
            t1 = time.perf_counter()
            try:
                html_name = render_html(executed, html, show_code=result.show_code or failure is not None).name
            except OSError as err:
                failure = unwritten = err
            except BaseException:  # interrupted while rendering: the notebook just published is the kit's all the same
                with contextlib.suppress(Exception):
                    note_made(result.out_dir, [executed])  # for the next run, which replaces it
                raise
            render = time.perf_counter() - t1
    if unwritten is not None:
        error = f"{path.name}: {write_failure(unwritten)}"
    step = NotebookEntry(name=path.stem, source=str(path), executed=executed.name if executed.is_file() else "",
                          html=html_name, wall_s=round(wall, 3), render_s=round(render, 3),
                          status="failed" if failure else "ok", error=error)
    return step, failure, unwritten


def _papermill_run_of(executed: Path, stage_run: dict) -> bool:
    """Whether ``executed`` is the notebook plain papermill is writing in the run that made
    ``stage_run`` (it started before the stage finished and was saved after)."""
    meta = _papermill_record(executed) or {}
    try:
        started = datetime.fromisoformat(str(meta.get("start_time")))
        finished = datetime.fromisoformat(str(stage_run.get("finished")))
    except ValueError:
        return False
    saved = datetime.fromtimestamp(executed.stat().st_mtime, timezone.utc)
    return Path(str(meta.get("output_path", ""))).name == executed.name and started < finished < saved


def publish_page(out_dir: str | Path, notebook: str):
    """What a report notebook's last cell calls, so that a notebook run alone never leaves its
    page silently behind: under ``instir run``, nothing (the run renders the page). Under plain
    papermill writing the executed notebook into the folder (``NN_name.ipynb``, as the README's
    call does), its HTML page is rendered from it now (everything but this last cell's output)
    and the index beside the folder rewritten. In JupyterLab, where no executed file holds this
    run's outputs, a Markdown line saying that the folder's page shows an earlier run (the index
    marks it stale) and how to remake it. Returns that Markdown, or None."""
    from IPython.display import Markdown

    from instir.report.lock import STAGE_WRITER, writer_of
    from instir.report.stage_writer import refresh_index

    folder = user_path(out_dir).resolve()
    if writer_of(folder) == "instir run":
        return None
    runs = stage_records(folder).get(notebook) or []
    executed, page = folder / f"{notebook}.ipynb", folder / f"{notebook}.html"
    if runs and executed.is_file() and _papermill_run_of(executed, runs[0]):
        with FolderLock(folder, STAGE_WRITER):
            with keeping_edits(folder, [page]):  # papermill itself has just replaced the notebook
                render_html(executed, page)
            record_page(folder, notebook, page.name)
        index = refresh_index(folder)
        listed = (f"the reports index `{home_path(index)}` is up to date" if index else
                  "no instir index lists the folder (`instir run` writes `index.html` beside the folders it makes)")
        return Markdown(f"Page `{page.name}` rendered from this run into `{home_path(folder)}`; {listed}.")
    if page.is_file():
        return Markdown(f"**This run is not on the page** `{home_path(page)}`: that page shows an earlier run, and "
                        "the reports index marks it stale. `instir run --out "
                        f"{home_path(folder)}` remakes every page; papermill writing `{executed.name}` into the "
                        "folder remakes this one.")
    return None


#: The tag papermill gives the cell of parameters it injects, and the id the kit gives that cell.
_INJECTED = "injected-parameters"


def _publish_executed(partial: Path, executed: Path) -> None:
    """Make papermill's finished temporary the executed notebook, atomically, with the name it
    records as its output the one it is published under."""
    import nbformat

    notebook = nbformat.read(partial, as_version=4)
    if isinstance(notebook.metadata.get("papermill"), dict):
        notebook.metadata["papermill"]["output_path"] = str(executed)
    # papermill gives the cell it injects a new random id on every run: one id, so that two runs of the same
    # request write the same notebook and page (unless a cell of the notebook has that id already)
    ids = {cell.get("id") for cell in notebook.cells}
    for cell in notebook.cells:
        if _INJECTED in cell.get("metadata", {}).get("tags", ()) and _INJECTED not in ids:
            cell["id"] = _INJECTED
            break
    atomic.write_text(executed, nbformat.writes(notebook))
    partial.unlink(missing_ok=True)




def _save(result: ReportResult) -> None:
    """The run's sections of the folder's record (:mod:`instir.report.record`; the stages', pages' and
    datasets' sections are their writers')."""
    run = result.to_json()
    update_record(result.out_dir, **{name: run.get(name) for name in RUN_SECTIONS})
