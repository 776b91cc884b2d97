"""Late-interaction ColBERT (instir.systems.colbert) against an independent, one-text-at-a-time
computation that follows colbert-ai step by step (QueryTokenizer/DocTokenizer.tensorize,
ColBERT.query/doc, colbert_score) on a tiny checkpoint in colbertv2.0's layout; and
sentence-transformers' MultiVectorEncoder, loaded as a user would, against the same computation
(inputs, masks, vectors, MaxSim ranking): they agree, so the kit encodes through the library, and
where the library would differ (the skiplist of a vocabulary without some punctuation mark) the
kit follows colbert-ai."""

import dataclasses
import json
import string
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from says import raises_saying
from tiny_models import build_colbert

from instir.benchmarks.types import Doc
from instir.formatting import get_template
from instir.retrieval import retrieve
from instir.retrieval.token_cache import TokenEmbeddingCache
from instir.systems.colbert import LONG_QUERY_MAXLEN, ColBERTEncoder, ColBERTRetriever, maxsim_top_k
from tests.retrieval.conftest import TOY_DOCS, TOY_QUERIES

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

    def query_inputs(self, text, query_maxlen=32, attend_to_mask_tokens=False):
        # [CLS] [Q] text… [SEP] then [MASK] up to query_maxlen; masks attended only when configured
        words = self.word_ids(text)[:query_maxlen - 3]
        ids = [self.tok.cls_token_id, self.tok.convert_tokens_to_ids("[unused0]"), *words, self.tok.sep_token_id]
        attention = [1] * len(ids) + [int(attend_to_mask_tokens)] * (query_maxlen - len(ids))
        return ids + [self.tok.mask_token_id] * (query_maxlen - len(ids)), attention

    def query(self, text, query_maxlen=32, attend_to_mask_tokens=False):
        return self._vectors(*self.query_inputs(text, query_maxlen, attend_to_mask_tokens))

    def doc_inputs(self, text, doc_maxlen=300):
        # [CLS] [D] text… [SEP]
        return [self.tok.cls_token_id, self.tok.convert_tokens_to_ids("[unused1]"),
                *self.word_ids(text)[:doc_maxlen - 3], self.tok.sep_token_id]

    def doc_kept(self, text, doc_maxlen=300):
        # False at punctuation tokens: the first id of each mark ([UNK] for a mark the vocabulary lacks)
        skip = {self.word_ids(mark)[0] for mark in string.punctuation}
        return [i not in skip for i in self.doc_inputs(text, doc_maxlen)]

    def doc(self, text, doc_maxlen=300):
        ids = self.doc_inputs(text, doc_maxlen)
        return self._vectors(ids, [1] * len(ids))[self.doc_kept(text, doc_maxlen)]

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
    ids = enc.model.preprocess([queries[0]], prompt=enc.model.prompts["query"], task="query")["input_ids"]
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
    assert (enc.query_maxlen, enc.settings["attend_to_mask_tokens"], enc.settings["doc_maxlen"]) == (10, True, 300)
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
    with raises_saying(ValueError, "'linear.weight'", "colbert-ai checkpoint"):
        ColBERTEncoder(str(folder))


def test_query_maxlen_beyond_the_model_is_refused(checkpoint):
    with raises_saying(ValueError, "query_maxlen", "4", "512"):
        ColBERTEncoder(str(checkpoint), query_maxlen=600)


def test_pair_template_is_refused(checkpoint, toy_benchmark, tmp_path):
    retriever = ColBERTRetriever(str(checkpoint), cache_dir=tmp_path, progress=False)
    with pytest.raises(ValueError, match="makes \\[instruction, text\\] pairs"):
        retriever.search(toy_benchmark(), get_template("instructir-instructor"), 3)


def test_description_cache_is_keyed_by_the_checkpoint_files(checkpoint, tmp_path):
    first = ColBERTRetriever(str(checkpoint), cache_dir=tmp_path, progress=False).encoder_description()
    (path,) = (tmp_path / "model-descriptions").glob("*/description.json")
    assert json.loads(path.read_text()) == first
    other = ColBERTRetriever(str(checkpoint), query_maxlen=16, cache_dir=tmp_path, progress=False)
    assert other.encoder_description()["query_maxlen"] == 16
    assert len(list((tmp_path / "model-descriptions").glob("*/description.json"))) == 2


def test_instructir_row_and_its_long_query_variant_are_named_apart(checkpoint, tmp_path):
    from instir.systems import get_card, load_cards

    card = dataclasses.replace(get_card("ColBERTv2", load_cards()), model=str(checkpoint))
    authors = ColBERTRetriever.from_card(card, cache_dir=tmp_path, progress=False)
    variant = ColBERTRetriever(str(checkpoint), name="ColBERTv2 (q128)", query_maxlen=LONG_QUERY_MAXLEN,
                               cache_dir=tmp_path, progress=False)
    assert (authors.name, variant.name) == ("ColBERTv2", "ColBERTv2 (q128)")
    assert (authors.params()["query_maxlen"], authors.params()["doc_maxlen"]) == (32, 300)
    assert (variant.params()["query_maxlen"], variant.params()["doc_maxlen"]) == (128, 300)


# --------------------------------------------- sentence-transformers' MultiVectorEncoder vs colbert-ai

QUERIES = [f"{q.instruction} [SEP] {q.query}" for q in TOY_QUERIES.values()] + ["saffron", "what is saffron"]
DOCS = [d.text for d in [*TOY_DOCS, PUNCTUATED]]


def load_library(folder):
    """sentence-transformers' multi-vector encoder of ``folder`` as a user loads it: nothing from the kit."""
    from sentence_transformers import MultiVectorEncoder

    return MultiVectorEncoder(str(folder), device="cpu", local_files_only=True)


@pytest.fixture(scope="module")
def library(checkpoint):
    return load_library(checkpoint)


def test_library_reads_the_stanford_checkpoints_settings_and_markers(checkpoint, library):
    from transformers import AutoTokenizer

    transformer, dense, mask, _ = library
    assert type(library).__name__ == "MultiVectorEncoder" and library.prompts == {"query": "[unused0] ",
                                                                                 "document": "[unused1] "}
    assert transformer.query_expansion == {"strategy": "fixed", "attend": False, "token": None, "length": 32}
    assert transformer.document_length == 180  # the checkpoint's artifact.metadata (InstructIR's 300 is the kit's)
    assert mask.skiplist_words == list(string.punctuation) and mask.skiplist_tasks == ["document"]
    np.testing.assert_array_equal(dense.linear.weight.detach().numpy(),
                                  Reference(checkpoint).w.astype(np.float32))
    # as plain text the marker is four word pieces; the library registers it as one special token
    assert AutoTokenizer.from_pretrained(checkpoint).tokenize("[unused0]") != ["[unused0]"]
    assert library.tokenizer.tokenize("[unused0] saffron") == ["[unused0]", "saffron"]


def test_library_feeds_the_model_colbert_ai_input_ids_and_attention_masks(library, reference):
    for text in QUERIES:
        features = library.preprocess([text], prompt=library.prompts["query"], task="query")
        ids, attention = reference.query_inputs(text, 32)
        assert features["input_ids"][0].tolist() == ids  # [CLS] [unused0] … [SEP] [MASK]… to 32
        assert features["attention_mask"][0].tolist() == attention  # [MASK] not attended
    long = QUERIES[0] + " " + " ".join(DOCS)  # past query_maxlen: cut to 29 word pieces, as colbert-ai cuts it
    assert library.preprocess([long], prompt=library.prompts["query"], task="query")["input_ids"][0].tolist() == \
        reference.query_inputs(long, 32)[0]
    for text in DOCS:
        features = library.preprocess([text], prompt=library.prompts["document"], task="document")
        assert features["input_ids"][0].tolist() == reference.doc_inputs(text, 180)
        assert features["attention_mask"][0].all()


def test_library_vectors_and_scoring_masks_equal_colbert_ais(library, reference):
    for text, vectors in zip(QUERIES, library.encode_query(QUERIES, convert_to_numpy=True)):
        raw = library.encode_query([text], output_value=None)[0]
        assert raw["attention_mask"].tolist() == [True] * 32  # every position scored, the [MASK] ones too
        np.testing.assert_allclose(vectors, reference.query(text, 32), atol=2e-6)
    for text, vectors in zip(DOCS, library.encode_document(DOCS, convert_to_numpy=True)):
        raw = library.encode_document([text], output_value=None)[0]
        assert raw["attention_mask"].tolist() == reference.doc_kept(text, 180)  # punctuation dropped
        np.testing.assert_allclose(vectors, reference.doc(text, 180), atol=2e-6)
    assert sum(reference.doc_kept(PUNCTUATED.text, 180)) == len(reference.doc_inputs(PUNCTUATED.text, 180)) - 11


def test_library_maxsim_ranks_as_colbert_ai_and_as_the_kits_exact_search(library, reference, tmp_path):
    queries = library.encode_query(QUERIES, convert_to_numpy=True)
    docs = library.encode_document(DOCS, convert_to_numpy=True)
    scores = library.similarity(queries, docs).numpy()
    expected = np.array([[Reference.maxsim(reference.query(q, 32), reference.doc(d, 180)) for d in DOCS]
                         for q in QUERIES])
    np.testing.assert_allclose(scores, expected, rtol=1e-5)
    order = np.argsort(-expected, axis=1, kind="stable")
    np.testing.assert_array_equal(np.argsort(-scores, axis=1, kind="stable"), order)
    packed = TokenEmbeddingCache(tmp_path, progress=False).embed({"library": 1}, DOCS, lambda texts: docs)
    top_scores, top = maxsim_top_k(np.stack(queries), packed, len(DOCS))
    np.testing.assert_array_equal(top, order)
    np.testing.assert_allclose(top_scores, np.take_along_axis(scores, order, axis=1), rtol=1e-5)


def test_kit_encoder_returns_the_librarys_vectors_unchanged(checkpoint, library):
    # the checkpoint's settings and the same batches: the same bits (other batchings pad differently and
    # move the last float32 digits, ~1e-7)
    enc = ColBERTEncoder(str(checkpoint), doc_maxlen=180, batch_size=32)
    np.testing.assert_array_equal(enc.queries(QUERIES), np.stack(library.encode_query(QUERIES, convert_to_numpy=True)))
    for mine, theirs in zip(enc.documents(DOCS), library.encode_document(DOCS, convert_to_numpy=True)):
        np.testing.assert_array_equal(mine, theirs)
    import sentence_transformers

    assert enc.describe()["sentence_transformers"] == sentence_transformers.__version__  # in every cache key
    assert enc.settings == {"query_maxlen": 32, "attend_to_mask_tokens": False, "mask_punctuation": True,
                            "query_token_id": "[unused0]", "doc_token_id": "[unused1]", "dim": 8, "doc_maxlen": 180}


def test_skiplist_of_a_vocabulary_without_a_mark_is_where_the_library_differs_and_the_kit_follows_colbert_ai(
        tmp_path):
    folder = build_colbert(tmp_path / "ckpt", TEXTS, missing_marks="&~")
    reference = Reference(folder)
    assert reference.tok.tokenize(PUNCTUATED.text)[3] == "[UNK]"  # 'wine & paella': no '&' in this vocabulary
    expected = reference.doc(PUNCTUATED.text, 180)  # colbert-ai skips encode('&')[0], [UNK]: 15 vectors
    theirs = load_library(folder).encode_document([PUNCTUATED.text], convert_to_numpy=True)[0]
    assert (len(expected), len(theirs)) == (15, 16)  # the library drops '&' from its list, keeps the [UNK]
    mine = ColBERTEncoder(str(folder), doc_maxlen=180).documents([PUNCTUATED.text])[0]
    np.testing.assert_allclose(mine, expected, atol=2e-6)


def test_colbertv2_vocabulary_holds_every_punctuation_mark_so_the_skiplists_agree_there():
    from transformers import AutoTokenizer

    from instir.retrieval.dense import bundled_model_path
    from instir.systems.colbert import colbert_skiplist

    tok = AutoTokenizer.from_pretrained(bundled_model_path())  # bert-base-uncased's WordPiece vocabulary
    assert len(tok) == 30522 and tok.unk_token not in colbert_skiplist(tok)
    assert colbert_skiplist(tok) == list(string.punctuation)


@pytest.mark.parametrize("version", ["6.1.0", "6.1rc1"])  # a pre-release of an older one is older too
def test_sentence_transformers_older_than_the_checked_release_is_refused(checkpoint, monkeypatch, version):
    import sentence_transformers

    from instir.errors import UserError

    monkeypatch.setattr(sentence_transformers, "__version__", version)
    with raises_saying(UserError, "sentence-transformers>=6.2", version):
        ColBERTEncoder(str(checkpoint))


def test_checkpoint_the_library_would_not_read_as_colbert_is_refused(tmp_path):
    folder = build_colbert(tmp_path / "ckpt", TEXTS)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "architectures": ["BertModel"]}))
    with pytest.raises(ValueError, match="not as a Stanford ColBERT checkpoint"):
        ColBERTEncoder(str(folder))  # else: a random projection, no [MASK] expansion, no skiplist


def test_checkpoint_missing_encoder_weights_is_refused(tmp_path):
    from safetensors.torch import load_file, save_file

    folder = build_colbert(tmp_path / "ckpt", TEXTS)
    state = load_file(str(folder / "model.safetensors"))
    save_file({k: v for k, v in state.items() if ".layer.1." not in k}, str(folder / "model.safetensors"))
    with raises_saying(ValueError, "encoder weights", "colbert-ai checkpoint"):
        ColBERTEncoder(str(folder))


def test_lengths_from_4_to_the_models_positions_are_accepted_and_nothing_beyond(checkpoint):
    assert ColBERTEncoder(str(checkpoint), query_maxlen=512, doc_maxlen=4).queries(["saffron"]).shape == (1, 512, 8)
    assert ColBERTEncoder(str(checkpoint), query_maxlen=4).query_maxlen == 4
    for bad in ({"query_maxlen": 3}, {"doc_maxlen": 513}, {"doc_maxlen": 3}, {"query_maxlen": 32.0}):
        with raises_saying(ValueError, next(iter(bad)), "whole number from 4 to 512"):
            ColBERTEncoder(str(checkpoint), **bad)


def test_without_mask_punctuation_every_document_token_keeps_its_vector(checkpoint, reference):
    got = ColBERTEncoder(str(checkpoint), mask_punctuation=False).documents([PUNCTUATED.text])[0]
    ids = reference.doc_inputs(PUNCTUATED.text)
    np.testing.assert_allclose(got, reference._vectors(ids, [1] * len(ids)), atol=2e-6)


def test_a_checkpoint_without_pooler_weights_is_read_as_colbert_ai_reads_it(tmp_path):
    from safetensors.torch import load_file, save_file

    folder = build_colbert(tmp_path / "ckpt", TEXTS)
    state = load_file(str(folder / "model.safetensors"))
    assert any(".pooler." in k for k in state)
    save_file({k: v for k, v in state.items() if ".pooler." not in k}, str(folder / "model.safetensors"))
    got = ColBERTEncoder(str(folder)).documents([PUNCTUATED.text])[0]
    np.testing.assert_allclose(got, Reference(folder).doc(PUNCTUATED.text), atol=2e-6)


def test_maxsim_keeps_a_query_tokens_best_similarity_even_when_it_is_negative(tmp_path):
    vectors = {"a": [[-1.0, 0.0]], "b": [[0.0, 1.0], [-0.6, -0.8]], "c": [[0.6, -0.8], [-1.0, 0.0]]}
    docs = TokenEmbeddingCache(tmp_path, progress=False).embed(
        {"hand-made": 1}, list(vectors), lambda texts: [np.array(vectors[t], dtype=np.float32) for t in texts])
    queries = np.array([[[1.0, 0.0], [0.0, -1.0]]], dtype=np.float32)
    every = [sum(max(float(np.dot(q, t)) for t in vectors[d]) for q in queries[0]) for d in vectors]  # -1, -0.6, 1.4
    scores, indices = maxsim_top_k(queries, docs, 3)
    assert indices.tolist() == [[2, 1, 0]]
    np.testing.assert_allclose(scores[0], sorted(every, reverse=True), atol=1e-6)
    assert maxsim_top_k(queries, docs, 10)[1].tolist() == [[2, 1, 0]]  # k beyond the corpus: every document
    with raises_saying(ValueError, "k must be positive, got 0"):
        maxsim_top_k(queries, docs, 0)


def test_a_checkpoint_that_says_mask_punctuation_false_keeps_every_document_token(tmp_path):
    folder = build_colbert(tmp_path / "ckpt", TEXTS, metadata={"mask_punctuation": False})
    enc = ColBERTEncoder(str(folder))
    assert enc.settings["mask_punctuation"] is False
    reference = Reference(folder)
    ids = reference.doc_inputs(PUNCTUATED.text)
    np.testing.assert_allclose(enc.documents([PUNCTUATED.text])[0], reference._vectors(ids, [1] * len(ids)), atol=2e-6)


def test_no_texts_encode_to_empty_results_of_the_right_shape(checkpoint):
    enc = ColBERTEncoder(str(checkpoint), query_maxlen=12)
    assert enc.queries([]).shape == (0, 12, 8) and enc.documents([]) == []


def test_the_default_name_is_colbert_and_the_checkpoints_last_path_part(tmp_path):
    assert ColBERTRetriever("colbert-ir/colbertv2.0/", cache_dir=tmp_path, progress=False).name == "colbert-colbertv2.0"


def test_at_the_cut_of_k_equal_documents_are_kept_in_trec_order(checkpoint, toy_benchmark, tmp_path):
    twins = (Doc("a-twin", TOY_DOCS[0].text), Doc("z-twin", TOY_DOCS[0].text))
    bench = toy_benchmark(extra_docs=twins)
    retriever = ColBERTRetriever(str(checkpoint), cache_dir=tmp_path, progress=False)
    whole = retriever.search(bench, get_template("instructir"), 10).df
    ranked = list(whole[whole["qid"] == "1_1"]["docid"])
    cut = retriever.search(bench, get_template("instructir"), ranked.index("z-twin") + 1).df
    assert list(cut[cut["qid"] == "1_1"]["docid"])[-1] == "z-twin"  # equal scores: docid descending, as TREC


def test_from_card_reads_attend_to_mask_tokens(checkpoint, tmp_path):
    card = SimpleNamespace(name="ColBERTv2 (attend)", model=str(checkpoint), revision=None, query_max_length=None,
                           doc_max_length=None, params={"attend_to_mask_tokens": True})
    retriever = ColBERTRetriever.from_card(card, cache_dir=tmp_path, progress=False)
    assert retriever.params()["attend_to_mask_tokens"] is True


def test_sentence_transformers_of_the_checked_release_itself_is_accepted(checkpoint, monkeypatch):
    import sentence_transformers

    monkeypatch.setattr(sentence_transformers, "__version__", "6.2.0")
    assert ColBERTEncoder(str(checkpoint)).query_maxlen == 32


def test_a_checkpoint_saved_in_float16_encodes_in_float32(tmp_path):
    from safetensors.torch import load_file, save_file

    folder = build_colbert(tmp_path / "ckpt", TEXTS)
    state = load_file(str(folder / "model.safetensors"))
    save_file({k: v.half() for k, v in state.items()}, str(folder / "model.safetensors"), metadata={"format": "pt"})
    got = ColBERTEncoder(str(folder)).documents([PUNCTUATED.text])[0]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, Reference(folder).doc(PUNCTUATED.text), atol=2e-6)
