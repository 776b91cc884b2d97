"""Metrics: standard measures via ir-measures (pytrec_eval), Robustness@k, IFIR-native
nDCG/MRR, significance tests against a baseline, and the tidy result table.

Names are imported on first use (PEP 562), so that ``instir`` subcommands can register
without loading pandas, ir-measures and scipy. The submodule ``robustness`` holds the
function of the same name (``instir.metrics.robustness.robustness``).
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "Evaluator": "standard", "evaluate": "standard", "parse_measures": "standard", "ranked": "standard",
    "relevant_queries": "standard", "run_frame": "standard", "mean_by_measure": "standard",
    "average_minima": "robustness", "group_minima": "robustness", "query_groups": "robustness",
    "native_per_query": "ifir", "native_label": "ifir", "ifir_average": "ifir",
    "paired_tests": "stats", "holm": "stats", "paired_comparison": "stats",
    "COLUMNS": "table", "summarise": "table", "combine": "table", "wide": "table", "export": "table",
    "Evaluation": "scoring", "evaluate_runs": "scoring", "default_measures": "scoring",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'instir.metrics' has no attribute {name!r}")
    return getattr(importlib.import_module(f"instir.metrics.{_EXPORTS[name]}"), name)
