"""The report folder layout and the setup every notebook starts with."""

import json

from instir.report.layout import ReportLayout, start_report


def test_the_files_notebooks_hand_each_other_keep_their_names(tmp_path):
    layout = ReportLayout(tmp_path)
    assert layout.runs_table == tmp_path / "runs" / "runs.csv"
    assert layout.metrics_table == tmp_path / "metrics" / "metrics.csv"
    assert layout.instfol == tmp_path / "judge" / "instfol.csv"
    assert layout.judgments == tmp_path / "judge" / "judgments.sqlite"
    assert layout.statistics == tmp_path / "data" / "statistics.csv"
    assert layout.datasets == tmp_path / "datasets.json"


def test_start_report_loads_the_benchmarks_and_records_their_data(tmp_path):
    out = tmp_path / "reports" / "r"
    report = start_report(out, ["instructir-sample", "ifir-sample/fiqa"], "")
    assert report.layout.root == out and list(report.benchmarks) == ["instructir-sample", "ifir-sample/fiqa"]
    recorded = json.loads(report.layout.datasets.read_text())
    assert set(recorded) == {"instructir-sample", "ifir-sample/fiqa"} and recorded["ifir-sample/fiqa"]["sample"]
    assert report.summary.splitlines()[0].startswith("- instructir-sample [instructed] (bundled SAMPLE")
    assert "revision `bundled-" in report.summary
