"""PyTerrier's ``instir:`` datasets: ``pt.get_dataset("instir:ifir/fiqa")`` is
``pt.get_dataset("irds:instir/ifir/fiqa")``, registered by this provider itself
(:func:`instir.interop.irds.ensure_registered`) where :func:`instir.interop.register_ir_datasets`
has not run. PyTerrier finds it through the ``pyterrier.dataset_provider``
entry point that ``pyproject.toml`` declares (PyTerrier 1.x loads its dataset providers from
that group: ``pyterrier.datasets._core.get_dataset``), so installing the kit is enough."""

from __future__ import annotations

from collections.abc import Iterable

import pyterrier as pt

from instir.interop.irds import PREFIX, dataset_ids, ensure_registered


class InstirDatasetProvider(pt.datasets.DatasetProvider):
    """The kit's benchmarks for ``pt.get_dataset("instir:<name>[/<setting>]")`` (names as
    :func:`instir.interop.dataset_ids` lists them, without the ``instir/`` prefix), read from the
    fetch cache (or the root of an earlier ``register_ir_datasets(root)`` call)."""

    def get_dataset(self, name: str) -> pt.datasets.Dataset:
        """The PyTerrier dataset ``irds:instir/<name>``; KeyError for a name the kit lacks."""
        dataset_id = f"{PREFIX}/{name}"
        if dataset_id not in dataset_ids():
            raise KeyError(name)
        ensure_registered()
        return pt.get_dataset(f"irds:{dataset_id}")

    def list_dataset_names(self) -> Iterable[str]:
        """Every name :meth:`get_dataset` accepts."""
        return [dataset_id.removeprefix(f"{PREFIX}/") for dataset_id in dataset_ids()]
