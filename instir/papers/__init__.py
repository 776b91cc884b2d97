"""Paper-reported numbers (IFIR, InstructIR, MTEB's results store) and their comparison
with reproduced ones."""

from instir.papers.compare import (
    DEFAULT_TOLERANCE,
    NotComparableError,
    compare,
    comparison_view,
    match_systems,
    not_comparable_reason,
    tolerance_statement,
)
from instir.papers.divergences import (
    DIVERGENCES,
    Divergence,
    known_divergences,
    reasons_for,
)
from instir.papers.loader import (
    MODEL_ALIASES,
    canonical_measure,
    hf_id_for,
    load_reported,
    model_key,
    paper_models,
    paper_names_for,
)

__all__ = [
    "DEFAULT_TOLERANCE", "DIVERGENCES", "MODEL_ALIASES", "Divergence", "NotComparableError",
    "canonical_measure", "compare", "comparison_view", "hf_id_for", "known_divergences",
    "load_reported", "match_systems", "model_key", "not_comparable_reason", "paper_models", "paper_names_for",
    "reasons_for", "tolerance_statement",
]
