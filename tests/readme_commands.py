"""The commands of README.md and the docs/ pages, as the documents show them: every fenced
``bash`` / ``sh`` / ``shell`` / ``console`` block split into commands (continuation lines and
here-documents kept with their command), and every ``python`` block, each classified:

- **marked**: the command ends in a ``# needs …`` comment (the network, a GPU, a Ray cluster,
  your data …: the README states this convention once, under its first commands); not run;
- **exempt**: a ``make`` target that builds an environment, runs this suite or starts a server,
  named in :data:`EXEMPT` with the reason; not run;
- **substituted**: ``make reports``, run as the commands of its Makefile recipe (it creates
  ``.venv`` first, which the tests' working copy has: the running environment);
- **offline**: everything else; ``tests/test_readme.py`` runs it as written.

Used by ``tests/test_readme.py`` (runs the offline commands) and ``tests/test_readme_links.py``
(the cheap checks: paths, links, placeholders, arguments)."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: README first, then the docs pages in name order: the commands run in this order, in one
#: working copy, so a docs page may continue from the README (docs/scale-out.md reuses its grid).
DOCUMENTS = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))
SHELL_LANGUAGES = frozenset({"bash", "sh", "shell", "console"})
#: Python blocks that are not run here: docs/API.md is generated, and test_api_docs.py checks its examples.
PYTHON_NOT_RUN = frozenset({"API.md"})
#: The marker: a trailing comment that says what the command needs beyond an offline machine.
MARK = re.compile(r"^#\s*needs\b")
#: make targets not run, with the reason (``make reports`` is run as its recipe instead).
EXEMPT = {
    "make test": "runs this very suite (and installs the test extras)",
    "make test-quick": "runs part of this very suite (and installs the test extras)",
    "make test-hostile": "runs part of this very suite (and installs the test extras)",
    "make lint": "installs the test extras first; make test runs the same ruff check",
    "make lab": "starts a JupyterLab server that waits for a browser",
}
SUBSTITUTED = "make reports"
#: A placeholder in a command is a NAME in capitals, never an ellipsis.
ELLIPSIS = re.compile(r"\.\.\.|…")
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
_HEREDOC = re.compile(r"<<(-?)\s*(['\"]?)(\w+)\2")


@dataclass(frozen=True)
class Command:
    """One command of a fenced block: ``code`` is what bash runs (here-document included),
    ``comment`` its trailing comment, ``where`` the document and line."""

    document: Path
    line: int
    code: str
    comment: str
    language: str = "bash"

    @property
    def where(self) -> str:
        return f"{self.document.relative_to(REPO)}:{self.line}"

    @property
    def head(self) -> str:
        """The command line itself, without its here-document and comment, on one line."""
        return " ".join(self.code.split("\n", 1)[0].split()) if self.language != "python" else "python"

    @property
    def kind(self) -> str:
        """``marked``, ``exempt``, ``substituted`` or ``offline`` (see the module docstring)."""
        if MARK.match(self.comment):
            return "marked"
        if self.head in EXEMPT:
            return "exempt"
        if self.head == SUBSTITUTED:
            return "substituted"
        return "offline"

    def argv(self) -> list[str]:
        """The command line's words, as the shell splits them (no globbing)."""
        return shlex.split(self.head)


@dataclass(frozen=True)
class Block:
    document: Path
    line: int
    language: str
    text: str


def fenced_blocks(document: Path) -> list[Block]:
    """Every fenced block of a Markdown file: its first content line, language and text."""
    blocks, lines = [], document.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = _FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, language, start = opening.group(2), opening.group(3).lower(), i + 1
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            i += 1
        blocks.append(Block(document, start + 1, language, "\n".join(lines[start:i])))
        i += 1
    return blocks


def split_comment(line: str) -> tuple[str, str]:
    """``(code, comment)`` of a shell line: the comment starts at a ``#`` outside quotes that
    begins a word."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i:].strip()
    return line.rstrip(), ""


def shell_commands(block: Block) -> list[Command]:
    """The commands of a shell block: blank and comment-only lines dropped, a line ending in
    ``\\`` joined with the next, a here-document's lines kept with the command that opens it."""
    commands, lines = [], block.text.splitlines()
    i = 0
    while i < len(lines):
        first = i
        code, comment = split_comment(lines[i])
        if not code.strip():
            i += 1
            continue
        while code.endswith("\\") and i + 1 < len(lines):
            i += 1
            more, comment = split_comment(lines[i])
            code = code[:-1].rstrip() + " " + more.strip()
        body = []
        heredoc = _HEREDOC.search(code)
        if heredoc:
            strip_tabs, end = heredoc.group(1) == "-", heredoc.group(3)
            i += 1
            while i < len(lines) and (lines[i].lstrip("\t") if strip_tabs else lines[i]) != end:
                body.append(lines[i])
                i += 1
            body.append(end)
        commands.append(Command(block.document, block.line + first, "\n".join([code.strip(), *body]), comment))
        i += 1
    return commands


def commands(documents=DOCUMENTS) -> list[Command]:
    """Every shell command and every run Python block of ``documents``, in document order."""
    found = []
    for document in documents:
        for block in fenced_blocks(document):
            if block.language in SHELL_LANGUAGES:
                found += shell_commands(block)
            elif block.language == "python" and document.name not in PYTHON_NOT_RUN:
                found.append(Command(document, block.line, block.text, "", language="python"))
    return found


def make_recipe(target: str, makefile: Path = REPO / "Makefile") -> list[str]:
    """The commands of a Makefile target's recipe, ``$(BIN)`` written as ``.venv/bin``."""
    lines = makefile.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(rf"^{re.escape(target)}\s*:", line))
    recipe = []
    for line in lines[start + 1:]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip().lstrip("@").replace("$(BIN)", ".venv/bin"))
    return recipe
