"""Each built-in card's recipe against facts read in the authors' code (file and function
named at each check): kaistAI/InstructIR ``eval/`` and SighingSnow/IFIR ``src/`` (FollowIR's
cards: test_followir_cards.py)."""

import dataclasses

import pytest

from instir.benchmarks import catalog
from instir.formatting import get_template
from instir.retrieval.lexical import bm25_defaults
from instir.systems import get_card, load_cards

CARDS = load_cards()


def _card(name):
    return get_card(name, CARDS)


def test_every_card_names_its_source_and_uses_its_papers_templates():
    for card in CARDS.values():
        assert card.source, card.name
        if card.template:
            # its paper's own templates, or one its family's spec names as the authors' (FollowIR: MTEB's join)
            spec = set(catalog.family(card.paper).templates.values()) if card.paper in catalog.families() else set()
            assert card.template.startswith(card.paper) or card.template in spec, (card.name, card.template)


def test_repllama_follows_instructir_dense_encoder():
    # eval_instructir_dense.py load_model 'llama' branch; beir_utils.py DenseEncoder_w_Decoder_Model
    card = _card("RepLLaMA-7B")
    assert (card.adapter, card.model, card.base_model) == (
        "peft-decoder", "castorini/repllama-v1-7b-lora-passage", "meta-llama/Llama-2-7b-hf")
    assert card.pooling == "batch-last"  # last_hidden_state[:, -1]
    assert (card.query_max_length, card.doc_max_length, card.dtype) == (512, 512, "float32")
    assert (card.similarity, card.normalize) == ("dot", True)
    assert card.params["batch_size"] == 4 and card.params["padding_side"] == "right"  # eval_dense_models.sh BSZ=4
    assert card.params["doc_order"] == "length-desc"  # BEIR DenseRetrievalExactSearch sorts the corpus
    template = get_template(card.template)
    assert template.query == "{instruction} [SEP] {query}</s>" and template.doc == "{text}</s>"
    assert "query:" not in template.query and "passage:" not in template.doc  # no prefixes in InstructIR


def test_fixed_repllama_differs_only_in_pooling():
    quirk, fixed = _card("RepLLaMA-7B"), _card("RepLLaMA-7B (fixed)")
    assert fixed.variant_of == quirk.name and fixed.pooling == "last-token"
    same = {f.name for f in dataclasses.fields(quirk)} - {"name", "pooling", "variant_of", "source"}
    assert all(getattr(quirk, f) == getattr(fixed, f) for f in same)


def test_promptriever_follows_ifir_inst_llms():
    # inst_llms.py Promptriever: get_model, create_batch_dict, encode, embed_documents
    card = _card("Promptriever-7B")
    assert (card.model, card.base_model) == ("samaya-ai/promptriever-llama2-7b-v1", "meta-llama/Llama-2-7b-hf")
    assert card.pooling == "eos" and card.dtype == "float16"  # EOS appended; model.half()
    assert (card.query_max_length, card.doc_max_length) == (1024, 1024)  # model.config.max_length = 1024
    assert card.params["pad_to_multiple_of"] == 8 and card.params["padding_side"] == "right"
    assert card.similarity == "cosine" and card.normalize is True
    template = get_template(card.template)
    # embed_query sends the query through embed_documents without is_query: 'passage:  ' on queries too
    assert template.query.startswith("passage:  ") and template.doc.startswith("passage:  ")


def test_e5_mistral_prompts_per_paper():
    # InstructIR beir_utils.py DenseEncoder_w_mistral; IFIR inst_llms.py E5.detailed_query on queries and docs
    instructir, ifir = _card("E5-mistral-7b-instruct"), _card("E5-mistral-7B")
    assert get_template(instructir.template).query == "Instruct: {instruction}\nQuery: {query}"
    prompt = "Instruct: Give a query, retrieval relevant passages\nQuery: "
    assert get_template(ifir.template).query.startswith(prompt) and get_template(ifir.template).doc.startswith(prompt)
    assert (ifir.dtype, ifir.query_max_length, ifir.normalize) == ("float16", 4096, True)


def test_hybrid_rows_fuse_with_ifir_weights():
    # constant.py hybrid_search: k = 60, dense 1.0, BM25 0.3
    hybrids = [c for c in CARDS.values() if c.adapter == "hybrid"]
    assert sorted(c.params["dense"] for c in hybrids) == [
        "GTR-XL (IFIR)", "GritLM-7B", "Instructor-XL (IFIR)", "Promptriever-7B"]
    for card in hybrids:
        assert list(card.params["weights"]) == [1.0, 0.3] and card.params["rrf_k"] == 60
        assert card.params["lexical"] == "BM25 (IFIR)"
        assert card.template == _card(card.params["dense"]).template


def test_bm25_cards_hold_each_papers_engine_defaults():
    ifir, card = bm25_defaults("ifir"), _card("BM25 (IFIR)")  # Elasticsearch's semantics on Lucene
    assert (card.adapter, ifir["engine"]) == ("paper-bm25", "elasticsearch")
    assert (card.params["k1"], card.params["b"]) == (ifir["k1"], ifir["b"])
    # InstructIR's row is Anserini itself, with the defaults the bm25s path imitates (Porter, Lucene's stop words)
    instructir, card = bm25_defaults("instructir"), _card("BM25 (InstructIR)")
    assert (card.adapter, instructir["engine"]) == ("paper-bm25", "anserini")
    assert (card.params["k1"], card.params["b"], instructir["stemmer"], instructir["stopwords"]) == (
        instructir["k1"], instructir["b"], "porter", "lucene")


def test_ifir_dense_cards_score_by_cosine_and_plain_encoders_window():
    # constant.py get_es: ElasticsearchStore(distance_strategy="COSINE"); embeddings.py segment_text 512/384
    for card in CARDS.values():
        if card.paper == "ifir" and card.adapter not in ("bm25", "paper-bm25", "hybrid"):
            assert card.similarity == "cosine", card.name
    for name in ("Contriever", "ColBERT (IFIR, mean-pooled)", "GTR-XL (IFIR)", "Instructor-XL (IFIR)",
                 "OpenAI-v3-small"):
        assert _card(name).windowing == "ifir", name
    colbert = _card("ColBERT (IFIR, mean-pooled)")
    assert (colbert.adapter, colbert.model, colbert.pooling) == ("hf-mean-pool", "colbert-ir/colbertv2.0", "mean")
    assert _card("ColBERTv2").adapter == "colbert-late"


def test_instructir_contriever_is_unnormalised_mean_pooling_by_dot():
    # peft_utils.py BertRetriever (pooling 'average', normalize=False); eval_instructir_dense.py score 'dot'
    for name in ("Contriever-msmarco", "TART-dual"):
        card = _card(name)
        assert (card.adapter, card.pooling, card.normalize, card.similarity) == ("hf-mean-pool", "mean", False, "dot")


@pytest.mark.parametrize("name,query_format,dtype", [
    ("monoT5-base", "{query} {instruction}", "float32"),
    ("monoBERT", "{query} {instruction}", "float32"),
    ("Llama-2-7b", "{query}? {instruction}", "float32"),
    ("Mistral-7B-Instruct-v0.2", "{query}? {instruction}", "float16"),
    ("FollowIR-7B", "{query}? {instruction}", "float16"),
])
def test_rerankers_rerank_bm25_top_100_with_the_authors_query_text(name, query_format, dtype):
    # eval_instructir_bm25_rerank.py (rerank_n 100 of BM25); rerankers.py *Reranker.rerank
    card = _card(name)
    assert card.kind == "reranker" and card.params["first_stage"] == "BM25 (InstructIR)"
    assert card.params["depth"] == 100 and card.params["query_format"] == query_format and card.dtype == dtype


def test_monot5_prompt_is_the_authors():
    assert _card("monoT5-3b").params["prompt"] == "Query: {query} Document: {text} Relevant:"
    assert _card("monoT5-3b").model == "castorini/monot5-3b-msmarco-10k"


MTEB_CARDS = ("RepLLaMA-7B (MTEB)", "Promptriever-7B (MTEB)", "E5-mistral-7b-instruct (MTEB)", "GritLM-7B (MTEB)",
              "FollowIR-7B (MTEB)")


def test_mteb_cards_are_labelled_variants_of_the_paper_cards():
    assert sorted(c.name for c in CARDS.values() if c.paper == "mteb") == sorted(MTEB_CARDS)
    for name in MTEB_CARDS:
        card = _card(name)
        assert card.source.startswith("MTEB-comparable, not paper-comparable.") and card.variant_of
        assert card.model == _card(card.variant_of).model and card.kind == _card(card.variant_of).kind
        assert card.template.startswith("mteb-") if card.kind == "retriever" else not card.template  # rerankers: prompt
    assert get_card("RepLLaMA-7B", CARDS).name == "RepLLaMA-7B"  # the default stays the authors' recipe


def test_mteb_repllama_and_promptriever_follow_mtebs_repllama_wrapper():
    # mteb repllama_models.py RepLLaMAModel: model_max_length 512, truncate at 511 + EOS id, pad to a
    # multiple of 8, pooled at attention_mask.sum - 1; model_prompts; bfloat16 (ModelMeta loader_kwargs)
    for name, paper_card in (("RepLLaMA-7B (MTEB)", "RepLLaMA-7B"), ("Promptriever-7B (MTEB)", "Promptriever-7B")):
        card, paper = _card(name), _card(paper_card)
        assert (card.pooling, card.dtype, card.query_max_length, card.doc_max_length) == ("eos", "bfloat16", 512, 512)
        assert card.params["pad_to_multiple_of"] == 8 and card.base_model == paper.base_model
        template = get_template(card.template)
        assert (template.query, template.doc) == ("query:  {query} {instruction}", "passage:  {text}")
    assert _card("RepLLaMA-7B").pooling == "batch-last" and _card("Promptriever-7B").query_max_length == 1024


def test_mteb_e5_and_gritlm_carry_mtebs_generic_retrieval_prompt():
    # AbsTaskRetrieval.abstask_prompt, through AbsEncoder.get_instruction; e5: apply_instruction_to_passages=False
    e5 = get_template(_card("E5-mistral-7b-instruct (MTEB)").template)
    assert e5.query == "Instruct: Retrieve text based on user query.\nQuery: {query} {instruction}"
    assert e5.doc == "{text}"
    grit = get_template(_card("GritLM-7B (MTEB)").template)
    prompt = "<|user|>\nRetrieve text based on user query.\n<|embed|>\n"
    assert grit.query == prompt + "{query} {instruction}" and grit.doc == prompt + "{text}"
    assert _card("GritLM-7B (MTEB)").params["instruction_end"] == "<|embed|>\n"  # include_prompt=False
    assert (_card("E5-mistral-7b-instruct (MTEB)").revision, _card("GritLM-7B (MTEB)").revision) == (
        "07163b72af1488142a360786df853f237b1a3ca1", "13f00a0e36500c80ce12870ea513846a066004af")
