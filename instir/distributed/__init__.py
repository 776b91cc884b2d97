"""Scale-out on Ray (the ``instir[distributed]`` extra): grid sweeps whose cells run as Ray
tasks into a folder notebooks 03–05 read unchanged (:func:`run_sweep`), sharded corpus
encoding with Ray Data (:func:`encode_corpus`) and one judge actor that owns the judgment
cache and the rate limit (:func:`start_judge`). Names load on first use, so importing the
package needs no Ray."""

from instir._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "cells": ("CellResult", "collect", "run_cell"),
    "grid": ("Grid", "GridError", "load_grid", "parse_grid"),
    "sweep": ("run_sweep",),
    "encode": ("encode_corpus",),
    "judge": ("start_judge",),
})
