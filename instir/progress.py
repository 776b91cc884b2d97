"""Progress bars for every long loop in the kit: tqdm's auto flavour (a widget in JupyterLab,
text in a terminal), switched off everywhere when ``INSTIR_PROGRESS=0`` — which ``instir run``
sets for batch reports, where bars would only clutter the HTML. In a kernel without ipywidgets
(``make reports`` installs no ``lab`` extra) tqdm.auto is the plain text bar; the warning it
gives there ("IProgress not found", a red box on every report page) is silenced by ``import
instir``, before any library imports tqdm.auto."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from tqdm.auto import tqdm as _tqdm

#: environment variable that turns every progress bar of the kit off when set to ``0``
ENV_VAR = "INSTIR_PROGRESS"
#: environment variables that switch third-party progress bars off: every tqdm bar whose caller
#: does not decide itself (tqdm reads ``TQDM_*`` as defaults) and the Hugging Face Hub's (its
#: downloads, and transformers' "Loading weights", which reads the Hub's switch when imported)
QUIET_BARS = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}


def enabled() -> bool:
    """Whether progress bars are wanted (for libraries that take a ``show_progress`` flag)."""
    return os.environ.get(ENV_VAR, "1") != "0"


def tqdm(*args, **kwargs):
    """``tqdm.auto.tqdm``, disabled when :func:`enabled` says so."""
    if not enabled():
        kwargs["disable"] = True
    return _tqdm(*args, **kwargs)


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
