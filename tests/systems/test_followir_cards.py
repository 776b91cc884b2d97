"""FollowIR's system cards (instir/systems/cards/followir.toml) against facts read in the
authors' code (orionw/FollowIR @61ad33e, file and function named at each check) and MTEB 2.26,
and the decoder reranker cards run on tiny local models against an independent step-by-step
computation following ``LlamaReranker.predict`` (orionw/FollowIR models/rerankers/reranker_models.py;
the same in mteb 2.26 mteb/models/model_implementations/rerankers_monot5_based.py)."""

import dataclasses

import pytest

from instir.errors import UsageError
from instir.retrieval.lexical import bm25_defaults
from instir.systems import build_system, get_card, load_cards
from instir.systems.coverage import coverage_matrix
from instir.systems.registry import system_status

CARDS = load_cards()
FOLLOWIR = {name: card for name, card in CARDS.items() if card.paper == "followir"}
RERANKERS = [c for c in FOLLOWIR.values() if c.kind == "reranker" and c.adapter != "unavailable"]

# the authors' prompt strings, written out again from reranker_models.py
GOOGLER = "You are an expert Google searcher, whose job is to determine if the following document is relevant to " \
          "the query (true/false)."
FOLLOWIR_7B = "<s> [INST] " + GOOGLER + """ Answer using only one word, one of those two choices.

Query: {query}
Document: {text}
Relevant (only output one word, either "true" or "false"): [/INST] """
MISTRAL = "<s>[INST] " + GOOGLER + """
Query: {query}
Document: {text}
Relevant (either "true" or "false"): [/INST]"""
LLAMA_CHAT = """<s>[INST] <<SYS>>
You are an expert at finding information. Determine if the following document is relevant to the query (true/false).
<</SYS>>Query: {query}
Document: {text}
Relevant: [/INST]"""
GRITLM = ("<|user|>\nRank the passage based on its relevance to the search query (true/false) {query}.\n\n{text}\n\n"
          "Search Query: {query}.\n\n"
          "Determine the passage's relevance to the search query."
          "Only respond with true or false, do not say any other word or explain.\n<|assistant|>\n")
FLAN_T5 = """Is the following passage relevant to the query?
Query: {query}
Passage: {text}"""


def test_every_table_2_row_runs_with_a_followir_card():
    rows = coverage_matrix().query("paper == 'followir'")
    assert len(rows) == 24 and set(rows["card"]) <= set(FOLLOWIR)
    assert "paper's card of this model" not in " ".join(rows["reason"])  # none borrowed from another paper
    by_model = rows.set_index("model")["card"]
    # rows without a Hugging Face id meet the card of that printed name
    assert by_model["OpenAI v3 Large"] == "OpenAI v3 Large"
    assert by_model["TART-Contriever"] == "TART-Contriever (FollowIR)"
    assert by_model["GritLM-Reranker"] == "GritLM-Reranker"
    assert by_model["GritLM-7B"] == "GritLM-7B (FollowIR)" and by_model["BM25"] == "BM25 (FollowIR)"


def test_rows_the_kit_cannot_run_say_why():
    # TARTFullReranker (EncT5), evaluate_api.py's Cohere client, evaluate_google_api.py's Vertex AI client
    unavailable = {name for name, card in FOLLOWIR.items() if card.adapter == "unavailable"}
    assert unavailable == {"TART-FLAN-T5-xl", "Cohere v3 English", "Google Gecko"}
    for name in unavailable:
        runnable, reason = system_status(FOLLOWIR[name], CARDS)
        assert not runnable and reason.startswith("no adapter in the kit: ") and len(reason) > 40, name
        with pytest.raises(UsageError, match="cannot run here: no adapter in the kit"):
            build_system(FOLLOWIR[name], cards=CARDS)
    assert FOLLOWIR["TART-FLAN-T5-xl"].kind == "reranker" and FOLLOWIR["Google Gecko"].kind == "retriever"
    openai = FOLLOWIR["OpenAI v3 Large"]  # evaluate_api.py: OpenAIEmbeddings(model="text-embedding-3-large")
    assert (openai.adapter, openai.model, openai.windowing) == ("openai-embeddings", "text-embedding-3-large", "")


def test_rerankers_follow_the_authors_launch_settings():
    # evaluate_any.py --fp_options bfloat16 (default), launch_all_jobs.sh --batch_size 8,
    # evaluate_reranker.py top_k=1000
    assert len(RERANKERS) == 9
    for card in RERANKERS:
        assert card.dtype == "bfloat16" and card.params["batch_size"] == 8 and card.params["depth"] == 1000, card.name
        assert card.params["query_format"] == "{query} {instruction}", card.name  # f"{q} {i}".strip()
        assert "first_stage" not in card.params  # the task's candidate lists are the first stage


@pytest.mark.parametrize("name,prompt", [
    ("FollowIR-7B (FollowIR)", FOLLOWIR_7B), ("FollowIR-7B (MTEB)", FOLLOWIR_7B),
    ("Mistral-7B-instruct (FollowIR)", MISTRAL), ("Llama-2-7B-chat (FollowIR)", LLAMA_CHAT),
    ("GritLM-Reranker", GRITLM), ("FLAN-T5-base", FLAN_T5), ("FLAN-T5-large", FLAN_T5),
    ("MonoT5-3B (FollowIR)", "Query: {query} Document: {text} Relevant:"),
])
def test_reranker_prompts_are_the_authors_strings(name, prompt):
    card = _card(name)
    assert card.params["prompt"] == prompt
    reranker = build_system(card, cards=CARDS)
    assert reranker.template == prompt and reranker.dtype == card.dtype
    joined = reranker.model_input("wine cabinet", "I am a sommelier", "D")
    assert "wine cabinet I am a sommelier" in joined and "wine cabinet?" not in joined  # not InstructIR's join


def test_followir_7b_mteb_variant_pins_mtebs_revision_and_dtype():
    # mteb 2.26 rerankers_monot5_based.py ModelMeta followir_7b: fp_options float16, revision 4d25d437
    paper, mteb = _card("FollowIR-7B (FollowIR)"), _card("FollowIR-7B (MTEB)")
    assert mteb.variant_of == paper.name and mteb.model == paper.model == "jhu-clsp/FollowIR-7B"
    assert (mteb.dtype, mteb.revision) == ("float16", "4d25d437e38b510c01852070c0731e8f6e1875d1")
    assert mteb.params["query_format"] == paper.params["query_format"]


def test_flan_t5_scores_yes_against_no():
    # FLANT5Reranker.get_prediction_tokens: tokenizer.encode("yes")[0], encode("no")[0] (T5's '▁yes' / '▁no')
    for name in ("FLAN-T5-base", "FLAN-T5-large"):
        card = _card(name)
        assert (card.adapter, card.params["false_token"], card.params["true_token"]) == ("monot5", "▁no", "▁yes")


def test_bm25_card_runs_the_authors_rank_bm25_with_the_family_defaults():
    # models/bm25/evaluate_bm25.py: BM25Okapi (k1 1.5, b 0.75), Porter stemmer, NLTK stopwords
    defaults, card = bm25_defaults("followir"), _card("BM25 (FollowIR)")
    assert card.adapter == "paper-bm25" and defaults["engine"] == "rank_bm25"
    assert dict(card.params) == {"k1": defaults["k1"], "b": defaults["b"]}


def test_bi_encoders_score_by_cosine_as_mtebs_retrieval_evaluator():
    # mteb 1.x RetrievalEvaluator(score_function="cos_sim")
    for card in FOLLOWIR.values():
        if card.kind == "retriever" and card.adapter != "paper-bm25":
            assert card.similarity == "cosine", card.name
    e5 = _card("E5-mistral (FollowIR)")  # evaluate_e5.py + model_config.py: pool 'last', 512 tokens, float16
    assert (e5.pooling, e5.query_max_length, e5.dtype, e5.normalize) == ("last-token", 512, "float16", True)
    grit = _card("GritLM-7B (FollowIR)")  # downloaded_gritlm.py encode: max_length 512, instruction tokens pooled
    assert (grit.query_max_length, grit.dtype, grit.params["instruction_end"]) == (512, "bfloat16", "")
    assert _card("BGE-base").model == "BAAI/bge-base-en" and _card("Contriever (FollowIR)").pooling == "mean"


def _card(name):
    return get_card(name, CARDS)


# ------------------------------------------------------------- tiny models, step by step

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tiny_models import build_llama, build_t5  # noqa: E402

from tests.retrieval.conftest import TOY_DOCS, TOY_QUERIES  # noqa: E402

# passages from a word to four documents long: some prompts are padded, the longest truncated
PASSAGES = ["Short.", *(d.text for d in TOY_DOCS[:3]), " ".join(d.text for d in TOY_DOCS)]
TRIPLES = [(q.query, q.instruction, p) for q in TOY_QUERIES.values() for p in PASSAGES]
TEXTS = [t for triple in TRIPLES for t in triple] + [FOLLOWIR_7B, MISTRAL, LLAMA_CHAT, GRITLM, FLAN_T5, "yes no"]


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    return build_llama(tmp_path_factory.mktemp("followir-llama"), TEXTS, model_max_length=100)


def _mteb_llama_reranker_scores(model_dir, template, triples):
    """LlamaReranker (__init__ and predict), line by line, in float32."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    token_false_id, token_true_id = tokenizer.get_vocab()["false"], tokenizer.get_vocab()["true"]
    max_length = min(2048, tokenizer.model_max_length)
    query_instruct_template = "{query} {instruction}"
    queries = [query_instruct_template.format(instruction=i, query=q).strip() for q, i, _ in triples]
    prompts = [template.format(query=query, text=text) for query, (_, _, text) in zip(queries, triples)]
    tokens = tokenizer(prompts, padding=True, truncation=True, return_tensors="pt", max_length=max_length,
                       pad_to_multiple_of=None)
    if "token_type_ids" in tokens:
        del tokens["token_type_ids"]
    with torch.inference_mode():
        batch_scores = model(**tokens).logits[:, -1, :]
    true_vector = batch_scores[:, token_true_id]
    false_vector = batch_scores[:, token_false_id]
    batch_scores = torch.stack([false_vector, true_vector], dim=1)
    batch_scores = torch.nn.functional.log_softmax(batch_scores.float(), dim=1)
    return batch_scores[:, 1].exp().tolist(), tokens


@pytest.mark.parametrize("name,template", [
    ("FollowIR-7B (FollowIR)", FOLLOWIR_7B), ("FollowIR-7B (MTEB)", FOLLOWIR_7B),
    ("Mistral-7B-instruct (FollowIR)", MISTRAL), ("Llama-2-7B-chat (FollowIR)", LLAMA_CHAT),
    ("GritLM-Reranker", GRITLM),
])
def test_decoder_reranker_cards_score_as_the_authors_code(llama_dir, name, template):
    card = dataclasses.replace(_card(name), model=str(llama_dir), revision="", dtype="float32")
    reranker = build_system(card, cards=CARDS)
    scores = reranker.score([reranker.model_input(*t) for t in TRIPLES])
    expected, tokens = _mteb_llama_reranker_scores(llama_dir, template, TRIPLES)
    assert tokens["input_ids"].shape[1] == 100  # the longest prompts were truncated
    assert (tokens["attention_mask"][:, 0] == 0).any()  # and the shorter ones left-padded
    assert scores == pytest.approx(expected, abs=1e-6)
    assert reranker.calls == 1 and len({round(s, 6) for s in scores}) > 1


def test_followir_7b_card_runs_in_its_dtype(llama_dir):
    card = dataclasses.replace(_card("FollowIR-7B (FollowIR)"), model=str(llama_dir))
    reranker = build_system(card, cards=CARDS)
    loaded, _ = reranker.loaded()
    assert loaded.dtype == torch.bfloat16
    scores = reranker.score([reranker.model_input(*t) for t in TRIPLES[:3]])
    assert scores == pytest.approx(_mteb_llama_reranker_scores(llama_dir, FOLLOWIR_7B, TRIPLES[:3])[0], abs=0.05)


def test_flan_t5_card_scores_as_the_authors_generate_path(tmp_path):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    t5_dir = build_t5(tmp_path / "t5", TEXTS, model_max_length=40)
    card = dataclasses.replace(_card("FLAN-T5-base"), model=str(t5_dir), dtype="float32")
    reranker = build_system(card, cards=CARDS)
    scores = reranker.score([reranker.model_input(*t) for t in TRIPLES])

    # FLANT5Reranker: MonoT5Reranker.predict with its prompt and the yes/no ids of encode()
    tokenizer = AutoTokenizer.from_pretrained(t5_dir)
    model = AutoModelForSeq2SeqLM.from_pretrained(t5_dir, dtype=torch.float32).eval()
    yes_token_id, *_ = tokenizer.encode("yes")
    no_token_id, *_ = tokenizer.encode("no")
    queries = [f"{q} {i}".strip() for q, i, _ in TRIPLES]
    prompts = [FLAN_T5.format(query=query, text=text) for query, (_, _, text) in zip(queries, TRIPLES)]
    tokens = tokenizer(prompts, padding=True, truncation=True, return_tensors="pt",
                       max_length=tokenizer.model_max_length)
    with torch.inference_mode():
        output = model.generate(**tokens, max_new_tokens=1, return_dict_in_generate=True, output_scores=True)
    batch_scores = torch.nn.functional.log_softmax(output.scores[0][:, [no_token_id, yes_token_id]], dim=1)
    assert scores == pytest.approx(batch_scores[:, 1].exp().tolist(), abs=1e-6)
