"""The way a student walks in: ``make reports``, then ``make lab``, then Run All on every notebook
in JupyterLab, driven in Debian's Chromium: no cell ends in an error or a traceback, and the
tracked notebooks are as they were (JupyterLab ran and saved working copies in ``lab/``).

The repository is laid out in a temporary folder (``reports/``, ``lab/`` and a link to ``data/``)
as a checkout would be; ``make reports`` is the command the Makefile runs (``instir run --out
reports/sample``) and the working copies come from the Makefile's own ``lab-copies`` target."""

import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import copy_caches, copy_report

pytestmark = [pytest.mark.browser, pytest.mark.notebooks]

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium")
TOKEN = "instir-lab-test"


def _tracked_state() -> dict[str, str]:
    """Every tracked notebook's checksum, and git's word on the notebooks folder."""
    sums = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((REPO / "notebooks").glob("*.ipynb"))}
    status = subprocess.run(["git", "status", "--porcelain", "--", "notebooks"], cwd=REPO, capture_output=True,
                            text=True, check=False).stdout
    return {**sums, "git status": status}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory, isolated_env, sample_report):
    """A checkout-like folder after ``make reports`` and ``make lab-copies``, with JupyterLab
    serving the working copies; yields (lab folder, port), stops the server afterwards."""
    if CHROMIUM is None:
        pytest.skip("Debian chromium not installed (apt-get install chromium)")
    pytest.importorskip("playwright.sync_api")
    root = tmp_path_factory.mktemp("checkout")
    (root / "data").symlink_to(REPO / "data", target_is_directory=True)
    copy_report(sample_report, root)  # what `make reports` leaves: reports/sample and its index …
    copy_caches(sample_report, isolated_env / "instir")  # … and the caches it filled in the user's home
    subprocess.run(["make", "--no-print-directory", "-C", str(REPO), "lab-copies", f"LAB_DIR={root / 'lab'}"],
                   check=True, capture_output=True)
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "lab", "--no-browser", "--allow-root", f"--port={port}",
         "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={TOKEN}", f"--notebook-dir={root / 'lab'}",
         "--LabApp.expose_app_in_browser=True", "--ServerApp.open_browser=False"],
        cwd=root / "lab", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env={**os.environ, "INSTIR_PROGRESS": "0"})
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={TOKEN}", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"JupyterLab did not start: {server.stderr.read().decode()[-2000:]}")
                time.sleep(0.5)
        yield root / "lab", port
    finally:
        server.terminate()
        server.wait(timeout=30)


#: Run All in the open notebook, wait for it, save it; returns whether every cell ran without error.
RUN_ALL = """async () => {
  const app = window.jupyterapp;
  const panel = app.shell.currentWidget;
  await panel.context.ready;
  await panel.sessionContext.ready;
  const ok = await app.commands.execute('notebook:run-all-cells');
  await app.commands.execute('docmanager:save');
  return ok;
}"""


def _run_all_in_the_lab(page, port: int, name: str) -> bool:
    """Open ``name`` alone (``reset``: no notebook of the workspace restored beside it) and Run All."""
    page.goto(f"http://127.0.0.1:{port}/lab/tree/{name}?reset&token={TOKEN}")
    page.wait_for_function("(name) => window.jupyterapp?.shell.currentWidget?.title.label === name "
                           "&& window.jupyterapp.shell.currentWidget.sessionContext?.session?.kernel?.status "
                           "=== 'idle'", arg=name, timeout=120_000)
    return page.evaluate(RUN_ALL)


def _errors(notebook: Path) -> list[str]:
    """The error outputs and tracebacks a saved notebook holds."""
    found = []
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        for output in cell.get("outputs", []):
            text = output.get("text", "")
            text = "".join(text) if isinstance(text, list) else text
            if output.get("output_type") == "error" or "Traceback" in text:
                found.append(f"{output.get('ename', '')}: {output.get('evalue', text[-300:])}")
    return found


def test_run_all_in_jupyterlab_after_make_reports_leaves_no_error_and_the_tracked_notebooks_clean(lab):
    from playwright.sync_api import sync_playwright

    folder, port = lab
    before = _tracked_state()
    names = sorted(p.name for p in folder.glob("*.ipynb"))
    assert names[:5] != [] and {"01_data_exploration.ipynb", "05_paper_tables.ipynb"} <= set(names)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run", "--disable-quic"])
        try:
            for name in names:
                page = browser.new_page(viewport={"width": 1400, "height": 900})
                ran = _run_all_in_the_lab(page, port, name)
                page.close()
                assert _errors(folder / name) == [], name
                assert ran, f"{name}: Run All stopped"
        finally:
            browser.close()
    saved = {name: json.loads((folder / name).read_text(encoding="utf-8")) for name in names}
    ran = {name: sum(bool(c.get("execution_count")) for c in nb["cells"]) for name, nb in saved.items()}
    code = {name: sum(c["cell_type"] == "code" for c in nb["cells"]) for name, nb in saved.items()}
    assert ran == code  # every code cell ran, and the copies hold the outputs …
    assert _tracked_state() == before  # … and the tracked notebooks do not
