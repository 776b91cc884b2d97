"""The guided tour (``notebooks/00_tour.ipynb``) runs under papermill offline, from a folder of
working copies as JupyterLab runs it, with no error and nothing on stderr (no TqdmWarning); its
hand computations agree with the kit (the notebook asserts it, and this test recomputes the BM25
numbers it prints, InstFol@20 and FollowIR's p-MRR among them); every exercise check says "not
yet" on the shipped placeholders, and the tour's own p-MRR check "correct" on the right answer; the
playground shows the example's rankings as HTML. A second run has no ipywidgets in the kernel and
gets the chain's parameters, as ``instir run`` passes them."""

import ast
import math
import re
import shutil
import time
from pathlib import Path

import nbformat
import pytest

from instir import evaluate
from instir.benchmarks import load_benchmark
from instir.judge import BaselineJudge
from instir.judge.following import instfol
from instir.metrics import evaluate_runs
from instir.report.tour import only
from instir.retrieval import retrieve
from instir.retrieval.lexical import BM25Retriever

pytestmark = pytest.mark.notebooks

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
TOUR = "00_tour"
WIDGET = "application/vnd.jupyter.widget-view+json"


def _run(root: Path, **parameters) -> tuple[nbformat.NotebookNode, float]:
    """Execute a working copy of the tour in ``root/notebooks`` with out_dir ``out`` (the folder
    above, as in JupyterLab); returns the executed notebook and its wall time."""
    import papermill

    cwd = root / "notebooks"
    cwd.mkdir(parents=True)
    shutil.copy(NOTEBOOKS / f"{TOUR}.ipynb", cwd)
    start = time.perf_counter()
    papermill.execute_notebook(str(cwd / f"{TOUR}.ipynb"), str(cwd / "executed.ipynb"), kernel_name="python3",
                               parameters={"out_dir": "out", **parameters}, cwd=str(cwd), progress_bar=False)
    return nbformat.read(cwd / "executed.ipynb", as_version=4), time.perf_counter() - start


@pytest.fixture(scope="module")
def tour(tmp_path_factory, isolated_env):
    root = tmp_path_factory.mktemp("tour")
    executed, wall = _run(root)
    print(f"tour: {wall:.1f} s under papermill")
    return root, executed


@pytest.fixture(scope="module")
def without_widgets(sample_report):
    """The tour as ``make reports`` runs it (the session's :func:`conftest.sample_report`): in a
    kernel where ``import ipywidgets`` fails, as the first notebook of the chain."""
    return nbformat.read(sample_report / f"{TOUR}.ipynb", as_version=4)


def _outputs(nb: nbformat.NotebookNode):
    return [(cell, output) for cell in nb.cells if cell.cell_type == "code" for output in cell.get("outputs", [])]


def _text(output) -> str:
    if output.output_type == "stream":
        return output.text
    return "\n".join(str(v) for k, v in output.get("data", {}).items() if k.startswith("text/"))


def _printed(nb: nbformat.NotebookNode, prefix: str) -> str:
    lines = [line for _, o in _outputs(nb) if o.output_type == "stream" for line in o.text.splitlines()
             if line.startswith(prefix)]
    assert len(lines) == 1, prefix
    return lines[0][len(prefix):].strip()


def _assert_clean(nb: nbformat.NotebookNode) -> None:
    outputs = _outputs(nb)
    assert outputs
    assert not [o for _, o in outputs if o.output_type == "error"]
    assert not [o.text for _, o in outputs if o.output_type == "stream" and o.name == "stderr"]
    text = "\n".join(_text(o) for _, o in outputs)
    assert "Warning" not in text and "Traceback" not in text


def test_the_tour_runs_offline_without_errors_or_warnings(tour):
    _assert_clean(tour[1])


def test_the_tour_writes_only_under_out_dir(tour):
    root, _ = tour
    written = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    outside = [p for p in written if not p.startswith("out/")]
    assert outside == ["notebooks/00_tour.ipynb", "notebooks/executed.ipynb"]
    assert (root / "out" / "tour" / "judgments.sqlite").is_file()


def test_the_hand_computed_ndcg_and_robustness_are_the_kits(tour):
    printed = ast.literal_eval(_printed(tour[1], "hand = kit, nDCG@10 and Robustness@10:"))
    sample = load_benchmark("instructir-sample")
    bm25 = BM25Retriever(show_progress=False)
    runs = {"BM25": retrieve(sample, bm25, k=10), "BM25 query-only": retrieve(sample, bm25, "query-only", k=10)}
    table = evaluate_runs(runs, sample, ["nDCG@10"]).table.pivot(index="system", columns="measure", values="value")
    for system in runs:
        assert printed[system] == pytest.approx(tuple(table.loc[system, ["nDCG@10", "Robustness@10"]]), abs=1e-6)
    assert printed["BM25"][1] > printed["BM25 query-only"][1]  # the instruction helps BM25's worst cases
    assert set(printed) == {"BM25", "BM25 query-only", "MiniLM", "MiniLM query-only"}


def test_the_hand_computed_instfol_is_the_kits(tour):
    value = float(_printed(tour[1], "hand = kit, InstFol@20:"))
    qid = "sample-fiqa-q1_3"
    one = only(load_benchmark("ifir-sample/fiqa"), [qid])
    bm25 = BM25Retriever(show_progress=False)
    result = instfol(retrieve(one, bm25, k=20), retrieve(one, bm25, "query-only", k=20), one,
                     BaselineJudge(progress=False))
    expected = result.instances.set_index("qid").loc[qid, "instfol"]
    assert not math.isnan(expected) and value == pytest.approx(expected, abs=1e-6)


def test_the_hand_computed_pmrr_is_the_kits(tour):
    value = float(_printed(tour[1], "hand = kit, p-MRR:"))
    core17 = load_benchmark("followir-sample/core17")
    expected = evaluate(core17, retrieve(core17, BM25Retriever(show_progress=False)), "p-MRR")
    assert value == pytest.approx(expected, abs=1e-6)
    assert value > 0  # sample-c03 of sample-301 moves down one rank (2 -> 3); the rest stay


def _check_cells(nb: nbformat.NotebookNode) -> list:
    """The exercises' check cells: those whose last line calls a check (``tour.check_*`` or, for
    the p-MRR exercise, the tour's own ``check_pmrr_change``)."""
    return [cell for cell in nb.cells if cell.cell_type == "code" and cell.source.strip()
            and cell.source.strip().splitlines()[-1].startswith(("tour.check_", "check_"))]


def test_every_exercise_check_says_not_yet_on_the_placeholders(tour):
    checks = _check_cells(tour[1])
    assert len(checks) == 6
    for cell in checks:
        shown = "\n".join(_text(o) for o in cell.outputs)
        assert "not yet" in shown and "correct" not in shown, cell.source


def test_the_pmrr_exercise_checks_answer_6_with_the_kits_check():
    nb = nbformat.read(NOTEBOOKS / f"{TOUR}.ipynb", as_version=4)
    assert any(c.source.strip() == "answer_6 = None  # a number" for c in nb.cells if c.cell_type == "code")
    assert any(c.source.strip() == "tour.check_pmrr_change(answer_6)" for c in _check_cells(nb))


def test_the_playground_carries_the_example_rankings_as_html(tour, without_widgets):
    for nb, widget in ((tour[1], True), (without_widgets, False)):
        cell = next(c for c in nb.cells if c.cell_type == "code" and "tour.Playground(" in c.source)
        (output,) = cell.outputs
        assert (WIDGET in output.data) is widget
        html = output.data["text/html"]
        assert "instir-present" in html and "wine cabinets definition" in html and "7865137_" in html


def test_the_tour_runs_without_ipywidgets_as_the_first_notebook_of_the_chain(without_widgets, sample_report):
    _assert_clean(without_widgets)
    injected = next(c for c in without_widgets.cells if "injected-parameters" in c.metadata.get("tags", []))
    assert f'out_dir = "{sample_report}"' in injected.source  # instir run hands the tour its one parameter


def test_the_tables_of_the_tour_show_no_raw_missing_values(tour):
    html = "\n".join(str(o.get("data", {}).get("text/html", "")) for _, o in _outputs(tour[1]))
    cells = re.findall(r"<td[^>]*>(.*?)</td>", html, flags=re.S)
    assert cells and not {"None", "nan", "NaN", "<NA>", "&lt;NA&gt;"} & set(cells)
