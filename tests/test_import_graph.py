"""The import graph of ``instir/`` (imports inside functions included, and names a package
exports lazily resolved to the module that defines them) has no circle, and no library module
imports the command layer (``instir.cli``): lower layers never climb."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "instir"


def module_name(path: Path, root: Path = PACKAGE) -> str:
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def lazy_names(tree: ast.Module, package: str) -> dict[str, str]:
    """``name -> module`` of a package's ``lazy_exports(__name__, {module: (names, ...)})``."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "lazy_exports":
            table = node.args[1]
            for key, value in zip(table.keys, table.values):
                module = key.value if key.value.startswith("instir") else f"{package}.{key.value}"
                out.update({item.value: module for item in value.elts})
    return out


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """``module -> modules it imports`` within the package."""
    trees = {module_name(p, root): (p, ast.parse(p.read_text(encoding="utf-8"))) for p in root.rglob("*.py")}
    lazy = {name: lazy_names(tree, name) for name, (p, tree) in trees.items() if p.name == "__init__.py"}

    def resolve(target: str, imported: str | None) -> str | None:
        if imported is not None and target in lazy and imported in lazy[target]:
            return lazy[target][imported]
        if imported is not None and f"{target}.{imported}" in trees:
            return f"{target}.{imported}"
        return target if target in trees else None

    edges: dict[str, set[str]] = {name: set() for name in trees}
    for name, (path, tree) in trees.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(tree):
            found: list[str | None] = []
            if isinstance(node, ast.Import):
                found = [resolve(a.name, None) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                found = [resolve(base, a.name) for a in node.names]
            edges[name].update(t for t in found if t is not None and t != name and t.startswith("instir"))
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def is_package(name: str, edges) -> bool:
    return any(other.startswith(name + ".") for other in edges)


@pytest.fixture(scope="module")
def edges() -> dict[str, set[str]]:
    """The package's import graph, parsed once for the checks below."""
    return import_graph()


def test_the_package_has_no_import_circle(edges):
    # a package's __init__ re-exporting its modules is not a circle of its own: drop edges into parents
    trimmed = {m: {t for t in ts if not (is_package(t, edges) and m.startswith(t + "."))} for m, ts in edges.items()}
    assert circles(trimmed) == []


def test_no_library_module_imports_the_command_layer(edges):
    climbing = sorted(f"{m} -> {t}" for m, ts in edges.items() if not m.startswith("instir.cli")
                      for t in ts if t == "instir.cli" or t.startswith("instir.cli."))
    assert climbing == []


def test_every_command_module_lives_under_instir_cli(edges):
    stray = sorted(m for m in edges if m.rsplit(".", 1)[-1].endswith("commands"))
    assert stray == []


def test_the_checks_see_a_lazy_import_circle_and_a_climb(tmp_path):
    pkg = tmp_path / "instir"
    (pkg / "cli").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "cli" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from instir.b import g\n")
    (pkg / "b.py").write_text("from instir import a\nimport instir.cli\n")
    edges = import_graph(pkg)
    assert circles(edges) == [["instir.a", "instir.b"]]
    assert "instir.cli" in edges["instir.b"]
