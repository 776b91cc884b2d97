"""The two install routes (pip via pyproject.toml, conda via environment.yml) stay in step,
and notebooks are committed without outputs."""

import json
import re
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
# conda-forge spells a few packages differently from PyPI.
CONDA_TO_PYPI = {"pytorch": "torch"}


def _split(spec: str) -> tuple[str, str]:
    m = re.match(r"^\s*([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?\s*(.*)$", spec)
    assert m, spec
    return re.sub(r"[-_.]+", "-", m.group(1)).lower(), m.group(2).replace(" ", "")


def _pyproject_specs() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    specs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        specs += extra
    return dict(_split(s) for s in specs)


def _environment_specs() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    out: dict[str, str] = {}
    for dep in env["dependencies"]:
        items = dep["pip"] if isinstance(dep, dict) else [dep]
        for spec in items:
            if spec.startswith("-e") or spec.split("=")[0] in ("python", "pip"):
                continue
            name, version = _split(spec)
            out[CONDA_TO_PYPI.get(name, name)] = version
    return out


def test_environment_yml_lists_the_same_dependencies_as_pyproject():
    assert _environment_specs() == _pyproject_specs()


def test_environment_yml_installs_the_package_itself_with_pip():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    assert "-e ." in pip_section
    assert "conda-forge" in env["channels"]


def test_notebooks_are_committed_without_outputs_and_with_one_parameters_cell():
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    assert [p.stem for p in notebooks] == ["00_tour", "01_data_exploration", "02_retrieval", "03_metrics",
                                           "04_judge_validation", "05_paper_tables"]
    for path in notebooks:
        nb = json.loads(path.read_text())
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        assert all(not c.get("outputs") and c.get("execution_count") is None for c in code), path.name
        tagged = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
        assert len(tagged) == 1, path.name


@pytest.mark.processes
def test_a_kit_installed_from_its_wheel_finds_its_notebooks_and_package_data(tmp_path):
    """``pip install .`` (no checkout beside the installed kit): ``instir run``'s default notebooks folder holds the six
    report notebooks (it named site-packages/notebooks, which no install has) and the bundled samples load."""
    import shutil
    import subprocess
    import sys
    import sysconfig

    source = tmp_path / "source"  # a copy: setuptools builds in the source tree (build/, *.egg-info)
    for name in ("instir", "notebooks"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp_path / "dist"), str(source)], check=True, capture_output=True)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    (site / "deps.pth").write_text(sysconfig.get_path("purelib") + "\n")  # this environment's libraries, after the kit
    wheel = str(next((tmp_path / "dist").glob("instir-*.whl")))
    target = tmp_path / "target"  # pip install --target: the package and share/ in one folder
    for where in (["--prefix", str(venv)], ["--target", str(target)]):
        # --ignore-installed: else pip uninstalls this environment's own instir (the checkout's editable install) first
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--ignore-installed",
                        *where, wheel], check=True, capture_output=True)
    script = ("from instir.cli.run import NOTEBOOKS_DIR; from instir.pipeline import find_notebooks; "
              "from instir.benchmarks import load_benchmark; import instir; "
              "print(instir.__file__); print(NOTEBOOKS_DIR); print(*[p.name for p in find_notebooks(NOTEBOOKS_DIR)]); "
              "print(len(load_benchmark('instructir-sample').queries))")
    env = {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "INSTIR_HOME": str(tmp_path / "home")}
    for kit, shared, extra in ((site, venv, {}), (target, target, {"PYTHONPATH": str(target)})):
        done = subprocess.run([str(venv / "bin" / "python"), "-c", script], cwd=tmp_path, capture_output=True,
                              text=True, env={**env, **extra})
        assert done.returncode == 0, done.stderr[-2000:]
        module, notebooks, names, queries = done.stdout.splitlines()
        # the install's own notebooks: the --target kit took the venv's before (another install's, maybe older)
        assert Path(module).is_relative_to(kit) and Path(notebooks) == shared / "share" / "instir" / "notebooks"
        assert names.split() == sorted(p.name for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
        assert int(queries) > 0
