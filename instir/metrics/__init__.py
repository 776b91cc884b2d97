"""Metrics: standard measures via ir-measures (pytrec_eval), Robustness@k, IFIR-native
nDCG/MRR, significance tests against a baseline, the tidy result table and LaTeX tables with
ranx's significance marks (:mod:`instir.metrics.latex`).

Names are imported on first use (PEP 562), so that ``instir`` subcommands can register
without loading pandas, ir-measures and scipy. The submodule ``robustness`` holds the
function of the same name (``instir.metrics.robustness.robustness``).
"""

from instir._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "standard": ("Evaluator", "parse_measures", "ranked", "relevant_queries", "run_frame",
                 "mean_by_measure"),
    "robustness": ("average_minima", "group_minima", "query_groups"),
    "ifir": ("native_per_query", "native_label", "ifir_average"),
    "stats": ("paired_tests", "holm", "paired_comparison"),
    "table": ("COLUMNS", "summarise", "combine", "wide", "export"),
    "latex": ("significance_marks", "pairwise_tests", "evaluation_marks", "latex_table", "write_latex"),
    "scoring": ("Evaluation", "evaluate", "evaluate_runs", "default_measures", "instance_groups"),
    "inputs": ("qrels_of", "run_of"),
})
