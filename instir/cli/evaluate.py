"""``instir evaluate``: score one or more runs (TREC files, or MTEB ``*_predictions.json``
files) on a benchmark under the authors' protocol or MTEB's (``--protocol mteb``), print the
table (and, for several runs, the comparisons against a baseline; with ``--papers``, the
numbers the papers, MTEB's results store and given MTEB result files report) and write
CSV/JSON next to the runs (for several runs also a LaTeX table with ranx's significance marks,
:mod:`instir.metrics.latex`)."""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

from instir.cli.options import add_benchmark_arguments, benchmark_from_args, output_folder, positive_int
from instir.errors import UsageError, unknown
from instir.metrics.measures import PROTOCOLS


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``evaluate`` subcommand."""
    p = subparsers.add_parser(
        "evaluate", help="score TREC runs on a benchmark",
        description="Score TREC runs on a benchmark: standard measures (trec_eval via ir-measures), "
                    "Robustness on InstructIR, IFIR-native nDCG/MRR on IFIR; with several runs, paired "
                    "tests and bootstrap CIs against a baseline (Holm-corrected).")
    add_benchmark_arguments(p)
    p.add_argument("--run", dest="runs", action="extend", nargs="+", required=True, metavar="FILE",
                   help="TREC run file(s), or MTEB prediction files (<Task>_predictions.json), one system each "
                        "(named after the file; an MTEB file after its model); --run may repeat")
    p.add_argument("--protocol", choices=PROTOCOLS, default="authors",
                   help="authors: the papers' official scoring (default); mteb: MTEB 2.26's (its measure names, "
                        "averaging over the queries in the run, 5-decimal rounding, its self-hit rule)")
    p.add_argument("--papers", action="store_true",
                   help="also line the scores up with the numbers the papers and MTEB's results store report "
                        "(with --protocol mteb: MTEB's numbers only)")
    p.add_argument("--mteb-results", nargs="+", default=None, metavar="PATH",
                   help="MTEB TaskResult files or folders (<Task>.json) to show beside them (implies --papers)")
    p.add_argument("--baseline", default=None, help="system to compare against (default: the first run)")
    p.add_argument("--measures", nargs="+", default=None, help="e.g. nDCG@10 RR@10 R@100 (default per benchmark)")
    p.add_argument("--out", default=None, help="output directory (default: the first run's directory)")
    p.add_argument("--resamples", type=positive_int, default=None,
                   help="permutation/bootstrap resamples (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the permutation test and the bootstrap")
    p.set_defaults(handler=evaluate_command)


def run_name(path: Path) -> str:
    """A run's system name: its file name without ``.trec`` / ``.run`` / ``.txt`` (an MTEB
    prediction file is named after its model instead, see :func:`read_runs`)."""
    name = path.name
    for suffix in (".trec", ".run", ".txt"):
        name = name.removesuffix(suffix)
    return name


def read_runs(paths: list[Path], benchmark) -> tuple[dict, dict]:
    """The runs of ``--run`` files by system name: TREC files named by :func:`run_name`, MTEB
    prediction files (``.json``) read under the kit's ids and named after the model their
    ``mteb_model_meta`` gives (else the file). Also, for the prediction files, their own scores
    (``{name: {qid: {docid: score}}}``): the ``mteb`` protocol scores those, as MTEB does, rather
    than the run's float32 scores."""
    from instir.retrieval.mteb import is_mteb_predictions, predictions_scores, read_mteb_predictions
    from instir.retrieval.runs import Run, read_run

    runs, raw, names = {}, {}, []
    for path in paths:
        if is_mteb_predictions(path):
            predictions = read_mteb_predictions(path)
            name = predictions.model_name or path.name.removesuffix(".json")
            raw[name] = predictions_scores(predictions, benchmark)
            run = Run.from_scores(raw[name], {"source": "mteb-predictions", "path": str(path)})
        else:
            run, name = read_run(path), run_name(path)
        names.append(name)
        runs[name] = run
    if len(set(names)) != len(names):
        raise UsageError(f"run files need distinct names (got {names}) (an MTEB file is named after its model)")
    return runs, raw


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


def papers_comparison(table, protocol: str, mteb_results=None):
    """The scores of ``table`` lined up with the reported numbers (:func:`instir.papers.compare`,
    samples aligned as their benchmark with the verdict *not comparable (SAMPLE)*): the papers',
    MTEB's results store and the MTEB result files ``mteb_results``; under the ``mteb`` protocol
    only MTEB's numbers, since the papers' were measured with the authors' protocol."""
    import pandas as pd

    from instir.papers import compare_to_papers
    from instir.stages.compare import reported_tables

    reported = reported_tables(mteb_results or ())
    if protocol == "mteb":
        reported = {"mteb": reported["mteb"]}
    return compare_to_papers(table, pd.concat(reported.values(), ignore_index=True), sample_ok=True)


def papers_text(compared) -> str:
    """The aligned numbers as printed (×100 as the papers print them, one line per number)."""
    import pandas as pd

    from instir.papers import comparison_view
    from instir.report.tables import format_fixed

    view = comparison_view(compared)
    shown = view[["paper", "paper model", "system", "subset", "level", "measure", "reported", "reproduced",
                  "delta", "verdict"]].copy()
    for column in ("reported", "reproduced", "delta"):
        shown[column] = [format_fixed(100 * v, 2) for v in shown[column]]
    shown["subset"] = shown["subset"].fillna("")
    shown["level"] = shown["level"].astype("string").fillna("")
    with pd.option_context("display.width", 200, "display.max_columns", 50, "display.max_colwidth", 40):
        return shown.to_string(index=False)


def evaluate_command(args: argparse.Namespace) -> int:
    """Handler of ``instir evaluate``."""
    import pandas as pd

    from instir import atomic
    from instir.metrics import latex, stats, table
    from instir.metrics.mteb import mteb_measure
    from instir.metrics.scoring import evaluate_runs
    from instir.metrics.standard import parse_measures
    from instir.stages.evaluate import compare_to_baseline

    paths = [Path(p) for p in args.runs]
    if args.measures and args.protocol == "mteb":  # a bad name fails before anything is read
        for measure in args.measures:
            mteb_measure(measure)
    elif args.measures:
        parse_measures(args.measures)
    benchmark = benchmark_from_args(args)
    runs, raw = read_runs(paths, benchmark)
    names = list(runs)
    baseline = args.baseline or names[0]
    if baseline not in names:
        raise unknown("--baseline", baseline, names, more=" (the systems are named after the run files)")
    out = output_folder(args.out or paths[0].parent)  # before the scoring, after the runs are found
    scored = {name: raw.get(name, run) for name, run in runs.items()} if args.protocol == "mteb" else runs
    result = evaluate_runs(scored, benchmark, args.measures, protocol=args.protocol)

    print(f"benchmark: {benchmark.label}, revision {benchmark.revision}, protocol {args.protocol}")
    for name, check in result.checks.items():
        if not check.ok or check.missing_qids:
            print(f"  {name}: {check.summary()}")
    if result.excluded:
        print(f"  {len(result.excluded)} qrels queries have no relevant document and are not averaged")
    for note in result.notes:
        print(f"  {note}")
    print("scores ×100:")
    with pd.option_context("display.width", 200, "display.max_columns", 50):
        print(table.wide(result.table).to_string())

    comparisons = pd.DataFrame()
    if len(runs) > 1:
        comparisons = compare_to_baseline(result.per_query, result.per_group, baseline, measures=None,
                                          n_resamples=args.resamples or stats.N_RESAMPLES, seed=args.seed)
        print(f"\nagainst baseline {baseline!r} (scores ×100; p-values Holm-corrected across systems):")
        print(comparison_text(comparisons))

    compared = pd.DataFrame()
    if args.papers or args.mteb_results:
        compared = papers_comparison(result.table, args.protocol, args.mteb_results)
        if len(compared):
            print("\nagainst the reported numbers (×100):")
            print(papers_text(compared))
        else:
            print("\nagainst the reported numbers: no reported number for these systems, measures and slices")

    suffix = "" if args.protocol == "authors" else f"-{args.protocol}"
    stem = f"evaluation-{benchmark.name.replace('/', '_')}-{benchmark.setting}{suffix}"
    # One set: the table, its per-query values, the comparisons (CSV and LaTeX), the comparison
    # with the papers and the JSON that lists them are all written before any replaces the last
    # evaluation's (a full disk leaves the old set whole); the files this evaluation has none of
    # are removed with it.
    files = {out / f"{stem}.csv": table.export_bytes(result.table, out / f"{stem}.csv"),
             out / f"{stem}-per-query.csv": atomic.frame_bytes(out / f"{stem}-per-query.csv", result.per_query)}
    optional = {out / f"{stem}-comparisons.csv": None, out / f"{stem}.tex": None, out / f"{stem}-papers.csv": None}
    if len(comparisons):
        optional[out / f"{stem}-comparisons.csv"] = atomic.frame_bytes(out / f"{stem}-comparisons.csv", comparisons)
        if args.protocol == "authors":
            caption = f"{latex.escape(benchmark.label)}, scores $\\times 100$."
            optional[out / f"{stem}.tex"] = latex.latex_table(latex.evaluation_marks(result), caption=caption).encode()
    if len(compared):
        optional[out / f"{stem}-papers.csv"] = atomic.frame_bytes(out / f"{stem}-papers.csv", compared)
    files.update({path: data for path, data in optional.items() if data is not None})
    summary = {
        "benchmark": benchmark.name, "setting": benchmark.setting, "revision": benchmark.revision,
        "protocol": args.protocol,
        "sample": benchmark.is_sample, "runs": {n: str(p) for n, p in zip(names, paths)}, "baseline": baseline,
        "excluded_queries": result.excluded, "notes": result.notes,
        "run_checks": {n: c.summary() for n, c in result.checks.items()},
        "table": json.loads(result.table.to_json(orient="records")),
        "comparisons": json.loads(comparisons.to_json(orient="records")) if len(comparisons) else [],
        "files": {path.name: hashlib.sha256(data).hexdigest() for path, data in files.items()},
    }
    files[out / f"{stem}.json"] = json.dumps(summary, indent=2)
    written = atomic.write_files(files, remove=[path for path, data in optional.items() if data is None])
    print("\nwrote " + ", ".join(str(p) for p in written))
    return 0
