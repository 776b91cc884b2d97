"""The evaluate stage (notebook 03, ``instir evaluate``, ``instir sweep``'s cells and collect
step): every run of ``runs/runs.csv`` scored on its benchmark (the family spec's measures), the
tidy table (with the Average over subsets where the family has one), per-query values, group
minima and the paired comparisons against each benchmark's baseline (its first system), written
under ``metrics/``. :func:`write_metrics` is the one aggregation every front end uses, so a sweep
folder and a notebook folder hold the same bytes; benchmarks are loaded for their queries and
qrels only (the corpus's ids come from the corpus index).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from instir import atomic
from instir.benchmarks import catalog
from instir.benchmarks.types import Benchmark
from instir.errors import UnknownNameError, unknown
from instir.inputs import read_head
from instir.metrics import latex, robustness, stats
from instir.metrics.compared import RunComparison, compare_scores
from instir.metrics.evaluation import Evaluation
from instir.metrics.measures import GroupMeasure, parse_measure
from instir.metrics.scoring import (
    Scorer,
    data_differs,
    evaluate_runs,
    headline,
    scored_measures,
    without_self_hits,
)
from instir.metrics.table import combine, subset_average, wide
from instir.parameters import benchmark_names
from instir.report.explain import explain_agreement, explain_runs
from instir.report.layout import LoadedBenchmarks, ReportLayout, read_runs_table, report_layout
from instir.report.stage_writer import writes_stage
from instir.retrieval.runs import Run, RunIdCheck, check_run_ids, read_run, read_sidecar
from instir.retrieval.search import queries_sha256
from instir.stamps import json_sha256
from instir.verified_store import Entry, VerifiedStore

if TYPE_CHECKING:
    from instir.retrieval.mteb import MtebPredictions

GROUP_COLUMNS = ["benchmark", "system", "group", "measure", "value", "n_queries"]
#: The first line of every LaTeX table the metrics stage writes: a later run removes a table of its own that it
#: no longer makes, never a ``.tex`` file someone else put into the folder.
TEX_MARK = "% written by instir's metrics stage (03_metrics): a later run replaces or removes this file\n"


def stage_tables(folder: Path) -> list[Path]:
    """The LaTeX tables in ``folder`` that the metrics stage wrote (their first line is :data:`TEX_MARK`)."""
    mark = TEX_MARK.encode()
    return sorted(path for path in folder.glob("*.tex") if read_head(path, len(mark)) == mark)


#: The files of a run's stored scores (an entry of the verified store ``metrics/runs/``): per-query values, and
#: per-group values where a measure is computed over query groups.
_VALUES, _PAIRS = "scores.parquet", "pairs.parquet"
#: Version of the stored per-run scores (``metrics/runs/``); a new version scores every run anew. 2: the stored
#: run check's depth is :func:`~instir.retrieval.runs.ranked_depth`'s (version 1 kept the deepest query's). 3: p-MRR's
#: insertion rule reads a run's ties (:func:`~instir.retrieval.runs.tied_again`; version 2 read them broken).
SCORES_VERSION = 3

#: What a benchmark's release brings that a measure reads besides its qrels (FollowIR's changed documents and
#: candidate lists, which p-MRR reads), so stored scores follow them.
_RELEASE_READ = ("changed", "top_ranked")


def qrels_sha256(benchmark: Benchmark) -> str:
    """SHA-256 over the qrels, query by query and document by document in order."""
    h = hashlib.sha256()
    for qid, docs in benchmark.qrels.items():
        h.update(json.dumps([qid, sorted(docs.items())]).encode())
    return h.hexdigest()


def scores_key(benchmark: Benchmark, run_file: Path, system: str, measures: Sequence[str]) -> dict:
    """Everything a run's scores depend on: the run file's bytes, the benchmark (revision,
    setting, queries, qrels, corpus, what its release brings that a measure reads), the system's name, the
    measures and the code of the family's group measures (:meth:`~instir.benchmarks.catalog.Family.measure_code`)."""
    release = {name: benchmark.meta[name] for name in _RELEASE_READ if benchmark.meta.get(name) is not None}
    spec = benchmark.spec
    return {"version": SCORES_VERSION, "run_sha256": atomic.file_sha256(run_file), "system": system,
            "benchmark": benchmark.name, "setting": benchmark.setting, "revision": benchmark.revision,
            "queries_sha256": queries_sha256(benchmark), "qrels_sha256": qrels_sha256(benchmark),
            "corpus_sha256": benchmark.corpus.content_hash(), "measures": list(measures),
            **({"release_sha256": json_sha256(release)} if release else {}),
            **({"measure_code_sha256": spec.measure_code()} if spec and spec.group_measures else {})}


def listed_run(path: Path, benchmark: Benchmark, protocol: str = "authors") -> Run | dict:
    """A listed run file as ``protocol`` scores it: a TREC run, or an MTEB prediction file
    (``<Task>_predictions.json``, :func:`as_scored`)."""
    from instir.retrieval.mteb import is_mteb_predictions, read_mteb_predictions

    return as_scored(read_mteb_predictions(path), benchmark, protocol) if is_mteb_predictions(path) \
        else read_run(path)


def as_scored(predictions: MtebPredictions, benchmark: Benchmark, protocol: str = "authors") -> Run | dict:
    """An MTEB prediction file's run as ``protocol`` scores it: under the ``mteb`` protocol its own
    scores, ``{qid: {docid: score}}`` under the kit's ids, as MTEB scores them; else a run in the
    kit's order (:func:`instir.retrieval.mteb.predictions_run`)."""
    from instir.retrieval.mteb import predictions_run, predictions_scores

    return predictions_scores(predictions, benchmark) if protocol == "mteb" else predictions_run(predictions, benchmark)


def run_scores(layout: ReportLayout, benchmark: Benchmark, run_file: str, system: str,
               scorer: Scorer | None = None, run: Run | None = None) -> tuple[Evaluation, bool]:
    """The evaluation of one listed run (``run_file`` relative to the report folder, scored as
    ``system``) and whether it was stored: its per-query values are read back from
    ``metrics/runs/`` when stored for the same :func:`scores_key`, else computed (standard
    measures, and what the family's spec derives: Robustness on InstructIR, IFIR-native nDCG/MRR
    on IFIR) and stored there. ``scorer`` (for this benchmark's measures) may be passed when
    scoring many runs, and ``run`` when the caller has read the file already."""
    scorer = scorer or Scorer.for_benchmark(benchmark, scored_measures(benchmark))
    path = layout.require(layout.root / run_file)  # listed, then deleted: the notebook that writes it is named
    description = scores_key(benchmark, path, system, [str(m) for m in scorer.measures])
    key = json_sha256(description)
    store = VerifiedStore(layout.scores, "stored scores")
    # one entry per listed run and name; the run's name cut, so the store's temporary names stay within 255 bytes
    listed = f"{Path(run_file).stem[:48]}-{json_sha256([run_file, system])[:8]}-"
    name = listed + key[:16]
    files = (_VALUES, _PAIRS) if scorer.grouped else (_VALUES,)

    def stored(entry: Entry) -> tuple:
        pairs = pd.read_parquet(entry.path / _PAIRS) if scorer.grouped else None
        return pd.read_parquet(entry.path / _VALUES), pairs, RunIdCheck(**entry.meta["check"])

    found = store.read(name, key, stored, required=files)
    if found is not None:
        scores, pairs, check = found
    else:
        run = run if run is not None else listed_run(path, benchmark)
        check = check_run_ids(run, benchmark)
        kept = without_self_hits(run)
        scores, pairs = scorer.per_query(kept), scorer.group_values(kept)

        def write(folder: Path) -> None:
            for file, frame in zip(files, (scores, pairs)):
                atomic.write_bytes(folder / file, atomic.frame_bytes(folder / file, frame))

        store.put(name, key, write, description=description, meta={"check": asdict(check)}, fallback=False)
        for other in store.root.iterdir():  # what the listed run stored for other measures, or an older run file
            if other.name.startswith(listed) and other.name != name:
                store.remove(other.name)
    meta = run.meta if isinstance(run, Run) else read_sidecar(path)  # said on every scoring, a stored one's too
    check = data_differs({**(meta or {}), "path": str(path)}, benchmark, check)
    return scorer.evaluation(scores, benchmark, system, check, pairs), found is not None


def compare_to_baseline(per_query: pd.DataFrame, per_group: pd.DataFrame, baseline: str, **options) -> pd.DataFrame:
    """Every system against ``baseline`` on one benchmark (:func:`instir.metrics.paired_tests`):
    per query, and per query group for Robustness, on every measure. ``options`` go to the tests
    (``n_resamples``, ``seed``)."""
    frames = []
    for unit, values in (("query", per_query), ("group", per_group)):
        if len(values):
            frames.append(stats.paired_tests(values, baseline, **({"unit": "group"} if unit == "group" else {}),
                                             **options).assign(unit=unit))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


@dataclass
class MetricsView:
    """One table notebook 03 shows for a benchmark family (its spec's ``[report]``): the title,
    the headline measures ×100 (of one benchmark, or of the family's benchmarks side by side),
    the same per instruction level (for a family's view; empty when none of its loaded benchmarks has levels, None
    when none of its subsets can have any, as FollowIR's, and for one benchmark's) under a title naming its subsets,
    and what the numbers show (Markdown)."""

    title: str
    table: pd.DataFrame
    by_level: pd.DataFrame | None = None
    note: str = ""
    explanation: str = ""
    by_level_title: str = "Per instruction level"


@dataclass
class Metrics(Evaluation):
    """What the evaluate stage wrote: the evaluation of every run (``table``:
    ``metrics/metrics.csv``, ``per_query``, ``per_group``, with a ``benchmark`` column),
    ``comparisons`` (against each benchmark's first system), ``run_checks`` (each run's ids
    against its benchmark), ``runs`` (the runs.csv rows scored) and ``compared``: per benchmark of several systems
    on one query set, its systems side by side as a paper table (:func:`instir.compare_runs`'s table; its LaTeX is
    ``metrics/<benchmark>.tex``)."""

    comparisons: pd.DataFrame | None = None
    run_checks: pd.DataFrame | None = None
    runs: pd.DataFrame | None = None
    compared: dict[str, RunComparison] = field(default_factory=dict)

    def checks_table(self) -> pd.DataFrame:
        """``run_checks`` as notebook 03 shows it: each run's benchmark, system, ids checked, and the columns that say
        something of some run (``other_data``: data it was not retrieved over; ``notes``: a cutoff deeper than it)."""
        checks = self.run_checks.drop(columns="run_file")
        return checks[[c for c in checks if c in ("benchmark", "system", "run ids") or checks[c].astype(bool).any()]]

    @property
    def samples(self) -> list[str]:
        """The bundled sample benchmarks among the scored ones (their numbers are no results)."""
        return sorted({b for b in self.table["benchmark"] if catalog.is_sample(b)})

    def views(self) -> list[MetricsView]:
        """The tables notebook 03 shows, family by family in the catalog's order (see :class:`MetricsView`)."""
        family = self.table["benchmark"].map(catalog.family_of)
        out = []
        for name in (f for f in catalog.families() if (family == f).any()):
            spec = catalog.family(name)
            rows = self.table[(family == name) & self.table["measure"].isin(spec.headline)]
            title = f"{spec.printed}: {spec.report.get('title', ', '.join(spec.headline))} (×100)"
            if spec.report.get("per") == "family":
                rows = rows.assign(column=column_labels(rows))
                by_level = rows[rows["level"] != "all"]
                levels = wide(by_level.assign(level="level " + by_level["level"]),
                              columns=("column", "measure", "level")) if len(by_level) else (
                    pd.DataFrame() if _levelled(spec) else None)
                pooled = wide(rows[rows["level"] == "all"], columns=("column", "measure"))
                instances = self.per_query[self.per_query["benchmark"].map(catalog.family_of) == name]
                leveled = ", ".join(dict.fromkeys(by_level["column"]))  # a table of one subset drops its name
                out.append(MetricsView(title, pooled, levels, self._noted(rows, spec),
                                       explain_agreement(instances, spec),
                                       f"Per instruction level ({leveled})" if leveled else "Per instruction level"))
                continue
            for bench, part in rows.groupby("benchmark", sort=False):
                first = self.per_query[(self.per_query["benchmark"] == bench)
                                       & (self.per_query["measure"] == spec.headline[0])]
                out.append(MetricsView(f"{bench}: {title.partition(': ')[2]}", wide(part), None,
                                       self._noted(part, spec), explain_runs(part, first, spec)))
        return out

    def _noted(self, rows: pd.DataFrame, spec: catalog.Family) -> str:
        """The spec's note on a table of ``rows``, and what a query-only run's group measure is by construction (its
        ``query_only``: p-MRR's 0), said once."""
        alone = [] if self.runs is None or not spec.pair or "variant" not in self.runs else list(dict.fromkeys(
            self.runs.loc[(self.runs["variant"] == spec.pair[1]) & self.runs["system"].isin(rows["system"]), "system"]))
        fixed = [(m, parse_measure(m)) for m in dict.fromkeys(rows["measure"])] if alone else []
        said = [f"{m} of {', '.join(alone)} is {measure.query_only}." for m, measure in fixed
                if isinstance(measure, GroupMeasure) and measure.query_only]
        return " ".join([spec.report.get("note", ""), *said]).strip()

    def group_minima(self, benchmark: str) -> list[tuple[str, str, pd.Series, pd.Series]]:
        """Per system of a benchmark whose family plots group minima (its spec's
        ``[report] group_minima``, e.g. Robustness@10): the measure's base (nDCG@10), the
        system, its group minima and its base values per instance (the values whose mean and
        minimum-mean the tables show); empty for other families."""
        family = catalog.family_of(benchmark)
        robust = catalog.family(family).report.get("group_minima") if family else None
        if not robust:
            return []
        base = str(parse_measure(robust).base)
        groups = self.per_group[(self.per_group["benchmark"] == benchmark) & (self.per_group["measure"] == robust)]
        queries = self.per_query[(self.per_query["benchmark"] == benchmark) & (self.per_query["measure"] == base)]
        return [(base, system, groups.loc[groups["system"] == system, "value"],
                 queries.loc[queries["system"] == system, "value"]) for system in dict.fromkeys(groups["system"])]

    def instructed_vs_query_only(self, benchmark: str) -> tuple[str, list[tuple[str, pd.Series, pd.Series]]]:
        """The benchmark's first per-query headline measure (FollowIR's p-MRR has one value per
        query pair, so its AP@1000[og]) and, per retriever, its query-only and instructed values
        per instance (×100, aligned on the instance ids): the two runs its family's spec pairs. A runs list without
        the retrieve stage's ``retriever`` and ``variant`` columns (one's own, of the required columns) pairs none:
        its runs are instructed ones, as far as the kit can tell."""
        measure = next(m for m in headline(benchmark) if parse_measure(m).unit == "query")
        if not {"retriever", "variant"} <= set(self.runs):
            return measure, []
        values = self.per_query[(self.per_query["benchmark"] == benchmark) & (self.per_query["measure"] == measure)]
        wide_values = values.pivot(index="qid", columns="system", values="value") * 100
        runs = self.runs[self.runs["benchmark"] == benchmark]
        family = catalog.family_of(benchmark)
        pair = catalog.family(family).pair if family else None
        pairs = []
        for retriever, part in runs.groupby("retriever", sort=False):
            by_variant = dict(zip(part["variant"], part["system"]))
            if pair and set(pair) <= by_variant.keys():
                pairs.append((retriever, wide_values[by_variant[pair[1]]], wide_values[by_variant[pair[0]]]))
        return measure, pairs


def _levelled(spec: catalog.Family) -> bool:
    """Whether a subset of the family has instruction levels (IFIR's fiqa: 1-3), so a table per level can show."""
    return any(subset.multi_level for subset in spec.subsets.values())


def column_labels(rows: pd.DataFrame) -> pd.Series:
    """Each row's column in a family's table: its subset (``fiqa``: the benchmark's name would
    repeat it), or its benchmark's name where two collections hold the subset; an Average row
    (``subset`` ``average``) reads ``Average``, or ``<collection> Average`` beside another."""
    average = rows["subset"] == "average"
    collection = rows["benchmark"].where(average, rows["benchmark"].map(catalog.collection_of))
    several = collection.nunique() > 1
    named = rows["benchmark"] if several else rows["subset"]
    return named.where(~average, (collection + " Average") if several else "Average")


def with_averages(table: pd.DataFrame) -> pd.DataFrame:
    """The table with the Average over the subsets of every collection of a family whose spec
    has one (IFIR's), where the table holds two subsets or more of it (of one, the Average would
    repeat its value)."""
    family = table["benchmark"].map(catalog.family_of)
    collection = table["benchmark"].map(catalog.collection_of)
    subsets = table.groupby(collection)["benchmark"].transform("nunique")
    averaged = family.map(lambda f: bool(f and catalog.family(f).average)) & (subsets > 1)
    return combine([table, subset_average(table[averaged])]) if averaged.any() else table


#: What each benchmark's systems are compared with its first on: its family's headline measures, or all.
COMPARED = ("headline", "all")


def write_metrics(layout: ReportLayout, runs: pd.DataFrame, evaluations: Sequence[Evaluation], *,
                  compare: str = "headline", labels: Mapping[str, str] | None = None, **options) -> Metrics:
    """Join the evaluations of ``runs`` (one :class:`~instir.metrics.evaluation.Evaluation` per
    row, in the rows' order) into ``metrics/``: the tidy table with the subset Averages,
    per-query values, group minima, every benchmark's systems against its first one (on its
    family's ``headline`` measures, or ``compare="all"`` of them; ``options``: the tests'
    ``n_resamples`` and ``seed``) and, for a benchmark of several systems on one query set, its LaTeX table with
    ranx's significance marks on those measures, Holm-corrected as :func:`instir.compare_runs` marks
    them (``metrics/<benchmark>.tex``, captioned with the benchmark's label from ``labels``), written
    as one set (:func:`instir.atomic.write_files`)."""
    benchmarks = runs["benchmark"].tolist()
    table = with_averages(combine([e.table for e in evaluations]))
    per_query = pd.concat([e.per_query.assign(benchmark=b) for b, e in zip(benchmarks, evaluations)],
                          ignore_index=True)[["benchmark", "system", "qid", "measure", "value"]]
    groups = [e.per_group.assign(benchmark=b) for b, e in zip(benchmarks, evaluations) if len(e.per_group)]
    per_group = pd.concat(groups, ignore_index=True)[GROUP_COLUMNS] if groups else pd.DataFrame(columns=GROUP_COLUMNS)
    comparisons, tex, compared = [], {}, {}
    for name in dict.fromkeys(benchmarks):
        baseline = runs.loc[runs["benchmark"] == name, "system"].iloc[0]
        measures = None if compare == "all" else headline(name)
        values = [frame[(frame["benchmark"] == name) & (True if measures is None else frame["measure"].isin(measures))]
                  .drop(columns="benchmark") for frame in (per_query, per_group)]
        comparisons.append(compare_to_baseline(*values, baseline, **options).assign(benchmark=name))
        # one setting's systems, one query set (the sets made only where there are several systems)
        if values[0]["system"].nunique() > 1 and len({frozenset(part["qid"]) for _, part in
                                                      values[0].groupby("system")}) == 1:
            compared[name] = compare_scores(Evaluation(values[0], values[1], pd.DataFrame()), correction="holm",
                                            **options)  # instir.compare_runs's test: Holm across a measure's pairs
            tex[layout.metrics / f"{name.replace('/', '_')}.tex"] = (TEX_MARK + compared[name].to_latex(
                caption=f"{latex.escape((labels or {}).get(name, name))}, scores $\\times 100$.")).encode()
    comparisons = pd.concat(comparisons, ignore_index=True)
    first = [next(iter(e.checks.values())) for e in evaluations]
    checks = pd.DataFrame({"benchmark": benchmarks, "system": runs["system"].tolist(),
                           "run_file": runs["run_file"].tolist() if "run_file" in runs else [""] * len(runs),
                           "run ids": [c.summary() for c in first],
                           "other_data": [", ".join(c.other_data) for c in first],
                           "notes": ["; ".join(e.notes) for e in evaluations]})
    layout.metrics.mkdir(parents=True, exist_ok=True)
    frames = {layout.metrics_table: table, layout.metrics / "metrics.parquet": table, layout.per_query: per_query,
              layout.per_group: per_group, layout.comparisons: comparisons, layout.run_checks: checks}
    stale = [path for path in stage_tables(layout.metrics) if path not in tex]
    atomic.write_files({**{path: atomic.frame_bytes(path, frame) for path, frame in frames.items()}, **tex},
                       remove=stale)
    joined = Evaluation.join(list(evaluations))
    return Metrics(per_query, per_group, table, joined.excluded, joined.checks, joined.notes, comparisons=comparisons,
                   run_checks=checks, runs=runs, compared=compared)


@writes_stage("03_metrics")
def score_runs(out_dir: str | Path, benchmarks: Sequence[str] | None = None, *,
               measures: Sequence[object] | None = None, protocol: str = "authors", compare: str = "headline",
               data_root: str | None = None, loaded: LoadedBenchmarks | None = None,
               read: Mapping[str, Run | dict] | None = None, **options) -> Metrics:
    """The evaluate stage: every run ``runs/runs.csv`` lists (of ``benchmarks`` only, when
    given) scored on its benchmark (:func:`run_scores`: the family's measures, or ``measures``
    and what the family derives from them; ``protocol="mteb"``: as MTEB scores its task, every
    time) and written under ``metrics/`` (:func:`write_metrics`, ``compare`` and ``options``
    going to it). ``loaded`` may hold benchmarks the caller has read already, and ``read`` runs
    (by their ``run_file``, as :func:`listed_run` reads them under ``protocol``)."""
    if compare not in COMPARED:  # before any scoring
        raise UnknownNameError(f"parameter 'compare': {unknown('comparison', compare, COMPARED)}")
    layout = report_layout(out_dir)
    runs = read_runs_table(layout, None if benchmarks is None else benchmark_names(benchmarks))
    loaded = loaded or LoadedBenchmarks(data_root, record_in=layout.root)
    read = read or {}
    scorers: dict[tuple[str, str], Scorer] = {}
    evaluations = []
    for row in runs.itertuples(index=False):
        bench = loaded.get(row.benchmark, row.setting)
        if protocol == "authors":
            key = (row.benchmark, row.setting)
            if key not in scorers:
                scorers[key] = Scorer.for_benchmark(bench, scored_measures(bench, measures))
                scorers[key].warn_alone(robustness.query_groups(bench))  # once per benchmark, not per run
            scorer = scorers[key]
            evaluations.append(run_scores(layout, bench, row.run_file, row.system, scorer, read.get(row.run_file))[0])
        else:
            run = read.get(row.run_file) or listed_run(layout.root / row.run_file, bench, protocol)
            evaluations.append(evaluate_runs({row.system: run}, bench, measures, protocol=protocol))
    labels = {bench.name: bench.label for bench in loaded.loaded.values() if bench.setting == "instructed"}
    return write_metrics(layout, runs, evaluations, compare=compare, labels=labels, **options)
