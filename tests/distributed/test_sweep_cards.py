"""A grid naming a system card sweeps on a local Ray exactly what ``instir retrieve --system``
writes for that card."""

import pandas as pd
import pytest

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray

from instir.distributed.grid import load_grid  # noqa: E402
from instir.distributed.sweep import run_sweep  # noqa: E402


def test_grid_with_a_card_name_writes_the_run_instir_retrieve_writes(local_ray, tmp_path):
    from instir.cli import main

    path = tmp_path / "grid.yaml"
    path.write_text('benchmarks: [ifir-sample/fiqa]\nsystems: ["BM25 (IFIR)"]\nvariants: [instructed]\nk: 20\n')
    report = run_sweep(load_grid(path), tmp_path / "out")
    assert report.count("done") == 1 and report.count("failed") == 0
    runs = pd.read_csv(tmp_path / "out" / "runs" / "runs.csv")
    assert runs[["retriever", "system", "template"]].values.tolist() == [["BM25 (IFIR)", "BM25 (IFIR)", "ifir"]]
    swept = (tmp_path / "out" / runs.loc[0, "run_file"]).read_bytes()

    assert main(["retrieve", "--system", "BM25 (IFIR)", "--benchmark", "ifir-sample/fiqa", "--k", "20",
                 "--out", str(tmp_path / "cli")]) == 0
    (cli_run,) = (tmp_path / "cli").glob("*.trec")
    assert cli_run.read_bytes() == swept
