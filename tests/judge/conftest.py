"""Session fixtures for the judge tests that need the offline SmolLM2 model: the in-process
backend (loaded once) and llama-cpp-python's OpenAI-compatible server on loopback."""

import importlib.util

import pytest

from instir.judge.local_lm import HFCausalLMJudge
from tests.llama_server import llama_server as start_llama_server


@pytest.fixture(scope="session")
def hf_judge(smollm2_gguf, tmp_path_factory):
    """The in-process backend on SmolLM2, model loaded once for the session (offline, with
    Hugging Face caches in a temp dir: session fixtures run before the suite's per-test isolation)."""
    judge = HFCausalLMJudge(batch_size=4, progress=False)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("HF_HOME", str(tmp_path_factory.mktemp("hf_home")))
        # the suite's INSTIR_HOME (tests/conftest.py), where the dequantised copy is saved
        mp.setenv("INSTIR_HOME", str(tmp_path_factory.getbasetemp() / "home" / "instir"))
        judge.judge([])  # load now, so test timings exclude the load
    return judge


@pytest.fixture(scope="session")
def llama_server(smollm2_gguf, tmp_path_factory):
    """Base URL of ``python -m llama_cpp.server`` serving SmolLM2 on 127.0.0.1, stopped at the end."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (pip install 'llama-cpp-python[server]')")
    log = tmp_path_factory.mktemp("llama_server") / "server.log"
    with start_llama_server(["-m", "llama_cpp.server", "--model", str(smollm2_gguf), "--n_ctx", "2048"], log) as url:
        yield url
