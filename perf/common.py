"""What the speed scripts share: where the real InstructIR query files are, a fresh child process, and the
check of a script's figures against its stated targets (its exit status)."""

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def instructir_data(given: str | None = None) -> Path:
    """The authors' InstructIR GitHub files: ``given``, else the copy in ``data/``, else
    ``../shared`` beside the checkout; exits with a message when none has them."""
    for candidate in ([Path(given)] if given else []) + [REPO / "data/instructir-github",
                                                         REPO.parent / "shared/data/instructir-github"]:
        if (candidate / "only_instruction_queries.jsonl").is_file():
            return candidate
    sys.exit("InstructIR query files not found; pass --data DIR (the authors' GitHub release)")


def run_child(module: str, args: list[str], **env: str) -> dict:
    """Run ``python -m module *args`` in a fresh, offline, bar-free process from the checkout (so
    every side of a comparison pays its own imports) and return the JSON on its last stdout line;
    exits with the child's stderr tail if it fails."""
    import json
    import os
    import subprocess

    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
                "INSTIR_PROGRESS": "0", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **env}
    done = subprocess.run([sys.executable, "-m", module, *args], env=full_env, cwd=REPO, capture_output=True,
                          text=True, check=False)
    if done.returncode:
        sys.exit(f"{module} {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def check_targets(figures: dict[str, float | None], targets: dict[str, str]) -> int:
    """Print each figure beside its target (``"<= 0.5 s"``, ``">= 15 x"``: a comparison, a number, a unit) as met
    or MISSED, and return the exit status the script ends with: 1 if any is missed, else 0. A figure of None (its
    part failed) is missed."""
    missed = 0
    print("targets:")
    for name, value in figures.items():
        op, limit, *unit = targets[name].split(maxsplit=2)
        if op not in ("<=", ">="):
            raise ValueError(f"target {targets[name]!r} of {name!r}: say '<= N unit' or '>= N unit'")
        limit = float(limit.replace(",", ""))
        met = value is not None and (value <= limit if op == "<=" else value >= limit)
        missed += not met
        shown = "failed" if value is None else (f"{value:,.0f}" if abs(value) >= 1000 else f"{value:#.4g}") + \
            "".join(f" {u}" for u in unit)
        print(f"  {name:<30} {shown:>18}   target {targets[name]:<20} {'met' if met else 'MISSED'}")
    return 1 if missed else 0
