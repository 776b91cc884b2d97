"""Report helpers for notebooks and the batch pipeline: escaped HTML and Markdown for the data's
text (:mod:`instir.report.html`, the one escaping path) and tables, small plots, the environment
manifest, and the reports index page.

Names are imported from their modules on first use, so ``instir run`` (which only needs
the index and the manifest) does not pay for pandas and matplotlib at start-up."""

from instir._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "html": ("HTML", "NO_MATH", "escape_text", "markdown_code", "markdown_text", "plot_text", "safe_url"),
    "explain": ("constant_judge", "explain_runs"),
    "index": ("INDEX_FILE", "REPORT_FILE", "read_reports", "write_index"),
    "layout": ("ReportLayout", "start_report"),
    "manifest": ("KEY_PACKAGES", "environment_manifest", "git_state", "package_versions",
                 "read_datasets", "record_dataset"),
    "plots": ("panel_name", "plot_group_minima", "plot_instructed_vs_query_only", "plot_per_level",
              "plot_reproduced_vs_reported"),
    "tables": ("MISSING", "SMALL_N", "docs_table", "format_p", "present", "queries_table", "small_n_warning"),
})
