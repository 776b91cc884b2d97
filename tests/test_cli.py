"""The `instir` console script: bare `instir` prints the help and a summary of the bundled
samples. Its error handling is tested in test_cli_errors."""

import subprocess
import sys

from instir.cli import main


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
