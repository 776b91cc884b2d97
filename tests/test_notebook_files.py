"""The committed notebooks as a student opens them: JupyterLab finds the metadata it would
write already there (so opening does not mark a notebook modified), and each parameters cell
declares the parameters its notebook uses, each written the same way wherever it appears."""

import ast
import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
#: the report chain (the tour, 00, has a parameters cell of its own: the chain's out_dir line)
CHAIN = [path for path in NOTEBOOKS if not path.name.startswith("00_")]

#: what JupyterLab writes on opening a notebook with the python3 (ipykernel) kernel: the
#: kernelspec it picked and the kernel_info reply's language_info, all keys
KERNELSPEC_KEYS = {"display_name", "language", "name"}
LANGUAGE_INFO_KEYS = {"codemirror_mode", "file_extension", "mimetype", "name", "nbconvert_exporter",
                      "pygments_lexer", "version"}


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _parameters(nb: dict) -> str:
    cells = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(cells) == 1
    return "".join(cells[0]["source"])


def test_there_are_the_tour_and_five_notebooks():
    assert [p.name[:2] for p in NOTEBOOKS] == ["00", "01", "02", "03", "04", "05"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_metadata_is_what_jupyterlab_writes(path):
    nb = _load(path)
    spec, info = nb["metadata"]["kernelspec"], nb["metadata"]["language_info"]
    assert set(spec) == KERNELSPEC_KEYS and spec["name"] == "python3"
    assert spec["display_name"] == "Python 3 (ipykernel)"  # ipykernel's own kernelspec name
    assert set(info) == LANGUAGE_INFO_KEYS and info["codemirror_mode"] == {"name": "ipython", "version": 3}
    assert (nb["nbformat"], nb["nbformat_minor"]) == (4, 5)  # cell ids present, nothing to upgrade
    assert all(cell.get("id") for cell in nb["cells"])
    assert path.read_text(encoding="utf-8").endswith("}\n")


def test_committed_metadata_matches_the_installed_kernel():
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec("python3")
    for path in NOTEBOOKS:
        kernelspec = _load(path)["metadata"]["kernelspec"]
        assert (kernelspec["display_name"], kernelspec["language"]) == (spec.display_name, spec.language)


def _declared(source: str) -> dict[str, str]:
    """``name -> line`` of a parameters cell (one assignment per line, annotated or not: ``k: int = None``)."""
    return {line.split("=")[0].split(":")[0].strip(): line for line in source.splitlines() if line.strip()}


def _used(nb: dict) -> set[str]:
    """The names the notebook's code cells other than the parameters cell read."""
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"
                     and "parameters" not in c.get("metadata", {}).get("tags", []))
    return {node.id for node in ast.walk(ast.parse(code)) if isinstance(node, ast.Name)}


def test_each_notebook_declares_the_parameters_it_uses_written_alike_and_fitting_the_cell():
    lines: dict[str, str] = {}
    for path in CHAIN:
        nb = _load(path)
        declared = _declared(_parameters(nb))
        assert set(declared) <= _used(nb), f"{path.name} declares parameters it does not use"
        assert "out_dir" in declared, path.name
        for name, line in declared.items():
            assert lines.setdefault(name, line) == line, f"{name} is written differently in {path.name}"
    assert max(len(line) for line in lines.values()) <= 100
    assert all("#" in line for line in lines.values())  # every parameter says what it is (instir run --help)
    assert {"benchmarks", "k", "retrievers", "judge_backend"} <= set(lines)
