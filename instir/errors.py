"""Errors a user can fix from their message alone, as opposed to bugs.

The ``instir`` command prints a :class:`UserError` as one line (``instir <command>: <message>``)
and exits 2, as it does an ``OSError`` or a damaged cache (:mod:`instir.cli`); any other exception
is a bug and keeps its traceback (exit 1). Each also derives
from the built-in exception that code catching errors of that kind expects (``ValueError``,
``KeyError``, ``RuntimeError``). A base class rather than catching every ``ValueError`` in the
CLI, because numpy, pandas and scikit-learn raise ``ValueError`` for bugs too: one line would
hide the traceback a bug report needs.
"""

from __future__ import annotations

import difflib
import reprlib
from collections.abc import Iterable

#: Characters of a user's value that a message quotes (ids, field values, grades).
QUOTE_LIMIT = 80


class _BoundedRepr(reprlib.Repr):
    """``reprlib`` with a few items per level and no level below the third: the repr of a value
    from a user's file costs a bounded amount whatever the value (a list of a billion strings, an
    integer of a million digits, which ``repr`` itself refuses beyond 4300)."""

    def __init__(self) -> None:
        super().__init__()
        self.maxlevel = 3
        self.maxtuple = self.maxlist = self.maxset = self.maxfrozenset = self.maxdeque = self.maxarray = 8
        self.maxdict = 6
        self.maxstring = self.maxother = QUOTE_LIMIT

    def repr_int(self, x: int, level: int) -> str:
        digits = int(x.bit_length() * 0.30103) + 1  # log10(2): the digits, within one
        return repr(x) if digits <= 60 else f"<an integer of about {digits} digits>"


_BOUNDED_REPR = _BoundedRepr()


def shorten(text: str, limit: int = QUOTE_LIMIT) -> str:
    """``text`` itself, or its first ``limit`` characters followed by ``… (N chars)``."""
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text)} chars)"


def quoted(value: object, limit: int = QUOTE_LIMIT) -> str:
    """``repr(value)`` for a message, capped: a string of more than ``limit`` characters is
    quoted by its first ``limit`` (``'abc…'… (10485760 chars)``), so a 10 MB id from a user's
    file never floods a terminal, a log or a report; a list or a mapping shows its first items,
    three levels deep, so quoting one never walks all of it (a YAML alias bomb, a huge list)."""
    if isinstance(value, str):
        return f"{value[:limit]!r}… ({len(value)} chars)" if len(value) > limit else repr(value)
    return shorten(_BOUNDED_REPR.repr(value), limit)


def utf8_problem(text: str) -> str | None:
    """Where ``text`` is no UTF-8 text, None when it is: the first byte a file name or an argument held that is no
    UTF-8 (Python gives it as a lone surrogate, ``\\udcff`` for 0xff) or the lone surrogate itself, and its
    character's position, which a long quoted path (:func:`quoted` cuts it) may not show."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        code = ord(text[err.start])
        what = f"byte 0x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"U+{code:04X}"
        return f"{what} at character {err.start + 1}"
    return None


class UserError(Exception):
    """A failure the user can fix from the message alone: it names the file, line and field,
    or the bad name or value, and where it helps what would be accepted."""

    def __str__(self) -> str:
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()

    def _render_traceback_(self) -> list[str]:
        """What IPython shows in a notebook instead of a traceback: the one line of the message
        (``instir`` commands print the same line; ``INSTIR_DEBUG=1`` keeps the traceback)."""
        import os
        import traceback

        if os.environ.get("INSTIR_DEBUG", "0") not in ("", "0"):
            return traceback.format_exception(self)
        return [f"\x1b[31m{type(self).__name__}\x1b[0m: {self}"]


class UsageError(UserError, ValueError):
    """A bad option or parameter value (wrong type or range, options that do not go together)."""


class UnknownNameError(UsageError, KeyError):
    """A name that is not one of the known ones (benchmark, setting, template, measure, notebook
    parameter …); also a ``KeyError``, as a failed look-up."""


def closest(name: object, known: Iterable[str]) -> str | None:
    """The known name a mistyped ``name`` most likely means: one that differs only in case, else difflib's closest
    (ratio 0.6 or more); None when none is close. The one rule behind every "did you mean" the kit says."""
    known = [str(k) for k in known]
    same = [k for k in known if k.lower() == str(name).lower()]
    return same[0] if same else next(iter(difflib.get_close_matches(str(name), known, n=1, cutoff=0.6)), None)


def unknown(kind: str, name: object, known: Iterable[str], *, where: str = "", more: str = "",
            listed: bool = True) -> UnknownNameError:
    """The error for ``name`` not being a known ``kind``: suggests the closest known name and
    lists them all, e.g. ``unknown benchmark 'ifir-sample'; did you mean 'ifir-sample/fiqa'?
    known: …``. ``where`` follows the name (``for instructir``); ``more`` ends the message (a
    hint such as which command adds a name, or, with ``listed=False``, where the names too many
    for one line are listed)."""
    known = [str(k) for k in known]
    close = closest(name, known)
    hint = f"; did you mean {close!r}?" if close else ""
    where = f" {where}" if where else ""
    listing = f"{'' if close else ';'} known: {', '.join(known)}" if listed else ""
    return UnknownNameError(f"unknown {kind} {quoted(name)}{where}{hint}{listing}{more}")


def expect(value: object, kind: type | tuple[type, ...], what: str, hint: str = "") -> None:
    """A :class:`UsageError` saying what ``what`` (``retrieve(benchmark, …)``) takes when ``value`` is no ``kind``
    (``hint``: how to make one): a wrong type given to a public function is one line naming the argument, not an
    AttributeError from deep inside it."""
    if not isinstance(value, kind):
        kinds = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        plain = value is None or isinstance(value, (str, int, float, list, tuple, dict))
        got = f"{quoted(value)} (a {type(value).__name__})" if plain else f"a {type(value).__name__}"
        raise UsageError(f"{what} takes a {kinds}, got {got}{hint}")
