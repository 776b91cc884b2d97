"""Corpus text and tables always reach HTML escaped; every table goes through ``present``."""

import itertools
import re
from html.parser import HTMLParser

import pandas as pd
import pytest

from instir.benchmarks.types import Doc, Query
from instir.report import docs_table, escape_text, present, queries_table
from instir.report.html import NO_MATH, markdown_code, markdown_text, plot_text, safe_url

SCRIPT = "<script>alert('x')</script>"


def test_docs_with_markup_show_as_text():
    out = docs_table([Doc("d1", f"Saffron {SCRIPT} & more", title="<b>t</b>")])
    assert "<script>" not in out and "<b>" not in out
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in out and "&amp; more" in out
    assert out._repr_html_() == str(out)


def test_queries_table_escapes_instruction_and_query():
    out = queries_table([Query("q1_1", query=SCRIPT, instruction="I am <i>x</i>", group="q1", level=None)])
    assert "<script>" not in out and "<i>" not in out and "&lt;i&gt;x&lt;/i&gt;" in out


def test_escape_text_cuts_long_text():
    assert escape_text("a<b", None) == "a&lt;b"
    assert escape_text("abcdef", 3) == "abc…"
    assert escape_text("abc", 3) == "abc" and escape_text("abcd", 3) == "abc…"  # at the bound: whole, no ellipsis
    assert escape_text(SCRIPT + "tail", max_chars=10) == "&lt;script&gt;al…"


def test_document_and_query_tables_are_present_tables_that_keep_every_column():
    docs = docs_table([Doc("d1", SCRIPT * 10), Doc("d2", "same")], max_chars=20)
    assert docs == present(pd.DataFrame({"id": ["d1", "d2"], "title": ["", ""], "text": [SCRIPT * 10, "same"]}), "",
                           keep=["id", "title", "text"], max_chars=20)
    assert "<script>" not in docs and docs.count("&lt;script&gt;") == 1 and "<th>title</th>" in docs
    queries = queries_table([Query("q1_1", "wine", "a", group="q1"), Query("q1_2", "wine", "b", group="q1")])
    assert "<th>group</th>" in queries and "Same in every row" not in queries and 'class="title"' not in queries


def test_every_rendered_report_links_back_to_the_index_that_lists_its_folder(tmp_path):
    import nbformat

    from instir.pipeline import render_html

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# hello")])
    for folder, index in ((tmp_path / "reports" / "r", "../index.html"), (tmp_path / "alone", "index.html")):
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / "01_x.ipynb")
        html = render_html(folder / "01_x.ipynb", folder / "01_x.html").read_text()
        assert f'<a href="{index}">' in html and html.index(f'"{index}"') < html.index("hello")


# ---------------------------------------------------------------- Markdown: one escaping path

#: values that would be markup if a Markdown cell read them raw: each construct of Markdown, GFM,
#: raw HTML, entities and TeX (JupyterLab's MathJax) a data field or a parameter could carry
HOSTILE = [
    "g`[clk](javascript:alert(1))`",  # the FAIL row of issue 24: a backtick closes the code span
    "``double`` `single` ```triple```",
    "[x](javascript:alert(1))", "[x]( javascript:alert(1) )", "[x][r] [r]: javascript:alert(1)",
    "[r]: javascript:alert(1)", "![i](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "<javascript:alert(1)>", "<https://evil.example/>", "<mail@evil.example>",
    "https://evil.example/x www.evil.example mail@evil.example",
    "*em* _em_ **strong** __strong__ ~~strike~~ ***both***",
    "<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "<a href='javascript:alert(1)'>x</a>",
    "<!-- c --> <![CDATA[x]]> <?php x ?>",
    "&lt;script&gt; &amp; &#106;avascript&colon;alert(1) &quot;",
    "# h", "###### h", "1. list", "1) list", "- list", "+ list", "* list", "> quote", "    indented", "---",
    "=== ", "| a | b |", ": definition", "- [ ] task", "```python", "~~~",
    "l1\n\n<script>alert(1)</script>\n# h\n    code\n[r]: javascript:alert(1)", "a\r\nb\u2028c\u2029d\te",
    "$\\href{javascript:alert(1)}{x}$", "$$\\href{javascript:alert(1)}{x}$$", "\\(x\\) \\[y\\]",
    "\\begin{equation}x\\end{equation}", "back\\slash \\` \\*", "trailing \\", "two spaces  ", "  both ends  ",
    "naïve — ☃ 𝑥", "a|b", "x\\|y",
]

#: where a notebook puts text into Markdown (``{}``: the value)
CONTEXTS = ["{}", "before {} after", "### heading {}", "- item {}", "**{}**", "*{}*",
            "| h |\n|---|\n| {} |", "1. {}\n2. next", "> {}"]


class _Events(HTMLParser):
    """Start and end tags with their attributes (ids and in-page anchors normalised, as
    headings derive them from their text), and the text, entities decoded."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        kept = tuple((k, "#" if k == "href" and (v or "").startswith("#") else v) for k, v in attrs if k != "id")
        self.tags.append(("start", tag, kept))

    def handle_endtag(self, tag):
        self.tags.append(("end", tag))

    def handle_data(self, data):
        self.text.append(data)


def _events(rendered: str) -> tuple[list[tuple], str]:
    parser = _Events()
    parser.feed(rendered)
    parser.close()
    return parser.tags, "".join("".join(parser.text).split())  # the text, whitespace aside


def _renderers():
    """nbconvert's Markdown renderer (mistune 3: what the HTML reports are made with), and
    markdown-it-py's CommonMark with GFM tables and strikethrough as a second reading where it
    is installed (it comes with rich)."""
    from markdown_render import rendered_html

    renderers = {"nbconvert (mistune)": rendered_html}
    try:
        from markdown_it import MarkdownIt
    except ImportError:
        return renderers
    return {**renderers, "markdown-it (CommonMark)": MarkdownIt("commonmark").enable(["table", "strikethrough"]).render}


def _shown(value: str) -> str:
    return "".join(value.split())


def test_nbconvert_renders_markdown_with_mistune_and_keeps_javascript_links():
    """What the reports are rendered with (so what the tests below check against): mistune,
    which passes raw HTML through and allows any link scheme."""
    import nbconvert.filters.markdown_mistune as renderer

    assert renderer.MISTUNE_V3
    out = renderer.markdown2html_mistune("[x](javascript:alert(1)) <b>raw</b>")
    assert 'href="javascript:alert(1)"' in out and "<b>raw</b>" in out


def test_escape_text_inside_backticks_let_a_backtick_end_the_code_span():
    """The FAIL row of issue 24, as the notebooks wrote it before: a link that runs script."""
    from markdown_render import rendered_html

    old = rendered_html(f"### x: group `{escape_text(HOSTILE[0])}`")
    assert '<a href="javascript:alert(1)">clk</a>' in old
    new = rendered_html(f"### x: group {markdown_code(HOSTILE[0])}")
    assert "<a href=\"javascript" not in new and "<code>g`[clk](javascript:alert(1))`</code>" in new


@pytest.mark.parametrize("value", HOSTILE, ids=range(len(HOSTILE)))
def test_markdown_text_renders_as_exactly_its_text_in_every_context(value):
    for (name, render), context in itertools.product(_renderers().items(), CONTEXTS):
        plain = context.format("PLACEHOLDER")
        if "$" in value or "\\" in value:
            plain = context.format(f'<span class="{NO_MATH}">PLACEHOLDER</span>')
        tags, text = _events(render(context.format(markdown_text(value))))
        want_tags, want_text = _events(render(plain))
        assert tags == want_tags, (name, value, context)  # no element, attribute or link of the value's own
        assert text == want_text.replace("PLACEHOLDER", _shown(value)), (name, value, context)


@pytest.mark.parametrize("value", HOSTILE, ids=range(len(HOSTILE)))
def test_markdown_code_is_one_code_element_holding_exactly_the_value(value):
    for (name, render), context in itertools.product(_renderers().items(), CONTEXTS):
        tags, text = _events(render(context.format(markdown_code(value))))
        want_tags, want_text = _events(render(context.format("<code>PLACEHOLDER</code>")))
        assert tags == want_tags, (name, value, context)
        assert text == want_text.replace("PLACEHOLDER", _shown(value)), (name, value, context)


def test_markdown_text_cuts_and_keeps_one_line():
    assert markdown_text("abcdef", 3) == "abc…" and markdown_code("abcdef", 3) == "<code>abc…</code>"
    assert markdown_text("a\n\nb") == "a b" and markdown_text(None) == markdown_text("") == ""
    assert markdown_text(42) == "42"
    assert markdown_text("plain words, numbers 1; 2/3 50%?") == "plain words, numbers 1; 2/3 50%?"


def test_math_in_the_data_never_reaches_mathjax():
    """JupyterLab takes ``$…$`` and ``\\(…\\)`` out of a Markdown source as math and typesets the
    rendered output: the value's ``$`` and ``\\`` are entities in the source, the value sits in
    a container MathJax ignores, and code is never typeset."""
    out = markdown_text("$\\href{javascript:alert(1)}{x}$")
    assert "$" not in out and "\\h" not in out and out.startswith(f'<span class="{NO_MATH}">')
    assert "$" not in markdown_code("$x$") and markdown_code("$x$").startswith("<code>")
    assert NO_MATH in present(pd.DataFrame({"a": ["$x$"]}), "t")


def test_safe_url_is_an_absolute_http_url_or_none():
    for url in ("https://arxiv.org/abs/2402.14334", "http://x.org", "HTTPS://X.ORG/a?b=c#d"):
        assert safe_url(url) == url
    for bad in ("javascript:alert(1)", "JavaScript:alert(1)", " javascript:alert(1)", "java\tscript:alert(1)",
                "data:text/html,<script>alert(1)</script>", "vbscript:x", "file:///etc/passwd", "//evil.example/x",
                "/relative", "relative.html", "https:/x", "https://", "http://a b", "https://x\nevil", "https://x\x00",
                "https:\\\\evil.example", "", None, 3, ["https://x.org"],
                "javascript://x.org/%0Aalert(1)", "ftp://x.org/a", "https://x.org/\x7f", "https://x\x1b[2Jorg"):
        assert safe_url(bad) is None, bad
    assert safe_url(" https://x.org\n") == "https://x.org"


def test_present_links_only_http_urls_and_escapes_the_rest():
    out = present(pd.DataFrame({"source": ["https://ok.example/a", "javascript:alert(1)", "data:text/html,x",
                                           "https:/x", "//evil.example"]}), "t")
    assert re.findall(r'href="([^"]*)"', out) == ["https://ok.example/a"]
    assert "javascript:alert(1)" in out and "data:text/html,x" in out


def test_plot_text_never_starts_mathtext_and_keeps_legend_entries():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1], label=plot_text("_hidden $\\frac{$"))
    ax.set_title(plot_text("$\\href{javascript:alert(1)}{x}$"))
    ax.legend()
    fig.canvas.draw()  # a raw "$\frac{$" raises ValueError here
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["\u200b_hidden \\$\\frac{\\$"]
    plt.close(fig)


def test_every_kind_of_output_of_hostile_text_renders_without_markup(tmp_path):
    """What a report page makes of each output a cell can leave with text from the data: a
    Markdown display (through markdown_text/markdown_code), present()'s HTML, printed text, a
    plain repr and an error with ANSI colours, rendered by the reports' nbconvert template."""
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    from instir.pipeline import render_html

    hostile = ("g`[clk](javascript:alert(1))` <img src=x onerror=alert(2)> <script>alert(3)</script> "
               "[x](https://e.example)")
    outputs = [
        new_output("display_data", data={"text/markdown": f"### {markdown_text(hostile)}: {markdown_code(hostile)}"}),
        new_output("display_data", data={"text/html": str(present(pd.DataFrame({"id": [hostile]}), hostile))}),
        new_output("stream", name="stdout", text=hostile + "\n"),
        new_output("execute_result", data={"text/plain": hostile}, execution_count=1),
        new_output("error", ename="FormatError", evalue=hostile, traceback=[f"\x1b[31mFormatError\x1b[0m: {hostile}"]),
    ]
    nb = new_notebook(cells=[new_code_cell("x", outputs=outputs, execution_count=1)])
    nbformat.write(nb, tmp_path / "01_x.ipynb")
    page = render_html(tmp_path / "01_x.ipynb", tmp_path / "01_x.html").read_text(encoding="utf-8")
    body = page[page.index("<body"):]

    class Tags(HTMLParser):
        found: list = []

        def handle_starttag(self, tag, attrs):
            self.found.append((tag, dict(attrs)))

    parser = Tags()
    parser.feed(body)
    assert not [t for t, a in parser.found if t in ("script", "img", "iframe") or any(k.startswith("on") for k in a)]
    assert [a["href"] for t, a in parser.found if t == "a" and "href" in a and not a["href"].startswith("#")] == [
        "index.html"]


def test_an_output_too_large_for_a_page_is_left_out_with_a_note_saying_where_it_is(tmp_path):
    """On main a lab notebook holding a 100 MB image and 50 MB of text was not rendered after 600 s (1.2 GB);
    here a smaller pair over the bound makes the point: each is left out, the small output stays, and the
    executed notebook keeps both."""
    import base64
    import os

    import nbformat

    from instir.pipeline import MAX_EMBEDDED_OUTPUT, render_html

    text = "y" * (MAX_EMBEDDED_OUTPUT + 1)
    image = base64.b64encode(os.urandom(MAX_EMBEDDED_OUTPUT)).decode()
    nb = nbformat.v4.new_notebook()
    cells = [nbformat.v4.new_code_cell(source) for source in ("print(y)", "figure", "40 + 2")]
    cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
    cells[1].outputs = [nbformat.v4.new_output("display_data", data={"image/png": image, "text/plain": "<Figure>"})]
    cells[2].outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": "42"}, execution_count=3)]
    nb.cells = cells
    executed = tmp_path / "01_big.ipynb"
    nbformat.write(nb, executed)
    page = render_html(executed, tmp_path / "01_big.html").read_text()
    assert len(page) < MAX_EMBEDDED_OUTPUT and "y" * 1000 not in page and image[:1000] not in page
    for number, size in ((1, len(text)), (2, len(image) + len("<Figure>"))):
        assert f"An output of {size:,} characters is left out of this page" in page
        assert f"it is in 01_big.ipynb, cell {number}." in page
    assert "42" in page
    kept = nbformat.read(executed, as_version=4)
    assert kept.cells[0].outputs[0].text == text and kept.cells[1].outputs[0].data["image/png"] == image


def test_a_page_embeds_its_outputs_up_to_a_bound_in_all_and_no_saved_widget_state(tmp_path):
    """Sixty images of 1.9 MB each, every one under the bound of an output, made a 112 MB page (1 GB to render), and
    a lab notebook's saved widget state (50 MB) was copied into its page whole, where no widget manager reads it."""
    import base64
    import os

    import nbformat

    from instir.pipeline import MAX_EMBEDDED_OUTPUT, MAX_EMBEDDED_PAGE, render_html

    images = [base64.b64encode(os.urandom(MAX_EMBEDDED_OUTPUT * 3 // 4 - 3)).decode() for _ in range(11)]
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"figure {i}") for i in range(len(images))]
    for cell, image in zip(nb.cells, images):
        cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": image})]
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": {"w": {"model_name": "LayoutModel", "model_module": "@jupyter-widgets/base",
                        "model_module_version": "2.0.0", "state": {"blob": "saved-state-" * 1000}}},
        "version_major": 2, "version_minor": 0}}
    executed = tmp_path / "01_many.ipynb"
    nbformat.write(nb, executed)
    page = render_html(executed, tmp_path / "01_many.html").read_text()
    assert len(page) < MAX_EMBEDDED_PAGE + MAX_EMBEDDED_OUTPUT and "saved-state-" not in page
    kept = [i for i, image in enumerate(images) if image[:1000] in page]
    assert len(images[0]) == 1_999_996 and kept == list(range(10))  # ten of them fit in 20,000,000 characters
    for number in range(len(kept) + 1, len(images) + 1):
        said = (f"1 output(s) of {len(images[0]):,} characters in all are left out of this page (it holds "
                "20,000,000 characters of outputs or 10,000 outputs at most)")
        assert said in page and f"they are in 01_many.ipynb, cell {number}." in page
    assert nbformat.read(executed, as_version=4).cells[-1].outputs[0].data["image/png"] == images[-1]


def test_outputs_past_the_pages_count_are_left_out_under_one_note_per_cell(tmp_path, monkeypatch):
    """50,000 outputs of a few characters each took 27 s to render (each costs nbconvert the same whatever its size);
    past the bound, a cell's outputs are one note, not one note each (the bound lowered here: 10,000 take seconds)."""
    import nbformat

    import instir.pipeline
    from instir.pipeline import render_html

    monkeypatch.setattr(instir.pipeline, "MAX_EMBEDDED_OUTPUTS", 3)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("for i in range(500): display(i)"), nbformat.v4.new_code_cell("done")]
    nb.cells[0].outputs = [nbformat.v4.new_output("display_data", data={"text/plain": f"out-{i}-put"})
                           for i in range(500)]
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="last-output\n")]
    executed = tmp_path / "01_tiny.ipynb"
    nbformat.write(nb, executed)
    page = render_html(executed, tmp_path / "01_tiny.html").read_text()
    assert [i for i in range(500) if f"out-{i}-put" in page] == [0, 1, 2] and "last-output" not in page
    assert page.count("left out of this page") == 2
    assert "497 output(s) of" in page and "they are in 01_tiny.ipynb, cell 1." in page and "3 outputs at most" in page


def test_outputs_that_fill_the_page_exactly_are_kept_and_the_note_sums_the_ones_left_out(tmp_path, monkeypatch):
    """The page's bound is the most it holds: outputs that reach it exactly stay; the note counts the characters of
    every output left out (the bound lowered here to 30 characters: three outputs of 10)."""
    import nbformat

    import instir.pipeline
    from instir.pipeline import render_html

    monkeypatch.setattr(instir.pipeline, "MAX_EMBEDDED_PAGE", 30)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("show()")]
    sizes = [10, 10, 10, 7, 12]  # 30 characters kept, then 7 + 12 = 19 left out
    nb.cells[0].outputs = [nbformat.v4.new_output("display_data", data={"text/plain": f"o{i}{'x' * (n - 3)}!"})
                           for i, n in enumerate(sizes)]
    executed = tmp_path / "01_full.ipynb"
    nbformat.write(nb, executed)
    page = render_html(executed, tmp_path / "01_full.html").read_text()
    shown = [i for i, n in enumerate(sizes) if f"o{i}{'x' * (n - 3)}!" in page]
    assert shown == [0, 1, 2]
    assert "2 output(s) of 19 characters in all are left out of this page (it holds 30 characters of outputs" in page


def test_an_output_of_exactly_the_bound_of_one_output_is_kept(tmp_path, monkeypatch):
    """The bound of an output is the most it may hold (lowered here to 10 characters): 10 stay, 11 are left out."""
    import nbformat

    import instir.pipeline
    from instir.pipeline import render_html

    monkeypatch.setattr(instir.pipeline, "MAX_EMBEDDED_OUTPUT", 10)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("show()")]
    nb.cells[0].outputs = [nbformat.v4.new_output("display_data", data={"text/plain": text})
                           for text in ("ten-chars!", "eleven-chs!")]
    executed = tmp_path / "01_edge.ipynb"
    nbformat.write(nb, executed)
    page = render_html(executed, tmp_path / "01_edge.html").read_text()
    assert "ten-chars!" in page and "eleven-chs!" not in page
    assert "An output of 11 characters is left out of this page (more than 10)" in page
