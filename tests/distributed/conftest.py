"""Ray for the distributed tests: one small session per module (see each module's fixture),
with the suite's isolated instir home passed to the workers."""

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def ray_env(isolated_env) -> dict:
    """Runtime env the Ray workers need: the test's instir home, offline HF, no bars."""
    keys = ("INSTIR_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HOME", "MPLCONFIGDIR", "MPLBACKEND")
    # the workers import this folder's modules (functions the tests send them) and the checkout
    path = os.pathsep.join([str(Path(__file__).parent), str(Path(__file__).parents[2]),
                            *filter(None, [os.environ.get("PYTHONPATH")])])
    return {"env_vars": {**{k: os.environ[k] for k in keys if k in os.environ}, "INSTIR_PROGRESS": "0",
                         "PYTHONPATH": path}}


@pytest.fixture(scope="module")
def isolated_env(tmp_path_factory):
    """The suite's isolation settings at module scope (the autouse fixture is per test)."""
    home = tmp_path_factory.getbasetemp() / "home"
    home.mkdir(exist_ok=True)
    saved = {k: os.environ.get(k) for k in ("INSTIR_HOME", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HOME",
                                              "MPLCONFIGDIR", "MPLBACKEND", "INSTIR_PROGRESS")}
    os.environ.update(INSTIR_HOME=str(home / "instir"), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
                      HF_HOME=str(home / "hf"), MPLCONFIGDIR=str(home / "mpl"), MPLBACKEND="Agg", INSTIR_PROGRESS="0")
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v

