"""The embeddings backend against llama.cpp's real /v1/embeddings on loopback: the vectors that
come back through the kit (batched, concurrent, cached) equal llama.cpp's own in-process
``create_embedding`` of the same texts."""

import numpy as np

from instir.retrieval import retrieve
from instir.systems.openai_embeddings import OpenAIEmbeddingClient, OpenAIEmbeddingsRetriever
from tests.systems.test_openai_embeddings import WordTokenizer

TEXTS = ["wine cabinet", "A sommelier stores wine at 55 degrees.", "Saffron is a spice.", "volcanoes erupt"]


def test_llama_server_embeddings_equal_in_process_llama_cpp(llama_embedding_server, smollm2_gguf_path):
    import llama_cpp

    client = OpenAIEmbeddingClient("smollm2", llama_embedding_server, batch_size=3, concurrency=2, progress=False)
    got = client.embed(TEXTS)
    llm = llama_cpp.Llama(str(smollm2_gguf_path), embedding=True, n_ctx=512, verbose=False,
                          pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN)
    expected = np.array([item["embedding"] for item in llm.create_embedding(TEXTS)["data"]], dtype=np.float32)
    assert got.shape == expected.shape and got.shape[1] > 8
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    assert client.requests == 2


def test_retrieval_over_llama_server_is_cached(llama_embedding_server, toy_benchmark, tmp_path):
    bench = toy_benchmark()
    make = lambda: OpenAIEmbeddingsRetriever("smollm2", llama_embedding_server, tokenizer=WordTokenizer(),  # noqa: E731
                                             tokenizer_name="words", window=8, stride=6, cache=tmp_path / "emb",
                                             progress=False)
    first = make()
    run = retrieve(bench, first, template="ifir", k=3)
    assert first.client.requests > 0 and len(run) == 12
    warm = make()
    assert retrieve(bench, warm, template="ifir", k=3).df.equals(run.df) and warm.client.requests == 0
