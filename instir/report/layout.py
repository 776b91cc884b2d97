"""The report folder as the stages share it: every file one stage writes and a later one reads,
by name (:class:`ReportLayout`), which stage writes each (a missing input names the notebook and
the command that make it), and the setup every stage that reads benchmarks starts with
(:func:`start_report`: load them, record which data they are)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from instir import atomic
from instir.benchmarks import catalog
from instir.benchmarks.registry import load_benchmark
from instir.benchmarks.types import Benchmark, FormatError
from instir.errors import UsageError, UserError, quoted, utf8_problem
from instir.inputs import expanded
from instir.parameters import benchmark_names
from instir.report.html import markdown_code, markdown_text
from instir.report.manifest import record_dataset
from instir.report.provenance import WRITES
from instir.terminal import refuse_unshown

if TYPE_CHECKING:
    import pandas as pd

#: The report notebooks of a folder: ``NN_name.ipynb``, in name order.
NOTEBOOK_PATTERN = "[0-9][0-9]_*.ipynb"

#: The columns of ``runs/runs.csv`` every reader needs.
RUNS_REQUIRED = ("benchmark", "system", "run_file")
#: What identifies a run in ``runs/runs.csv`` (a list of an earlier version: those of its columns it has).
RUN_KEY = ("benchmark", "setting", "system", "variant")

#: The stage (its notebook) that writes each folder of a report.
WRITTEN_BY = {folder: notebook for notebook, folder in WRITES.items()}


class MissingInput(UserError, FileNotFoundError):
    """A stage's input file is not in the report folder: the message names the file and the
    notebook (or ``instir run`` call) that writes it."""


def in_a_kernel() -> bool:
    """Whether this process is a notebook's kernel (a running IPython kernel app), which JupyterLab starts in the
    notebook's folder; a process that only imported ipykernel (jupyter_client's kernel spec lookup does) is none."""
    app = sys.modules.get("ipykernel.kernelapp")
    return app is not None and app.IPKernelApp.initialized()


def user_path(path: str | Path) -> Path:
    """A path from a parameter as the user meant it: an absolute one as it is; a relative one
    from the working directory, except in a notebook's kernel in a folder of report notebooks (``NN_name.ipynb``:
    JupyterLab runs a notebook in its own folder, ``notebooks/`` or a working copy), where it is
    relative to the folder above, the repository. So ``reports/sample`` and ``data/…`` mean the
    same folder in JupyterLab, in ``papermill`` run from the repository and in ``instir run``
    (which makes paths absolute before the kernels start); a command's, as a shell means it. A report folder's own
    notebook, rerun where it lies, that names the folder it lies in (``reports/sample`` in ``reports/sample/``) means
    that folder. Refused as :func:`text_path` refuses it."""
    path = expanded(path)
    if not path.is_absolute():
        here = Path.cwd()
        inside = in_a_kernel() and any(here.glob(NOTEBOOK_PATTERN))
        if inside and path.parts and ".." not in path.parts and here.parts[-len(path.parts):] == path.parts:
            path = here  # a report folder's own notebook naming that folder (reports/sample from reports/sample)
        else:
            path = (here.parent if inside else here) / path
    return text_path(path)


def text_path(path: Path) -> Path:
    """``path``, refused in one line where it is no UTF-8 text (a byte such as 0xff in a name): the kit writes the
    paths of its folders and files into records and pages, which hold UTF-8 only."""
    problem = utf8_problem(str(path))
    if problem is not None:
        raise UsageError(f"{quoted(str(path))}: a path that is no UTF-8 text ({problem}); the kit writes its paths "
                         "into its records and pages: rename it")
    return path


def report_layout(out_dir: str | Path) -> ReportLayout:
    """The layout of the report folder a parameter names (:func:`user_path`; :func:`check_report_folder`)."""
    return ReportLayout(check_report_folder(user_path(out_dir)))


def check_report_folder(folder: Path) -> Path:
    """``folder``, refused in one line where it is the filesystem's root or the home folder: a report writes its
    record, lock and stage folders into the folder it is given (``out_dir="/"`` wrote ``/report.json``)."""
    resolved = expanded(folder).resolve()
    try:
        home = Path.home().resolve()
    except (RuntimeError, KeyError):  # no HOME and no passwd entry (a container run as a bare uid): no home folder
        home = None
    if resolved == Path(resolved.anchor) or resolved == home:
        what = "the filesystem root" if resolved == Path(resolved.anchor) else "your home folder"
        raise UsageError(f"{quoted(str(folder))} is {what}: a report writes its files into the folder it is given; "
                         "name one of its own (reports/NAME)")
    refuse_unshown(resolved, "a report folder's path")
    return folder


@dataclass(frozen=True)
class ReportLayout:
    """Paths inside one report folder (``root``); folders are made by whoever writes into them."""

    root: Path

    # explore (notebook 01)
    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def statistics(self) -> Path:
        return self.data / "statistics.csv"

    # retrieve (notebook 02)
    @property
    def runs(self) -> Path:
        return self.root / "runs"

    @property
    def runs_table(self) -> Path:
        """One row per run: benchmark, setting, system, variant, template, ``run_file`` (relative to ``root``;
        absolute for a run from elsewhere, as ``instir judge`` lists its ``--run`` files)."""
        return self.runs / "runs.csv"

    # evaluate (notebook 03)
    @property
    def metrics(self) -> Path:
        return self.root / "metrics"

    @property
    def metrics_table(self) -> Path:
        """The tidy result table (:data:`instir.metrics.table.COLUMNS`); also as ``metrics.parquet``."""
        return self.metrics / "metrics.csv"

    @property
    def per_query(self) -> Path:
        """Every run's value per query and measure (``benchmark, system, qid, measure, value``)."""
        return self.metrics / "per_query.parquet"

    @property
    def per_group(self) -> Path:
        """Every run's Robustness minimum per query group (InstructIR)."""
        return self.metrics / "per_group.parquet"

    @property
    def comparisons(self) -> Path:
        return self.metrics / "comparisons.csv"

    @property
    def run_checks(self) -> Path:
        """Each scored run checked against its benchmark (``benchmark, system, run_file``, ``run ids``: the ids it has
        that the benchmark lacks; ``other_data``: ``corpus``, ``queries`` or both, comma-separated, where its sidecar
        says it was retrieved over other data than the benchmark's it was scored on, else empty; ``notes``: a
        cutoff deeper than the run, else empty)."""
        return self.metrics / "run_checks.csv"

    @property
    def scores(self) -> Path:
        """Each run's per-query values, kept while its run file and benchmark stay the same."""
        return self.metrics / "runs"

    # judge (notebook 04)
    @property
    def judge(self) -> Path:
        return self.root / "judge"

    @property
    def judgments(self) -> Path:
        """The report's judgment cache (SQLite)."""
        return self.judge / "judgments.sqlite"

    @property
    def instfol(self) -> Path:
        return self.judge / "instfol.csv"

    @property
    def instfol_instances(self) -> Path:
        return self.judge / "instfol_instances.csv"

    @property
    def stability(self) -> Path:
        return self.judge / "stability.csv"

    # compare (notebook 05)
    @property
    def paper_tables(self) -> Path:
        return self.root / "paper_tables"

    @property
    def mteb_results(self) -> Path:
        """Where a user puts MTEB ``TaskResult`` files (``<task>.json``, any depth) for the compare
        stage to show beside the papers' numbers; written by no stage."""
        return self.root / "mteb_results"

    def stage_writes(self, path: Path) -> bool:
        """Whether ``path`` (by any name) is a file a stage writes: the record, the runs table, or
        anything in a stage's folder but ``runs/``, whose run files a user may list as inputs."""
        path, root = Path(os.path.realpath(path)), Path(os.path.realpath(self.root))  # a symlink loop: as it is
        folders = [root / folder for folder in WRITES.values() if folder != "runs"]
        own = (root / "report.json", root / self.runs_table.relative_to(self.root))
        return path in own or any(map(path.is_relative_to, folders))

    def require(self, path: Path) -> Path:
        """``path`` (a file of this layout) when it exists; else :class:`MissingInput` naming it
        and the notebook that writes it. A set of files a killed stage left half-replaced in its
        folder is finished first (:func:`instir.atomic.settle`), so the file agrees with the
        others of its set."""
        atomic.settle(path.parent)
        if path.is_file():
            return path
        folder = path.relative_to(self.root).parts[0]
        notebook = WRITTEN_BY.get(folder, "the earlier notebooks")
        raise MissingInput(f"{path} is missing: run notebook {notebook} into {self.root} first "
                           f"(or `instir run --out {self.root}` for the whole chain)")


def read_table(layout: ReportLayout, path: Path, required: Sequence[str] = (), **options) -> pd.DataFrame:
    """The stage table ``path`` of ``layout`` (a CSV or, by its suffix, Parquet file; ``options`` go to ``pandas``'
    ``read_csv`` or ``read_parquet``), required as
    :meth:`ReportLayout.require` requires it; one that cannot be read as a table (empty, no UTF-8, an unclosed quote:
    edited or damaged), or that lacks a column of ``required``, is a :class:`~instir.benchmarks.types.FormatError`
    naming it (and the column) and the notebook that writes it."""
    import pandas as pd

    again = f"run notebook {WRITTEN_BY.get(path.relative_to(layout.root).parts[0], 'that writes it')} into " \
            f"{layout.root} again"
    try:
        table = (pd.read_parquet if path.suffix == ".parquet" else pd.read_csv)(layout.require(path), **options)
    except ValueError as err:  # pandas' (EmptyDataError, ParserError), Arrow's (ArrowInvalid), UnicodeDecodeError
        raise FormatError(path, None, None, f"not a table the kit can read ({type(err).__name__}: {err}); "
                          f"{again}") from None
    missing = [column for column in required if column not in table]
    if missing:
        raise FormatError(path, 1, missing[0], f"no such column: the table has {', '.join(required)}; {again}")
    return table


def read_runs_table(layout: ReportLayout, benchmarks: Sequence[str] | None = None) -> pd.DataFrame:
    """``runs/runs.csv`` (the retrieve stage's list), only ``benchmarks`` when given; a missing
    file names the notebook that writes it, a list without a column every reader needs
    (:data:`RUNS_REQUIRED`) the file and the column."""
    table = read_table(layout, layout.runs_table, RUNS_REQUIRED, dtype={"benchmark": str, "system": str})
    unnamed = table["run_file"].isna() | (table["run_file"].astype(str).str.strip() == "")
    if unnamed.any():
        raise FormatError(layout.runs_table, int(unnamed.argmax()) + 2, "run_file", "empty: each run listed names "
                          "its TREC file")
    seen: dict[tuple, int] = {}  # each run's first line; an empty cell is one value, as pandas' duplicated has it
    for line, key in enumerate(table[[c for c in RUN_KEY if c in table]].astype(str).itertuples(index=False), 2):
        first = seen.setdefault(tuple(key), line)
        if first == line:
            continue
        raise FormatError(layout.runs_table, line, "system", f"{quoted(table['system'].iloc[line - 2])} on "
                          f"{quoted(table['benchmark'].iloc[line - 2])} is listed again (first at line {first}): "
                          "each run once")
    if "setting" not in table:  # lists written before the column existed
        table.insert(1, "setting", "instructed")
    for line, (name, setting) in enumerate(zip(table["benchmark"], table["setting"]), start=2):
        try:
            family = catalog.entry(str(name)).family
        except UserError:  # a benchmark of no family: said where a stage asks for it
            continue
        if setting not in family.settings:
            raise FormatError(layout.runs_table, line, "setting", f"{quoted(setting)} is no {family.printed} setting "
                              f"(known: {', '.join(family.settings)})")
    if benchmarks is None:
        return table
    listed = set(table["benchmark"])
    absent = [name for name in benchmarks if name not in listed]
    if absent:
        raise MissingInput(f"{layout.runs_table} holds no run of {', '.join(map(repr, absent))}: run notebook "
                           f"02_retrieval with it into {layout.root} first, or leave it out of 'benchmarks' "
                           f"(the runs there: {', '.join(dict.fromkeys(table['benchmark'])) or 'none'})")
    return table[table["benchmark"].isin(list(benchmarks))].reset_index(drop=True)


class LoadedBenchmarks:
    """Benchmarks by (name, setting), each loaded once (real ones from ``data_root``, ``""`` or
    None meaning the fetch cache; read as :func:`user_path` reads it) and, with ``record_in``, noted
    in that report folder's record (its ``datasets``), so its manifest names the exact data every number
    comes from. What the stages, the sweep's cells and its driver all load benchmarks through."""

    def __init__(self, data_root: str | Path | None = None, record_in: Path | None = None):
        self.root = user_path(data_root) if data_root else None
        self.record_in = record_in
        self.loaded: dict[tuple[str, str], Benchmark] = {}

    def get(self, name: str, setting: str = "instructed") -> Benchmark:
        """The benchmark ``name`` in ``setting``, loaded on first use."""
        found = self.loaded.get((name, setting))
        return found if found is not None else self.add(load_benchmark(name, setting, root=self.root))

    def add(self, benchmark: Benchmark) -> Benchmark:
        """Keep a benchmark loaded elsewhere (by name and setting), noted as :meth:`get` notes it."""
        self.loaded[benchmark.name, benchmark.setting] = benchmark
        if self.record_in is not None:
            record_dataset(self.record_in, benchmark)
        return benchmark

    def keep_only(self, name: str) -> None:
        """Forget every benchmark but ``name``'s settings (a worker holds one corpus at a time)."""
        self.loaded = {key: bench for key, bench in self.loaded.items() if key[0] == name}


@dataclass(frozen=True)
class ReportStart:
    """What :func:`start_report` returns: the layout, the loaded benchmarks by name, a Markdown
    list naming each with its revision, and the cache they came from (for other settings)."""

    layout: ReportLayout
    benchmarks: dict[str, Benchmark]
    summary: str
    cache: LoadedBenchmarks


def start_report(out_dir: str | Path, benchmarks: Sequence[str], data_root: str | None = None,
                 loaded: LoadedBenchmarks | None = None) -> ReportStart:
    """Make the report folder, load ``benchmarks`` (real ones from ``data_root`` when given, ``""``
    meaning none, as the notebooks' parameters say; both paths as :func:`user_path` reads them;
    or from ``loaded``, which a caller running several stages shares) and record each in the
    folder's record (its ``datasets``), so the report's manifest names the exact data every number comes from."""
    layout = report_layout(out_dir)
    layout.root.mkdir(parents=True, exist_ok=True)
    cache = loaded or LoadedBenchmarks(data_root, record_in=layout.root)
    loaded = {name: cache.get(name) for name in benchmark_names(benchmarks)}
    summary = "\n".join(f"- {markdown_text(b.label)}, revision {markdown_code(b.revision)}" for b in loaded.values())
    return ReportStart(layout, loaded, summary, cache)
