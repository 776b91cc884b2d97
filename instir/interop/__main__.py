"""``python -m instir.interop ARGS``: the ``ir_datasets`` command (``export``, ``lookup``, ``list``
…) with the kit's datasets registered first, which the plain ``ir_datasets`` command cannot do:
ir_datasets 0.6 loads no other package's datasets (:func:`instir.interop.register_ir_datasets`).
Its errors are the ``instir`` command's: one line (a misspelt dataset id with the closest one, a
benchmark not fetched, a damaged file), the traceback only with ``--debug`` or ``INSTIR_DEBUG=1``."""

from __future__ import annotations

import os
import sys

from instir.errors import unknown
from instir.interop.irds import ir_datasets, register_ir_datasets
from instir.terminal import DEBUG_VAR, answered

#: the ir_datasets commands whose first argument is a dataset id
DATASET_COMMANDS = ("export", "lookup", "doc_fifos")


def main(argv: list[str]) -> int:
    """Run ir_datasets' command ``argv`` over the kit's datasets; return the exit status."""
    debug = "--debug" in argv or os.environ.get(DEBUG_VAR, "0") not in ("", "0")
    args = [a for a in argv if a != "--debug"]

    def command() -> None:
        ids = register_ir_datasets()
        if len(args) > 1 and args[0] in DATASET_COMMANDS:
            try:
                ir_datasets.load(args[1])  # a look-up only: nothing is read before the command runs
            except KeyError:
                raise unknown("dataset", args[1], ids,
                              more=", and ir_datasets' own (python -m instir.interop list)") from None
        ir_datasets.main(args)

    return answered("python -m instir.interop", command, debug=debug)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
