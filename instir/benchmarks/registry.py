"""Benchmarks by name: the bundled samples (always from the package) and the real
benchmarks, read from ``root`` or from the fetch cache. Never touches the network: a
benchmark that is not on disk raises an error saying which ``instir fetch`` command gets it.

Names come from the catalog (:func:`instir.benchmarks.catalog.entries`): a family's real
benchmarks and its bundled sample (``is_sample=True``, revision ``bundled-<instir version>``);
a real benchmark's revision comes from its fetch manifest (``local`` for files without one).
The family's loader module reads the files.
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from instir.benchmarks import catalog
from instir.benchmarks.fetch import data_dir, fetched_revision, layouts, read_manifest
from instir.benchmarks.readers import check_id_column, check_unique, data_folder
from instir.benchmarks.types import Benchmark, FormatError
from instir.errors import UsageError, quoted, unknown


def list_benchmarks() -> list[str]:
    """Every name :func:`load_benchmark` accepts: bundled samples present first, then the real ones."""
    return list(catalog.entries())


def benchmark_settings(name: str) -> tuple[str, ...]:
    """The settings :func:`load_benchmark` accepts for ``name``, the default (``instructed``)
    first: its family's (the spec's ``settings``)."""
    return catalog.entry(name).family.settings


def load_benchmark(name: str, setting: str = "instructed", root: str | Path | None = None) -> Benchmark:
    """Load a benchmark by name in a setting.

    Bundled samples always come from the package; ``root`` is ignored for them, so one
    ``root`` can be passed for every name. A real benchmark comes from ``root`` when given,
    else from the fetch cache. ``root`` is either a data root laid out like the fetch cache
    (``<root>/<family>/<layout>/[<subset>/]``, recognised by a family's folder in it; the
    downloadable layouts first, then the local ones, the first present being used) or the
    benchmark's own folder in any layout its loader reads (for IFIR, also the folder holding
    ``<subset>/``). ``setting`` must be one of :func:`benchmark_settings`. ``name`` is one benchmark's, as text:
    a collection's (``ifir-sample``) or a Path is refused in one line.
    """
    found = catalog.entry(name)
    fam = found.family
    if setting not in fam.settings and len(fam.settings) == 1:
        raise UsageError(f"{fam.printed} has only the {fam.settings[0]!r} setting, not {setting!r}: a run without "
                         "the instruction is the query-only variant of the same instances (template query-only)")
    if setting not in fam.settings:
        raise unknown(f"{fam.printed} setting", setting, fam.settings)
    subset = found.subset.id if found.subset else None
    if found.sample:
        data_root, revision = fam.sample_root, f"bundled-{importlib.metadata.version('instir')}"
    else:
        # resolved: the report's record names the folder read, not the spelling of the folder it was run from
        data_root = _located(fam, subset, Path(root).resolve() if root else None)
        folder = data_folder(data_root, subset)
        manifest = read_manifest(folder)  # none: a folder of the user's, checked by its record counts only
        revision = fetched_revision(folder, manifest) if manifest else "local"
    loader = fam.loader_module()
    return _checked(loader.load(data_root, subset=subset, setting=setting, name=name, revision=revision,
                                is_sample=found.sample), name, Path(loader.__file__))


def _checked(bench: object, name: str, loader: Path) -> Benchmark:
    """``bench`` once it holds what every later stage takes for granted, else one line naming the family's
    ``loader`` and the wrong field: a Benchmark named ``name``, text ids the readers accept (:func:`check_id_column`:
    a NUL would cut an id in the scorer), each query under its own id, no document id twice, judgments of its own
    queries and documents. A loader that builds the Benchmark by hand skips the readers' checks."""
    if not isinstance(bench, Benchmark):
        raise UsageError(f"{loader}: load() returned a {type(bench).__name__}, not a Benchmark")
    if bench.name != name:
        raise FormatError(loader, None, "name", f"the benchmark {quoted(name)} was asked for, got {quoted(bench.name)}")
    docs = bench.corpus.ids()
    for field, ids in (("queries", list(bench.queries)), ("corpus", docs)):
        odd = next((i for i in ids if type(i) is not str), None)
        if odd is not None:
            raise FormatError(loader, None, field, f"id {quoted(odd)} is not a str but {type(odd).__name__}")
        check_id_column(ids, loader, field)
    odd = next((qid for qid, query in bench.queries.items() if query.id != qid), None)
    if odd is not None:
        raise FormatError(loader, None, "queries", f"key {quoted(odd)} holds the query {quoted(bench.queries[odd].id)}")
    if len(bench.corpus.id_set()) != len(docs):
        seen: dict[str, tuple[Path, int | str]] = {}
        for row, doc_id in enumerate(docs, 1):
            check_unique(seen, doc_id, loader, f"row {row}", "corpus", "document id")
    for qid, judged in bench.qrels.items():
        if qid not in bench.queries:
            raise FormatError(loader, None, "qrels", f"judges the query {quoted(qid)}, not in its queries")
        odd = next((d for d in judged if d not in bench.corpus.id_set()), None)
        if odd is not None:
            raise FormatError(loader, None, "qrels", f"judges the document {quoted(odd)} for the query {quoted(qid)}, "
                                                     "not in its corpus")
    return bench


def check_located(name: str, root: str | Path | None = None, *, knob: str = "root= / --root") -> None:
    """Refuse in one line (:class:`UsageError`), before anything loads, a real benchmark that is neither in the data
    root ``root`` nor fetched into the cache; the message names the fetch command and ``knob``, the way the caller
    takes a data root (``instir run``: ``-p data_root=FOLDER``). Samples are always there."""
    found = catalog.entry(name)
    if found.sample:
        return
    try:
        _located(found.family, found.subset.id if found.subset else None, Path(root) if root else None, knob=knob)
    except FileNotFoundError as err:
        raise UsageError(str(err)) from None


def _located(fam: catalog.Family, subset: str | None, root: Path | None, *, knob: str = "root= / --root") -> Path:
    """The folder to load from: ``root`` itself when it is the benchmark's own folder, else the
    family's first layout folder in the data root ``root`` (one that exists, of the downloadable
    layouts and then the local ones) or in the cache (one that a fetch completed, i.e. has a
    manifest); the family's data root for ``subset``."""
    if root is not None and not any((root / name).is_dir() for name in catalog.families()):
        return root  # no family's folder in it: not a data root
    searched = layouts(fam.name) + (list(fam.local_layouts) if root is not None else [])
    for layout in searched:
        folder = data_dir(fam.name, layout, subset, cache_dir=root)
        if (folder.is_dir() if root is not None else read_manifest(folder) is not None):
            return data_dir(fam.name, layout, cache_dir=root)
    name = f"{fam.name}/{subset}" if subset else fam.name
    if root is not None:
        expected = " or ".join(str(data_dir(fam.name, layout, subset, cache_dir=root)) for layout in searched)
        raise FileNotFoundError(f"{name} is not in the data root {root}: expected {expected} "
                                "(the fetch cache's layout)")
    if not fam.sources:
        raise FileNotFoundError(f"{name} has nothing to fetch (its spec names no [[sources]]): pass {knob} pointing "
                                "at its files")
    command = f"instir fetch {fam.name}" + (f" --subset {subset}" if subset else "")
    raise FileNotFoundError(
        f"{name} is not in the instir cache ({data_dir(fam.name, layouts(fam.name)[0]).parent}). "
        f"Run `{command}` once with internet access (or set INSTIR_HOME to a folder holding a fetched copy), "
        f"or pass {knob} pointing at a local copy of the files."
    )
