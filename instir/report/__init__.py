"""Report helpers for notebooks and the batch pipeline: escaped HTML for corpus text and
tables, small plots, the environment manifest, and the reports index page.

Names are imported from their modules on first use, so ``instir run`` (which only needs
the index and the manifest) does not pay for pandas and matplotlib at start-up."""

from importlib import import_module

_EXPORTS = {
    "instir.report.html": ("HTML", "docs_table", "escape_text", "frame_html", "queries_table", "style_table",
                           "text_block"),
    "instir.report.explain": ("constant_judge", "explain_instructir"),
    "instir.report.index": ("INDEX_FILE", "REPORT_FILE", "read_reports", "write_index"),
    "instir.report.manifest": ("DATASETS_FILE", "KEY_PACKAGES", "environment_manifest", "git_state",
                               "package_versions", "read_datasets", "record_dataset"),
    "instir.report.plots": ("panel_name", "plot_group_minima", "plot_per_level", "plot_reproduced_vs_reported"),
    "instir.report.tables": ("MISSING", "SMALL_N", "format_p", "present", "small_n_warning"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    """Import an exported name from its module on first use."""
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_MODULE_OF[name]), name)


def __dir__() -> list[str]:
    return __all__
