"""``instir evaluate``: score one or more TREC runs on a benchmark, print the table (and,
for several runs, the comparisons against a baseline) and write CSV/JSON next to the runs (for several
runs also a LaTeX table with ranx's significance marks, :mod:`instir.metrics.latex`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from instir.benchmarks.commands import add_benchmark_arguments, benchmark_from_args
from instir.cli import output_folder, positive_int
from instir.errors import UsageError, unknown


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``evaluate`` subcommand."""
    p = subparsers.add_parser(
        "evaluate", help="score TREC runs on a benchmark",
        description="Score TREC runs on a benchmark: standard measures (trec_eval via ir-measures), "
                    "Robustness on InstructIR, IFIR-native nDCG/MRR on IFIR; with several runs, paired "
                    "tests and bootstrap CIs against a baseline (Holm-corrected).")
    add_benchmark_arguments(p)
    p.add_argument("--run", dest="runs", action="extend", nargs="+", required=True, metavar="FILE",
                   help="TREC run file(s), one system each (named after the file); --run may repeat")
    p.add_argument("--baseline", default=None, help="system to compare against (default: the first run)")
    p.add_argument("--measures", nargs="+", default=None, help="e.g. nDCG@10 RR@10 R@100 (default per benchmark)")
    p.add_argument("--out", default=None, help="output directory (default: the first run's directory)")
    p.add_argument("--resamples", type=positive_int, default=None,
                   help="permutation/bootstrap resamples (default 2000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the permutation test and the bootstrap")
    p.set_defaults(handler=evaluate_command)


def run_name(path: Path) -> str:
    """A run's system name: its file name without ``.trec`` / ``.run`` / ``.txt``."""
    name = path.name
    for suffix in (".trec", ".run", ".txt"):
        name = name.removesuffix(suffix)
    return name


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


def evaluate_command(args: argparse.Namespace) -> int:
    """Handler of ``instir evaluate``."""
    import pandas as pd

    from instir.metrics import latex, stats, table
    from instir.metrics.scoring import evaluate_runs
    from instir.metrics.standard import parse_measures
    from instir.retrieval.runs import read_run
    from instir.stages.evaluate import compare_to_baseline

    paths = [Path(p) for p in args.runs]
    names = [run_name(p) for p in paths]
    if len(set(names)) != len(names):
        raise UsageError(f"run files need distinct names (got {names})")
    baseline = args.baseline or names[0]
    if baseline not in names:
        raise unknown("--baseline", baseline, names, more=" (the systems are named after the run files)")
    if args.measures:
        parse_measures(args.measures)  # a bad name fails before anything is read
    benchmark = benchmark_from_args(args)
    runs = {name: read_run(path) for name, path in zip(names, paths)}
    out = output_folder(args.out or paths[0].parent)  # before the scoring, after the runs are found
    result = evaluate_runs(runs, benchmark, args.measures)

    print(f"benchmark: {benchmark.label}, revision {benchmark.revision}")
    for name, check in result.checks.items():
        if not check.ok or check.missing_qids:
            print(f"  {name}: {check.summary()}")
    if result.excluded:
        print(f"  {len(result.excluded)} qrels queries have no relevant document and are not averaged")
    print("scores ×100:")
    with pd.option_context("display.width", 200, "display.max_columns", 50):
        print(table.wide(result.table).to_string())

    comparisons = pd.DataFrame()
    if len(runs) > 1:
        comparisons = compare_to_baseline(result.per_query, result.per_group, baseline, measures=None,
                                          n_resamples=args.resamples or stats.N_RESAMPLES, seed=args.seed)
        print(f"\nagainst baseline {baseline!r} (scores ×100; p-values Holm-corrected across systems):")
        print(comparison_text(comparisons))

    stem = f"evaluation-{benchmark.name.replace('/', '_')}-{benchmark.setting}"
    written = [table.export(result.table, out / f"{stem}.csv")]
    result.per_query.to_csv(out / f"{stem}-per-query.csv", index=False)
    written.append(out / f"{stem}-per-query.csv")
    if len(comparisons):
        comparisons.to_csv(out / f"{stem}-comparisons.csv", index=False)
        written.append(out / f"{stem}-comparisons.csv")
        written.append(latex.write_latex(latex.evaluation_marks(result), out / f"{stem}.tex",
                                         caption=f"{latex.escape(benchmark.label)}, scores $\\times 100$."))
    summary = {
        "benchmark": benchmark.name, "setting": benchmark.setting, "revision": benchmark.revision,
        "sample": benchmark.is_sample, "runs": {n: str(p) for n, p in zip(names, paths)}, "baseline": baseline,
        "excluded_queries": result.excluded,
        "run_checks": {n: c.summary() for n, c in result.checks.items()},
        "table": json.loads(result.table.to_json(orient="records")),
        "comparisons": json.loads(comparisons.to_json(orient="records")) if len(comparisons) else [],
    }
    (out / f"{stem}.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    written.append(out / f"{stem}.json")
    print("\nwrote " + ", ".join(str(p) for p in written))
    return 0
