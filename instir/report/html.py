"""Showing corpus text, queries and result tables in notebooks and HTML reports safely.

Benchmark text is data, never markup: a document containing ``<script>`` must show as
text. pandas' own DataFrame display escapes cell text, but a ``Styler`` and
``IPython.display.HTML``/``Markdown`` built from raw text do not; these helpers escape
everything they are given, so notebooks should use them for anything from a corpus.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from instir.benchmarks.types import Doc, Query


#: left-aligned, top-aligned text cells (JupyterLab's stylesheet right-aligns table cells)
_TABLE_STYLE = ("<style>.jp-RenderedHTMLCommon table.instir-table td, table.instir-table td "
                "{text-align: left; vertical-align: top;}</style>")


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


def frame_html(frame: pd.DataFrame, max_chars: int | None = 300) -> HTML:
    """A DataFrame as an escaped HTML table, text cells cut to ``max_chars``."""
    shown = frame.copy()
    for column in shown.columns:
        if shown[column].dtype == object or pd.api.types.is_string_dtype(shown[column]):
            shown[column] = [_cut(v, max_chars) for v in shown[column]]
    table = shown.to_html(escape=True, index=False, border=0, classes="instir-table", na_rep="")
    return HTML(_TABLE_STYLE + table)


def docs_table(docs: Iterable[Doc], max_chars: int | None = 300) -> HTML:
    """Documents (id, title, text) as an escaped table."""
    frame = pd.DataFrame([(d.id, d.title, d.text) for d in docs], columns=["id", "title", "text"])
    return frame_html(frame, max_chars)


def queries_table(queries: Iterable[Query], max_chars: int | None = 300) -> HTML:
    """Query instances (id, group, level, instruction, query) as an escaped table."""
    rows = [(q.id, q.group, "" if q.level is None else q.level, q.instruction, q.query) for q in queries]
    frame = pd.DataFrame(rows, columns=["id", "group", "level", "instruction", "query"])
    return frame_html(frame, max_chars)


def style_table(frame: pd.DataFrame, precision: int = 3, flag_column: str | None = None):
    """A pandas ``Styler`` for result tables: numbers at ``precision`` decimals, no index,
    cell text escaped (a Styler does not escape by default), and, when ``flag_column`` names
    a boolean column, its True cells green and False cells red (e.g. ``within_tolerance``)."""
    styler = frame.style.format(precision=precision, escape="html", na_rep="").hide(axis="index")
    if flag_column is not None:
        styler = styler.map(_flag_style, subset=[flag_column])
    return styler


def _flag_style(value: object) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "background-color: #d4edda" if value else "background-color: #f8d7da"
    return ""


def _cut(value: object, max_chars: int | None) -> object:
    if isinstance(value, str) and max_chars is not None and len(value) > max_chars:
        return value[:max_chars].rstrip() + "…"
    return value
