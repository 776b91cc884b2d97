"""One way to show a result table in a report: titled, rounded, without the pandas index,
constant columns said once above the table instead of repeated on every row, "—" for
missing values, p-values as ``<0.001``, source links clickable, everything else escaped.

Every notebook table goes through :func:`present`, so a student sees the same conventions
on every page: scores ×100 as the papers print them (the header says so), counts as
integers, other numbers at a fixed number of decimals (never ``-0.0``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from instir.benchmarks.types import Doc, Query
from instir.report.html import HTML, NO_MATH, cut, escape_text, safe_url

#: shown for a missing value (None, NaN, NA, empty text)
MISSING = "—"

#: the columns whose http(s) URLs :func:`present` makes links
LINK_COLUMNS = ("source", "url", "source_url")

#: characters of a link's text (the full URL is the link and its tooltip)
_LINK_CHARS = 48

#: at or below this many queries (or groups), a significance test says little; tables warn
SMALL_N = 20

_STYLE = """<style>
.instir-present { max-width: 1400px; overflow-x: auto; margin: 0.4em 0 1.2em; }
.instir-present table, .jp-RenderedHTMLCommon .instir-present table {
  border-collapse: collapse; font-size: 0.85em; table-layout: auto; margin: 0; }
.instir-present .title { font-weight: bold; padding: 0.3em 0 0.2em; }
.instir-present th, .instir-present td, .jp-RenderedHTMLCommon .instir-present th,
.jp-RenderedHTMLCommon .instir-present td {
  border: 1px solid #ddd; padding: 0.2em 0.5em; vertical-align: top; text-align: left; max-width: 18em;
  overflow-wrap: break-word; }
.instir-present th, .jp-RenderedHTMLCommon .instir-present th { background: #f3f3f3; }
.instir-present td.num, .jp-RenderedHTMLCommon .instir-present td.num {
  text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.instir-present td.long { min-width: 9em; }
.instir-present td.prose, .jp-RenderedHTMLCommon .instir-present td.prose { min-width: 24em; max-width: 48em; }
.instir-present td.good, .instir-present td.bad, .instir-present td.muted { white-space: nowrap; }
.instir-present td.long, .instir-present td.prose { white-space: normal; }
.instir-present td.good { background: #d4edda; }
.instir-present td.bad { background: #f8d7da; }
.instir-present td.muted { background: #eeeeee; color: #555; }
.instir-present p.note { margin: 0.2em 0; font-size: 0.9em; }
</style>"""


def present(frame: pd.DataFrame, title: str, *, scale: float = 1.0, scaled: Sequence[str] = (),
            digits: int = 1, other_digits: int = 3, keep: Sequence[str] = (), notes: Iterable[str] = (),
            flags: Mapping[object, str] | None = None, flag_column: str | None = None,
            max_chars: int | None = 300, max_columns: int = 12, fold_constant: bool = True) -> HTML:
    """``frame`` as one escaped HTML table (or several, see ``max_columns``) under ``title`` (none
    when empty): the one table renderer of notebooks and reports.

    - A meaningful index (anything but unnamed integer row numbers) becomes leading columns; a
      column MultiIndex is flattened to ``a · b`` headers.
    - ``scaled`` columns are multiplied by ``scale`` and shown at ``digits`` decimals, their
      header marked ``×100`` (for ``scale=100``); other floats at ``other_digits``; integers
      (integer columns, and integer values anywhere: see :func:`integer_rows`) as integers; a
      value that rounds to zero without its minus sign; a mapping as ``key: value, …``.
    - p-value columns (named ``p`` or starting with ``p_``) show as :func:`format_p` prints them.
    - Link columns (:data:`LINK_COLUMNS`) become ``<a href>`` links when the value is an
      http(s) URL (a list of them: one link each); any other text stays plain escaped text.
    - Columns with one value in every row (unless listed in ``keep``, or ``fold_constant`` is
      False: a table of scores, where one score for every system is a result) are removed and
      said once above the table; missing values show as "—".
    - ``flag_column``: its cells are coloured by ``flags`` (value -> ``good``, ``bad`` or
      ``muted``; default True -> good, False -> bad).
    - More than ``max_columns`` columns: split into several tables, one below the other in reading
      order, each repeating the leading (index) columns, so a wide table fits a 1400 px page.
    - No rows: the title and "none", never an empty table (or empty parts of one).
    """
    head = [_STYLE, f'<div class="instir-present {NO_MATH}">',
            f'<div class="title">{escape_text(title)}</div>' if title else ""]
    if not len(frame):
        return HTML("".join([*head, *(f'<p class="note">{escape_text(n)}</p>' for n in notes),
                             '<p class="note">none</p>', "</div>"]))
    shown = _flatten(frame)
    leading = [c for c in shown.columns[: _n_index_columns(frame)]]
    links = [c for c in LINK_COLUMNS if c in shown.columns]
    pvals = [c for c in shown.columns if c == "p" or str(c).startswith("p_")]
    notes = list(notes)
    whole = [c for c in shown.columns if _whole_numbers(shown[c])]
    if len(shown) > 1 and fold_constant:
        constant = [c for c in shown.columns if c not in keep and c != flag_column and _is_constant(shown[c])]
        if constant and len(constant) < len(shown.columns):
            said = "; ".join(f"{c}: {_plain(shown[c].iloc[0], c, scaled, scale, digits, other_digits, pvals, whole)}"
                             for c in constant)
            notes.insert(0, f"Same in every row — {said}")
            shown = shown.drop(columns=constant)
            leading = [c for c in leading if c in shown.columns]
    headers = {c: (f"{c} ×{scale:g}" if c in scaled and scale != 1 else str(c)) for c in shown.columns}
    flags = {True: "good", False: "bad"} if flags is None else flags
    body_columns = [c for c in shown.columns if c not in leading]
    chunk = max(1, max_columns - len(leading))
    parts = head + [f'<p class="note">{escape_text(n)}</p>' for n in notes]
    chunks = [body_columns[i:i + chunk] for i in range(0, len(body_columns), chunk)] or [[]]
    for i, columns in enumerate(chunks):
        if len(chunks) > 1:
            parts.append(f'<p class="note">part {i + 1} of {len(chunks)}</p>')
        cols = leading + columns
        rows = ["<tr>" + "".join(f"<th>{escape_text(headers[c])}</th>" for c in cols) + "</tr>"]
        for record in shown[cols].itertuples(index=False):
            cells = []
            for c, value in zip(cols, record):
                cls = []
                if _is_number(value) and c not in links:
                    cls.append("num")
                if c == flag_column and isinstance(value, (str, bool, np.bool_)) and value in flags:
                    cls.append(flags[value])
                plain = "" if c in links else cut(_plain(value, c, scaled, scale, digits, other_digits, pvals, whole),
                                                   max_chars)
                if len(plain) > 40:
                    cls.append("prose" if len(plain) > 150 else "long")
                text = _link(value) if c in links else escape_text(plain)
                attr = f' class="{" ".join(cls)}"' if cls else ""
                cells.append(f"<td{attr}>{text}</td>")
            rows.append("<tr>" + "".join(cells) + "</tr>")
        parts.append(f'<table>{"".join(rows)}</table>')
    parts.append("</div>")
    return HTML("".join(parts))


def integer_rows(frame: pd.DataFrame, labels: Iterable[object], level: str | int | None = None) -> pd.DataFrame:
    """``frame`` with the rows whose index (or index ``level``) is in ``labels`` as integers:
    for a table of one statistic per row (``describe().T``, the judge's agreement), whose float
    columns would show a count such as ``pairs`` as ``15.000``; :func:`present` shows integer
    values without decimals, the other rows keep theirs."""
    index = frame.index if level is None else frame.index.get_level_values(level)
    rows = index.isin(list(labels))
    out = frame.astype(object)
    out.loc[rows] = out.loc[rows].map(lambda v: v if _missing(v) or not _is_number(v) else int(v))
    return out


def format_fixed(value: object, digits: int = 1) -> str:
    """A number at ``digits`` decimals as the reports print it: ``0.0``, never ``-0.0``, for what
    rounds to zero; "—" when missing."""
    if _missing(value):
        return MISSING
    text = f"{float(value):.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def format_p(value: object) -> str:
    """A p-value as printed in the reports: ``<0.001`` below 0.001, else three decimals, or more where three
    would put it on the other side of :data:`~instir.metrics.stats.SIGNIFICANCE_LEVEL` (0.01027 is ``0.0103``,
    not ``0.010`` beside "significant: no")."""
    if _missing(value):
        return MISSING
    p = float(value)
    if p < 0.001:
        return "<0.001"
    from instir.metrics.stats import SIGNIFICANCE_LEVEL  # here: the stats module brings tqdm, the tour imports none

    digits = 3
    while digits < 8 and (float(f"{p:.{digits}f}") <= SIGNIFICANCE_LEVEL) != (p <= SIGNIFICANCE_LEVEL):
        digits += 1
    return f"{p:.{digits}f}"


def small_n_warning(n: Iterable[object], what: str = "queries", threshold: int = SMALL_N) -> str | None:
    """A warning to print under a significance test when some comparison rests on at most
    ``threshold`` paired units (``what``), or None when every comparison has more."""
    counts = [int(v) for v in n if not _missing(v)]
    if not counts or min(counts) > threshold:
        return None
    return (f"Caution: some tests rest on only {min(counts)} {what} (≤ {threshold}); with so few, p-values and "
            "confidence intervals are rough and 'significant' can easily flip with more data.")


def _flatten(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.copy()
    if isinstance(out.columns, pd.MultiIndex):
        out.columns = [" · ".join(str(p) for p in parts if str(p) != "") for parts in out.columns]
    else:
        out.columns = [str(c) for c in out.columns]
    if _n_index_columns(frame):
        names = [str(n) if n is not None else ("index" if out.index.nlevels == 1 else f"index {i}")
                 for i, n in enumerate(out.index.names)]
        out.index = out.index.set_names(names)
        out = out.reset_index()
    else:
        out = out.reset_index(drop=True)
    return out


def _n_index_columns(frame: pd.DataFrame) -> int:
    index = frame.index
    if index.nlevels == 1 and index.name is None and pd.api.types.is_integer_dtype(index):
        return 0  # row numbers (also after a filter), not data
    return index.nlevels


def _missing(value: object) -> bool:
    if value is None or (isinstance(value, str) and value.strip() == ""):
        return True
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _whole_numbers(column: pd.Series) -> bool:
    """Whether a column holds counts (integer dtype, or Python/numpy ints in an object column),
    which show without decimals; a float column keeps its decimals even when every value is
    whole (a score of 44.0 stays 44.0 beside 44.5)."""
    if pd.api.types.is_integer_dtype(column):
        return True
    values = [v for v in column if not _missing(v)]
    return bool(values) and all(isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
                                for v in values)


def _is_constant(column: pd.Series) -> bool:
    values = [_key(v) for v in column]
    return len(set(values)) == 1


def _key(value: object) -> object:
    return MISSING if _missing(value) else (value if isinstance(value, (str, int, float, bool)) else repr(value))


def _plain(value: object, column: str, scaled: Sequence[str], scale: float, digits: int, other_digits: int,
           pvals: Sequence[str], whole: Sequence[str] = ()) -> str:
    """One cell as plain text (escaped later)."""
    if _missing(value):
        return MISSING
    if column in pvals:
        return format_p(value)
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if _is_number(value):
        if column in scaled:
            return format_fixed(float(value) * scale, digits)
        if column in whole or isinstance(value, (int, np.integer)):
            return str(int(value))
        return format_fixed(float(value), other_digits)
    if isinstance(value, (list, tuple, set)):
        return ", ".join(str(v) for v in value) or MISSING
    if isinstance(value, Mapping):
        return ", ".join(f"{k}: {v}" for k, v in value.items()) or MISSING
    return str(value)




def _link(value: object) -> str:
    """An ``<a href>`` for an http(s) URL (a list of values: each, comma-separated); anything
    else as escaped text (never a link)."""
    if isinstance(value, (list, tuple)):
        return ", ".join(_link(v) for v in value) or MISSING
    if _missing(value):
        return MISSING
    text = str(value).strip()
    url = safe_url(text)
    if url:
        shown = cut(url.split("://", 1)[1], _LINK_CHARS)
        return (f'<a href="{escape_text(url)}" title="{escape_text(url)}" target="_blank" '
                f'rel="noopener noreferrer">{escape_text(shown)}</a>')
    return escape_text(text)


def docs_table(docs: Iterable[Doc], max_chars: int | None = 300, title: str = "") -> HTML:
    """Documents (id, title, text) as a :func:`present` table, texts cut to ``max_chars``."""
    frame = pd.DataFrame([(d.id, d.title, d.text) for d in docs], columns=["id", "title", "text"])
    return present(frame, title, keep=list(frame.columns), max_chars=max_chars)


def queries_table(queries: Iterable[Query], max_chars: int | None = 300, title: str = "") -> HTML:
    """Query instances (id, group, level, instruction, query) as a :func:`present` table."""
    rows = [(q.id, q.group, q.level, q.instruction, q.query) for q in queries]
    frame = pd.DataFrame(rows, columns=["id", "group", "level", "instruction", "query"])
    return present(frame, title, keep=list(frame.columns), max_chars=max_chars)
