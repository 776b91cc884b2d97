"""The bundled notebooks' tables and figures, for anyone's runs and frames: one namespace, the one the
notebooks themselves use (``from instir import show``).

Tables are escaped HTML (a notebook shows them; each is a ``str`` of the markup); figures are matplotlib's.
Values from the data (names, queries, documents) are shown as the text they are, never as markup.

- :func:`table`: a DataFrame as the reports print it (×100 where asked, "—" for a missing value,
  ``<0.001`` p-values, constant columns said once above, wide tables split);
- :func:`queries`, :func:`docs`: query instances and documents, long texts cut;
- :func:`per_level`, :func:`group_minima`, :func:`instructed_vs_query_only`, :func:`reproduced_vs_reported`:
  the notebooks' figures (IFIR's per-level curves, the minima behind Robustness@k, the instruction's
  effect per instance, the kit's numbers against the papers');
- :func:`markdown`, :func:`markdown_code`, :func:`plot_label`: a value from the data made safe for a
  Markdown cell, a code span, or a matplotlib label;
- :func:`small_n_warning`: the sentence a table of few queries deserves;
- the statements notebooks 04 and 05 print, computed from the numbers: :func:`describe_agreement` (a judge
  against gold labels), :func:`constant_judge`, :func:`error_counts`, :func:`weighting_counts`,
  :func:`failure_statement` and :data:`PARSED_MEANING` (what a judge's answers were), :func:`comparison_view` and
  :func:`tolerance_statement` (the kit's numbers beside the papers');
- :mod:`tour`: the guided tour's helpers (notebook 00: ranking one instance, the side-by-side lists, the
  templates each system reads).

:func:`instir.compare_runs` gives a whole results table (paired tests, letters, ×100) in one call.
"""

from instir.judge.outcomes import PARSED_MEANING, error_counts, failure_statement, weighting_counts
from instir.judge.validation import describe_agreement
from instir.papers import comparison_view, tolerance_statement
from instir.report import tour
from instir.report.explain import constant_judge
from instir.report.html import markdown_code, markdown_text, plot_text
from instir.report.plots import (
    plot_group_minima,
    plot_instructed_vs_query_only,
    plot_per_level,
    plot_reproduced_vs_reported,
)
from instir.report.tables import docs_table, present, queries_table, small_n_warning

table = present
queries = queries_table
docs = docs_table
per_level = plot_per_level
group_minima = plot_group_minima
instructed_vs_query_only = plot_instructed_vs_query_only
reproduced_vs_reported = plot_reproduced_vs_reported
markdown = markdown_text
plot_label = plot_text

__all__ = ["table", "queries", "docs", "per_level", "group_minima", "instructed_vs_query_only",
           "reproduced_vs_reported", "markdown", "markdown_code", "plot_label", "small_n_warning",
           "describe_agreement", "constant_judge", "error_counts", "weighting_counts", "failure_statement",
           "PARSED_MEANING", "comparison_view", "tolerance_statement", "tour"]
