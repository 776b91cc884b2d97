"""``instir sweep``: run a grid of benchmarks × systems × settings on Ray (local by default,
a cluster with ``--address``) into one folder notebooks 03–05 read. Ray is imported inside
the handler, so the command list needs no Ray."""

from __future__ import annotations

import argparse
import sys

from instir.cli.options import positive_int

#: Cells ``instir sweep`` starts without ``--yes``; a larger grid is refused (with its estimate) until confirmed.
CONFIRM_CELLS = 200


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``sweep`` subcommand."""
    p = subparsers.add_parser(
        "sweep", help="run a grid of benchmarks x systems on Ray (local or a cluster)",
        description="Run every cell of GRID.yaml (retrieve -> evaluate; with a judge, the judge and compare "
                    "stages) as Ray tasks into --out, laid out as notebooks 03-05 read it. Rerunning finishes only "
                    "what is missing.")
    p.add_argument("grid", metavar="GRID.yaml",
                   help="the grid file, YAML or (*.toml) TOML (see instir.distributed.grid)")
    p.add_argument("--out", required=True, help="output folder (runs/, metrics/, judge/, sweep/)")
    p.add_argument("--address", default=None,
                   help="Ray cluster: 'auto' (the cluster this machine belongs to) or ray://HOST:PORT; "
                        "default: start Ray locally in this process")
    p.add_argument("--num-cpus", type=positive_int, default=None, help="CPUs of a local Ray (default: all)")
    p.add_argument("--serial", action="store_true", help="run the cells in a plain loop, without Ray")
    p.add_argument("--yes", action="store_true",
                   help=f"start a grid of more than {CONFIRM_CELLS} cells (refused without it, with its estimate)")
    p.set_defaults(handler=sweep_command)


def sweep_command(args: argparse.Namespace) -> int:
    """Handler of ``instir sweep``: exit status 1 when any cell, the judge step or the compare step failed
    (the compare step runs whatever the judge step did), or some judgments failed (counted by reason; a rerun
    judges only those)."""
    from instir.distributed.grid import describe_estimate, load_grid
    from instir.errors import UsageError
    from instir.extras import MissingExtraError, require

    for option, given in (("--num-cpus", args.num_cpus is not None), ("--serial", args.serial)):
        if given and args.address is not None:  # each is about a local run; the cluster would ignore it
            raise UsageError(f"{option} is for a run on this machine; with --address the cluster's CPUs run the cells")
    grid = load_grid(args.grid)
    plan = describe_estimate(grid)
    cells = len(grid.cells())
    if cells > CONFIRM_CELLS and not args.yes:
        raise UsageError(f"{args.grid}: {plan}: more than {CONFIRM_CELLS} cells; add --yes to start them")
    if args.address is None:  # what a cell would fail on, before any cell (a cluster's cells read its own files)
        from instir.errors import UserError
        from instir.stages.request import check_runnable

        try:
            check_runnable(grid, where=lambda field: f"field {field!r}", knob=f"data_root: FOLDER in {args.grid}")
        except UserError as err:  # one line naming the grid (not the error's own class: a FormatError takes a path)
            raise UsageError(f"{args.grid}: {err}") from None
    print(f"{args.grid}: {plan}", flush=True)
    if not args.serial:
        try:
            require("ray")
        except MissingExtraError as err:
            raise MissingExtraError(f"{err} (or --serial: one loop, no Ray)") from None
    if grid.judge is not None and grid.judge.backend == "openai":  # before any cell, as instir run and instir judge
        from instir.judge.factory import OPENAI_BASE_URL, key_env_for, require_reachable

        url = grid.judge.base_url or OPENAI_BASE_URL
        try:  # the judge stage checks its key, then its endpoint: here before hours of retrieval, not after
            key_env_for(grid.judge.api_key_env, url)
        except UsageError as err:
            raise UsageError(f"{args.grid}: field 'judge.api_key_env': {err}") from None
        require_reachable(url, min(grid.judge.timeout_s, 5.0), where=f"{args.grid}: field 'judge.base_url' {url}",
                          names=("judge.base_url", "judge.backend"))
    from instir.distributed.sweep import run_sweep

    report = run_sweep(grid, args.out, executor="serial" if args.serial else "ray", address=args.address,
                       num_cpus=args.num_cpus)
    print(f"{len(report.results)} cells: {report.count('done')} done, {report.count('reused')} reused, "
          f"{report.count('failed')} failed, in {report.wall_s:.1f} s")
    for result in report.failed:
        print(f"  FAILED {result.error}")
    judge = report.judge
    if judge.get("state") == "done":
        print(f"judge: {judge['pairs']} run pair(s) judged, {judge['failed_judgments']} failed judgment(s), "
              f"{judge['warnings']} with a warning")
    elif judge.get("state") == "failed" and "error" in judge:
        print(f"  FAILED judge: {judge['error']} (details in {judge['detail']})")
    if report.compare.get("state") == "failed":
        print(f"  FAILED compare: {report.compare['error']} (details in {report.compare['detail']})")
    elif report.compare and judge.get("state") == "failed":
        print("compare: paper_tables/ written all the same; its InstFol rows only as judge/ holds them")
    for name, path in report.written.items():
        print(f"{name}: {path}")
    *reasons, said = judge.get("incomplete") or [None]
    for line in reasons:
        print(f"judge: {line}")
    if said is not None:
        print(f"instir sweep: {said}", file=sys.stderr)
    return 1 if report.failed or said or "failed" in (judge.get("state"), report.compare.get("state")) else 0
