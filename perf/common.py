"""What the speed scripts share: where the real InstructIR query files are, and a fresh child process."""

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
