"""Interop with ranx, PyTerrier and ir_datasets (``pip install 'instir[interop]'``): runs convert
on the run itself (:meth:`instir.Run.to_ranx`, :meth:`~instir.Run.to_pyterrier` and back), qrels
in :mod:`instir.interop.qrels`, :func:`transformer` puts any kit system into PyTerrier pipelines
and ``pt.Experiment`` (:mod:`instir.interop.pyterrier`), and :func:`register_ir_datasets` serves
the benchmarks as ir_datasets datasets (:mod:`instir.interop.irds`; ``python -m instir.interop``
is the ``ir_datasets`` command with them registered); docs/interop.md tells the whole of it.

Nothing here is imported by ``import instir``; each library is imported when a function needs it.
"""

from instir._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "qrels": ("qrels_to_ranx", "qrels_to_pyterrier"),
    "irds": ("PREFIX", "dataset_ids", "register_ir_datasets", "ensure_registered", "InstirDoc", "InstirQuery"),
    "pyterrier": ("KitTransformer", "transformer"),
}, deprecated={"qrels_from_ranx": "instir.metrics:qrels_of", "qrels_from_pyterrier": "instir.metrics:qrels_of"})
