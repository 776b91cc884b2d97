"""Metrics: measures as value objects (:mod:`instir.metrics.measures`: standard trec_eval
measures through ir-measures, Robustness@k, IFIR-native nDCG/MRR, InstFol), one scoring path
(:mod:`instir.metrics.scoring`, the ``mteb`` protocol a parameter of it:
:mod:`instir.metrics.mteb`), significance tests against a baseline, the tidy result table and
LaTeX tables with ranx's significance marks (:mod:`instir.metrics.latex`).

Names are imported on first use (PEP 562), so that ``instir`` subcommands can register
without loading pandas, ir-measures and scipy. The submodule ``robustness`` holds the
function of the same name (``instir.metrics.robustness.robustness``).
"""

from instir._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "measures": ("PROTOCOLS", "Measure", "Standard", "Robustness", "Native", "InstFol", "parse_measure",
                 "parse_measures"),
    "standard": ("Evaluator", "ranked", "relevant_queries", "run_frame", "mean_by_measure"),
    "robustness": ("average_minima", "group_minima", "query_groups"),
    "native": ("native_per_query",),
    "stats": ("paired_tests", "holm", "paired_comparison"),
    "table": ("COLUMNS", "summarise", "combine", "wide", "export", "subset_average"),
    "latex": ("significance_marks", "pairwise_tests", "evaluation_marks", "latex_table"),
    "compared": ("compare_runs", "RunComparison"),
    "evaluation": ("Evaluation",),
    "scoring": ("evaluate", "evaluate_runs", "default_measures", "headline", "instance_groups"),
    "inputs": ("qrels_of", "run_of"),
    "mteb": ("MtebScores", "mteb_scores", "mteb_measure", "default_mteb_measures"),
})
