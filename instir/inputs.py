"""Checks on a user's input files before they are read: what a path is when it is not a regular file
(:func:`file_problem`), and the small configuration files (a sweep grid, a ``--cards`` file) read
whole by :func:`read_config` and parsed by :func:`load_config`, TOML or YAML (:func:`key_line`: the
line of a key, for an error about its value to name, in YAML or TOML): PyYAML's safe loader with the
three ways a small file can stand for an unbounded value refused: aliases (``*name`` and merge keys:
ten lines of nested aliases, the "billion laughs", stand for a billion strings, which any walk over
the value expands; an anchor alone is accepted), nesting deeper than :data:`MAX_DEPTH` (a
``RecursionError`` in PyYAML) and a file larger than :data:`MAX_CONFIG_BYTES`. Every refusal is an
:class:`InputRefused` with the problem and, when known, the 1-based line.

A plain (unquoted) value is read as YAML 1.2's core schema reads it, not as PyYAML's YAML 1.1:
``true``/``false`` (also ``True``, ``TRUE``), ``null``/``~``/nothing, whole numbers in decimal
digits (``010`` is 10) and decimal fractions (``1e3``, ``.5``, ``.inf``); everything else is text.
YAML 1.1 read ``k: 1:00`` as 60 (base 60), ``0x14`` as 20, ``0b101`` as 5, ``1_0`` as 10, ``010`` as
8, ``yes``/``no``/``on``/``off`` as booleans and ``2024-05-01`` as a date, each without a word; here
each stays the text it is, which the field's own check then refuses at its line (``takes a whole
number …, got '1:00'``) unless text is what the field takes. A value tagged ``!!int`` that is no
decimal whole number is refused at its line.
"""

from __future__ import annotations

import bisect
import errno
import functools
import itertools
import json
import os
import re
import stat
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from instir.errors import UsageError

#: C0 and C1 control characters and DEL: pytrec_eval cuts an id at NUL (``<relevant id>\x00junk`` scores as the
#: relevant id), a TREC file cannot hold a tab or a newline in an id, and a terminal acts on ESC.
CONTROLS = "".join(map(chr, [*range(0x20), *range(0x7F, 0xA0)]))
#: Characters that show as nothing yet change what is shown: Unicode's Default_Ignorable_Code_Point set (the soft
#: hyphen, zero-width marks and joiners, the bidirectional marks, embeddings, overrides and isolates: an id holding
#: U+202E reads backwards on a terminal or a report page; invisible operators, Hangul fillers, variation selectors,
#: the byte order mark, and the tag characters, with which ``d1\U000E0041`` prints as ``d1``). Ids may not hold them
#: (:mod:`instir.benchmarks.readers`) and the terminal escapes them (:mod:`instir.terminal`).
INVISIBLE = "".join(chr(c) for first, last in (
    (0xAD, 0xAD), (0x34F, 0x34F), (0x61C, 0x61C), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F),
    (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x206F), (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFEFF, 0xFEFF),
    (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A), (0xE0000, 0xE0FFF))
    for c in range(first, last + 1))


def code_point_runs(chars: str) -> list[tuple[int, int]]:
    """(first, last) code point of each run of consecutive characters in ``chars``, in order."""
    codes = sorted(set(map(ord, chars)))
    runs = ([code for _, code in run] for _, run in itertools.groupby(enumerate(codes), lambda pair: pair[1] - pair[0]))
    return [(run[0], run[-1]) for run in runs]


def char_class(chars: str) -> re.Pattern:
    """A pattern matching any one of ``chars``, written as ranges: a class of thousands of single characters (the
    default-ignorable code points) made every search about 250 times slower (58 µs an id against 0.23 µs)."""
    return re.compile("[" + "".join(f"{re.escape(chr(first))}-{re.escape(chr(last))}"
                                    for first, last in code_point_runs(chars)) + "]")

#: Largest configuration file (grid, card file) read, in bytes.
MAX_CONFIG_BYTES = 1 << 20
#: Deepest nesting of YAML sequences and mappings accepted.
MAX_DEPTH = 64
#: The longest config file (in lines) whose errors name their line (:func:`key_line` parses it up to a line).
MAX_LINED = 5000
#: Characters :func:`key_line` may parse, in all, to find a line (its prefixes of a file: a few seconds).
KEY_LINE_CHARS = 64 << 20
#: A prefix of a config file that does not parse (:func:`key_line`).
_FAILED = object()


class InputRefused(ValueError):
    """An input the kit does not read: ``problem`` says why (an alias, too deep, too large, not a
    regular file, not UTF-8), ``line`` where (1-based; None when the whole file is refused)."""

    def __init__(self, problem: str, line: int | None = None):
        super().__init__(problem)
        self.problem, self.line = problem, line

    def __str__(self) -> str:
        return f"line {self.line}: {self.problem}" if self.line else self.problem


def expanded(path: str | Path) -> Path:
    """``path`` with a leading ``~`` or ``~user`` made the home folder it names; one no account here has
    (``~nouser``, or no home at all) is a :class:`~instir.errors.UsageError` naming the path, not Python's
    ``RuntimeError`` traceback. Every path a user gives goes through it."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        raise UsageError(f"{path}: {str(path).split(os.sep)[0]!r} is no home folder here (no such user)") from None


def file_problem(path: str | Path) -> str | None:
    """None when ``path`` is a regular file (or a symlink to one); else what it is, as the end of
    a message: ``not found``, ``is a directory, not a file``, ``is a FIFO (named pipe), not a
    regular file``, ``is a character device, not a regular file`` (``/dev/zero``), ``is a symlink
    loop …``, ``is a broken symlink (to …)``, or the system's reason (``permission denied``).
    Reading anything but a regular file can block for ever (a FIFO) or never end (``/dev/zero``)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        if os.path.islink(path):
            return f"is a broken symlink (to {os.readlink(path)})"
        return "not found"
    except NotADirectoryError:
        return "not found (a part of the path is a file, not a folder)"
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "is a symlink loop (its links lead back to themselves)"
        return (err.strerror or str(err)).lower()
    if stat.S_ISREG(mode):
        return None
    kinds = ((stat.S_ISDIR, "is a directory, not a file"),
             (stat.S_ISFIFO, "is a FIFO (named pipe), not a regular file"),
             (stat.S_ISCHR, "is a character device, not a regular file"),
             (stat.S_ISBLK, "is a block device, not a regular file"),
             (stat.S_ISSOCK, "is a socket, not a regular file"))
    return next((what for test, what in kinds if test(mode)), "is not a regular file")


def read_head(path: str | Path, limit: int) -> bytes | None:
    """At most the first ``limit`` bytes of ``path``; None when it is no regular file (:func:`file_problem`:
    a FIFO would block the read for ever, a device never end it) or cannot be read. How the kit peeks into a
    file it may not have written (a page, a table, an index, a sidecar, a lock) to see whether it did."""
    if file_problem(path) is not None:
        return None
    try:
        with open(path, "rb") as fh:
            return fh.read(limit)
    except OSError:
        return None


def read_json(path: str | Path, limit: int = 64 << 20) -> Any:
    """The JSON value ``path`` holds (UTF-8); None when :func:`read_head` reads nothing, the file holds more
    than ``limit`` bytes or no JSON."""
    data = read_head(path, limit + 1)
    if data is None or len(data) > limit:
        return None
    try:
        return json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        return None


def read_config(path: str | Path, what: str = "file") -> str:
    """The UTF-8 text of a small configuration file: :class:`InputRefused` for a path that is not
    a regular file (``what`` names it in the message: ``grid file is a FIFO …``), a file larger
    than :data:`MAX_CONFIG_BYTES` (refused before it is read whole) and bytes that are not UTF-8
    (with their line); ``OSError`` when a regular file cannot be read (permissions)."""
    problem = file_problem(path)
    if problem is not None:
        raise InputRefused(f"{what} {problem}")
    with open(path, "rb") as fh:
        data = fh.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise InputRefused(f"{what} is larger than {MAX_CONFIG_BYTES} bytes, more than one may hold")
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as err:
        raise InputRefused(f"not UTF-8 text (byte 0x{data[err.start]:02x}); save the file as UTF-8",
                           data.count(b"\n", 0, err.start) + 1) from None


def load_yaml(text: str) -> Any:
    """The value of one YAML document (``None`` for an empty one), as ``yaml.safe_load`` builds
    it but with YAML 1.2's plain scalars, or :class:`InputRefused` (see the module docstring);
    other parse errors are PyYAML's own ``yaml.YAMLError``."""
    if len(text) > MAX_CONFIG_BYTES:
        raise InputRefused(f"{len(text)} characters, more than a YAML file may hold here ({MAX_CONFIG_BYTES})")
    loader = _bounded_loader()(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def load_config(path: str | Path, text: str) -> Any:
    """The value of a configuration file's ``text`` in the language its name says: TOML for ``.toml``, YAML
    (:func:`load_yaml`) otherwise; a text that does not parse is :class:`InputRefused` naming the language (and
    the line, where YAML's parser gives one). Card files and sweep grids are read by this one rule."""
    if Path(path).suffix == ".toml":
        import tomllib

        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise InputRefused(f"not valid TOML: {err}") from None
        except RecursionError:
            raise InputRefused("not valid TOML: nested too deeply") from None
        except ValueError:  # Python's limit on the digits of an int (4300), which tomllib meets as a bare ValueError
            long = re.search(r"[0-9_]{4301,}", text)
            raise InputRefused(f"a number of {len(long.group()) if long else 'over 4300'} digits, more than "
                               "Python reads (4300)", text.count("\n", 0, long.start()) + 1 if long else None) from None
    import yaml

    try:
        return load_yaml(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        raise InputRefused(f"not valid YAML ({getattr(err, 'problem', None) or err})",
                           mark.line + 1 if mark is not None else None) from None


class _OverBudget(Exception):
    """:func:`key_line` parsed more than its budget of characters."""


def key_line(text: str, parse: Callable[[str], Any], keys: Sequence[str | int]) -> int | None:
    """The 1-based line (counted by newlines, as editors count) on which a configuration file's ``text``, read by
    ``parse`` (TOML or YAML), gives the value at ``keys`` (mapping keys and list positions from the top:
    ``("card", 2, "params", "k1")``); where it lacks that value, the line of the nearest value holding it (a
    card's first line for a field it lacks); None for a file over :data:`MAX_LINED` lines, or where finding the
    line would parse more than :data:`KEY_LINE_CHARS` characters in all (a string spanning thousands of lines,
    inside which every prefix fails: the search was quadratic, minutes for a 5,000-line card file). The one way every
    config file's errors find their line: the file is parsed up to a line, as its loader parses it, so a
    comment, a string or a quoted key never misleads it (a bisection: a few parses, and only on an error)."""
    lines = text.split("\n")
    if len(lines) - (lines[-1] == "") > MAX_LINED:  # the newline that ends the last line starts none
        return None
    parsed: dict[int, Any] = {}  # the value of the first ``end`` lines, by end (_FAILED: they do not parse)
    budget = [KEY_LINE_CHARS]

    def prefix(end: int) -> Any:
        if end not in parsed:
            # with its line's newline: a CR ending a CRLF line is no line end without it (TOML refuses it)
            chunk = "\n".join(lines[:end]) + ("\n" if end < len(lines) else "")
            budget[0] -= len(chunk) + 1
            if budget[0] < 0:
                raise _OverBudget
            try:
                parsed[end] = parse(chunk)
            except Exception:  # a prefix cut inside a value fails as its parser fails it
                parsed[end] = _FAILED
        return parsed[end]

    def holds(line: int, keys: Sequence[str | int]) -> bool:
        """Whether the file up to ``line`` (and on to where that much parses) holds ``keys``."""
        for end in range(line + 1, len(lines) + 1):
            node = prefix(end)
            if node is _FAILED:
                continue
            for key in keys:
                if isinstance(key, int) and isinstance(node, list) and 0 <= key < len(node):
                    node = node[key]
                elif isinstance(key, str) and isinstance(node, Mapping):  # a key written 1 or true: by its text
                    found = [value for name, value in node.items() if name == key or str(name) == key]
                    if not found:
                        return False
                    node = found[0]
                else:
                    return False
            return True
        return False

    try:
        for held in range(len(keys), 0, -1):
            line = bisect.bisect_left(range(len(lines)), True, key=lambda n: holds(n, keys[:held]))
            if line < len(lines):
                return line + 1
    except _OverBudget:
        return None
    return None


#: YAML 1.2 core schema's plain scalars (https://yaml.org/spec/1.2.2/#1032-tag-resolution), without its
#: ``0o``/``0x`` integers: a count in a grid or card is written in decimal digits. Each tag's pattern and the
#: first characters (``""``: the empty value) by which PyYAML's resolver looks it up.
CORE_SCALARS = (
    ("bool", r"true|True|TRUE|false|False|FALSE", "tTfF"),
    ("null", r"~|null|Null|NULL|", ("~", "n", "N", "")),
    ("int", r"[-+]?[0-9]+", "-+0123456789"),
    ("float", r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)",
     "-+.0123456789"),
)


@functools.cache
def _bounded_loader() -> type:
    """PyYAML's safe loader, refusing aliases and deep nesting while composing (before any value is built)
    and a key given twice, and resolving plain scalars by :data:`CORE_SCALARS` (plus ``<<`` merge keys)."""
    import yaml

    class BoundedLoader(yaml.SafeLoader):
        """The safe loader with the kit's bounds and YAML 1.2's plain scalars."""

        depth = 0
        yaml_implicit_resolvers: dict = {}

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                event = self.peek_event()
                raise InputRefused(f"YAML aliases are not accepted (*{event.anchor[:40]}): an alias can stand "
                                   "for an unbounded value; write the value out", event.start_mark.line + 1)
            self.depth += 1
            try:
                if self.depth > MAX_DEPTH:
                    raise InputRefused(f"nested more than {MAX_DEPTH} levels deep",
                                       self.peek_event().start_mark.line + 1)
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            lines: dict[str, int] = {}  # a key given twice would silently take the last value
            for key, _ in node.value:
                if isinstance(key, yaml.ScalarNode):
                    if key.value in lines:
                        raise InputRefused(f"key {key.value[:40]!r} is given twice (first on line {lines[key.value]})",
                                           key.start_mark.line + 1)
                    lines[key.value] = key.start_mark.line + 1
            return super().construct_mapping(node, deep)

        def construct_yaml_int(self, node: Any) -> int:
            """A whole number in decimal digits (YAML 1.1's ``010`` was octal 8, ``1:00`` 60, ``0x14`` 20)."""
            value = self.construct_scalar(node)
            try:
                if re.fullmatch(r"[-+]?[0-9]+", value):
                    return int(value)
            except ValueError:  # Python's limit on the digits of an int (4300)
                raise InputRefused(f"a number of {len(value)} digits, more than Python reads (4300)",
                                   node.start_mark.line + 1) from None
            raise InputRefused(f"{value[:40]!r} is tagged !!int but is no whole number in decimal digits",
                               node.start_mark.line + 1)

    for tag, pattern, first in CORE_SCALARS:
        BoundedLoader.add_implicit_resolver(f"tag:yaml.org,2002:{tag}", re.compile(f"^(?:{pattern})$"), list(first))
    BoundedLoader.add_implicit_resolver("tag:yaml.org,2002:merge", re.compile(r"^(?:<<)$"), ["<"])
    BoundedLoader.add_constructor("tag:yaml.org,2002:int", BoundedLoader.construct_yaml_int)
    return BoundedLoader
