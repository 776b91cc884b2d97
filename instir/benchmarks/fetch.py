"""Download benchmark files from the Hugging Face Hub at pinned revisions into the instir
cache, verify them, and write a manifest that names the exact data a report used.

The only module that downloads benchmark data, and only when :func:`fetch` is called. Each data
folder (:func:`data_dir`: ``<family>/<layout>/[<subset>/]`` under ``instir_home()``) gets
``instir-manifest.json``: repository, requested and resolved revision, files with sizes and
SHA-256, and record counts checked against the published ones. Every requested revision (the
spec's pin, a branch, MTEB's short hashes) is resolved to the full commit the Hub reports, and
the download is made at that commit.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from instir import atomic
from instir.benchmarks import catalog
from instir.benchmarks.readers import read_records
from instir.benchmarks.types import Benchmark
from instir.errors import UsageError, UserError, unknown
from instir.home import instir_home
from instir.inputs import read_head
from instir.stamps import utc_now

MANIFEST_NAME = "instir-manifest.json"


class FetchError(UserError, RuntimeError):
    """A download failed; the message says what to do without network access."""


def layouts(benchmark: str) -> list[str]:
    """The downloadable layouts of a family, default first (none for a family whose spec names no source)."""
    if benchmark not in catalog.families():
        raise unknown("benchmark to fetch", benchmark, catalog.families())
    return list(catalog.family(benchmark).sources)


def data_dir(benchmark: str, layout: str, subset: str | None = None, cache_dir: str | Path | None = None) -> Path:
    """The folder a fetched benchmark (or subset) lives in; the family's data root without ``subset``."""
    base = (Path(cache_dir) if cache_dir else instir_home()) / benchmark / layout
    return base / subset if subset else base


#: Set to 1 to check every fetched file's SHA-256 against its manifest when a benchmark loads (about a
#: second per 500 MB); sizes, the Hub's download records and the SHA-256 of each file written since the fetch
#: (its modification time changed) or reached through a symbolic link are always checked.
VERIFY_DIGESTS_VAR = "INSTIR_VERIFY_DIGESTS"


def read_manifest(folder: str | Path) -> dict | None:
    """The manifest in ``folder``, or None when the folder was not filled by :func:`fetch`; a manifest that
    cannot be read (not JSON, no resolved revision) is a :class:`~instir.errors.UserError` naming it."""
    path = Path(folder) / MANIFEST_NAME
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as err:
        raise UserError(f"{path}: unreadable fetch manifest ({err}); fetch again (instir fetch) to remake it") from None
    if not (isinstance(manifest, dict) and isinstance(manifest.get("resolved_revision"), str)
            and isinstance(manifest.get("files"), list)):
        raise UserError(f"{path}: not a fetch manifest (no resolved_revision or files); fetch again (instir fetch)")
    return manifest


def fetched_revision(folder: str | Path, manifest: dict, *, digests: bool | None = None) -> str:
    """The revision to report for a fetched ``folder``: its manifest's resolved commit when the files are
    those the manifest lists (:func:`changes_since_fetch`), else a revision that says they were changed
    (``<commit>+changed``), with a warning naming the first changes; never the pinned commit over other data."""
    changes = changes_since_fetch(folder, manifest, digests=digests)
    revision = manifest["resolved_revision"]
    if not changes:
        return revision
    warnings.warn(f"{folder} was changed after instir fetch (at {revision[:12]}): {'; '.join(changes[:3])}"
                  + (f"; {len(changes) - 3} more" if len(changes) > 3 else "") + "; reported as "
                  f"{revision[:12]}+changed, not the fetched revision", stacklevel=3)
    return f"{revision}+changed"


def changes_since_fetch(folder: str | Path, manifest: dict, *, digests: bool | None = None) -> list[str]:
    """What in ``folder`` differs from its manifest: a listed file missing, of another size or (``digests``;
    default: :data:`VERIFY_DIGESTS_VAR`) other bytes, a file the manifest does not list, and a Hugging Face
    download record (``.cache/huggingface/download/*.metadata``) naming another commit."""
    folder = Path(folder)
    if digests is None:
        digests = os.environ.get(VERIFY_DIGESTS_VAR, "0") not in ("", "0")
    listed = {str(entry.get("path")): entry for entry in manifest["files"] if isinstance(entry, dict)}
    changes = []
    for name, entry in listed.items():
        path = folder / name
        if not path.is_file():
            changes.append(f"{name} is missing")
        elif path.stat().st_size != entry.get("bytes"):
            changes.append(f"{name} has {path.stat().st_size:,} bytes, not {entry.get('bytes')}")
        elif (digests or _touched(path, entry, folder)) and atomic.file_sha256(path) != entry.get("sha256"):
            changes.append(f"{name} has other bytes (SHA-256)")
    changes += [f"{p.relative_to(folder)} is not in the manifest" for p in sorted(_data_files(folder))
                if str(p.relative_to(folder)) not in listed]
    for record in _download_records(folder):
        head = read_head(record, 4096)  # its first line, the commit: a record of 200 MB was read whole (585 MB)
        if head is None:  # a FIFO would block the read for ever
            changes.append(f"{record} is not a file")
            continue
        commit = head.decode("utf-8", errors="replace").split("\n", 1)[0].strip()
        if commit != manifest["resolved_revision"]:
            changes.append(f"{record} names commit {commit[:12]!r}")
    return changes


def _download_records(folder: Path) -> list[Path]:
    """The Hub's download records of ``folder``'s files: in its own ``.cache`` (a repository per folder), and in
    its parent's under the folder's name (a subset of a repository downloaded into the family root, as IFIR's)."""
    own = (folder / ".cache" / "huggingface" / "download").rglob("*.metadata")
    parents = (folder.parent / ".cache" / "huggingface" / "download" / folder.name).rglob("*.metadata")
    return sorted(own) + sorted(parents)


def _touched(path: Path, entry: dict, folder: Path) -> bool:
    """Whether ``path`` was written since the manifest listed it (its modification time differs from the one
    recorded): only such a file's digest is computed on every load, so an edit that keeps the size is found
    at the cost of reading the files touched. A manifest of an earlier version records no time: sizes only. A file
    reached through a symbolic link inside ``folder`` (the file's own, or a folder's on its way: ``qrels/``) is always
    read (its target's time and size say nothing of which file it was swapped in for: a link to an edited copy made
    with ``cp -p`` passed as the fetched file)."""
    recorded = entry.get("mtime_ns")
    linked = path.resolve() != folder.resolve() / str(entry.get("path"))
    return linked or (isinstance(recorded, int) and path.stat().st_mtime_ns != recorded)


def _data_files(folder: Path) -> list[Path]:
    """The files of a fetched folder that its manifest lists (not the manifest, not the Hub's ``.cache``)."""
    return [p for p in folder.rglob("*")
            if p.is_file() and p.name != MANIFEST_NAME and ".cache" not in p.relative_to(folder).parts]


def fetch(benchmark: str, subset: str | None = None, *, layout: str | None = None,
          cache_dir: str | Path | None = None, revision: str | None = None) -> Path:
    """Download a family (one subset, or all of them without ``subset``) at the pinned revision
    (``revision`` overrides it), verify presence and record counts, and write the manifest.
    Returns the folder to load from: the family's data folder, or for a family with subsets its
    data root (the folder holding ``<subset>/``). A count that differs from the published one is
    a warning and ``"verified": false`` in the manifest, not an error.
    """
    offered = layouts(benchmark)
    if not offered:
        raise UsageError(f"{benchmark} has nothing to download: its spec ({catalog.family(benchmark).spec_file}) names "
                         "no [[sources]]; load it from a folder instead (root= / --root / -p data_root=)")
    layout = layout or offered[0]
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
    resolved_of: dict[tuple[str, str], tuple[str, set[str]]] = {}
    options = (f" --layout {layout}" if layout != offered[0] else "") + (f" --revision {revision}" if revision else "")
    for name in names:
        repo, requested = source.pinned(name)
        requested = revision or requested
        dest = root / name if repo_per_subset else root
        with _hub_errors(repo, requested, dest, benchmark, name, options):
            if (repo, requested) not in resolved_of:  # resolved once: every subset of one repo at one commit
                resolved_of[(repo, requested)] = _resolve(huggingface_hub.HfApi(), repo, requested)
            resolved, repo_files = resolved_of[(repo, requested)]
            huggingface_hub.snapshot_download(repo, repo_type="dataset", revision=resolved, local_dir=dest,
                                              allow_patterns=[f"{name}/*"] if name and not repo_per_subset else None)
        folder, bench, expected = _load_fetched(fam, root, name, layout, resolved)
        prefix = f"{name}/" if name and not repo_per_subset else ""
        in_repo = {path.removeprefix(prefix) for path in repo_files if path.startswith(prefix)}
        _write_manifest(folder, bench, repo, requested, resolved, layout, expected, in_repo)
    return root


def _resolve(api, repo: str, requested: str) -> tuple[str, set[str]]:
    """The full commit the Hub names for ``requested`` and the paths of the files the repository holds there."""
    info = api.dataset_info(repo, revision=requested)
    siblings = info.siblings
    if siblings is None:  # the Hub left the file list out: ask for it at the commit
        return info.sha, set(api.list_repo_files(repo, repo_type="dataset", revision=info.sha))
    return info.sha, {sibling.rfilename for sibling in siblings}


def _load_fetched(fam: catalog.Family, root: Path, subset: str | None, layout: str,
                  resolved: str) -> tuple[Path, Benchmark, dict[str, int]]:
    """Load what was just downloaded with the family's loader (which checks every file and
    record), with the counts it should have."""
    name = f"{fam.name}/{subset}" if subset else fam.name
    bench = fam.loader_module().load(root, subset=subset, setting=fam.settings[0], name=name, revision=resolved,
                                     is_sample=False)
    return (root / subset if subset else root), bench, catalog.entry(name).expected_counts(layout)


@contextmanager
def _hub_errors(repo: str, revision: str, dest: Path, benchmark: str, subset: str | None,
                options: str = "") -> Iterator[None]:
    """Turn Hub failures into a :class:`FetchError` that says what to do (offline included); ``options``: the
    ``--layout`` / ``--revision`` of the fetch, which its rerun elsewhere needs to fill ``dest``."""
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
        raise FetchError(_offline_message(repo, revision, dest, benchmark, subset, err, options)) from err


def _offline_message(repo: str, revision: str, dest: Path, benchmark: str, subset: str | None,
                     err: Exception, options: str = "") -> str:
    from instir.retrieval.model_files import hub_command

    again = f"instir fetch {benchmark}" + (f" --subset {subset}" if subset else "") + options
    return (
        f"could not download {repo} @ {revision} from the Hugging Face Hub ({type(err).__name__}: {err}).\n"
        "Loading local files never needs the network; to go on without it:\n"
        f"  1. on a machine with internet run `{again}`, copy its instir cache (INSTIR_HOME, default "
        f"~/.cache/instir) here and set INSTIR_HOME to the copy (this machine looks for {dest});\n"
        f"  2. or download the files elsewhere (`{hub_command('download', repo, '--repo-type', 'dataset')} --revision "
        f"{revision} --local-dir DIR`), copy DIR here and point the kit at it: --root DIR (instir retrieve, "
        "evaluate, judge, …), -p data_root=DIR (instir run), load_benchmark(name, root=DIR) (Python);\n"
        "  3. or set INSTIR_HOME to a folder that already holds a fetched copy.\n"
        f"The bundled samples ({', '.join(catalog.sample_benchmarks())}) work offline as they are."
    )


def _count_documents(bench: Benchmark, published: int | None = None) -> int:
    """Records in the corpus files (empty documents included), as the published counts are; the files are read
    again only when the loaded corpus does not hold the ``published`` count."""
    if not bench.corpus.paths or len(bench.corpus) == published:
        return len(bench.corpus)
    return sum(1 for path in bench.corpus.paths for _ in read_records(path))


def _found_counts(bench: Benchmark, expected: Mapping[str, int]) -> dict[str, int]:
    """``bench``'s record counts under the keys of the published ones (``queries``, ``groups``, ``documents``)."""
    count = {"queries": lambda: len(bench.queries), "groups": lambda: len(bench.groups()),
             "documents": lambda: _count_documents(bench, expected.get("documents"))}
    return {key: count[key]() for key in expected if key in count}


#: What every page says of a benchmark whose report notes no check of its data (a record of an earlier version of
#: the kit, which did not check, or a damaged one): never verified.
NOT_CHECKED = "not checked (no check is noted in the report's record): load it again"


def data_check(bench: Benchmark) -> str | None:
    """Why ``bench`` cannot be taken for the data a paper measured, or None when it can: a real benchmark of the
    catalog whose record counts equal the published ones and whose files, when fetched, are those its manifest
    lists (:func:`fetched_revision`). A comparison with a paper gives a verdict only on such data."""
    if bench.is_sample:
        return "a bundled sample"
    if bench.revision.endswith("+changed"):
        return f"files changed since instir fetch at {bench.revision[:12]}"
    try:
        entry = catalog.entry(bench.name)
    except UserError:
        return f"{bench.name} is not a benchmark of the catalog, so no published counts"
    expected, papers = entry.expected_counts(bench.layout), entry.expected_counts()
    found = _found_counts(bench, expected)
    whose = {key: "the paper" if papers.get(key) == value else "MTEB's copy" for key, value in expected.items()}
    off = [f"{found[key]:,} {key} where {whose[key]} has {value:,}" for key, value in expected.items()
           if key in found and found[key] != value]
    return "; ".join(off) or None


def _write_manifest(folder: Path, bench: Benchmark, repo: str, requested: str, resolved: str,
                    layout: str, expected: dict[str, int], in_repo: set[str]) -> dict:
    """Write ``instir-manifest.json`` into ``folder``, listing the files of ``in_repo`` (the repository's at
    ``resolved``) only; warn about counts that differ from ``expected`` and about files the folder holds that the
    repository does not (an earlier fetch's, or the user's), which loading then reports as a change."""
    found = {"queries": 0, "groups": 0, "documents": 0, **_found_counts(bench, expected)}
    counts = {key: {"expected": value, "found": found[key], "ok": found[key] == value}
              for key, value in expected.items()}
    present = sorted(_data_files(folder))
    stray = [str(p.relative_to(folder)) for p in present if p.relative_to(folder).as_posix() not in in_repo]
    if stray:
        warnings.warn(f"{folder} holds {len(stray)} file(s) that {repo} does not at {resolved[:12]} (left from an "
                      f"earlier fetch, or added): {', '.join(stray[:3])}" + (" …" if len(stray) > 3 else "")
                      + "; they are not in the manifest, and the data is reported as changed until they are removed",
                      stacklevel=3)
    files = [{"path": str(p.relative_to(folder)), "bytes": p.stat().st_size, "mtime_ns": p.stat().st_mtime_ns,
              "sha256": atomic.file_sha256(p)} for p in present if p.relative_to(folder).as_posix() in in_repo]
    manifest = {
        "benchmark": bench.name, "layout": layout, "loader_layout": bench.layout, "repo": repo,
        "requested_revision": requested, "resolved_revision": resolved,
        "fetched_at": utc_now(),
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
