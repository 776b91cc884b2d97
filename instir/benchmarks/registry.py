"""Benchmarks by name: the bundled samples and the real benchmarks, read from ``root`` or
from the fetch cache. Never touches the network: a benchmark that is not on disk raises an
error saying which ``instir fetch`` command gets it.

Names: ``instructir-sample``, ``ifir-sample/<subset>`` (bundled, ``is_sample=True``, revision
``bundled-<instir version>``), ``instructir`` and ``ifir/<subset>`` (revision from the fetch
manifest, ``local`` for files without one).
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from instir.benchmarks.fetch import data_dir, layouts, read_manifest
from instir.benchmarks.ifir import IFIR_SUBSETS, load_ifir, subset_folder
from instir.benchmarks.instructir import load_instructir
from instir.benchmarks.types import Benchmark

#: Folder of the bundled sample benchmarks (package data).
SAMPLE_ROOT = Path(__file__).resolve().parent / "sample"


def list_benchmarks() -> list[str]:
    """Every name :func:`load_benchmark` accepts: bundled samples present first, then the real ones."""
    ifir_samples = sorted(p.name for p in (SAMPLE_ROOT / "ifir-sample").iterdir() if p.name in IFIR_SUBSETS)
    samples = ["instructir-sample"] if (SAMPLE_ROOT / "instructir-sample").is_dir() else []
    samples += [f"ifir-sample/{s}" for s in ifir_samples]
    return samples + ["instructir"] + [f"ifir/{s}" for s in IFIR_SUBSETS]


def sample_benchmarks() -> list[str]:
    """The bundled sample names (offline demos and tests)."""
    return [name for name in list_benchmarks() if name.partition("/")[0].endswith("-sample")]


def load_benchmark(name: str, setting: str = "instructed", root: str | Path | None = None) -> Benchmark:
    """Load a benchmark by name in a setting. ``root`` points at local files (any supported
    layout); without it samples come from the package and real benchmarks from the fetch cache.

    IFIR has only the ``instructed`` setting (its query-only run reuses the instances with a
    query-only template); InstructIR's settings are those of ``load_instructir``.
    """
    if name not in list_benchmarks():
        raise ValueError(f"unknown benchmark {name!r}; known: {', '.join(list_benchmarks())}")
    family, _, subset = name.partition("/")
    is_sample = family.endswith("-sample")
    if is_sample:
        data_root, revision = Path(root) if root else SAMPLE_ROOT / family, _bundled_revision()
    elif root:
        data_root = Path(root)
        revision = _manifest_revision(subset_folder(data_root, subset) if subset else data_root)
    else:
        data_root = _cached(family, subset or None)
        revision = _manifest_revision(data_root / subset if subset else data_root)
    if not subset:
        return load_instructir(data_root, setting, name=name, revision=revision, is_sample=is_sample)
    if setting != "instructed":
        raise ValueError(f"IFIR has only the 'instructed' setting, not {setting!r}: its no-instruction run "
                         "uses the same instances and qrels with a query-only template")
    return load_ifir(data_root, subset, name_prefix=family, revision=revision, is_sample=is_sample)


def _bundled_revision() -> str:
    return f"bundled-{importlib.metadata.version('instir')}"


def _manifest_revision(folder: Path) -> str:
    manifest = read_manifest(folder)
    return manifest["resolved_revision"] if manifest else "local"


def _cached(benchmark: str, subset: str | None) -> Path:
    """The fetched copy in the cache (first layout that has a manifest): InstructIR's data
    folder, or IFIR's data root for ``subset``."""
    for layout in layouts(benchmark):
        if read_manifest(data_dir(benchmark, layout, subset)) is not None:
            return data_dir(benchmark, layout)
    command = f"instir fetch {benchmark}" + (f" --subset {subset}" if subset else "")
    name = f"{benchmark}/{subset}" if subset else benchmark
    raise FileNotFoundError(
        f"{name} is not in the instir cache ({data_dir(benchmark, layouts(benchmark)[0]).parent}). "
        f"Run `{command}` once with internet access (or set INSTIR_HOME to a folder holding a fetched copy), "
        "or pass root= / --root pointing at a local copy of the files."
    )
