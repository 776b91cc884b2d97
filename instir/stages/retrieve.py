"""The retrieve stage (notebook 02, ``instir sweep``'s cells): every run of the plan
(:func:`instir.stages.plan.plan_runs`: each system on each benchmark, instructed and
query-only) written as a TREC run with its sidecar under ``runs/`` and listed in
``runs/runs.csv`` in the plan's order. Each system is built once per call and serves every
benchmark and variant, so its index or document vectors are built once per (benchmark, system,
document format); a run whose inputs did not change is read back
(:func:`instir.retrieval.retrieve`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from instir import atomic
from instir.benchmarks import catalog
from instir.benchmarks.types import Benchmark
from instir.errors import UsageError
from instir.formatting import get_template
from instir.parameters import depth, names
from instir.report.layout import RUN_KEY, ReportLayout, start_report
from instir.report.lock import STAGE_WRITER, writer_of
from instir.report.provenance import replacing
from instir.report.stage_writer import writes_stage
from instir.retrieval import Retriever, retrieve, template_for
from instir.retrieval.runs import Run, run_engine
from instir.stages.plan import PlannedRun, plan_runs
from instir.stages.request import system_specs

#: The columns of ``runs/runs.csv``, in order; ``written_by`` is the front end that wrote the row
#: (:func:`front_end`).
RUNS_COLUMNS = ["benchmark", "setting", "sample", "retriever", "system", "variant", "template", "engine", "k",
                "queries", "rows", "search_s", "elapsed_s", "reused", "run_file", "written_by"]


def listed_row(benchmark: Benchmark, system: str, run_file: str, variant: str = "instructed", **more: object) -> dict:
    """The ``runs.csv`` row of a run file made outside the kit's retrieval (``instir evaluate --run``,
    ``instir judge``): the benchmark, the system (also its retriever), the variant, the file and ``more``."""
    return {**dict.fromkeys(RUNS_COLUMNS), "benchmark": benchmark.name, "setting": benchmark.setting,
            "sample": benchmark.is_sample, "retriever": system, "system": system, "variant": variant,
            "reused": False, "run_file": run_file, **more}


def front_end(folder: str | Path) -> str:
    """The front end writing ``folder`` now, as ``runs.csv`` records it: ``notebooks`` for the
    notebooks (under ``instir run``, in the lab, under papermill) and a Python session, else the
    command holding the folder's lock (``instir sweep``, ``instir evaluate``, ``instir judge``)."""
    who = writer_of(folder)
    return "notebooks" if who in (None, "instir run", STAGE_WRITER) else who


def _key_text(value: object) -> str:
    """A key field as ``runs.csv`` holds it: ``""`` for none, ``20`` for a k of 20 or 20.0."""
    if value is None or (isinstance(value, float) and value != value) or value == "":
        return ""
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value)
    return str(int(number)) if number.is_integer() else str(value)


def refuse_dropping(layout: ReportLayout, keys: Sequence[tuple], writer: str) -> None:
    """Refuse, in one line naming what would be lost, a ``runs.csv`` of the runs ``keys``
    (:data:`RUN_KEY` + ``k``) written by ``writer`` that would drop runs another front end
    listed there: only the same run at the same ``k`` may replace another front end's row."""
    if not layout.runs_table.is_file():
        return
    try:
        listed = pd.read_csv(layout.runs_table, dtype=str, keep_default_na=False)
    except (OSError, ValueError, pd.errors.ParserError):
        return  # an unreadable list is rewritten; its runs' files stay in runs/
    if "written_by" not in listed:
        return  # a list written before the column existed
    kept = {tuple(map(_key_text, key)) for key in keys}
    foreign = listed[(listed["written_by"] != "") & (listed["written_by"] != writer)]
    lost = foreign[[tuple(map(_key_text, row)) not in kept
                    for row in foreign[[*RUN_KEY, "k"]].itertuples(index=False)]]
    if len(lost):
        by = ", ".join(dict.fromkeys(lost["written_by"]))
        shown = "; ".join(f"{r.system} {r.variant} on {r.benchmark}" + (f" (k {r.k})" if r.k else "")
                          for r in lost.head(3).itertuples())  # a run instir judge lists was read, at no k asked
        more = f" and {len(lost) - 3} more" if len(lost) > 3 else ""
        raise UsageError(f"{layout.runs_table} lists {len(lost)} run(s) written by {by} that {writer} would drop: "
                         f"{shown}{more}; write into another folder (--out / out_dir), or delete "
                         f"{layout.runs_table} to let them go")


def retrieve_planned(layout: ReportLayout, benchmark: Benchmark, planned: PlannedRun,
                     retriever: Retriever) -> tuple[dict, Run]:
    """Retrieve one planned run (``benchmark`` loaded in its setting) to its depth ``planned.k`` into
    ``layout.runs``, reusing a run with the same inputs; returns its ``runs.csv`` row and the run."""
    start = time.perf_counter()
    k = planned.k
    template = catalog.entry(planned.benchmark).family.variant_template(planned.variant)
    run = retrieve(benchmark, retriever, template, k=k, out_dir=layout.runs)
    row = {"benchmark": benchmark.name, "setting": benchmark.setting, "sample": benchmark.is_sample,
           "retriever": planned.system.name, "system": planned.label, "variant": planned.variant,
           "template": run.meta["template"]["name"], "engine": run_engine(run.meta), "k": k,
           "queries": run.df["qid"].nunique(), "rows": len(run.df),
           "search_s": run.meta["wall_time_s"], "elapsed_s": round(time.perf_counter() - start, 3),
           "reused": bool(run.meta.get("reused", False)),
           "run_file": Path(run.meta["path"]).resolve().relative_to(layout.root.resolve()).as_posix()}
    return row, run


def write_runs_table(layout: ReportLayout, rows: Sequence[dict]) -> pd.DataFrame:
    """``runs/runs.csv`` from the runs' rows, in the order given (the first system of each
    benchmark is the later stages' baseline), written atomically, each row marked with the
    front end writing it; refused when it would drop another front end's runs
    (:func:`refuse_dropping`); a list the kit did not leave as it is kept aside when replaced
    (:func:`instir.report.provenance.replacing`)."""
    writer = front_end(layout.root)
    table = pd.DataFrame(list(rows), columns=RUNS_COLUMNS)
    table["written_by"] = table["written_by"].astype(object).fillna(writer)
    refuse_dropping(layout, list(table[[*RUN_KEY, "k"]].itertuples(index=False, name=None)), writer)
    layout.runs.mkdir(parents=True, exist_ok=True)
    with replacing(layout.root, "runs"):
        atomic.write_frame(layout.runs_table, table)
    return table


@dataclass
class Retrieval:
    """What the retrieve stage did: ``runs`` (the rows of ``runs/runs.csv``), ``inputs`` (the
    first instance of each benchmark as each system's instructed and query-only templates
    format it) and ``summary`` (the benchmarks and their revisions, Markdown)."""

    runs: pd.DataFrame
    inputs: pd.DataFrame
    summary: str

    @property
    def timing(self) -> pd.DataFrame:
        """Seconds per retriever and benchmark (instructed + query-only), with totals."""
        return self.runs.pivot_table(index="retriever", columns="benchmark", values="elapsed_s", aggfunc="sum",
                                     margins=True, margins_name="total", sort=False)


def model_inputs(benchmark: Benchmark, name: str, retriever: Retriever) -> dict:
    """The first instance of ``benchmark`` as each variant's template for the system ``name`` formats it
    (``instructed text``, ``query-only text``, …; the template's name is recorded in every run)."""
    first = next(iter(benchmark.queries.values()))
    template = template_for(benchmark, retriever)
    spec = catalog.entry(benchmark.name).family
    texts = {f"{variant} text": str((get_template(named) if (named := spec.variant_template(variant)) else template)
                                    .format_query(first)) for variant in spec.variants}
    return {"benchmark": benchmark.name, "retriever": name, "template": template.name, **texts}


@writes_stage("02_retrieval")
def retrieve_runs(out_dir: str | Path, benchmarks: Sequence[str], systems: Sequence[str], *, k: int | None = None,
                  data_root: str | None = None) -> Retrieval:
    """The retrieve stage: every run of :func:`~instir.stages.plan.plan_runs` (``systems`` as
    :func:`instir.systems.specs.resolve_system` names them) into ``out_dir/runs/``, listed in
    ``runs/runs.csv`` in the plan's order. One system is built (its model loaded) at a time and
    serves every benchmark before the next is built, so a machine holds one model, and one BM25
    index, at a time. Each run's depth is ``k``, or without one its family's (the spec's ``depth``, else
    :data:`~instir.stages.plan.DEFAULT_DEPTH`; ``runs.csv`` says which). An empty ``systems``, a system given
    twice (as ``instir run`` refuses it: :func:`~instir.stages.request.system_specs`), and a ``k`` that is not a
    whole number from 1 to :data:`~instir.parameters.MAX_CUTOFF`, are refused before any work."""
    k = None if k is None else depth(k)
    if not names(systems, "systems"):
        raise UsageError("no system to run: parameters 'retrievers' and 'systems' are both empty (e.g. retrievers = "
                         "[\"bm25\"])")
    plan = plan_runs(benchmarks, system_specs(systems, "parameter 'retrievers' or 'systems'"), k=k)
    report = start_report(out_dir, benchmarks, data_root)
    # before any retrieval: a list that would drop another front end's runs fails in seconds
    refuse_dropping(report.layout, [(p.benchmark, p.setting, p.label, p.variant, p.k) for p in plan],
                    front_end(out_dir))
    rows: dict[str, dict] = {}
    inputs: dict[tuple[str, str], dict] = {}
    systems_in_order = {p.system.name: p.system for p in plan}
    for system in systems_in_order.values():
        retriever = system.factory()()
        for planned in (p for p in plan if p.system.name == system.name):
            bench = report.cache.get(planned.benchmark, planned.setting)
            if planned.setting == "instructed":
                inputs.setdefault((planned.benchmark, system.name), model_inputs(bench, system.name, retriever))
            rows[planned.run_id] = retrieve_planned(report.layout, bench, planned, retriever)[0]
        del retriever
    shown = [inputs[b, s] for b in report.benchmarks for s in systems_in_order if (b, s) in inputs]
    return Retrieval(write_runs_table(report.layout, [rows[p.run_id] for p in plan]), pd.DataFrame(shown),
                     report.summary)
