"""The `instir` console script: bare `instir` prints the help and a summary of the bundled
samples. Its error handling is tested in test_cli_errors."""

import os
import subprocess
import sys

import pytest

from instir.benchmarks import commands
from instir.cli import main
from instir.progress import QUIET_BARS


def test_bare_instir_prints_the_help_and_a_summary_of_every_bundled_sample(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: instir") and "evaluate" in out and "--debug" in out
    for name in ("instructir-sample", "ifir-sample/fiqa", "ifir-sample/nfcorpus"):
        assert name in out
    assert "sample" in out.lower()


def test_console_script_entry_point_runs_help():
    done = subprocess.run([sys.executable, "-m", "instir.cli", "--help"], capture_output=True, text=True)
    assert done.returncode == 0
    assert "summary" in done.stdout and "fetch" in done.stdout


@pytest.mark.parametrize("progress", ["0", "1"])
def test_a_command_runs_with_the_libraries_bars_off_exactly_when_the_kits_are(progress, monkeypatch):
    """``INSTIR_PROGRESS=0`` means no bars at all: transformers' "Loading weights", the Hub's
    downloads and bare tqdm bars read these switches (also in the kernels and Ray workers a
    command starts); the environment is as before once the command returns."""
    seen = {}

    def handler(args):
        seen.update({name: os.environ.get(name) for name in QUIET_BARS})
        return 0

    monkeypatch.setenv("INSTIR_PROGRESS", progress)
    for name in QUIET_BARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(commands, "summary_command", handler)
    assert main(["summary"]) == 0
    assert seen == (QUIET_BARS if progress == "0" else dict.fromkeys(QUIET_BARS))
    assert not set(QUIET_BARS) & set(os.environ)
