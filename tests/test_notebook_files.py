"""The committed notebooks as a student opens them: JupyterLab finds the metadata it would
write already there (so opening does not mark a notebook modified), and the shared
parameters cell is the same everywhere and fits the cell."""

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


def test_the_parameters_cell_is_identical_and_its_lines_fit_the_cell():
    sources = {path.name: _parameters(_load(path)) for path in CHAIN}
    assert len(set(sources.values())) == 1, "the five parameters cells differ"
    lines = next(iter(sources.values())).splitlines()
    assert max(len(line) for line in lines) <= 100
    assert all("#" in line for line in lines)  # every parameter says what it is (instir run --help shows it)
