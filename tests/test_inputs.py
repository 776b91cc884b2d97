"""Bounded inputs (instir.inputs): YAML alias bombs, deep nesting and oversized configuration
files are refused in one line before any value is built or quoted, messages quote values of any
size in bounded space, and a path that is not a regular file says what it is."""

import os
import re
import time
import tomllib
import tracemalloc

import pytest
from says import raises_saying

from instir import inputs
from instir.benchmarks.types import FormatError, quoted
from instir.distributed.grid import GridError, load_grid
from instir.systems import load_cards


def laughs(levels: int) -> str:
    """The "billion laughs": each level nine aliases of the one before (9**levels strings)."""
    lines = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"l{i}: &l{i} [{','.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_a_billion_laughs_grid_is_refused_at_its_first_alias_in_bounded_time_and_memory(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_text(laughs(9) + "benchmarks: *l8\nsystems: [bm25]\n")  # 10**9 strings once expanded
    assert path.stat().st_size < 600
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(GridError) as err:
            load_grid(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    message = str(err.value)
    assert message.startswith(f"{path}:2: YAML aliases are not accepted (*l0)") and len(message) < 200
    assert time.perf_counter() - start < 5 and peak < 20 * 2**20


def test_a_small_alias_bomb_is_refused_not_quoted_whole(tmp_path):
    # on main: accepted by yaml.safe_load, then the benchmarks check quoted all 59049 strings (590 KB)
    path = tmp_path / "grid.yaml"
    path.write_text(laughs(5) + "benchmarks: *l4\nsystems: [bm25]\n")
    with raises_saying(GridError, "grid.yaml:2", "aliases") as err:
        load_grid(path)
    assert len(str(err.value)) < 200


def test_an_alias_bomb_in_a_cards_yaml_file_is_refused_with_file_and_line(tmp_path):
    path = tmp_path / "cards.yaml"
    path.write_text(laughs(5) + "card:\n  - {name: mine, paper: user, kind: retriever, adapter: bm25, params: *l4}\n")
    with pytest.raises(FormatError) as err:
        load_cards([path])
    assert str(err.value).startswith(f"{path}, line 2: YAML aliases are not accepted") and len(str(err.value)) < 200


def test_anchors_without_aliases_are_accepted_and_deep_nesting_is_refused():

    assert inputs.load_yaml("a: &x [1, 2]\nb: 3\n") == {"a": [1, 2], "b": 3}
    with pytest.raises(inputs.InputRefused, match="nested more than 64 levels deep"):
        inputs.load_yaml("a: " + "[" * 5000 + "]" * 5000)


@pytest.mark.parametrize("text,line", [
    ("benchmarks: [instructir-sample]\nsystems: [bm25]\nk: 10\nk: 1000\n", 4),
    ("benchmarks: [instructir-sample]\nsystems: [bm25]\njudge:\n  backend: baseline\n  backend: openai\n", 5),
])
def test_a_key_given_twice_in_a_grid_is_refused_naming_both_lines(tmp_path, text, line):
    # on the commit before, YAML's last value won without a word: which k did the sweep run at?
    path = tmp_path / "grid.yaml"
    path.write_text(text)
    with raises_saying(GridError, f"grid.yaml:{line}", "is given twice (first on line"):
        load_grid(path)


def test_a_deeply_nested_toml_card_file_is_one_line(tmp_path):
    path = tmp_path / "cards.toml"
    path.write_text("x = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(FormatError, match="nested too deeply"):
        load_cards([path])


def test_an_oversized_grid_is_refused_before_it_is_read(tmp_path):

    path = tmp_path / "grid.yaml"
    path.write_text("benchmarks: [instructir-sample]\nsystems: [bm25]\n# " + "x" * inputs.MAX_CONFIG_BYTES + "\n")
    with pytest.raises(GridError, match=f"larger than {inputs.MAX_CONFIG_BYTES} bytes"):
        load_grid(path)


def test_quoting_a_huge_list_or_integer_costs_bounded_time():
    laugh = ["lol"] * 9
    for _ in range(8):
        laugh = [laugh] * 9  # 9**9 strings, shared
    start = time.perf_counter()
    assert len(quoted(laugh)) < 120 and time.perf_counter() - start < 1
    assert quoted(10**5000) == "<an integer of about 5001 digits>"  # repr() itself refuses past 4300 digits
    assert quoted({"a": 1}) == "{'a': 1}" and quoted([1, "x"]) == "[1, 'x']" and quoted(None) == "None"


@pytest.fixture
def odd_paths(tmp_path):
    """A FIFO, a symlink loop, a broken symlink, a folder and /dev/zero, by name."""
    os.mkfifo(tmp_path / "fifo")
    os.symlink(tmp_path / "loop_b", tmp_path / "loop_a")
    os.symlink(tmp_path / "loop_a", tmp_path / "loop_b")
    os.symlink(tmp_path / "gone", tmp_path / "dangling")
    (tmp_path / "folder").mkdir()
    return {"fifo": tmp_path / "fifo", "loop": tmp_path / "loop_a", "dangling": tmp_path / "dangling",
            "folder": tmp_path / "folder", "zero": "/dev/zero", "missing": tmp_path / "missing"}


EXPECTED = {"fifo": "is a FIFO (named pipe), not a regular file", "loop": "is a symlink loop",
            "dangling": "is a broken symlink (to ", "folder": "is a directory, not a file",
            "zero": "is a character device, not a regular file", "missing": "not found"}


@pytest.mark.parametrize("kind", sorted(EXPECTED))
def test_file_problem_says_what_a_path_is(odd_paths, kind):

    assert inputs.file_problem(odd_paths[kind]).startswith(EXPECTED[kind])


@pytest.mark.parametrize("kind", ["fifo", "loop", "zero", "folder"])
def test_a_grid_or_card_file_that_is_no_regular_file_is_named_for_what_it_is(odd_paths, kind):
    with pytest.raises(GridError, match=re.escape(f"grid file {EXPECTED[kind]}")):
        load_grid(odd_paths[kind])  # a FIFO would block for ever in read(), /dev/zero never end
    with pytest.raises(FormatError, match=re.escape(f"card file {EXPECTED[kind]}")):
        load_cards([odd_paths[kind]])


@pytest.mark.parametrize("written", ["1:00", "0x14", "0b101", "1_0", "yes", "No", "on", "OFF", "2024-05-01",
                                     "="])
def test_a_plain_value_yaml_1_1_would_turn_into_a_number_boolean_or_date_stays_its_text(written):
    # on the commit before, PyYAML's YAML 1.1 read 1:00 as 60 (base 60), 0x14 as 20, 0b101 as 5, 1_0 as 10, yes/on as
    # True, 2024-05-01 as a date, and '=' failed with a traceback (no constructor for tag:yaml.org,2002:value)

    assert inputs.load_yaml(f"value: {written}\nlisted: [{written}]\n") == {"value": written, "listed": [written]}


def test_decimal_numbers_booleans_and_nulls_are_read_as_yaml_1_2_reads_them():

    text = "a: 010\nb: -7\nc: 1e3\nd: .5\ne: -.inf\nf: True\ng: FALSE\nh: ~\ni:\nj: 100000000000000000000\nk: '10'\n"
    assert inputs.load_yaml(text) == {"a": 10, "b": -7, "c": 1000.0, "d": 0.5, "e": float("-inf"), "f": True,
                                      "g": False, "h": None, "i": None, "j": 10**20, "k": "10"}  # 010 was octal 8


@pytest.mark.parametrize("value,said", [
    pytest.param("!!int 0x14", "'0x14' is tagged !!int but is no whole number", id="hex"),
    pytest.param("1" * 5000, "a number of 5000 digits", id="5000-digits")])
def test_an_int_that_is_no_decimal_whole_number_is_refused_at_its_line(value, said):
    # on the commit before, !!int 0x14 was 20, and 5000 digits a ValueError traceback (Python's 4300-digit limit)

    with pytest.raises(inputs.InputRefused) as err:
        inputs.load_yaml(f"benchmarks: [instructir-sample]\nk: {value}\n")
    assert err.value.line == 2 and said in err.value.problem


@pytest.mark.parametrize("written", ["1:00", "0x14", "1_0"])
def test_a_grid_k_written_as_yaml_1_1_would_read_it_is_refused_not_run_at_another_depth(tmp_path, written):
    # on the commit before, k: 1:00 ran every cell at k=60, 0x14 at 20, 1_0 at 10, without a word
    path = tmp_path / "grid.yaml"
    path.write_text(f"benchmarks: [instructir-sample]\nsystems: [bm25]\nk: {written}\n")
    with raises_saying(GridError, "grid.yaml", "field 'k' takes a whole number", f"got {written!r}"):
        load_grid(path)


def test_a_card_files_yes_or_on_is_no_boolean_and_its_field_says_true_or_false(tmp_path):
    # on the commit before, normalize: on was True; the same word in a text field would have been True too
    path = tmp_path / "cards.yaml"
    path.write_text("card:\n  - {name: mine, paper: user, kind: retriever, adapter: sentence-transformers,\n"
                    "     model: m, normalize: on}\n")
    with raises_saying(FormatError, str(path), "field 'normalize'", "must be true or false, got 'on'"):
        load_cards([path])


TOML_TEXT = '''# k1 = 0 in a comment
title = """
k1 = 1 inside a string
"""
[[card]]
name = "a"
[[card]]
name = "b"
"k1" = 2
[card.params]
k1 = 3
'''
YAML_TEXT = '''# k1: 0 in a comment
title: "k1: 1 inside a string"
card:
  - name: a
  - name: b
    "k1": 2
    params:
      k1: 3
'''


@pytest.mark.parametrize("text, parse", [(TOML_TEXT, tomllib.loads), (YAML_TEXT, inputs.load_yaml)],
                         ids=["toml", "yaml"])
def test_the_line_of_a_key_is_where_the_parser_reads_it_never_a_comment_or_string_alike(text, parse):
    assert inputs.key_line(text, parse, ["card", 1, "k1"]) == (9 if parse is tomllib.loads else 6)
    assert inputs.key_line(text, parse, ["card", 1, "params", "k1"]) == (11 if parse is tomllib.loads else 8)
    # a value the file lacks: the line of the nearest value holding it (here card b's first line)
    assert inputs.key_line(text, parse, ["card", 1, "colour"]) == (7 if parse is tomllib.loads else 5)
    assert inputs.key_line(text, parse, ["nothing"]) is None
    assert inputs.key_line("a: 1\n1: x\n", inputs.load_yaml, ["1"]) == 2  # a key YAML reads as a number


@pytest.mark.parametrize("text", ["[" * 100_000, '{"a": ' * 100_000, "{not json"],
                         ids=["nested past the recursion limit", "nested objects", "broken"])
def test_a_json_file_no_reader_can_take_reads_as_none_never_raised(tmp_path, text):
    # a lock, a journal or a manifest of "[" * 100000 would raise RecursionError out of every reader of it
    path = tmp_path / "lock.json"
    path.write_text(text)
    assert inputs.read_json(path) is None


# ------------------------------------------------------------------ review72z: bounds at their edge, lines named


def test_a_config_file_of_the_largest_size_is_read_and_one_byte_more_is_refused(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_bytes(b"#" + b"x" * (inputs.MAX_CONFIG_BYTES - 2) + b"\n")
    assert len(inputs.read_config(path, "grid file")) == inputs.MAX_CONFIG_BYTES
    path.write_bytes(b"#" + b"x" * (inputs.MAX_CONFIG_BYTES - 1) + b"\n")
    with pytest.raises(inputs.InputRefused, match=f"grid file is larger than {inputs.MAX_CONFIG_BYTES} bytes"):
        inputs.read_config(path, "grid file")


def test_yaml_text_of_the_largest_size_is_parsed_and_one_character_more_is_refused():
    text = "a: 1\n#" + "x" * (inputs.MAX_CONFIG_BYTES - 7) + "\n"
    assert len(text) == inputs.MAX_CONFIG_BYTES and inputs.load_yaml(text) == {"a": 1}
    with pytest.raises(inputs.InputRefused, match=f"more than a YAML file may hold here \\({inputs.MAX_CONFIG_BYTES}"):
        inputs.load_yaml(text + "#")


def test_nesting_at_the_deepest_level_is_read_and_one_level_more_is_refused():
    deepest = inputs.MAX_DEPTH - 1  # the top mapping is a level too
    assert inputs.load_yaml("a: " + "[" * deepest + "]" * deepest) is not None
    with pytest.raises(inputs.InputRefused, match=f"line 1: nested more than {inputs.MAX_DEPTH} levels deep"):
        inputs.load_yaml("a: " + "[" * (deepest + 1) + "]" * (deepest + 1))


def test_a_config_file_saved_with_a_byte_order_mark_reads_as_its_text(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_bytes("\ufeffk: 10\n".encode())
    assert inputs.read_config(path) == "k: 10\n"


def test_bytes_that_are_no_utf8_are_refused_naming_their_line_and_byte(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_bytes(b"benchmarks: [instructir-sample]\nsystems: [b\xe9m25]\n")
    with pytest.raises(inputs.InputRefused) as err:
        inputs.read_config(path)
    assert str(err.value) == "line 2: not UTF-8 text (byte 0xe9); save the file as UTF-8"


def test_a_json_file_of_the_limit_is_read_and_one_byte_more_is_not(tmp_path):
    path = tmp_path / "lock.json"
    path.write_text('{"pid": 12}')
    assert inputs.read_json(path, limit=11) == {"pid": 12}
    assert inputs.read_json(path, limit=10) is None
    path.write_text('{"pid": 12}\n')  # whole JSON in its first 11 bytes, 12 in all
    assert inputs.read_json(path, limit=11) is None


def test_a_path_through_a_file_is_not_found_saying_why(tmp_path):
    (tmp_path / "grid.yaml").write_text("k: 10\n")
    assert inputs.file_problem(tmp_path / "grid.yaml" / "x") == "not found (a part of the path is a file, not a folder)"


@pytest.mark.skipif(not os.path.exists("/dev/loop0"), reason="needs a block device")
def test_a_block_device_is_named_for_what_it_is():
    assert inputs.file_problem("/dev/loop0") == "is a block device, not a regular file"


def test_a_key_given_twice_names_the_line_of_its_first_value():
    with pytest.raises(inputs.InputRefused) as err:
        inputs.load_yaml("k: 10\nsystems: [bm25]\nk: 20\n")
    assert str(err.value) == "line 3: key 'k' is given twice (first on line 1)"


def test_the_line_of_a_key_is_named_in_a_file_of_the_most_lines_and_not_beyond():
    import tomllib

    text = "".join(f"k{i} = {i}\n" for i in range(inputs.MAX_LINED))  # MAX_LINED lines, each ended by a newline
    assert inputs.key_line(text, tomllib.loads, ["k4999"]) == inputs.MAX_LINED
    assert inputs.key_line(text + "k5000 = 0\n", tomllib.loads, ["k5000"]) is None


def test_a_merge_key_with_a_mapping_written_out_is_merged():
    assert inputs.load_yaml("<<: {k: 10, systems: [bm25]}\nk: 20\n") == {"k": 20, "systems": ["bm25"]}


def test_a_path_from_the_home_folder_is_expanded_and_one_of_no_user_here_is_one_line(monkeypatch, tmp_path):
    from instir.errors import UsageError

    monkeypatch.setenv("HOME", str(tmp_path))
    assert inputs.expanded("~/grid.yaml") == tmp_path / "grid.yaml"
    with pytest.raises(UsageError, match="~no-such-user-72z/grid.yaml: '~no-such-user-72z' is no home folder here"):
        inputs.expanded("~no-such-user-72z/grid.yaml")


# ------------------------------------------------------------------ lim76: at the limits, every line ending


@pytest.mark.parametrize("digits", [5000, 4301])  # 4301: one past what Python reads
@pytest.mark.parametrize("name", ["grid.toml", "cards.toml"])
def test_a_toml_number_of_more_digits_than_python_reads_is_refused_at_its_line_not_a_traceback(tmp_path, name,
                                                                                                digits):
    path = tmp_path / name
    path.write_text('benchmarks = ["instructir-sample"]\nsystems = ["bm25"]\nk = ' + "9" * digits + "\n")
    with pytest.raises(inputs.InputRefused) as err:
        inputs.load_config(path, path.read_text())
    assert str(err.value) == f"line 3: a number of {digits} digits, more than Python reads (4300)"
    with pytest.raises(GridError, match=rf"grid.toml:3: a number of {digits} digits") if name == "grid.toml" else \
            pytest.raises(FormatError, match=rf"cards.toml, line 3: a number of {digits} digits"):
        load_grid(path) if name == "grid.toml" else load_cards([path])


@pytest.mark.parametrize("parse", [tomllib.loads, inputs.load_yaml], ids=["toml", "yaml"])
def test_the_line_of_a_key_in_a_file_with_crlf_line_ends_is_its_own_line(parse):
    text = ("# a comment\r\n" * 5 + "k = 1\r\nj = 2\r\n") if parse is tomllib.loads else \
        ("# a comment\r\n" * 5 + "k: 1\r\nj: 2\r\n")
    assert inputs.key_line(text, parse, ["j"]) == 7
    assert inputs.key_line(text.replace("\r\n", "\n"), parse, ["j"]) == 7


class _Spent(BaseException):
    """Raised by a counting parser past its allowance (a BaseException: key_line's own ``except Exception`` lets
    it through)."""


def test_the_line_of_a_key_after_a_string_of_thousands_of_lines_costs_bounded_parsing(monkeypatch):
    # on main: each probe of the bisection parsed every longer prefix inside the string, quadratic: a 5,000-line
    # card file with its error after such a string took minutes (over 2 at 0.75 MB)
    monkeypatch.setattr(inputs, "KEY_LINE_CHARS", 1 << 20)
    text = 'note = """\n' + "a line of a long string\n" * (inputs.MAX_LINED - 4) + '"""\nk = 1\n'
    spent = [0]

    def counting(chunk: str):
        spent[0] += len(chunk)
        if spent[0] > inputs.KEY_LINE_CHARS + len(text):
            raise _Spent
        return tomllib.loads(chunk)

    assert inputs.key_line(text, counting, ["k"]) is None  # over the allowance: no line, as over MAX_LINED
    assert spent[0] <= inputs.KEY_LINE_CHARS + len(text)
    spent[0] = 0
    short = 'note = """\n' + "a line\n" * 300 + '"""\nk = 1\n'
    assert inputs.key_line(short, counting, ["k"]) == 303  # a string of hundreds of lines: found, within it
