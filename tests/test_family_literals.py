"""Only a family's loader, the catalog and ``papers/`` name a benchmark family (and the tour, which
teaches on the bundled samples by name): every other module asks the family's spec. A string
literal naming a family (``"ifir"``, ``"instructir-sample"``, ``"ifir/fiqa"`` …) elsewhere is
counted; the few left are names of the authors' rules (IFIR's windows, its judge's call settings,
its measures' tag, FollowIR-7B's prompt), each defined once."""

import ast
from pathlib import Path

from instir.benchmarks import catalog

PACKAGE = Path(__file__).resolve().parents[1] / "instir"
#: where family names belong
ALLOWED = ("benchmarks/", "papers/", "report/tour.py")
#: the most literals outside them
LIMIT = 12


def family_literals(root: Path = PACKAGE, families=None) -> list[str]:
    """``path:line: literal`` for every string constant (docstrings aside) equal to a family's
    name or starting with it and ``-`` or ``/``, outside :data:`ALLOWED`."""
    names = tuple(families or {*catalog.families(), "followir"})
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative.startswith(ALLOWED):
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                text = node.value
                if any(text == n or text.startswith((f"{n}-", f"{n}/")) for n in names):
                    found.append(f"{relative}:{node.lineno}: {text!r}")
    return found


def test_at_most_a_handful_of_modules_outside_the_loaders_catalog_and_papers_name_a_family():
    found = family_literals()
    assert len(found) <= LIMIT, "\n".join(found)


def test_the_count_sees_literals_but_not_docstrings(tmp_path):
    (tmp_path / "m.py").write_text('"""About ifir/fiqa."""\n\nX = "ifir"\nY = "ifir-sample/fiqa"\nZ = "ifirx"\n'
                                   'def f():\n    """instructir."""\n    return f"{X}/instructir-toy"\n')
    assert family_literals(tmp_path, ["ifir", "instructir"]) == ["m.py:3: 'ifir'", "m.py:4: 'ifir-sample/fiqa'"]
