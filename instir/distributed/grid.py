"""A sweep grid: benchmarks × systems × settings × variants (each family's: instructed / query-only), read
from YAML; its cells are the stages' plan (:func:`instir.stages.plan.plan_runs`), each system
resolved as the notebooks' systems are.

Grid file, YAML (or TOML, named ``*.toml``, as a card file may be; every key but ``benchmarks`` and ``systems``
optional)::

    benchmarks: [instructir-sample, ifir-sample/fiqa]
    systems: [bm25, dense, "dense:sentence-transformers/all-MiniLM-L6-v2", "hybrid:BAAI/bge-base-en-v1.5",
              "BM25 (IFIR)", "Promptriever-7B"]   # ... and any retriever system card name (instir systems)
    variants: [instructed, query-only]     # of each family's variants (its spec's [variants]); default: all
    settings: [instructed]                 # InstructIR settings; IFIR has only "instructed"
    k: 100                                 # 1 to 2,147,483,647; default: each family's depth (FollowIR 1000, else 100)
    data_root: ""                          # real data; empty: the fetch cache
    cache_dir: ""                          # embedding cache; empty: <instir home>/embeddings
    shard_min_docs: 20000                  # corpora this large are encoded by Ray Data first
    judge: {backend: baseline, model: lexical, max_instances: 3}   # optional judge stage (notebook 04's): needs
    # an instructed and a query-only run of one system in the instructed setting (what InstFol compares)
    # judge keys: backend (openai, hf, baseline), model, base_url, api_key_env, timeout_s,
    # requests_per_minute, max_instances, repeats (instir.stages.request.JudgeRequest)

:func:`parse_grid` checks every value before any cell runs, by the run request's rules
(:mod:`instir.stages.request`: one :class:`GridError` naming the file, the line, the field and the value:
``grid.yaml:3: field 'k' takes a whole number …``);
:func:`grid_estimate` says what the grid amounts to. The file is read by :func:`instir.inputs.load_config`
(YAML aliases refused, at most 1 MiB; plain values read as YAML 1.2 reads them: ``k: 1:00`` is the text
``'1:00'``, refused, not YAML 1.1's 60).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from instir.benchmarks import catalog
from instir.errors import UsageError, UserError, closest, quoted, shorten
from instir.inputs import InputRefused, key_line, load_config, read_config
from instir.parameters import depth
from instir.stages.plan import paired_runs, variant_pair
from instir.stages.request import RunRequest, run_request

#: Keys a grid file may hold.
GRID_KEYS = frozenset({"benchmarks", "systems", "variants", "settings", "k", "data_root", "cache_dir",
                       "shard_min_docs", "judge"})


class GridError(UserError, ValueError):
    """A grid file that cannot be used; the message names the file, the line and the field."""


@dataclass(frozen=True)
class Grid(RunRequest):
    """A parsed grid: the run request it makes (its cells are the plan, :meth:`RunRequest.cells`),
    and the corpus size from which a dense system's corpus is encoded by Ray Data first."""

    shard_min_docs: int = 20000


def grid_estimate(grid: Grid) -> dict[str, int]:
    """What a grid amounts to before it runs: ``cells``; ``queries`` searched and ``documents``
    indexed or encoded (each corpus once per system), from the published sizes of the real
    benchmarks (:meth:`instir.benchmarks.catalog.Entry.expected_counts`; every setting counted at the
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
    variants = grid.variants or list(dict.fromkeys(cell.variant for cell in grid.cells()))
    shape = " x ".join(f"{len(items)} {name if len(items) == 1 else name + 's'}"
                       for name, items in (("benchmark", grid.benchmarks), ("setting", grid.settings),
                                           ("system", grid.systems), ("variant", variants)))
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


def parse_grid(data: Any, source: str = "<grid>", line_of: Callable[[str], int | None] = lambda field: None) -> Grid:
    """A :class:`Grid` from the mapping a YAML file holds; every mistake is one
    :class:`GridError` naming ``source``, the line of the field (``line_of``: a field's line in the file,
    ``judge.model`` for a judge key, else the line of the field it is in), the field and the value
    (quoted, capped), found before any cell runs: an unknown field, every mistake
    :func:`instir.stages.request.run_request` refuses (a value of the wrong type, an unknown benchmark,
    setting, variant or system, a name given twice, a bad ``judge`` mapping), a grid of no run, and a judge
    with no pair of runs to judge (:func:`instir.stages.plan.paired_runs`)."""
    def at(field: str) -> str:
        return source if line_of(field) is None else f"{source}:{line_of(field)}"

    if not isinstance(data, dict):
        raise GridError(f"{source}: a grid is a mapping with benchmarks and systems, got {quoted(data)}")
    unknown = sorted(str(key) for key in set(data) - GRID_KEYS)
    if unknown:
        close = closest(unknown[0], GRID_KEYS)
        hint = f" (did you mean {close!r}?)" if close else ""
        raise GridError(f"{at(unknown[0])}: unknown field(s) {shorten(', '.join(unknown), 200)}{hint}; "
                        f"known: {', '.join(sorted(GRID_KEYS))}")

    def where(field: str) -> str:
        return f"{at(field)}: field {field!r}"

    try:
        request = run_request(data, where)
        shard_min_docs = depth(data.get("shard_min_docs", 20000), where=where("shard_min_docs"))
    except UsageError as err:
        raise GridError(str(err)) from None
    cells = request.cells()
    if not cells:  # each benchmark skips the settings its family lacks: these left none
        raise GridError(f"{at('settings')}: the grid asks for no run: {', '.join(request.benchmarks)} "
                        f"{'has' if len(request.benchmarks) == 1 else 'have'} none of the settings "
                        f"{', '.join(request.settings)} (field 'settings')")
    if request.judge is not None and not paired_runs(cells, lambda c: (c.benchmark, c.setting, c.system.name,
                                                                        c.variant)):
        raise GridError(f"{where('judge')}: {_nothing_to_judge(request, line_of)}")
    return Grid(**vars(request), shard_min_docs=shard_min_docs)


def _nothing_to_judge(request: RunRequest, line_of: Callable[[str], int | None]) -> str:
    """Why a grid with a judge plans no pair of runs for it (:func:`instir.stages.plan.paired_runs`), and the fix
    (``line_of``: a field's line in the file): the judge stage would fail after every cell ran."""
    said = ("the judge compares each system's instructed and query-only runs in the instructed setting (InstFol), "
            "and the grid plans no such pair")

    def field(name: str) -> str:
        return f"{name!r}" + ("" if line_of(name) is None else f" (line {line_of(name)})")

    if "instructed" not in request.settings:
        return f"{said}: add 'instructed' to {field('settings')}, or drop the judge"
    pairs = {pair for pair in map(variant_pair, request.benchmarks) if pair is not None}
    missing = sorted({v for pair in pairs for v in pair} - set(request.variants or ()))
    if request.variants is not None and missing:
        return f"{said}: add {', '.join(map(repr, missing))} to {field('variants')}, or drop the judge"
    return f"{said}: no benchmark's family pairs two variants (its spec's 'pair'); drop the judge"


def load_grid(path: str | Path) -> Grid:
    """Read a grid file, YAML or (named ``*.toml``) TOML (see the module docstring)."""
    path = Path(path)
    try:
        text = read_config(path, "grid file")
        data = load_config(path, text)
    except InputRefused as e:
        raise GridError(f"{path}{f':{e.line}' if e.line else ''}: {e.problem}") from None
    except OSError as e:
        raise GridError(f"{path}: cannot read the grid file ({e.strerror})") from None
    return parse_grid(data, str(path), lambda field: key_line(text, lambda t: load_config(path, t), field.split(".")))
