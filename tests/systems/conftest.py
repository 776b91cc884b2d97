"""Fixtures for the systems tests: the toy benchmark of the retrieval tests; llama.cpp's
OpenAI-compatible server answering ``/v1/embeddings`` with mean-pooled SmolLM2 vectors; tiny
models built at test time (a random-initialised Llama with a word-level tokenizer and a random
LoRA adapter saved with peft; a tiny BERT; a tiny Mistral for GritLM) and a small IFIR-shaped benchmark whose words the
tokenizer knows."""

import importlib.util

import pytest
from tiny_models import build_tiny_bert, build_tiny_llama, build_tiny_mistral

from instir.benchmarks.types import Benchmark, Corpus, Doc, Query
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
def smollm2_gguf_path(smollm2_gguf):
    """The bundled SmolLM2 GGUF, for llama.cpp (skips without llama-cpp-python)."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed (pip install 'llama-cpp-python[server]')")
    return smollm2_gguf


@pytest.fixture(scope="session")
def llama_embedding_server(smollm2_gguf_path, tmp_path_factory):
    """Base URL of llama_cpp.server with ``--embedding true`` on SmolLM2, mean pooling."""
    log = tmp_path_factory.mktemp("llama_embed") / "server.log"
    with llama_server(["-c", MEAN_POOLED_SERVER, "--model", str(smollm2_gguf_path), "--embedding", "true",
                       "--n_ctx", "512"], log) as url:
        yield url


DOCS = [
    Doc("d1", "saffron threads colour paella and risotto golden", "Saffron"),
    Doc("d2", "farmers harvest crocus flowers by hand each autumn"),
    Doc("d3", "keep the wine cabinet away from the oven and sunlight and heat and direct light of the sun", "Wine"),
    Doc("d4", "a sommelier stores wine cool"),
    Doc("d5", "markets closed higher"),
    Doc("d6", "magma rises through the crust when volcanoes erupt and the ground shakes"),
]
QUERIES = {
    "q1": Query("q1", "what is saffron", "I cook paella", subset="fiqa"),
    "q2": Query("q2", "what is saffron", "I harvest crocus flowers by hand in autumn", subset="fiqa"),
    "q3": Query("q3", "wine cabinet", "where should it stand", subset="fiqa"),
    "q4": Query("q4", "wine cabinet", "", subset="fiqa"),
    "q5": Query("q5", "volcanoes", "why do they erupt and when does the ground shake", subset="fiqa"),
}


def _words() -> list[str]:
    from tokenizers.pre_tokenizers import Whitespace

    texts = [d.title + " " + d.text for d in DOCS] + [q.query + " " + q.instruction for q in QUERIES.values()]
    texts += ["query: passage: [SEP] Instruct: Query:"]
    ws = Whitespace()
    return sorted({w for t in texts for w, _ in ws.pre_tokenize_str(t)})


@pytest.fixture
def benchmark():
    """A five-query, six-document IFIR-shaped benchmark."""
    return Benchmark("ifir-toy/fiqa", "hand-made", "local", "instructed", Corpus.from_docs(DOCS), dict(QUERIES),
                     {"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d3": 1}, "q4": {"d3": 1}, "q5": {"d6": 1}},
                     family="ifir")


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory):
    """``(base_dir, adapter_dir)``: a tiny random Llama (+ its tokenizer) and a random LoRA adapter
    (init_lora_weights=False, so merging changes the outputs) whose config names the base."""
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"), _words())


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory):
    """A tiny random BERT (+ a word-level tokenizer with [CLS]/[SEP]/[PAD]) saved to a folder."""
    return build_tiny_bert(tmp_path_factory.mktemp("tiny-bert"), _words())


@pytest.fixture(scope="session")
def tiny_mistral(tmp_path_factory):
    """A tiny random Mistral (+ its tokenizer, no pad token) in GritLM-7B's layout, whose
    vocabulary holds the benchmark's words and IFIR's GritLM prompts."""
    from tokenizers.pre_tokenizers import Whitespace

    prompts = "<|user|>\nGive a query, retrieval relevant passages\n<|embed|>\n an other instruction"  # IFIR's
    prompt_words = [w for w, _ in Whitespace().pre_tokenize_str(prompts)]
    return build_tiny_mistral(tmp_path_factory.mktemp("tiny-mistral"), sorted(set(_words()) | set(prompt_words)))
