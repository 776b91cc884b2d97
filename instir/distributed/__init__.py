"""Scale-out on Ray (the ``instir[distributed]`` extra): grid sweeps whose cells run as Ray
tasks into a folder notebooks 03–05 read unchanged (:func:`run_sweep`), sharded corpus
encoding with Ray Data (:func:`encode_corpus`) and one judge actor that owns the judgment
cache and the rate limit (:func:`start_judge`). Ray is imported only when a sweep runs."""

from instir.distributed.cells import CellResult, collect, run_cell
from instir.distributed.grid import (
    Cell,
    Grid,
    GridError,
    SystemSpec,
    load_grid,
    parse_grid,
    resolve_system,
)

__all__ = ["Cell", "CellResult", "Grid", "GridError", "SystemSpec", "collect", "encode_corpus", "load_grid",
           "parse_grid", "resolve_system", "run_cell", "run_sweep", "start_judge"]


def __getattr__(name: str):
    """Ray-backed parts load lazily, so importing the package needs no Ray."""
    if name == "run_sweep":
        from instir.distributed.sweep import run_sweep

        return run_sweep
    if name == "encode_corpus":
        from instir.distributed.encode import encode_corpus

        return encode_corpus
    if name == "start_judge":
        from instir.distributed.judge import start_judge

        return start_judge
    raise AttributeError(name)
