"""Corpus text and tables always reach HTML escaped; every table goes through ``present``."""

import pandas as pd

from instir.benchmarks.types import Doc, Query
from instir.report import HTML, docs_table, escape_text, present, queries_table, text_block

SCRIPT = "<script>alert('x')</script>"


def test_docs_with_markup_show_as_text():
    out = docs_table([Doc("d1", f"Saffron {SCRIPT} & more", title="<b>t</b>")])
    assert "<script>" not in out and "<b>" not in out
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in out and "&amp; more" in out
    assert out._repr_html_() == str(out)


def test_queries_table_escapes_instruction_and_query():
    out = queries_table([Query("q1_1", query=SCRIPT, instruction="I am <i>x</i>", group="q1", level=None)])
    assert "<script>" not in out and "<i>" not in out and "&lt;i&gt;x&lt;/i&gt;" in out


def test_text_block_and_escape_text_cut_long_text():
    assert escape_text("a<b", None) == "a&lt;b"
    assert escape_text("abcdef", 3) == "abc…"
    block = text_block(SCRIPT + "tail", max_chars=10)
    assert isinstance(block, HTML) and "<script>" not in block and "…" in block and "tail" not in block


def test_document_and_query_tables_are_present_tables_that_keep_every_column():
    docs = docs_table([Doc("d1", SCRIPT * 10), Doc("d2", "same")], max_chars=20)
    assert docs == present(pd.DataFrame({"id": ["d1", "d2"], "title": ["", ""], "text": [SCRIPT * 10, "same"]}), "",
                           keep=["id", "title", "text"], max_chars=20)
    assert "<script>" not in docs and docs.count("&lt;script&gt;") == 1 and "<th>title</th>" in docs
    queries = queries_table([Query("q1_1", "wine", "a", group="q1"), Query("q1_2", "wine", "b", group="q1")])
    assert "<th>group</th>" in queries and "Same in every row" not in queries and 'class="title"' not in queries


def test_every_rendered_report_links_back_to_the_index(tmp_path):
    import nbformat

    from instir.pipeline import render_html

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# hello")])
    executed = tmp_path / "01_x.ipynb"
    nbformat.write(nb, executed)
    html = render_html(executed, tmp_path / "01_x.html").read_text()
    assert '<a href="../index.html">' in html and html.index("../index.html") < html.index("hello")
