"""Showing text from the data in notebooks and HTML reports safely.

Benchmark text is data, never markup: a document containing ``<script>`` must show as
text. ``IPython.display.HTML``/``Markdown`` built from raw text do not escape it; these helpers
escape everything they are given, so notebooks should use them for anything from a corpus.
Tables: :func:`instir.report.tables.present` (with ``docs_table`` / ``queries_table`` there).
"""

from __future__ import annotations

import html


class HTML(str):
    """A string of already-escaped HTML that Jupyter displays as HTML (``_repr_html_``)."""

    def _repr_html_(self) -> str:
        return str(self)


def escape_text(text: object, max_chars: int | None = None) -> str:
    """``text`` as HTML-safe text (``<``, ``>``, ``&`` and quotes escaped), cut to
    ``max_chars`` characters with an ellipsis when longer."""
    value = "" if text is None else str(text)
    if max_chars is not None and len(value) > max_chars:
        value = value[:max_chars].rstrip() + "…"
    return html.escape(value, quote=True)


def text_block(text: object, max_chars: int | None = 1000) -> HTML:
    """One escaped text in a block that keeps its line breaks."""
    return HTML(f'<div class="instir-text" style="white-space: pre-wrap">{escape_text(text, max_chars)}</div>')
