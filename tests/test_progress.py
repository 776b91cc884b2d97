"""The kit's progress bars: in a Jupyter kernel without ipywidgets the plain text bar, no warning; in a
process whose bars are off (a batch kernel), reported to the console that relays them, or nowhere."""

import os
import re
import subprocess
import sys
from pathlib import Path

from instir.progress import ENV_VAR, RELAY_VAR, relay_to_console, tqdm

#: a process that looks like a Jupyter kernel to tqdm.auto (it checks for ipykernel.zmqshell) and in
#: which ``import ipywidgets`` fails, as in the kernel of ``make reports``
_KERNEL_WITHOUT_WIDGETS = """
import sys, types
sys.modules["ipykernel.zmqshell"] = types.ModuleType("ipykernel.zmqshell")
sys.modules["ipywidgets"] = None  # import ipywidgets -> ImportError
import IPython
import instir
import tqdm.auto  # as bm25s and huggingface_hub import it, after instir
from instir.progress import tqdm as kit_tqdm
from tqdm.autonotebook import tqdm as chosen
from tqdm.std import tqdm as text_bar
assert chosen is text_bar, chosen
list(kit_tqdm(range(3), disable=True))
"""


def test_a_kernel_without_ipywidgets_gets_the_text_bar_without_a_warning():
    done = subprocess.run([sys.executable, "-W", "default", "-c", _KERNEL_WITHOUT_WIDGETS], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "IProgress" not in done.stderr and "Warning" not in done.stderr, done.stderr


#: a process whose bars are off, as a kernel of ``instir run`` (INSTIR_PROGRESS=0 in its environment)
_BATCH_KERNEL = """
import time
from instir.progress import tqdm
for _ in tqdm(range(4), desc="encoding documents", disable=True):  # a caller's own switch-off too
    time.sleep(0.05)
"""


def test_the_bars_of_a_process_whose_bars_are_off_show_on_the_console_that_relays_them(monkeypatch, capsys):
    monkeypatch.setenv(ENV_VAR, "1")
    with relay_to_console("02_retrieval"):
        relay = Path(os.environ[RELAY_VAR])
        done = subprocess.run([sys.executable, "-c", _BATCH_KERNEL], env={**os.environ, ENV_VAR: "0"},
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and "encoding" not in done.stderr, done.stderr  # shown nowhere by itself
    console = capsys.readouterr().err
    assert re.search(r"02_retrieval: encoding documents: 100%.*4/4", console), console
    assert RELAY_VAR not in os.environ and not relay.exists()  # the environment and the relay as they were


def test_without_a_relay_a_process_whose_bars_are_off_shows_none(monkeypatch, capsys):
    monkeypatch.setenv(ENV_VAR, "0")
    monkeypatch.delenv(RELAY_VAR, raising=False)
    list(tqdm(range(3), desc="encoding documents"))
    assert "encoding" not in capsys.readouterr().err


def test_a_relay_that_cannot_be_written_never_stops_the_loop(monkeypatch, tmp_path):
    monkeypatch.setenv(ENV_VAR, "0")
    monkeypatch.setenv(RELAY_VAR, str(tmp_path / "gone" / "bars.txt"))
    assert list(tqdm(range(3), desc="encoding documents")) == [0, 1, 2]


def _shown(monkeypatch, value) -> str:
    """What a kit bar writes, with ``INSTIR_PROGRESS`` at ``value`` (None: unset) and no relay."""
    import io

    if value is None:
        monkeypatch.delenv(ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(ENV_VAR, value)
    monkeypatch.delenv(RELAY_VAR, raising=False)
    out = io.StringIO()
    list(tqdm(range(3), desc="encoding documents", file=out))
    return out.getvalue()


def test_bars_show_unless_instir_progress_is_0(monkeypatch):
    assert "encoding documents" in _shown(monkeypatch, None)
    assert "encoding documents" in _shown(monkeypatch, "1")
    assert _shown(monkeypatch, "0") == ""


def test_with_the_kits_bars_off_the_libraries_bars_are_off_for_the_block_then_as_they_were(monkeypatch):
    from instir.progress import QUIET_BARS, quiet_libraries

    monkeypatch.setenv(ENV_VAR, "0")
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "0")
    with quiet_libraries():
        assert {name: os.environ.get(name) for name in QUIET_BARS} == {"TQDM_DISABLE": "1",
                                                                        "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    assert "TQDM_DISABLE" not in os.environ and os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "0"
    monkeypatch.setenv(ENV_VAR, "1")
    with quiet_libraries():
        assert "TQDM_DISABLE" not in os.environ and os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "0"
