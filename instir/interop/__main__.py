"""``python -m instir.interop ARGS``: the ``ir_datasets`` command (``export``, ``lookup``, ``list``
…) with the kit's datasets registered first, which the plain ``ir_datasets`` command cannot do:
ir_datasets 0.6 loads no other package's datasets (:func:`instir.interop.register_ir_datasets`).
The kit's failures are answered as the ``instir`` command answers them: one line (a misspelt dataset id
with the closest one, a benchmark not fetched, a damaged file), the traceback only with ``--debug`` or
``INSTIR_DEBUG=1``; what the command exports to standard output is written as it is. Where ir_datasets' export
answers in a way of its own, it is answered as the kit's: a ``--fields`` name it does not know, a kind the dataset
does not provide, no command or a misspelt one, each one line (a KeyError, exit 0, its usage line and exit 1), and
Ctrl-C exits 130 (it closed standard error and exited 0, so that
``export … > file && …`` took a cut export for a whole one); one of its own datasets that cannot be downloaded
(offline) is one line naming the sources tried."""

from __future__ import annotations

import os
import signal
import sys
from types import UnionType
from typing import Union, get_args, get_origin

from instir.errors import UsageError, unknown
from instir.interop.irds import ir_datasets, register_ir_datasets
from instir.terminal import DEBUG_VAR, TerminalStream, answered


class _KeptOpen(TerminalStream):
    """Standard error for ir_datasets' commands: its export closes it on Ctrl-C, before the kit's own last line."""

    def close(self) -> None:
        """Left open."""


#: what ir_datasets' export exports, each by its ``main_<kind>``; its lookup, by ``qid_lookup`` and ``did_lookup``
EXPORTED = ("docs", "queries", "qrels", "scoreddocs", "docpairs")
LOOKED_UP = {"qid_lookup": "queries", "did_lookup": "docs"}


def _exporting(kind: str, export):
    """ir_datasets' ``export`` or lookup of ``kind`` (its ``main_<kind>``, ``qid_lookup``, ``did_lookup``), its
    mistakes refused first as the kit's one line: a kind the dataset does not provide (it printed its AssertionError
    and exited 0), a ``--fields`` name the data lacks (its tsv and jsonl exporters raised a KeyError). The
    exporters see the record class through :class:`_Exported`."""
    def checked(dataset, args):
        if not hasattr(dataset, f"{kind}_handler"):
            raise UsageError(f"{args.dataset} provides no {kind}")
        known = list(getattr(dataset, f"{kind}_cls")().__annotations__)  # what the exporters look each field up in
        wrong = next((f for f in args.fields or () if f not in known), None)
        if wrong is not None:
            raise unknown("field", wrong, known, where="in --fields")
        return export(_Exported(dataset, kind), args)
    return checked


class _Exported:
    """``dataset`` as ir_datasets' exporters see it: its record class with each ``Optional[X]`` field typed ``X``.
    They write only fields typed str, int or float and skipped the others with an INFO line, exit 0, even when
    ``--fields`` named them (InstirQuery's ``level``, IFIR's key field); a None is written as ``None`` in a tsv,
    ``null`` in jsonl."""

    def __init__(self, dataset, kind: str):
        self._dataset, self._kind = dataset, kind

    def __getattr__(self, name: str):
        if name != f"{self._kind}_cls":
            return getattr(self._dataset, name)
        record = getattr(self._dataset, name)()
        plain = {field: _present(kind) for field, kind in record.__annotations__.items()}
        return lambda: type(record.__name__, (record,), {"__annotations__": plain, "__slots__": ()})


def _present(kind):
    """``X`` for ``Optional[X]`` (``X | None``), any other type as it is."""
    parts = get_args(kind)
    if get_origin(kind) in (Union, UnionType) and len(parts) == 2 and type(None) in parts:
        return next(part for part in parts if part is not type(None))
    return kind


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
        from ir_datasets.commands import COMMANDS, export, lookup

        if not args or args[0] not in COMMANDS:  # ir_datasets printed its usage and exited 1
            raise unknown("command", args[0] if args else "", COMMANDS, more=" (python -m instir.interop COMMAND -h)")

        kinds = {(export, f"main_{kind}"): kind for kind in EXPORTED} | {(lookup, f): k for f, k in LOOKED_UP.items()}
        kept = {(module, name): getattr(module, name) for module, name in kinds}
        heard: list[int] = []

        def interrupt(signum, frame):
            heard.append(signum)
            signal.default_int_handler(signum, frame)

        ir_datasets.load, stderr = known_load, sys.stderr  # the commands look the dataset id up through it
        previous, sys.stderr = signal.signal(signal.SIGINT, interrupt), _KeptOpen(stderr)
        for (module, name), kind in kinds.items():  # looked up when the command runs
            setattr(module, name, _exporting(kind, kept[module, name]))
        try:
            ir_datasets.main(args)
        except RuntimeError as err:  # one of ir_datasets' own datasets, when no source it names can be reached
            if err.args[:1] != ("All download sources failed",) or len(err.args) < 2:
                raise
            tried = ", ".join(str(getattr(source, "url", source)) for source, _ in err.args[1])
            raise ConnectionError(f"ir_datasets could not download the dataset's files (offline?); tried {tried}") \
                from err
        finally:
            ir_datasets.load, sys.stderr = load, stderr
            signal.signal(signal.SIGINT, previous)
            for (module, name), exporting in kept.items():
                setattr(module, name, exporting)
        if heard:  # ir_datasets' export took it for the end of its output
            raise KeyboardInterrupt

    return answered("python -m instir.interop", command, debug=debug, data=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
