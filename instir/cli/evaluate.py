"""``instir evaluate``: score runs (TREC files, or MTEB ``*_predictions.json`` files) on a
benchmark with the evaluate stage, under the authors' protocol or MTEB's (``--protocol mteb``):
the runs are listed in ``--out``'s ``runs/runs.csv`` (by their own paths: nothing is copied)
and the stage writes ``metrics/`` there, the folder notebook 03 writes and notebooks 04–05 read
(with several runs, the comparisons against the baseline and a LaTeX table with ranx's
significance marks); with ``--papers``, the compare stage writes ``paper_tables/`` beside it.
The table and the comparisons are printed as well."""

from __future__ import annotations

import argparse
import re
import unicodedata
import warnings
from pathlib import Path

from instir.cli.options import (
    add_benchmark_arguments,
    benchmark_from_args,
    file_system_name,
    positive_int,
    refuse_written_input,
    report_folder,
    whole_number,
)
from instir.errors import UsageError, quoted, unknown
from instir.metrics.measures import PROTOCOLS
from instir.terminal import terminal_text


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``evaluate`` subcommand."""
    p = subparsers.add_parser(
        "evaluate", help="score TREC runs on a benchmark",
        description="Score runs on a benchmark with the evaluate stage: the family's measures (trec_eval via "
                    "ir-measures, Robustness on InstructIR, IFIR-native nDCG/MRR on IFIR); with several runs, "
                    "paired tests and bootstrap CIs against a baseline (Holm-corrected). Writes runs/runs.csv and "
                    "metrics/ into --out, the folder notebook 03 writes.")
    add_benchmark_arguments(p)
    p.add_argument("--run", dest="runs", action="extend", nargs="+", required=True, metavar="[NAME=]FILE",
                   help="TREC run file(s), or MTEB prediction files (<Task>_predictions.json), one system each, "
                        "NAME=FILE naming it (split at the first '=', unless the whole value is an existing file); "
                        "--run may repeat")
    p.add_argument("--name", dest="names", action="extend", nargs="+", default=[], metavar="NAME",
                   help="the systems' names, one per --run in order, instead of NAME=FILE (default: a TREC file's "
                        "name without .trec, .run or .txt, an MTEB file's model)")
    p.add_argument("--protocol", choices=PROTOCOLS, default="authors",
                   help="authors: the papers' official scoring (default); mteb: MTEB 2.26's (its measure names, "
                        "averaging over the queries in the run, 5-decimal rounding, its self-hit rule)")
    p.add_argument("--papers", action="store_true",
                   help="also line the scores up with the numbers the papers and MTEB's results store report "
                        "(with --protocol mteb: MTEB's numbers only), in paper_tables/")
    p.add_argument("--mteb-results", nargs="+", default=None, metavar="PATH",
                   help="MTEB TaskResult files or folders (<Task>.json) to show beside them (implies --papers)")
    p.add_argument("--baseline", default=None, help="system to compare against (default: the first run)")
    p.add_argument("--measures", nargs="+", default=None, help="e.g. nDCG@10 RR@10 R@100 (default per benchmark)")
    p.add_argument("--out", default=None, type=Path,
                   help="report folder (default: ./reports/evaluation-<benchmark>-<setting>, -mteb under that "
                        "protocol: under the current folder, never beside a run file)")
    p.add_argument("--resamples", type=positive_int, default=None,
                   help="permutation/bootstrap resamples (default 2000)")
    p.add_argument("--seed", type=whole_number, default=0, help="seed of the permutation test and the bootstrap")
    p.set_defaults(handler=evaluate_command)


def named_runs(values: list[str], names: list[str]) -> tuple[list[Path], list[str | None]]:
    """The ``--run`` values as paths and the systems' names (None: named after the file).
    ``NAME=FILE`` names its run, split at the first ``=``, unless the whole value is an existing
    file (a path that holds ``=`` stays a path); ``--name`` names every run in order instead."""
    paths: list[Path] = []
    given: list[str | None] = []
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or Path(value).exists():
            paths.append(Path(value))
            given.append(None)
        elif not name.strip():
            raise UsageError(f"--run {value}: empty system name before '=' (write NAME=FILE)")
        else:
            paths.append(Path(rest))
            given.append(name)
    if any(not name.strip() for name in names):
        raise UsageError("--name: empty system name")
    if names and any(given):
        raise UsageError("name the runs either as --run NAME=FILE or with --name, not both")
    if names and len(names) != len(paths):
        raise UsageError(f"--name gives {len(names)} name(s) for {len(paths)} run(s): one per --run")
    return paths, list(names) or given


def listed_runs(paths: list[Path], names: list[str | None], benchmark, out: Path,
                protocol: str) -> tuple[list[dict], dict]:
    """The ``runs.csv`` rows of the ``--run`` files, in order, and the runs as read (by their
    ``run_file``, as the evaluate stage reads them under ``protocol``): each read here, so a bad
    file is refused before anything is written, named by ``names`` (one per path, None where
    not given: then after its file, an MTEB prediction file after the model its
    ``mteb_model_meta`` gives), listed by its path (relative to ``out`` when inside it)."""
    from instir.retrieval.mteb import is_mteb_predictions, read_mteb_predictions
    from instir.retrieval.runs import ranked_depth, read_run, read_sidecar, refuse_unanswered
    from instir.stages.evaluate import as_scored
    from instir.stages.retrieve import listed_row

    rows, read = [], {}
    for i, path in enumerate(paths):
        refuse_written_input(out, "--run", path)
        if is_mteb_predictions(path):
            predictions = read_mteb_predictions(path)
            run, name = as_scored(predictions, benchmark, protocol), predictions.model_name or path.stem
            sidecar = read_sidecar(path) or {}
        else:
            run, name = read_run(path), file_system_name(path)
            refuse_unanswered(run, run.df["qid"].unique(), benchmark.queries, benchmark.name)  # before any writing
            # read_run's meta is the sidecar that vouches for the bytes it read (their hash), where one does
            sidecar = run.meta if "trec_sha256" in run.meta else {}
        if sidecar and sidecar.get("rows") != len(run):  # its digest matches, yet it was edited: not this run's
            warnings.warn(f"{path}'s sidecar says {quoted(sidecar.get('rows'))} rows, the run holds {len(run)}: "
                          "its template and k are not used")
            sidecar = {}
        resolved = path.resolve()
        listed = resolved.relative_to(out.resolve()).as_posix() if resolved.is_relative_to(out.resolve()) \
            else str(resolved)
        template = (sidecar.get("template") or {}).get("name")
        rows.append(listed_row(benchmark, names[i] or name, listed, template=template,
                               k=ranked_depth(run, sidecar.get("k"), benchmark.queries)))
        read[listed] = run
    systems = [row["system"] for row in rows]
    if len(set(systems)) != len(systems):
        raise UsageError(f"run files need distinct names (got {systems}): name them as --run NAME=FILE or with "
                         "--name (an MTEB file is named after its model)")
    alike: dict[str, str] = {}  # two names a table or a page shows alike are no two systems to a reader
    for system in systems:
        first = alike.setdefault(unicodedata.normalize("NFC", system).strip(), system)
        if first != system:
            raise UsageError(f"run files need names that read apart: {ascii(first)} and {ascii(system)} differ only in "
                             "Unicode form (NFC/NFD) or in spaces around them, and show alike in every table; name "
                             "them as --run NAME=FILE or with --name")
    return rows, read


#: the comparison's columns that hold scores (printed ×100, one decimal, as the report tables do)
SCORE_COLUMNS = ("mean", "baseline_mean", "diff", "ci_low", "ci_high")


def comparison_text(comparisons) -> str:
    """The comparisons against the baseline as printed: scores ×100 with one decimal, p-values
    as the report tables print them (``<0.001``), ``significant`` as yes/no."""
    import pandas as pd

    from instir.report.tables import format_fixed, format_p

    shown = comparisons[["measure", "system", *SCORE_COLUMNS, "better", "worse", "p_ttest_holm", "p_perm_holm",
                         "significant"]].copy()
    for column in SCORE_COLUMNS:
        shown[column] = [format_fixed(100 * v, 1) for v in shown[column]]
    for column in ("p_ttest_holm", "p_perm_holm"):
        shown[column] = shown[column].map(format_p)
    shown["significant"] = shown["significant"].map({True: "yes", False: "no"})
    with pd.option_context("display.width", 200, "display.max_columns", 50):
        return shown.to_string(index=False)


def table_label(table: str) -> str:
    """Where a reported number comes from, short: a secondary source's table as ``<source> <table> (secondary)``
    (``SECONDARY: Promptriever (arXiv:2409.11136) Table 2 - NOT the InstructIR paper`` -> ``Promptriever Table 2
    (secondary)``), a paper's own ``Table N (…)`` as printed, another label without its trailing remark
    (``InstructIR paper, results text (largest …)`` -> ``InstructIR paper, results text``)."""
    text = str(table)
    if text.startswith("SECONDARY:"):
        source = re.sub(r"\s*\([^)]*\)", "", text.removeprefix("SECONDARY:").split(" - ")[0]).strip()
        return f"{source} (secondary)"
    return text if text.startswith("Table") else re.sub(r"\s*\([^)]*\)$", "", text)


def papers_text(compared) -> str:
    """The aligned numbers as printed (×100 as the papers print them, one line per number), each with the table
    (and source, where not the paper's own) it is compared with (:func:`table_label`)."""
    import pandas as pd

    from instir.papers import comparison_view
    from instir.report.tables import format_fixed

    view = comparison_view(compared)
    view["table"] = view["table"].map(table_label)
    shown = view[["paper", "table", "paper model", "system", "subset", "level", "measure", "reported", "reproduced",
                  "delta", "verdict"]].copy()
    for column in ("reported", "reproduced", "delta"):
        shown[column] = [format_fixed(100 * v, 2) for v in shown[column]]
    shown["subset"] = shown["subset"].fillna("")
    shown["level"] = shown["level"].astype("string").fillna("")
    with pd.option_context("display.width", 200, "display.max_columns", 50, "display.max_colwidth", 40):
        return shown.to_string(index=False)


def evaluate_command(args: argparse.Namespace) -> int:
    """Handler of ``instir evaluate``."""
    from instir.metrics import mteb, stats
    from instir.metrics.measures import parse_measures
    from instir.metrics.scoring import refuse_judged
    from instir.papers.loader import load_mteb_results

    if args.resamples is not None:  # a bad value fails before anything is read
        stats.check_resamples(args.resamples)
    paths, names = named_runs(args.runs, args.names)
    if args.measures and args.protocol == "mteb":  # a bad name fails before anything is read
        for measure in args.measures:
            mteb.mteb_measure(measure)
    elif args.measures:
        refuse_judged(parse_measures(args.measures))
    if args.mteb_results:  # a missing or unreadable result file fails before anything is written
        load_mteb_results(args.mteb_results)
    benchmark = benchmark_from_args(args)
    suffix = "" if args.protocol == "authors" else f"-{args.protocol}"
    out = args.out or Path("reports") / f"evaluation-{benchmark.name.replace('/', '_')}-{benchmark.setting}{suffix}"
    rows, read = listed_runs(paths, names, benchmark, out, args.protocol)
    systems = [row["system"] for row in rows]
    baseline = args.baseline or systems[0]
    if baseline not in systems:
        raise unknown("--baseline", baseline, systems, more=" (the systems are named after the run files, or --name)")
    out = report_folder(out)  # after the runs are found, before anything is written
    from instir.report.lock import FolderLock

    with FolderLock(out, "instir evaluate"):
        return _report(args, benchmark, out, sorted(rows, key=lambda row: row["system"] != baseline), read, baseline)


def _report(args: argparse.Namespace, benchmark, out: Path, rows: list[dict], read: dict, baseline: str) -> int:
    """Run the evaluate stage (and with ``--papers`` the compare stage) on the listed runs; print."""
    import pandas as pd

    from instir.metrics import stats, table
    from instir.report.layout import LoadedBenchmarks, ReportLayout
    from instir.stages.evaluate import score_runs, stage_tables
    from instir.stages.retrieve import write_runs_table

    layout = ReportLayout(out)
    write_runs_table(layout, rows)
    loaded = LoadedBenchmarks(args.root, record_in=out)
    loaded.add(benchmark)
    result = score_runs(out, measures=args.measures, protocol=args.protocol, compare="all", loaded=loaded, read=read,
                        n_resamples=args.resamples or stats.N_RESAMPLES, seed=args.seed)
    print(f"benchmark: {benchmark.label}, revision {benchmark.revision}, protocol {args.protocol}")
    for name, check in result.checks.items():  # a name's newline escaped too: no line of its own to forge
        if not check.ok or check.missing_qids:
            print(f"  {terminal_text(name)}: {terminal_text(check.summary())}")
    if result.excluded:
        print(f"  {len(result.excluded)} qrels queries have no relevant document and are not averaged")
    for note in result.notes:
        print(f"  {terminal_text(note)}")
    print("scores ×100:")
    with pd.option_context("display.width", 200, "display.max_columns", 50):
        print(table.wide(result.table).to_string())
    if len(rows) > 1:
        print(f"\nagainst baseline {baseline!r} (scores ×100; p-values Holm-corrected across systems; significant at "
              f"p ≤ {stats.SIGNIFICANCE_LEVEL}, the level of the .tex's letters, which correct across every pair):")
        print(comparison_text(result.comparisons))
    written = [layout.runs_table, layout.metrics_table, layout.per_query, layout.comparisons,
               *stage_tables(layout.metrics)]
    if args.papers or args.mteb_results:
        from instir.stages.compare import paper_tables  # only here: the compare stage's modules cost a start-up

        compared = paper_tables(out, args.mteb_results or [], papers=["mteb"] if args.protocol == "mteb" else None)
        if len(compared.compared):
            print("\nagainst the reported numbers (×100):")
            print(papers_text(compared.compared))
        else:
            print("\nagainst the reported numbers: no reported number for these systems, measures and slices")
        written.append(layout.paper_tables / "comparison.csv")
    print(f"\nwrote {out}/: " + ", ".join(p.relative_to(out).as_posix() for p in written))
    return 0
