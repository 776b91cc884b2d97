"""One grid, three ways, one folder: ``instir run`` (over the notebooks that write runs, metrics
and InstFol tables: 02, 03 and 04; the tour, 01 and 05 write none and run in the README's and the lab's
tests), ``instir sweep --serial`` and ``instir sweep`` on a local Ray write byte-identical runs, metrics,
comparisons and InstFol tables, on the bundled samples (FollowIR's p-MRR included) and under the real names on a
real-layout data root (:mod:`real_data`: IFIR's fiqa and fire) in one grid. The real InstructIR names are left out of
this grid: MiniLM would encode its 9,906 queries twice (minutes on a CPU); ``instir run`` on them
is tested in ``test_notebooks_real.py``. Left out of the comparison, by name: the runs' JSON sidecars
(wall times, paths) and ``runs.csv``'s timing and provenance columns (``search_s``, ``elapsed_s``, ``reused``,
``written_by``)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from real_data import data_root

from instir.cli import main

pytestmark = [pytest.mark.notebooks, pytest.mark.ray]

BENCHMARKS = ("instructir-sample", "ifir-sample/fiqa", "followir-sample/core17", "ifir/fiqa", "ifir/fire")
SYSTEMS = ("bm25", "dense")
K = 20
#: InstFol instances per benchmark (and gold pairs per stratum in notebook 04)
LIMIT = 2
#: The files that must be identical, byte for byte, besides every ``runs/*.trec``.
COMPARED = ("metrics/metrics.csv", "metrics/comparisons.csv", "judge/instfol.csv")
#: ``runs.csv`` columns that say how long a run took, whether it was reused and which front end
#: wrote it, not what it is.
TIMING_COLUMNS = ["search_s", "elapsed_s", "reused", "written_by"]
#: The notebooks whose files the three ways compare.
WRITERS = ("02_retrieval", "03_metrics", "04_judge_validation")
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def folders(tmp_path_factory, isolated_env) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("three-ways")
    root = data_root(base / "data")
    grid = base / "grid.yaml"
    grid.write_text(f"benchmarks: {list(BENCHMARKS)}\nsystems: {list(SYSTEMS)}\nk: {K}\ndata_root: '{root}'\n"
                    f"judge: {{backend: baseline, max_instances: {LIMIT}}}\n", encoding="utf-8")
    out = {way: base / way for way in ("run", "serial", "ray")}
    notebooks = base / "notebooks"
    notebooks.mkdir()
    for name in WRITERS:
        shutil.copy(REPO / "notebooks" / f"{name}.ipynb", notebooks)
    assert main(["run", "--notebooks", str(notebooks), "--benchmark", *BENCHMARKS, "--retrievers", *SYSTEMS,
                 "-p", f"data_root={root}", "-p", f"k={K}", "-p", "judge_backend=baseline",
                 "-p", f"judge_max_instances={LIMIT}", "-p", "judge_repeats=1", "--out", str(out["run"])]) == 0
    assert main(["sweep", str(grid), "--serial", "--out", str(out["serial"])]) == 0
    ray = subprocess.run([sys.executable, "-m", "instir.cli", "sweep", str(grid), "--num-cpus", "2",
                          "--out", str(out["ray"])], capture_output=True, text=True, timeout=900)
    assert ray.returncode == 0, ray.stdout + ray.stderr
    return out


def test_the_three_ways_write_the_same_runs(folders):
    names = {way: sorted(p.name for p in (folder / "runs").glob("*.trec")) for way, folder in folders.items()}
    assert len(names["run"]) == len(BENCHMARKS) * len(SYSTEMS) * 2
    assert names["serial"] == names["run"] and names["ray"] == names["run"]
    for name in names["run"]:
        reference = (folders["run"] / "runs" / name).read_bytes()
        assert all((folder / "runs" / name).read_bytes() == reference for folder in folders.values()), name


@pytest.mark.parametrize("name", COMPARED)
def test_the_three_ways_write_the_same_tables(folders, name):
    reference = (folders["run"] / name).read_bytes()
    assert reference.count(b"\n") > 1, name
    for way in ("serial", "ray"):
        assert (folders[way] / name).read_bytes() == reference, f"{way}: {name}"


def test_the_three_ways_list_the_same_runs_apart_from_their_timing(folders):
    tables = {way: pd.read_csv(folder / "runs" / "runs.csv").drop(columns=TIMING_COLUMNS)
              for way, folder in folders.items()}
    for way in ("serial", "ray"):
        pd.testing.assert_frame_equal(tables[way], tables["run"])


def test_every_way_compares_robustness_and_p_mrr_per_query_group(folders):
    for way, folder in folders.items():
        comparisons = pd.read_csv(folder / "metrics" / "comparisons.csv")
        groups = comparisons[comparisons["unit"] == "group"]
        assert set(zip(groups["benchmark"], groups["measure"])) == {
            ("instructir-sample", "Robustness@10"), ("followir-sample/core17", "p-MRR")}, way
