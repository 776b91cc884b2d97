"""``python -m instir.interop ARGS``: the ``ir_datasets`` command (``export``, ``lookup``, ``list``
…) with the kit's datasets registered first, which the plain ``ir_datasets`` command cannot do:
ir_datasets 0.6 loads no other package's datasets (:func:`instir.interop.register_ir_datasets`).
The kit's failures are answered as the ``instir`` command answers them: one line (a misspelt dataset id
with the closest one, a benchmark not fetched, a damaged file), the traceback only with ``--debug`` or
``INSTIR_DEBUG=1``; what the command exports to standard output is written as it is."""

from __future__ import annotations

import os
import sys

from instir.errors import UsageError, unknown
from instir.interop.irds import ir_datasets, register_ir_datasets
from instir.terminal import DEBUG_VAR, answered


def main(argv: list[str]) -> int:
    """Run ir_datasets' command ``argv`` over the kit's datasets; return the exit status."""
    end = argv.index("--") if "--" in argv else len(argv)  # after --, --debug is an argument
    debug = "--debug" in argv[:end] or os.environ.get(DEBUG_VAR, "0") not in ("", "0")
    args = [a for a in argv[:end] if a != "--debug"] + argv[end:]
    ids, load = register_ir_datasets(), ir_datasets.load

    def known_load(name: str):
        """``ir_datasets.load``, where an id it does not know is the kit's one line with the closest id."""
        try:
            return load(name)
        except KeyError:  # not a KeyError itself: ir_datasets' commands would answer that in their own words
            raise UsageError(str(unknown("dataset", name, ids,
                                         more=", and ir_datasets' own (python -m instir.interop list)"))) from None

    def command() -> None:
        ir_datasets.load = known_load  # the commands look the dataset id up through it
        try:
            ir_datasets.main(args)
        finally:
            ir_datasets.load = load

    return answered("python -m instir.interop", command, debug=debug, data=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
