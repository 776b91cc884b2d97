"""The cheap checks of README.md and the docs/ pages (no command runs; ``test_readme.py`` runs
the offline ones): every relative link, anchor, repository path and ``python -m`` module they
mention exists; every command, marked or not, holds no ellipsis placeholder, and its ``instir``
arguments parse, with the notebook parameters of ``instir run`` and the system names checked as
``instir run`` checks them; every marked command says what it needs; no command hides in a
block that is not tagged as shell; and the first screen of the README has what a new user
needs first."""

import re
import subprocess
from pathlib import Path

import pytest
from readme_commands import DOCUMENTS, ELLIPSIS, MARK, REPO, SHELL_LANGUAGES, commands, fenced_blocks

from instir.cli import build_parser

COMMANDS = commands()
SHELL = [command for command in COMMANDS if command.language != "python"]
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_CODE = re.compile(r"`([^`\n]+)`")
_PATH = re.compile(r"^\.?[\w-]+(?:\.\w+)?(?:/[\w.-]+)*/?$")
_MARKDOWN_FILE = re.compile(r"(?<![\w/.:~$-])([\w-]+(?:/[\w.-]+)*\.md)\b")
_MODULE = re.compile(r"-m\s+((?:instir|perf)(?:\.\w+)+)")
_LOOKS_LIKE_A_COMMAND = re.compile(r"^\s*(\$ |\.venv/bin/|make |instir |python |pip |export |cat > )")
#: source files are never generated: a path to one must exist, whatever folder it starts with
_SOURCE = (".py", ".ipynb", ".md", ".toml")
#: paths in the authors' repositories and MTEB's package, which the docs cite beside the repository's name
_EXTERNAL = ("eval/", "src/", "scripts/", "mteb/")
#: the README's first screen: what a reader sees before scrolling
FIRST_SCREEN = 40


def _top_level() -> set[str]:
    """The first path components the repository tracks (``reports`` aside: its content is generated)."""
    try:
        listed = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
        names = {line.split("/", 1)[0] for line in listed.splitlines() if line}
    except (OSError, subprocess.CalledProcessError):
        names = {p.name for p in REPO.iterdir() if not p.name.startswith(".") or p.name == ".ci"}
    return names - {"reports"}


TOP = _top_level()


def _prose(document: Path) -> str:
    """The document without its fenced blocks."""
    text = document.read_text(encoding="utf-8")
    for block in fenced_blocks(document):
        text = text.replace(block.text, "")
    return text


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(document: Path) -> set[str]:
    return {_slug(line.lstrip("#")) for line in _prose(document).splitlines() if line.startswith("#")}


def _mentions(document: Path) -> list[tuple[str, str]]:
    """``(kind, text)`` of every link target, inline code span and shell word of a document."""
    prose = _prose(document)
    found = [("link", target) for target in _LINK.findall(prose)]
    found += [("code", span.strip()) for span in _CODE.findall(prose)]
    found += [("code", name) for name in _MARKDOWN_FILE.findall(_CODE.sub("", _LINK.sub("", prose)))]
    for command in SHELL:
        if command.document == document:
            found += [("code", word) for word in command.argv()]
            found += [("code", f"-m {module}") for module in _MODULE.findall(command.head)]
    return found


def _problems(document: Path) -> list[str]:
    problems = []
    for kind, text in _mentions(document):
        if kind == "link":
            if re.match(r"^[a-z]+:", text):
                continue
            target, _, anchor = text.partition("#")
            path = (document.parent / target) if target else document
            if not path.exists():
                problems.append(f"link {text}: no {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
                problems.append(f"link {text}: no heading #{anchor} in {path.name}")
            continue
        module = _MODULE.search(text)
        if module:
            path = REPO / module.group(1).replace(".", "/")
            if not (path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()):
                problems.append(f"module {module.group(1)}: no {path.relative_to(REPO)}.py")
        elif text.endswith(".md") and "/" not in text.rstrip("/"):
            if not ((document.parent / text).is_file() or (REPO / text).is_file()):
                problems.append(f"file {text}: not in the repository")
        elif _PATH.match(text) and "/" in text and not text.startswith(("reports/", *_EXTERNAL)) \
                and (text.split("/", 1)[0] in TOP or text.endswith(_SOURCE)) and not (REPO / text).exists():
            problems.append(f"path {text}: not in the repository")
    return problems


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_every_link_path_and_module_a_document_names_exists(document):
    assert not _problems(document), "\n".join(_problems(document))


@pytest.mark.parametrize("command", COMMANDS, ids=[c.where for c in COMMANDS])
def test_no_command_holds_an_ellipsis_for_a_placeholder(command):
    code = command.code if command.language == "python" else command.head
    assert not ELLIPSIS.search(code), f"{command.where}: {code}  (write a placeholder as a NAME in capitals)"


def test_every_marked_command_says_what_it_needs():
    for command in SHELL:
        if MARK.match(command.comment):
            assert len(re.sub(r"^#\s*needs\b", "", command.comment).strip(" :")) > 2, command.where


def _instir(command) -> list[str] | None:
    argv = command.argv()
    return argv[1:] if argv and Path(argv[0]).name == "instir" else None


INSTIR = [command for command in SHELL if _instir(command) is not None]


@pytest.mark.parametrize("command", INSTIR, ids=[c.where for c in INSTIR])
def test_every_instir_command_parses_and_names_what_exists(command, capsys):
    from instir.cli.run import cli_parameters
    from instir.pipeline import find_notebooks, notebook_parameters, validate_parameters
    from instir.systems.specs import resolve_system

    argv = _instir(command)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit:
        pytest.fail(f"{command.where}: {command.head}\n{capsys.readouterr().err}")
    if args.command == "run":
        known = notebook_parameters(find_notebooks(args.notebooks))
        validate_parameters(cli_parameters(args, known), known)
    for name in list(getattr(args, "systems", None) or []) + [getattr(args, "system", None)]:
        if name:
            resolve_system(name)


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: p.name)
def test_no_command_hides_in_a_block_not_tagged_as_shell(document):
    for block in fenced_blocks(document):
        if block.language not in SHELL_LANGUAGES | {"python"}:
            lines = [line for line in block.text.splitlines() if _LOOKS_LIKE_A_COMMAND.match(line)]
            assert not lines, f"{document.name}:{block.line} ({block.language or 'untagged'}): {lines}"


def test_the_first_screen_says_what_the_kit_is_how_to_run_it_and_where_the_report_opens():
    lines = (REPO / "README.md").read_text(encoding="utf-8").splitlines()[:FIRST_SCREEN]
    screen = "\n".join(lines)
    for needed in ("make reports", "make test", "make lab", "reports/index.html", "reports/sample", "```python",
                   "# needs"):
        assert needed in screen, needed
    python = next(block for block in fenced_blocks(REPO / "README.md") if block.language == "python")
    assert python.line < FIRST_SCREEN and len(python.text.strip().splitlines()) <= 5
