"""The compare stage (notebook 05): every reproduced number (``metrics/metrics.csv`` and
``judge/instfol.csv``) next to the number the papers report, with the delta, the tolerance, a
verdict and the known reasons for divergence; InstFol tolerances widened by the judge's own
spread (``judge/stability.csv``) where it was measured; the long-text windowing of every run;
and the coverage of the papers' systems by the kit's cards. Written under ``paper_tables/``.
MTEB ``TaskResult`` files put under ``mteb_results/`` are compared as well, beside MTEB's
results store. Reads only files: no benchmark is loaded.
"""

from __future__ import annotations

import numbers
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from instir import atomic
from instir.errors import UserError
from instir.judge.stability import tolerance_widening
from instir.metrics.measures import InstFol
from instir.papers import (
    REPORTED_FILES,
    compare_to_papers,
    known_divergences,
    load_mteb_results,
    load_reported,
    match_systems,
    not_comparable_reason,
)
from instir.papers.comparison import NO_VALUE, OUTSIDE, WITHIN
from instir.papers.views import ReportedView, reported_curves, reported_views
from instir.parameters import choices
from instir.report.html import markdown_text
from instir.report.layout import ReportLayout, read_runs_table, read_table, report_layout
from instir.report.manifest import data_checks, read_datasets
from instir.report.provenance import rewritten_inputs, stage_records
from instir.report.record import read_record
from instir.report.stage_writer import writes_stage
from instir.retrieval.mteb import is_mteb_predictions, read_mteb_predictions
from instir.retrieval.runs import ranked_depth, read_run, read_sidecar, run_engine, run_template, run_windowing
from instir.stages.judge import JUDGE_COLUMNS, RUN_FILES
from instir.systems.cards import SystemCard, load_cards
from instir.systems.coverage import card_row_keys, coverage_matrix, with_row_templates

#: The columns of a reproduced number.
REPRODUCED_COLUMNS = ["system", "benchmark", "subset", "level", "measure", "value"]
#: the fewest points a plot is drawn with (one point says nothing a table does not: a line says so instead)
MIN_POINTS = 2


@dataclass
class PaperComparison:
    """What the compare stage wrote: ``compared`` (``paper_tables/comparison.csv``), why the
    numbers are not comparable (``reason``, None when they are), each run's ``windowing``, how
    system names match the papers' models (``matches``), the comparison with InstFol tolerances
    widened by the judge's spread (``widened``, None without ``judge/stability.csv``), the
    ``coverage`` of the papers' systems and the ``reported`` tables by paper."""

    compared: pd.DataFrame
    reason: str | None
    windowing: pd.DataFrame
    matches: pd.DataFrame
    widened: pd.DataFrame | None
    coverage: pd.DataFrame
    reported: dict[str, pd.DataFrame]

    def verdicts(self) -> pd.DataFrame:
        """How many reproduced numbers got each verdict, per paper: each number (a sample's apart from the benchmark's
        it samples) counts once, under the verdict of the row that judges it; the rows shown beside it, not judged (a
        secondary source's rerun of the paper's number, IFIR Table 9's copy of Table 3's), do not count it again."""
        number = [c for c in ("system", "benchmark", "subset_id", "level", "setting", "measure_reproduced", "sample")
                  if c in self.compared.columns]
        judged_first = self.compared["verdict"].map({WITHIN: 0, OUTSIDE: 0, NO_VALUE: 1}).fillna(2)
        distinct = (self.compared.assign(_order=judged_first).sort_values("_order", kind="stable")
                    .drop_duplicates(["paper", *number]))
        return distinct.groupby(["paper", "verdict"]).size().rename("numbers").reset_index()

    def sources(self) -> pd.DataFrame:
        """The table and source of every reported number compared."""
        return self.compared[["paper", "table", "source"]].drop_duplicates()

    def changed_verdicts(self) -> int:
        """Verdicts the judge's spread changed (0 without a widened comparison)."""
        if self.widened is None:
            return 0
        return int((self.widened["within_tolerance"] != self.compared["within_tolerance"]).fillna(False).sum())

    def scaled(self) -> pd.DataFrame:
        """The compared rows with reported and reproduced ×100 (for plots)."""
        return self.compared.assign(**{c: self.compared[c] / self.compared["scale"] * 100
                                       for c in ("reported", "reproduced")})

    def scatter_rows(self) -> pd.DataFrame | None:
        """The rows of the reproduced-vs-reported scatter (×100), None with fewer than
        :data:`MIN_POINTS` (see :meth:`plot_notes`)."""
        return self.scaled() if len(self.compared) >= MIN_POINTS else None

    def per_level(self) -> list[tuple[str, pd.DataFrame]]:
        """The compared rows of each metric that has levels (×100), for per-level curves: a ``line`` per system in
        the measure that gives the verdict (``bm25 · nDCG@20[ifir-native]``: one protocol per line) and per paper
        model its reported values (``BM25 · paper``), on the same axes, each point's ``value``; a metric with
        fewer than :data:`MIN_POINTS` such rows has none (see :meth:`plot_notes`)."""
        curves = []
        for metric, rows in self._levelled():
            if len(rows) < MIN_POINTS:
                continue
            ours = rows.assign(line=rows["system"].astype(str) + " · " + rows["measure_reproduced"],
                               value=rows["reproduced"])
            theirs = rows.drop_duplicates(["model", "subset_id", "level"])
            curves.append((metric, pd.concat([ours, theirs.assign(line=theirs["model"].astype(str) + " · paper",
                                                                  value=theirs["reported"])], ignore_index=True)))
        return curves

    @property
    def verdict_flags(self) -> dict[str, str]:
        """How a table colours each verdict (``flags`` of :func:`instir.report.tables.present`): within tolerance
        good, outside bad, every *not comparable* muted."""
        return {WITHIN: "good", OUTSIDE: "bad", **{verdict: "muted" for verdict in self.compared["verdict"]
                                                   if str(verdict).startswith("not comparable")}}

    def plot_notes(self) -> list[str]:
        """A line (Markdown) for each plot left out because it would show a single point."""
        notes = []
        if len(self.compared) == 1:
            notes.append("One aligned number: no scatter of reproduced against reported (the table above has it).")
        notes += [f"{markdown_text(metric)} per level: one aligned number, no curve (the table above has it)."
                  for metric, rows in self._levelled() if len(rows) < MIN_POINTS]
        return notes

    def _levelled(self) -> list[tuple[str, pd.DataFrame]]:
        shown = self.scaled()
        return list(shown[shown["level"].notna()].groupby("metric"))

    def divergences(self) -> list[tuple[str, pd.DataFrame]]:
        """The known reasons for divergence (the keys the ``reasons`` column lists) as the
        Appendix shows them: those that concern InstFol (notebook 04's numbers), then the others."""
        every, instfol = known_divergences(), known_divergences("InstFol")
        return [("Why the kit's InstFol can differ from the paper's (notebook 04)", instfol),
                ("The other known reasons for divergence", every[~every["key"].isin(instfol["key"])])]

    def reported_views(self) -> list[ReportedView]:
        """The papers' tables and reported scores, family by family (:func:`instir.papers.views.reported_views`)."""
        return reported_views(self.reported)

    def reported_curves(self) -> list[tuple[str, pd.DataFrame]]:
        """The papers' per-level tables plotted as curves (:func:`instir.papers.views.reported_curves`)."""
        return reported_curves(self.reported)


def _as_key(frame: pd.DataFrame) -> pd.DataFrame:
    """``subset`` and ``level`` as text, so CSV-read NaN and ``all`` align."""
    return frame.assign(subset=frame["subset"].astype("string").fillna(""),
                        level=frame["level"].astype("string").fillna(""))


def reproduced_numbers(layout: ReportLayout) -> pd.DataFrame:
    """The metrics and (where the judge stage ran) InstFol values of the report, one row per
    system, benchmark, subset, level and measure (InstFol as ``InstFol@<k>``, the k its lists were cut at, as
    ``judge/instfol.csv`` says; a table of an earlier version says none: the k its stage's record holds, else
    20), so an InstFol@10 is never aligned with a paper's InstFol@20; and with the ``depth`` its shallower run
    ranks and the ``instances`` judged, which its verdict needs. Where a retrieval wrote the runs folder again
    since the judge stage read it (and the judge stage then failed or did not run), an InstFol whose runs are no
    longer the ones ``runs/runs.csv`` lists, or were changed since, is left out with a warning: it is no number of
    the folder's runs; one of runs still listed and unchanged (another benchmark retrieved into the folder) stays."""
    metrics = read_table(layout, layout.metrics_table, REPRODUCED_COLUMNS)
    if not layout.instfol.is_file():
        return metrics[REPRODUCED_COLUMNS]
    record = read_record(layout.root)  # once: what the judge stage read, and the k it judged at
    instfol = read_table(layout, layout.instfol)
    if "runs" in rewritten_inputs(layout.root, "04_judge_validation", record):  # a retrieval since: which runs?
        kept = _of_listed_runs(layout, instfol)
        if not kept.all():
            gone = instfol[~kept]
            left = list(dict.fromkeys(f"{s} on {b}" + (f" ({sub})" if isinstance(sub, str) and sub != b else "")
                                      for s, b, sub in zip(gone["system"], gone["benchmark"], gone["subset"])))
            why = ("its runs are no longer the ones runs/runs.csv lists, or were changed since they were judged"
                   if RUN_FILES in instfol.columns else "the table, of an earlier version, names no run files")
            warnings.warn(f"{layout.instfol}: the InstFol of {', '.join(left)} is left out of the comparison after "
                          f"a later retrieval: {why} (judge these runs again)", stacklevel=2)
        instfol = instfol[kept]
    judged = [c for c in JUDGE_COLUMNS if c in instfol.columns]
    recorded = (stage_records(layout.root, record).get("04_judge_validation") or [{}])[0].get("parameters", {}).get("k")
    ks = pd.to_numeric(instfol["k"], errors="coerce") if "k" in instfol else pd.Series(recorded, index=instfol.index)
    measure = [str(InstFol(int(k))) if isinstance(k, numbers.Real) and float(k).is_integer() and k > 0
               else f"InstFol@{k}" if "k" in instfol else str(InstFol()) for k in ks]
    depth = ["depth"] if "depth" in instfol else []  # of both runs an InstFol compares (none in earlier versions)
    counted = ["instances"] if "instances" in instfol else []  # judged: a verdict needs every one of the slice's
    return pd.concat([metrics, instfol.rename(columns={"instfol": "value"}).assign(measure=measure)],
                     ignore_index=True)[REPRODUCED_COLUMNS + judged + depth + counted]


def _of_listed_runs(layout: ReportLayout, instfol: pd.DataFrame) -> pd.Series:
    """Per row of ``judge/instfol.csv``, whether every run file it compared (:data:`RUN_FILES`) is still listed in
    ``runs/runs.csv`` and unchanged since its sidecar (a file's name holds its run's key): False for a table of an
    earlier version, which names none."""
    if RUN_FILES not in instfol.columns or not layout.runs_table.is_file():
        return pd.Series(False, index=instfol.index)
    listed = set(read_runs_table(layout)["run_file"].astype(str))
    named = instfol[RUN_FILES].astype(str).str.split("; ")
    unchanged = {f: f in listed and read_sidecar(layout.root / f) is not None  # each named file hashed once
                 for f in set().union(*named)}
    return named.map(lambda files: all(unchanged[f] for f in files))


def reported_tables(mteb_results: Sequence[str | Path] = ()) -> dict[str, pd.DataFrame]:
    """The reported tables by paper (each family's, and ``mteb``); the MTEB ``TaskResult``
    files or folders in ``mteb_results`` (:func:`instir.papers.load_mteb_results`) join MTEB's
    results store under ``mteb``."""
    reported = {paper: load_reported(paper) for paper in REPORTED_FILES}
    if mteb_results:
        reported["mteb"] = pd.concat([reported["mteb"], load_mteb_results(mteb_results)], ignore_index=True)
    return reported


def _scored_queries(layout: ReportLayout) -> dict[tuple[str, str], set[str]]:
    """The queries each run's numbers were scored on, by (benchmark, system), from ``metrics/per_query.parquet``:
    its benchmark's, which :func:`_depth_now` measures a run over as the evaluate stage did, without loading the
    benchmark (empty where the file is absent or unreadable)."""
    try:
        scored = pd.read_parquet(layout.per_query, columns=["benchmark", "system", "qid"]).drop_duplicates()
    except (OSError, ValueError, KeyError):
        return {}
    return {(str(b), str(s)): set(part["qid"].astype(str)) for (b, s), part in scored.groupby(["benchmark", "system"])}


def _depth_now(path: Path, sidecar: dict | None, listed: object, queries: set[str] | None) -> object:
    """A listed run's depth as its file holds it now (:func:`instir.retrieval.runs.ranked_depth`: its vouched
    sidecar's k, else the fewest documents it ranks for one of ``queries``, those its numbers were scored on (None:
    every query it answers), in a TREC run or MTEB's predictions: a run edited since its sidecar, or one of one's
    own); the runs list's k where no run can be read there any more (moved or deleted since it was scored)."""
    if sidecar and sidecar.get("k"):
        return sidecar["k"]
    try:
        return ranked_depth(read_mteb_predictions(path).scores if is_mteb_predictions(path) else read_run(path),
                            queries=queries)
    except (UserError, OSError):
        return listed


@writes_stage("05_paper_tables")
def paper_tables(out_dir: str | Path, mteb_results: Sequence[str | Path] | None = None, *,
                 papers: Sequence[str] | None = None) -> PaperComparison:
    """The compare stage (see the module docstring); bundled-sample numbers are aligned with the
    papers' rows and given the verdict *not comparable (SAMPLE)*. MTEB ``TaskResult`` files join
    MTEB's results store: those in ``mteb_results`` (files or folders), by default those under
    the report's ``mteb_results/`` folder when it exists. ``papers`` keeps only those reported
    tables (``["mteb"]`` for numbers scored under MTEB's protocol); InstFol joins in where the
    judge stage ran."""
    if papers is not None:  # before anything is read
        papers = choices(papers, list(REPORTED_FILES), "paper", where="parameter 'papers'")
    if isinstance(mteb_results, (str, Path)):  # one file or folder
        mteb_results = [mteb_results]
    layout = report_layout(out_dir)
    runs = (read_runs_table(layout) if layout.runs_table.is_file()
            else pd.DataFrame(columns=["benchmark", "system", "run_file"]))
    sidecars = [read_sidecar(layout.root / run_file) for run_file in runs["run_file"]]
    listed = runs["k"] if "k" in runs else [None] * len(runs)
    scored = _scored_queries(layout)
    windowing = runs[["benchmark", "system"]].assign(
        windowing=[run_windowing(meta) for meta in sidecars], engine=[run_engine(meta) for meta in sidecars],
        card_paper=[run_card_paper(meta) for meta in sidecars], template=[run_template(meta) for meta in sidecars],
        k=[_depth_now(layout.root / f, meta, k, scored.get((str(b), str(s))))
           for f, meta, k, b, s in zip(runs["run_file"], sidecars, listed, runs["benchmark"], runs["system"])],
        other_data=_other_data(layout, runs))
    if mteb_results is None:
        mteb_results = [layout.mteb_results] if layout.mteb_results.is_dir() else []
    reported = reported_tables(mteb_results)
    every_reported = pd.concat([table for paper, table in reported.items() if papers is None or paper in papers],
                               ignore_index=True)
    cards = load_cards()  # once: the rows' templates, the runs' rows and the coverage table join the same cards
    every_reported = with_row_templates(every_reported, cards)  # once, for both comparisons below
    reproduced = reproduced_numbers(layout)
    reason = not_comparable_reason(reproduced)
    datasets = read_datasets(layout.root)
    data, mteb_data = data_checks(datasets), data_checks(datasets, counted_by="mteb")
    scored = (stage_records(layout.root).get("03_metrics") or [{}])[0].get("parameters", {})
    protocol = str(scored.get("protocol") or "authors")  # what the evaluate stage scored the numbers under
    model_map = run_row_keys(runs, sidecars, cards)
    compared = compare_to_papers(reproduced, every_reported, model_map=model_map, runs=windowing, data=data,
                                 sample_ok=True, protocol=protocol, mteb_data=mteb_data)
    widened = None
    if len(compared) and layout.stability.is_file():
        keys = ["system", "benchmark", "subset", "level", "measure"]
        widen = tolerance_widening(read_table(layout, layout.stability))
        widened = compare_to_papers(_as_key(reproduced).merge(_as_key(widen), on=keys, how="left"), every_reported,
                                    model_map=model_map, runs=windowing, data=data, sample_ok=True, protocol=protocol,
                                    mteb_data=mteb_data)
    instructed = [s for s in dict.fromkeys(reproduced["system"]) if not str(s).endswith("(query-only)")]
    coverage = coverage_matrix(layout.root, cards)
    # one set: an earlier run's verdict note or widened table never stays beside this run's comparison
    tables = layout.paper_tables
    files = {tables / "comparison.csv": atomic.frame_bytes(tables / "comparison.csv", compared),
             tables / "coverage.csv": atomic.frame_bytes(tables / "coverage.csv", coverage)}
    if widened is not None:
        files[tables / "comparison_widened.csv"] = atomic.frame_bytes(tables / "comparison_widened.csv", widened)
    if reason:
        files[tables / "not_comparable.txt"] = reason + "\n"
    tables.mkdir(parents=True, exist_ok=True)
    atomic.write_files(files, remove=[tables / name for name in ("comparison_widened.csv", "not_comparable.txt")
                                      if tables / name not in files])
    return PaperComparison(compared, reason, windowing, match_systems(instructed, model_map), widened, coverage,
                           reported)


def _other_data(layout: ReportLayout, runs: pd.DataFrame) -> list[str]:
    """Per listed run, what the evaluate stage found it was retrieved over other than the benchmark it scored
    (``metrics/run_checks.csv``'s ``other_data``: ``corpus``, ``queries``; empty when the same or not known, the
    file absent or unreadable, as :func:`_scored_queries` reads its file)."""
    try:
        checks = pd.read_csv(layout.run_checks, dtype=str, keep_default_na=False)
    except (OSError, ValueError):
        return [""] * len(runs)
    if not {"benchmark", "system", "other_data"} <= set(checks.columns):
        return [""] * len(runs)
    found = dict(zip(zip(checks["benchmark"], checks["system"]), checks["other_data"]))
    return [found.get((str(b), str(s)), "") for b, s in zip(runs["benchmark"], runs["system"])]


def run_card_paper(meta: Mapping | None) -> str:
    """The paper of the system card a run's sidecar records ("" for a run of no card): its run is compared with that
    paper's rows only (``card_paper`` of :func:`instir.papers.compare_to_papers`)."""
    card = (meta or {}).get("system")
    return str(card.get("paper") or "") if isinstance(card, Mapping) else ""


def run_row_keys(runs: pd.DataFrame, sidecars: Sequence[Mapping | None],
                 cards: Mapping[str, SystemCard] | None = None) -> dict[str, str]:
    """System name -> the model key of the paper row its run's system card reproduces (the card its sidecar
    records, joined to rows as the coverage matrix joins them: :func:`card_row_keys`), so a run named after its
    card (``BM25 (FollowIR)``) or renamed (``--run mine=FILE``) meets that row. Only an instructed run (``runs``'
    ``variant``; none given: instructed) meets a paper's row: the query-only run of the same card is InstFol's other
    half, no number the paper's row reports. A run of no card, or of a kit variant, is matched by its name. A card's
    run on another family's benchmark meets that family's row of its model too, and is told not comparable there
    (:func:`run_card_paper`). ``cards``: the cards to join (None: :func:`~instir.systems.cards.load_cards`)."""
    row_keys = card_row_keys(cards)
    variants = runs["variant"].fillna("instructed") if "variant" in runs else ["instructed"] * len(runs)
    out: dict[str, str] = {}
    for system, variant, meta in zip(runs["system"], variants, sidecars):
        card = (meta or {}).get("system")
        key = row_keys.get(str(card.get("name"))) if isinstance(card, Mapping) and not card.get("variant_of") else None
        if key and variant in ("instructed", ""):
            out.setdefault(str(system), key)
    return out
