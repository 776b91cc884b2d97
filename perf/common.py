"""What the benchmark scripts share: where the real InstructIR query files are."""

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
