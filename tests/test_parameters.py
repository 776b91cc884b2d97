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


def test_a_list_parameter_given_as_a_json_list_in_text_is_read_as_instir_run_reads_it():
    # before, papermill's -p retrievers '["bm25"]' reached the kernel as text and was split at commas: notebook 02
    # asked for the system '["bm25"]', notebook 03 for the benchmark '["instructir-sample"', while instir run took it
    assert names('["instructir-sample", "ifir-sample/fiqa"]') == ["instructir-sample", "ifir-sample/fiqa"]
    assert notebook_systems('["bm25"]', "", "[]") == ["bm25"]
    with pytest.raises(UsageError, match="parameter 'benchmarks': '\\[\"a\"' is no JSON list"):
        names('["a"', "benchmarks")
    with pytest.raises(UsageError, match="parameter 'benchmarks' takes names"):
        names("[1]", "benchmarks")


@pytest.mark.parametrize("value", [2**31, 10**20])
def test_a_depth_past_the_deepest_cutoff_is_refused_by_the_grid_the_parameters_and_retrieve(value, instructir_sample):
    # on the commit before, k: 100000000000000000000 ran (runs written) while nDCG@100000000000000000000 was refused
    from says import raises_saying

    from instir.parameters import MAX_CUTOFF, depth
    from instir.retrieval.search import retrieve
    from instir.stages.request import run_request

    assert depth(MAX_CUTOFF) == MAX_CUTOFF
    with raises_saying(UsageError, "parameter 'k' takes a whole number", "at most 2,147,483,647", f"got {value}"):
        depth(value)
    with raises_saying(UsageError, "grid.yaml: field 'k' takes a whole number", "at most 2,147,483,647"):
        run_request({"benchmarks": ["instructir-sample"], "systems": ["bm25"], "k": value},
                     lambda field: f"grid.yaml: field {field!r}")
    with raises_saying(UsageError, "retrieve(…, k) takes a whole number", "at most 2,147,483,647"):
        retrieve(instructir_sample, "bm25", k=value)


def test_a_depth_from_numpy_is_a_depth_and_a_python_int():
    import numpy as np

    from instir.parameters import depth

    assert depth(np.int64(10)) == 10 and type(depth(np.int64(10))) is int


def test_a_bounded_count_takes_both_its_bounds_and_nothing_past_them():
    from instir.parameters import count_within

    assert count_within(1, 1, 10, "repeats") == 1 and count_within(10, 1, 10, "repeats") == 10
    for value in (0, 11):
        with pytest.raises(UsageError, match=f"repeats must be a whole number from 1 to 10, got {value}"):
            count_within(value, 1, 10, "repeats")


def test_a_bounded_count_from_numpy_is_a_count_and_a_python_int_as_a_depth_is():
    # on main: check_repeats(np.int64(2)) was refused ("got np.int64(2)") where depth(np.int64(10)) was taken
    import numpy as np

    from instir.judge.stability import check_repeats
    from instir.parameters import count_within

    assert count_within(np.int64(10), 1, 10, "repeats") == 10 and type(count_within(np.int64(10), 1, 10, "")) is int
    assert check_repeats(np.int32(2)) == 2
    with pytest.raises(UsageError, match=r"repeats must be a whole number from 1 to 10, got np.int64\(11\)"):
        count_within(np.int64(11), 1, 10, "repeats")


def test_a_bounded_count_of_more_digits_than_python_prints_is_refused_in_a_short_line():
    # on main: the message's repr of 10**5000 raised ValueError (Python's 4300-digit limit): a traceback
    from instir.judge.stability import check_repeats

    for value in (10**5000, "x" * 10_000):
        with pytest.raises(UsageError) as err:
            check_repeats(value)
        assert str(err.value).startswith("repeats must be a whole number from 1 to 100, got ") \
            and len(str(err.value)) < 200


@pytest.mark.parametrize("value", [86_401, 1e10, 1e300])
def test_a_judge_timeout_past_a_day_is_refused_in_one_line_not_a_failure_of_every_judgment(value):
    # on main: taken; every request then failed with "OverflowError: timestamp out of range for platform time_t"
    import argparse
    import re

    from instir.cli.options import positive_seconds
    from instir.parameters import MAX_SECONDS
    from instir.stages.request import judge_request

    assert judge_request({"backend": "baseline", "timeout_s": MAX_SECONDS}, str).timeout_s == MAX_SECONDS
    with pytest.raises(UsageError, match=re.escape(f"judge.timeout_s takes a positive number of at most 86,400, got "
                                                   f"{value!r}")):
        judge_request({"backend": "baseline", "timeout_s": value}, str)
    assert positive_seconds(str(MAX_SECONDS)) == MAX_SECONDS
    with pytest.raises(argparse.ArgumentTypeError, match="; at most 86,400 \\(a day\\)"):
        positive_seconds(str(value))


@pytest.mark.parametrize("value", [1e-9, 1e-300])
def test_a_judge_rate_below_one_request_a_day_is_refused_in_one_line_not_a_wait_no_clock_holds(tmp_path, value):
    # on main: taken; the sweep's judge then waited 60 / value seconds per request (1,900 years at 1e-9) or, at
    # 1e-300, stopped with "OverflowError: timestamp out of range for platform time_t"
    from instir.distributed.grid import GridError, load_grid
    from instir.parameters import MAX_SECONDS
    from instir.stages.request import judge_request

    assert judge_request({"backend": "baseline", "requests_per_minute": 60 / MAX_SECONDS}, str).requests_per_minute \
        == 60 / MAX_SECONDS
    grid = tmp_path / "grid.yaml"
    grid.write_text("benchmarks: [instructir-sample]\nsystems: [bm25]\n"
                    f"judge: {{backend: baseline, model: lexical, requests_per_minute: {value}}}\n")
    with pytest.raises(GridError, match=f"grid.yaml:3: field 'judge.requests_per_minute' takes a positive number of "
                                        f"at least 0.000694444, got {value}"):
        load_grid(grid)


def test_names_given_twice_are_found_in_time_linear_in_their_number():
    # on main: each name was looked for among all those before it (a list slice): a grid of 120,000 benchmark names,
    # 850 KB, under the 1 MiB a grid may hold, took minutes before its first unknown name was said
    compared = [0]

    class Name(str):
        __hash__ = str.__hash__

        def __eq__(self, other):
            compared[0] += 1
            return str.__eq__(self, other)

    given = [Name(f"b{i}") for i in range(3000)]
    assert names(given, unique=True) == given and compared[0] < 3 * len(given)
    with pytest.raises(UsageError, match="parameter 'names': 'b7' is given twice"):
        names([*given[:10], Name("b7"), Name("b3")], unique=True)
