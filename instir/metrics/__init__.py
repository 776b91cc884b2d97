"""Metrics: standard measures via ir-measures (pytrec_eval), Robustness@k, IFIR-native
nDCG/MRR, significance tests against a baseline, the tidy result table, LaTeX tables with
ranx's significance marks (:mod:`instir.metrics.latex`), and the ``mteb`` protocol (runs
scored as MTEB 2.26 scores its InstructIR and IFIR tasks, :mod:`instir.metrics.mteb`).

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
    "evaluation": ("Evaluation",),
    "scoring": ("evaluate", "evaluate_runs", "default_measures", "instance_groups"),
    "measures": ("PROTOCOLS",),
    "inputs": ("qrels_of", "run_of"),
    "mteb": ("MtebScores", "mteb_scores", "evaluate_mteb", "mteb_measure", "default_mteb_measures", "task_scores"),
})
