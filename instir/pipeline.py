"""Batch reports: execute notebooks in order with papermill, render each to a self-contained
HTML page with nbconvert, record what ran (parameters, wall times, environment manifest)
in the report folder, and rebuild ``reports/index.html``.

Layout of one run (``out_dir = reports/NAME``)::

    reports/index.html          every report folder, rebuilt after each run
    reports/NAME/report.json    parameters, per-notebook status and times, manifest
    reports/NAME/01_x.ipynb     the executed notebook (kept, also when it failed)
    reports/NAME/01_x.html      its HTML page (code hidden unless show_code)

Notebooks run with ``out_dir`` as working directory and exchange data only through files
there. A failing notebook stops the chain: its executed notebook and HTML (code shown) are
kept, the index is written, and :class:`NotebookFailed` names notebook, cell and exception.
Secrets never travel as parameters: names that look like keys or tokens, and values equal
to a secret-looking environment variable, are refused; notebooks read keys from the
environment themselves.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from instir import atomic
from instir.report.index import INDEX_FILE, REPORT_FILE, write_index
from instir.report.manifest import environment_manifest, read_datasets

#: nbconvert template (under instir/report/templates) without CDN scripts
TEMPLATE_DIR = Path(__file__).resolve().parent / "report" / "templates"
TEMPLATE_NAME = "instir_offline"

#: parameter names that look like credentials (``api_key``, ``hf_token``, ``password`` …)
SECRET_NAME = re.compile(
    r"(?:^|[_.-])(?:api[_-]?key|key|token|secret|password|passwd|credentials?|auth)(?:$|[_.-])", re.IGNORECASE
)

#: what a parameter that names an environment variable (``…_env``) may hold: a variable name
ENV_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: ``instir run`` option -> notebook parameter name; the only place the two are tied.
CLI_PARAMETERS = {
    "benchmark": "benchmarks",
    "retrievers": "retrievers",
    "systems": "systems",
    "judge": "judge_backend",
    "out": "out_dir",
}

#: the project's notebooks (beside the package in a source checkout, where `make` installs it)
NOTEBOOKS_DIR = Path(__file__).resolve().parent.parent / "notebooks"

#: notebooks ``instir run`` executes from a folder: ``NN_name.ipynb``, in name order
NOTEBOOK_PATTERN = "[0-9][0-9]_*.ipynb"


@dataclass
class NotebookResult:
    """One executed notebook: file names are relative to the report folder."""

    name: str
    source: str
    executed: str
    html: str | None
    wall_s: float
    render_s: float
    status: str
    error: str | None = None


@dataclass
class ReportResult:
    """A report run: its folder, parameters, notebooks (in order), total wall time,
    environment manifest and status (``running``, ``ok`` or ``failed``)."""

    out_dir: Path
    parameters: dict
    defaults: dict
    show_code: bool
    kernel: str
    started: str
    manifest: dict
    notebooks: list[NotebookResult] = field(default_factory=list)
    wall_s: float = 0.0
    finished: str | None = None
    status: str = "running"
    error: str | None = None

    @property
    def index(self) -> Path:
        """The ``index.html`` that lists this report (in the parent of ``out_dir``)."""
        return self.out_dir.parent / INDEX_FILE

    def to_json(self) -> dict:
        """The metadata written to ``report.json``."""
        data = asdict(self)
        data["out_dir"] = str(self.out_dir)
        return data


class NotebookFailed(RuntimeError):
    """A notebook of the chain raised: the message names the notebook, the cell and the
    exception; ``result`` is the report so far (the failed notebook last)."""

    def __init__(self, message: str, result: ReportResult):
        super().__init__(message)
        self.result = result


def check_parameters(parameters: Mapping[str, object]) -> None:
    """Refuse parameters that could carry a secret into notebooks, outputs or HTML: a name
    that looks like a key/token/password, or a value containing the value of an
    environment variable whose name looks like one. A name ending in ``_env`` (such as
    ``judge_api_key_env``) is allowed when its value is an environment variable's *name*:
    that is how notebooks learn where to read a key. Also refuses values JSON cannot hold."""
    for name, value in parameters.items():
        if str(name).endswith("_env"):
            if not (isinstance(value, str) and ENV_VAR_NAME.match(value)):
                raise ValueError(f"parameter {name!r} must name an environment variable (e.g. OPENAI_API_KEY), "
                                 "not hold a key")
        elif SECRET_NAME.search(str(name)):
            raise ValueError(f"parameter {name!r} looks like a secret; pass keys through environment variables only")
    try:
        text = json.dumps(dict(parameters))
    except TypeError as err:
        raise ValueError(f"parameters must be JSON values (strings, numbers, lists, dicts): {err}") from None
    for var, value in os.environ.items():
        if SECRET_NAME.search(var) and len(value) >= 8 and value in text:
            raise ValueError(f"a parameter value contains the value of ${var}; secrets are read from the "
                             "environment by the notebooks, never passed as parameters")


def render_html(executed: Path, html_path: Path, *, show_code: bool = False) -> Path:
    """Render an executed notebook to one self-contained HTML file (inline CSS and images,
    no CDN scripts); code cells and prompts are left out unless ``show_code``."""
    from nbconvert import HTMLExporter

    exporter = HTMLExporter(
        template_name=TEMPLATE_NAME,
        extra_template_basedirs=[str(TEMPLATE_DIR)],
        exclude_input=not show_code,
        exclude_input_prompt=not show_code,
        exclude_output_prompt=not show_code,
    )
    body, _ = exporter.from_filename(str(executed))
    html_path.write_text(body, encoding="utf-8")
    return html_path


def notebook_defaults(notebooks: Sequence[Path]) -> dict[str, str]:
    """The parameters cells as written (name -> default, as source text), so a report says
    which values a run used even where it set none itself."""
    import papermill

    defaults: dict[str, str] = {}
    for path in notebooks:
        for name, info in papermill.inspect_notebook(str(path)).items():
            defaults.setdefault(name, info["default"])
    return defaults


def find_notebooks(folder: str | Path) -> list[Path]:
    """The report notebooks of a folder (``NN_name.ipynb``) in order."""
    return sorted(Path(folder).glob(NOTEBOOK_PATTERN))


def run_reports(notebooks: Sequence[str | Path], parameters: Mapping[str, object], out_dir: str | Path, *,
                show_code: bool = False, kernel: str = "python3") -> ReportResult:
    """Execute ``notebooks`` in order into ``out_dir`` with the same ``parameters``, render
    each to HTML, write ``out_dir/report.json`` and rebuild ``index.html`` next to
    ``out_dir``. Raises :class:`NotebookFailed` when a notebook fails (after saving
    everything), ``ValueError`` for secret-looking parameters and ``FileNotFoundError``
    for a missing notebook."""
    from tqdm import tqdm

    paths = [Path(n).resolve() for n in notebooks]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"notebook(s) not found: {', '.join(missing)}")
    if not paths:
        raise ValueError("no notebooks to run")
    check_parameters(parameters)
    out = Path(out_dir).resolve()
    out.mkdir(parents=True, exist_ok=True)
    # Notebooks exchange files through their out_dir: always the report folder in batch runs.
    result = ReportResult(out_dir=out, parameters={**parameters, "out_dir": str(out)}, defaults=notebook_defaults(paths), show_code=show_code, kernel=kernel,
                          started=_now(), manifest=environment_manifest())
    _save(result)
    start = time.perf_counter()
    for path in tqdm(paths, desc="notebooks", unit="notebook"):
        with _batch_environment():
            step, exc = _run_one(path, result)
        result.notebooks.append(step)
        result.wall_s = time.perf_counter() - start
        result.manifest["datasets"] = read_datasets(out)
        if exc is not None:
            result.status, result.error, result.finished = "failed", step.error, _now()
            _save(result)
            write_index(out.parent)
            raise NotebookFailed(step.error or path.name, result) from exc
        _save(result)
    result.status, result.finished = "ok", _now()
    _save(result)
    write_index(out.parent)
    return result


@contextmanager
def _batch_environment() -> Iterator[None]:
    """The environment kernels inherit while they run: progress bars off (they would only
    clutter the HTML; see :mod:`instir.progress`), and ``MPLBACKEND`` unset, because a backend
    such as ``Agg`` (common in CI and test setups) stops ipykernel from choosing the inline
    backend, so the figures would be missing from the reports."""
    from instir.progress import ENV_VAR as PROGRESS_VAR

    saved = {name: os.environ.get(name) for name in ("MPLBACKEND", PROGRESS_VAR)}
    os.environ.pop("MPLBACKEND", None)
    os.environ[PROGRESS_VAR] = "0"
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _run_one(path: Path, result: ReportResult) -> tuple[NotebookResult, BaseException | None]:
    """Execute and render one notebook; a failure is returned, not raised."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    executed = result.out_dir / path.name
    html = result.out_dir / f"{path.stem}.html"
    for stale in (executed, html):  # from an earlier run into the same folder
        stale.unlink(missing_ok=True)
    error: str | None = None
    failure: BaseException | None = None
    t0 = time.perf_counter()
    try:
        papermill.execute_notebook(str(path), str(executed), parameters=result.parameters, kernel_name=result.kernel,
                                   cwd=str(result.out_dir), progress_bar=False)
    except PapermillExecutionError as err:
        failure = err
        cell = "\n".join(str(err.source).splitlines()[:5])
        error = (f"{path.name} failed in cell {err.cell_index} (In [{err.exec_count}]): {err.ename}: {err.evalue}\n"
                 f"--- cell source ---\n{cell}\n--- executed notebook kept at {executed} ---")
    except Exception as err:  # kernel death, missing kernel, unreadable notebook: still stop the chain cleanly
        failure = err
        error = f"{path.name} could not be executed: {type(err).__name__}: {err}"
    wall = time.perf_counter() - t0
    html_name, render = None, 0.0
    if executed.is_file():
        t1 = time.perf_counter()
        html_name = render_html(executed, html, show_code=result.show_code or failure is not None).name
        render = time.perf_counter() - t1
    step = NotebookResult(name=path.stem, source=str(path), executed=executed.name if executed.is_file() else "",
                          html=html_name, wall_s=round(wall, 3), render_s=round(render, 3),
                          status="failed" if failure else "ok", error=error)
    return step, failure


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _save(result: ReportResult) -> None:
    atomic.write_text(result.out_dir / REPORT_FILE, json.dumps(result.to_json(), indent=2, ensure_ascii=False))


def cli_parameters(args: argparse.Namespace) -> dict:
    """Notebook parameters from ``instir run`` options: each option the user gave, under the
    name :data:`CLI_PARAMETERS` maps it to, plus every ``-p NAME=VALUE`` (VALUE read as JSON
    when it parses, else as a string). Options left out keep the notebooks' defaults."""
    params: dict = {}
    for option, name in CLI_PARAMETERS.items():
        value = getattr(args, option, None)
        if value is not None:
            params[name] = str(Path(value).resolve()) if isinstance(value, Path) else value
    for item in args.parameter:
        name, sep, raw = item.partition("=")
        if not sep or not name:
            raise ValueError(f"-p expects NAME=VALUE, got {item!r}")
        try:
            params[name] = json.loads(raw)
        except json.JSONDecodeError:
            params[name] = raw
    return params


def register(subparsers) -> None:
    """Add ``instir run`` to the ``instir`` command."""
    p = subparsers.add_parser(
        "run", help="execute the report notebooks with papermill and render HTML reports",
        description="Execute the notebooks in order into reports/NAME, render each to HTML "
                    "(code hidden unless --show-code) and rebuild reports/index.html.")
    p.add_argument("--benchmark", nargs="+", metavar="NAME",
                   help="benchmarks to report on (e.g. instructir-sample ifir-sample); default: the notebooks' own")
    p.add_argument("--retrievers", nargs="+", metavar="NAME", help="retrievers to run (default: the notebooks' own)")
    p.add_argument("--systems", nargs="+", metavar="CARD",
                   help="system cards to run as well, by name (see `instir systems`; default: none)")
    p.add_argument("--judge", metavar="BACKEND", help="judge backend for InstFol (default: the notebooks' own)")
    p.add_argument("--out", type=Path, default=None,
                   help="report folder (default: reports/<UTC date-time>)")
    p.add_argument("--show-code", action="store_true", help="keep code cells in the HTML")
    p.add_argument("--notebooks", type=Path, default=NOTEBOOKS_DIR,
                   help=f"folder holding the NN_name.ipynb notebooks (default: {NOTEBOOKS_DIR})")
    p.add_argument("--kernel", default="python3", help="Jupyter kernel to run them with (default: python3)")
    p.add_argument("-p", "--parameter", action="append", default=[], metavar="NAME=VALUE",
                   help="any other notebook parameter (repeatable)")
    p.set_defaults(handler=_run_command)


def _run_command(args: argparse.Namespace) -> int:
    if args.out is None:
        args.out = Path("reports") / datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    notebooks = find_notebooks(args.notebooks)
    if not notebooks:
        print(f"no {NOTEBOOK_PATTERN} notebooks in {args.notebooks}")
        return 2
    try:
        result = run_reports(notebooks, cli_parameters(args), args.out, show_code=args.show_code, kernel=args.kernel)
    except NotebookFailed as failed:
        _print_times(failed.result)
        print(f"\nFAILED: {failed}")
        return 1
    except ValueError as refused:
        print(f"instir run: {refused}")
        return 2
    _print_times(result)
    return 0


def _print_times(result: ReportResult) -> None:
    for nb in result.notebooks:
        print(f"{nb.name:<28} {nb.status:<7} run {nb.wall_s:7.1f} s   render {nb.render_s:5.1f} s")
    print(f"{'total':<28} {result.status:<7} {result.wall_s:11.1f} s")
    print(f"reports in {result.out_dir}; index: {result.index}")
