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
from instir.benchmarks.types import Benchmark
from instir.formatting import get_template
from instir.report.layout import ReportLayout, start_report
from instir.retrieval import Retriever, retrieve, template_for
from instir.retrieval.runs import Run
from instir.stages.plan import PlannedRun, plan_runs

#: The columns of ``runs/runs.csv``, in order.
RUNS_COLUMNS = ["benchmark", "setting", "sample", "retriever", "system", "variant", "template", "k", "queries",
                "rows", "search_s", "elapsed_s", "reused", "run_file"]


def retrieve_planned(layout: ReportLayout, benchmark: Benchmark, planned: PlannedRun, retriever: Retriever,
                     k: int) -> tuple[dict, Run]:
    """Retrieve one planned run (``benchmark`` loaded in its setting) into ``layout.runs``,
    reusing a run with the same inputs; returns its ``runs.csv`` row and the run."""
    start = time.perf_counter()
    run = retrieve(benchmark, retriever, None if planned.variant == "instructed" else "query-only", k=k,
                   out_dir=layout.runs)
    row = {"benchmark": benchmark.name, "setting": benchmark.setting, "sample": benchmark.is_sample,
           "retriever": planned.system.name, "system": planned.label, "variant": planned.variant,
           "template": run.meta["template"]["name"], "k": k, "queries": run.df["qid"].nunique(), "rows": len(run.df),
           "search_s": run.meta["wall_time_s"], "elapsed_s": round(time.perf_counter() - start, 3),
           "reused": bool(run.meta.get("reused", False)),
           "run_file": Path(run.meta["path"]).resolve().relative_to(layout.root.resolve()).as_posix()}
    return row, run


def write_runs_table(layout: ReportLayout, rows: Sequence[dict]) -> pd.DataFrame:
    """``runs/runs.csv`` from the runs' rows, in the order given (the first system of each
    benchmark is the later stages' baseline), written atomically."""
    table = pd.DataFrame(list(rows), columns=RUNS_COLUMNS)
    layout.runs.mkdir(parents=True, exist_ok=True)
    atomic.write_frame(layout.runs_table, table)
    return table


def read_runs_table(layout: ReportLayout, benchmarks: Sequence[str] | None = None) -> pd.DataFrame:
    """``runs/runs.csv`` (the retrieve stage's list), only ``benchmarks`` when given; a missing
    file names the notebook that writes it."""
    table = pd.read_csv(layout.require(layout.runs_table), dtype={"benchmark": str, "system": str})
    if "setting" not in table:  # lists written before the column existed
        table.insert(1, "setting", "instructed")
    return table if benchmarks is None else table[table["benchmark"].isin(list(benchmarks))].reset_index(drop=True)


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
    """The first instance of ``benchmark`` as the system ``name``'s instructed template and the
    query-only template format it (the template's name is recorded in every run)."""
    first = next(iter(benchmark.queries.values()))
    template = template_for(benchmark, retriever)
    return {"benchmark": benchmark.name, "retriever": name, "template": template.name,
            "instructed text": str(template.format_query(first)),
            "query-only text": str(get_template("query-only").format_query(first))}


def retrieve_runs(out_dir: str | Path, benchmarks: Sequence[str], systems: Sequence[str], *, k: int = 100,
                  data_root: str | None = None) -> Retrieval:
    """The retrieve stage: every run of :func:`~instir.stages.plan.plan_runs` (``systems`` as
    :func:`instir.systems.specs.resolve_system` names them) into ``out_dir/runs/``, listed in
    ``runs/runs.csv`` in the plan's order. One system is built (its model loaded) at a time and
    serves every benchmark before the next is built, so a machine holds one model, and one BM25
    index, at a time."""
    plan = plan_runs(benchmarks, systems)
    report = start_report(out_dir, benchmarks, data_root)
    rows: dict[str, dict] = {}
    inputs: dict[tuple[str, str], dict] = {}
    systems_in_order = {p.system.name: p.system for p in plan}
    for system in systems_in_order.values():
        retriever = system.factory()()
        for planned in (p for p in plan if p.system.name == system.name):
            bench = report.cache.get(planned.benchmark, planned.setting)
            if planned.setting == "instructed":
                inputs.setdefault((planned.benchmark, system.name), model_inputs(bench, system.name, retriever))
            rows[planned.run_id] = retrieve_planned(report.layout, bench, planned, retriever, k)[0]
        del retriever
    shown = [inputs[b, s] for b in report.benchmarks for s in systems_in_order if (b, s) in inputs]
    return Retrieval(write_runs_table(report.layout, [rows[p.run_id] for p in plan]), pd.DataFrame(shown),
                     report.summary)
