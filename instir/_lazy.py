"""The one lazy-export mechanism of the package's ``__init__`` modules (PEP 562): a name is
imported from its module on first use, so ``import instir`` and the ``instir`` command start
without torch, pandas or scipy."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from importlib import import_module


def lazy_exports(package: str, exports: Mapping[str, Sequence[str]], deprecated: Mapping[str, str] | None = None,
                 namespaces: Sequence[str] = ()) -> tuple[Callable, Callable, list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package`` exporting ``exports`` (module path,
    absolute or relative to the package, → names) and its submodules ``namespaces`` (a public
    namespace of their own, such as ``instir.show``). Use as
    ``__getattr__, __dir__, __all__ = lazy_exports(__name__, {...})``. ``deprecated`` maps an
    old name to the exported name that replaced it, or to ``"module:name"`` where it moved out of
    the package's public names: the old one still works, with a ``DeprecationWarning`` naming
    where it is now, and is left out of ``__all__`` and ``dir()``."""
    module_of = {name: (module if module.startswith("instir") else f"{package}.{module}")
                 for module, names in exports.items() for name in names}
    renamed = dict(deprecated or {})

    def __getattr__(name: str):
        if name in renamed:
            module, moved, new = renamed[name].rpartition(":")
            where = f"{module}.{new}" if moved else f"{package}.{new}"
            warnings.warn(f"{package}.{name} is now {where}; the old name goes in the next release",
                          DeprecationWarning, stacklevel=2)
            if moved:
                return getattr(import_module(module), new)
            name = new
        if name in namespaces:
            return import_module(f"{package}.{name}")
        if name not in module_of:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(module_of[name]), name)

    def __dir__() -> list[str]:
        return sorted([*module_of, *namespaces])

    return __getattr__, __dir__, sorted([*module_of, *namespaces])
