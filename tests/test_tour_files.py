"""The committed guided tour (``notebooks/00_tour.ipynb``) as a student opens it: no outputs, one
parameters cell holding the chain's ``out_dir`` line, the metadata JupyterLab writes, short cells,
and no LaTeX (the offline HTML reports show it as source). Running it: ``tests/test_tour.py``."""

import json
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
TOUR = NOTEBOOKS / "00_tour.ipynb"

#: the most lines a code cell of the tour may have (teaching: one step per cell)
MAX_LINES = 16


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def test_the_tour_is_committed_without_outputs():
    code = [c for c in _load(TOUR)["cells"] if c["cell_type"] == "code"]
    assert code and all(not c.get("outputs") and c.get("execution_count") is None for c in code)


def test_the_tour_takes_the_chains_out_dir_line_as_its_only_parameter():
    import papermill

    tagged = [c for c in _load(TOUR)["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1
    chain = next(c for c in _load(NOTEBOOKS / "01_data_exploration.ipynb")["cells"]
                 if "parameters" in c.get("metadata", {}).get("tags", []))
    out_dir = next(line for line in _source(chain).splitlines() if line.startswith("out_dir ="))
    assert _source(tagged[0]).strip() == out_dir  # the same default and help as instir run --help shows
    inferred = papermill.inspect_notebook(str(TOUR))
    assert list(inferred) == ["out_dir"] and inferred["out_dir"]["default"] == '"reports/sample"'


def test_the_tour_has_the_metadata_jupyterlab_writes():
    nb, chain = _load(TOUR), _load(NOTEBOOKS / "01_data_exploration.ipynb")
    assert nb["metadata"].pop("instir") == {"show_code": True}  # its HTML page shows the computations it teaches
    assert nb["metadata"] == chain["metadata"]
    assert (nb["nbformat"], nb["nbformat_minor"]) == (4, 5)
    ids = [c.get("id") for c in nb["cells"]]
    assert all(ids) and len(set(ids)) == len(ids)
    assert TOUR.read_text(encoding="utf-8").endswith("}\n")


def test_the_tour_cells_are_short_and_its_prose_has_no_latex():
    cells = _load(TOUR)["cells"]
    assert max(len(_source(c).splitlines()) for c in cells if c["cell_type"] == "code") <= MAX_LINES
    assert max(len(line) for c in cells if c["cell_type"] == "code" for line in _source(c).splitlines()) <= 120
    assert not any("$" in _source(c) for c in cells if c["cell_type"] == "markdown")


def test_the_class_plan_in_teaching_md_walks_the_tours_sections_in_order():
    import re

    headings = {int(m) for c in _load(TOUR)["cells"] if c["cell_type"] == "markdown"
                for m in re.findall(r"^## (\d+) · ", _source(c), flags=re.M)}
    plan = (NOTEBOOKS.parent / "docs" / "teaching.md").read_text(encoding="utf-8")
    rows = [line.split("|")[2] for line in plan.splitlines() if re.match(r"\| \d+–\d+ \|", line)]
    sections = [int(n) for where in rows for n in re.findall(r"§ (\d+)", where)]
    assert sections and set(sections) <= headings
    assert sections == sorted(sections), sections
