"""The README's commands run as written: every offline command of README.md and the docs/ pages
(:mod:`readme_commands` finds and classifies them) runs in document order, README first, in one
temporary working copy of the repository, and must exit 0.

How it runs them:

- the working copy holds the repository's files (tracked, and untracked ones git does not
  ignore); its ``.venv/bin`` holds shims to the running interpreter (``instir`` is ``python -m
  instir.cli``, ``papermill`` is ``python -m papermill``, ``python`` is this Python), and
  ``PYTHONPATH`` starts with the copy, so its own package and notebooks run;
- ``make reports`` is its Makefile recipe (``instir run --out reports/sample``; the rest of the
  target creates ``.venv``, which the copy has), which the suite runs once for every test that
  reads a sample report (``conftest.sample_report``, under the same network guard): the working
  copy gets that report where the documents say ``make reports``, and the commands' INSTIR_HOME the
  caches it filled (embeddings, indexes), as a user's home holds them. Marked commands (``# needs …``)
  and the make targets :data:`readme_commands.EXEMPT` names are not run;
- HOME, INSTIR_HOME, Hugging Face, Jupyter and matplotlib homes are the module's temp folder
  (``isolated_env``); Hugging Face runs offline, pip has no index, and a ``sitecustomize`` in the
  commands' ``PYTHONPATH`` refuses any TCP connection to an address that is not loopback or
  private (Ray and the notebook kernels talk over local addresses), so a command that needs the
  network fails here instead of passing on a machine that has it;
- no command needed a cost bound: every offline command works on the bundled samples. The
  sweep example runs on a local Ray (2 CPUs' worth of actors), docs/scale-out.md's ``--serial``
  rerun reuses its cells.

Run time: each command's seconds are printed (``pytest -s``).
"""

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from network_guard import BLOCKED, guard_folder
from readme_commands import REPO, Command, commands, make_recipe

from tests.conftest import SAMPLE_REPORT_COMMAND, copy_caches

pytestmark = [pytest.mark.notebooks, pytest.mark.ray]

COMMANDS = commands()
#: the commands this module runs (the others are checked without running, in test_readme_links.py)
RUN = [command for command in COMMANDS if command.kind in ("offline", "substituted")]
#: seconds one command may take
TIMEOUT = 900

#: executables the documents call as ``.venv/bin/NAME``: the running Python's module, or itself
SHIMS = {"instir": "-m instir.cli", "papermill": "-m papermill", "pip": "-m pip", "python": "", "python3": ""}


def _working_copy(root: Path) -> Path:
    copy = root / "repo"
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                                capture_output=True, check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: everything but what git would ignore
        skip = {".git", ".venv", ".cache", "reports", "lab", "__pycache__", ".pytest_cache", ".ipynb_checkpoints"}
        listed = [str(p.relative_to(REPO)) for p in REPO.rglob("*")
                  if p.is_file() and not skip & set(p.relative_to(REPO).parts)]
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            target = copy / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    bin_dir = copy / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, module in SHIMS.items():
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" {module} "$@"\n'.replace("  ", " "), encoding="utf-8")
        shim.chmod(0o755)
    return copy


def _environment(home: Path, copy: Path, guard: Path) -> dict[str, str]:
    env = dict(os.environ)
    for var, sub in (("HOME", ""), ("IPYTHONDIR", ".ipython"), ("MPLCONFIGDIR", "mpl"),
                     ("JUPYTER_CONFIG_DIR", ".jupyter"), ("JUPYTER_DATA_DIR", ".jupyter-data"),
                     ("INSTIR_HOME", "instir"), ("HF_HOME", "hf")):
        env[var] = str(home / sub)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PIP_NO_INDEX="1", INSTIR_PROGRESS="0",
               OMP_WAIT_POLICY="PASSIVE", MPLBACKEND="Agg")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(copy), str(guard), os.environ.get("PYTHONPATH", ""))))
    env["PATH"] = os.pathsep.join((str(copy / ".venv" / "bin"), env.get("PATH", "")))
    return env


def _scripts(command: Command, copy: Path, number: int) -> list[str]:
    """What bash runs for one command (``make reports`` is not run here: see :func:`_make_reports`)."""
    if command.language == "python":
        script = copy / f".readme-example-{number}.py"
        script.write_text(command.code + "\n", encoding="utf-8")
        return [f".venv/bin/python {script.name}"]
    return [command.code]


@pytest.fixture(scope="module")
def ran(tmp_path_factory, isolated_env, sample_report, ranx) -> dict[str, tuple[int, float, str]]:
    """Every command of :data:`RUN`, in order: ``where -> (exit status, seconds, output tail)`` (after
    :func:`conftest.ranx`: the commands that call ranx load its compiled functions instead of compiling them)."""
    root = tmp_path_factory.mktemp("readme")
    copy = _working_copy(root)
    guard = guard_folder(root / "guard")
    env = _environment(isolated_env, copy, guard)
    results = {}
    for number, command in enumerate(RUN):
        start, status, output = time.perf_counter(), 0, ""
        if command.kind == "substituted":
            _make_reports(sample_report, copy, Path(env["INSTIR_HOME"]))
        for script in _scripts(command, copy, number) if command.kind != "substituted" else ():
            try:
                done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=copy, env=env,
                                      capture_output=True, text=True, timeout=TIMEOUT)
                status, output = done.returncode, output + done.stdout + done.stderr
            except subprocess.TimeoutExpired as err:
                status, output = -1, output + f"timed out after {TIMEOUT} s\n{err.stdout or ''}{err.stderr or ''}"
            if status:
                break
        results[command.where] = (status, time.perf_counter() - start, output[-4000:])
        print(f"{command.where:<26} exit {status:<3} {results[command.where][1]:6.1f} s  {command.head[:70]}")
    results["network"] = _guard_check(env, copy)
    return results


def _make_reports(sample_report: Path, copy: Path, instir_home: Path) -> None:
    """What ``make reports`` leaves in the working copy: the session's :func:`conftest.sample_report`,
    which is that recipe run once for the whole suite (under the same network guard), copied to
    ``reports/sample`` in place of an earlier one; and in the commands' INSTIR_HOME, the caches it
    filled (the later commands find the samples' embeddings and indexes, as after ``make reports``)."""
    assert make_recipe("reports") == [SAMPLE_REPORT_COMMAND]
    shutil.rmtree(copy / "reports" / "sample", ignore_errors=True)
    shutil.copytree(sample_report.parent, copy / "reports", dirs_exist_ok=True, symlinks=True)
    copy_caches(sample_report, instir_home)


def _guard_check(env: dict[str, str], copy: Path) -> tuple[int, float, str]:
    probe = "import socket; socket.create_connection(('1.1.1.1', 443), timeout=5)"
    done = subprocess.run([".venv/bin/python", "-c", probe], cwd=copy, env=env, capture_output=True, text=True)
    return done.returncode, 0.0, done.stderr


@pytest.mark.parametrize("command", RUN, ids=[command.where for command in RUN])
def test_the_offline_command_runs_as_written(ran, command):
    status, seconds, output = ran[command.where]
    assert status == 0, f"{command.where} ({seconds:.0f} s): {command.head}\n{output}"


def test_the_commands_ran_without_network(ran):
    status, _, stderr = ran["network"]
    assert status != 0 and BLOCKED in stderr, stderr


def test_the_serial_rerun_of_the_sweep_reuses_every_cell_as_the_docs_say(ran):
    rerun = [c for c in RUN if "instir sweep" in c.head and "--serial" in c.head and "reused" in c.comment]
    assert rerun, "docs/scale-out.md's serial rerun"
    for command in rerun:
        assert re.search(r"\d+ cells: 0 done, [1-9]\d* reused, 0 failed", ran[command.where][2]), command.where


def test_the_runnable_commands_include_the_chain_the_python_example_and_a_sweep():
    heads = [command.head for command in RUN]
    assert "make reports" in heads
    assert any(command.language == "python" and command.document.name == "README.md" for command in RUN)
    assert any("instir sweep" in head and "--serial" not in head for head in heads), "the Ray sweep example"
    assert any("papermill notebooks/" in head for head in heads)
