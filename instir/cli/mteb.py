"""``instir mteb-export``: the kit's runs as MTEB prediction files, and a benchmark as a dataset
folder MTEB loads with the authors' query text (:mod:`instir.retrieval.mteb`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from instir.cli.options import add_benchmark_arguments, benchmark_from_args, file_system_name, output_folder
from instir.errors import UsageError


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``mteb-export`` subcommand."""
    p = subparsers.add_parser(
        "mteb-export", help="write runs as MTEB prediction files and a benchmark as an MTEB-ready dataset",
        description="Write TREC runs as MTEB's <Task>_predictions.json (MTEB's query ids: IFIR's carry v<level>) "
                    "and, with --dataset, the benchmark as a folder MTEB's retrieval loader reads (InstructIR "
                    "with the authors' 'instruction [SEP] query' text: MTEB itself sends 'query instruction' and "
                    "calls no combine_query_and_instruction hook).")
    add_benchmark_arguments(p)
    p.add_argument("--run", dest="runs", action="append", default=[], metavar="FILE",
                   help="TREC run file to write as MTEB predictions; one per call (MTEB keeps one prediction file "
                        "per task in a folder: each run needs its own --out folder)")
    p.add_argument("--model-name", default=None,
                   help="mteb_model_meta.model_name of the predictions (default: the run's model or retriever, "
                        "e.g. bm25, else its file name)")
    p.add_argument("--revision", default=None, help="mteb_model_meta.revision (default: the run's, else null)")
    p.add_argument("--dataset", action="store_true",
                   help="also write the benchmark as an MTEB-ready dataset folder, OUT/<benchmark>-<setting>-<hash12> "
                        "(a name of its own per content: Hugging Face datasets caches a local folder by its name)")
    p.add_argument("--template", default="default",
                   help="query text of the dataset: 'default' (InstructIR: the authors' template instructir; IFIR: "
                        "MTEB's own layout), a template name, or 'mteb' for MTEB's bare query + instruction layout")
    p.add_argument("--out", required=True, help="output folder")
    p.set_defaults(handler=mteb_export_command)


def run_identity(meta: dict, path: Path) -> tuple[str, str | None]:
    """The model name and revision a run's sidecar gives: its system card's model, else its
    retriever's model id (without a note such as `` (bundled by …)``), else the retriever's
    name (BM25), else the run file's name; the card's revision, else none."""
    card = meta.get("system") or {}
    retriever = meta.get("retriever") or {}
    params = retriever.get("params") or {}
    model = card.get("model") or str(params.get("model") or "").split(" (")[0] or retriever.get("name")
    revision = card.get("revision") or None
    return (str(model) if model else file_system_name(path)), revision


def mteb_export_command(args: argparse.Namespace) -> int:
    """Handler of ``instir mteb-export``."""
    from instir.retrieval.mteb import (
        check_mteb_queries,
        dataset_template,
        write_mteb_dataset,
        write_mteb_predictions,
    )
    from instir.retrieval.runs import read_run

    if not args.runs and not args.dataset:
        raise UsageError("nothing to write: give --run FILE and/or --dataset")
    if len(args.runs) > 1:
        raise UsageError("MTEB keeps one prediction file per task in a folder: write one --run per --out folder")
    if args.template != "default" and not args.dataset:
        raise UsageError("--template shapes the dataset's queries: give --dataset too (prediction files hold no text)")
    benchmark = benchmark_from_args(args)
    # resolved and checked once, before anything is written (a template MTEB cannot take is refused here)
    template = dataset_template(benchmark, None if args.template == "mteb" else args.template) if args.dataset else None
    runs = [(run_path, read_run(run_path)) for run_path in map(Path, args.runs)]
    for _, run in runs:  # a run MTEB has no ids for fails before anything is written
        check_mteb_queries(run, benchmark)
    out = output_folder(args.out)
    for run_path, run in runs:
        model, revision = run_identity(run.meta, run_path)
        path = write_mteb_predictions(run, benchmark, out, model_name=args.model_name or model,
                                      revision=args.revision or revision)
        print(f"{run_path} -> {path} (model {args.model_name or model!r}, {run.df['qid'].nunique()} queries)")
    if args.dataset:
        folder = write_mteb_dataset(benchmark, out, template=template)
        written = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
        print(f"{benchmark.label} -> {folder} ({', '.join(written)})")
    return 0
