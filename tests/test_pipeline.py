"""The papermill chain on toy notebooks: executed notebooks, offline HTML, report.json,
index.html with resolving links, escaping, secrets, failures, the CLI, and a headless
Chromium render."""

import argparse
import json
import os
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from says import raises_saying

from instir.cli import main
from instir.cli.run import cli_parameters, parse_parameter, register, run_examples
from instir.errors import UsageError
from instir.pipeline import (
    NotebookFailed,
    NotebookParameter,
    check_parameters,
    notebook_parameters,
    render_html,
    run_reports,
    validate_parameters,
)
from instir.report import write_index

NOTEBOOKS = Path(__file__).parent / "fixtures" / "notebooks"
KEY_VAR, KEY_VALUE = "INSTIR_TOY_API_KEY", "sk-toy-NEVER-IN-OUTPUT-4242"


def isolate(mp: pytest.MonkeyPatch, root: Path) -> None:
    """Kernels write under HOME (~/.ipython, ~/.local/share/jupyter, matplotlib cache):
    point all of it at ``root``. MPLBACKEND=Agg as in CI: reports must keep their figures."""
    (root / "home").mkdir(exist_ok=True)
    mp.setenv("HOME", str(root / "home"))
    mp.setenv("IPYTHONDIR", str(root / "home" / ".ipython"))
    mp.setenv("MPLCONFIGDIR", str(root / "home" / "mpl"))
    mp.setenv("JUPYTER_RUNTIME_DIR", str(root / "home" / "runtime"))
    mp.setenv("MPLBACKEND", "Agg")
    mp.setenv(KEY_VAR, KEY_VALUE)


@pytest.fixture(scope="module")
def toy_report(tmp_path_factory):
    """Two toy notebooks run as one report (one kernel start each)."""
    root = tmp_path_factory.mktemp("chain")
    out = root / "reports" / "toy"
    with pytest.MonkeyPatch.context() as mp:
        isolate(mp, root)
        result = run_reports([NOTEBOOKS / "01_table.ipynb", NOTEBOOKS / "02_corpus.ipynb"],
                             {"out_dir": str(out), "rows": 4}, out)
    return result


@pytest.fixture(scope="module")
def failed_toy_report(tmp_path_factory):
    """A chain whose first notebook raises; the second must never run."""
    root = tmp_path_factory.mktemp("failed")
    out = root / "reports" / "broken"
    with pytest.MonkeyPatch.context() as mp:
        isolate(mp, root)
        with pytest.raises(NotebookFailed) as info:
            run_reports([NOTEBOOKS / "03_fails.ipynb", NOTEBOOKS / "02_corpus.ipynb"], {"out_dir": str(out)}, out)
    return info.value


class Links(HTMLParser):
    """Every tag's URL-bearing attributes."""

    def __init__(self):
        super().__init__()
        self.found: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("src", "href") and value is not None:
                self.found.append((tag, name, value))


def links(html: str) -> list[tuple[str, str, str]]:
    parser = Links()
    parser.feed(html)
    return parser.found


def test_chain_writes_executed_notebooks_html_and_metadata(toy_report):
    names = sorted(p.name for p in toy_report.out_dir.iterdir())
    assert names == [".instir-run.lock", "01_table.html", "01_table.ipynb", "02_corpus.html", "02_corpus.ipynb",
                     "report.json", "toy_table.csv"]
    meta = json.loads((toy_report.out_dir / "report.json").read_text())
    assert meta["status"] == "ok" and meta["parameters"]["rows"] == 4
    assert [nb["name"] for nb in meta["notebooks"]] == ["01_table", "02_corpus"]
    assert all(nb["wall_s"] > 0 and nb["render_s"] > 0 for nb in meta["notebooks"])
    assert meta["wall_s"] >= sum(nb["wall_s"] for nb in meta["notebooks"])
    assert meta["manifest"]["packages"]["papermill"]


def test_notebooks_exchange_data_through_files_in_the_report_folder(toy_report):
    assert "4 rows read back" in (toy_report.out_dir / "02_corpus.html").read_text()


def test_html_has_tables_and_inline_figures_but_no_code(toy_report):
    html = (toy_report.out_dir / "01_table.html").read_text()
    assert '<table border="1" class="dataframe">' in html
    assert re.search(r'<img [^>]*src="data:image/png;base64,', html)
    assert "table.to_csv" not in html


def test_batch_runs_switch_progress_bars_off_in_the_kernels(toy_report):
    assert "progress bars: 0" in (toy_report.out_dir / "01_table.html").read_text()
    assert os.environ.get("INSTIR_PROGRESS") != "0"  # restored after the run


@pytest.mark.notebooks  # runs notebooks in a kernel
def test_third_party_progress_bars_stay_out_of_the_reports(tmp_path, monkeypatch):
    import nbformat

    isolate(monkeypatch, tmp_path)
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell('out_dir = "."', metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("from tqdm import tqdm\n"
                                          "for _ in tqdm(range(3), desc='third-party'):\n    pass"),
                nbformat.v4.new_code_cell("from tqdm.auto import tqdm as auto\nlist(auto(range(3)))\n"
                                          "from huggingface_hub.utils import are_progress_bars_disabled\n"
                                          "print('hub bars off:', are_progress_bars_disabled())")]
    nbformat.write(nb, tmp_path / "01_bars.ipynb")
    result = run_reports([tmp_path / "01_bars.ipynb"], {}, tmp_path / "reports" / "bars")
    executed = nbformat.read(result.out_dir / "01_bars.ipynb", as_version=4)
    outputs = [o for cell in executed.cells for o in cell.get("outputs", [])]
    assert [o.get("text") for o in outputs if o.output_type == "stream"] == ["hub bars off: True\n"]
    assert all("third-party" not in json.dumps(o) for o in outputs)
    assert "TQDM_DISABLE" not in os.environ  # restored after the run


def test_show_code_keeps_the_code(toy_report, tmp_path):
    html = render_html(toy_report.out_dir / "01_table.ipynb", tmp_path / "with_code.html", show_code=True).read_text()
    assert "to_csv" in html


def test_reports_load_nothing_from_the_network(toy_report):
    pages = sorted(toy_report.out_dir.glob("*.html")) + [toy_report.index]
    for page in pages:
        html = page.read_text()
        assert "<script src" not in html
        remote = [(tag, attr, url) for tag, attr, url in links(html)
                  if tag != "a" and re.match(r"(https?:)?//", url)]
        assert remote == [], page.name


def test_corpus_markup_shows_as_text(toy_report):
    html = (toy_report.out_dir / "02_corpus.html").read_text()
    assert "Saffron &lt;script&gt;document.title = 'pwned'&lt;/script&gt; is a spice." in html
    assert "<script>document.title" not in html


def test_report_records_the_notebooks_parameter_defaults(toy_report):
    assert toy_report.defaults == {"out_dir": '"."', "rows": "3"}
    assert json.loads((toy_report.out_dir / "report.json").read_text())["defaults"] == toy_report.defaults


def test_index_links_resolve(toy_report):
    html = toy_report.index.read_text()
    hrefs = [url for tag, attr, url in links(html) if tag == "a" and not url.startswith("#")]
    assert len(hrefs) == 6
    assert all((toy_report.index.parent / url).is_file() for url in hrefs)
    assert "rows" in html and "01_table" in html and "papermill" in html


def test_api_keys_reach_kernels_but_no_output(toy_report):
    assert "API key available to the kernel: True" in (toy_report.out_dir / "01_table.html").read_text()
    for path in toy_report.out_dir.parent.rglob("*"):
        if path.is_file():
            assert KEY_VALUE.encode() not in path.read_bytes(), path


def test_failing_notebook_stops_the_chain_and_is_kept(failed_toy_report):
    message = str(failed_toy_report)
    assert "03_fails.ipynb failed in cell" in message
    assert "ValueError: toy failure on purpose" in message and 'raise ValueError("toy failure on purpose")' in message
    out = failed_toy_report.result.out_dir
    assert (out / "03_fails.ipynb").is_file() and not (out / "02_corpus.ipynb").exists()
    assert [nb.status for nb in failed_toy_report.result.notebooks] == ["failed"]
    meta = json.loads((out / "report.json").read_text())
    assert meta["status"] == "failed" and "toy failure on purpose" in meta["error"]
    html = (out / "03_fails.html").read_text()
    assert "toy failure on purpose" in html and "raise" in html
    index = failed_toy_report.result.index.read_text()
    assert "broken" in index and "toy failure on purpose" in index


@pytest.mark.parametrize("name", ["api_key", "OPENAI_API_KEY", "hf_token", "judge_secret", "password", "apikey"])
def test_secret_looking_parameter_names_are_refused(name, tmp_path):
    with pytest.raises(ValueError, match="looks like a secret"):
        run_reports([NOTEBOOKS / "01_table.ipynb"], {name: "x"}, tmp_path / "reports" / "r")
    assert not (tmp_path / "reports").exists()


def test_ordinary_parameter_names_pass():
    check_parameters({"max_tokens": 5, "keywords": ["a"], "benchmarks": ["instructir-sample"], "out_dir": "x"})


@pytest.mark.parametrize("value", [float("nan"), float("inf"), [1.0, float("-inf")]])
def test_a_parameter_json_cannot_hold_is_refused_as_said(value):
    # before, NaN and infinity passed (json.dumps writes them, as no JSON reader but Python's reads them) into
    # the report's record and index
    with raises_saying(ValueError, "parameters must be JSON values", "Out of range float values"):
        check_parameters({"threshold": value})


def test_a_parameter_naming_the_key_variable_passes_but_cannot_hold_a_key():
    check_parameters({"judge_api_key_env": "OPENAI_API_KEY"})
    with pytest.raises(ValueError, match="must name an environment variable"):
        check_parameters({"judge_api_key_env": "sk-proj-abc/123+xyz"})


@pytest.mark.parametrize("value", ["sk_live_51HxYzAbCdEfGhIjKlMnOpQr", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz",
                                   "gsk_Q7vX2mN9pL4kR8tW1yB6cD3fG5hJ"])
def test_a_key_shaped_like_a_variable_name_is_refused_before_anything_is_written(value, tmp_path):
    with raises_saying(ValueError, "'judge_api_key_env'", "environment variable") as err:
        run_reports([NOTEBOOKS / "01_table.ipynb"], {"judge_api_key_env": value}, tmp_path / "reports" / "r")
    assert value not in str(err.value)
    assert not (tmp_path / "reports").exists()  # no report.json, notebook or index.html holds it


def test_a_key_anywhere_in_a_parameter_value_is_refused():
    with raises_saying(ValueError, "parameter 'judge_base_url'", "credential", "key=…"):
        check_parameters({"judge_base_url": "https://gw.example/v1?key=sk-proj-Q7vX2mN9pL4kR8tW1yB6cD3f"})
    with raises_saying(ValueError, "parameter 'judge_base_url'", "API key"):
        check_parameters({"judge_base_url": "https://gw.example/sk-proj-Q7vX2mN9pL4kR8tW1yB6cD3f/v1"})
    with raises_saying(ValueError, "parameter 'note'", "API key"):
        check_parameters({"note": "my key sk-proj-Q7vX2mN9pL4kR8tW1yB6cD3f"})


def test_a_value_equal_to_a_variable_whose_name_says_key_is_refused(monkeypatch):
    monkeypatch.setenv("OPENAIKEY", "plainlowercasekey")
    with pytest.raises(ValueError, match=r"\$OPENAIKEY"):
        check_parameters({"judge_api_key_env": "plainlowercasekey"})
    with pytest.raises(ValueError, match=r"\$OPENAIKEY"):
        check_parameters({"title": "run with plainlowercasekey"})


def test_a_secret_value_under_any_name_is_refused(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-1234567890")
    with pytest.raises(ValueError, match=r"\$MY_SERVICE_TOKEN"):
        check_parameters({"judge": {"model": "m", "extra": "tok-1234567890"}})


def test_missing_notebooks_are_reported(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.ipynb"):
        run_reports([tmp_path / "nope.ipynb"], {}, tmp_path / "out")


def parse_run(argv):
    parser = argparse.ArgumentParser(prog="instir")
    register(parser.add_subparsers(dest="command"))
    return parser.parse_args(["run", *argv])


def test_cli_options_map_to_notebook_parameters(tmp_path):
    args = parse_run(["--benchmark", "instructir-sample", "ifir-sample", "--judge", "baseline",
                      "--out", str(tmp_path / "r"), "-p", "k=3", "-p", 'names=["a"]', "-p", "title=plain text"])
    assert cli_parameters(args) == {"benchmarks": ["instructir-sample", "ifir-sample/fiqa", "ifir-sample/nfcorpus"],
                                    "judge_backend": "baseline",
                                    "out_dir": str((tmp_path / "r").resolve()), "k": 3, "names": ["a"],
                                    "title": "plain text"}
    assert args.show_code is False and parse_run(["--show-code"]).show_code is True


CHAIN = sorted((Path(__file__).parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))[1:]  # 01-05, not the tour


def test_parameters_are_read_from_the_cells_with_their_kind_and_help():
    params = notebook_parameters(CHAIN)
    assert params["k"].kind == "" and params["k"].default == "None"  # any value: the run request checks it
    assert params["k"].help == "run depth (None: its family's; reranking: all candidates)"
    assert params["benchmarks"].kind == "list" and params["judge_backend"].kind == "str"
    assert params["k"].notebooks == ("02_retrieval.ipynb",)  # each notebook declares only what it uses
    assert params["out_dir"].notebooks == tuple(p.name for p in CHAIN)


def test_cli_values_are_read_for_the_kind_of_their_parameter():
    params = notebook_parameters(CHAIN)
    args = parse_run(["-p", "retrievers=bm25", "-p", "benchmarks=instructir-sample, ifir-sample/fiqa", "-p", "k=7",
                      "-p", "judge_model=4", "-p", 'dense_model="quoted"', "-p", 'retrievers2=["x"]'])
    assert cli_parameters(args, params) == {
        "retrievers": ["bm25"], "benchmarks": ["instructir-sample", "ifir-sample/fiqa"], "k": 7, "judge_model": "4",
        "dense_model": "quoted", "retrievers2": ["x"]}


@pytest.mark.parametrize("kind, default, text, value", [
    ("bool", "False", "True", True), ("bool", "False", "false", False), ("float", "0.5", "2", 2),
    ("list", "[10, 20]", "5,30", [5, 30]), ("list", "[]", '["a", "b"]', ["a", "b"]), ("str", '""', "a,b", "a,b"),
    ("", "None", "[1]", [1]), ("", "None", "plain", "plain"),
])
def test_parse_parameter_coercions(kind, default, text, value):
    param = NotebookParameter("x", default, kind, "", ("n.ipynb",))
    assert parse_parameter(text, param) == value


def test_run_reports_checks_kinds_before_any_kernel(tmp_path):
    with pytest.raises(ValueError, match="parameter 'rows' expects a whole number"):
        run_reports([NOTEBOOKS / "01_table.ipynb"], {"rows": "abc"}, tmp_path / "reports" / "r")
    with raises_saying(KeyError, "'rowz'", "'rows'"):
        run_reports([NOTEBOOKS / "01_table.ipynb"], {"rowz": 1}, tmp_path / "reports" / "r")
    assert not (tmp_path / "reports").exists()


def test_run_help_lists_every_parameter_with_its_default_and_valid_examples(capsys):
    with pytest.raises(SystemExit) as done:
        main(["run", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    params = notebook_parameters(CHAIN)
    for name, param in params.items():
        assert f"  {name} = {param.default}" in out
    assert "k = None\n      run depth (None: its family's; reranking: all candidates)" in out and "[--benchmark]" in out
    assert 'out_dir = "reports/sample"  [--out, which defaults to reports/<UTC date-time>]' in out  # not the cell's
    assert "ifir-sample " not in out and "ifir-sample/fiqa" in out
    for _, argv in run_examples():
        assert f"instir run {' '.join(argv)}".rstrip() in out
        args = parse_run(argv)
        validate_parameters(cli_parameters(args, params), params)


def test_cli_refuses_secret_parameters_without_running(tmp_path, capsys):
    assert main(["run", "--notebooks", str(NOTEBOOKS), "--out", str(tmp_path / "r"), "-p", "api_key=abc"]) == 2
    assert "looks like a secret" in capsys.readouterr().err and not (tmp_path / "r").exists()


@pytest.mark.notebooks  # runs notebooks in a kernel
def test_cli_run_executes_a_notebook_folder_and_prints_no_kernel_warnings(tmp_path, monkeypatch, capfd):
    """One kernel run checks both the CLI's folder handling and its batch output (stdout and
    stderr at the file-descriptor level, where kernel and transport warnings would land). A ``python3`` kernel spec
    of another Python, found first (a user-level one), is not the chain's kernel: this Python's own is."""
    isolate(monkeypatch, tmp_path)
    elsewhere = tmp_path / "jupyter" / "kernels" / "python3"
    elsewhere.mkdir(parents=True)
    (elsewhere / "kernel.json").write_text(json.dumps({
        "argv": [str(tmp_path / "another-python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "another Python", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    folder = tmp_path / "nbs"
    folder.mkdir()
    shutil.copy(NOTEBOOKS / "01_table.ipynb", folder / "01_table.ipynb")
    (folder / "notes.ipynb").write_text("not a report notebook")
    args = parse_run(["--notebooks", str(folder), "--out", str(tmp_path / "reports" / "cli"), "-p", "rows=2"])
    assert args.handler(args) == 0
    printed, err = capfd.readouterr()
    assert "notebooks: 100%" in err  # instir run's own bar over the notebooks stays
    assert "WARNING" not in err and "without encryption" not in err, err
    assert re.search(r"01_table\s+ok\s+run\s+[\d.]+ s", printed) and "total" in printed
    meta = json.loads((tmp_path / "reports" / "cli" / "report.json").read_text())
    assert meta["parameters"] == {"out_dir": str((tmp_path / "reports" / "cli").resolve()), "rows": 2}
    assert meta["kernel"] == "python3 (this Python's own)"  # not the spec of that name, which --kernel python3 runs
    assert (tmp_path / "reports" / "index.html").is_file()


CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium not installed (apt-get install chromium)")


def chromium(page: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    """Headless Chromium on a local page, no network, console messages on stderr."""
    profile = tmp_path / f"profile-{page.stem}-{len(args)}"
    return subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--no-first-run", "--disable-component-update", "--disable-sync", f"--user-data-dir={profile}",
         "--enable-logging=stderr", "--v=0", "--window-size=1200,900", *args, page.as_uri()],
        capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)})


def screenshot_ink(page: Path, tmp_path: Path) -> tuple[float, str]:
    """Share of non-white pixels in a screenshot of ``page``, and Chromium's stderr."""
    import matplotlib.image

    png = tmp_path / f"{page.stem}.png"
    done = chromium(page, tmp_path, f"--screenshot={png}")
    pixels = matplotlib.image.imread(png)[..., :3]
    return float((pixels.min(axis=2) < 0.9).mean()), done.stderr


@pytest.mark.browser
@needs_chromium
def test_report_renders_in_headless_chromium(toy_report, tmp_path):
    ink, log = screenshot_ink(toy_report.out_dir / "01_table.html", tmp_path)
    assert ink > 0.01
    assert "Uncaught" not in log


@pytest.mark.browser
@needs_chromium
def test_chromium_check_catches_script_errors(tmp_path):
    page = tmp_path / "broken.html"
    page.write_text("<html><body><h1>x</h1><script>throw new Error('boom')</script></body></html>")
    assert "Uncaught Error: boom" in screenshot_ink(page, tmp_path)[1]


@pytest.mark.browser
@needs_chromium
def test_corpus_script_never_runs_in_the_browser(toy_report, tmp_path):
    dom = chromium(toy_report.out_dir / "02_corpus.html", tmp_path, "--dump-dom").stdout
    assert "<title>02_corpus</title>" in dom and "pwned</title>" not in dom
    assert "&lt;script&gt;document.title" in dom


def test_paths_given_to_instir_run_are_taken_from_where_it_runs_not_from_the_kernels_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = parse_run(["-p", "data_root=data/instructir-github", "--out", "reports/mine", "-p", "k=3"])
    assert cli_parameters(args) == {"data_root": str(tmp_path / "data" / "instructir-github"),
                                    "out_dir": str(tmp_path / "reports" / "mine"), "k": 3}
    assert cli_parameters(parse_run(["-p", "data_root="])) == {"data_root": ""}  # empty: the fetch cache


@pytest.mark.notebooks  # runs notebooks in a kernel
def test_the_batch_console_shows_each_notebooks_cells_moving(tmp_path, monkeypatch, capfd):
    monkeypatch.delenv("INSTIR_PROGRESS", raising=False)
    run_reports([NOTEBOOKS / "01_table.ipynb"], {"rows": 2}, tmp_path / "reports" / "r")
    console = capfd.readouterr().err
    assert "notebooks:" in console and re.search(r"01_table:.*cell", console)
    # a bar inside a cell (its own display off in the kernel) reports to a line of this console, not the page
    assert re.search(r"01_table: toy rows: 100%.*2/2", console), console[-2000:]
    assert "toy rows" not in (tmp_path / "reports" / "r" / "01_table.html").read_text()


@pytest.mark.notebooks  # runs notebooks in a kernel
def test_no_bar_at_all_with_progress_off(tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("INSTIR_PROGRESS", "0")
    run_reports([NOTEBOOKS / "01_table.ipynb"], {"rows": 2}, tmp_path / "reports" / "r")
    console = capfd.readouterr().err
    assert "cell/s" not in console and "toy rows" not in console


def test_a_notebook_that_asks_for_its_code_shows_it_in_the_html(toy_report, tmp_path):
    import nbformat

    nb = nbformat.read(toy_report.out_dir / "01_table.ipynb", as_version=4)
    nb.metadata["instir"] = {"show_code": True}  # as the tour asks: its code is what it teaches
    nbformat.write(nb, tmp_path / "01_table.ipynb")
    assert "to_csv" in render_html(tmp_path / "01_table.ipynb", tmp_path / "shown.html").read_text()
    assert "to_csv" not in render_html(toy_report.out_dir / "01_table.ipynb", tmp_path / "hidden.html").read_text()


def test_each_notebook_is_handed_only_the_parameters_its_cell_declares(tmp_path, monkeypatch):
    """papermill warns of a parameter a notebook does not declare ("Passed unknown parameter"):
    ``instir run`` hands each notebook only its own, whatever the run sets."""
    import nbformat
    import papermill

    handed = {}

    def execute_notebook(source, output, parameters, **kwargs):
        handed[Path(source).name] = dict(parameters)
        notebook = nbformat.read(source, as_version=4)
        notebook.metadata["papermill"] = {"input_path": source, "output_path": output}
        nbformat.write(notebook, output)

    monkeypatch.setattr(papermill, "execute_notebook", execute_notebook)
    monkeypatch.setattr("instir.pipeline.render_html", lambda executed, html, show_code=False: html)
    tour = CHAIN[0].parent / "00_tour.ipynb"
    run_reports([tour, *CHAIN], {"k": 7, "judge_backend": "baseline", "benchmarks": ["instructir-sample"]},
                tmp_path / "report")
    assert set(handed["00_tour.ipynb"]) == {"out_dir"}
    assert set(handed["02_retrieval.ipynb"]) == {"k", "benchmarks", "out_dir"}
    assert handed["02_retrieval.ipynb"]["k"] == 7
    assert set(handed["04_judge_validation.ipynb"]) == {"judge_backend", "benchmarks", "out_dir"}
    assert set(handed["05_paper_tables.ipynb"]) == {"out_dir"}


def test_a_relative_families_folder_reaches_the_kernels_absolute(tmp_path, monkeypatch):
    import papermill

    from instir.benchmarks.catalog import FAMILIES_VAR

    seen = {}

    def execute(*args, cwd, **kwargs):
        seen["families"], seen["cwd"] = os.environ.get(FAMILIES_VAR), cwd
        raise RuntimeError("stop here")

    monkeypatch.chdir(tmp_path)
    (tmp_path / "families").mkdir()
    monkeypatch.setenv(FAMILIES_VAR, "families")
    monkeypatch.setattr(papermill, "execute_notebook", execute)
    with pytest.raises(RuntimeError, match="stop here"):
        run_reports([NOTEBOOKS / "01_table.ipynb"], {"rows": 2}, tmp_path / "reports" / "r")
    # before, the kernels got 'families', read from the report's folder they run in: no family was found
    assert seen == {"families": str(tmp_path / "families"), "cwd": str(tmp_path / "reports" / "r")}


def test_a_relative_instir_home_is_one_folder_for_the_kit_and_its_kernels(tmp_path, monkeypatch):
    import papermill

    from instir.home import instir_home

    seen = {}

    def execute(*args, cwd, **kwargs):
        seen["home"] = os.environ.get("INSTIR_HOME")
        raise RuntimeError("stop here")

    monkeypatch.chdir(tmp_path)
    (tmp_path / "work").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "work")
    monkeypatch.setenv("INSTIR_HOME", "link/../cache")
    monkeypatch.setattr(papermill, "execute_notebook", execute)
    with pytest.raises(RuntimeError, match="stop here"):
        run_reports([NOTEBOOKS / "01_table.ipynb"], {"rows": 2}, tmp_path / "reports" / "r")
    # before, the kernels got 'link/../cache', read from the report's folder they run in: a second cache in the
    # report, every index and embedding paid for again; and a run's sidecar named its cache entries as spelled
    assert seen == {"home": str(tmp_path / "cache")}
    assert instir_home() == tmp_path / "cache"


def test_a_url_with_credentials_inside_a_list_parameter_is_refused():
    with raises_saying(ValueError, "parameter 'endpoints'"):
        check_parameters({"endpoints": ["http://localhost:8000/v1", "http://user:hunter2@example.org/v1"]})


def test_an_output_too_large_for_a_page_is_left_out_with_a_note_and_a_small_one_kept(tmp_path):
    import nbformat

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(x)", outputs=[
        nbformat.v4.new_output("stream", name="stdout", text="small output\n"),
        nbformat.v4.new_output("stream", name="stdout", text="y" * 2_000_001)])])
    executed = tmp_path / "01_big.ipynb"
    nbformat.write(notebook, executed)
    html = render_html(executed, tmp_path / "01_big.html").read_text()
    assert "small output" in html and "y" * 1000 not in html
    assert "An output of 2,000,001 characters is left out of this page" in html and "01_big.ipynb, cell 1" in html


def test_a_list_parameter_of_numbers_refuses_a_word_in_it():
    known = {"ks": NotebookParameter("ks", "[10, 20]", "list", "", ("01_table.ipynb",))}
    with raises_saying(ValueError, "parameter 'ks' expects a list of int values (default: [10, 20])", '"ten"'):
        validate_parameters({"ks": [10, "ten"]}, known)


def test_no_notebooks_at_all_is_refused_before_anything_is_written(tmp_path):
    with raises_saying(ValueError, "no notebooks to run"):
        run_reports([], {}, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_file_the_report_could_not_write_is_named_with_the_reason():
    from instir.pipeline import write_failure

    assert write_failure(OSError(28, "No space left on device", "/r/03_metrics.html")) == \
        "could not write /r/03_metrics.html: No space left on device"


def test_a_notebook_asking_for_its_code_shows_it_on_its_page_without_show_code(tmp_path):
    import nbformat

    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("tour_step = 41 + 1")],
                                        metadata={"instir": {"show_code": True}})
    nbformat.write(notebook, tmp_path / "00_tour.ipynb")
    assert "tour_step" in render_html(tmp_path / "00_tour.ipynb", tmp_path / "00_tour.html").read_text()
    del notebook.metadata["instir"]
    nbformat.write(notebook, tmp_path / "01_plain.ipynb")
    assert "tour_step" not in render_html(tmp_path / "01_plain.ipynb", tmp_path / "01_plain.html").read_text()


@pytest.mark.parametrize("argv, said", [
    (["-p", "out_dir=elsewhere"], "-p out_dir: the report folder is given as --out, not as a parameter"),
    (["--judge", "baseline", "-p", "judge_backend=openai"], "judge_backend is given twice (also as --judge)"),
    (["-p", "k=10", "-p", "k=20"], "k is given twice (also as -p k=10)")])
def test_a_parameter_given_twice_or_the_report_folder_as_a_parameter_is_refused(argv, said):
    from instir.cli import build_parser

    with raises_saying(ValueError, said):
        cli_parameters(build_parser().parse_args(["run", *argv]))


def test_a_whole_number_is_a_number_and_true_is_no_whole_number():
    # -p k=true once passed for an int parameter; -p alpha=1 must pass for a float one (JSON reads it as an int)
    known = {"k": NotebookParameter("k", "10", "int", "", ("01_table.ipynb",)),
             "alpha": NotebookParameter("alpha", "0.5", "float", "", ("01_table.ipynb",))}
    with raises_saying(ValueError, "parameter 'k' expects a whole number (default: 10), got true"):
        validate_parameters({"k": True}, known)
    validate_parameters({"alpha": 1, "k": 20}, known)


def test_a_parameter_of_more_digits_than_json_writes_or_of_100k_characters_is_one_short_line():
    # on main: json.dumps in the message raised Python's 4300-digit ValueError (a traceback out of run_reports), and
    # a 100,000-character value went into the message whole
    known = notebook_parameters(CHAIN)
    with raises_saying(UsageError, "parameters must be JSON values", "a number of more than 4300 digits"):
        check_parameters({"k": 10**5000})
    for value in (10**5000, ["x" * 100_000]):
        with pytest.raises(UsageError) as err:
            validate_parameters({"judge_model": value}, known)
        assert str(err.value).startswith("parameter 'judge_model' expects a string") and len(str(err.value)) < 200


def test_two_runs_of_one_request_give_the_injected_parameters_cell_one_id(tmp_path, monkeypatch):
    """papermill gives the cell it injects a random id; the executed notebook and its page keep one id, so two runs
    of the same request write the same page."""
    isolate(monkeypatch, tmp_path)
    ids, pages = [], []
    for name in ("first", "second"):
        out = tmp_path / "reports" / name
        run_reports([NOTEBOOKS / "01_table.ipynb"], {"out_dir": str(out), "rows": 2}, out)
        cells = json.loads((out / "01_table.ipynb").read_text(encoding="utf-8"))["cells"]
        ids.append([cell["id"] for cell in cells if "injected-parameters" in cell["metadata"].get("tags", [])])
        pages.append(re.findall(r'id="cell-id=([^"]+)"', (out / "01_table.html").read_text(encoding="utf-8")))
    assert len(ids[0]) == 1 and ids[0] == ids[1]
    assert pages[0] == pages[1] and ids[0][0] in pages[0]


def test_a_reports_folder_this_account_cannot_write_is_refused_before_the_run_writes_anything(tmp_path, monkeypatch):
    # a teacher's reports/ (read-only to students) with a student's own folder in it: the run wrote its record, then
    # stopped at "Permission denied: reports/index.html", leaving a failed report behind
    reports = tmp_path / "reports"
    (reports / "mine").mkdir(parents=True)
    real_access = os.access

    def access(path, mode, **kwargs):  # reports/ can be read and entered, not written
        return not (str(path) == str(reports) and mode & os.W_OK) and real_access(path, mode, **kwargs)

    monkeypatch.setattr(os, "access", access)
    with raises_saying(UsageError, str(reports / "index.html"), "cannot be written", "--out"):
        run_reports([NOTEBOOKS / "01_table.ipynb"], {}, reports / "mine")
    assert list((reports / "mine").iterdir()) == []


def test_another_accounts_index_in_a_sticky_reports_folder_is_refused_before_the_run(tmp_path, monkeypatch):
    # reports/ shared as /tmp is (chmod 1777): another account's index.html cannot be renamed over, and the run
    # stopped at "Operation not permitted: reports/index.html" after writing a failed report
    reports = tmp_path / "reports"
    reports.mkdir()
    write_index(reports)
    reports.chmod(0o1777)
    monkeypatch.setattr(os, "geteuid", lambda: reports.stat().st_uid + 4242)  # another account
    with raises_saying(UsageError, str(reports / "index.html"), "sticky", "--out"):
        run_reports([NOTEBOOKS / "01_table.ipynb"], {}, reports / "mine")
    assert not (reports / "mine").exists()
