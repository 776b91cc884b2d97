"""Progress bars for every long loop in the kit: tqdm's auto flavour (a widget in JupyterLab,
text in a terminal), switched off everywhere when ``INSTIR_PROGRESS=0`` — which ``instir run``
sets for batch reports, where bars would only clutter the HTML."""

from __future__ import annotations

import os

from tqdm.auto import tqdm as _tqdm

#: environment variable that turns every progress bar of the kit off when set to ``0``
ENV_VAR = "INSTIR_PROGRESS"


def enabled() -> bool:
    """Whether progress bars are wanted (for libraries that take a ``show_progress`` flag)."""
    return os.environ.get(ENV_VAR, "1") != "0"


def tqdm(*args, **kwargs):
    """``tqdm.auto.tqdm``, disabled when :func:`enabled` says so."""
    if not enabled():
        kwargs["disable"] = True
    return _tqdm(*args, **kwargs)
