"""Benchmarks by name: the bundled samples (always from the package) and the real
benchmarks, read from ``root`` or from the fetch cache. Never touches the network: a
benchmark that is not on disk raises an error saying which ``instir fetch`` command gets it.

Names: ``instructir-sample``, ``ifir-sample/<subset>`` (bundled, ``is_sample=True``, revision
``bundled-<instir version>``), ``instructir`` and ``ifir/<subset>`` (revision from the fetch
manifest, ``local`` for files without one).
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from instir.benchmarks import catalog
from instir.benchmarks.fetch import data_dir, layouts, read_manifest
from instir.benchmarks.ifir import load_ifir, subset_folder
from instir.benchmarks.instructir import INSTRUCTIR_SETTINGS, load_instructir
from instir.benchmarks.types import Benchmark
from instir.errors import UsageError, unknown

#: Folder of the bundled sample benchmarks (package data).
SAMPLE_ROOT = Path(__file__).resolve().parent / "sample"

#: Layout folders a data root may hold besides the downloadable ones (which come first): the
#: InstructIR GitHub release, which has no download of its own and no corpus (the user puts
#: Hugging Face's ``corpus.jsonl`` beside its files).
LOCAL_LAYOUTS: dict[str, tuple[str, ...]] = {"instructir": ("github",)}


def list_benchmarks() -> list[str]:
    """Every name :func:`load_benchmark` accepts: bundled samples present first, then the real ones."""
    ifir_samples = sorted(p.name for p in (SAMPLE_ROOT / "ifir-sample").iterdir() if p.name in catalog.ifir_subsets())
    samples = ["instructir-sample"] if (SAMPLE_ROOT / "instructir-sample").is_dir() else []
    samples += [f"ifir-sample/{s}" for s in ifir_samples]
    return samples + ["instructir"] + [f"ifir/{s}" for s in catalog.ifir_subsets()]


def sample_benchmarks() -> list[str]:
    """The bundled sample names (offline demos and tests)."""
    return [name for name in list_benchmarks() if catalog.is_sample(name)]


def benchmark_settings(name: str) -> tuple[str, ...]:
    """The settings :func:`load_benchmark` accepts for ``name``, the default (``instructed``)
    first: InstructIR's five (:data:`~instir.benchmarks.instructir.INSTRUCTIR_SETTINGS`) for it and
    its sample, ``instructed`` alone for IFIR (its query-only run is a template, not a setting)."""
    if name not in list_benchmarks():
        raise unknown("benchmark", name, list_benchmarks())
    return INSTRUCTIR_SETTINGS if catalog.family_of(name) == "instructir" else ("instructed",)


def load_benchmark(name: str, setting: str = "instructed", root: str | Path | None = None) -> Benchmark:
    """Load a benchmark by name in a setting.

    Bundled samples always come from the package; ``root`` is ignored for them, so one
    ``root`` can be passed for every name. A real benchmark comes from ``root`` when given,
    else from the fetch cache. ``root`` is either

    - a data root serving both benchmarks, laid out like the fetch cache
      (:func:`instir.benchmarks.fetch.data_dir`): ``<root>/instructir/<layout>/`` with layout
      ``hf``, ``mteb`` or ``github`` (the GitHub release with Hugging Face's ``corpus.jsonl``
      beside it), and ``<root>/ifir/<layout>/<subset>/`` with layout ``songtingyu`` or ``mteb``
      (the first layout present is used, in that order; a copy of ``INSTIR_HOME`` is one). It is
      recognised by an ``instructir/`` or ``ifir/`` folder in it;
    - or the benchmark's own folder in any supported layout: an InstructIR download, IFIR's
      data root holding ``<subset>/``, or one IFIR subset's folder.

    IFIR has only the ``instructed`` setting (its query-only run reuses the instances with a
    query-only template); InstructIR's settings are those of ``load_instructir``.
    """
    if name not in list_benchmarks():
        raise unknown("benchmark", name, list_benchmarks())
    head, _, subset = name.partition("/")
    is_sample = catalog.is_sample(name)
    if is_sample:
        data_root, revision = SAMPLE_ROOT / head, _bundled_revision()
    else:
        data_root = _located(head, subset or None, Path(root) if root else None)
        revision = _manifest_revision(subset_folder(data_root, subset) if subset else data_root)
    if not subset:
        return load_instructir(data_root, setting, name=name, revision=revision, is_sample=is_sample)
    if setting != "instructed":
        raise UsageError(f"IFIR has only the 'instructed' setting, not {setting!r}: its no-instruction run "
                         "uses the same instances and qrels with a query-only template")
    return load_ifir(data_root, subset, name_prefix=head, revision=revision, is_sample=is_sample)


def _bundled_revision() -> str:
    return f"bundled-{importlib.metadata.version('instir')}"


def _manifest_revision(folder: Path) -> str:
    manifest = read_manifest(folder)
    return manifest["resolved_revision"] if manifest else "local"


def _is_data_root(root: Path) -> bool:
    """Whether ``root`` is laid out like the fetch cache (holds an ``instructir/`` or ``ifir/``
    folder) rather than being one benchmark's own folder."""
    return any((root / benchmark).is_dir() for benchmark in catalog.families())


def _located(benchmark: str, subset: str | None, root: Path | None) -> Path:
    """The folder to load ``benchmark`` from: ``root`` itself when it is the benchmark's own
    folder, else its first layout folder in the data root ``root`` (one that exists, of the
    downloadable layouts and then :data:`LOCAL_LAYOUTS`) or in the cache (one that a fetch
    completed, i.e. has a manifest); IFIR's data root for ``subset``."""
    if root is not None and not _is_data_root(root):
        return root
    searched = layouts(benchmark) + list(LOCAL_LAYOUTS.get(benchmark, ()) if root is not None else ())
    for layout in searched:
        folder = data_dir(benchmark, layout, subset, cache_dir=root)
        if (folder.is_dir() if root is not None else read_manifest(folder) is not None):
            return data_dir(benchmark, layout, cache_dir=root)
    name = f"{benchmark}/{subset}" if subset else benchmark
    if root is not None:
        expected = " or ".join(str(data_dir(benchmark, layout, subset, cache_dir=root)) for layout in searched)
        raise FileNotFoundError(f"{name} is not in the data root {root}: expected {expected} "
                                "(the fetch cache's layout)")
    command = f"instir fetch {benchmark}" + (f" --subset {subset}" if subset else "")
    raise FileNotFoundError(
        f"{name} is not in the instir cache ({data_dir(benchmark, layouts(benchmark)[0]).parent}). "
        f"Run `{command}` once with internet access (or set INSTIR_HOME to a folder holding a fetched copy), "
        "or pass root= / --root pointing at a local copy of the files."
    )
