"""Progress bars for every long loop in the kit: tqdm's auto flavour (a widget in JupyterLab,
text in a terminal), switched off everywhere when ``INSTIR_PROGRESS=0`` — which ``instir run``
sets for batch reports, where bars would only clutter the HTML. There the kernels' bars report
to ``instir run`` instead (:func:`relay_to_console`), which shows the latest as a line on its
console: a long cell (a dense encoding) moves there, not in the page. In a kernel without ipywidgets
(``make reports`` installs no ``lab`` extra) tqdm.auto is the plain text bar; the warning it
gives there ("IProgress not found", a red box on every report page) is silenced by ``import
instir``, before any library imports tqdm.auto."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

#: environment variable that turns every progress bar of the kit off when set to ``0``
ENV_VAR = "INSTIR_PROGRESS"
#: environment variables that switch third-party progress bars off: every tqdm bar whose caller
#: does not decide itself (tqdm reads ``TQDM_*`` as defaults) and the Hugging Face Hub's (its
#: downloads, and transformers' "Loading weights", which reads the Hub's switch when imported)
QUIET_BARS = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
#: environment variable naming the file a process whose bars are off reports its bars to, one line each
#: (set by :func:`relay_to_console` for the kernels of ``instir run``)
RELAY_VAR = "INSTIR_PROGRESS_RELAY"
#: seconds between two reports of one relayed bar (the relay file is looked at twice as often)
RELAY_INTERVAL_S = 1.0


def enabled() -> bool:
    """Whether progress bars are wanted (for libraries that take a ``show_progress`` flag)."""
    return os.environ.get(ENV_VAR, "1") != "0"


def tqdm(*args, **kwargs):
    """``tqdm.auto.tqdm``, disabled when :func:`enabled` says so; then, where a relay is set
    (:data:`RELAY_VAR`), a text bar that reports to it instead of showing itself. tqdm is imported here, not with
    this module, which every command imports at its start (tqdm.auto brings asyncio)."""
    from tqdm.auto import tqdm as bar
    from tqdm.std import tqdm as text_bar

    if not enabled():
        relay = os.environ.get(RELAY_VAR)
        if relay:
            return text_bar(*args, **{**kwargs, "disable": False, "file": _RelayFile(relay), "ncols": 100,
                                       "mininterval": RELAY_INTERVAL_S, "position": None})
        kwargs["disable"] = True
    return bar(*args, **kwargs)


class _RelayFile:
    """What a relayed bar writes to: each refresh of the bar appended to the relay file as one line.
    Progress never stops a computation: a relay file that cannot be written is given up."""

    encoding = "utf-8"

    def __init__(self, path: str):
        self.path: str | None = path

    def write(self, text: str) -> None:
        line = text.strip("\r\n ")
        if not line or self.path is None:
            return
        try:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line.replace("\n", " ") + "\n")
        except OSError:
            self.path = None

    def flush(self) -> None:
        """Each line is written whole and closed at once."""


@contextmanager
def relay_to_console(label: str) -> Iterator[None]:
    """For the child processes started in this block whose own bars are off (the kernels of a
    batch run): their kit bars report to a temporary file (:data:`RELAY_VAR`, in the environment
    they inherit), and one line of this console shows the latest report, ``label: desc: 40%|…``,
    while the block lasts (the caller decides whether its console wants bars)."""
    folder = Path(tempfile.mkdtemp(prefix="instir-progress-"))
    relay = folder / "bars.txt"
    relay.touch()
    from tqdm.std import tqdm as text_bar

    status = text_bar(total=0, bar_format="{desc}", position=2, leave=False)
    stop = threading.Event()

    def follow() -> None:
        with open(relay, encoding="utf-8", errors="replace") as fh:
            pending = ""
            while True:
                stopping = stop.wait(RELAY_INTERVAL_S / 2)
                pending += fh.read()
                *lines, pending = pending.split("\n")
                if lines:
                    status.set_description_str(f"{label}: {lines[-1]}")
                if stopping:
                    return

    watcher = threading.Thread(target=follow, name="instir-progress-relay", daemon=True)
    watcher.start()
    try:
        with environment({RELAY_VAR: str(relay)}):
            yield
    finally:
        stop.set()
        watcher.join()
        status.close()
        shutil.rmtree(folder, ignore_errors=True)


@contextmanager
def environment(values: Mapping[str, str | None]) -> Iterator[None]:
    """``os.environ`` with ``values`` set (``None``: removed) for the duration of a block, then
    as it was: for child processes and libraries that read the environment when they start."""
    saved = {name: os.environ.get(name) for name in values}
    try:
        _set_environment(values)
        yield
    finally:
        _set_environment(saved)


def _set_environment(values: Mapping[str, str | None]) -> None:
    for name, value in values.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def quiet_libraries() -> contextlib.AbstractContextManager[None]:
    """With the kit's bars off (:func:`enabled`), the libraries' bars off too (:data:`QUIET_BARS`)
    for a block, as ``instir`` runs a command: ``INSTIR_PROGRESS=0`` then means no bars at all,
    also in the processes the command starts (kernels, Ray workers). With bars on, nothing."""
    return environment(QUIET_BARS if not enabled() else {})
