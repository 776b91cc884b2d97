"""The quick start: the README's first Python block is the one of docs/API.md (one text, in
docs/api_examples.toml), and run as a user runs it, it prints one clean table and no progress bar."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from instir import apidocs

REPO = Path(__file__).resolve().parents[1]


def _first_python_block(path: Path) -> str:
    return re.search(r"```python\n(.*?)\n```", path.read_text(encoding="utf-8"), re.S)[1]


def test_the_readme_and_the_api_page_start_with_the_same_quick_start():
    assert _first_python_block(REPO / "README.md") == apidocs.quickstart() == _first_python_block(apidocs.PAGE)


@pytest.mark.processes
def test_the_quick_start_prints_one_table_and_no_bars(tmp_path, isolated_env):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    env.pop("INSTIR_PROGRESS", None)  # bars as a user gets them: on
    env.pop("TQDM_DISABLE", None)
    done = subprocess.run([sys.executable, "-c", apidocs.quickstart()], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "", done.stderr  # no bars, no warnings
    lines = done.stdout.strip().splitlines()
    assert lines[0].split() == ["nDCG@10", "Robustness@10"] and len(lines) == 3
    assert lines[1].startswith("bm25 ") and lines[2].startswith("bm25 (query-only) ")
    assert list(tmp_path.iterdir()) == []  # nothing written where the user stands
