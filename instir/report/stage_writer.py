"""The one way a stage writes a report folder: holding the folder's lock
(:class:`instir.report.lock.FolderLock`), keeping what it replaces that the kit did not write there
(:func:`instir.report.provenance.replacing`), recording what it was called with and what it read and
wrote (:mod:`instir.report.provenance`), then, when it ran alone (the lab, plain papermill, a Python
session: not under ``instir run``, which does it at the end of each notebook), rewriting the reports
index beside the folder, so the index never lags behind the folder's files."""

from __future__ import annotations

import contextlib
import functools
import inspect
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from instir.errors import UsageError
from instir.inputs import expanded
from instir.parameters import home_path
from instir.report.index import INDEX_FILE, index_folder, write_index
from instir.report.layout import NOTEBOOK_PATTERN, in_a_kernel, report_layout
from instir.report.lock import STAGE_WRITER, FolderLock, writer_of
from instir.report.provenance import WRITES, input_digests, record_stage, replacing
from instir.report.record import REPORT_FILE

T = TypeVar("T")

#: Stage arguments that are objects a caller shares between stages, not parameters of the run.
_NOT_PARAMETERS = ("out_dir", "loaded", "read", "judge")


def refresh_index(folder: Path) -> Path | None:
    """Rewrite the instir index that lists ``folder`` (:func:`instir.report.index.index_folder`)
    when there is one (a user's own ``index.html`` and a folder no index lists are left alone); the index
    rewritten, or None."""
    root = index_folder(folder)
    if (root / INDEX_FILE).is_file():
        with contextlib.suppress(UsageError, OSError):  # write_index refuses a user's own index.html
            write_index(root)
            return root / INDEX_FILE
    return None


def writes_stage(notebook: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Decorate the stage of ``notebook`` (``"03_metrics"``), whose first argument is its report
    folder (a parameter as :func:`instir.report.layout.report_layout` reads it): it runs holding
    the folder's lock (as :data:`~instir.report.lock.STAGE_WRITER` unless a front end holds it
    already), keeps what it replaces that the kit did not write, and records its run in the
    folder's record (``stages``), with what the result's ``incomplete()`` says it left undone, where it has one
    (:meth:`instir.stages.judge.Judging.incomplete`)."""
    def decorate(stage: Callable[..., T]) -> Callable[..., T]:
        signature = inspect.signature(stage)

        @functools.wraps(stage)
        def written(out_dir, *args, **kwargs):
            folder = expanded(report_layout(out_dir).root).resolve()
            here = Path.cwd().resolve()  # a notebook's kernel runs in the notebook's folder
            if in_a_kernel() and here != folder and (here / REPORT_FILE).is_file() and any(here.glob(NOTEBOOK_PATTERN)):
                warnings.warn(f"this notebook lies in the report folder {home_path(here)}, but its stage writes into "
                              f"{home_path(folder)} (its out_dir); to remake its own folder, set out_dir to "
                              f"{str(here)!r}", UserWarning, stacklevel=2)
            with FolderLock(folder, STAGE_WRITER):
                inputs = input_digests(folder, notebook)
                with replacing(folder, WRITES[notebook]):
                    result = stage(out_dir, *args, **kwargs)
                bound = signature.bind(out_dir, *args, **kwargs)
                bound.apply_defaults()
                arguments = dict(bound.arguments)
                for name, parameter in signature.parameters.items():
                    if parameter.kind is inspect.Parameter.VAR_KEYWORD:
                        arguments.update(arguments.pop(name, {}))
                by = writer_of(folder) or STAGE_WRITER
                incomplete = getattr(result, "incomplete", None)  # what the stage says it left undone
                record_stage(folder, notebook, {k: v for k, v in arguments.items() if k not in _NOT_PARAMETERS},
                             by, inputs, incomplete() if callable(incomplete) else ())
            if by != "instir run":
                refresh_index(folder)
            return result
        return written
    return decorate
