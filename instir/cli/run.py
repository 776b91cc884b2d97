"""``instir run``: execute the report notebooks (:func:`instir.pipeline.run_reports`) from the
command line; options and ``-p NAME=VALUE`` become notebook parameters."""

from __future__ import annotations

import argparse
import json
import sys
import sysconfig
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from instir.errors import UsageError
from instir.inputs import expanded
from instir.judge.factory import BACKENDS

if TYPE_CHECKING:
    from instir.pipeline import NotebookParameter, ReportResult

#: where a checkout keeps the report notebooks
CHECKOUT_NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


def installed_notebooks() -> Path:
    """The report notebooks this kit's wheel installed (pyproject.toml's data-files, ``share/instir/notebooks``):
    where its own install record puts them (a venv's prefix, ``--user``'s base), beside the package (``--target``),
    else where this Python's installs put data files (the folder ``instir run`` then names as empty)."""
    from importlib import metadata

    kit = Path(__file__).resolve().parents[1]
    try:
        distribution = metadata.Distribution.at(next(kit.parent.glob("instir-*.dist-info")))
        recorded = [Path(f.locate()).resolve().parent for f in distribution.files or ()
                    if f.suffix == ".ipynb" and f.parts[-4:-1] == ("share", "instir", "notebooks")]
    except StopIteration:  # no record beside the package: an editable install or a copy
        recorded = []
    for folder in (*recorded, kit.parent / "share" / "instir" / "notebooks"):
        if folder.is_dir():
            return folder
    return Path(sysconfig.get_path("data")) / "share" / "instir" / "notebooks"


#: the notebooks ``instir run`` executes unless ``--notebooks`` names another folder: the checkout's, else the wheel's
NOTEBOOKS_DIR = CHECKOUT_NOTEBOOKS if CHECKOUT_NOTEBOOKS.is_dir() else installed_notebooks()

#: where ``instir run`` writes without ``--out`` (the date-time is the run's start, UTC)
DEFAULT_OUT = "reports/<UTC date-time>"

#: ``instir run`` option -> notebook parameter name; the only place the two are tied.
CLI_PARAMETERS = {
    "benchmark": "benchmarks",
    "retrievers": "retrievers",
    "systems": "systems",
    "judge": "judge_backend",
    "out": "out_dir",
}


def parse_parameter(text: str, param: NotebookParameter | None) -> object:
    """The value of ``-p NAME=TEXT`` for a parameter of kind ``param.kind``: text is kept as text
    for a string (``-p judge_model=4`` is the string ``"4"``); a list takes JSON or a
    comma-separated list (``-p retrievers=bm25`` is ``["bm25"]``, ``-p ks=10,20`` is ``[10, 20]``
    when the default holds numbers); everything else is read as JSON, falling back to the text
    (``true``/``false`` also as ``True``/``False``). Kinds are checked by
    :func:`instir.pipeline.validate_parameters`."""
    kind = param.kind if param else ""
    try:
        parsed = json.loads(text)
    except ValueError:  # no JSON, or a number of more digits than Python reads (4300): the text, which its rule refuses
        parsed = text
    if kind == "str":
        return parsed if isinstance(parsed, str) else text
    if kind == "bool" and text.lower() in ("true", "false"):
        return text.lower() == "true"
    if kind == "list" and not isinstance(parsed, list):
        items: list = [item.strip() for item in text.split(",") if item.strip()]
        if param is not None and isinstance(param.value, (list, tuple)) and param.value \
                and not isinstance(param.value[0], str):
            items = [parse_parameter(item, None) for item in items]
        return items
    return parsed


def cli_parameters(args: argparse.Namespace, known: Mapping[str, NotebookParameter] | None = None) -> dict:
    """Notebook parameters from ``instir run`` options: each option the user gave, under the
    name :data:`CLI_PARAMETERS` maps it to, plus every ``-p NAME=VALUE``, VALUE read for the
    kind of the parameter in ``known`` (:func:`parse_parameter`; without ``known``: JSON when it
    parses, else a string). Options left out keep the notebooks' defaults. The paths of
    :data:`PATH_PARAMETERS` are made absolute from the directory ``instir run`` runs in."""
    from instir.parameters import benchmark_names
    from instir.pipeline import PATH_PARAMETERS, PIPELINE_PARAMETERS

    known = known or {}
    params: dict = {}
    given: dict[str, str] = {}  # how each parameter was given: one way, once (the last one won without a word)
    for option, name in CLI_PARAMETERS.items():
        value = getattr(args, option, None)
        if value is not None:
            params[name] = str(Path(value).resolve()) if isinstance(value, Path) else value
            given[name] = f"--{option.replace('_', '-')}"
    for item in args.parameter:
        name, sep, raw = item.partition("=")
        if not sep or not name:
            raise UsageError(f"-p expects NAME=VALUE, got {item!r}")
        if name in PIPELINE_PARAMETERS:  # set from --out, which would win silently
            raise UsageError(f"-p {name}: the report folder is given as --out, not as a parameter")
        if name in given:
            raise UsageError(f"-p {item}: {name} is given twice (also as {given[name]}); give it once")
        params[name] = parse_parameter(raw, known.get(name))
        given[name] = f"-p {item}"
    given = params.get("benchmarks")
    if isinstance(given, list) and all(isinstance(b, str) for b in given):  # validate_parameters checks the rest
        params["benchmarks"] = benchmark_names(given)  # a collection (followir-sample) stands for its benchmarks
    for name in PATH_PARAMETERS:  # the kernels run in the report folder: paths are taken from here
        if isinstance(params.get(name), str) and params[name]:
            params[name] = str(expanded(params[name]).resolve())
    return params


def run_examples() -> list[tuple[str, list[str]]]:
    """``instir run --help`` examples (argument lists after ``instir run``; a test runs each through
    the parser and :func:`instir.pipeline.validate_parameters`, so every name in them exists): the
    benchmarks named are each family's first sample and first real benchmark (the catalog's)."""
    from instir.benchmarks import catalog

    families = [catalog.family(name) for name in catalog.families()]
    samples = [f.sample_benchmarks()[0] for f in families if f.sample_benchmarks()]
    real = [f.benchmarks()[0] for f in families]
    return [
        ("the bundled samples with the notebooks' defaults", []),
        ("a quick pass: BM25 only, the no-LLM judge",
         ["--benchmark", *samples, "--retrievers", "bm25", "--judge", "baseline", "--out", "reports/quick"]),
        ("the real benchmarks from a data root (see instir fetch)",
         ["--benchmark", *real, "-p", "data_root=/data/instir", "-p", "k=100"]),
        ("an OpenAI-compatible judge; the key stays in the environment",
         ["--judge", "openai", "-p", "judge_model=gpt-4o-mini", "-p", "judge_api_key_env=OPENAI_API_KEY"]),
    ]


def parameters_help(notebooks: Sequence[Path]) -> str:
    """The part of ``instir run --help`` after the options: every notebook parameter with its
    default, the comment of its parameters cell and the option that sets it, then examples."""
    from instir.pipeline import PIPELINE_PARAMETERS, notebook_parameters

    options = {name: f"--{option.replace('_', '-')}" for option, name in CLI_PARAMETERS.items()}
    lines = ["notebook parameters (-p NAME=VALUE; lists as JSON or comma-separated), default first:"]
    for name, param in notebook_parameters(notebooks).items():
        via = f"  [{options[name]}]" if name in options else ""
        if name in PIPELINE_PARAMETERS:  # always set from --out: the notebooks' default is never this command's
            via = f"  [{options[name]}, which defaults to {DEFAULT_OUT}]"
        lines.append(f"  {name} = {param.default}{via}")
        if param.help:
            lines.append(f"      {param.help}")
    lines += ["", "examples:"]
    for what, argv in run_examples():
        lines += [f"  instir run {' '.join(argv)}".rstrip(), f"      {what}"]
    return "\n".join(lines)


class _HelpWithParameters(argparse.Action):
    """``instir run -h``: the options, then the parameters of the notebooks (those of ``--notebooks``
    when it comes first), read only when help is asked for."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from instir.pipeline import find_notebooks

        notebooks = find_notebooks(getattr(namespace, "notebooks", None) or NOTEBOOKS_DIR)
        parser.epilog = parameters_help(notebooks) if notebooks else None
        parser.print_help()
        parser.exit()


def register(subparsers) -> None:
    """Add ``instir run`` to the ``instir`` command."""
    p = subparsers.add_parser(
        "run", help="execute the report notebooks with papermill and render HTML reports", add_help=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Execute the notebooks in order into reports/NAME, render each to HTML (code hidden\n"
                    "unless --show-code) and rebuild reports/index.html. Parameters are checked against the\n"
                    "notebooks' parameters cells before any kernel starts.")
    p.add_argument("-h", "--help", action=_HelpWithParameters,
                   help="show this help, the notebook parameters and examples")
    p.add_argument("--benchmark", nargs="+", metavar="NAME",
                   help="benchmarks to report on (e.g. instructir-sample ifir-sample/fiqa; a collection such "
                        "as followir-sample stands for its benchmarks); default: the notebooks' own")
    p.add_argument("--retrievers", nargs="+", metavar="NAME", help="retrievers to run (default: the notebooks' own)")
    p.add_argument("--systems", nargs="+", metavar="CARD",
                   help="system cards to run as well, by name (see `instir systems`; default: none)")
    p.add_argument("--judge", metavar="BACKEND",
                   help=f"judge backend for InstFol, one of {', '.join(BACKENDS)} (default: the notebooks' own)")
    p.add_argument("--out", type=Path, default=None,
                   help=f"report folder (default: {DEFAULT_OUT}); the index.html that lists it goes "
                        "beside it in a reports root (a folder named reports, or one holding an instir index), "
                        "else inside it")
    p.add_argument("--show-code", action="store_true", help="keep code cells in the HTML")
    p.add_argument("--notebooks", type=Path, default=NOTEBOOKS_DIR,
                   help=f"folder holding the NN_name.ipynb notebooks (default: {NOTEBOOKS_DIR})")
    p.add_argument("--kernel", default=None, help="Jupyter kernel to run them with (default: this Python's own, "
                   "whatever kernel specs name python3)")
    p.add_argument("-p", "--parameter", action="append", default=[], metavar="NAME=VALUE",
                   help="any other notebook parameter (repeatable; listed below)")
    p.set_defaults(handler=_run_command)


def _run_command(args: argparse.Namespace) -> int:
    from instir.pipeline import NOTEBOOK_PATTERN, NotebookFailed, find_notebooks, notebook_parameters, run_reports
    from instir.report.provenance import incomplete_stages
    from instir.terminal import TerminalStream

    if args.out is None:
        args.out = Path("reports") / datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    notebooks = find_notebooks(args.notebooks)
    if not notebooks:
        raise UsageError(f"no {NOTEBOOK_PATTERN} notebooks in {args.notebooks}")
    parameters = cli_parameters(args, notebook_parameters(notebooks))
    try:
        result = run_reports(notebooks, parameters, args.out, show_code=args.show_code, kernel=args.kernel)
    except NotebookFailed as failed:
        _print_times(failed.result)
        print(f"\nFAILED: {failed}", file=TerminalStream(sys.stderr))  # it quotes the notebook's error
        return 1
    _print_times(result)
    incomplete = incomplete_stages(result.out_dir, since=result.started).items()  # of the stages this run ran
    for name, (*reasons, said) in incomplete:  # the reasons, then the line saying what a rerun does
        for line in reasons:
            print(f"{name}: {line}")
        print(f"{name}: {said}", file=TerminalStream(sys.stderr))
    return 1 if incomplete else 0


def _print_times(result: ReportResult) -> None:
    for nb in result.notebooks:
        print(f"{nb.name:<28} {nb.status:<7} run {nb.wall_s:7.1f} s   render {nb.render_s:5.1f} s")
    print(f"{'total':<28} {result.status:<7} {result.wall_s:11.1f} s")
    print(f"reports in {result.out_dir}; index: {result.index}")
