"""Interop with ranx, PyTerrier and ir_datasets (``pip install 'instir[interop]'``).

- Runs: :meth:`instir.Run.to_ranx` / :meth:`~instir.Run.from_ranx` and
  :meth:`~instir.Run.to_pyterrier` / :meth:`~instir.Run.from_pyterrier` (on the run itself).
- Qrels: :func:`qrels_to_ranx` / :func:`qrels_from_ranx`, :func:`qrels_to_pyterrier` /
  :func:`qrels_from_pyterrier` (:mod:`instir.interop.qrels`).
- Benchmarks as ir_datasets datasets: :func:`register_ir_datasets` registers every benchmark,
  subset and setting the kit loads (bundled samples included) as ``instir/<name>[/<setting>]``,
  so ``ir_datasets.load("instir/ifir/fiqa")`` and PyTerrier's ``irds:instir/…`` read the fetched or
  bundled files (:mod:`instir.interop.irds`); PyTerrier's ``instir:<name>`` needs no call
  (a ``pyterrier.dataset_provider`` entry point, :mod:`instir.interop.pt_provider`).

Nothing here is imported by ``import instir``; each library is imported when a function needs it.
"""

from instir._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "qrels": ("qrels_to_ranx", "qrels_from_ranx", "qrels_to_pyterrier", "qrels_from_pyterrier"),
    "irds": ("PREFIX", "dataset_ids", "register_ir_datasets", "ensure_registered", "InstirDoc", "InstirQuery"),
})
