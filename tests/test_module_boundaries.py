"""No module of the package uses another module's private (``_``) names: not by importing them,
not through a module or class of the package defined elsewhere, not on another object's
attributes. A name one module needs from another is public there, documented and tested."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "instir"


def _private(name: str) -> bool:
    """A private name: one leading underscore, not a dunder nor a protocol hook (``_repr_html_``)."""
    return name.startswith("_") and not name.endswith("_")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def private_uses(source: str, module: str) -> list[str]:
    """``line: what`` for every use of another module's private name in ``source`` (the text of
    ``module``). Private names of modules outside the package (``argparse._SubParsersAction``)
    are not this check's business."""
    tree = ast.parse(source)
    local = {node.name for node in ast.walk(tree) if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
    outside = {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
               for alias in node.names if not alias.name.startswith("instir")}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("instir"):
            found += [f"{node.lineno}: from {node.module} import {alias.name}"
                      for alias in node.names if _private(alias.name) and node.module != module]
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            if isinstance(base, ast.Name) and base.id in {"self", "cls", *local, *outside}:
                continue
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_uses_another_modules_private_names():
    uses = [f"{path.relative_to(PACKAGE)}:{use}" for path in sorted(PACKAGE.rglob("*.py"))
            for use in private_uses(path.read_text(encoding="utf-8"), _module_name(path))]
    assert uses == []


def test_the_check_finds_private_imports_and_attributes_but_not_its_own_or_the_stdlibs():
    source = ("import argparse\nfrom instir.retrieval.search import _hidden\nfrom instir.x import _own\n\n\n"
              "class Local:\n    _flag = 1\n\n\n"
              "def f(cache, parser: argparse._SubParsersAction):\n    return cache._store._x, Local._flag, self._ok\n")
    assert private_uses(source, "instir.x") == ["2: from instir.retrieval.search import _hidden",
                                                "11: cache._store._x", "11: cache._store"]
