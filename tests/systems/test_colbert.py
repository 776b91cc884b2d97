"""Late-interaction ColBERT (instir.systems.colbert) against an independent, one-text-at-a-time
computation that follows colbert-ai step by step (QueryTokenizer/DocTokenizer.tensorize,
ColBERT.query/doc, colbert_score) on a tiny checkpoint in colbertv2.0's layout."""

import json
import string
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from instir.benchmarks.types import Doc
from instir.formatting import get_template
from instir.retrieval import retrieve
from instir.retrieval.token_cache import TokenEmbeddingCache
from instir.systems.colbert import ColBERTEncoder, ColBERTRetriever, maxsim_top_k
from tests.retrieval.conftest import TOY_DOCS, TOY_QUERIES
from tests.systems.tiny_models import build_colbert

PUNCTUATED = Doc("950", "Saffron, wine & paella: (chef's) notes; a farmer's crocus-harvest? Yes!")
TEXTS = [d.text for d in [*TOY_DOCS, PUNCTUATED]] + [f"{q.instruction} {q.query}" for q in TOY_QUERIES.values()]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return build_colbert(tmp_path_factory.mktemp("colbert") / "ckpt", TEXTS)


class Reference:
    """colbert-ai's encoding, written out for one text at a time (no batching, no padding)."""

    def __init__(self, folder):
        from safetensors.torch import load_file
        from transformers import AutoTokenizer, BertConfig, BertModel

        state = load_file(str(folder / "model.safetensors"))
        self.tok = AutoTokenizer.from_pretrained(folder)
        self.bert = BertModel(BertConfig.from_pretrained(folder), add_pooling_layer=False).eval()
        self.bert.load_state_dict({k[5:]: v for k, v in state.items() if k.startswith("bert.") and "pooler" not in k},
                                  strict=True)
        self.w = state["linear.weight"].numpy().astype(np.float64)

    def _vectors(self, ids, attention):
        with torch.no_grad():
            hidden = self.bert(input_ids=torch.tensor([ids]), attention_mask=torch.tensor([attention]))[0][0]
        v = hidden.numpy().astype(np.float64) @ self.w.T
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    def word_ids(self, text):
        return self.tok.convert_tokens_to_ids(self.tok.tokenize(text))

    def query(self, text, query_maxlen=32, attend_to_mask_tokens=False):
        # [CLS] [Q] text… [SEP] then [MASK] up to query_maxlen; masks attended only when configured
        words = self.word_ids(text)[:query_maxlen - 3]
        ids = [self.tok.cls_token_id, self.tok.convert_tokens_to_ids("[unused0]"), *words, self.tok.sep_token_id]
        attention = [1] * len(ids) + [int(attend_to_mask_tokens)] * (query_maxlen - len(ids))
        ids += [self.tok.mask_token_id] * (query_maxlen - len(ids))
        return self._vectors(ids, attention)

    def doc(self, text, doc_maxlen=300):
        # [CLS] [D] text… [SEP]; drop the vectors of punctuation tokens (first id of each mark)
        ids = [self.tok.cls_token_id, self.tok.convert_tokens_to_ids("[unused1]"),
               *self.word_ids(text)[:doc_maxlen - 3], self.tok.sep_token_id]
        skip = {self.word_ids(mark)[0] for mark in string.punctuation}
        vectors = self._vectors(ids, [1] * len(ids))
        return vectors[[i not in skip for i in ids]]

    @staticmethod
    def maxsim(q, d):
        return float((q @ d.T).max(axis=1).sum())


@pytest.fixture(scope="module")
def reference(checkpoint):
    return Reference(checkpoint)


def test_query_vectors_follow_colbert_ai_step_by_step(checkpoint, reference):
    queries = [f"{q.instruction} [SEP] {q.query}" for q in TOY_QUERIES.values()] + ["saffron"]
    enc = ColBERTEncoder(str(checkpoint), query_maxlen=12)
    got = enc.queries(queries)
    assert got.shape == (len(queries), 12, 8)
    for text, vectors in zip(queries, got):
        np.testing.assert_allclose(vectors, reference.query(text, 12), atol=2e-6)
    # the InstructIR quirk: 9 word pieces of 'instruction [SEP] query' survive, the query is cut away
    ids, _ = enc.query_inputs([queries[0]])
    assert enc.tokenizer.convert_ids_to_tokens(ids[0])[:3] == ["[CLS]", "[unused0]", "i"]
    assert "saffron" not in enc.tokenizer.convert_ids_to_tokens(ids[0])


def test_attend_to_mask_tokens_changes_the_query_vectors_as_colbert_ai_does(checkpoint, reference):
    enc = ColBERTEncoder(str(checkpoint), attend_to_mask_tokens=True)
    got = enc.queries(["what is saffron"])[0]
    np.testing.assert_allclose(got, reference.query("what is saffron", 32, attend_to_mask_tokens=True), atol=2e-6)
    assert not np.allclose(got, reference.query("what is saffron", 32, attend_to_mask_tokens=False), atol=1e-3)


def test_document_vectors_drop_punctuation_and_stop_at_doc_maxlen(checkpoint, reference):
    texts = [d.text for d in [*TOY_DOCS, PUNCTUATED]]
    for doc_maxlen in (16, 300):
        got = ColBERTEncoder(str(checkpoint), doc_maxlen=doc_maxlen, batch_size=3).documents(texts)
        for text, vectors in zip(texts, got):
            np.testing.assert_allclose(vectors, reference.doc(text, doc_maxlen), atol=2e-6)
    full = ColBERTEncoder(str(checkpoint)).documents([PUNCTUATED.text])[0]
    assert full.shape[0] == len(reference.word_ids(PUNCTUATED.text)) + 3 - 11  # , & : ( ' ) ; ' - ? ! dropped


def test_run_scores_are_the_maxsim_of_the_reference_vectors(checkpoint, reference, toy_benchmark, tmp_path):
    bench = toy_benchmark(extra_docs=(PUNCTUATED,))
    template = get_template("instructir")
    run = retrieve(bench, ColBERTRetriever(str(checkpoint), cache_dir=tmp_path, progress=False), template, k=5)
    docs = {d.id: reference.doc(template.format_doc(d), 300) for d in bench.corpus}
    for qid, q in bench.queries.items():
        qv = reference.query(template.format_query(q), 32)
        expected = sorted(((reference.maxsim(qv, dv), did) for did, dv in docs.items()), reverse=True)[:5]
        got = run.df[run.df["qid"] == qid]
        assert list(got["docid"]) == [did for _, did in expected]
        np.testing.assert_allclose(got["score"], [s for s, _ in expected], rtol=1e-5)
    assert run.meta["retriever"]["params"]["query_maxlen"] == 32
    assert run.meta["retriever"]["params"]["doc_maxlen"] == 300


def test_settings_come_from_artifact_metadata_unless_given(tmp_path):
    folder = build_colbert(tmp_path / "ckpt", TEXTS, metadata={"query_maxlen": 10, "attend_to_mask_tokens": True})
    enc = ColBERTEncoder(str(folder))
    assert (enc.query_maxlen, enc.settings["attend_to_mask_tokens"], enc.doc_maxlen) == (10, True, 300)
    assert ColBERTEncoder(str(folder), query_maxlen=20).query_maxlen == 20


def test_warm_rerun_loads_no_model_and_encodes_nothing(checkpoint, toy_benchmark, tmp_path):
    bench = toy_benchmark()
    first = ColBERTRetriever(str(checkpoint), cache_dir=tmp_path, progress=False)
    cold = first.search(bench, get_template("instructir"), 4)
    assert cold.meta["embeddings"]["documents_encoded"] == len(TOY_DOCS)
    assert cold.meta["embeddings"]["model_calls"] > 0
    again = ColBERTRetriever(str(checkpoint), cache_dir=tmp_path, progress=False)
    warm = again.search(bench, get_template("instructir"), 4)
    assert warm.meta["embeddings"]["queries_encoded"] == warm.meta["embeddings"]["documents_encoded"] == 0
    assert warm.meta["embeddings"]["model_calls"] == 0 and again._encoder is None
    assert warm.df.equals(cold.df)
    assert again.params() == first.params()


def test_equal_documents_tie_in_trec_order_every_time(checkpoint, toy_benchmark, tmp_path):
    twins = (Doc("a-twin", TOY_DOCS[0].text), Doc("z-twin", TOY_DOCS[0].text))
    bench = toy_benchmark(extra_docs=twins)
    runs = [ColBERTRetriever(str(checkpoint), cache_dir=tmp_path / str(i), progress=False)
            .search(bench, get_template("instructir"), 10) for i in range(2)]
    assert runs[0].df.equals(runs[1].df)
    ranked = list(runs[0].df[runs[0].df["qid"] == "1_1"]["docid"])
    at = ranked.index("z-twin")
    assert ranked[at:at + 3] == ["z-twin", "a-twin", "10_1"]  # equal scores: docid descending


def test_blocked_maxsim_equals_one_block(checkpoint, tmp_path):
    enc = ColBERTEncoder(str(checkpoint))
    docs = TokenEmbeddingCache(tmp_path, progress=False).embed({"m": 1}, TEXTS, enc.documents)
    queries = enc.queries(TEXTS[:5])
    whole = maxsim_top_k(queries, docs, 6)
    small = maxsim_top_k(queries, docs, 6, token_block=7, query_block=2)
    np.testing.assert_array_equal(whole[1], small[1])
    np.testing.assert_allclose(whole[0], small[0], rtol=1e-6)
    every = np.array([[Reference.maxsim(q.astype(np.float64), docs[j].astype(np.float64)) for j in range(len(docs))]
                      for q in queries])
    np.testing.assert_allclose(whole[0], -np.sort(-every, axis=1)[:, :6], rtol=1e-5)


def test_from_card_reads_lengths_revision_and_params(checkpoint, tmp_path):
    card = SimpleNamespace(name="ColBERTv2 (q128)", model=str(checkpoint), revision=None, query_max_length=128,
                           doc_max_length=200, params={"mask_punctuation": False, "batch_size": 8},
                           template="instructir")
    retriever = ColBERTRetriever.from_card(card, cache_dir=tmp_path, progress=False)
    params = retriever.params()
    assert retriever.name == "ColBERTv2 (q128)"
    assert (params["query_maxlen"], params["doc_maxlen"], params["mask_punctuation"], params["batch_size"]) == \
        (128, 200, False, 8)


def test_checkpoint_without_projection_is_refused_with_one_line(tmp_path):
    from safetensors.torch import load_file, save_file

    folder = build_colbert(tmp_path / "ckpt", TEXTS)
    state = load_file(str(folder / "model.safetensors"))
    del state["linear.weight"]
    save_file(state, str(folder / "model.safetensors"))
    with pytest.raises(ValueError, match="no 'linear.weight'.*not a colbert-ai checkpoint"):
        ColBERTEncoder(str(folder))


def test_query_maxlen_beyond_the_model_is_refused(checkpoint):
    with pytest.raises(ValueError, match="query_maxlen must be a whole number from 4 to 512"):
        ColBERTEncoder(str(checkpoint), query_maxlen=600)


def test_pair_template_is_refused(checkpoint, toy_benchmark, tmp_path):
    retriever = ColBERTRetriever(str(checkpoint), cache_dir=tmp_path, progress=False)
    with pytest.raises(ValueError, match="makes \\[instruction, text\\] pairs"):
        retriever.search(toy_benchmark(), get_template("instructir-instructor"), 3)


def test_description_cache_is_keyed_by_the_checkpoint_files(checkpoint, tmp_path):
    first = ColBERTRetriever(str(checkpoint), cache_dir=tmp_path, progress=False).encoder_description()
    (path,) = (tmp_path / "colbert-describe").glob("*.json")
    assert json.loads(path.read_text()) == first
    other = ColBERTRetriever(str(checkpoint), query_maxlen=16, cache_dir=tmp_path, progress=False)
    assert other.encoder_description()["query_maxlen"] == 16
    assert len(list((tmp_path / "colbert-describe").glob("*.json"))) == 2


def test_instructir_row_and_its_long_query_variant_are_named_apart(checkpoint, tmp_path):
    authors = ColBERTRetriever.for_instructir(model=str(checkpoint), cache_dir=tmp_path, progress=False)
    variant = ColBERTRetriever.for_instructir(True, model=str(checkpoint), cache_dir=tmp_path, progress=False)
    assert (authors.name, variant.name) == ("ckpt", "ckpt-q128")
    assert (authors.params()["query_maxlen"], authors.params()["doc_maxlen"]) == (32, 300)
    assert (variant.params()["query_maxlen"], variant.params()["doc_maxlen"]) == (128, 300)
