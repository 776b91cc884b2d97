"""The kit's progress bars in a Jupyter kernel without ipywidgets: the plain text bar, no warning."""

import subprocess
import sys

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
