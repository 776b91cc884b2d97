"""Optional libraries: a missing one is answered with the pip line of its extra; a library that is
installed but fails inside keeps its own error."""

import sys

import pytest
from says import raises_saying

from instir.errors import UserError
from instir.extras import EXTRAS, MissingExtraError, require


def test_a_missing_optional_library_names_the_extra_that_installs_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "ranx", None)  # import ranx now raises ModuleNotFoundError
    with raises_saying(MissingExtraError, "ranx", "pip install 'instir[interop]'") as info:
        require("ranx")
    assert isinstance(info.value, UserError) and isinstance(info.value, ModuleNotFoundError)
    assert EXTRAS == {"ranx": "interop", "pyterrier": "interop", "ir_datasets": "interop"}


def test_a_library_missing_one_of_its_own_dependencies_keeps_that_error(tmp_path, monkeypatch):
    (tmp_path / "brokenlib.py").write_text("import no_such_dependency_of_brokenlib\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="no_such_dependency_of_brokenlib") as info:
        require("brokenlib")
    assert not isinstance(info.value, MissingExtraError)
