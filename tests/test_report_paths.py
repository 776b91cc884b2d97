"""Paths and terminals (issue 30, item 5): a report folder whose subfolders lead elsewhere by
symlink, or that lies inside the cache root, is refused in one line before anything is written,
and names printed to a terminal show their control characters as escapes."""

from __future__ import annotations

from pathlib import Path

import pytest
from says import raises_saying
from test_cli_errors import fails

from instir.distributed.grid import parse_grid
from instir.distributed.sweep import run_sweep
from instir.errors import UsageError
from instir.home import instir_home
from instir.stages import retrieve_runs


@pytest.fixture
def linked(tmp_path) -> tuple[Path, Path]:
    """A report folder whose ``runs/`` is a symlink to a folder elsewhere."""
    out, elsewhere = tmp_path / "report", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "runs").symlink_to(elsewhere)
    return out, elsewhere


def test_a_stage_refuses_a_folder_whose_subfolder_leads_outside_by_symlink(linked):
    out, elsewhere = linked
    with pytest.raises(UsageError, match=rf"{out / 'runs'} is a symlink to {elsewhere}, outside {out}: "):
        retrieve_runs(out, ["ifir-sample/fiqa"], ["bm25"], k=20)
    assert not list(elsewhere.iterdir())  # was: run files written there, then a ValueError (not in the subpath)


def test_a_sweep_refuses_a_nested_symlinked_subfolder(tmp_path):
    out, elsewhere = tmp_path / "report", tmp_path / "elsewhere"
    (out / "metrics").mkdir(parents=True)
    elsewhere.mkdir()
    (out / "metrics" / "runs").symlink_to(elsewhere)
    with pytest.raises(UsageError, match="is a symlink to .*, outside "):
        run_sweep(parse_grid({"benchmarks": ["ifir-sample/fiqa"], "systems": ["bm25"], "k": 20}), out,
                  executor="serial")
    assert not list(elsewhere.iterdir()) and not (out / "runs").exists()


def test_a_symlink_that_stays_inside_the_folder_is_accepted(tmp_path):
    out = tmp_path / "report"
    (out / "store").mkdir(parents=True)
    (out / "runs").symlink_to(out / "store")
    retrieve_runs(out, ["ifir-sample/fiqa"], ["bm25"], k=20)
    assert (out / "store" / "runs.csv").is_file()


def test_instir_evaluate_refuses_a_symlinked_subfolder_in_one_line(linked, tmp_path, capsys):
    from instir.benchmarks import load_benchmark
    from instir.retrieval import retrieve
    from instir.retrieval.lexical import BM25Retriever

    out, _ = linked
    trec = retrieve(load_benchmark("ifir-sample/fiqa"), BM25Retriever(show_progress=False), k=20,
                    out_dir=tmp_path / "mine").meta["path"]
    line = fails(capsys, "evaluate", "--benchmark", "ifir-sample/fiqa", "--run", str(trec), "--out", str(out))
    assert line.startswith(f"instir evaluate: {out / 'runs'} is a symlink to ")


@pytest.mark.parametrize("inside", ["", "reports/r"])
def test_a_report_folder_inside_the_cache_root_is_refused(inside, capsys):
    out = instir_home() / inside if inside else instir_home()
    with raises_saying(UsageError, "inside the cache root", "$INSTIR_HOME"):
        retrieve_runs(out, ["ifir-sample/fiqa"], ["bm25"], k=20)
    assert not (instir_home() / "reports").exists()
    grid = parse_grid({"benchmarks": ["ifir-sample/fiqa"], "systems": ["bm25"], "k": 20})
    with pytest.raises(UsageError, match="lies inside the cache root"):
        run_sweep(grid, instir_home() / "sweep-out", executor="serial")


CARDS = '''
[[card]]
name = "evil\\u001b]0;pwned\\u0007\\u001b[2Jname\\nfake line\\u202ereversed"
paper = "user"
kind = "retriever"
adapter = "bm25"
'''


def test_instir_systems_refuses_a_card_named_with_control_characters_in_one_line_that_shows_none(tmp_path, capsys):
    cards = tmp_path / "cards.toml"
    cards.write_text(CARDS, encoding="utf-8")
    line = fails(capsys, "systems", "--cards", str(cards))  # was: printed raw, then escaped, and run under that name
    assert "\x1b" not in line and "\x07" not in line and "\u202e" not in line
    assert str(cards) in line and "field 'name'" in line and "holds a control character" in line


def test_instir_retrieve_refuses_an_out_inside_the_cache_root_in_one_line(capsys):
    out = instir_home() / "runs"
    line = fails(capsys, "retrieve", "--benchmark", "ifir-sample/fiqa", "--retriever", "bm25", "--out", str(out))
    assert line.startswith("instir retrieve: ") and "lies inside the cache root" in line  # was: accepted
    assert not out.exists()


def test_a_symlink_back_to_the_folder_itself_is_accepted(tmp_path):
    from instir.report.lock import FolderLock

    out = tmp_path / "report"
    out.mkdir()
    (out / "here").symlink_to(out)  # the folder itself: nothing leads outside it
    with FolderLock(out, "instir evaluate") as lock:
        assert lock.path.is_file()
