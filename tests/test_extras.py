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



def test_each_optional_library_comes_with_the_extra_its_message_names():
    """The extra is declared in pyproject.toml and installs the library: it lists the library's distribution, or a
    distribution that requires it (``python-terrier`` brings ``pyterrier``)."""
    import re
    import tomllib
    from importlib.metadata import packages_distributions, requires
    from pathlib import Path

    def name(requirement: str) -> str:
        return re.split(r"[<>=!\[ ;]", requirement)[0].lower().replace("_", "-")

    extras = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    installed = packages_distributions()  # each call reads every installed distribution's file list (~1 s)
    for module, extra in EXTRAS.items():
        listed = {name(requirement) for requirement in extras[extra]}
        brought = listed | {name(r) for dist in listed for r in requires(dist) or [] if "extra ==" not in r}
        assert {name(d) for d in installed.get(module, [])} & brought, (module, extra)


def test_a_library_missing_one_of_its_own_dependencies_keeps_that_error(tmp_path, monkeypatch):
    (tmp_path / "brokenlib.py").write_text("import no_such_dependency_of_brokenlib\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="no_such_dependency_of_brokenlib") as info:
        require("brokenlib")
    assert not isinstance(info.value, MissingExtraError)
