"""One run request, one rule per value: a grid file and the notebooks' parameters make the same
request, and a mistake gets the same answer from both, naming where the value came from."""

from pathlib import Path

import pytest
from says import raises_saying

from instir.distributed.grid import GridError, parse_grid
from instir.errors import UsageError, UserError
from instir.pipeline import find_notebooks, notebook_parameters, validate_parameters
from instir.stages.request import JudgeRequest, notebook_request, run_request

NOTEBOOKS = find_notebooks(Path(__file__).resolve().parents[2] / "notebooks")


@pytest.fixture(scope="module")
def known():
    return notebook_parameters(NOTEBOOKS)


def test_a_grid_and_the_notebooks_parameters_make_the_same_request():
    grid = parse_grid({"benchmarks": ["followir-sample"], "systems": ["bm25", "dense"], "k": 20,
                       "judge": {"backend": "baseline", "model": "lexical", "max_instances": 3}}, "grid.yaml")
    notebooks = notebook_request({"benchmarks": ["followir-sample"], "retrievers": ["bm25", "dense"], "systems": [],
                                  "dense_model": "", "k": 20, "judge_backend": "baseline", "judge_model": "lexical",
                                  "judge_max_instances": 3})
    for field in ("benchmarks", "systems", "k", "judge", "settings", "variants"):
        assert getattr(grid, field) == getattr(notebooks, field), field
    assert len(grid.benchmarks) > 1  # the collection stands for its benchmarks in both
    assert grid.judge == JudgeRequest("baseline", "lexical", max_instances=3)
    assert [c.run_id for c in grid.cells()] == [c.run_id for c in notebooks.cells()]


MISTAKES = [  # (grid fields, notebook parameters, what both say after their "where")
    ({"k": 0}, {"k": 0}, ("'k'", "whole number of at least 1", "got 0")),
    ({"benchmarks": ["ifir-sampel"]}, {"benchmarks": ["ifir-sampel"]},
     ("'benchmarks'", "'ifir-sampel'", "did you mean 'ifir-sample'?")),
    ({"systems": ["bm25", "bm25"]}, {"retrievers": ["bm25"], "systems": ["bm25"]}, ("'systems'", "'bm25'", "twice")),
    ({"systems": ["NoSuchCard"]}, {"systems": ["NoSuchCard"]}, ("'systems'", "'NoSuchCard'")),
    ({"judge": {"backend": "opena"}}, {"judge_backend": "opena"},
     ("judge", "backend 'opena' (did you mean 'openai'?); use one of openai, hf, baseline")),
    ({"judge": {"backend": "openai"}}, {"judge_backend": "openai", "judge_model": ""},
     ("judge", "model", "openai backend needs a model")),
    ({"judge": {"backend": "baseline", "api_key_env": "sk-abcdefghijklmnopqrstuvwxyz123456"}},
     {"judge_api_key_env": "sk-abcdefghijklmnopqrstuvwxyz123456"}, ("api_key_env", "environment variable")),
    ({"judge": {"backend": "baseline", "max_instances": 0}}, {"judge_max_instances": 0},
     ("max_instances", "whole number from 1 to", "got 0")),
    ({"judge": {"backend": "baseline", "timeout_s": -1}}, {"judge_timeout_s": -1.0},
     ("timeout_s", "positive number", "got -1")),
    # was accepted: notebook 04 failed on it after the chain had run (a grid's sweep ran every cell first)
    ({"judge": {"backend": "baseline", "model": "lexicl"}}, {"judge_backend": "baseline", "judge_model": "lexicl"},
     ("judge", "model", "unknown baseline judge method 'lexicl'", "did you mean 'lexical'?")),
]


@pytest.mark.parametrize(("grid_fields", "parameters", "parts"), MISTAKES)
def test_a_mistake_gets_one_answer_from_the_grid_and_from_the_parameters(known, grid_fields, parameters, parts):
    base = {"benchmarks": ["instructir-sample"], "systems": ["bm25"]}
    with raises_saying(GridError, "grid.yaml: field", *parts):
        parse_grid({**base, **grid_fields}, "grid.yaml")
    with raises_saying(UsageError, "parameter", *parts):
        validate_parameters(parameters, known)


def test_a_notebook_chain_is_asked_only_for_the_parameters_it_has():
    request = notebook_request({"benchmarks": ["instructir-sample"]})  # notebook 03's parameters alone
    assert request.benchmarks == ("instructir-sample",) and request.systems == () and request.judge is None
    with raises_saying(UsageError, "'benchmarks'", "required"):
        run_request({"systems": ["bm25"]}, lambda field: f"field {field!r}")


def test_an_openai_judge_without_a_model_is_refused_before_any_kernel(known):
    """Before, ``instir run --judge openai`` ran notebooks 00-03 and failed in notebook 04."""
    with raises_saying(UsageError, "parameter 'judge_model'", "needs a model"):
        validate_parameters({"judge_backend": "openai"}, known)
    validate_parameters({"judge_backend": "openai", "judge_model": "gpt-4o-mini"}, known)


def test_a_grids_judge_takes_the_notebooks_defaults_for_what_it_leaves_out(known):
    # instir sweep and instir run judge alike: the keys a grid's judge leaves out get notebook 04's defaults
    import ast

    grid = parse_grid({"benchmarks": ["instructir-sample"], "systems": ["bm25"], "judge": {"backend": "baseline"}},
                      "grid.yaml")
    for key in ("api_key_env", "timeout_s", "max_instances", "repeats"):
        assert getattr(grid.judge, key) == ast.literal_eval(known[f"judge_{key}"].default), key


@pytest.mark.parametrize("judge", ["baseline", [], ["backend", "baseline"]])
def test_a_judge_that_is_no_mapping_is_refused_saying_so(judge):
    with raises_saying(GridError, "grid.yaml: field 'judge'", "takes a mapping with a backend"):
        parse_grid({"benchmarks": ["instructir-sample"], "systems": ["bm25"], "judge": judge}, "grid.yaml")


def test_two_system_names_that_would_share_a_run_id_are_refused():
    # "model x" and "model/x" are two folders, but every file of their runs would have one name (dense---org-model-x)
    with raises_saying(GridError, "field 'systems'", "'dense:~/org/model x'", "'dense:~/org/model/x'", "list it once"):
        parse_grid({"benchmarks": ["instructir-sample"], "systems": ["dense:~/org/model x", "dense:~/org/model/x"]},
                   "grid.yaml")


@pytest.mark.parametrize("given", [{"retrievers": [], "systems": []}, {"retrievers": []}, {"systems": []}])
def test_a_notebook_chain_that_retrieves_must_be_given_a_system(given):
    # a chain with either parameter retrieves: one of them alone, empty, is no system either
    with raises_saying(UsageError, "parameter 'retrievers' or 'systems'", "empty"):
        notebook_request({"benchmarks": ["instructir-sample"], **given})


@pytest.mark.parametrize("field", ["benchmarks", "systems"])
def test_a_grid_field_left_empty_in_yaml_is_refused_as_required_not_as_a_grid_of_no_run(field):
    # "benchmarks:" with nothing after it is None in YAML: the field is missing, not a list of no names
    grid = {"benchmarks": ["instructir-sample"], "systems": ["bm25"], field: None}
    with raises_saying(GridError, f"grid.yaml: field {field!r} is required"):
        parse_grid(grid, "grid.yaml")


def test_an_unknown_retriever_kind_is_named_as_a_retriever_with_the_closest_kind():
    with raises_saying(UsageError, "parameter 'retrievers'", "unknown retriever 'bm2'", "did you mean 'bm25'"):
        notebook_request({"benchmarks": ["instructir-sample"], "retrievers": ["bm2"]})


@pytest.mark.parametrize(("extra", "parts"), [
    ({"k": True}, ("field 'k'", "whole number of at least 1")),
    ({"judge": {"backend": "baseline", "timeout_s": 0}}, ("judge.timeout_s", "positive number", "got 0")),
    ({"judge": {"backend": "baseline", "requests_per_minute": float("inf")}},
     ("judge.requests_per_minute", "positive number")),
    ({"data_root": "data\x00root"}, ("field 'data_root'", "folder path")),
])
def test_a_value_at_the_edge_of_its_rule_is_refused_naming_its_field(extra, parts):
    with raises_saying(GridError, "grid.yaml:", *parts):
        parse_grid({"benchmarks": ["instructir-sample"], "systems": ["bm25"], **extra}, "grid.yaml")


def test_the_bundled_model_named_by_its_id_is_the_bundled_dense_system_listed_once():
    from instir.retrieval import BUNDLED_MODEL_ID
    from instir.systems.specs import resolve_system

    named = resolve_system(f"dense:{BUNDLED_MODEL_ID}")
    assert (named.model, named.label, named.resources) == (None, resolve_system("dense").label, {})
    with raises_saying(GridError, "field 'systems'", "'dense'", f"'dense:{BUNDLED_MODEL_ID}'", "list it once"):
        parse_grid({"benchmarks": ["instructir-sample"], "systems": ["dense", f"dense:{BUNDLED_MODEL_ID}"]},
                   "grid.yaml")


def test_a_grid_system_whose_packages_are_missing_is_refused_naming_the_card_and_the_package(monkeypatch):
    import importlib.util

    from instir.stages.request import check_runnable

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "peft" else real(name, *a))
    grid = parse_grid({"benchmarks": ["instructir-sample"], "systems": ["Promptriever-7B"]}, "grid.yaml")
    with raises_saying(UserError, "system 'Promptriever-7B'", "peft", "pip install"):
        check_runnable(grid, where=lambda field: f"field {field!r}")


def test_systems_named_twice_are_found_without_comparing_each_with_every_one_before_it(monkeypatch):
    # on main: each system was compared with every one before it (file_part of each, again): 3,000 systems took 47 s,
    # and the 40,000 a 1 MiB grid may name would have taken hours before the grid was refused or run
    from instir.errors import UsageError
    from instir.stages import request

    calls = [0]
    file_part = request.file_part

    def counted(name):
        calls[0] += 1
        return file_part(name)

    monkeypatch.setattr(request, "file_part", counted)
    assert len(request.system_specs([f"dense:org/m{i}" for i in range(1000)], "w")) == 1000
    assert calls[0] <= 2 * 1000  # on main: 1,000,000
    with pytest.raises(UsageError, match="w: 'dense' and 'dense:sentence-transformers/all-MiniLM-L6-v2' are one "):
        request.system_specs(["dense:org/m0", "dense", "bm25", "dense:sentence-transformers/all-MiniLM-L6-v2"], "w")


@pytest.mark.parametrize("written", ["$HOME/cache", "${HOME}/cache", "/data/$USER"])
def test_a_folder_naming_an_environment_variable_gets_one_answer_from_the_grid_and_the_parameters(known, written):
    # on the commit before, a grid's cache_dir: $HOME/cache made a folder named "$HOME" in the working directory
    variable = written[written.index("$"):].split("/")[0]
    with raises_saying(GridError, "grid.yaml: field 'cache_dir'", f"the environment variable {variable}",
                       "not expanded here"):
        parse_grid({"benchmarks": ["instructir-sample"], "systems": ["bm25"], "cache_dir": written}, "grid.yaml")
    with raises_saying(UsageError, "parameter 'data_root'", f"the environment variable {variable}"):
        validate_parameters({"data_root": written}, known)
    assert parse_grid({"benchmarks": ["instructir-sample"], "systems": ["bm25"], "cache_dir": "/data/cost$5"},
                      "grid.yaml").cache_dir == "/data/cost$5"  # a dollar sign that names no variable is a character
