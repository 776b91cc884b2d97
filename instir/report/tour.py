"""The glue of the guided tour (``notebooks/00_tour.ipynb``), a class on instruction-following
retrieval: what the tour computes by hand stays in its cells; what is only plumbing is here, so
that tests reach it: the real release beside the bundled sample, ranking a typed query, the
rankings side by side, and the exercises' check cells, which answer "not yet" (never an
exception) to a placeholder or a wrong answer.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from instir.benchmarks.types import Benchmark, Query
from instir.report.html import HTML, NO_MATH, cut, escape_text, has_widgets
from instir.report.tables import present

if TYPE_CHECKING:
    from instir.formatting import Template
    from instir.retrieval.search import Retriever

#: The environment that turns every progress bar off: the kit's (``instir.progress.ENV_VAR``) and
#: the libraries' (``instir.progress.QUIET_BARS``). Spelled out here because tqdm and the Hugging
#: Face Hub read theirs when first imported, and importing :mod:`instir.progress` imports tqdm.
QUIET_ENV = {"INSTIR_PROGRESS": "0", "TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}

#: the mark of an instance's own relevant document in :func:`side_by_side`
TARGET = "★"
#: the tour's InstructIR query group: MS MARCO query 1078446, "wine cabinets definition"
GROUP = "1078446"


def quiet_kernel() -> None:
    """Progress bars off in this process (every step of the tour takes seconds), set before tqdm
    and the Hugging Face Hub are imported (importing ``instir`` already silenced tqdm's "IProgress
    not found" warning of a kernel without ipywidgets)."""
    os.environ.update(QUIET_ENV)


# ------------------------------------------------------------------ the release and the sample

#: where a source checkout keeps the InstructIR authors' GitHub release (queries and qrels, no corpus)
RELEASE_DIR = Path(__file__).resolve().parents[2] / "data" / "instructir-github"


def release_folder() -> Path | None:
    """:data:`RELEASE_DIR` when it holds the release's queries (a source checkout), else None
    (an installed kit ships only the bundled sample)."""
    return RELEASE_DIR if (RELEASE_DIR / "only_instruction_queries.jsonl").is_file() else None


def shorten(text: str, limit: int = 100) -> str:
    """``text`` cut to ``limit`` characters and an ellipsis when longer (:func:`instir.report.html.cut`; a title,
    not a quotation)."""
    return cut(text, limit)


def release_group(folder: str | Path, group: str) -> pd.DataFrame:
    """One query group of the InstructIR authors' GitHub release in ``folder``
    (``only_instruction_queries.jsonl``, ``qrels/test.tsv``): columns ``qid``, ``query``
    (``metadata.origin_query``), ``instruction`` and ``target`` (its relevant passage id), in file
    order. The group of an instance is its id before the last ``_``."""
    folder = Path(folder)
    rows = []
    with open(folder / "only_instruction_queries.jsonl", encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            if record["_id"].rsplit("_", 1)[0] == group:
                rows.append({"qid": record["_id"], "query": record["metadata"]["origin_query"],
                             "instruction": record["text"]})
    qrels = pd.read_csv(folder / "qrels" / "test.tsv", sep="\t", dtype=str)
    targets = qrels[qrels["score"].astype(int) > 0].groupby("qid")["pid"].agg(lambda ids: ",".join(sorted(ids)))
    frame = pd.DataFrame(rows, columns=["qid", "query", "instruction"])
    return frame.assign(target=frame["qid"].map(targets))


def origin_targets(benchmark: Benchmark, doc_ids: Iterable[str]) -> dict[str, str]:
    """``{doc id: metadata.origin_target._id}`` of these documents of a benchmark read from
    JSON lines (the Hugging Face InstructIR corpus and the bundled sample keep the MS MARCO
    passage a target was rewritten from there); documents without one are left out."""
    wanted, found = set(doc_ids), {}
    for path in benchmark.corpus.paths:
        if path.suffix != ".jsonl":
            continue
        with open(path, encoding="utf-8") as lines:
            for line in lines:
                record = json.loads(line)
                origin = (record.get("metadata") or {}).get("origin_target") or {}
                if record.get("_id") in wanted and "_id" in origin:
                    found[record["_id"]] = str(origin["_id"])
    return found


def provenance(benchmark: Benchmark, release: pd.DataFrame) -> pd.DataFrame:
    """Each instance of a :func:`release_group` frame next to the benchmark's copy of it: whether
    the benchmark has it with the same query, instruction and target, and the MS MARCO passage
    its target document names as ``origin_target`` (the target id before the ``_``)."""
    qids = list(release["qid"])
    targets = {qid: ",".join(sorted(d for d, g in benchmark.qrels.get(qid, {}).items() if g > 0)) for qid in qids}
    origins = origin_targets(benchmark, (t for value in targets.values() for t in value.split(",") if t))
    rows = []
    for r in release.itertuples(index=False):
        q = benchmark.queries.get(r.qid)
        mine = targets[r.qid]
        rows.append({"qid": r.qid, "in sample": q is not None,
                     "same query": q is not None and q.query == r.query,
                     "same instruction": q is not None and q.instruction == r.instruction,
                     "target (release)": r.target, "target (sample)": mine or None,
                     "same target": mine == r.target,
                     "origin_target": origins.get(mine),
                     "origin = target's MS MARCO id": origins.get(mine) == str(r.target).rsplit("_", 1)[0]})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ ranking


def template_for(benchmark: Benchmark, retriever: Retriever) -> Template:
    """The template ``retriever`` reads on ``benchmark``: its family's for the retriever's model family
    (:func:`instir.retrieval.template_for`, imported on the call: importing this module must not import tqdm
    before :func:`quiet_kernel` sets its environment)."""
    from instir.retrieval import template_for as chosen

    return chosen(benchmark, retriever)


def judgments_file(out_dir: str | Path) -> Path:
    """Where the tour keeps its judgments: ``tour/judgments.sqlite`` in the report folder ``out_dir``."""
    from instir.report.layout import report_layout

    return report_layout(out_dir).root / "tour" / "judgments.sqlite"


def only(benchmark: Benchmark, qids: Iterable[str]) -> Benchmark:
    """The benchmark with only these instances (and their qrels), on the same corpus object, so
    retrievers reuse what they built for it."""
    keep = list(qids)
    return replace(benchmark, queries={q: benchmark.queries[q] for q in keep},
                   qrels={q: benchmark.qrels[q] for q in keep if q in benchmark.qrels})


def rank(benchmark: Benchmark, retriever: Retriever, template: str | None = None, k: int = 10) -> pd.DataFrame:
    """The top ``k`` of every instance of ``benchmark`` (:func:`instir.retrieval.retrieve`; no run
    file is written, the retriever's caches under the instir home are used as always; ``template``
    None: the retriever's instructed template on this benchmark, ``"query-only"``: the bare query):
    columns ``qid``, ``rank``, ``docid``, ``score``."""
    from instir.retrieval import retrieve

    run = retrieve(benchmark, retriever, template, k=k)
    return run.df[["qid", "rank", "docid", "score"]].reset_index(drop=True)


def rank_text(benchmark: Benchmark, retriever: Retriever, query: str, instruction: str = "", k: int = 10,
              template: str | None = None, qid: str = "typed") -> pd.DataFrame:
    """The top ``k`` of one query with an instruction of your own on ``benchmark``'s corpus, with
    the template the retriever gets on this benchmark (an empty instruction: the bare query)."""
    typed = Query(qid, query, instruction.strip())
    return rank(replace(benchmark, queries={qid: typed}, qrels={}), retriever, template, k)


def marks_for(benchmark: Benchmark, qids: Sequence[str], focus: str | None = None) -> dict[str, str]:
    """Labels of the relevant documents of these instances for :func:`side_by_side`: the focus
    instance's own are ``★``, the others' ``target of <qid>`` (the qid's last part)."""
    marks: dict[str, str] = {}
    for qid in qids:
        for docid, grade in benchmark.qrels.get(qid, {}).items():
            if grade > 0:
                own = qid == focus or (focus is None and len(qids) == 1)
                marks.setdefault(docid, TARGET if own else f"target of _{qid.rsplit('_', 1)[-1]}")
    return marks


def side_by_side(lists: Mapping[str, pd.DataFrame], qid: str, marks: Mapping[str, str], k: int = 5) -> pd.DataFrame:
    """The top ``k`` of one instance in several runs, one column per run (``rank`` first), each
    cell the document id with its mark (``marks``: doc id → label, e.g. :func:`marks_for`)."""
    columns = {"rank": list(range(1, k + 1))}
    for label, frame in lists.items():
        part = frame[(frame["qid"] == qid) & (frame["rank"] <= k)].sort_values("rank")
        cells = {int(r): d + (f" {marks[d]}" if d in marks else "") for r, d in zip(part["rank"], part["docid"])}
        columns[label] = [cells.get(r, "") for r in columns["rank"]]
    return pd.DataFrame(columns)


def target_ranks(lists: Mapping[str, pd.DataFrame], qrels: Mapping[str, Mapping[str, int]],
                 qids: Sequence[str]) -> pd.DataFrame:
    """Per instance, the rank of its best-placed relevant document in each run (missing: not
    retrieved at that depth): columns ``qid``, then one per run."""
    rows = []
    for qid in qids:
        relevant = {d for d, g in qrels.get(qid, {}).items() if g > 0}
        row: dict[str, object] = {"qid": qid}
        for label, frame in lists.items():
            hits = frame[(frame["qid"] == qid) & frame["docid"].isin(relevant)]["rank"]
            row[label] = int(hits.min()) if len(hits) else None
        rows.append(row)
    return pd.DataFrame(rows).astype({label: "Int64" for label in lists})


class Playground:
    """Type an instruction, see how each retriever ranks ``query`` + that instruction on the
    benchmark's corpus (top ``k`` side by side, ``marks`` on the documents, ``note`` under the
    title). Displayed, it is an ipywidgets text box above the rankings (updated on Enter) where
    ipywidgets is importable, and it always carries the rankings of ``example`` as static HTML,
    which the HTML report (no kernel) and a kernel without ipywidgets show."""

    def __init__(self, benchmark: Benchmark, retrievers: Mapping[str, Retriever], query: str, example: str, *,
                 marks: Mapping[str, str] | None = None, note: str = "", k: int = 5):
        self.benchmark, self.retrievers, self.query, self.example = benchmark, dict(retrievers), query, example
        self.marks, self.note, self.k = dict(marks or {}), note, k
        self._widget = None
        self._shown: dict[str, HTML] = {}

    def table(self, instruction: str) -> pd.DataFrame:
        """The top ``k`` of every retriever for ``query`` + ``instruction``."""
        lists = {name: rank_text(self.benchmark, r, self.query, instruction, self.k)
                 for name, r in self.retrievers.items()}
        return side_by_side(lists, "typed", self.marks, self.k)

    def html(self, instruction: str) -> HTML:
        """:meth:`table` as the report's table, titled with the query and the instruction."""
        if instruction not in self._shown:
            said = instruction.strip() or "(none: the bare query)"
            self._shown[instruction] = present(self.table(instruction), f"Query: {self.query} · instruction: {said}",
                                               notes=[self.note] if self.note else [], max_chars=None)
        return self._shown[instruction]

    def widget(self):
        """The ipywidgets view (a text box above the rankings), made once."""
        if self._widget is None:
            import ipywidgets as w

            box = w.Text(value=self.example, description="instruction", continuous_update=False,
                         layout=w.Layout(width="95%"))
            out = w.HTML(str(self.html(self.example)))

            def update(change) -> None:
                try:
                    out.value = str(self.html(change["new"]))
                except Exception as err:  # shown in place: a widget callback has no cell to fail in
                    out.value = f"<pre>{escape_text(err)}</pre>"

            box.observe(update, names="value")
            self._widget = w.VBox([box, out])
        return self._widget

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        bundle = {}
        if has_widgets():
            bundle = dict(self.widget()._repr_mimebundle_(include=include, exclude=exclude) or {})
        bundle["text/html"] = str(self.html(self.example))
        bundle["text/plain"] = f"Playground: {self.query} (example instruction: {self.example})"
        return bundle


# ------------------------------------------------------------------ exercises


@dataclass(frozen=True)
class Verdict:
    """What an exercise's check cell says: ``ok`` (None: no answer yet) and why."""

    ok: bool | None
    message: str

    def __str__(self) -> str:
        return ("correct: " if self.ok else "not yet: ") + self.message

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        colour = "#d4edda" if self.ok else "#fff3cd"
        return (f"<div class='{NO_MATH}' style='background:{colour}; padding:0.4em 0.8em; border-radius:4px'>"
                f"<strong>{'correct' if self.ok else 'not yet'}:</strong> {escape_text(self.message)}</div>")


def _number(answer: object, where: str) -> float | Verdict:
    """The answer as a number; else the verdict: put an answer in ``where`` (the placeholder ``None`` or empty
    text), or it is no number (``"1/log2(4)"``, ``[0.5]``, NaN: written as a number, it is checked)."""
    if answer is None or (isinstance(answer, str) and not answer.strip()):
        return _unanswered(where)
    try:
        value = float(answer) if not isinstance(answer, bool) else math.nan
    except (TypeError, ValueError):
        value = math.nan
    if math.isnan(value):
        return Verdict(False, f"{answer!r} is not a number: write the value itself, such as 0.25 (or 25 on the ×100 "
                              "scale the reports print)")
    return value


def _near_miss(value: float, right: float) -> str:
    """The hint for an answer that is the right number rounded too far (``0.6309`` given as ``0.63``
    or ``63``), else ``""``."""
    if any(math.isclose(value, scale * right, abs_tol=scale * 6e-3) for scale in (1, 100)):
        return (f"close, but rounded too far: it is {right:.4f} (×100: {100 * right:.2f}), and the check allows "
                "±0.0005 (±0.05 on the ×100 scale)")
    return ""


def _mistake(value: float, mistakes: Sequence[tuple[float, str]]) -> str:
    """The hint of the known mistake ``value`` is, also rounded to two decimals or on the ×100
    scale (``0.63`` for 1/log2(3)), else ``""``."""
    for wrong, hint in mistakes:
        for scale in (1, 100):
            if math.isclose(value, scale * float(wrong), abs_tol=scale * 6e-3):
                return hint
    return ""


def _on_scale(value: float, right: float) -> bool:
    """Whether ``value`` is ``right`` as a number or on the ×100 scale the reports print."""
    return math.isclose(value, right, abs_tol=5e-4) or math.isclose(value, 100 * right, abs_tol=5e-2)


def _unanswered(where: str) -> Verdict:
    return Verdict(None, f"put your answer in {where} and run this cell again.")


def check_ndcg_single_target(answer: object, rank: int, k: int = 10) -> Verdict:
    """nDCG@k of a list whose only relevant document (grade 1) is at ``rank``: 1/log2(rank + 1)."""
    value = _number(answer, "`answer_1`")
    if isinstance(value, Verdict):
        return value
    right = 1 / math.log2(rank + 1) if rank <= k else 0.0
    if _on_scale(value, right):
        return Verdict(True, f"DCG = 1/log2({rank} + 1) = {right:.4f}; the ideal DCG of one relevant document is "
                             f"1/log2(2) = 1, so nDCG@{k} = {right:.4f}.")
    hints = [(1 / rank, "that is the reciprocal rank (RR), not nDCG"),
             (1 / math.log2(rank) if rank > 1 else math.inf,
              "off by one: the discount at rank r is log2(r + 1), so rank 1 has log2(2) = 1")]
    hint = _near_miss(value, right) or _mistake(value, hints)
    return Verdict(False, f"{value:g} is not it{': ' + hint if hint else ''}. Discount at rank r: 1/log2(r + 1).")


def check_top_document(instruction: object, benchmark: Benchmark, retriever: Retriever, query: Query) -> Verdict:
    """Whether ``query.query`` + ``instruction`` puts another document first than the bare query
    does, with the retriever's template on ``benchmark``."""
    if not isinstance(instruction, str) or not instruction.strip():
        return _unanswered("`my_instruction` (a sentence of your own)")
    bare = rank_text(benchmark, retriever, query.query, "", k=1)
    typed = rank_text(benchmark, retriever, query.query, instruction, k=1)
    before = bare["docid"].iloc[0] if len(bare) else None
    after = typed["docid"].iloc[0] if len(typed) else None
    targets = {d for d, g in benchmark.qrels.get(query.id, {}).items() if g > 0}
    others = [qid for qid in benchmark.groups().get(query.group, []) if qid != query.id
              and benchmark.qrels.get(qid, {}).get(after, 0) > 0]
    where = (f" It is the target of {query.id}." if after in targets else
             f" A near miss: it is the target of {', '.join(others)} (another person's instruction in the same "
             f"group), not of {query.id}; say what only {query.id}'s target says." if others else
             f" A near miss: it is not the target of {query.id}; the instruction moved the list, not yet to its "
             "target (look at what the target says that this one does not).")
    if after != before:
        return Verdict(True, f"the top document is now {after} (with the bare query: {before}).{where}")
    return Verdict(False, f"the top document is still {before}, as with the bare query: name something the "
                          "passages you want say and the current top one does not.")


#: why a family gets its template, for :func:`check_template`
WHY_TEMPLATE = {
    "e5-mistral": "E5-mistral-7b-instruct was trained with 'Instruct: <task>\\nQuery: <query>' prompts, so the "
                  "InstructIR authors put the user's instruction where the task goes; documents get no prompt. "
                  "Plain encoders and BM25 get 'instruction [SEP] query' instead (instir.formatting.family_of_model "
                  "tells the family from the model id).",
}


def check_template(answer: object, family: str = "e5-mistral", benchmark: str = "instructir") -> Verdict:
    """Whether ``answer`` names the template :func:`instir.formatting.default_template` gives the
    family on the benchmark (its name, or its query format string)."""
    from instir.formatting import default_template

    if not isinstance(answer, str) or not answer.strip():
        return _unanswered("`answer_4` (a template name)")
    template = default_template(family, benchmark)
    if answer.strip() == template.query or answer.strip().lower() == template.name:
        return Verdict(True, f"{template.name}: query {template.query!r}, documents {template.doc!r}. Why: the kit "
                             f"gives each model family the text the authors' code gave it ({template.source}). "
                             + WHY_TEMPLATE.get(family, template.description))
    return Verdict(False, f"{answer.strip()!r} is not the template of {family} on {benchmark}: look at "
                          "instir.formatting.default_template and the family of the model.")


def robustness_exercise() -> pd.DataFrame:
    """Exercise 3's per-instance table: nDCG@10 of eight instances in three query groups."""
    return pd.DataFrame({"qid": ["A_1", "A_2", "A_3", "B_1", "B_2", "C_1", "C_2", "C_3"],
                         "group": ["A", "A", "A", "B", "B", "C", "C", "C"],
                         "nDCG@10": [1.0, 0.631, 0.5, 1.0, 1.0, 0.0, 0.431, 1.0]})


def check_robustness(answer: object, table: pd.DataFrame, value: str = "nDCG@10") -> Verdict:
    """Robustness of a per-instance ``table`` (columns ``qid``, ``group``, ``value``) as the
    kit computes it (:func:`instir.metrics.robustness.robustness`)."""
    from instir.metrics.robustness import robustness

    number = _number(answer, "`answer_3`")
    if isinstance(number, Verdict):
        return number
    per_query = table.rename(columns={value: "value"}).assign(measure=value)[["qid", "measure", "value"]]
    right = float(robustness(per_query, dict(zip(table["qid"], table["group"])))["value"].iloc[0])
    if _on_scale(number, right):
        scale = ("" if math.isclose(number, right, abs_tol=5e-4)
                 else f" ({number:g} on the ×100 scale the reports print)")
        return Verdict(True, f"the minima per group average to {right:.4f}{scale}.")
    groups = table.groupby("group")[value]
    mistakes = [(table[value].mean(), f"that is the mean over instances ({value}), not over group minima"),
                (groups.max().mean(), "that averages each group's best instance; Robustness takes the worst"),
                (groups.mean().mean(), "that averages each group's mean; Robustness takes each group's minimum")]
    hint = _near_miss(number, right) or _mistake(number, mistakes)
    return Verdict(False, f"{number:g} is not it{': ' + hint if hint else ''}.")


#: the choices of the tour's InstFol exercise, and the right one
INSTFOL_CHOICES = {
    "a": "the judge gives every passage of such a retriever 0",
    "b": "its instructed and query-only top 20 are the same list, judged against the same instruction, so "
         "S_inst = S_q and the gain (S_inst - S_q) / (3 - S_q) is 0",
    "c": "InstFol only counts passages that are relevant in the qrels",
}
INSTFOL_ANSWER = "b"


def check_instfol_zero(answer: object) -> Verdict:
    """The InstFol exercise: one of :data:`INSTFOL_CHOICES`."""
    if not isinstance(answer, str) or answer.strip().lower() not in INSTFOL_CHOICES:
        return _unanswered("`answer_5` (one of " + ", ".join(f"'{c}'" for c in INSTFOL_CHOICES) + ")")
    choice = answer.strip().lower()
    if choice == INSTFOL_ANSWER:
        return Verdict(True, INSTFOL_CHOICES[choice] + ". Its absolute judge scores can be high or low: InstFol "
                                                       "measures only what the instruction changed.")
    return Verdict(False, f"({choice}) is not why: InstFol compares two lists of the same retriever; what is "
                          "the same in both when the retriever ignores the instruction?")


def check_pmrr_change(answer: object, r_og: int = 2, r_new: int = 5) -> Verdict:
    """The p-MRR exercise: one changed document's contribution when it moves from rank ``r_og``
    (original instruction) to ``r_new`` (changed), by the kit's own arithmetic (mteb's)."""
    from instir.metrics.pmrr import rank_score

    value = _number(answer, "`answer_6` (a number)")
    if isinstance(value, Verdict):
        return value
    right = float(rank_score(np.array([r_og]), np.array([r_new]))[0])
    if _on_scale(value, right):
        moved = "moved down" if r_new > r_og else "moved up or stayed"
        return Verdict(True, f"it {moved} ({r_og} → {r_new}): {right:.4f}"
                             + (f" = 1 − {r_og}/{r_new}, positive." if r_new > r_og else "."))
    hints = [(r_new / r_og - 1, "that is the moved-up formula, R_new / R_og − 1; this document moved down"),
             (-right, "right size, wrong sign: moving down is positive"), (r_og / r_new, "that is R_og / R_new alone")]
    hint = _near_miss(value, right) or _mistake(value, hints)
    return Verdict(False, f"{value:g} is not it{': ' + hint if hint else ''}. Down: 1 − R_og / R_new.")


#: the answer key's instruction for exercise 2: it puts the target of ``1078446_2`` first for BM25,
#: where the same request phrased with "homeowner" and "dining area" ranks near-miss 9000043 first
TOP_DOCUMENT_EXAMPLE = "compact wine cabinet types with built-in temperature control for a dining room"


def answer_key(benchmark: Benchmark | None = None, retriever: Retriever | None = None) -> pd.DataFrame:
    """The teacher's answers to the tour's exercises, each passed through its own check cell's
    function (``correct`` is the check's verdict, ``why`` its explanation), computed, not stored.
    ``benchmark`` / ``retriever``: exercise 2's (default: ``instructir-sample`` and BM25)."""
    from instir.benchmarks import load_benchmark
    from instir.formatting import default_template
    from instir.metrics.robustness import robustness
    from instir.retrieval.lexical import BM25Retriever

    benchmark = benchmark or load_benchmark("instructir-sample")
    retriever = retriever or BM25Retriever(show_progress=False)
    table = robustness_exercise()
    per_query = table.rename(columns={"nDCG@10": "value"}).assign(measure="nDCG@10")
    answers = {
        "1": (1 / math.log2(3 + 1), lambda a: check_ndcg_single_target(a, rank=3)),
        "2": (TOP_DOCUMENT_EXAMPLE,
              lambda a: check_top_document(a, benchmark, retriever, benchmark.queries[GROUP + "_2"])),
        "3": (round(float(robustness(per_query, dict(zip(table["qid"], table["group"])))["value"].iloc[0]), 4),
              lambda a: check_robustness(a, table)),
        "4": (default_template("e5-mistral", "instructir").name, check_template),
        "5": (INSTFOL_ANSWER, check_instfol_zero),
        "6": (1 - 2 / 5, check_pmrr_change),
    }
    rows = []
    for exercise, (answer, check) in answers.items():
        verdict = check(answer)
        rows.append({"exercise": exercise, "answer": answer, "correct": verdict.ok, "why": verdict.message})
    return pd.DataFrame(rows)
