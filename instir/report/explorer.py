"""An instance explorer for teaching: one query group at a time, every instruction of it, and
how each system's ranked list changes with the instruction.

Three layers, so tests can drive each one: the data (:class:`ExplorerData`, :class:`GroupView`),
escaped static HTML that needs no kernel and no script (:func:`render_group`), and the ipywidgets
:class:`Explorer` (the ``lab`` extra). The Explorer's display carries the widget *and*, as its
``text/html`` fallback, the static rendering of a few chosen groups (:func:`pick_groups`):
JupyterLab with a live kernel shows the widget, the batch reports (rendered without a widget
manager by the ``instir_offline`` template) the static rendering, so nothing has to guess the
environment.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from instir import atomic
from instir.benchmarks.types import Benchmark, Doc
from instir.errors import UserError, expect
from instir.report.html import HTML, NO_MATH, escape_text, has_widgets
from instir.report.layout import ReportLayout, read_runs_table, read_table, user_path

#: list depth shown per system
TOP_K = 10

_CSS = """<style>
.instir-explorer {font-family: system-ui, sans-serif; font-size: 13px;}
.instir-explorer table.ix-lists {border-collapse: collapse; margin: 4px 0 12px 0;}
.instir-explorer table.ix-lists th, .instir-explorer table.ix-lists td {border: 1px solid #ddd; padding: 2px 6px;
  text-align: left; vertical-align: top;}
.instir-explorer td.ix-rel {background: #d4edda; font-weight: bold;}
.instir-explorer .ix-min {color: #b00020; font-weight: bold;}
.instir-explorer .ix-judge {color: #555; font-size: 11px;}
.instir-explorer details summary {cursor: pointer;}
.instir-explorer .ix-instance {border-left: 3px solid #8ab; padding-left: 8px; margin: 10px 0;}
</style>"""


@dataclass
class GroupView:
    """Everything shown for one query group of one benchmark.

    ``instances``: qid, subset, level, instruction. ``relevant``: qid, docid, grade (grade > 0
    only). ``lists``: system, qid, rank, docid, grade (0 when not relevant), judged (the judge's
    weighted score of that passage for that instance, NaN where none is stored). ``scores``: system,
    qid, measure, value, group_min (True for the instance(s) that set the group's minimum,
    InstructIR's Robustness). ``instfol``: system, qid, instfol where notebook 04 judged the
    instance. ``docs``: the texts of every listed or relevant document (passage text on demand).
    """

    benchmark: str
    group: str
    query: str
    systems: list[str]
    measure: str
    k: int
    marks_minimum: bool
    instances: pd.DataFrame
    relevant: pd.DataFrame
    lists: pd.DataFrame
    scores: pd.DataFrame
    instfol: pd.DataFrame
    docs: dict[str, Doc] = field(default_factory=dict)
    judge: str | None = None


class ExplorerData:
    """The files notebooks 02-04 left in ``out_dir``, read once and kept.

    ``runs/runs.csv`` and the TREC runs it lists, ``metrics/per_query.parquet``,
    ``judge/instfol_instances.csv`` and ``judge/judgments.sqlite``, where they exist; the
    benchmarks are loaded with :func:`instir.benchmarks.load_benchmark` (``data_root`` as in the
    notebooks' parameters).
    """

    def __init__(self, out_dir: str | Path, data_root: str | Path | None = None):
        self.out = Path(out_dir)
        self.data_root = data_root or None
        layout = ReportLayout(self.out)
        for folder in (layout.runs, layout.metrics, layout.judge):  # sets a killed stage left half-replaced
            atomic.settle(folder)
        self.runs_table = read_runs_table(layout)
        self._loaded: dict[str, Benchmark] = {}
        self._runs: dict[str, pd.DataFrame] = {}
        self._docs: dict[str, dict[str, Doc]] = {}
        self.per_query = read_table(layout, layout.per_query) if layout.per_query.is_file() else None
        judged = layout.instfol_instances
        self.instfol = read_table(layout, judged, dtype={"qid": str}) if judged.is_file() else None
        self._cache = None
        self._judges: list[tuple[str, str]] = []
        if layout.judgments.is_file():
            from instir.judge.cache import JudgmentCache

            try:
                self._cache = JudgmentCache(layout.judgments)
            except UserError as err:  # another account's report, read-only to this one: shown without the scores
                warnings.warn(f"{err} (the explorer shows the passages without their judgments)", stacklevel=3)
            else:
                self._judges = self._cache.judges()
        if self.instfol is not None and {"judge_backend", "judge_model"} <= set(self.instfol.columns):
            # the passages' scores are the judge's whose InstFol is shown beside them, never another's in the cache
            shown = set(zip(self.instfol["judge_backend"].astype(str), self.instfol["judge_model"].astype(str)))
            self._judges = [judge for judge in self._judges if judge in shown]

    @property
    def benchmarks(self) -> list[str]:
        """Benchmarks with runs, in runs.csv order."""
        return list(dict.fromkeys(self.runs_table["benchmark"]))

    def systems(self, benchmark: str) -> list[str]:
        """Systems run on ``benchmark``: per retriever the instructed run, then its query-only run (a runs list without
        the retrieve stage's ``retriever`` and ``variant`` columns, one's own, lists its runs as instructed ones, in
        its order: as far as the kit can tell, they are)."""
        rows = self.runs_table[self.runs_table["benchmark"] == benchmark]
        if not {"retriever", "variant"} <= set(rows):
            return list(rows["system"])
        order = {retriever: i for i, retriever in enumerate(dict.fromkeys(rows["retriever"]))}
        ranked = sorted(zip(rows["retriever"], rows["variant"], rows["system"]),
                        key=lambda r: (order[r[0]], r[1] != "instructed"))
        return [system for _, _, system in ranked]

    def benchmark(self, name: str) -> Benchmark:
        """The benchmark behind ``name`` (loaded once)."""
        if name not in self._loaded:
            from instir.benchmarks import load_benchmark

            self._loaded[name] = load_benchmark(name, root=self.data_root)
        return self._loaded[name]

    def groups(self, benchmark: str) -> list[str]:
        """Query groups of a benchmark, in query order."""
        return list(self.benchmark(benchmark).groups())

    def run(self, benchmark: str, system: str) -> pd.DataFrame:
        """The run of ``system`` on ``benchmark`` as a (qid, docid, score, rank) frame."""
        key = f"{benchmark}\x00{system}"
        if key not in self._runs:
            from instir.retrieval.runs import read_run

            row = self.runs_table[(self.runs_table["benchmark"] == benchmark) & (self.runs_table["system"] == system)]
            if row.empty:
                raise KeyError(f"{self.out / 'runs' / 'runs.csv'}: no run of system {system!r} on {benchmark!r}")
            self._runs[key] = read_run(self.out / row["run_file"].iloc[0]).df
        return self._runs[key]

    def documents(self, benchmark: str, doc_ids: set[str]) -> dict[str, Doc]:
        """Documents by id; each corpus is streamed once per set of new ids and kept."""
        held = self._docs.setdefault(benchmark, {})
        missing = doc_ids - held.keys()
        if missing:
            held.update(self.benchmark(benchmark).corpus.get(missing))
        return {d: held[d] for d in doc_ids if d in held}

    def group(self, benchmark: str, group: str, systems: Sequence[str] | None = None, k: int = TOP_K) -> GroupView:
        """The :class:`GroupView` of one group: instances, relevant documents, each system's top
        ``k`` per instance with grades and stored judgments, the benchmark's first measure (p-MRR on FollowIR, else
        nDCG) and the group minimum."""
        from instir.metrics.scoring import default_measures

        bench = self.benchmark(benchmark)
        members = bench.groups().get(group)
        if not members:
            raise KeyError(f"{benchmark} has no query group {group!r}")
        systems = list(systems) if systems is not None else self.systems(benchmark)
        queries = [bench.queries[qid] for qid in members]
        instances = pd.DataFrame([(q.id, q.subset, q.level, q.instruction) for q in queries],
                                 columns=["qid", "subset", "level", "instruction"])
        instances["level"] = instances["level"].astype("Int64")
        relevant = pd.DataFrame([(q.id, d, g) for q in queries for d, g in bench.qrels.get(q.id, {}).items() if g > 0],
                                columns=["qid", "docid", "grade"])

        parts = []
        for system in systems:
            df = self.run(benchmark, system)
            top = df[df["qid"].isin(members) & (df["rank"] <= k)][["qid", "rank", "docid"]]
            parts.append(top.assign(system=system))
        lists = (pd.concat(parts, ignore_index=True) if parts
                 else pd.DataFrame(columns=["qid", "rank", "docid", "system"]))
        grades = {(q.id, d): g for q in queries for d, g in bench.qrels.get(q.id, {}).items()}
        lists["grade"] = [max(grades.get((qid, d), 0), 0) for qid, d in zip(lists["qid"], lists["docid"])]
        docs = self.documents(benchmark, set(lists["docid"]) | set(relevant["docid"]))
        lists["judged"], judge = self._judged(lists, bench, docs)

        measure = default_measures(benchmark)[0]
        scores = pd.DataFrame(columns=["system", "qid", "measure", "value"])
        if self.per_query is not None:
            pq = self.per_query[self.per_query["benchmark"] == benchmark]
            scores = pq[pq["qid"].isin(members) & pq["system"].isin(systems) & (pq["measure"] == measure)][
                ["system", "qid", "measure", "value"]].reset_index(drop=True)
        scores["group_min"] = scores["value"] == scores.groupby("system")["value"].transform("min")
        instfol = pd.DataFrame(columns=["system", "qid", "instfol"])
        if self.instfol is not None and len(self.instfol):
            part = self.instfol[(self.instfol["benchmark"] == benchmark) & self.instfol["qid"].isin(members)]
            instfol = part[["system", "qid", "instfol"]].reset_index(drop=True)
        return GroupView(benchmark=benchmark, group=group, query=queries[0].query, systems=systems, measure=measure,
                         k=k, marks_minimum=bool(bench.spec and bench.spec.report.get("group_minima")),
                         instances=instances,
                         relevant=relevant, lists=lists[["system", "qid", "rank", "docid", "grade", "judged"]],
                         scores=scores, instfol=instfol, docs=docs, judge=judge)

    def _judged(self, lists: pd.DataFrame, bench: Benchmark, docs: dict[str, Doc]) -> tuple[list[float], str | None]:
        """Weighted score of each listed passage for its instance, from the first judge in the
        cache that has any of them (repeat 0; where InstFol was judged, only its judge); NaN where none is stored,
        or the stored one lies outside its rubric's range (the judge would judge it again)."""
        nan = [float("nan")] * len(lists)
        if self._cache is None or not len(lists):
            return nan, None
        from instir.judge.cache import request_key, within_rubric
        from instir.judge.types import JudgeRequest

        requests = [None if docid not in docs else JudgeRequest.for_instance(bench.queries[qid], docs[docid])
                    for qid, docid in zip(lists["qid"], lists["docid"])]
        keys = [None if request is None else request_key(request) for request in requests]
        for backend, model in self._judges:
            found = self._cache.lookup(backend, model, [key for key in keys if key is not None])
            if any(j.ok for j in found.values()):
                # a stored score outside its rubric's range (an edited cache) is one the judge would judge again
                scores = [found[key].weighted if key in found and found[key].ok
                          and within_rubric(found[key], request.rubric) else float("nan")
                          for key, request in zip(keys, requests)]
                return scores, f"{backend} / {model}"
        return nan, None


def pick_groups(data: ExplorerData, n: int = 3) -> list[tuple[str, str]]:
    """``n`` (benchmark, group) pairs for the static rendering: one benchmark after another in
    runs.csv order, and in each the group whose instances' scores differ most for the first
    system (where instructions change the ranking most); the first group when no scores exist."""
    picks: list[tuple[str, str]] = []
    for benchmark in data.benchmarks:
        if len(picks) >= n:
            break
        groups = data.groups(benchmark)
        best = groups[0]
        if data.per_query is not None and len(groups) > 1:
            from instir.metrics.scoring import default_measures

            pq = data.per_query[data.per_query["benchmark"] == benchmark]
            first = data.systems(benchmark)[0]
            members = {qid: q.group for qid, q in data.benchmark(benchmark).queries.items()}
            part = pq[(pq["system"] == first) & (pq["measure"] == default_measures(benchmark)[0])]
            spread = (part.assign(group=part["qid"].map(members)).groupby("group")["value"]
                      .agg(lambda v: v.max() - v.min()))
            if len(spread):
                best = max(groups, key=lambda g: (spread.get(g, -1.0), -groups.index(g)))
        picks.append((benchmark, best))
    return picks


def _passage(doc: Doc | None, label: str, max_chars: int) -> str:
    """A document id that opens to its escaped text."""
    if doc is None:
        return f"{label} <em>(not in the corpus)</em>"
    title = f"<strong>{escape_text(doc.title)}</strong><br>" if doc.title else ""
    return (f"<details><summary>{label}</summary><div style='white-space: pre-wrap; max-width: 40em'>"
            f"{title}{escape_text(doc.text, max_chars)}</div></details>")


def render_group(view: GroupView, max_chars: int = 600) -> HTML:
    """Static, escaped HTML of a :class:`GroupView`: per instance its instruction, relevant
    documents and each system's top-k side by side (relevant ranks green, with the grade; the
    judge's weighted score where one is stored), the view's ``measure`` per system ×100 as every table of
    the reports prints it (and InstFol ×100 where judged) and, for InstructIR, the instance(s) that
    set the group's Robustness minimum."""
    out = [_CSS, f"<div class='instir-explorer {NO_MATH}'>",
           f"<h3>{escape_text(view.benchmark)} &middot; group {escape_text(view.group)}</h3>",
           f"<p><strong>Query:</strong> {escape_text(view.query)}</p>",
           f"<p>{len(view.instances)} instance(s); top {view.k} of {len(view.systems)} system(s); "
           "green = relevant (grade in brackets); "
           f"under each list its {escape_text(view.measure)} ×100, as in the tables"
           + ("; <span class='ix-min'>min</span> = the instance that sets the group's Robustness minimum"
              if view.marks_minimum else "")
           + (f"; small numbers = weighted score of judge {escape_text(view.judge)}" if view.judge else "")
           + ".</p>"]
    cells_at = {(s, q, int(r)): (d, int(g), j) for s, q, r, d, g, j in zip(
        view.lists["system"], view.lists["qid"], view.lists["rank"], view.lists["docid"], view.lists["grade"],
        view.lists["judged"])}
    scores = {(r.system, r.qid): (r.value, r.group_min) for r in view.scores.itertuples()}
    judged_instfol = {(r.system, r.qid): r.instfol for r in view.instfol.itertuples()}
    relevant = {qid: part for qid, part in view.relevant.groupby("qid", sort=False)}
    for inst in view.instances.itertuples():
        level = "" if pd.isna(inst.level) else f" &middot; level {int(inst.level)}"
        subset = f" &middot; {escape_text(inst.subset)}" if inst.subset else ""
        out.append(f"<div class='ix-instance'><h4>{escape_text(inst.qid)}{subset}{level}</h4>"
                   f"<p><strong>Instruction:</strong> {escape_text(inst.instruction) or '<em>(none)</em>'}</p>")
        rel = relevant.get(inst.qid)
        if rel is None:
            out.append("<p><strong>Relevant:</strong> <em>none</em></p>")
        else:
            items = [_passage(view.docs.get(d), f"<span class='ix-rel-id'>{escape_text(d)}</span> ({g})", max_chars)
                     for d, g in zip(rel["docid"], rel["grade"])]
            out.append("<div><strong>Relevant:</strong>" + "".join(items) + "</div>")
        head = "".join(f"<th>{escape_text(s)}</th>" for s in view.systems)
        foot = []
        for s in view.systems:
            value, is_min = scores.get((s, inst.qid), (None, False))
            cell = "" if value is None or pd.isna(value) else f"{escape_text(view.measure)} ×100 {value * 100:.1f}"
            if is_min and view.marks_minimum and cell:
                cell += " <span class='ix-min'>min</span>"
            fol = judged_instfol.get((s, inst.qid))
            if fol is not None and not pd.isna(fol):
                cell += f"<br>InstFol ×100 {fol * 100:.1f}"
            foot.append(f"<td>{cell}</td>")
        rows = []
        for rank in range(1, view.k + 1):
            cells = []
            for s in view.systems:
                hit = cells_at.get((s, inst.qid, rank))
                if hit is None:
                    cells.append("<td></td>")
                    continue
                docid, grade, judged = hit
                label = escape_text(docid) + (f" ({grade})" if grade > 0 else "")
                note = "" if pd.isna(judged) else f" <span class='ix-judge'>{judged:.2f}</span>"
                cls = " class='ix-rel'" if grade > 0 else ""
                cells.append(f"<td{cls}>{_passage(view.docs.get(docid), label, max_chars)}{note}</td>")
            rows.append(f"<tr><th>{rank}</th>{''.join(cells)}</tr>")
        out.append(f"<table class='ix-lists'><tr><th>rank</th>{head}</tr>{''.join(rows)}"
                   f"<tr><th></th>{''.join(foot)}</tr></table></div>")
    out.append("</div>")
    return HTML("".join(out))


def render_static(data: ExplorerData, picks: Sequence[tuple[str, str]], k: int = TOP_K) -> HTML:
    """The static stand-in for the widget: :func:`render_group` of each picked group
    (:func:`pick_groups`)."""
    intro = (f"<p><em>Instance explorer, static view of {len(picks)} group(s) (open this notebook in JupyterLab "
             "for the interactive explorer: <code>instir.explore(out_dir)</code>).</em></p>")
    return HTML(intro + "".join(render_group(data.group(b, g, k=k)) for b, g in picks))


#: the most rows the systems selector shows before it scrolls
SYSTEM_ROWS = 8


def _rows(systems: Sequence[str]) -> int:
    return max(2, min(len(systems), SYSTEM_ROWS))


class Explorer:
    """The interactive explorer: benchmark, group and systems selectors, the rendered group, and
    a passage selector that shows one document's text. Needs ipywidgets (the ``lab`` extra).

    Displayed, it carries the widget and the static rendering of :func:`pick_groups` as its
    ``text/html`` fallback (see the module docstring)."""

    def __init__(self, data: ExplorerData, k: int = TOP_K, static_groups: int = 3):
        import ipywidgets as w

        self.data, self.k, self.static_groups = data, k, static_groups
        self.view: GroupView | None = None
        self._updating = False
        first = data.benchmarks[0]
        self.benchmark = w.Dropdown(options=data.benchmarks, value=first, description="benchmark")
        self.group = w.Dropdown(options=data.groups(first), description="group")
        # as wide as the longest name (the default 300 px cuts "dense:sentence-transformers/all-Mi…",
        # and an instructed run from its query-only twin), one row per system up to SYSTEM_ROWS
        self.systems = w.SelectMultiple(options=data.systems(first), value=tuple(data.systems(first)),
                                        description="systems", rows=_rows(data.systems(first)),
                                        layout=w.Layout(width="max-content", max_width="100%"))
        self.passage = w.Dropdown(options=[], description="passage")
        self.output = w.HTML()
        self.text = w.HTML()
        self.widget = w.VBox([w.HBox([self.benchmark, self.group]), self.systems, self.output, self.passage, self.text])
        self.benchmark.observe(self._on_benchmark, names="value")
        self.group.observe(self._render, names="value")
        self.systems.observe(self._render, names="value")
        self.passage.observe(self._show_passage, names="value")
        self._render()

    def _on_benchmark(self, change=None) -> None:
        name = self.benchmark.value
        systems = self.data.systems(name)
        self._updating = True  # new options fire value changes; render once, at the end
        try:
            self.group.options = self.data.groups(name)
            self.systems.options = systems
            self.systems.value = tuple(systems)
            self.systems.rows = _rows(systems)
        finally:
            self._updating = False
        self._render()

    def _render(self, change=None) -> None:
        if self._updating:
            return
        self.view = self.data.group(self.benchmark.value, self.group.value, self.systems.value, k=self.k)
        self.output.value = str(render_group(self.view))
        ids = list(dict.fromkeys([*self.view.relevant["docid"], *self.view.lists["docid"]]))
        self.passage.options = ids
        self._show_passage()

    def _show_passage(self, change=None) -> None:
        docid = self.passage.value
        doc = self.view.docs.get(docid) if self.view is not None and docid else None
        if doc is None:
            self.text.value = ""
            return
        title = f"<strong>{escape_text(doc.title)}</strong><br>" if doc.title else ""
        self.text.value = (f"<div class='{NO_MATH}' style='white-space: pre-wrap'><code>{escape_text(docid)}</code><br>"
                           f"{title}{escape_text(doc.text)}</div>")

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        bundle = self.widget._repr_mimebundle_(include=include, exclude=exclude) or {}
        bundle["text/html"] = str(render_static(self.data, pick_groups(self.data, self.static_groups), k=self.k))
        return bundle


def explore(out_dir: str | Path, data_root: str | Path | None = None, *, k: int = TOP_K,
            static_groups: int = 3) -> Explorer | HTML:
    """The instance explorer on the files of ``out_dir`` (notebooks 02-04): an
    :class:`Explorer` widget when ipywidgets is installed (its display also carries the static
    rendering for reports without a kernel), else the static rendering of ``static_groups``
    groups. ``data_root``: where the real benchmarks live, as in the notebooks' parameters (both
    paths as :func:`instir.report.layout.user_path` reads them)."""
    expect(out_dir, (str, os.PathLike), "explore(out_dir, …)")
    expect(data_root, (str, os.PathLike, type(None)), "explore(…, data_root)")
    data = ExplorerData(user_path(out_dir), user_path(data_root) if data_root else None)
    if has_widgets():
        return Explorer(data, k=k, static_groups=static_groups)
    return render_static(data, pick_groups(data, static_groups), k=k)
