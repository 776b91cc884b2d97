"""The top-level names resolve to the objects of their stage modules, imported lazily."""

import subprocess
import sys

import instir


def test_every_public_name_resolves():
    for name in instir.__all__:
        assert getattr(instir, name) is not None, name


def _lazy_exports(init):
    """The ``exports`` and ``deprecated`` mappings a package's ``__init__`` gives ``lazy_exports``, evaluated from its
    source (the kit's own expressions of literals; None where it calls none)."""
    import ast

    for call in ast.walk(ast.parse(init.read_text(encoding="utf-8"))):
        if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "lazy_exports":
            keywords = {k.arg: eval(ast.unparse(k.value), {}) for k in call.keywords}
            return ast.literal_eval(call.args[1]), keywords.get("deprecated") or {}
    return None


def _bound_names(path):
    """The names a module binds at its top level (definitions, assignments, imports) or, for a package, exports
    lazily: read without importing it (some modules need Ray or torch)."""
    import ast

    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    lazy = _lazy_exports(path) if path.name == "__init__.py" else None
    return names | ({name for listed in lazy[0].values() for name in listed} if lazy else set())


def test_every_name_a_package_lists_is_bound_by_the_module_it_names():
    """``instir.distributed`` listed ``Cell`` after a refactor had removed it from its module: ``from
    instir.distributed import *`` raised AttributeError. Every package's lazy exports (and where its deprecated names
    moved) are checked here against the modules' source, without importing the modules that need Ray or torch."""
    from pathlib import Path

    root = Path(instir.__file__).parent
    checked = 0
    for init in sorted(root.rglob("__init__.py")):
        package = ".".join(init.relative_to(root.parent).parent.parts)
        if (lazy := _lazy_exports(init)) is None:
            continue
        exports, deprecated = lazy
        exported = {name for names in exports.values() for name in names}
        assert {new for new in deprecated.values() if ":" not in new} <= exported, package
        moved = [tuple(new.split(":")) for new in deprecated.values() if ":" in new]
        for module, names in [*exports.items(), *((m, (n,)) for m, n in moved)]:
            dotted = module if module.startswith("instir") else f"{package}.{module}"
            path = root.parent.joinpath(*dotted.split("."))
            path = path.with_suffix(".py") if path.with_suffix(".py").is_file() else path / "__init__.py"
            missing = set(names) - _bound_names(path)
            assert not missing, f"{package} lists {sorted(missing)} from {dotted}, which binds none of them"
            checked += len(names)
    assert checked > 100


def test_importing_instir_loads_no_heavy_library():
    code = "import sys, instir; print(sorted(m for m in ('torch', 'pandas', 'scipy') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_evaluate_commands_modules_load_no_model_or_statistics_library():
    """``instir evaluate`` scores and compares runs: a review found it 1.75 times slower than when perf/cli_speed.py
    set its target, 1.9 s of it importing scikit-learn and scipy (the compare stage imports the judge stage's
    module, whose agreement statistics needed them at import)."""
    code = ("import sys, instir.cli, instir.cli.evaluate, instir.stages.compare, instir.stages.evaluate; "
            "print(sorted(m for m in ('torch', 'sklearn', 'scipy', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_instir_help_loads_no_pandas_numpy_or_tqdm():
    """Every ``instir`` command builds the whole parser first (``instir --help`` does nothing else): a review found
    ``--help`` at 1.1 s against perf/cli_speed.py's 0.4 s, 0.6 s of it pandas and numpy, imported for a list of
    papers, two constants of the id check and the judge's model check."""
    code = ("import contextlib, io, sys\nfrom instir.cli import main\n"
            "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n    main(['--help'])\n"
            "print(sorted(m for m in ('pandas', 'numpy', 'torch', 'huggingface_hub', 'tqdm') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_renamed_names_still_work_for_one_release_with_a_deprecation_warning():
    import pytest

    import instir.papers
    import instir.stages

    for package, old, new in ((instir, "compare", "compare_to_papers"), (instir, "validate", "validate_judge"),
                              (instir.papers, "compare", "compare_to_papers"),
                              (instir.stages, "explore_benchmarks", "describe_benchmarks"),
                              (instir.stages, "compare_with_papers", "paper_tables")):
        with pytest.warns(DeprecationWarning, match=f"{package.__name__}.{old} is now {package.__name__}.{new}"):
            assert getattr(package, old) is getattr(package, new)
        assert old not in package.__all__ and old not in dir(package)


def test_the_bundled_notebooks_import_only_the_public_api():
    """Every ``instir`` import of the bundled notebooks is ``from instir import <public name>`` or ``from instir.<public
    namespace> import <its public name>``: a user can write a notebook like them from the documented API alone."""
    import ast
    import json
    from pathlib import Path

    import instir

    namespaces = {name: getattr(instir, name).__all__ for name in instir.__all__
                  if isinstance(getattr(instir, name), type(instir))}
    found = []
    for path in sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "code":
                continue
            for node in ast.walk(ast.parse("".join(cell["source"]))):
                if isinstance(node, ast.Import):
                    found += [(path.name, a.name, None) for a in node.names if a.name.startswith("instir")]
                elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("instir"):
                    found += [(path.name, node.module, a.name) for a in node.names]
    assert len(found) > 20
    for notebook, module, name in found:
        allowed = instir.__all__ if module == "instir" else namespaces.get(module.removeprefix("instir."), ())
        assert name in allowed, f"{notebook}: from {module} import {name}"


def test_names_that_left_the_top_level_still_work_with_a_warning_naming_where_they_are():
    import pytest

    import instir
    from instir.formatting import register_template
    from instir.retrieval.lexical import BM25Retriever

    for name, where, obj in (("register_template", "instir.formatting.register_template", register_template),
                             ("BM25Retriever", "instir.retrieval.lexical.BM25Retriever", BM25Retriever)):
        with pytest.warns(DeprecationWarning, match=f"instir.{name} is now {where}"):
            assert getattr(instir, name) is obj
        assert name not in instir.__all__
    with pytest.warns(DeprecationWarning, match="instir.stages.Metrics is now instir.stages.evaluate.Metrics"):
        from instir.stages import Metrics  # noqa: F401
