"""Lab hygiene for a class: ``make lab-fresh`` refuses while a Jupyter server serves the lab's
folder (its kernels hold the previous answers), and git reads the tracked notebooks without
outputs however they were opened and saved (the nbstripout filter ``make`` configures)."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _make(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", "-C", str(cwd), *args], capture_output=True, text=True)


@pytest.mark.notebooks
def test_lab_fresh_refuses_while_a_jupyter_server_serves_the_lab_and_goes_on_once_it_stopped(tmp_path,
                                                                                            isolated_env):
    lab = tmp_path / "lab"
    assert _make("lab-copies", f"LAB_DIR={lab}").returncode == 0
    answer = lab / "00_tour.ipynb"
    answer.write_text(answer.read_text().replace("answer_1 = None", "answer_1 = 0.63"))
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "jupyter", "server", "--no-browser", "--allow-root",
                               f"--port={port}", "--ServerApp.ip=127.0.0.1", f"--ServerApp.root_dir={lab}"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            listed = subprocess.run([sys.executable, "-m", "jupyter", "server", "list", "--json"],
                                    capture_output=True, text=True).stdout
            if f'"port": {port}' in listed:
                break
            time.sleep(0.5)
        refused = _make("lab-fresh", f"LAB_DIR={lab}")
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert refused.returncode != 0
    assert f"JupyterLab is running on {lab} (port {port}" in refused.stderr and "jupyter server stop" in refused.stderr
    assert "answer_1 = 0.63" in answer.read_text() and not list(lab.glob("previous-*"))  # nothing moved

    done = _make("lab-fresh", f"LAB_DIR={lab}")
    assert done.returncode == 0, done.stderr
    assert "answer_1 = 0.63" not in answer.read_text() and list(lab.glob("previous-*/00_tour.ipynb"))


@pytest.mark.parametrize("served, refused", [("lab", True), ("lab/week1", True), ("", True), ("elsewhere", False),
                                             ("lab-old", False)])
def test_a_jupyter_server_rooted_at_inside_or_above_the_lab_folder_refuses_fresh_copies(tmp_path, monkeypatch, capsys,
                                                                                        served, refused):
    """A plain ``jupyter lab`` at the repository's root opens lab/'s notebooks too: its kernels hold the previous
    answers as a server rooted at lab/ does (it was let through)."""
    from instir import lab_servers

    lab, root = tmp_path / "lab", tmp_path / served
    monkeypatch.chdir(tmp_path)  # where make runs: a folder above the lab
    listed = "\n".join([json.dumps({"port": 1, "pid": 1}),  # a line naming no root folder: no server of ours
                        json.dumps({"url": "http://x:8899/", "port": 8899, "pid": 4242, "root_dir": str(root)})])
    monkeypatch.setattr(lab_servers.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, listed + "\n"))
    assert lab_servers.main([str(lab)]) == int(refused)
    said = capsys.readouterr().err
    assert said.startswith(f"JupyterLab is running on {root} (port 8899, pid 4242)") is refused
    assert said.count("JupyterLab is running") == int(refused)
    assert (f", a folder above {lab}:" in said) is (refused and served == "")


def test_lab_fresh_with_lab_reports_moves_the_previous_groups_reports_aside_and_makes_them_again(tmp_path):
    """``make lab-fresh LAB_REPORTS=1``: the notebooks' report folder goes beside the previous copies (nothing lost)
    and is made again by the ``make reports`` command (here an ``instir`` that writes what it was asked)."""
    lab, reports = tmp_path / "lab", tmp_path / "reports" / "sample"
    lab.mkdir()
    (lab / "00_tour.ipynb").write_text("{}")
    reports.mkdir(parents=True)
    (reports / "report.json").write_text('{"by": "the previous group"}')
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "instir").write_text('#!/bin/sh\nmkdir -p "$3" && echo "$@" > "$3/made-by.txt"\n')
    (fake / "instir").chmod(0o755)
    done = _make("lab-fresh", f"LAB_DIR={lab}", "LAB_REPORTS=1", f"LAB_REPORTS_DIR={reports}", f"BIN={fake}")
    assert done.returncode == 0, done.stderr
    (previous,) = lab.glob("previous-*")
    assert (previous / "00_tour.ipynb").is_file()
    assert "the previous group" in (previous / "reports" / "report.json").read_text()
    assert (reports / "made-by.txt").read_text().split() == ["run", "--out", str(reports)]
    assert (lab / "00_tour.ipynb").read_text() != "{}"  # a fresh copy
    assert "the previous reports are in" in done.stdout


def test_lab_fresh_twice_in_one_second_keeps_both_groups_copies(tmp_path):
    # the folder was named by the second alone: the second move put the fresh copies over the student's
    lab = tmp_path / "lab"
    lab.mkdir()
    (lab / "00_tour.ipynb").write_text('{"by": "the student"}')
    for _ in range(2):
        done = _make("lab-fresh", f"LAB_DIR={lab}", f"BIN={tmp_path / 'none'}")
        assert done.returncode == 0, done.stderr
    kept = sorted(p.read_text() for p in lab.glob("previous-*/00_tour.ipynb"))
    assert len(kept) == 2 and '{"by": "the student"}' in kept


@pytest.mark.processes
def test_git_reads_a_tracked_notebook_saved_with_outputs_as_the_output_free_one(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True)
    for name in ("Makefile", ".gitattributes"):  # the working tree's, as they will be committed
        (clone / name).write_bytes((REPO / name).read_bytes())
    configured = _make("git-filter", f"BIN={BIN}", cwd=clone)
    assert configured.returncode == 0 and "nbstripout" in configured.stdout, configured.stderr
    path = clone / "notebooks" / "00_tour.ipynb"
    notebook = nbformat.read(path, as_version=4)
    code = next(cell for cell in notebook.cells if cell.cell_type == "code")
    code.outputs = [nbformat.v4.new_output("stream", text="a student's output\n")]
    code.execution_count = 7
    nbformat.write(notebook, path)  # what JupyterLab's save does

    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
    diff = subprocess.run(["git", "diff", "--stat", "--", "notebooks"], cwd=clone, capture_output=True, text=True,
                          env=env)
    assert diff.returncode == 0 and diff.stdout == ""  # git sees no change
    subprocess.run(["git", "add", "notebooks/00_tour.ipynb"], cwd=clone, check=True, env=env)
    status = subprocess.run(["git", "status", "--porcelain", "notebooks"], cwd=clone, capture_output=True,
                            text=True, env=env)
    assert status.stdout == ""  # nothing to commit: the student's outputs never reach a commit
    blob = subprocess.run(["git", "show", ":notebooks/00_tour.ipynb"], cwd=clone, capture_output=True, text=True,
                          check=True, env=env).stdout
    assert "a student's output" not in blob and blob == (REPO / "notebooks" / "00_tour.ipynb").read_text()
