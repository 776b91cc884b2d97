"""A sweep grid: benchmarks × systems × settings × variants (instructed / query-only), read
from YAML; its cells are the stages' plan (:func:`instir.stages.plan.plan_runs`), each system
resolved as the notebooks' systems are.

Grid file (every key but ``benchmarks`` and ``systems`` optional)::

    benchmarks: [instructir-sample, ifir-sample/fiqa]
    systems: [bm25, dense, "dense:sentence-transformers/all-MiniLM-L6-v2", "hybrid:BAAI/bge-base-en-v1.5",
              "BM25 (IFIR)", "Promptriever-7B"]   # ... and any retriever system card name (instir systems)
    variants: [instructed, query-only]     # the instructed template, and the query-only template
    settings: [instructed]                 # InstructIR settings; IFIR has only "instructed"
    k: 100
    data_root: ""                          # real data; empty: the fetch cache
    cache_dir: ""                          # embedding cache; empty: <instir home>/embeddings
    shard_min_docs: 20000                  # corpora this large are encoded by Ray Data first
    judge: {backend: baseline, model: lexical, max_instances: 1}   # optional judge stage (notebook 04's)
    # judge keys: backend (openai, hf, baseline), model, base_url, api_key_env, requests_per_minute,
    # max_instances, repeats (defaults: the judge stage's, instir.stages.judge_runs)

:func:`parse_grid` checks every value before any cell runs (one :class:`GridError` naming the
file, the field and the value); :func:`grid_estimate` says what the grid amounts to. The file is
read by :mod:`instir.inputs` (YAML aliases refused, at most 1 MiB).
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from instir.benchmarks import catalog
from instir.benchmarks.registry import list_benchmarks
from instir.errors import UserError, quoted, shorten
from instir.errors import unknown as unknown_name
from instir.inputs import InputRefused, load_yaml, read_config
from instir.stages.plan import VARIANTS, PlannedRun, file_part, plan_runs
from instir.systems.specs import SystemSpec, resolve_system

#: Keys a grid file may hold.
GRID_KEYS = frozenset({"benchmarks", "systems", "variants", "settings", "k", "data_root", "cache_dir",
                       "shard_min_docs", "judge"})


class GridError(UserError, ValueError):
    """A grid file that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class Grid:
    """A parsed grid (see the module docstring)."""

    benchmarks: tuple[str, ...]
    systems: tuple[SystemSpec, ...]
    variants: tuple[str, ...] = VARIANTS
    settings: tuple[str, ...] = ("instructed",)
    k: int = 100
    data_root: str | None = None
    cache_dir: str | None = None
    shard_min_docs: int = 20000
    judge: dict[str, Any] | None = None

    def cells(self) -> list[PlannedRun]:
        """Every cell: the plan of the grid (:func:`instir.stages.plan.plan_runs`, benchmark-major;
        a benchmark only in the settings its family has)."""
        return plan_runs(self.benchmarks, self.systems, settings=self.settings, variants=self.variants)


def grid_estimate(grid: Grid) -> dict[str, int]:
    """What a grid amounts to before it runs: ``cells``; ``queries`` searched and ``documents``
    indexed or encoded (each corpus once per system), from the published sizes of the real
    benchmarks (:func:`instir.benchmarks.catalog.expected_counts`; every setting counted at the
    instructed one's size); ``sample_cells``, the cells on bundled samples (seconds each)."""
    cells = grid.cells()
    real = [c for c in cells if not catalog.is_sample(c.benchmark)]

    def size(name: str) -> dict[str, int]:
        return catalog.entry(name).expected_counts()

    corpora = {c.benchmark for c in real}
    return {"cells": len(cells), "queries": sum(size(c.benchmark)["queries"] for c in real),
            "documents": sum(size(b)["documents"] for b in corpora) * len(grid.systems),
            "sample_cells": len(cells) - len(real)}


def describe_estimate(grid: Grid) -> str:
    """:func:`grid_estimate` as one line: ``24 cells (2 benchmarks x 1 setting x 3 systems x 2
    variants, IFIR in the instructed setting only); about 59436 queries searched, 96432 documents
    indexed or encoded (published sizes); 12 cells on bundled samples``."""
    est = grid_estimate(grid)
    shape = " x ".join(f"{len(items)} {name if len(items) == 1 else name + 's'}"
                       for name, items in (("benchmark", grid.benchmarks), ("setting", grid.settings),
                                           ("system", grid.systems), ("variant", grid.variants)))
    families = {catalog.entry(b).family.name: catalog.entry(b).family for b in grid.benchmarks}
    for family in families.values():
        kept = [s for s in grid.settings if s in family.settings]
        if len(kept) < len(grid.settings):
            shape += f", {family.printed} in the {', '.join(kept) or 'no'} setting{'s' if len(kept) > 1 else ''} only"
    parts = [f"{est['cells']} cells ({shape})"]
    if est["cells"] > est["sample_cells"]:
        parts.append(f"about {est['queries']:,} queries searched, {est['documents']:,} documents indexed or "
                     "encoded (published sizes)")
    if est["sample_cells"]:
        parts.append(f"{est['sample_cells']} cells on bundled samples")
    return "; ".join(parts)


def parse_grid(data: Any, source: str = "<grid>") -> Grid:
    """A :class:`Grid` from the mapping a YAML file holds; every mistake is one
    :class:`GridError` naming ``source``, the field and the value (quoted, capped), found before
    any cell runs: a field of the wrong type, an unknown benchmark, setting, variant or system, a
    name given twice (two names of one system included), a bad ``judge`` mapping."""
    if not isinstance(data, dict):
        raise GridError(f"{source}: a grid is a mapping with benchmarks and systems, got {quoted(data)}")
    unknown = sorted(str(key) for key in set(data) - GRID_KEYS)
    if unknown:
        close = difflib.get_close_matches(unknown[0], GRID_KEYS, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise GridError(f"{source}: unknown field(s) {shorten(', '.join(unknown), 200)}{hint}; "
                        f"known: {', '.join(sorted(GRID_KEYS))}")

    def names(key: str, default: tuple[str, ...] | None = None) -> tuple[str, ...]:
        value = data.get(key, default)
        if value is None:
            raise GridError(f"{source}: field {key!r} is required (a list of names)")
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) for v in value):
            raise GridError(f"{source}: field {key!r} must be a non-empty list of names, got {quoted(value)}")
        seen = set()
        for v in value:
            if v in seen:
                raise GridError(f"{source}: field {key!r}: {quoted(v)} is given twice")
            seen.add(v)
        return tuple(value)

    def known(key: str, values: tuple[str, ...], choices: Sequence[str], kind: str) -> tuple[str, ...]:
        for value in values:
            if value not in choices:
                raise GridError(f"{source}: field {key!r}: {unknown_name(kind, value, choices)}")
        return values

    benchmarks = known("benchmarks", tuple(catalog.expand(names("benchmarks"))), list_benchmarks(), "benchmark")
    every_setting = list(dict.fromkeys(s for f in catalog.families() for s in catalog.family(f).settings))
    settings = known("settings", names("settings", ("instructed",)), every_setting, "setting")
    variants = known("variants", names("variants", VARIANTS), VARIANTS, "variant")
    systems: list[SystemSpec] = []
    for name in names("systems"):
        try:
            system = resolve_system(name)
        except ValueError as e:
            raise GridError(f"{source}: field 'systems': {e}") from None
        same = next((s for s in systems if s.label == system.label or file_part(s.name) == file_part(name)), None)
        if same is not None:
            raise GridError(f"{source}: field 'systems': {quoted(same.name)} and {quoted(name)} are one system "
                            f"({quoted(system.label)}); list it once")
        systems.append(system)
    return Grid(benchmarks=benchmarks, systems=tuple(systems), variants=variants, settings=settings,
                k=_positive_int(data, "k", 100, source), data_root=_folder(data, "data_root", source),
                cache_dir=_folder(data, "cache_dir", source),
                shard_min_docs=_positive_int(data, "shard_min_docs", 20000, source),
                judge=_judge(data.get("judge"), source))


#: Keys of a grid's ``judge`` mapping: the judge (:func:`instir.judge.factory.make_judge`), its
#: requests per minute over the whole sweep, the instances judged per benchmark and the repeats of
#: the stability check (the judge stage's, :func:`instir.stages.judge_runs`).
JUDGE_KEYS = ("backend", "model", "base_url", "api_key_env", "requests_per_minute", "max_instances", "repeats")


def _positive_int(data: dict, key: str, default: int, source: str) -> int:
    value = data.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise GridError(f"{source}: field {key!r} must be a positive integer, got {quoted(value)}")
    return value


def _folder(data: dict, key: str, source: str) -> str | None:
    """A folder field: a path (a string); empty or absent: None (the default folder)."""
    value = data.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str) or "\x00" in value:
        raise GridError(f"{source}: field {key!r} must be a folder path (a string), got {quoted(value)}")
    return value


def _judge(spec: Any, source: str) -> dict[str, Any] | None:
    """The ``judge`` mapping, checked: known keys, a known backend (openai with a model), strings
    where strings go, ``max_instances`` and ``requests_per_minute`` positive numbers, no
    credentials in ``base_url`` and a variable name (not a key) in ``api_key_env``."""
    from instir.judge.factory import BACKENDS
    from instir.secrets import refuse_url_credentials, require_env_name

    if spec is None:
        return None
    where = f"{source}: field 'judge'"
    if not isinstance(spec, dict):
        raise GridError(f"{where} must be a mapping with a backend ({', '.join(BACKENDS)}), got {quoted(spec)}")
    for key in spec:
        if key not in JUDGE_KEYS:
            raise GridError(f"{where}: {unknown_name('key', str(key), JUDGE_KEYS)}")
    backend = spec.get("backend")
    if not isinstance(backend, str) or backend not in BACKENDS:
        given = "no backend" if backend is None else f"backend {quoted(backend)}"
        raise GridError(f"{where}: {given}; use one of {', '.join(BACKENDS)}")
    for key in ("model", "base_url", "api_key_env"):
        if spec.get(key) is not None and not isinstance(spec[key], str):
            raise GridError(f"{where}.{key} must be a string, got {quoted(spec[key])}")
    if backend == "openai" and not spec.get("model"):
        raise GridError(f"{where}: the openai backend needs a model (the name the server serves)")
    for key in ("max_instances", "repeats"):
        value = spec.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
            raise GridError(f"{where}.{key} must be a positive integer, got {quoted(value)}")
    value = spec.get("requests_per_minute")
    if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)
                              or not 0 < value < float("inf")):
        raise GridError(f"{where}.requests_per_minute must be a positive number, got {quoted(value)}")
    try:
        refuse_url_credentials(spec.get("base_url"), f"{where}.base_url")
        if spec.get("api_key_env"):
            require_env_name(spec["api_key_env"], f"{where}.api_key_env")
    except ValueError as e:
        raise GridError(str(e)) from None
    return dict(spec)


def load_grid(path: str | Path) -> Grid:
    """Read a grid YAML file (see the module docstring)."""
    import yaml

    path = Path(path)
    try:
        data = load_yaml(read_config(path, "grid file"))
    except InputRefused as e:
        raise GridError(f"{path}{f':{e.line}' if e.line else ''}: {e.problem}") from None
    except OSError as e:
        raise GridError(f"{path}: cannot read the grid file ({e.strerror})") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        raise GridError(f"{path}{where}: not valid YAML ({getattr(e, 'problem', e)})") from None
    return parse_grid(data, str(path))
