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


def test_a_rewritten_adapter_is_loaded_and_fingerprinted_again(tiny_llama, tmp_path):
    """The fingerprint remembered under the adapter's files is not used once a file of it changed."""
    import shutil

    base_dir, adapter_dir = tiny_llama
    adapter = shutil.copytree(adapter_dir, tmp_path / "adapter")
    card = dataclasses.replace(_repllama_card(tiny_llama, "RepLLaMA-7B"), model=str(adapter))
    first = build_system(card, cache_dir=tmp_path / "cache", progress=False).inner
    fingerprint = first.fingerprint()
    config = adapter / "adapter_config.json"
    config.write_text(config.read_text())  # the same bytes, a new modification time: described again
    again = build_system(card, cache_dir=tmp_path / "cache", progress=False).inner
    assert again.fingerprint() == fingerprint and again._model is not None
