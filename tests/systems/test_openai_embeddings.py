"""The OpenAI-compatible embeddings backend against a fake /v1/embeddings on loopback: IFIR's
windows-then-mean recipe recomputed independently, batching, bounded concurrency, retries with
Retry-After, the key from the named environment variable only, and a warm rerun that sends
nothing."""

import json

import numpy as np
import pytest
from says import raises_saying

from instir.errors import UsageError, UserError
from instir.formatting import Template
from instir.http_retry import RetryPolicy
from instir.retrieval import retrieve
from instir.retrieval.windows import ifir_windows, tiktoken_adapter
from instir.systems.openai_embeddings import (
    OpenAIEmbeddingClient,
    OpenAIEmbeddingsRetriever,
)
from tests.judge.judge_fakes import DIM, FakeChatServer, Reply, embeddings_reply, fake_vector


class WordTokenizer:
    """Whitespace words as tokens (a local stand-in for tiktoken)."""

    def __init__(self):
        self.vocab: dict[str, int] = {}
        self.words: list[str] = []

    def encode(self, text):
        ids = []
        for w in text.split():
            if w not in self.vocab:
                self.vocab[w] = len(self.words)
                self.words.append(w)
            ids.append(self.vocab[w])
        return ids

    def decode(self, tokens):
        return " ".join(self.words[t] for t in tokens)


def make(server, tmp_path, **kw):
    kw.setdefault("window", 4)
    kw.setdefault("stride", 3)
    return OpenAIEmbeddingsRetriever("text-embedding-3-small", server.url, tokenizer=WordTokenizer(),
                                     tokenizer_name="words", cache=tmp_path / "emb", progress=False,
                                     policy=RetryPolicy(max_retries=3, backoff_s=0.01, max_backoff_s=0.05), **kw)


def ifir_vector(text: str, window: int = 4, stride: int = 3) -> np.ndarray:
    """IFIR's OpenAIEmbedding.embed_documents for one text, step by step."""
    tokens = text.split()
    segments = []
    for i in range(0, len(tokens), stride):
        s = " ".join(tokens[i:i + window])
        if len(s):
            segments.append(s)
    return np.mean(np.array([fake_vector(s) for s in segments]), axis=0)


def test_vectors_are_ifir_window_means_and_ranking_is_exact_cosine(toy_benchmark, tmp_path):
    bench = toy_benchmark()
    with FakeChatServer(responder=embeddings_reply) as server:
        kit = make(server, tmp_path, batch_size=5)
        run = retrieve(bench, kit, template="ifir", k=3)
    qtexts = [f"{q.query} {q.instruction}" for q in bench.queries.values()]
    docs = list(bench.corpus)
    Q = np.array([ifir_vector(t) for t in qtexts])
    D = np.array([ifir_vector(d.indexed_text) for d in docs])
    cos = (Q / np.linalg.norm(Q, axis=1, keepdims=True)) @ (D / np.linalg.norm(D, axis=1, keepdims=True)).T
    for row, qid in enumerate(bench.queries):
        got = run.df[run.df["qid"] == qid]
        order = np.argsort(-cos[row], kind="stable")[:3]
        assert got["docid"].tolist() == [docs[i].id for i in order]
        assert got["score"].to_numpy() == pytest.approx(cos[row][order], abs=1e-5)
    assert run.meta["retriever"]["params"]["windows"] == [4, 3]


def test_segments_follow_ifir_segment_text():
    tok = WordTokenizer()
    text = "a b c d e f g h"
    assert ifir_windows(text, *tiktoken_adapter(tok), 4, 3) == ["a b c d", "d e f g", "g h"]
    assert ifir_windows("", *tiktoken_adapter(tok), 4, 3) == []  # no tokens: the retriever encodes it whole


def test_requests_are_batched_and_concurrency_is_bounded(tmp_path):
    def slow(body):
        reply = embeddings_reply(body)
        reply.delay_s = 0.05
        return reply

    with FakeChatServer(responder=slow) as server:
        client = OpenAIEmbeddingClient("m", server.url, batch_size=3, concurrency=2, progress=False)
        out = client.embed([f"text {i}" for i in range(13)])
    assert out.shape == (13, DIM)
    assert np.allclose(out[7], fake_vector("text 7"))
    assert server.count == 5 == client.requests
    assert sorted(len(body["input"]) for _, body in server.received) == [1, 3, 3, 3, 3]
    assert server.max_in_flight == 2


def test_429_with_retry_after_is_retried(tmp_path):
    script = [Reply(status=429, body={"error": "slow down"}, headers={"Retry-After": "0"})]
    with FakeChatServer(script=script, responder=embeddings_reply) as server:
        client = OpenAIEmbeddingClient("m", server.url, progress=False, policy=RetryPolicy(3, 0.01, 0.05))
        out = client.embed(["x"])
    assert server.count == 2 and np.allclose(out[0], fake_vector("x"))


def test_bad_request_fails_with_one_line_and_no_key(monkeypatch):
    monkeypatch.setenv("MY_EMB_KEY", "sk-secret-123")
    script = [Reply(status=400, body={"error": "bad key sk-secret-123"})]
    with FakeChatServer(script=script, responder=embeddings_reply) as server:
        client = OpenAIEmbeddingClient("m", server.url, api_key_env="MY_EMB_KEY", progress=False)
        with pytest.raises(RuntimeError, match=r"/embeddings \(m\): HTTP 400") as err:
            client.embed(["x"])
    assert "sk-secret-123" not in str(err.value)
    assert isinstance(err.value, UserError)  # one line from instir commands, no traceback
    assert server.received[0][0]["Authorization"] == "Bearer sk-secret-123"


def test_the_endpoint_keeps_the_judges_rules_a_key_for_a_variable_name_is_refused_and_azure_is_reached(
        tmp_path, monkeypatch):
    key = "sk-proj-AbCdEf0123456789AbCdEf0123456789"
    with raises_saying(UsageError, "api_key_env", "must name an environment variable"):
        OpenAIEmbeddingsRetriever(api_key_env=key, cache=tmp_path)
    from types import SimpleNamespace

    card = SimpleNamespace(name="v3", model="m", similarity="cosine", windowing="", params={"api_key_env": key})
    with raises_saying(UsageError, "api_key_env"):
        OpenAIEmbeddingsRetriever.from_card(card, cache=tmp_path)
    monkeypatch.setenv("MY_EMB_KEY", "sk-test-123")
    with FakeChatServer(responder=embeddings_reply) as server:
        azure = SimpleNamespace(**{**vars(card), "params": {
            "base_url": server.url, "api_key_env": "MY_EMB_KEY", "auth_header": "api-key",
            "query_params": {"api-version": "2024-10-21"}}})
        OpenAIEmbeddingsRetriever.from_card(azure, cache=tmp_path, progress=False).client.embed(["x"])
    headers = server.received[0][0]
    assert headers["api-key"] == "sk-test-123" and "Authorization" not in headers
    assert server.paths == ["/v1/embeddings?api-version=2024-10-21"]


def test_key_is_in_no_run_file_and_warm_rerun_sends_nothing(toy_benchmark, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-written")
    bench = toy_benchmark()
    with FakeChatServer(responder=embeddings_reply) as server:
        first = retrieve(bench, make(server, tmp_path), template="ifir", k=3, out_dir=tmp_path / "runs")
        sent = server.count
        warm = make(server, tmp_path)
        second = retrieve(bench, warm, template="ifir", k=3)  # no out_dir: searches, vectors from the cache
        assert server.count == sent and warm.client.requests == 0
    assert second.df.equals(first.df)
    for path in [*tmp_path.rglob("*.json"), *tmp_path.rglob("*.trec")]:
        assert "sk-never-written" not in path.read_text()
    sidecar = json.loads(open(first.meta["path"] + ".json").read())
    assert sidecar["retriever"]["params"]["api_key_env"] == "OPENAI_API_KEY"


def test_pair_template_is_refused(toy_benchmark, tmp_path):
    with FakeChatServer(responder=embeddings_reply) as server:
        with pytest.raises(ValueError, match="makes \\[instruction, text\\] pairs"):
            retrieve(toy_benchmark(), make(server, tmp_path), template="instructir-instructor", k=3)


def test_a_template_whose_documents_are_pairs_is_refused_before_anything_is_sent(toy_benchmark, tmp_path):
    """Text queries do not make a template a text template: its documents would reach the API as
    [instruction, text] pairs. The one refusal (instir.formatting.require_text) reads every format."""
    template = Template("pair-docs", "raw", "", "{query} {instruction}", doc=("Represent the paragraph: ", "{text}"))
    with FakeChatServer(responder=embeddings_reply) as server:
        with raises_saying(UsageError, "'pair-docs'", "[instruction, text] pairs", "an embeddings API"):
            make(server, tmp_path).search(toy_benchmark(), template, k=3)
        assert server.count == 0


def test_from_card_reads_windowing_and_params(tmp_path):
    from types import SimpleNamespace

    card = SimpleNamespace(name="OpenAI-v3-small", model="text-embedding-3-small", similarity="cosine",
                           windowing="ifir",
                           params={"base_url": "http://127.0.0.1:1/v1", "api_key_env": "K", "dimensions": 256})
    kit = OpenAIEmbeddingsRetriever.from_card(card, tokenizer=WordTokenizer(), tokenizer_name="words",
                                              cache=tmp_path)
    assert (kit.name, kit.windows, kit.window, kit.stride, kit.client.dimensions, kit.client.endpoint.api_key_env) == \
        ("OpenAI-v3-small", True, 512, 384, 256, "K")
    whole = OpenAIEmbeddingsRetriever.from_card(SimpleNamespace(**{**vars(card), "windowing": ""}), cache=tmp_path)
    assert not whole.windows and whole.encoder_description()["windows"] is None
    # the kit's clean cut is not IFIR's: a card asking for it is refused, not run with the authors' windows
    with raises_saying(ValueError, "'ifir'", "'clean'"):
        OpenAIEmbeddingsRetriever.from_card(SimpleNamespace(**{**vars(card), "windowing": "clean"}), cache=tmp_path)


def test_dimensions_are_sent_when_set_and_key_the_cache(toy_benchmark, tmp_path):
    with FakeChatServer(responder=embeddings_reply) as server:
        OpenAIEmbeddingClient("m", server.url, dimensions=256, progress=False).embed(["x"])
        OpenAIEmbeddingClient("m", server.url, progress=False).embed(["x"])
        assert server.received[0][1]["dimensions"] == 256 and "dimensions" not in server.received[1][1]
        bench = toy_benchmark()
        retrieve(bench, make(server, tmp_path), template="ifir", k=3)
        sent = server.count
        retrieve(bench, make(server, tmp_path, dimensions=8), template="ifir", k=3)  # other vectors: sent again
        assert server.count > sent


def test_an_answer_with_fewer_vectors_than_inputs_is_refused():
    def short(body):
        reply = embeddings_reply(body)
        reply.body["data"] = reply.body["data"][1:]
        return reply

    with FakeChatServer(responder=short) as server:
        with raises_saying(RuntimeError, "/embeddings returned 1 vectors for 2 inputs"):
            OpenAIEmbeddingClient("m", server.url, progress=False).embed(["x", "y"])


def test_a_malformed_answer_is_said_with_the_key_masked(monkeypatch):
    monkeypatch.setenv("MY_EMB_KEY", "sk-secret-456")
    with FakeChatServer(responder=lambda body: Reply(body={"echo": "sk-secret-456"})) as server:
        client = OpenAIEmbeddingClient("m", server.url, api_key_env="MY_EMB_KEY", progress=False)
        with pytest.raises(RuntimeError, match="returned a malformed body") as err:
            client.embed(["x"])
    assert "sk-secret-456" not in str(err.value)


def test_stride_may_equal_the_window_but_not_exceed_it_or_be_zero(tmp_path):
    with FakeChatServer(responder=embeddings_reply) as server:
        kit = make(server, tmp_path, window=3, stride=3)
        np.testing.assert_allclose(kit.embed_texts(["a b c d e"])[0], ifir_vector("a b c d e", 3, 3), atol=1e-6)
        for window, stride in ((3, 4), (3, 0), (0, 0)):
            with raises_saying(ValueError, "1 <= stride <= window", f"window={window}", f"stride={stride}"):
                make(server, tmp_path, window=window, stride=stride)


def test_a_text_without_tokens_and_every_text_without_windows_is_sent_whole(tmp_path):
    with FakeChatServer(responder=embeddings_reply) as server:
        np.testing.assert_allclose(make(server, tmp_path).embed_texts(["   "])[0], fake_vector("   "), atol=1e-6)
        whole = make(server, tmp_path, windows=False).embed_texts([" a b c d e f g "])
        assert server.received[-1][1]["input"] == [" a b c d e f g "]
    np.testing.assert_allclose(whole[0], fake_vector(" a b c d e f g "), atol=1e-6)


def test_the_default_name_is_the_models_last_path_part_and_cache_dir_is_the_cache(tmp_path):
    from types import SimpleNamespace

    assert OpenAIEmbeddingsRetriever("org/emb-model", cache=tmp_path).name == "api-emb-model"
    card = SimpleNamespace(name="v3", model="m", similarity="cosine", windowing="", params={})
    kit = OpenAIEmbeddingsRetriever.from_card(card, cache_dir=tmp_path / "emb", device="cuda")
    assert kit.cache.root == tmp_path / "emb"
    with raises_saying(UsageError, "'v3'", "cache or cache_dir"):
        OpenAIEmbeddingsRetriever.from_card(card, cache_dir=tmp_path, cache=tmp_path)


def test_nothing_to_embed_and_a_tokenizer_without_a_name_are_refused(tmp_path):
    with raises_saying(ValueError, "nothing to embed (no texts)"):
        OpenAIEmbeddingClient("m", "http://127.0.0.1:1/v1", progress=False).embed([])
    with raises_saying(ValueError, "a custom tokenizer needs tokenizer_name"):
        OpenAIEmbeddingsRetriever("m", tokenizer=WordTokenizer(), cache=tmp_path)


def test_a_run_stopped_by_a_failed_request_is_resumed_paying_again_for_no_text_already_answered(toy_benchmark,
                                                                                                tmp_path):
    """A request that failed for good (or a Ctrl-C) lost every answer of its chunk of 4,096 texts: the rerun sent
    (and paid for) them again. A chunk is now one round of requests in flight, kept once answered."""
    bench = toy_benchmark()
    with FakeChatServer(responder=embeddings_reply) as server:  # the requests a whole run makes, in order
        retrieve(bench, make(server, tmp_path / "whole", windows=False, batch_size=2, concurrency=1), template="ifir",
                 k=3)
    last = server.received[-1][1]["input"]
    answered, seen = [], []

    def fails_at_the_last_batch(body):
        if body["input"] == last and not seen:
            seen.append(1)
            return Reply(status=400, body={"error": {"message": "stopped"}})
        answered.append(body["input"])
        return embeddings_reply(body)

    with FakeChatServer(responder=fails_at_the_last_batch) as server:
        with pytest.raises(UserError):
            retrieve(bench, make(server, tmp_path, windows=False, batch_size=2, concurrency=1), template="ifir", k=3)
        paid = [text for batch in answered for text in batch]
        answered.clear()
        retrieve(bench, make(server, tmp_path, windows=False, batch_size=2, concurrency=1), template="ifir", k=3)
    again = [text for batch in answered for text in batch]
    assert len(paid) >= 2 and again == last and not set(again) & set(paid)


def test_the_embedding_cache_keeps_one_round_of_requests_per_chunk(tmp_path):
    # a chunk is batch_size x concurrency texts: a stopped run pays again for no more than the round in flight
    retriever = OpenAIEmbeddingsRetriever("text-embedding-3-small", "http://127.0.0.1:1/v1", tokenizer=WordTokenizer(),
                                          tokenizer_name="words", cache=tmp_path / "emb", progress=False, batch_size=3,
                                          concurrency=2)
    assert retriever.cache.chunk_size == 6
