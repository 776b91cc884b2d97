"""docs/teaching.md's offline wheelhouse recipe is complete: its ``pip download`` commands, run as the page
writes them, fetch every distribution that the Makefile targets its install line names then install, so a room
without network installs from the wheelhouse alone (the recipe once left out ``nbstripout``, which ``make
reports`` installs, and failed at its first step).

Tests never touch the network, so the index the recipe downloads from is built here, offline, from the running
environment (which ``make test`` installed under the same constraints): for each installed distribution a wheel
holding its own metadata (name, version, the requirements and extras it declares), and for the project's build
backend (setuptools) a real wheel repacked from its installed files, since pip builds the kit's metadata with it.
The download commands run as written with that index (``PIP_NO_INDEX``, ``PIP_FIND_LINKS``; no pip
configuration file); the install line's targets are read from ``make -n`` and each of their ``pip install``
commands resolves against the wheelhouse alone (``--dry-run --ignore-installed``). What pip would need from
outside the wheelhouse fails the test, named by pip."""

import base64
import hashlib
import importlib.metadata
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from readme_commands import REPO, commands

pytestmark = pytest.mark.processes

TEACHING = REPO / "docs" / "teaching.md"
#: distributions repacked whole from their installed files: the project's build backend
REAL = ("setuptools",)


def _recipe() -> tuple[list[str], str]:
    """The page's wheelhouse commands: the downloads and the install line."""
    found = [c.code for c in commands((TEACHING,)) if "wheelhouse" in c.code]
    downloads = [code for code in found if " download " in code]
    installs = [code for code in found if "make " in code]
    assert len(downloads) >= 1 and len(installs) == 1, found
    return downloads, installs[0]


def _wheel_name(dist: importlib.metadata.Distribution) -> str:
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"]).lower()
    return f"{name}-{dist.version}-py3-none-any.whl"


def _dist_info(dist: importlib.metadata.Distribution) -> str:
    return f"{re.sub(r'[-_.]+', '_', dist.metadata['Name'])}-{dist.version}.dist-info"


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _write_wheel(path: Path, files: dict[str, bytes], info: str) -> None:
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: instir-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = [_record_line(name, data) for name, data in files.items()] + [f"{info}/RECORD,,"]
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
        zf.writestr(f"{info}/RECORD", "\n".join(record) + "\n")


def _index(folder: Path) -> Path:
    """A find-links folder of the running environment's distributions (see the module docstring)."""
    folder.mkdir()
    seen = set()
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if not name or name.lower() in seen or name.lower() == "instir":  # the recipe builds the kit itself
            continue
        seen.add(name.lower())
        info = _dist_info(dist)
        if name.lower() in REAL:
            files = {str(f): f.locate().read_bytes() for f in dist.files or ()
                     if f.locate().is_file() and not str(f).startswith(".") and "/__pycache__/" not in f"/{f}"
                     and Path(str(f)).name not in ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json")}
        else:
            files = {}
        files[f"{info}/METADATA"] = (dist.read_text("METADATA") or dist.read_text("PKG-INFO") or "").encode()
        _write_wheel(folder / _wheel_name(dist), files, info)
    return folder


def _project(root: Path) -> Path:
    """What the recipe's commands read from the repository: the project, its constraints and Makefile."""
    copy = root / "repo"
    copy.mkdir()
    for name in ("pyproject.toml", "constraints.txt", "README.md", "Makefile"):
        shutil.copy(REPO / name, copy / name)
    shutil.copytree(REPO / "instir", copy / "instir", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "notebooks", copy / "notebooks")
    shim = copy / ".venv" / "bin" / "pip"
    shim.parent.mkdir(parents=True)
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m pip "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    (copy / ".venv" / "bin" / "python").symlink_to(sys.executable)
    return copy


def _pip_environment(links: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(links),
               PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_CACHE_DIR="1")
    return env


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory):
    """The recipe's downloads, run as written against the offline index: ``(project copy, wheelhouse)``."""
    root = tmp_path_factory.mktemp("wheelhouse")
    links, copy = _index(root / "index"), _project(root)
    downloads, _ = _recipe()
    for code in downloads:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=copy, env=_pip_environment(links),
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{code}\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    return copy, copy / "wheelhouse"


def _install_commands(copy: Path, line: str) -> list[str]:
    """The ``pip install`` commands of the targets the install line names, as ``make -n`` lists them."""
    targets = line.split("make", 1)[1].split("#", 1)[0].split()
    listed = subprocess.run(["make", "-n", *targets], cwd=copy, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PYTHON": sys.executable})
    assert listed.returncode == 0, listed.stderr
    # a stamp's install after its check (``grep … || .venv/bin/pip install …``) is the install alone
    return [cmd[cmd.index(".venv/bin/pip"):].strip() for cmd in listed.stdout.splitlines()
            if re.search(r"\.venv/bin/pip install\b", cmd)]


def test_the_recipes_downloads_hold_every_distribution_its_install_line_installs(wheelhouse):
    copy, house = wheelhouse
    _, line = _recipe()
    installs = _install_commands(copy, line)
    assert any("-e '." in cmd for cmd in installs) and any("lab" in cmd for cmd in installs), installs
    for cmd in installs:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", f"{cmd} --dry-run --ignore-installed"], cwd=copy,
                              env=_pip_environment(house), capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{cmd}: not installable from the wheelhouse alone\n{done.stderr[-3000:]}"


def test_the_check_fails_for_a_recipe_that_leaves_out_a_distribution_make_installs(wheelhouse, tmp_path):
    copy, house = wheelhouse
    partial = tmp_path / "partial"
    shutil.copytree(house, partial)
    for wheel in partial.glob("nbstripout-*"):
        wheel.unlink()
    cmd = next(c for c in _install_commands(copy, _recipe()[1]) if "nbstripout" in c)
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", f"{cmd} --dry-run --ignore-installed"], cwd=copy,
                          env=_pip_environment(partial), capture_output=True, text=True, timeout=600)
    assert done.returncode != 0 and "nbstripout" in done.stderr
