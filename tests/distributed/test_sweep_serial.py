"""The sweep's plain loop (no Ray): the judge step writes notebook 04's InstFol files."""

import pandas as pd

from instir.distributed.grid import parse_grid
from instir.distributed.sweep import run_sweep


def test_judge_step_writes_the_instfol_tables_notebook_04_writes(tmp_path):
    from instir.benchmarks import load_benchmark
    from instir.judge import BaselineJudge
    from instir.judge.following import aggregate, instfol
    from instir.retrieval import read_run

    grid = parse_grid({"benchmarks": ["instructir-sample"], "systems": ["bm25"], "k": 20,
                       "judge": {"backend": "baseline", "model": "lexical", "max_instances": 2}})
    report = run_sweep(grid, tmp_path, executor="serial")
    assert report.count("done") == 2
    runs = pd.read_csv(tmp_path / "runs" / "runs.csv").set_index("variant")
    expected = instfol(read_run(tmp_path / runs.loc["instructed", "run_file"]),
                       read_run(tmp_path / runs.loc["query-only", "run_file"]), load_benchmark("instructir-sample"),
                       BaselineJudge("lexical", progress=False), max_instances=2, seed=0).instances
    written = pd.read_csv(tmp_path / "judge" / "instfol_instances.csv")
    assert written["system"].unique().tolist() == ["bm25"]
    assert written["instfol"].tolist() == expected["instfol"].tolist()
    summary = pd.read_csv(tmp_path / "judge" / "instfol.csv")
    assert summary["instfol"].tolist() == aggregate(expected)["instfol"].tolist()
    assert (tmp_path / "judge" / "judgments.sqlite").is_file()


def test_plain_loop_builds_each_system_once_and_reads_each_benchmark_once(tmp_path, monkeypatch):
    import instir.benchmarks
    from instir.systems import specs

    built, read = [], []
    build, load = specs._Factory.__call__, instir.benchmarks.load_benchmark
    monkeypatch.setattr(specs._Factory, "__call__", lambda self: built.append(self.kind) or build(self))
    # run_cell imports load_benchmark from the package when it runs, so this reaches it
    monkeypatch.setattr(instir.benchmarks, "load_benchmark",
                        lambda name, *a, **kw: read.append(name) or load(name, *a, **kw))
    report = run_sweep(parse_grid({"benchmarks": ["instructir-sample", "ifir-sample/fiqa"], "systems": ["bm25"],
                                   "k": 10}), tmp_path, executor="serial")
    assert report.count("done") == 4
    assert built == ["bm25"]
    assert sorted(read) == ["ifir-sample/fiqa", "instructir-sample"]
