"""Download benchmark files from the Hugging Face Hub at pinned revisions into the instir
cache, verify them, and write a manifest that names the exact data a report used.

The only module that touches the network, and only when :func:`fetch` is called. Each data
folder (:func:`data_dir`: ``<family>/<layout>/[<subset>/]`` under ``instir_home()``) gets
``instir-manifest.json``: repository, requested and resolved revision, files with sizes and
SHA-256, and record counts checked against the published ones. Every requested revision (the
spec's pin, a branch, MTEB's short hashes) is resolved to the full commit the Hub reports, and
the download is made at that commit.
"""

from __future__ import annotations

import importlib.metadata
import json
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from instir import atomic
from instir.benchmarks import catalog
from instir.benchmarks.readers import read_records
from instir.benchmarks.types import Benchmark
from instir.errors import UsageError, UserError, unknown
from instir.home import instir_home

MANIFEST_NAME = "instir-manifest.json"


class FetchError(UserError, RuntimeError):
    """A download failed; the message says what to do without network access."""


def layouts(benchmark: str) -> list[str]:
    """The downloadable layouts of a family, default first."""
    if benchmark not in catalog.families():
        raise unknown("benchmark to fetch", benchmark, catalog.families())
    return list(catalog.family(benchmark).sources)


def data_dir(benchmark: str, layout: str, subset: str | None = None, cache_dir: str | Path | None = None) -> Path:
    """The folder a fetched benchmark (or subset) lives in; the family's data root without ``subset``."""
    base = (Path(cache_dir) if cache_dir else instir_home()) / benchmark / layout
    return base / subset if subset else base


def read_manifest(folder: str | Path) -> dict | None:
    """The manifest in ``folder``, or None when the folder was not filled by :func:`fetch`."""
    path = Path(folder) / MANIFEST_NAME
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def fetch(benchmark: str, subset: str | None = None, *, layout: str | None = None,
          cache_dir: str | Path | None = None, revision: str | None = None) -> Path:
    """Download a family (one subset, or all of them without ``subset``) at the pinned revision
    (``revision`` overrides it), verify presence and record counts, and write the manifest.
    Returns the folder to load from: the family's data folder, or for a family with subsets its
    data root (the folder holding ``<subset>/``). A count that differs from the published one is
    a warning and ``"verified": false`` in the manifest, not an error.
    """
    layout = layout or layouts(benchmark)[0]
    if layout not in layouts(benchmark):
        raise unknown("layout", layout, layouts(benchmark), where=f"for {benchmark}")
    fam = catalog.family(benchmark)
    source = fam.sources[layout]
    if not fam.subsets:
        if subset is not None:
            raise UsageError(f"{benchmark} has no subsets")
        names: list[str | None] = [None]
    else:
        names = list(fam.subsets) if subset is None else [fam.subset(subset).id]
    import huggingface_hub  # imported here: loading benchmarks never needs it

    root = data_dir(benchmark, layout, cache_dir=cache_dir)
    repo_per_subset = not isinstance(source.revision, str)
    resolved_of: dict[tuple[str, str], str] = {}
    for name in names:
        repo, requested = source.pinned(name)
        requested = revision or requested
        dest = root / name if repo_per_subset else root
        with _hub_errors(repo, requested, dest, benchmark, name):
            if (repo, requested) not in resolved_of:  # resolved once: every subset of one repo at one commit
                resolved_of[(repo, requested)] = huggingface_hub.HfApi().dataset_info(repo, revision=requested).sha
            resolved = resolved_of[(repo, requested)]
            huggingface_hub.snapshot_download(repo, repo_type="dataset", revision=resolved, local_dir=dest,
                                              allow_patterns=[f"{name}/*"] if name and not repo_per_subset else None)
        folder, bench, expected = _load_fetched(fam, root, name, layout, resolved)
        _write_manifest(folder, bench, repo, requested, resolved, layout, expected)
    return root


def _load_fetched(fam: catalog.Family, root: Path, subset: str | None, layout: str,
                  resolved: str) -> tuple[Path, Benchmark, dict[str, int]]:
    """Load what was just downloaded with the family's loader (which checks every file and
    record), with the counts it should have."""
    name = f"{fam.name}/{subset}" if subset else fam.name
    bench = fam.loader_module().load(root, subset=subset, setting=fam.settings[0], name=name, revision=resolved,
                                     is_sample=False)
    return (root / subset if subset else root), bench, catalog.entry(name).expected_counts(layout)


@contextmanager
def _hub_errors(repo: str, revision: str, dest: Path, benchmark: str, subset: str | None) -> Iterator[None]:
    """Turn Hub failures into a :class:`FetchError` that says what to do (offline included)."""
    from huggingface_hub.errors import (
        HTTPError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        yield
    except (RepositoryNotFoundError, RevisionNotFoundError) as err:
        raise FetchError(f"the Hugging Face Hub has no dataset {repo} at revision {revision!r} ({err}). "
                         "Pass a full commit hash with --revision (fetch(..., revision=...)) if a short one "
                         "is refused.") from err
    except (OSError, HTTPError) as err:
        raise FetchError(_offline_message(repo, revision, dest, benchmark, subset, err)) from err


def _offline_message(repo: str, revision: str, dest: Path, benchmark: str, subset: str | None,
                     err: Exception) -> str:
    again = f"instir fetch {benchmark}" + (f" --subset {subset}" if subset else "")
    return (
        f"could not download {repo} @ {revision} from the Hugging Face Hub ({type(err).__name__}: {err}).\n"
        "Loading local files never needs the network; to go on without it:\n"
        f"  1. on a machine with internet run `{again}`, copy its instir cache (INSTIR_HOME, default "
        f"~/.cache/instir) here and set INSTIR_HOME to the copy (this machine looks for {dest});\n"
        f"  2. or download the files elsewhere (`hf download {repo} --repo-type dataset --revision {revision} "
        "--local-dir DIR`), copy DIR here and pass --root DIR (load_benchmark(name, root=DIR));\n"
        "  3. or set INSTIR_HOME to a folder that already holds a fetched copy.\n"
        f"The bundled samples ({', '.join(catalog.sample_benchmarks())}) work offline as they are."
    )


def _count_documents(bench: Benchmark) -> int:
    """Records in the corpus files (empty documents included), as the published counts are."""
    if not bench.corpus.paths:
        return len(bench.corpus)
    return sum(1 for path in bench.corpus.paths for _ in read_records(path))


def _write_manifest(folder: Path, bench: Benchmark, repo: str, requested: str, resolved: str,
                    layout: str, expected: dict[str, int]) -> dict:
    """Write ``instir-manifest.json`` into ``folder``; warn about counts that differ from ``expected``."""
    found = {"queries": len(bench.queries), "groups": len(bench.groups()), "documents": _count_documents(bench)}
    counts = {key: {"expected": value, "found": found[key], "ok": found[key] == value}
              for key, value in expected.items()}
    files = [{"path": str(p.relative_to(folder)), "bytes": p.stat().st_size, "sha256": atomic.file_sha256(p)}
             for p in sorted(folder.rglob("*"))
             if p.is_file() and p.name != MANIFEST_NAME and ".cache" not in p.relative_to(folder).parts]
    manifest = {
        "benchmark": bench.name, "layout": layout, "loader_layout": bench.layout, "repo": repo,
        "requested_revision": requested, "resolved_revision": resolved,
        "fetched_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "instir_version": importlib.metadata.version("instir"),
        "files": files, "counts": counts, "verified": all(c["ok"] for c in counts.values()),
        "describe": bench.describe(),
    }
    off = [f"{key} {c['found']} (published {c['expected']})" for key, c in counts.items() if not c["ok"]]
    if off:
        warnings.warn(f"{bench.name} from {repo} @ {resolved[:12]}: counts differ from the published ones: "
                      + "; ".join(off), stacklevel=3)
    folder.mkdir(parents=True, exist_ok=True)
    atomic.write_text(folder / MANIFEST_NAME, json.dumps(manifest, indent=2) + "\n")
    return manifest
