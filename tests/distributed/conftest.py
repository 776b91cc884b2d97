"""Ray for the distributed tests: one local Ray (2 CPUs) shared by every module that needs a
plain local Ray (``local_ray``), and the two-node cluster of ``test_multinode.py``, which
runs last (a driver holds one Ray at a time). Workers get the suite's isolated instir home."""

import contextlib
import os
from pathlib import Path

import pytest

from tests.conftest import isolation


def pytest_collection_modifyitems(items):
    """The multinode module after the other distributed modules, so the shared local Ray
    starts once (the cluster fixture ends it; a later local test would have to start it again)."""
    def last(item) -> bool:
        return item.path.name == "test_multinode.py"

    items[:] = [i for i in items if not last(i)] + [i for i in items if last(i)]


@pytest.fixture(scope="session")
def ray_env(tmp_path_factory) -> dict[str, str]:
    """What the Ray workers' environment adds: the suite's isolation (tests/conftest.py; the
    workers outlive a test), no bars, and this folder and the checkout on the path (the
    workers import the functions the tests send them)."""
    path = os.pathsep.join([str(Path(__file__).parent), str(Path(__file__).parents[2]),
                            *filter(None, [os.environ.get("PYTHONPATH")])])
    return {**isolation(tmp_path_factory), "INSTIR_PROGRESS": "0", "PYTHONPATH": path}


@pytest.fixture(scope="session")
def worker_environment(ray_env):
    """A context in which ``ray_env`` is this process's environment, for starting Ray nodes: a
    node's raylet, and so every worker it starts, inherits it, as the workers of ``instir
    sweep``'s local Ray do (a ``runtime_env`` instead makes each new worker wait seconds for
    Ray's runtime-env agent)."""
    @contextlib.contextmanager
    def environment():
        with pytest.MonkeyPatch.context() as mp:
            for name, value in ray_env.items():
                mp.setenv(name, value)
            yield

    return environment


@pytest.fixture(scope="session")
def local_ray(worker_environment):
    """A local Ray with 2 CPUs for the whole session (each start costs 7–10 s here), shared by
    every module that needs a plain local Ray; the multinode module ends it (it runs last)."""
    import ray

    from instir.distributed.sweep import start_with_retries

    with worker_environment():
        start_with_retries(lambda: ray.init(address="local", num_cpus=2, include_dashboard=False,
                                            log_to_driver=False))
    yield
    ray.shutdown()
