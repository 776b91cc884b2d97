"""Showing text from the data and the parameters in notebooks and HTML reports safely: the
one escaping path of the kit.

Benchmark text, ids, titles, system and model names and parameter values are data, never
markup: a document containing ``<script>``, a query-group id ``g`[x](javascript:alert(1))`` or
a title ``*$\\href{…}{x}$*`` must show as the text it is, in every renderer a report meets
(nbconvert's mistune for the HTML pages, JupyterLab's marked and MathJax for a live notebook).
``IPython.display.HTML``/``Markdown`` built from raw text escape nothing; so HTML goes through
:func:`escape_text`, Markdown through :func:`markdown_text` and :func:`markdown_code` (never a
raw value in backticks, which a backtick in it would close), matplotlib text through
:func:`plot_text`, and tables through :func:`instir.report.tables.present`.
"""

from __future__ import annotations

import html
import re
import string
from urllib.parse import urlsplit


class HTML(str):
    """A string of already-escaped HTML that Jupyter displays as HTML (``_repr_html_``)."""

    def _repr_html_(self) -> str:
        return str(self)


#: the class of every container of data text: MathJax 3 (``mathjax_ignore``) and 2
#: (``tex2jax_ignore``) leave what is inside untypeset (JupyterLab typesets HTML and Markdown outputs)
NO_MATH = "mathjax_ignore tex2jax_ignore"

#: Markdown for each ASCII punctuation character that Markdown, GFM or HTML give a meaning
#: anywhere (``,;?/%`` have none and stay as they are): CommonMark lets a backslash escape every
#: one; the characters HTML gives a meaning (``<>&"'``) and those of TeX's delimiters and
#: commands (``\\`` and ``$``, which JupyterLab takes out of the source as math before Markdown)
#: as entities
_MARKDOWN = str.maketrans({
    **{c: "\\" + c for c in string.punctuation if c not in ",;?/%"},
    "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;", "\\": "&#92;", "$": "&#36;",
})

#: what ends a Markdown line (and so could start a block: a heading, a list, an HTML block, a
#: table row) or is a tab (an indented code block): shown as one space
_LINE_BREAKS = re.compile(r"[\t\n\v\f\r\x1c-\x1e\x85\u2028\u2029]+")


def cut(value: object, max_chars: int | None) -> str:
    """``value`` as text (None: empty), cut to ``max_chars`` characters and an ellipsis when longer."""
    text = "" if value is None else str(value)
    if max_chars is not None and len(text) > max_chars:
        text = text[:max_chars].rstrip() + "…"
    return text


def escape_text(text: object, max_chars: int | None = None) -> str:
    """``text`` as HTML-safe text (``<``, ``>``, ``&`` and quotes escaped, so it may also stand in
    an attribute value), cut to ``max_chars`` characters with an ellipsis when longer; what no UTF-8 page can hold (a
    file name's byte 0xff, read as ``\udcff``) is written as its escape. For HTML only: Markdown reads backticks,
    brackets and asterisks in it (:func:`markdown_text`)."""
    shown = cut(text, max_chars).encode("utf-8", "backslashreplace").decode("utf-8")
    return html.escape(shown, quote=True)


def markdown_text(value: object, max_chars: int | None = None) -> str:
    """``value`` as Markdown that renders as exactly its text, on one line: every ASCII
    punctuation character with a meaning backslash-escaped (no emphasis, code span, link, image,
    autolink, table cell, list, heading or strikethrough can start in it), ``<>&"'``, ``\\`` and
    ``$`` as HTML entities (no raw HTML, no entity of the data's own, no math), line breaks and
    tabs as one space, spaces around it left out (they would indent a code block or break a
    line); cut to ``max_chars`` characters with an ellipsis when longer. A value holding ``$``
    or ``\\`` is wrapped in a span of class :data:`NO_MATH`, so MathJax leaves it alone after
    Markdown has turned the entities back into characters. An empty value stays empty."""
    text = _LINE_BREAKS.sub(" ", cut(value, max_chars)).strip(" ")  # no indented code, no hard break
    escaped = text.translate(_MARKDOWN)
    if "$" in text or "\\" in text:
        return f'<span class="{NO_MATH}">{escaped}</span>'
    return escaped


def markdown_code(value: object, max_chars: int | None = None) -> str:
    """``value`` shown as code in Markdown (an id, a revision, a model name): an inline
    ``<code>`` element around :func:`markdown_text`'s escaping, never backticks around the raw
    value, which a backtick in it would close (MathJax skips ``<code>``)."""
    return f"<code>{_LINE_BREAKS.sub(' ', cut(value, max_chars)).translate(_MARKDOWN)}</code>"


def plot_text(value: object, max_chars: int | None = None) -> str:
    """``value`` for a matplotlib title, label, annotation or legend entry: each ``$`` escaped
    (matplotlib reads ``$…$`` as mathtext, and a malformed one stops the figure from drawing) and
    a leading ``_`` kept visible (matplotlib leaves labels starting with ``_`` out of legends)."""
    text = cut(value, max_chars).replace("$", r"\$")
    return "\u200b" + text if text.startswith("_") else text


#: the only URL schemes a report links to
SAFE_SCHEMES = ("http", "https")


def safe_url(value: object) -> str | None:
    """``value`` when it is an absolute http(s) URL with a host and no whitespace or control
    character (the papers' sources), else None: anything else (``javascript:``, ``data:``,
    relative paths, ``//host``) is never made a link."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text or any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in text):
        return None
    try:
        parts = urlsplit(text)
    except ValueError:
        return None
    if parts.scheme.lower() not in SAFE_SCHEMES or not text.lower().startswith(("http://", "https://")):
        return None
    return text if parts.hostname else None


def has_widgets() -> bool:
    """Whether ipywidgets can be imported (the ``lab`` extra)."""
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True
