"""List parameters as papermill hands them to a kernel (``-p retrievers bm25`` is a string):
:func:`instir.parameters.names` and the notebooks' system names read them as lists."""

import pytest

from instir.errors import UsageError
from instir.parameters import names
from instir.systems.specs import notebook_systems


def test_a_list_parameter_given_as_text_is_its_comma_separated_names():
    assert names("instructir-sample") == ["instructir-sample"]
    assert names("instructir-sample, ifir-sample/fiqa,") == ["instructir-sample", "ifir-sample/fiqa"]
    assert names(("bm25",)) == ["bm25"]
    with pytest.raises(UsageError, match="parameter 'benchmarks' takes names"):
        names([1, 2], "benchmarks")


def test_the_notebooks_retrievers_and_systems_given_as_text_are_names_not_characters():
    assert notebook_systems("bm25") == ["bm25"]
    assert notebook_systems("bm25,dense", "BAAI/bge-base-en-v1.5", "BM25 (IFIR)") == [
        "bm25", "dense:BAAI/bge-base-en-v1.5", "BM25 (IFIR)"]
    assert notebook_systems(["hybrid"], "", []) == ["hybrid"]
    with pytest.raises(UsageError, match="parameter 'systems' takes names"):
        notebook_systems(["bm25"], "", [3])
