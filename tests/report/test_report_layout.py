"""The report folder layout and the setup every notebook starts with."""

from pathlib import Path

import pytest
from markdown_render import rendered_html, rendered_text

from instir.report.layout import MissingInput, ReportLayout, report_layout, start_report, user_path
from instir.report.record import read_record


def test_the_files_notebooks_hand_each_other_keep_their_names(tmp_path):
    layout = ReportLayout(tmp_path)
    assert layout.runs_table == tmp_path / "runs" / "runs.csv"
    assert layout.metrics_table == tmp_path / "metrics" / "metrics.csv"
    assert layout.instfol == tmp_path / "judge" / "instfol.csv"
    assert layout.judgments == tmp_path / "judge" / "judgments.sqlite"
    assert layout.statistics == tmp_path / "data" / "statistics.csv"


def test_start_report_loads_the_benchmarks_and_records_their_data(tmp_path):
    out = tmp_path / "reports" / "r"
    report = start_report(out, ["instructir-sample", "ifir-sample/fiqa"], "")
    assert report.layout.root == out and list(report.benchmarks) == ["instructir-sample", "ifir-sample/fiqa"]
    recorded = read_record(out)["datasets"]
    assert set(recorded) == {"instructir-sample", "ifir-sample/fiqa"} and recorded["ifir-sample/fiqa"]["sample"]
    assert rendered_text(report.summary.splitlines()[0]).startswith("instructir-sample [instructed] (bundled SAMPLE")
    assert "revision <code>bundled-" in rendered_html(report.summary)


def test_a_relative_path_in_a_folder_of_report_notebooks_means_the_folder_above(tmp_path, monkeypatch,
                                                                                   notebook_kernel):
    notebooks = tmp_path / "lab"
    notebooks.mkdir()
    (notebooks / "01_data_exploration.ipynb").write_text("{}")
    monkeypatch.chdir(notebooks)  # where JupyterLab runs a notebook
    assert user_path("reports/sample") == tmp_path / "reports" / "sample"
    assert report_layout("reports/sample").root == tmp_path / "reports" / "sample"
    assert user_path(tmp_path / "x") == tmp_path / "x"


def test_a_commands_relative_path_in_a_folder_of_report_notebooks_means_the_working_directory(tmp_path, monkeypatch):
    # a review: instir evaluate --out ev run in a report folder wrote ./ev/runs/runs.csv, then its stage read ../ev
    from instir.benchmarks import load_benchmark
    from instir.cli import main

    folder = tmp_path / "reports" / "sample"
    folder.mkdir(parents=True)
    (folder / "01_data_exploration.ipynb").write_text("{}")
    monkeypatch.chdir(folder)
    from jupyter_client.kernelspec import get_kernel_spec

    get_kernel_spec("python3")  # imports ipykernel (as run_reports does), which makes no kernel of this process
    assert user_path("ev") == folder / "ev"
    benchmark = load_benchmark("instructir-sample")
    run = tmp_path / "bm25.trec"
    run.write_text("".join(f"{qid} Q0 {next(iter(benchmark.corpus.ids()))} 1 1.0 t\n" for qid in benchmark.queries))
    assert main(["evaluate", "--benchmark", "instructir-sample", "--run", str(run), "--out", "ev"]) == 0
    assert (folder / "ev" / "metrics" / "metrics.csv").is_file() and not (tmp_path / "reports" / "ev").exists()


def test_a_report_folders_own_notebook_rerun_where_it_lies_writes_into_that_folder(tmp_path, monkeypatch,
                                                                                     notebook_kernel):
    # a review: the README's papermill call leaves reports/sample/01_data_exploration.ipynb (out_dir
    # "reports/sample"); opened and run again there, it wrote reports/reports/sample
    folder = tmp_path / "reports" / "sample"
    folder.mkdir(parents=True)
    (folder / "01_data_exploration.ipynb").write_text("{}")
    monkeypatch.chdir(folder)
    assert user_path("reports/sample") == folder
    assert user_path("reports/other") == tmp_path / "reports" / "reports" / "other"  # the lab's rule, as before


def test_a_copied_reports_notebook_that_writes_into_another_folder_is_warned(tmp_path, monkeypatch, notebook_kernel):
    # a review: a copy of a report folder, its 01 run again there, rewrote the original (an absolute out_dir)
    from says import warns_saying

    from instir.stages import describe_benchmarks

    original, copy = tmp_path / "sweep", tmp_path / "sweep-copy"
    describe_benchmarks(original, ["instructir-sample"])
    copy.mkdir()
    (copy / "report.json").write_text((original / "report.json").read_text())
    (copy / "01_data_exploration.ipynb").write_text("{}")
    monkeypatch.chdir(copy)
    with warns_saying(UserWarning, "this notebook lies in the report folder", "but its stage writes into",
                      "sweep", f"to remake its own folder, set out_dir to {str(copy)!r}"):
        describe_benchmarks(original, ["instructir-sample"])
    monkeypatch.chdir(original)  # instir run's kernels run in the folder they write: nothing to say
    (original / "01_data_exploration.ipynb").write_text("{}")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        describe_benchmarks(original, ["instructir-sample"])


def test_a_relative_path_elsewhere_means_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # papermill run from the repository
    assert user_path("reports/sample") == tmp_path / "reports" / "sample"


def test_a_missing_input_shows_in_a_notebook_as_one_line_naming_the_notebook_that_writes_it(tmp_path, monkeypatch):
    monkeypatch.delenv("INSTIR_DEBUG", raising=False)
    with pytest.raises(MissingInput) as caught:
        ReportLayout(tmp_path).require(ReportLayout(tmp_path).runs_table)
    [line] = caught.value._render_traceback_()  # what IPython shows instead of the traceback
    assert "MissingInput" in line and "runs.csv is missing: run notebook 02_retrieval" in line
    monkeypatch.setenv("INSTIR_DEBUG", "1")
    assert len(caught.value._render_traceback_()) > 1  # the traceback, on request


@pytest.mark.parametrize("where", ["/", "~"])
def test_the_filesystem_root_or_the_home_folder_is_refused_as_a_report_folder(tmp_path, monkeypatch, where):
    # a review: describe_benchmarks("/", …) wrote /report.json, /.instir-run.lock and /data/statistics.csv
    from says import raises_saying

    from instir.errors import UsageError
    from instir.pipeline import run_reports
    from instir.stages import describe_benchmarks

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    with raises_saying(UsageError, "a report writes its files into the folder it is given"):
        describe_benchmarks(where, ["instructir-sample"])
    with raises_saying(UsageError, "name one of its own (reports/NAME)"):
        run_reports(sorted((Path(__file__).parents[2] / "notebooks").glob("0[1-5]_*.ipynb")), {}, where)  # none runs
    assert not (tmp_path / "home" / "report.json").exists()


def test_every_command_that_writes_a_report_folder_refuses_the_home_folder_before_writing_anything(tmp_path,
                                                                                                   monkeypatch):
    # a review: instir evaluate and instir judge --out ~ left ~/.instir-run.lock, ~/report.json and ~/runs/runs.csv
    # before the stage refused the folder; instir sweep --out ~ ran every cell into it first
    from instir.benchmarks import load_benchmark
    from instir.cli import main

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    benchmark = load_benchmark("instructir-sample")
    doc = next(iter(benchmark.corpus.ids()))
    run = tmp_path / "bm25.trec"
    run.write_text("".join(f"{qid} Q0 {doc} 1 1.0 t\n" for qid in benchmark.queries))
    (tmp_path / "grid.yaml").write_text("benchmarks: [instructir-sample]\nsystems: [bm25]\nvariants: [instructed]\n")
    for command in (["evaluate", "--benchmark", "instructir-sample", "--run", str(run)],
                    ["judge", "--benchmark", "instructir-sample", "--backend", "baseline", "--run", str(run),
                     "--query-only-run", str(run), "--max-instances", "1"],
                    ["sweep", "--serial", "grid.yaml"]):
        assert main([*command, "--out", "~"]) == 2, command
        assert not list(home.iterdir()), (command, list(home.iterdir()))
    assert main(["evaluate", "--benchmark", "instructir-sample", "--run", str(run), "--out", "~/ev"]) == 0
    assert (home / "ev" / "metrics" / "metrics.csv").is_file() and not (tmp_path / "~").exists()  # not ./~/ev


def test_a_stage_runs_where_the_process_has_no_home_folder(tmp_path, monkeypatch):
    # a review: with no HOME and no passwd entry (a container run as a bare uid) every stage failed in Path.home()
    from instir.stages import describe_benchmarks

    def no_home():
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    describe_benchmarks(tmp_path / "report", ["instructir-sample"])
    assert (tmp_path / "report" / "data" / "statistics.csv").is_file()


def test_a_quoted_tilde_in_a_commands_out_is_the_home_folder(tmp_path, monkeypatch):
    # a review: instir retrieve --out '~/rr' wrote ./~/rr/…trec and printed ~/rr/…, a file that did not exist
    from instir.cli import main

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(tmp_path)
    assert main(["retrieve", "--benchmark", "instructir-sample", "--retriever", "bm25", "--out", "~/rr"]) == 0
    assert list((home / "rr").glob("*.trec")) and not (tmp_path / "~").exists()


def test_a_process_that_only_imported_the_kernel_app_reads_paths_from_the_working_directory(tmp_path, monkeypatch):
    # jupyter_client's kernel spec lookup imports ipykernel's kernel app without starting a kernel: a command run
    # in a folder of report notebooks then is no notebook, and its paths are the shell's
    import sys
    import types

    idle = types.SimpleNamespace(IPKernelApp=types.SimpleNamespace(initialized=lambda: False))
    monkeypatch.setitem(sys.modules, "ipykernel.kernelapp", idle)
    (tmp_path / "01_data_exploration.ipynb").write_text("{}")
    monkeypatch.chdir(tmp_path)
    assert user_path("reports/r") == tmp_path / "reports" / "r"


def test_a_runs_list_written_before_settings_existed_reads_as_instructed_runs(tmp_path):
    from instir.report.layout import read_runs_table

    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "runs.csv").write_text("benchmark,system,run_file\ninstructir-sample,bm25,runs/a.trec\n")
    table = read_runs_table(ReportLayout(tmp_path))
    assert list(table.columns) == ["benchmark", "setting", "system", "run_file"]
    assert table["setting"].tolist() == ["instructed"]


def test_a_run_file_in_runs_is_an_input_one_may_list_and_what_the_stages_write_is_not(tmp_path):
    layout = ReportLayout(tmp_path)
    assert not layout.stage_writes(tmp_path / "runs" / "mine.trec")  # instir evaluate --run OUT/runs/mine.trec
    assert all(map(layout.stage_writes, (tmp_path / "runs" / "runs.csv", tmp_path / "report.json",
                                         tmp_path / "metrics" / "mine.trec", tmp_path / "judge" / "x.csv")))


_LIST = "benchmark,setting,system,variant,run_file\n"
_ROW = "instructir-sample,instructed,bm25,instructed,runs/a.trec\n"


@pytest.mark.parametrize(("body", "said"), [
    (b"", "runs.csv: not a table the kit can read (EmptyDataError"),
    (_LIST.encode() + b'"' + _ROW.encode(), "runs.csv: not a table the kit can read (ParserError"),
    (_LIST.encode() + _ROW.replace("bm25", "caf\xe9").encode("latin-1"), "runs.csv: not a table the kit can read (U"),
    ((_LIST + _ROW.replace("runs/a.trec", "")).encode(), "runs.csv, line 2, field 'run_file': empty"),
    ((_LIST + _ROW + _ROW.replace("bm25", "e5").replace("runs/a.trec", "  ")).encode(),
     "runs.csv, line 3, field 'run_file': empty"),
    ((_LIST + _ROW + _ROW).encode(), "runs.csv, line 3, field 'system': 'bm25' on 'instructir-sample' is listed again "
                                     "(first at line 2)"),
    ((_LIST + _ROW + 2 * _ROW.replace("bm25,instructed", "bm25,")).encode(), "runs.csv, line 4, field 'system': "
                                                                              "'bm25' on 'instructir-sample' is listed "
                                                                              "again (first at line 3)"),
    ((_LIST + _ROW.replace(",instructed,bm25", ",weird,bm25")).encode(), "runs.csv, line 2, field 'setting': 'weird' "
                                                                           "is no InstructIR setting (known: "),
    ((_LIST + _ROW.replace("instructir-sample", "my-own-bench") + _ROW.replace(",instructed,bm25", ",weird,bm25"))
     .encode(), "runs.csv, line 3, field 'setting': 'weird' is no InstructIR setting (known: "),
    ((_LIST + _ROW.replace(",instructed,bm25", ", instructed,bm25")).encode(),
     "runs.csv, line 2, field 'setting': ' instructed' is no InstructIR setting"),
], ids=["empty", "an unclosed quote", "latin-1", "a run of no file", "a run of spaces for its file",
                                    "a run listed twice", "a run of an empty variant listed twice",
                                    "an unknown setting",
                                    "an unknown setting after a benchmark of no family", "a setting after a space"])
def test_a_damaged_runs_list_is_one_line_naming_the_file_and_where(tmp_path, body, said):
    # each was a traceback out of every stage reading the list (EmptyDataError, ParserError, UnicodeDecodeError,
    # "unsupported operand type(s) for /: 'PosixPath' and 'float'", "Index contains duplicate entries, cannot reshape")
    from instir.benchmarks.types import FormatError
    from instir.report.layout import read_runs_table

    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "runs.csv").write_bytes(body)
    with pytest.raises(FormatError) as raised:
        read_runs_table(ReportLayout(tmp_path))
    assert said in str(raised.value) and str(tmp_path / "runs" / "runs.csv") in str(raised.value)


@pytest.mark.parametrize(("table", "notebook"), [("metrics/metrics.csv", "03_metrics"),
                                                  ("judge/instfol.csv", "04_judge_validation")])
def test_a_stage_table_that_is_no_table_is_one_line_naming_it_and_the_notebook_that_writes_it(tmp_path, table,
                                                                                             notebook):
    # an emptied or binary metrics.csv or instfol.csv was a traceback out of notebook 05 (EmptyDataError, ...)
    from instir.benchmarks.types import FormatError
    from instir.report.layout import read_table

    path = tmp_path / table
    path.parent.mkdir()
    for body in (b"", b"\x00\x01\xff"):
        path.write_bytes(body)
        with pytest.raises(FormatError, match=rf"^{path}: not a table the kit can read .* run notebook {notebook} "):
            read_table(ReportLayout(tmp_path), path)


@pytest.mark.parametrize(("table", "field"), [
    ("system,benchmark\nbm25,instructir-sample\n", "subset"),
    ("benchmark,subset,level,measure,value\ninstructir-sample,all,all,ndcg_cut_10,0.5\n", "system"),
], ids=["without subset", "without system, its first"])
def test_a_metrics_table_without_a_column_notebook_05_reads_is_one_line_naming_the_file_and_the_column(tmp_path, table,
                                                                                                    field):
    # was KeyError: 'level' out of the compare stage
    from instir.benchmarks.types import FormatError
    from instir.stages import paper_tables

    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "metrics.csv").write_text(table)
    with pytest.raises(FormatError, match=rf"^{tmp_path / 'metrics' / 'metrics.csv'}, line 1, field '{field}': no "
                                          "such column: .* run notebook 03_metrics "):
        paper_tables(tmp_path)


def test_a_runs_list_holding_one_system_and_variant_in_two_settings_is_two_runs_not_one_listed_twice(tmp_path):
    # the setting is part of what names a run: the same system and variant in another setting is another run
    from instir.report.layout import read_runs_table

    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "runs.csv").write_text(_LIST + _ROW + _ROW.replace(",instructed,bm25", ",query-only,bm25")
                                                .replace("a.trec", "b.trec"))
    table = read_runs_table(ReportLayout(tmp_path))
    assert table["setting"].tolist() == ["instructed", "query-only"]
    assert table["run_file"].tolist() == ["runs/a.trec", "runs/b.trec"]


def test_an_emptied_instfol_table_is_one_line_out_of_the_compare_stage_naming_it_and_its_notebook(tmp_path):
    # notebook 05 read judge/instfol.csv with pandas itself: an emptied one was EmptyDataError out of the stage
    from instir.benchmarks.types import FormatError
    from instir.stages import paper_tables

    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "metrics.csv").write_text("system,benchmark,subset,level,measure,value\n"
                                                      "bm25,instructir-sample,all,all,ndcg_cut_10,0.5\n")
    (tmp_path / "judge").mkdir()
    (tmp_path / "judge" / "instfol.csv").write_text("")
    with pytest.raises(FormatError, match=rf"^{tmp_path / 'judge' / 'instfol.csv'}: not a table the kit can read "
                                          r"\(EmptyDataError.* run notebook 04_judge_validation "
                                          rf"into {tmp_path} again$"):
        paper_tables(tmp_path)
