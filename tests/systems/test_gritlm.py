"""The gritlm adapter against an independent computation written here step by step from the
code IFIR runs: IFIR ``src/utils/inst_llms.py`` ``GritLM`` (prompts, max_length 2048) calling
ContextualAI/gritlm ``gritlm/gritlm.py`` ``GritLM.encode`` / ``GritLM.pooling`` — with a tiny
random Mistral in GritLM-7B's layout."""

import dataclasses
import json

import numpy as np
import torch
from says import says

from instir.formatting import get_template
from instir.retrieval import retrieve
from instir.retrieval.fusion import HybridRetriever
from instir.retrieval.model_files import hub_command
from instir.systems import build_system, get_card, load_cards
from instir.systems.gritlm import GritLMRetriever, split_instruction

#: IFIR GritLM.gritlm_instruction(inst) for queries and gritlm_instruction("") for documents
IFIR_QUERY_INSTRUCTION = "<|user|>\n" + "Give a query, retrieval relevant passages" + "\n<|embed|>\n"
IFIR_DOC_INSTRUCTION = "<|embed|>\n"


def _card(model_dir, **changes):
    """The GritLM-7B card on the tiny model, in float32 (CPU)."""
    return dataclasses.replace(get_card("GritLM-7B"), model=str(model_dir), dtype="float32", **changes)


def _gritlm_encode(model_dir, sentences, instruction, max_length=2048, causal=False, embed_eos="", normalized=True):
    """GritLM.encode(sentences, instruction=..., max_length=...) with pooling_method='mean',
    normalized=True, attn='bbcc' (``causal``: 'cccc'), ``embed_eos``, one batch, step by step."""
    from transformers import AutoModel, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir, padding_side="right")  # GritLM.__init__
    if not tok.pad_token and tok.eos_token:
        tok.pad_token = tok.eos_token
    model = AutoModel.from_pretrained(model_dir).eval()  # mode='embedding'
    inputs = tok([instruction + s + embed_eos for s in sentences], padding=True, truncation=True, return_tensors="pt",
                 max_length=max_length, add_special_tokens=True)
    mask = inputs["attention_mask"]
    if causal:
        attention = mask
    else:  # is_causal=False: modeling_gritlm7b's _prepare_4d_attention_mask, padding only
        attention = torch.zeros(mask.shape[0], 1, mask.shape[1], mask.shape[1])
        attention = attention.masked_fill(mask[:, None, None, :] == 0, torch.finfo(torch.float32).min)
    with torch.no_grad():
        last_hidden_state = model(input_ids=inputs["input_ids"], attention_mask=attention)[0]
    if instruction:  # remove instruction tokens from the embeddings by masking them
        n = len(tok(instruction, padding=False, truncation=True, max_length=max_length,
                    add_special_tokens=True)["input_ids"])
        mask = mask.clone()
        mask[:, :n] = 0
    s = torch.sum(last_hidden_state * mask.unsqueeze(-1).float(), dim=1)  # GritLM.pooling, 'mean'
    d = mask.sum(dim=1, keepdim=True).float()
    return (torch.nn.functional.normalize(s / d, dim=-1) if normalized else s / d).numpy()


def _ifir_query_texts(benchmark):
    """What IFIR passes to embed_query: 'query instruction' (the query alone without one)."""
    return [f"{q.query} {q.instruction}" if q.instruction else q.query for q in benchmark.queries.values()]


def test_gritlm_query_and_document_vectors_equal_gritlm_encode(tiny_mistral, benchmark, tmp_path):
    system = build_system(_card(tiny_mistral, params={"batch_size": 2}), cache_dir=tmp_path, progress=False)
    template = get_template("ifir-gritlm")
    queries = system.inner.embed_queries(template.format_queries(benchmark.queries.values())).matrix
    docs, doc_ids = system.inner.embed_corpus(benchmark.corpus, template, "fiqa")

    expected_q = _gritlm_encode(tiny_mistral, _ifir_query_texts(benchmark), IFIR_QUERY_INSTRUCTION)
    by_id = benchmark.corpus.get(doc_ids)
    doc_texts = [get_template("ifir").format_doc(by_id[i], "fiqa") for i in doc_ids]
    expected_d = _gritlm_encode(tiny_mistral, doc_texts, IFIR_DOC_INSTRUCTION)
    np.testing.assert_allclose(queries, expected_q, atol=1e-5)
    np.testing.assert_allclose(docs.matrix, expected_d, atol=1e-5)
    assert system.inner.forward_calls == 3 + 3  # five queries and six documents in batches of two


def test_gritlm_attention_is_bidirectional(tiny_mistral, benchmark, tmp_path):
    system = build_system(_card(tiny_mistral), cache_dir=tmp_path, progress=False)
    texts = [get_template("ifir").format_doc(doc, "fiqa") for doc in benchmark.corpus]
    got = system.inner.encode([IFIR_DOC_INSTRUCTION + t for t in texts], 2048)
    causal = _gritlm_encode(tiny_mistral, texts, IFIR_DOC_INSTRUCTION, causal=True)
    assert np.abs(got - causal).max() > 1e-2  # a causal forward pass gives other vectors
    causal_card = _card(tiny_mistral, params={"attn": "cccc"})
    causal_system = build_system(causal_card, cache_dir=tmp_path, progress=False)
    np.testing.assert_allclose(causal_system.inner.encode([IFIR_DOC_INSTRUCTION + t for t in texts], 2048), causal,
                               atol=1e-5)


def test_instruction_tokens_are_left_out_of_the_mean(tiny_mistral, tmp_path):
    """With every attention output projection zeroed, a token's final state depends on that
    token alone; the instruction can then reach the vector only by being averaged in."""
    from transformers import AutoModel, AutoTokenizer

    blind = tmp_path / "blind"
    model = AutoModel.from_pretrained(tiny_mistral)
    for layer in model.layers:
        torch.nn.init.zeros_(layer.self_attn.o_proj.weight)
    model.save_pretrained(blind)
    AutoTokenizer.from_pretrained(tiny_mistral).save_pretrained(blind)
    system = build_system(_card(blind), cache_dir=tmp_path, progress=False).inner
    sentence = "what is saffron I cook paella"
    other = "<|user|>\nan other instruction\n<|embed|>\n"
    with_ifir, with_other, bare = system.encode([IFIR_QUERY_INSTRUCTION + sentence, other + sentence,
                                                 sentence], 2048)
    np.testing.assert_allclose(with_ifir, with_other, atol=1e-6)
    assert np.abs(with_ifir - bare).max() > 1e-3  # without the marker, BOS is averaged in


def test_split_instruction_ends_at_the_first_embed_marker():
    assert split_instruction(IFIR_QUERY_INSTRUCTION + "q <|embed|>\n x") == (IFIR_QUERY_INSTRUCTION,
                                                                             "q <|embed|>\n x")
    assert split_instruction("plain text") == ("", "plain text")


def test_gritlm_card_follows_ifir_code():
    card = get_card("GritLM-7B")
    template = get_template(card.template)
    assert template.query.startswith(IFIR_QUERY_INSTRUCTION) and template.bare_query.startswith(
        IFIR_QUERY_INSTRUCTION) and template.doc == IFIR_DOC_INSTRUCTION + "{text}"
    assert (card.query_max_length, card.doc_max_length) == (2048, 2048)  # encode(max_length=2048)
    assert (card.pooling, card.dtype, card.model) == ("mean", "float16", "GritLM/GritLM-7B")
    system = build_system(card, progress=False)  # lazy: no weights needed
    inner = system.inner
    assert isinstance(inner, GritLMRetriever)
    assert (inner.attn, inner.embed_eos, inner.instruction_end, inner.batch_size) == ("bbcc", "", "<|embed|>\n", 8)
    assert inner.bidirectional and inner.normalize and inner.padding_side == "right"
    assert (inner.query_max_length, inner.doc_max_length) == (card.query_max_length, card.doc_max_length)
    formatted = template.format_queries([next(iter(_toy_queries()))])[0]
    expected = (IFIR_QUERY_INSTRUCTION, "what is saffron I cook paella")
    assert split_instruction(formatted, inner.instruction_end) == expected


def _toy_queries():
    from instir.benchmarks.types import Query

    return [Query("q1", "what is saffron", "I cook paella", subset="fiqa")]


def test_gritlm_hybrid_card_builds_both_parts():
    system = build_system("GritLM-7B + BM25 (hybrid)", cards=load_cards(), progress=False)
    assert isinstance(system.inner, HybridRetriever)
    assert isinstance(system.inner.dense.inner, GritLMRetriever)


def test_cli_retrieves_with_gritlm_cards_and_a_warm_rerun_encodes_nothing(tiny_mistral, benchmark, tmp_path, capsys):
    from instir.cli import main

    cards = tmp_path / "cards.toml"
    cards.write_text(
        '[[card]]\nname = "GritLM tiny"\npaper = "user"\nkind = "retriever"\nadapter = "gritlm"\n'
        f'model = {json.dumps(str(tiny_mistral))}\npooling = "mean"\nquery_max_length = 2048\n'
        'doc_max_length = 2048\nsimilarity = "cosine"\ntemplate = "ifir-gritlm"\n', encoding="utf-8")
    out = tmp_path / "runs"
    assert main(["retrieve", "--system", "GritLM tiny", "--cards", str(cards), "--benchmark", "ifir-sample/fiqa",
                 "--k", "5", "--out", str(out)]) == 0
    sidecar = json.loads(next(out.glob("*.json")).read_text())
    assert sidecar["system"]["adapter"] == "gritlm" and sidecar["template"]["name"] == "ifir-gritlm"
    assert main(["retrieve", "--system", "GritLM-7B", "--benchmark", "ifir-sample/fiqa", "--out", str(out)]) == 2
    says(capsys.readouterr().err.strip().splitlines()[-1], "GritLM/GritLM-7B", "not in the Hugging Face cache",
         hub_command("download", "GritLM/GritLM-7B"))

    card = get_card("GritLM tiny", load_cards([cards]))
    first = build_system(card, cache_dir=tmp_path / "emb", progress=False)
    retrieve(benchmark, first, k=3)
    again = build_system(card, cache_dir=tmp_path / "emb", progress=False)
    run = retrieve(benchmark, again, k=3)
    assert first.inner.forward_calls > 0 and again.inner.forward_calls == 0
    assert run.df.equals(retrieve(benchmark, first, k=3).df)


def test_embed_eos_is_appended_after_each_sentence_as_gritlm_encode_does(tiny_mistral, benchmark, tmp_path):
    inner = build_system(_card(tiny_mistral, params={"embed_eos": "</s>"}), cache_dir=tmp_path, progress=False).inner
    texts = [get_template("ifir").format_doc(doc, "fiqa") for doc in benchmark.corpus]
    got = inner.encode([IFIR_DOC_INSTRUCTION + t for t in texts], 2048)
    expected = _gritlm_encode(tiny_mistral, texts, IFIR_DOC_INSTRUCTION, embed_eos="</s>")
    np.testing.assert_allclose(got, expected, atol=1e-5)
    assert np.abs(expected - _gritlm_encode(tiny_mistral, texts, IFIR_DOC_INSTRUCTION)).max() > 1e-3


def test_every_bb_attention_mode_is_bidirectional_and_every_cc_mode_causal(tiny_mistral, benchmark, tmp_path):
    texts = [get_template("ifir").format_doc(doc, "fiqa") for doc in benchmark.corpus]
    for attn, causal in (("bb", False), ("cc", True)):
        inner = build_system(_card(tiny_mistral, params={"attn": attn}), cache_dir=tmp_path, progress=False).inner
        np.testing.assert_allclose(inner.encode([IFIR_DOC_INSTRUCTION + t for t in texts], 2048),
                                   _gritlm_encode(tiny_mistral, texts, IFIR_DOC_INSTRUCTION, causal=causal),
                                   atol=1e-5)


def test_an_unknown_attention_mode_is_refused_naming_the_known_ones():
    import pytest

    with pytest.raises(ValueError, match="unknown GritLM attn 'bc'; use one of bbcc, cccc, bb, cc"):
        GritLMRetriever("GritLM/GritLM-7B", attn="bc")


def test_a_text_with_nothing_after_its_instruction_pools_to_a_zero_vector_not_nan(tiny_mistral, tmp_path):
    inner = build_system(_card(tiny_mistral), cache_dir=tmp_path, progress=False).inner
    empty, saffron = inner.encode([IFIR_DOC_INSTRUCTION, IFIR_DOC_INSTRUCTION + "saffron"], 2048)
    np.testing.assert_array_equal(empty, np.zeros_like(empty))
    np.testing.assert_allclose(saffron, _gritlm_encode(tiny_mistral, ["saffron"], IFIR_DOC_INSTRUCTION)[0], atol=1e-5)


def test_a_cards_instruction_end_and_attn_reach_the_encoder_and_key_the_cache(tiny_mistral, tmp_path):
    text = IFIR_QUERY_INSTRUCTION + "what is saffron"
    first = build_system(_card(tiny_mistral), cache_dir=tmp_path, progress=False).inner
    np.testing.assert_allclose(first.embed_queries([text]).matrix,
                               _gritlm_encode(tiny_mistral, ["what is saffron"], IFIR_QUERY_INSTRUCTION), atol=1e-5)
    user = "<|user|>\n"  # the instruction ends at the first "<|user|>\n": the rest of the prompt is averaged in
    other_end = build_system(_card(tiny_mistral, params={"instruction_end": user}), cache_dir=tmp_path,
                             progress=False).inner
    np.testing.assert_allclose(other_end.embed_queries([text]).matrix,
                               _gritlm_encode(tiny_mistral, [text[len(user):]], user), atol=1e-5)
    causal = build_system(_card(tiny_mistral, params={"attn": "cccc"}), cache_dir=tmp_path, progress=False).inner
    np.testing.assert_allclose(causal.embed_queries([text]).matrix,
                               _gritlm_encode(tiny_mistral, ["what is saffron"], IFIR_QUERY_INSTRUCTION, causal=True),
                               atol=1e-5)


def test_a_card_with_normalize_false_gives_the_mean_as_it_is_and_the_name_is_the_models_last_path_part(
        tiny_mistral, tmp_path):
    inner = build_system(_card(tiny_mistral, normalize=False), cache_dir=tmp_path, progress=False).inner
    np.testing.assert_allclose(inner.encode([IFIR_DOC_INSTRUCTION + "saffron paella"], 2048),
                               _gritlm_encode(tiny_mistral, ["saffron paella"], IFIR_DOC_INSTRUCTION, normalized=False),
                               atol=1e-5)
    assert inner.name == "gritlm-" + tiny_mistral.name
