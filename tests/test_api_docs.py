"""The API page: every public name has a docstring and an example, and docs/API.md is current."""

import ast

import pytest

import instir
from instir import apidocs


@pytest.mark.parametrize("name", apidocs.public_names())
def test_every_public_name_has_a_docstring_and_an_example_that_parses(name):
    assert apidocs.summary(apidocs.public_object(name)), f"{name} has no docstring"
    example = apidocs.examples().get(name)
    assert example, f"{name} has no example in docs/api_examples.toml"
    ast.parse(example)


def test_examples_name_only_public_names():
    assert set(apidocs.examples()) <= set(apidocs.public_names())
    assert "show" in instir.__all__ and "show.table" in apidocs.public_names()


def test_the_api_page_is_generated_from_the_current_docstrings_and_examples():
    assert apidocs.PAGE.read_text(encoding="utf-8") == apidocs.render()


def test_check_mode_fails_on_a_stale_page(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(apidocs, "PAGE", tmp_path / "API.md")
    (tmp_path / "API.md").write_text("# old\n", encoding="utf-8")
    assert apidocs.main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().err
    assert apidocs.main([]) == 0 and apidocs.main(["--check"]) == 0
