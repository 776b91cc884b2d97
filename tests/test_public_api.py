"""The top-level names resolve to the objects of their stage modules, imported lazily."""

import subprocess
import sys

import instir


def test_every_public_name_resolves():
    for name in instir.__all__:
        assert getattr(instir, name) is not None, name


def test_importing_instir_loads_no_heavy_library():
    code = "import sys, instir; print(sorted(m for m in ('torch', 'pandas', 'scipy') if m in sys.modules))"
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
