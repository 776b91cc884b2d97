"""A sweep grid: benchmarks × systems × settings × variants (instructed / query-only), read
from YAML; each system string is resolved by :func:`instir.systems.specs.resolve_system`, as
the notebooks' systems are.

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
    judge: {backend: baseline, model: lexical, max_instances: 1}   # optional InstFol step
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from instir.benchmarks import catalog
from instir.errors import UserError, quoted
from instir.inputs import InputRefused, load_yaml, read_config
from instir.systems.specs import SystemSpec, resolve_system, run_label

VARIANTS = ("instructed", "query-only")
#: Keys a grid file may hold.
GRID_KEYS = frozenset({"benchmarks", "systems", "variants", "settings", "k", "data_root", "cache_dir",
                       "shard_min_docs", "judge"})


class GridError(UserError, ValueError):
    """A grid file that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class Cell:
    """One unit of a sweep: a run of ``system`` on ``benchmark`` in ``setting`` with the
    ``variant`` template, then its evaluation. ``cell_id`` is file-name friendly and unique."""

    benchmark: str
    setting: str
    system: SystemSpec
    variant: str

    @property
    def cell_id(self) -> str:
        parts = [self.benchmark, self.setting, self.system.name, self.variant]
        return "__".join("".join(c if c.isalnum() or c in "._-" else "-" for c in p) for p in parts)

    @property
    def run_label(self) -> str:
        """The ``system`` column of ``runs.csv`` (:func:`instir.systems.specs.run_label`)."""
        return run_label(self.system.label, self.variant, self.setting)


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

    def cells(self) -> list[Cell]:
        """Every cell, benchmark-major; IFIR benchmarks only in the ``instructed`` setting."""
        return [Cell(b, s, system, v) for b in self.benchmarks for s in self.settings
                if s == "instructed" or catalog.family_of(b) != "ifir"
                for system in self.systems for v in self.variants]


def parse_grid(data: Any, source: str = "<grid>") -> Grid:
    """A :class:`Grid` from the mapping a YAML file holds; every mistake is one
    :class:`GridError` naming ``source`` and the field."""
    if not isinstance(data, dict):
        raise GridError(f"{source}: a grid is a mapping with benchmarks and systems")
    unknown = sorted(set(data) - GRID_KEYS)
    if unknown:
        raise GridError(f"{source}: unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(GRID_KEYS))}")

    def names(key: str, default: tuple[str, ...] | None = None) -> tuple[str, ...]:
        value = data.get(key, default)
        if value is None:
            raise GridError(f"{source}: field {key!r} is required (a list of names)")
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or not value or not all(isinstance(v, str) for v in value):
            raise GridError(f"{source}: field {key!r} must be a non-empty list of names, got {quoted(value)}")
        return tuple(value)

    systems = []
    for name in names("systems"):
        try:
            systems.append(resolve_system(name))
        except ValueError as e:
            raise GridError(f"{source}: field 'systems': {e}") from None
    variants = names("variants", VARIANTS)
    bad = [v for v in variants if v not in VARIANTS]
    if bad:
        raise GridError(f"{source}: field 'variants': unknown {bad}; use {', '.join(VARIANTS)}")
    k = data.get("k", 100)
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise GridError(f"{source}: field 'k' must be a positive integer, got {quoted(k)}")
    shard = data.get("shard_min_docs", 20000)
    if not isinstance(shard, int) or isinstance(shard, bool) or shard < 1:
        raise GridError(f"{source}: field 'shard_min_docs' must be a positive integer, got {quoted(shard)}")
    judge = data.get("judge")
    if judge is not None and not (isinstance(judge, dict) and isinstance(judge.get("backend"), str)):
        raise GridError(f"{source}: field 'judge' must be a mapping with a backend (hf, openai or baseline)")
    return Grid(benchmarks=names("benchmarks"), systems=tuple(systems), variants=variants,
                settings=names("settings", ("instructed",)), k=k, data_root=data.get("data_root") or None,
                cache_dir=data.get("cache_dir") or None, shard_min_docs=shard, judge=judge)


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
