"""The peft-decoder adapter against an independent computation written here step by step
from the authors' code: InstructIR ``eval/eval_instructir_dense.py`` ``_get_model`` +
``src/beir_utils.py`` ``DenseEncoder_w_Decoder_Model`` (RepLLaMA) and IFIR
``src/utils/inst_llms.py`` ``Promptriever`` — with a tiny random Llama and a random LoRA."""

import dataclasses
import importlib.util

import numpy as np
import pytest
import torch

from instir.formatting import get_template
from instir.systems import build_system, get_card, load_cards

# found, not imported: importing peft at collection costs every worker seconds
pytestmark = pytest.mark.skipif(importlib.util.find_spec("peft") is None, reason="peft is not installed")


def _merged(adapter_dir, dtype=None):
    """eval_instructir_dense.py _get_model / inst_llms.py Promptriever.get_model."""
    from peft import PeftConfig, PeftModel
    from transformers import AutoModel

    config = PeftConfig.from_pretrained(adapter_dir)
    base = AutoModel.from_pretrained(config.base_model_name_or_path)
    model = PeftModel.from_pretrained(base, adapter_dir).merge_and_unload()
    if dtype is not None:
        model = model.half()
    return model.eval()


def _tokenizer(base_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base_dir)
    tok.pad_token = tok.eos_token
    tok.padding_side = "right"
    return tok


def _repllama_reference(model, tok, texts, batch_size, max_length, quirk):
    """DenseEncoder_w_Decoder_Model.encode_*: batches of ``batch_size`` in the given order,
    padding=True, truncation at max_length, last_hidden_state[:, -1] (quirk) or the last real
    token (fixed), L2-normalised."""
    out = []
    with torch.no_grad():
        for i in range(0, len(texts), batch_size):
            enc = tok(texts[i:i + batch_size], max_length=max_length, padding=True, truncation=True,
                      add_special_tokens=True, return_tensors="pt")
            hidden = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state
            if quirk:
                emb = hidden[:, -1, :]
            else:
                emb = hidden[torch.arange(hidden.shape[0]), enc["attention_mask"].sum(dim=1) - 1]
            out.append(torch.nn.functional.normalize(emb, p=2, dim=1))
    return torch.cat(out).numpy()


def _repllama_card(tiny_llama, name, **changes):
    base_dir, adapter_dir = tiny_llama
    card = get_card(name, load_cards())
    params = {**card.params, "tokenizer": str(base_dir)}
    return dataclasses.replace(card, model=str(adapter_dir), base_model=str(base_dir), params=params, **changes)


def _beir_corpus_order(benchmark):
    """BEIR DenseRetrievalExactSearch: corpus sorted by len(title + text), longest first."""
    docs = list(benchmark.corpus)
    return sorted(docs, key=lambda d: len(d.title + d.text), reverse=True)


@pytest.mark.parametrize("name,quirk", [("RepLLaMA-7B", True), ("RepLLaMA-7B (fixed)", False)])
def test_repllama_vectors_equal_the_authors_code_path(tiny_llama, benchmark, tmp_path, name, quirk):
    card = _repllama_card(tiny_llama, name)
    system = build_system(card, cache_dir=tmp_path, progress=False)
    template = get_template(card.template)
    queries = system.inner.embed_queries(template.format_queries(benchmark.queries.values()))
    docs, doc_ids = system.inner.embed_corpus(benchmark.corpus, template)

    model, tok = _merged(tiny_llama[1]), _tokenizer(tiny_llama[0])
    q_texts = [(f"{q.instruction} [SEP] {q.query}" if q.instruction else q.query) + "</s>"
               for q in benchmark.queries.values()]
    ordered = _beir_corpus_order(benchmark)
    d_texts = [(d.title + " " + d.text if d.title else d.text) + "</s>" for d in ordered]
    assert doc_ids == [d.id for d in ordered]
    np.testing.assert_allclose(queries.matrix, _repllama_reference(model, tok, q_texts, 4, 512, quirk), atol=1e-5)
    np.testing.assert_allclose(docs.matrix, _repllama_reference(model, tok, d_texts, 4, 512, quirk), atol=1e-5)


def test_repllama_quirk_pools_a_pad_position_for_shorter_inputs_of_a_batch(tiny_llama, benchmark, tmp_path):
    template = get_template("instructir-repllama")
    inputs = template.format_queries(benchmark.queries.values())
    quirk = build_system(_repllama_card(tiny_llama, "RepLLaMA-7B"), cache_dir=tmp_path / "a", progress=False)
    fixed = build_system(_repllama_card(tiny_llama, "RepLLaMA-7B (fixed)"), cache_dir=tmp_path / "b", progress=False)
    a, b = quirk.inner.encode(inputs, 512), fixed.inner.encode(inputs, 512)
    lengths = np.array([len(quirk.inner.tokenizer(t)["input_ids"]) for t in inputs])
    longest = np.zeros(len(inputs), dtype=bool)
    for start in range(0, len(inputs), 4):  # the longest input of each batch of 4 ends at position -1
        batch = lengths[start:start + 4]
        longest[start:start + 4] = batch == batch.max()
    np.testing.assert_allclose(a[longest], b[longest], atol=1e-6)
    assert not np.allclose(a[~longest], b[~longest], atol=1e-3)


def test_promptriever_vectors_equal_the_ifir_code_path(tiny_llama, benchmark, tmp_path):
    base_dir, adapter_dir = tiny_llama
    card = get_card("Promptriever-7B", load_cards())
    card = dataclasses.replace(card, model=str(adapter_dir), base_model=str(base_dir), query_max_length=9,
                               doc_max_length=9, params={**card.params, "tokenizer": str(base_dir)})
    system = build_system(card, cache_dir=tmp_path, progress=False)
    template = get_template(card.template)
    queries = system.inner.embed_queries(template.format_queries(benchmark.queries.values()))
    docs, doc_ids = system.inner.embed_corpus(benchmark.corpus, template)
    assert doc_ids == benchmark.corpus.ids()

    model, tok = _merged(adapter_dir, dtype=torch.float16), _tokenizer(base_dir)

    def reference(texts, max_length=9, batch_size=8):  # Promptriever.create_batch_dict + encode
        out = []
        with torch.no_grad():
            for i in range(0, len(texts), batch_size):
                batch = tok(texts[i:i + batch_size], max_length=max_length - 1, return_token_type_ids=False,
                            return_attention_mask=False, padding=False, truncation=True)
                batch["input_ids"] = [ids + [tok.eos_token_id] for ids in batch["input_ids"]]
                batch = tok.pad(batch, padding=True, pad_to_multiple_of=8, return_attention_mask=True,
                                return_tensors="pt")
                hidden = model(**batch).last_hidden_state.to(torch.float32)
                reps = hidden[torch.arange(hidden.shape[0]), batch["attention_mask"].sum(dim=1) - 1]
                out.append(torch.nn.functional.normalize(reps, p=2, dim=-1))
        return torch.cat(out).numpy()

    # embed_query(query) = embed_documents([query]): is_query stays False, so queries get the passage prefix too
    q_texts = ["passage:  " + (f"{q.query} {q.instruction}" if q.instruction else q.query)
               for q in benchmark.queries.values()]
    d_texts = ["passage:  " + (f"{d.title} {d.text}" if d.title else d.text) for d in benchmark.corpus]
    np.testing.assert_allclose(queries.matrix, reference(q_texts), atol=2e-3)
    np.testing.assert_allclose(docs.matrix, reference(d_texts), atol=2e-3)
    assert any(len(tok(t)["input_ids"]) > 9 for t in d_texts)  # truncation (max_length - 1, then EOS) is exercised


def test_a_warm_rerun_loads_no_model_and_runs_it_zero_times(tiny_llama, benchmark, tmp_path, monkeypatch):
    import transformers

    from instir.retrieval import retrieve

    card = _repllama_card(tiny_llama, "RepLLaMA-7B")
    first = build_system(card, cache_dir=tmp_path / "cache", progress=False)
    run = retrieve(benchmark, first, k=3)
    assert first.inner.forward_calls > 0
    loads = []
    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", lambda *a, **k: loads.append(a) or 1 / 0)
    again = build_system(card, cache_dir=tmp_path / "cache", progress=False)
    rerun = retrieve(benchmark, again, k=3)
    assert again.inner.forward_calls == 0 and loads == []
    assert rerun.df.equals(run.df)
    assert rerun.meta["system"]["name"] == "RepLLaMA-7B"
    assert rerun.meta["system"]["pooling"] == "batch-last"


@pytest.mark.parametrize("rewritten", ["adapter", "base model"])
def test_a_rewritten_adapter_or_base_model_is_loaded_and_fingerprinted_again(tiny_llama, tmp_path, rewritten):
    """The fingerprint remembered under the model's files is not used once a file of the adapter or of its base
    changed."""
    import shutil

    base_dir, adapter_dir = tiny_llama
    if rewritten == "adapter":
        adapter = shutil.copytree(adapter_dir, tmp_path / "adapter")
        card = dataclasses.replace(_repllama_card(tiny_llama, "RepLLaMA-7B"), model=str(adapter))
        config = adapter / "adapter_config.json"
    else:
        base = shutil.copytree(base_dir, tmp_path / "base")
        card = dataclasses.replace(_repllama_card(tiny_llama, "RepLLaMA-7B"), base_model=str(base))
        config = base / "config.json"
    first = build_system(card, cache_dir=tmp_path / "cache", progress=False).inner
    fingerprint = first.fingerprint()
    config.write_text(config.read_text())  # the same bytes, a new modification time: described again
    again = build_system(card, cache_dir=tmp_path / "cache", progress=False).inner
    assert again.fingerprint() == fingerprint and again._model is not None


def _last_token_alone(model, tok, texts, max_length=512):
    """Each text encoded alone (no padding at all), its last token's hidden state: what last-token pooling
    must give whatever the padding side."""
    out = []
    with torch.no_grad():
        for text in texts:
            enc = tok([text], max_length=max_length, truncation=True, return_tensors="pt")
            out.append(model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"]).last_hidden_state[0, -1])
    return torch.stack(out).numpy()


def _plain_retriever(tiny_llama, tmp_path, **options):
    from instir.systems.decoder import DecoderRetriever

    base_dir, adapter_dir = tiny_llama
    return DecoderRetriever(str(adapter_dir), base_model=str(base_dir), cache_dir=tmp_path, progress=False,
                            **options)


TEXTS = ["what is saffron", "keep the wine cabinet away from the oven and sunlight", "volcanoes erupt"]


def test_last_token_pooling_with_left_padding_reads_each_texts_last_real_token(tiny_llama, tmp_path):
    retriever = _plain_retriever(tiny_llama, tmp_path, padding_side="left", normalize=False)
    expected = _last_token_alone(_merged(tiny_llama[1]), _tokenizer(tiny_llama[0]), TEXTS)
    np.testing.assert_allclose(retriever.encode(TEXTS, 512), expected, atol=1e-4)


def test_normalize_false_keeps_the_pooled_vectors_as_they_are(tiny_llama, tmp_path):
    got = _plain_retriever(tiny_llama, tmp_path, normalize=False).encode(TEXTS, 512)
    expected = _last_token_alone(_merged(tiny_llama[1]), _tokenizer(tiny_llama[0]), TEXTS)
    np.testing.assert_allclose(got, expected, atol=1e-4)
    assert not np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-3)


def test_last_token_pooling_truncates_at_max_length_and_the_tokenizer_is_the_base_models(tiny_llama, tmp_path):
    retriever = _plain_retriever(tiny_llama, tmp_path)  # no tokenizer given: the base model's (the adapter has none)
    expected = _last_token_alone(_merged(tiny_llama[1]), _tokenizer(tiny_llama[0]), TEXTS, max_length=4)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(retriever.encode(TEXTS, 4), expected, atol=1e-4)


def test_a_merged_adapter_and_full_weights_run_in_the_dtype_asked(tiny_llama, tmp_path):
    from instir.systems.decoder import DecoderRetriever

    merged = _plain_retriever(tiny_llama, tmp_path, dtype="float16")
    full = DecoderRetriever(str(tiny_llama[0]), dtype="float16", cache_dir=tmp_path, progress=False)
    for retriever in (merged, full):
        assert {p.dtype for p in retriever.model.parameters()} == {torch.float16}


def test_vectors_cached_under_one_setting_are_not_served_for_another(tiny_llama, tmp_path):
    model, tok = _merged(tiny_llama[1]), _tokenizer(tiny_llama[0])
    raw = _last_token_alone(model, tok, TEXTS)
    short = _last_token_alone(model, tok, TEXTS, max_length=4)
    _plain_retriever(tiny_llama, tmp_path).embed_queries(TEXTS)  # normalised, 512 tokens: cached first
    got = _plain_retriever(tiny_llama, tmp_path, normalize=False).embed_queries(TEXTS).matrix
    np.testing.assert_allclose(got, raw, atol=1e-4)
    got = _plain_retriever(tiny_llama, tmp_path, query_max_length=4).embed_queries(TEXTS).matrix
    np.testing.assert_allclose(got, short / np.linalg.norm(short, axis=1, keepdims=True), atol=1e-4)


def test_a_card_with_normalize_false_gives_vectors_as_pooled(tiny_llama, tmp_path):
    card = dataclasses.replace(_repllama_card(tiny_llama, "RepLLaMA-7B (fixed)"), normalize=False)
    inner = build_system(card, cache_dir=tmp_path, progress=False).inner
    expected = _last_token_alone(_merged(tiny_llama[1]), _tokenizer(tiny_llama[0]), TEXTS)
    np.testing.assert_allclose(inner.encode(TEXTS, 512), expected, atol=1e-4)


def test_a_search_over_documents_encoded_longest_first_scores_each_document_under_its_own_id(
        tiny_llama, benchmark, tmp_path):
    from instir.retrieval import retrieve

    card = _repllama_card(tiny_llama, "RepLLaMA-7B")
    assert card.params["doc_order"] == "length-desc"
    run = retrieve(benchmark, build_system(card, cache_dir=tmp_path, progress=False), k=6)
    model, tok = _merged(tiny_llama[1]), _tokenizer(tiny_llama[0])
    q_texts = [(f"{q.instruction} [SEP] {q.query}" if q.instruction else q.query) + "</s>"
               for q in benchmark.queries.values()]
    ordered = _beir_corpus_order(benchmark)
    d_texts = [(d.title + " " + d.text if d.title else d.text) + "</s>" for d in ordered]
    queries = _repllama_reference(model, tok, q_texts, 4, 512, True)
    docs = dict(zip([d.id for d in ordered], _repllama_reference(model, tok, d_texts, 4, 512, True)))
    assert [d.id for d in ordered] != benchmark.corpus.ids()  # the encoding order is not the corpus order
    for row, qid in enumerate(benchmark.queries):
        got = run.df[run.df["qid"] == qid]
        assert len(got) == len(docs)
        for docid, score in zip(got["docid"], got["score"]):
            assert score == pytest.approx(float(queries[row] @ docs[docid]), abs=1e-4)


def test_a_cards_padding_side_reaches_the_tokenizer_and_unknown_settings_are_refused(tiny_llama, tmp_path):
    from instir.systems.decoder import DecoderRetriever

    card = _repllama_card(tiny_llama, "RepLLaMA-7B (fixed)")
    card = dataclasses.replace(card, params={**card.params, "padding_side": "left"})
    inner = build_system(card, cache_dir=tmp_path, progress=False).inner
    assert inner.tokenizer.padding_side == "left"
    expected = _last_token_alone(_merged(tiny_llama[1]), _tokenizer(tiny_llama[0]), TEXTS)
    np.testing.assert_allclose(inner.encode(TEXTS, 512), expected / np.linalg.norm(expected, axis=1, keepdims=True),
                               atol=1e-4)
    with pytest.raises(ValueError, match="padding_side must be 'left' or 'right', got 'middle'"):
        DecoderRetriever("m", padding_side="middle")
    with pytest.raises(ValueError, match="unknown doc_order 'random'"):
        DecoderRetriever("m", doc_order="random")


def test_full_weights_at_a_pinned_revision_load_that_revisions_tokenizer(tiny_llama, tmp_path, monkeypatch):
    """A model pinned at a commit, downloaded at that commit alone (no ``main`` in the cache), encodes
    offline with its own tokenizer, as its weights are loaded."""
    import shutil

    from huggingface_hub import constants
    from transformers import AutoModel

    from instir.systems.decoder import DecoderRetriever

    base_dir, commit = tiny_llama[0], "0123456789abcdef0123456789abcdef01234567"
    shutil.copytree(base_dir, tmp_path / "hub" / "models--org--tiny" / "snapshots" / commit)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    retriever = DecoderRetriever("org/tiny", revision=commit, normalize=False, cache_dir=tmp_path / "emb",
                                 progress=False)
    expected = _last_token_alone(AutoModel.from_pretrained(base_dir).eval(), _tokenizer(base_dir), TEXTS)
    np.testing.assert_allclose(retriever.encode(TEXTS, 512), expected, atol=1e-4)
