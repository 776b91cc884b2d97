"""The judge stage (notebook 04, ``instir judge``, ``instir sweep``'s judge step): the judge's
agreement with gold labels, InstFol@20 of every system's instructed run against its query-only
run, the ranking the judge gives the systems against the gold headline measure, and the judge's own spread over
repeated judgments, written under ``judge/``.

InstFol of one run pair is :func:`judge_pair`; the pairs' results are joined by
:func:`write_instfol`, the one aggregation the sweep uses too. Every judgment goes through the
report's judgment cache (``judge/judgments.sqlite``), so a rerun pays for nothing it has. The
judge reads only the passages it judges (the corpus index serves them by id).
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from instir import atomic
from instir.benchmarks.catalog import collection_of
from instir.benchmarks.types import Benchmark
from instir.judge import stability
from instir.judge.following import (
    InstFolResult,
    K,
    UnscoredWarning,
    aggregate,
    check_max_instances,
    instfol,
    overall,
    same_passages_note,
    unscored_note,
)
from instir.judge.outcomes import error_counts, failure_lines, lasting_failure, require_judged
from instir.judge.validation import ValidationResult, agreement, check_per_stratum, ranking_agreement, validate_judge
from instir.metrics.scoring import headline
from instir.parameters import benchmark_names, depth
from instir.report.html import markdown_code, markdown_text
from instir.report.layout import (
    LoadedBenchmarks,
    MissingInput,
    ReportLayout,
    read_runs_table,
    read_table,
    report_layout,
    start_report,
)
from instir.report.stage_writer import writes_stage
from instir.report.tables import integer_rows
from instir.retrieval.runs import ShallowRunsWarning, read_run
from instir.stages.plan import paired_runs

#: Keys of an InstFol result's meta that the cost table shows.
COST_KEYS = ("unique_requests", "judged", "from_cache", "failed_judgments", "parsed_judgments", "warnings", "cost")

#: What each judge backend is, for the page that shows its numbers.
TRUST = {
    "hf": "an LLM run in this process. ",
    "openai": "an OpenAI-compatible chat model. The IFIR paper used gpt-4o-mini (its authors report Pearson "
              "r = 0.704 between GPT-4o and a domain expert on 400 pairs); how far this model can be trusted is "
              "what the validation below measures.",
    "baseline": "a **baseline without an LLM** (term overlap mapped onto the rubric scale). It cannot read the "
                "instruction's conditions; it is the floor an LLM judge has to beat.",
}
#: The bundled in-process judge, said of its numbers wherever they appear.
WEAK_JUDGE = ("This is the bundled SmolLM2-135M-Instruct, a **weak plumbing judge**: it shows that the pipeline "
              "works end to end, but it barely tells relevant from irrelevant passages, so its InstFol numbers say "
              "little about the retrievers.")


@dataclass(frozen=True)
class RunPair:
    """One system's instructed and query-only runs on one benchmark (run files relative to the
    report folder): the two lists InstFol compares."""

    benchmark: str
    retriever: str
    system: str
    instructed: str
    query_only: str


def run_pairs(runs: pd.DataFrame) -> list[RunPair]:
    """The run pairs of ``runs/runs.csv`` rows: per benchmark and retriever (in the rows' order),
    the instructed-setting runs of the two variants its family's spec pairs (``pair``: the
    instructed run and the query-only run; a family without one has none); a retriever missing one of them has
    none (:func:`instir.stages.plan.paired_runs`, by which a grid with a judge is checked too)."""
    rows = runs.itertuples(index=False)
    return [RunPair(instructed.benchmark, instructed.retriever, instructed.system, instructed.run_file,
                    query_only.run_file)
            for instructed, query_only in paired_runs(rows, lambda r: (r.benchmark, r.setting, r.retriever, r.variant))]


def judge_pair(root: str | Path, benchmark: Benchmark, pair: RunPair, judge: Any,
               max_instances: int | None, seed: int = 0, k: int = K) -> InstFolResult:
    """InstFol@k of one run pair (:func:`instir.judge.following.instfol`), its runs read from
    the report folder ``root``; a stratified sample of ``max_instances`` instances (seeded)."""
    layout = ReportLayout(root)
    return instfol(read_run(layout.require(layout.root / pair.instructed)),
                   read_run(layout.require(layout.root / pair.query_only)), benchmark, judge, k=k,
                   max_instances=max_instances, seed=seed)


#: The columns of ``judge/instfol.csv`` that name the judge behind each value (backend and model string), which the
#: compare stage checks against the paper's judge.
JUDGE_COLUMNS = ("judge_backend", "judge_model")

#: The column of ``judge/instfol.csv`` that names the run files behind each value (``; ``-separated, relative to the
#: report folder), by which the compare stage tells InstFol of runs the folder still lists from InstFol of others.
RUN_FILES = "run_files"


def summarise_instfol(instances: pd.DataFrame) -> pd.DataFrame:
    """InstFol per level, subset and Average of every system on every collection of benchmarks
    (a family's subsets: :func:`instir.benchmarks.catalog.collection_of`;
    :func:`instir.judge.following.aggregate`), in the instances' order, with the judge behind it, the ``k`` its
    lists were cut at, the ``depth`` its shallower run ranks (:func:`instir.retrieval.runs.ranked_depth`) and the
    :data:`RUN_FILES` it compared."""
    parts = [_run_files(aggregate(part).assign(system=system, benchmark=name,
                                               **{c: _joined(part[c]) for c in JUDGE_COLUMNS if c in part},
                                               **{c: part[c].min() for c in ("k", "depth") if c in part}), part)
             for (system, name), part in instances.groupby(["system", "collection"], sort=False)]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def _joined(values: pd.Series) -> str:
    """The distinct values, in order, ``; ``-separated."""
    return "; ".join(dict.fromkeys(values.astype(str)))


def _run_files(rows: pd.DataFrame, instances: pd.DataFrame) -> pd.DataFrame:
    """``rows`` of one system's collection with the :data:`RUN_FILES` behind each: a subset's and its levels' those
    of its own runs, the Average every subset's (so a subset whose runs are unchanged keeps its value)."""
    if RUN_FILES not in instances:
        return rows
    by_subset = instances.groupby("subset", sort=False)[RUN_FILES].agg(_joined)
    every = _joined(instances[RUN_FILES])
    return rows.assign(**{RUN_FILES: [every if scope == "average" else by_subset.get(subset, every)
                                      for scope, subset in zip(rows["scope"], rows["subset"])]})


@dataclass
class InstFolTables:
    """InstFol of every run pair: ``instances`` (``judge/instfol_instances.csv``), ``positions``
    (every judged list position), ``summary`` (``judge/instfol.csv``), ``costs`` (judgments
    per pair: distinct, made now, from the cache, failed, parsed, cost) and each pair's
    ``results`` (their ``meta``: the instances selected, those a run lacks)."""

    instances: pd.DataFrame
    positions: pd.DataFrame
    summary: pd.DataFrame
    costs: pd.DataFrame
    results: list[InstFolResult] = field(default_factory=list)


def write_instfol(layout: ReportLayout, pairs: Sequence[RunPair], results: Sequence[InstFolResult]) -> InstFolTables:
    """Join the InstFol results of ``pairs`` (same order) into ``judge/``'s InstFol files,
    written as one set (:func:`instir.atomic.write_files`)."""
    if not pairs:
        raise ValueError("no run pair to judge: InstFol needs a system's instructed and query-only runs")
    instances = pd.concat([r.instances.assign(benchmark=p.benchmark, collection=collection_of(p.benchmark),
                                              system=p.system, judge_backend=r.meta["judge"]["name"],
                                              judge_model=r.meta["judge"]["model"], k=r.meta["k"],
                                              depth=r.meta["depth"], **{RUN_FILES: f"{p.instructed}; {p.query_only}"})
                           for p, r in zip(pairs, results)], ignore_index=True)
    positions = pd.concat([r.positions.assign(benchmark=p.benchmark, system=p.system) for p, r in zip(pairs, results)],
                          ignore_index=True)
    costs = pd.DataFrame([{"benchmark": p.benchmark, "system": p.system, **{key: r.meta[key] for key in COST_KEYS}}
                          for p, r in zip(pairs, results)])
    tables = InstFolTables(instances, positions, summarise_instfol(instances), costs, list(results))
    layout.judge.mkdir(parents=True, exist_ok=True)
    atomic.write_frames({layout.instfol_instances: instances, layout.judge / "instfol_positions.csv": positions,
                         layout.instfol: tables.summary})
    return tables


@dataclass
class Judging:
    """What the judge stage did: the judge (name, model, call counts in ``judge.stats``), the
    validation per benchmark and its pooled ``agreement``, InstFol of every run pair, the
    judge's ranking of the systems against the gold headline measure (``rankings``), and the judge's own spread
    over ``repeats`` judgments (``spread``, ``judge/stability.csv``)."""

    judge: Any
    backend: str
    max_instances: int
    validations: dict[str, ValidationResult]
    pairs: pd.DataFrame
    agreement: pd.DataFrame
    instfol: InstFolTables
    rankings: pd.DataFrame
    spread: pd.DataFrame
    summary: str
    bundled: bool = False
    verdicts: list[tuple[str, str, str]] = field(default_factory=list)

    def _failed_by_part(self) -> dict[str, int]:
        """The judgments that failed in this stage, by part: InstFol's, the validation's, and the repeats' judged
        again for the spread (repeat 0 is InstFol's)."""
        repeats = sum(m.get("failed_judgments", 0) for pair in self.spread.attrs.get("repeats", [])
                      for m in pair if "copied_from" not in m and "from_instfol" not in m)
        return {"of InstFol": int(self.instfol.costs["failed_judgments"].sum()),
                "of the validation": int(self.pairs["error"].notna().sum()) if "error" in self.pairs else 0,
                "of its repeats": repeats}

    def failed_judgments(self) -> int:
        """The judgments that failed in this stage: of the validation, of InstFol, and of the
        repeats judged again for the spread (repeat 0 is InstFol's)."""
        return sum(self._failed_by_part().values())

    def incomplete(self) -> list[str]:
        """What the stage left without a judgment, for its front ends to print before they end with status 1
        (``instir judge``, ``instir sweep``, and ``instir run`` through the folder's record: the stage writer keeps
        it): the failed judgments counted by reason with a few named, then one line saying how many failed and
        whether running the same command again can judge them (the cache keeps every success). Empty when none
        failed."""
        parts = self._failed_by_part()
        failed = sum(parts.values())
        if not failed:
            return []
        positions = self.instfol.positions
        lines = failure_lines(positions, "distinct judgment(s)") + failure_lines(self.pairs, "validation pair(s)")
        errors = pd.concat([frame["error"] for frame in (positions, self.pairs) if "error" in frame]).dropna()
        lasting = not errors.empty and errors.astype(str).str.contains(lasting_failure()).all()  # else a rerun may
        advice = ("each failed on what was sent (see the reasons above), so running again fails them again" if lasting
                  else "run the same command again to judge only those (the judgment cache keeps every success)")
        where = (" (" + ", ".join(f"{n} {part}" for part, n in parts.items() if n) + ")"
                 if parts["of InstFol"] != failed else "")
        return [*lines, f"{failed} judgment(s) failed{where} and are left out of the values; {advice}"]

    def require_judgments(self) -> None:
        """Raise :class:`AllJudgmentsFailed`, the failures counted by reason, when every judgment
        InstFol needed failed; the front ends call it after showing and writing what failed
        (notebook 04 as its last cell, ``instir judge`` after its tables, the sweep's judge step)."""
        require_judged(self.instfol.positions.drop_duplicates(["qid", "docid"])["error"], "InstFol has no value")

    @property
    def validated(self) -> bool:
        """Whether any gold pair was judged successfully (else the statistics are skipped)."""
        return bool(self.pairs["norm"].notna().any())

    def trust(self) -> str:
        """What this judge is and how far its numbers can be trusted (Markdown)."""
        text = TRUST[self.backend]
        if self.backend == "hf":
            text += WEAK_JUDGE if self.bundled else "How far it can be trusted is what the validation below measures."
        return text

    def agreement_table(self) -> pd.DataFrame:
        """The agreement statistics by benchmark (and ``all``), statistics in their order, the
        number of pairs as an integer."""
        table = self.agreement.pivot(index="statistic", columns="benchmark", values="value").loc[
            self.agreement["statistic"].unique()]
        return integer_rows(table, ["pairs"])

    def judged_statement(self) -> str:
        """How many judgments stand behind the page's figures, by whom, made now or cached (Markdown)."""
        judged = self.instfol.instances.groupby("benchmark")["qid"].nunique()
        per_benchmark = markdown_text(", ".join(f"{name}: {n}" for name, n in judged.items()))
        stats = self.judge.stats
        systems = self.instfol.instances["system"].nunique()
        k = self.instfol.results[0].meta["k"] if self.instfol.results else K  # the cut-off the stage was given
        return (f"Judge {markdown_code(self.judge.name)} / {markdown_code(self.judge.model)} judged "
                f"**{len(self.pairs)} gold pairs** for the validation and **{judged.sum()} instance(s)** for "
                f"InstFol@{k} ({per_benchmark}), each with the instructed and the query-only top-{k} of {systems} "
                f"retriever(s). "
                f"{stats.judged} judgments were made in this run ({stats.failed} failed) and {stats.hits} answered "
                f"from the cache.{self.warning_statement()}")

    def warning_statement(self) -> str:
        """What is doubtful about judgments that still count (Markdown, escaped; empty when
        nothing is): how many of the successfully judged validation pairs and InstFol positions
        carry each distinct warning, e.g. answered by another model than asked for."""
        warnings = pd.concat([frame.loc[frame["error"].isna(), "warning"]
                              for frame in (self.pairs, self.instfol.positions) if "warning" in frame],
                             ignore_index=True)
        counts = error_counts(warnings, limit=3)
        if not len(counts):
            return ""
        listed = "; ".join(f"{markdown_text(row.error)} ({row.judgments})" for row in counts.itertuples(index=False))
        return (f" **{int(counts['judgments'].sum())} judgment(s) carry a warning** and are counted nonetheless: "
                f"{listed}.")

    def unscored_statement(self) -> str:
        """Which instances and levels of each system's InstFol have no value, and what a rerun does about it
        (Markdown, escaped, one item per collection and system; empty when every instance is scored):
        :func:`instir.judge.following.unscored_note`, what :func:`~instir.judge.following.instfol` warns."""
        notes = [(name, system, unscored_note(part))
                 for (name, system), part in self.instfol.instances.groupby(["collection", "system"], sort=False)]
        return "\n".join(f"- **{markdown_text(f'{name} / {system}')}**: {markdown_text(note)}"
                         for name, system, note in notes if note)

    def instfol_notes(self) -> list[str]:
        """The notes InstFol's table carries (notebook 04): the benchmarks whose value is 0 by construction, named
        once (:func:`~instir.judge.following.same_passages_note`)."""
        results = self.instfol.results
        same = dict.fromkeys(r.meta["benchmark"] for r in results if r.meta.get("same_passages"))
        return [same_passages_note(list(same), results[0].meta["k"])] if same else []

    def stability_statement(self) -> str:
        """Each system's verdict on the judge's spread (Markdown, escaped), after what a
        deterministic judge's spread is, said once (:func:`instir.judge.stability.deterministic_note`)."""
        lines = "\n".join(f"- **{markdown_text(f'{name} / {system}')}**: {markdown_text(verdict)}"
                          for name, system, verdict in self.verdicts)
        repeats = int(self.spread["repeats"].max()) if len(self.spread) else 1
        if self.judge.deterministic and repeats == 1 and len(self.spread):  # nothing unknown: no "judge again"
            return markdown_text(stability.deterministic_once_note())
        if not (self.judge.deterministic and repeats > 1):
            return lines
        return f"{markdown_text(stability.deterministic_note(repeats))}\n\n{lines}"

    def stability_table(self) -> pd.DataFrame:
        """The judge spread next to the query-sample spread (×100, two decimals), indexed by
        benchmark, system, scope, subset and level, so each part of a split table repeats them."""
        shown = self.spread.assign(level=self.spread["level"].astype("string").fillna(""))
        x100 = [c for c in shown.columns if c == "instfol" or c.startswith(("judge_", "sample_"))]
        shown[x100] = (shown[x100] * 100).round(2)
        return shown.set_index(["benchmark", "system", "scope", "subset", "level"])[[
            "instances", "repeats", "judged_repeats", "instfol", "judge_sd", "judge_low", "judge_high", "sample_sd",
            "sample_low", "sample_high", "identical_repeats", "dominant"]]


def rank_systems(summary: pd.DataFrame, metrics: pd.DataFrame) -> pd.DataFrame:
    """Kendall's tau between the systems' ranking by InstFol (their Average, or the subset's
    value) and by gold values of their instructed runs (the family's headline measure: the
    collection's Average, or its one benchmark's value), per collection with two systems or more
    scored both ways."""
    rankings = []
    pooled = metrics[metrics["level"] == "all"]
    for name, part in overall(summary).dropna(subset=["instfol"]).groupby("benchmark"):
        rows = pooled[(pooled["benchmark"].map(collection_of) == name) & (pooled["measure"] == headline(name)[0])]
        average = rows[rows["subset"] == "average"]
        gold = average if len(average) else rows if rows["benchmark"].nunique() == 1 else rows.iloc[:0]
        judged = dict(zip(part["system"], part["instfol"]))
        if len(judged.keys() & set(gold["system"])) >= 2:
            rankings.append({"benchmark": name, **ranking_agreement(judged, dict(zip(gold["system"], gold["value"])))})
    return pd.DataFrame(rankings)


def judge_spread(layout: ReportLayout, loaded: dict[str, Benchmark], pairs: Sequence[RunPair], judge: Any,
                 repeats: int, max_instances: int | None, seed: int = 0, k: int = K,
                 results: Sequence[InstFolResult] | None = None) -> tuple[pd.DataFrame, list[tuple[str, str, str]]]:
    """The judge's spread over ``repeats`` judgments of every pair's InstFol sample next to the
    query-sample spread (:mod:`instir.judge.stability`), written to ``judge/stability.csv``, and
    each (collection, system)'s verdict; the spread's ``attrs["repeats"]`` holds every pair's
    repeats' request counts (``judge_repeats``' meta). ``results``: the pairs' InstFol (same order,
    :func:`judge_pair`), each its pair's repeat 0, so it is judged once."""
    tables, metas = [], []
    for n, pair in enumerate(pairs):
        with warnings.catch_warnings():  # the pair's InstFol said it already (judge_pair): once per pair
            warnings.simplefilter("ignore", ShallowRunsWarning)
            warnings.simplefilter("ignore", UnscoredWarning)  # the spread's table shows a repeat's missing values
            frames = stability.judge_repeats(read_run(layout.require(layout.root / pair.instructed)),
                                             read_run(layout.require(layout.root / pair.query_only)),
                                             loaded[pair.benchmark], judge,
                                             repeats, k=k, max_instances=max_instances, seed=seed,
                                             first=results[n] if results is not None else None)
        metas.append(frames.attrs["meta"])
        tables.append(frames.assign(system=pair.system, benchmark=collection_of(pair.benchmark)))
    if not tables:
        return pd.DataFrame(), []
    repeated = pd.concat(tables, ignore_index=True)
    spread = pd.concat([stability.stability(part, seed=seed).assign(system=system, benchmark=name)
                        for (system, name), part in repeated.groupby(["system", "benchmark"], sort=False)],
                       ignore_index=True)
    atomic.write_frame(layout.stability, spread)
    spread.attrs["repeats"] = metas
    verdicts = [(name, system, stability.verdict(part))
                for (system, name), part in spread.groupby(["system", "benchmark"], sort=False)]
    return spread, verdicts


@writes_stage("04_judge_validation")
def judge_runs(out_dir: str | Path, benchmarks: Sequence[str] | None = None, *, backend: str = "hf", model: str = "",
               base_url: str = "", api_key_env: str = "OPENAI_API_KEY", timeout_s: float = 60.0,
               requests_per_minute: float | None = None,
               max_instances: int | None = 5, repeats: int = 2, validate: bool = True, judge: Any = None,
               host: Callable[[Callable[[], Any]], Any] | None = None, k: int = K, seed: int = 0,
               data_root: str | None = None, loaded: LoadedBenchmarks | None = None) -> Judging:
    """The judge stage: the judge (``backend``/``model``/``base_url``; the key from the
    environment variable named ``api_key_env``, never a value; at most ``requests_per_minute`` requests a minute;
    or ``judge``, one already built; ``host``, given, builds it from its maker elsewhere: the sweep's judge actor,
    which keeps the cache and the rate limit for the whole cluster) validated on at most ``max_instances``
    (None: 20) gold pairs per (subset, level, label) stratum of each benchmark (unless ``validate`` is False),
    InstFol@20 of every run pair of ``runs/runs.csv`` on a stratified sample (``seed``) of at most
    ``max_instances`` instances per benchmark (None: all), its ranking against
    ``metrics/metrics.csv`` (when the evaluate stage wrote it), and its spread over ``repeats``
    judgments (one: no judge spread, the query-sample spread alone); ``k`` is the lists' cut-off
    (InstFol@20). ``loaded``: as :func:`instir.report.layout.start_report` takes it."""
    from instir.judge.factory import make_judge, require_reachable

    per_stratum = max_instances or 20
    if validate:  # before the runs, the benchmarks and the judge load
        check_per_stratum(per_stratum, "max_instances (the judge validation's pairs per stratum)")
    check_max_instances(max_instances)
    layout = report_layout(out_dir)
    k = depth(k)
    benchmarks = None if benchmarks is None else benchmark_names(benchmarks)
    runs = read_runs_table(layout, benchmarks)
    judged = run_pairs(runs)
    if not judged:
        raise MissingInput(f"{layout.runs_table} lists no instructed and query-only run of one system: InstFol "
                           "compares the two (notebook 02 writes both)")
    report = start_report(out_dir, benchmarks if benchmarks is not None else list(dict.fromkeys(runs["benchmark"])),
                          data_root, loaded)
    if judge is None:
        make = functools.partial(make_judge, backend, model=model, base_url=base_url, api_key_env=api_key_env,
                                 timeout_s=timeout_s, requests_per_minute=requests_per_minute, cache=layout.judgments)
        judge = host(make) if host is not None else make()
        if backend == "openai":
            require_reachable(base_url, min(timeout_s, 5.0))
    validations = ({name: validate_judge(bench, judge, per_stratum=per_stratum, seed=seed)
                    for name, bench in report.benchmarks.items()} if validate else {})
    pairs = pd.concat([v.pairs.assign(benchmark=name) for name, v in validations.items()], ignore_index=True) \
        if validations else pd.DataFrame(columns=["benchmark", "norm", "error", "warning"])
    stats = pd.concat([*(v.agreement.assign(benchmark=name) for name, v in validations.items()),
                       agreement(pairs).assign(benchmark="all")], ignore_index=True) if validations else pd.DataFrame()
    layout.judge.mkdir(parents=True, exist_ok=True)
    if validations:
        atomic.write_frames({layout.judge / "validation_pairs.csv": pairs, layout.judge / "validation.csv": stats})
    results = [judge_pair(layout.root, report.benchmarks[p.benchmark], p, judge, max_instances, seed, k)
               for p in judged]
    tables = write_instfol(layout, judged, results)
    spread, verdicts = judge_spread(layout, report.benchmarks, judged, judge, repeats, max_instances, seed, k,
                                    results)
    metrics = (read_table(layout, layout.metrics_table, dtype={"level": str}) if layout.metrics_table.is_file()
               else pd.DataFrame(columns=["benchmark", "subset", "level", "measure", "system", "value"]))
    return Judging(judge=judge, backend=backend, max_instances=max_instances, validations=validations, pairs=pairs,
                   agreement=stats, instfol=tables, rankings=rank_systems(tables.summary, metrics), spread=spread,
                   summary=report.summary, bundled=backend == "hf" and not model, verdicts=verdicts)
