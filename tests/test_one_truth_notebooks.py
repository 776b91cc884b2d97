"""The lab and the batch never contradict each other, with real kernels: a papermill run of 02
into a folder ``instir run`` is writing is refused in one line (the notebook's error output is
that line), and the README's one-notebook papermill call re-renders its page and the index, which
marks the pages after it stale with what differs — never "ok" over pages that disagree."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from instir.report.lock import INHERITED_VAR, holder_of
from instir.report.provenance import page_records, stage_records, unvouched
from tests.conftest import copy_caches, copy_report

pytestmark = pytest.mark.notebooks

REPO = Path(__file__).resolve().parents[1]
PAPERMILL = [sys.executable, "-m", "papermill", "--log-level", "ERROR"]


@pytest.fixture
def notebooks(tmp_path, isolated_env) -> Path:
    """A notebooks folder of 02 and 03 (the chain's part these tests need)."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    for name in ("02_retrieval.ipynb", "03_metrics.ipynb"):
        shutil.copy(REPO / "notebooks" / name, folder)
    return folder


def _instir_run(notebooks: Path, out: Path, *parameters: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k != INHERITED_VAR}
    return subprocess.Popen([sys.executable, "-m", "instir.cli", "run", "--notebooks", str(notebooks),
                             "--out", str(out),
                             "--benchmark", "instructir-sample", *parameters], env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_a_papermill_run_of_02_into_a_folder_instir_run_writes_is_refused_in_one_line(notebooks, tmp_path):
    out = tmp_path / "reports" / "X"
    batch = _instir_run(notebooks, out, "--retrievers", "bm25", "dense")
    try:
        deadline = time.time() + 120
        while holder_of(out) is None and batch.poll() is None and time.time() < deadline:
            time.sleep(0.2)
        assert holder_of(out) is not None, "instir run did not take the folder"
        executed = tmp_path / "lab_02.ipynb"
        lab = subprocess.run([*PAPERMILL, str(notebooks / "02_retrieval.ipynb"), str(executed),
                              "-p", "out_dir", str(out),
                              "-p", "k", "50", "-p", "retrievers", "bm25"], capture_output=True, text=True,
                             env={k: v for k, v in os.environ.items() if k != INHERITED_VAR})
        still_running = batch.poll() is None
    finally:
        os.killpg(batch.pid, signal.SIGTERM)
        batch.wait(timeout=60)
    assert lab.returncode != 0
    errors = [o for cell in nbformat.read(executed, as_version=4).cells for o in cell.get("outputs", [])
              if o.get("output_type") == "error"]
    assert len(errors) == 1 and len(errors[0]["traceback"]) == 1  # what the lab shows: one line
    assert "another writer (instir run, pid" in errors[0]["traceback"][0]
    assert still_running, "the batch ended before the lab's run: the test proved nothing"
    assert not (out / "runs" / "runs.csv").is_file() or "50" not in (out / "runs" / "runs.csv").read_text()


def test_the_readme_papermill_call_renders_its_page_and_the_index_marks_the_pages_after_it_stale(
        notebooks, sample_report, tmp_path, isolated_env):
    out = copy_report(sample_report, tmp_path)  # what `make reports` leaves …
    copy_caches(sample_report, isolated_env / "instir")  # … and the caches it filled in the user's home
    index = tmp_path / "reports" / "index.html"
    assert '<span class="ok">ok</span>' in index.read_text()
    old_page = (out / "02_retrieval.html").read_text()
    (out / "02_retrieval.html").write_text(old_page.replace("</body>", "<p>my remark</p></body>"))  # one's own note

    # the homework: 02 again with k 20, as README's papermill call runs a notebook alone
    subprocess.run([*PAPERMILL, str(notebooks / "02_retrieval.ipynb"), str(out / "02_retrieval.ipynb"), "-p", "out_dir",
                    str(out), "-p", "k", "20"],
                   check=True, capture_output=True, env={k: v for k, v in os.environ.items() if k != INHERITED_VAR})

    page = (out / "02_retrieval.html").read_text()
    assert page != old_page and "my remark" not in page  # rendered anew from this run
    outputs = nbformat.read(out / "02_retrieval.ipynb", as_version=4).cells[-1]["outputs"]
    said = [o["data"]["text/markdown"] for o in outputs if "text/markdown" in o.get("data", {})]
    assert len(said) == 1 and said[0].endswith("/reports/index.html` is up to date.")  # the index it rewrote
    (kept,) = out.glob("02_retrieval.html.set-aside-*")  # on the commit before, the remark was lost without a word
    assert "my remark" in kept.read_text()
    # papermill saved the notebook once more after its last cell noted it: still the kit's, no edit
    assert unvouched(out, [out / "02_retrieval.ipynb", out / "02_retrieval.html"]) == []
    noted = json.loads((out / "report.json").read_text())["made"]["."]
    assert {"02_retrieval.ipynb", "02_retrieval.html"} <= set(noted)
    assert page_records(out)["02_retrieval"]["stamp"] == stage_records(out)["02_retrieval"][0]["stamp"]
    html = index.read_text()
    assert 'sample — <span class="stale">stale</span>' in html  # the folder is not "ok"
    assert '<td>02_retrieval</td><td><span class="ok">ok</span>' in html  # its page is this run's
    # 02 ran with k 20 over the default (null: each family's depth)
    assert '<td>03_metrics</td><td><span class="stale">stale</span>' in html and "k null → 20" in html
    meta = json.loads((out / "report.json").read_text())
    assert meta["status"] == "ok"  # the batch's own record is kept; the index judges the folder
