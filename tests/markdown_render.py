"""Markdown as the reports show it: rendered by the renderer nbconvert uses for ``text/markdown``
outputs and Markdown cells (mistune 3, through :func:`nbconvert.filters.markdown2html_mistune`),
so tests check what a reader sees, not how the Markdown source spells it."""

from __future__ import annotations

from html import unescape
from html.parser import HTMLParser


def rendered_html(markdown: str) -> str:
    """``markdown`` as nbconvert renders it into a report page."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    return markdown2html_mistune(markdown)


class _Text(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data):
        self.parts.append(data)


def rendered_text(markdown: str) -> str:
    """What a reader reads of ``markdown``: the text of its rendering, tags left out, entities
    decoded, whitespace runs as one space (heading anchors ``¶`` removed)."""
    parser = _Text()
    parser.feed(rendered_html(markdown))
    parser.close()
    return " ".join(unescape("".join(parser.parts)).replace("¶", "").split())
