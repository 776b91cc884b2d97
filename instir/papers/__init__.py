"""Paper-reported numbers (each benchmark family's paper, MTEB's results store), their comparison
with reproduced ones, and the views the reports show of them."""

from instir._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "comparison": ("DEFAULT_TOLERANCE", "NotComparableError", "compare_to_papers", "comparison_view", "match_systems",
                   "not_comparable_reason", "tolerance_statement"),
    "divergences": ("DIVERGENCES", "Divergence", "known_divergences", "reasons_for"),
    "loader": ("MODEL_ALIASES", "REPORTED_FILES", "canonical_measure", "family_papers", "load_reported", "model_key",
               "paper_models", "paper_names_for", "load_mteb_results"),
    "views": ("ReportedView", "reported_curves", "reported_views", "statistics_views"),
}, deprecated={"compare": "compare_to_papers"})
