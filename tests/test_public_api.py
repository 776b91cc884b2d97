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
