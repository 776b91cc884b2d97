"""What the kit shows a terminal, and how a command answers an error: every control character a name or a file
holds escaped, and an expected failure as one line (``<command>: <message>``, exit 2), the traceback only with
``--debug``. The ``instir`` command and ``python -m instir.interop`` both answer through :func:`answered`."""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import sys
import traceback
from collections.abc import Callable, Iterator

from instir.errors import UsageError, UserError
from instir.inputs import CONTROLS, INVISIBLE, char_class

#: environment variable that shows tracebacks of expected failures when set (to anything but 0)
DEBUG_VAR = "INSTIR_DEBUG"

#: exceptions printed as one line: the user can act on their message alone
EXPECTED_ERRORS = (UserError, OSError, sqlite3.DatabaseError)

#: longest message printed (a 10 MB document id quoted in an error must not flood the terminal)
MAX_MESSAGE_CHARS = 2000

#: What a terminal would act on rather than show, the characters no id may hold either: C0 and C1 control
#: characters (ESC starts the sequences that move the cursor, retitle the window or fake a prompt), DEL, the line
#: separators, and the invisible marks and bidirectional overrides that make a name read differently from its bytes.
_UNSHOWN = CONTROLS + "\u2028\u2029" + INVISIBLE
_CONTROLS = char_class(_UNSHOWN)
#: :data:`_CONTROLS` less the newline and the tab, which lay out what a command prints.
_INLINE_CONTROLS = char_class(_UNSHOWN.replace(chr(10), "").replace(chr(9), ""))


def _escaped(match: re.Match) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def terminal_text(text: object) -> str:
    """``text`` safe to print: every control character (:data:`_CONTROLS`) written as its
    Python escape (``\\x1b``, ``\\n``, ``\\u202e``), so a name from a card or a file shows
    what it holds and cannot drive the terminal."""
    return _CONTROLS.sub(_escaped, str(text))


def refuse_unshown(path: object, what: str) -> None:
    """Refuse in one line (:class:`~instir.errors.UsageError`) a folder the kit writes into and prints whose path
    holds what :func:`terminal_text` escapes: a newline printed in it began a line of its own (``instir retrieve:
    forged``), and a page or an index showed a bidirectional override's folder reordered. ``what`` names it."""
    if terminal_text(path) != str(path):
        raise UsageError(f"{terminal_text(path)}: {what} may not hold a control character, a line break or an "
                         "invisible mark, which a terminal acts on and a page shows as nothing or reordered; name "
                         "another")


class TerminalStream:
    """A text stream that writes to ``stream`` with every control character but the newline and the tab
    escaped as :func:`terminal_text` escapes it: whatever names or file contents a command prints, they
    cannot drive the terminal. Everything else is ``stream``'s."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        return self._stream.write(_INLINE_CONTROLS.sub(_escaped, text))

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextlib.contextmanager
def escaped_stdout(prefix: str | None = None, *, data: bool = False) -> Iterator[None]:
    """Standard output as a :class:`TerminalStream` for the duration, and warnings written through one to
    standard error (every command's output goes through it; progress bars keep their cursor moves). With
    ``prefix`` (the command), a warning is one line, ``<prefix>: warning: <message>``, as an error is; without
    (``--debug``), Python's form naming the code that warned. With ``data`` (a command that writes data to
    standard output, such as an export) standard output is left as it is: the bytes are the data."""
    import warnings

    stream, show = sys.stdout, warnings.showwarning

    def escaped_warning(message, category, filename, lineno, file=None, line=None):
        text = (f"{prefix}: warning: {' '.join(str(message).split())}\n" if prefix
                else warnings.formatwarning(message, category, filename, lineno, line))
        TerminalStream(file or sys.stderr).write(text)

    sys.stdout, warnings.showwarning = stream if data else TerminalStream(stream), escaped_warning
    try:
        yield
    finally:
        sys.stdout, warnings.showwarning = stream, show


def describe(err: BaseException) -> str:
    """One line for an expected failure: the message, with an ``OSError``'s reason and file
    (``Permission denied: /x/run.trec``; the system's reason for its number when it gives none),
    newlines folded, at most :data:`MAX_MESSAGE_CHARS`."""
    if isinstance(err, OSError) and err.filename is not None:
        files = " -> ".join(str(f) for f in (err.filename, err.filename2) if f is not None)
        # a library may give the number alone (OSError(ENOENT, None, path)): its reason is the system's
        reason = err.strerror or (os.strerror(err.errno) if isinstance(err.errno, int) else type(err).__name__)
        text = f"{reason}: {files}"
    elif isinstance(err, sqlite3.DatabaseError):
        text = f"database error: {err}"
    else:
        text = str(err) or type(err).__name__
    return cut_message(terminal_text(re.sub(r"\s*\n\s*", " ", text.strip())))


def cut_message(text: str) -> str:
    """``text`` itself, or its first :data:`MAX_MESSAGE_CHARS` characters and how many more it held: every message
    a command answers with (:func:`describe`, and argparse's, :class:`instir.cli.options.Parser`)."""
    if len(text) > MAX_MESSAGE_CHARS:
        text = f"{text[:MAX_MESSAGE_CHARS]}… ({len(text) - MAX_MESSAGE_CHARS} more characters)"
    return text


def answered(prefix: str, call: Callable[[], int | None], *, debug: bool = False, data: bool = False) -> int:
    """Run a command's ``call`` with its output escaped (:func:`escaped_stdout`; with ``data``, its warnings only)
    and third-party progress bars as :func:`instir.progress.quiet_libraries` allows, and answer its failure: an
    expected one (:data:`EXPECTED_ERRORS`) is ``<prefix>: <message>`` on one line and exit 2, Ctrl-C
    ``<prefix>: interrupted`` and 130; with ``debug`` the traceback comes first. Returns the exit status."""
    from instir.progress import quiet_libraries

    try:
        # INSTIR_PROGRESS=0: no third-party bars either; warnings one line each (Python's form with --debug)
        with quiet_libraries(), escaped_stdout(None if debug else prefix, data=data):
            return int(call() or 0)
    except KeyboardInterrupt:
        if debug:
            traceback.print_exc()
        print(f"{prefix}: interrupted", file=sys.stderr)
        return 130
    except EXPECTED_ERRORS as err:
        if debug:
            traceback.print_exc()
        print(f"{prefix}: {describe(err)}", file=sys.stderr)
        return 2
