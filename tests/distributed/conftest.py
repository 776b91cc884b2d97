"""Ray for the distributed tests: one local Ray (2 CPUs) shared by every module that needs a
plain local Ray (``local_ray``), and the two-node cluster of ``test_multinode.py``, which
runs last (a driver holds one Ray at a time). Workers get the suite's isolated instir home."""

import os
from pathlib import Path

import pytest


def pytest_collection_modifyitems(items):
    """The multinode module after the other distributed modules, so the shared local Ray
    starts once (the cluster fixture ends it; a later local test would have to start it again)."""
    def last(item) -> bool:
        return item.path.name == "test_multinode.py"

    items[:] = [i for i in items if not last(i)] + [i for i in items if last(i)]


@pytest.fixture(scope="session")
def ray_env(tmp_path_factory) -> dict:
    """Runtime env the Ray workers need: the suite's isolated homes (the values the per-test
    isolation in tests/conftest.py sets; the workers outlive a test), offline HF, no bars."""
    home = tmp_path_factory.getbasetemp() / "home"
    home.mkdir(exist_ok=True)
    # the workers import this folder's modules (functions the tests send them) and the checkout
    path = os.pathsep.join([str(Path(__file__).parent), str(Path(__file__).parents[2]),
                            *filter(None, [os.environ.get("PYTHONPATH")])])
    return {"env_vars": {"INSTIR_HOME": str(home / "instir"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                         "HF_HOME": str(home / "hf"), "MPLCONFIGDIR": str(home / "mpl"), "MPLBACKEND": "Agg",
                         "INSTIR_PROGRESS": "0", "PYTHONPATH": path}}


@pytest.fixture(scope="session")
def local_ray(ray_env):
    """A local Ray with 2 CPUs for the whole session (each start costs 7–10 s here), shared by
    every module that needs a plain local Ray; the multinode module ends it (it runs last)."""
    import ray

    from instir.distributed.sweep import start_with_retries

    start_with_retries(lambda: ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
                                        runtime_env=ray_env))
    yield
    ray.shutdown()
