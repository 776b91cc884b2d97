"""One grid, three ways, one folder: ``instir run`` (over the notebooks that write runs, metrics
and InstFol tables: 02, 03 and 04; the tour, 01 and 05 write none and run in the README's and the lab's
tests), ``instir sweep --serial`` and the sweep on the session's local Ray write byte-identical runs, metrics,
comparisons and InstFol tables and the same per-query scores, on the bundled samples (FollowIR's p-MRR included) and
under the real names on a real-layout data root (:mod:`real_data`: IFIR's fiqa and fire) in one grid. The Ray way has
an embedding cache of its own and a ``shard_min_docs`` that sends the corpora over it through the Ray Data stage and
encodes the others inside their cells' actor, so its vectors are encoded again, both ways, not read from the first
way's cache; the same sweep then shows where its cells ran and that a rerun computes nothing. (``instir sweep``
starting a Ray of its own runs as the README and docs/scale-out.md write it, in ``test_readme.py``.) The real
InstructIR names are left out of this grid: MiniLM would encode its 9,906 queries twice (minutes on a CPU); ``instir
run`` on them is tested in ``test_notebooks_real.py``. Left out of the comparison, by name: the runs' JSON sidecars
(wall times, paths) and ``runs.csv``'s timing and provenance columns (``search_s``, ``elapsed_s``, ``reused``,
``written_by``)."""

import os
import shutil
from pathlib import Path

import pandas as pd
import pytest
import yaml
from real_data import data_root

from instir.benchmarks import load_benchmark
from instir.cli import main
from instir.distributed.grid import parse_grid
from instir.distributed.sweep import run_sweep

pytestmark = [pytest.mark.notebooks, pytest.mark.ray]

BENCHMARKS = ("instructir-sample", "ifir-sample/fiqa", "followir-sample/core17", "ifir/fiqa", "ifir/fire")
#: corpora of this many documents or more go through the Ray way's Ray Data stage (instructir-sample's 152 do,
#: ifir-sample/fiqa's 38 do not: both paths in one sweep)
SHARD_MIN_DOCS = 100
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
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def grid(tmp_path_factory) -> dict:
    """The grid of the three ways (as a ``grid.yaml`` holds it), on a real-layout data root."""
    root = data_root(tmp_path_factory.mktemp("grid") / "data")
    return {"benchmarks": list(BENCHMARKS), "systems": list(SYSTEMS), "k": K, "data_root": str(root),
            "judge": {"backend": "baseline", "max_instances": LIMIT}}


@pytest.fixture(scope="module")
def ray_way(local_ray, grid, tmp_path_factory):
    """The Ray way: the grid on the session's local Ray, with an embedding cache of its own; (grid, folder, report)."""
    base = tmp_path_factory.mktemp("ray-way")
    ray_grid = parse_grid({**grid, "cache_dir": str(base / "cache"), "shard_min_docs": SHARD_MIN_DOCS})
    return ray_grid, base / "ray", run_sweep(ray_grid, base / "ray")


@pytest.fixture(scope="module")
def folders(tmp_path_factory, isolated_env, grid, ray_way) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("three-ways")
    grid_file = base / "grid.yaml"
    grid_file.write_text(yaml.safe_dump(grid), encoding="utf-8")
    out = {way: base / way for way in ("run", "serial")}
    notebooks = base / "notebooks"
    notebooks.mkdir()
    for name in WRITERS:
        shutil.copy(REPO / "notebooks" / f"{name}.ipynb", notebooks)
    assert main(["run", "--notebooks", str(notebooks), "--benchmark", *BENCHMARKS, "--retrievers", *SYSTEMS,
                 "-p", f"data_root={grid['data_root']}", "-p", f"k={K}", "-p", "judge_backend=baseline",
                 "-p", f"judge_max_instances={LIMIT}", "-p", "judge_repeats=1", "--out", str(out["run"])]) == 0
    assert main(["sweep", str(grid_file), "--serial", "--out", str(out["serial"])]) == 0
    return {**out, "ray": ray_way[1]}


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


def test_the_three_ways_score_every_query_alike(folders):
    frames = {way: pd.read_parquet(folder / "metrics" / "per_query.parquet") for way, folder in folders.items()}
    assert len(frames["run"]) > 0
    for way in ("serial", "ray"):
        pd.testing.assert_frame_equal(frames[way], frames["run"])


def test_the_ray_ways_cells_ran_as_ray_tasks_on_one_actor_per_node(ray_way):
    _, _, report = ray_way
    assert report.count("failed") == 0 and report.count("done") == len(BENCHMARKS) * len(SYSTEMS) * 2
    pids = {r.pid for r in report.results.values()}
    assert pids - {os.getpid()} and all(not r.node.endswith(":local") for r in report.results.values())
    assert len(pids) == 1  # one node: one actor, MiniLM then BM25, keeping its imports and model


def test_the_ray_data_stage_encodes_only_the_corpora_over_the_threshold(ray_way, isolated_env):
    ray_grid, _, report = ray_way
    large = {name for name in BENCHMARKS
             if len(load_benchmark(name, root=ray_grid.data_root).corpus) >= SHARD_MIN_DOCS}
    assert "instructir-sample" in large and "ifir-sample/fiqa" not in large  # both paths ran
    assert report.encoded and {key.rsplit(" ", 2)[0] for key in report.encoded} == large
    assert all(" dense " in f" {key} " for key in report.encoded)
    for name in large:  # their chunks came from the stage, not the cells (a second document format may find them)
        assert sum(count for key, count in report.encoded.items() if key.rsplit(" ", 2)[0] == name) >= 1, name


def test_a_rerun_of_the_ray_way_computes_nothing(ray_way, folders):
    ray_grid, out, _ = ray_way
    before = {p: p.stat().st_mtime_ns for p in (out / "runs").glob("*.trec")}
    before |= {p: p.stat().st_mtime_ns for p in (out / "sweep" / "cells").glob("*.parquet")}
    report = run_sweep(ray_grid, out)
    assert report.count("reused") == len(BENCHMARKS) * len(SYSTEMS) * 2 and report.count("done") == 0
    assert report.encoded and not any(report.encoded.values())  # the stage found every chunk in the cache
    assert {p: p.stat().st_mtime_ns for p in before} == before
