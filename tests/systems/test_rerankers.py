"""monoT5, P(true) LLM and monoBERT rerankers on tiny local models, each against an independent
step-by-step computation that follows kaistAI/InstructIR eval/src/rerankers.py (its prompt
strings written out again here, its tokeniser settings, generate() for monoT5)."""

from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from tiny_models import build_bert_classifier, build_llama, build_t5  # noqa: E402

from instir.retrieval.rerank import rerank  # noqa: E402
from instir.retrieval.score_cache import ScoreCache  # noqa: E402
from instir.systems.rerankers import (  # noqa: E402
    LLM_TEMPLATES,
    CausalLMPTrueReranker,
    CrossEncoderReranker,
    MonoT5Reranker,
    authors_llm_prompt,
    reranker_from_name,
)
from tests.retrieval.conftest import TOY_DOCS, TOY_QUERIES  # noqa: E402

QUERIES = [q.query for q in TOY_QUERIES.values()]
INSTRUCTIONS = [q.instruction for q in TOY_QUERIES.values()]
PASSAGES = [d.text for d in TOY_DOCS]
TEXTS = [*QUERIES, *INSTRUCTIONS, *PASSAGES, *LLM_TEMPLATES.values(), "Query: Document: Relevant: ?"]


@pytest.fixture(scope="module")
def t5_dir(tmp_path_factory):
    return build_t5(tmp_path_factory.mktemp("t5"), TEXTS, model_max_length=24)


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    return build_llama(tmp_path_factory.mktemp("llama"), TEXTS, model_max_length=70)


@pytest.fixture(scope="module")
def bert_dir(tmp_path_factory):
    return build_bert_classifier(tmp_path_factory.mktemp("bert"), TEXTS)


def _pairs():
    """(query, instruction, passage) triples covering long and short passages."""
    return [(q, i, p) for q, i in zip(QUERIES, INSTRUCTIONS) for p in PASSAGES[:4]]


def test_monot5_scores_equal_the_authors_generate_path(t5_dir):
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    kit = MonoT5Reranker(str(t5_dir), batch_size=5)
    triples = _pairs()
    scores = kit.score([kit.model_input(*t) for t in triples])

    # the authors' MonoT5Reranker.rerank, step by step
    tok = AutoTokenizer.from_pretrained(t5_dir)
    model = AutoModelForSeq2SeqLM.from_pretrained(t5_dir, dtype=torch.float32).eval()
    queries = [f"{q} {i}".strip() for q, i, _ in triples]
    prompts = ["Query: {query} Document: {text} Relevant:".format(query=q, text=t)
               for q, (_, _, t) in zip(queries, triples)]
    tokens = tok(prompts, padding=True, truncation=True, return_tensors="pt", max_length=tok.model_max_length)
    assert tokens["input_ids"].shape[1] == 24  # truncation happened
    with torch.inference_mode():
        out = model.generate(**tokens, max_new_tokens=1, return_dict_in_generate=True, output_scores=True)
    vocab = tok.get_vocab()
    pair = torch.log_softmax(out.scores[0][:, [vocab["▁false"], vocab["▁true"]]], dim=1)
    expected = pair[:, 1].exp().tolist()
    assert scores == pytest.approx(expected, abs=1e-6)
    assert kit.calls == 1 and kit.scored == len(triples)
    assert len(set(round(s, 6) for s in scores)) > 1


def test_llm_ptrue_scores_equal_the_authors_llama_reranker(llama_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kit = CausalLMPTrueReranker(str(llama_dir), prompt="llama-chat")
    triples = _pairs()
    scores = kit.score([kit.model_input(*t) for t in triples])

    # the authors' LlamaReranker.rerank (chat template), step by step
    template = """<s>[INST] <<SYS>>
You are an expert at finding information. Determine if the following document is relevant to the query (true/false).
<</SYS>>Query: {query}
Document: {text}
Relevant: [/INST]"""
    tok = AutoTokenizer.from_pretrained(llama_dir, padding_side="left")
    tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(llama_dir, dtype=torch.float32).eval()
    queries = ["{query} {instruction}".format(instruction=i, query=q + "?").strip() for q, i, _ in triples]
    prompts = [template.format(query=q, text=t) for q, (_, _, t) in zip(queries, triples)]
    tokens = tok(prompts, padding=True, truncation=True, return_tensors="pt",
                 max_length=min(2048, tok.model_max_length))
    tokens.pop("token_type_ids", None)
    assert tokens["input_ids"][0, -1] != tok.eos_token_id or tokens["attention_mask"][0, 0] == 0  # left padded
    assert (tokens["input_ids"][:, :2] == tok.bos_token_id).all(dim=1).any()  # the double-BOS quirk
    with torch.inference_mode():
        logits = model(**tokens).logits[:, -1, :]
    vocab = tok.get_vocab()
    pair = torch.log_softmax(torch.stack([logits[:, vocab["false"]], logits[:, vocab["true"]]], dim=1), dim=1)
    assert scores == pytest.approx(pair[:, 1].exp().tolist(), abs=1e-6)


def test_llm_ptrue_score_does_not_depend_on_the_batch(llama_dir):
    kit = CausalLMPTrueReranker(str(llama_dir), prompt="followir")
    inputs = [kit.model_input(*t) for t in _pairs()[:6]]
    batched = kit.score(inputs)
    alone = [kit.score([x])[0] for x in inputs]
    assert batched == pytest.approx(alone, abs=1e-5)


@pytest.mark.parametrize(("model", "prompt", "dtype"), [
    ("meta-llama/Llama-2-7b-hf", "llama", "float32"), ("meta-llama/Llama-2-7b-chat-hf", "llama-chat", "float32"),
    ("mistralai/Mistral-7B-Instruct-v0.2", "mistral", "float16"), ("jhu-clsp/FollowIR-7B", "followir", "float16")])
def test_llm_prompt_and_dtype_follow_the_authors_model_dict(model, prompt, dtype):
    assert authors_llm_prompt(model) == prompt
    kit = CausalLMPTrueReranker(model)
    assert (kit.prompt, kit.dtype) == (prompt, dtype)
    assert kit.model_input("wine cabinet", "I am a sommelier", "D").count("wine cabinet? I am a sommelier") == 1


def test_llm_templates_are_the_authors_strings():
    assert LLM_TEMPLATES["followir"].startswith("<s> [INST] You are an expert Google searcher")
    assert LLM_TEMPLATES["followir"].endswith('Relevant (only output one word, either "true" or "false"): [/INST] ')
    assert LLM_TEMPLATES["mistral"].endswith('Relevant (either "true" or "false"): [/INST]')
    assert LLM_TEMPLATES["llama"] == ("Determine if the following document is relevant to the query (true/false)."
                                      "\n\nQuery: {query}\nDocument: {text}\nRelevant: ")


def test_monobert_scores_equal_the_authors_cross_encoder_path(bert_dir):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    kit = CrossEncoderReranker(str(bert_dir), batch_size=4)
    triples = _pairs()
    scores = kit.score([kit.model_input(*t) for t in triples])

    tok = AutoTokenizer.from_pretrained(bert_dir)
    model = AutoModelForSequenceClassification.from_pretrained(bert_dir).eval()
    queries = [f"{q} {i}".strip() for q, i, _ in triples]
    tokens = tok(queries, [t for _, _, t in triples], padding=True, truncation="only_second", return_tensors="pt",
                 max_length=tok.model_max_length)
    with torch.inference_mode():
        out = model(**tokens)[0]
    assert scores == pytest.approx(torch.log_softmax(out, dim=1)[:, 1].exp().tolist(), abs=1e-6)


def test_rerank_stage_with_monot5_then_warm_rerun_loads_and_calls_nothing(t5_dir, toy_benchmark, tmp_path):
    from instir.retrieval import retrieve
    from instir.retrieval.lexical import BM25Retriever

    bench = toy_benchmark()
    first = retrieve(bench, BM25Retriever(), k=5, out_dir=tmp_path / "runs")
    cache = ScoreCache(tmp_path / "scores.sqlite")
    kit = MonoT5Reranker(str(t5_dir), batch_size=4)
    cold = rerank(first, bench, kit, depth=5, cache=cache, progress=False)
    assert cold.meta["scored"] == len(cold) > 4 and kit.calls == -(-len(cold) // 4)
    warm_kit = MonoT5Reranker(str(t5_dir), batch_size=4)
    warm = rerank(first, bench, warm_kit, depth=5, cache=cache, progress=False)
    assert warm_kit.calls == 0 and warm_kit._model is None
    assert warm.df.equals(cold.df)
    docs = {d.id: d for d in bench.corpus}
    row = cold.df.iloc[0]
    q = bench.queries[row["qid"]]
    direct = kit.score([kit.model_input(q.query, q.instruction, docs[row["docid"]].text)])[0]
    assert row["score"] == pytest.approx(direct, abs=1e-6)


def test_changed_model_files_change_the_cache_identity(tmp_path):
    a = build_t5(tmp_path / "a", TEXTS, seed=0)
    b = build_t5(tmp_path / "b", TEXTS, seed=1)
    ida, idb = MonoT5Reranker(str(a)).identity(), MonoT5Reranker(str(b)).identity()
    assert ida["fingerprint"] != idb["fingerprint"]


def test_weights_changed_in_the_middle_of_a_file_are_a_new_model_scored_again(toy_benchmark, tmp_path):
    """A checkpoint saved over the old one (same size, its first and last MiB as they were) was once the old
    model to the score cache: its scores were served."""
    from instir.retrieval import retrieve
    from instir.retrieval.lexical import BM25Retriever

    words = [" ".join(f"w{i}" for i in range(40_000))]  # a 2.5 MiB embedding: the file's middle is in it
    folder = build_t5(tmp_path / "t5", [*TEXTS, *words])
    bench = toy_benchmark()
    first = retrieve(bench, BM25Retriever(), k=5)
    cache = ScoreCache(tmp_path / "scores.sqlite")
    old = MonoT5Reranker(str(folder), batch_size=4)
    rerank(first, bench, old, depth=5, cache=cache, progress=False)
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    middle = len(data) // 2 & ~7
    data[middle:middle + 4096] = torch.randn(1024, generator=torch.Generator().manual_seed(1)).numpy().tobytes()
    weights.write_bytes(bytes(data))
    assert len(data) > 2 << 20 and weights.stat().st_size == len(data)

    new = MonoT5Reranker(str(folder), batch_size=4)
    assert new.identity() != old.identity()
    after = rerank(first, bench, new, depth=5, cache=cache, progress=False)
    assert after.meta["scored"] == len(after) and new.calls > 0  # (words the pairs hold are the file's first MiB)
    warm = MonoT5Reranker(str(folder), batch_size=4)
    assert rerank(first, bench, warm, depth=5, cache=cache, progress=False).df.equals(after.df)
    assert warm._model is None and warm.calls == 0  # the changed files' description is remembered in turn


def test_a_hub_id_not_on_disk_is_named_without_loading_it_as_before(t5_dir, monkeypatch):
    # loading a Hub model only to name it cost every warm rerun the model, and every cached score was made again once
    import transformers

    loads = []
    for auto in (transformers.AutoModelForSeq2SeqLM, transformers.AutoTokenizer):  # the Hub, served from t5_dir
        monkeypatch.setattr(auto, "from_pretrained",
                            lambda _, *a, load=auto.from_pretrained, **k: loads.append(1) or load(t5_dir, **k))
    identity = MonoT5Reranker("org/tiny-monot5").identity()
    assert identity["local_files_sha256"] is None and "fingerprint" not in identity and not loads


def test_from_card_reads_the_duck_typed_card(t5_dir):
    card = SimpleNamespace(name="monoT5-tiny", model=str(t5_dir), revision=None, dtype="float32", template=None,
                           doc_max_length=None, params={"depth": 100, "batch_size": 7})
    kit = MonoT5Reranker.from_card(card)
    assert (kit.name, kit.batch_size, kit.template) == ("monoT5-tiny", 7, "Query: {query} Document: {text} Relevant:")
    llm = CausalLMPTrueReranker.from_card(SimpleNamespace(name="x", model="jhu-clsp/FollowIR-7B", params={}))
    assert llm.prompt == "followir" and llm.dtype == "float16"


def test_a_monot5_cards_kit_template_is_not_taken_for_its_prompt(t5_dir):
    card = SimpleNamespace(name="monoT5-tiny", model=str(t5_dir), template="instructir", params={})
    kit = MonoT5Reranker.from_card(card)
    assert kit.model_input("q", "i", "t") == "Query: q i Document: t Relevant:"
    prompted = MonoT5Reranker.from_card(SimpleNamespace(**{**vars(card), "params": {"prompt": "Q: {query} D: {text}"}}))
    assert prompted.model_input("q", "", "t") == "Q: q D: t"


def test_paper_names_resolve_to_the_authors_checkpoints_through_their_cards():
    assert reranker_from_name("monoT5-base").model_name == "castorini/monot5-base-msmarco-10k"
    assert reranker_from_name("FollowIR-7B").prompt == "followir"
    assert reranker_from_name("monoT5-base", batch_size=7).batch_size == 7
    with pytest.raises(ValueError, match="monoT5-xxl"):
        reranker_from_name("monoT5-xxl")
    with pytest.raises(ValueError, match="is a retriever, not a reranker"):
        reranker_from_name("BM25 (InstructIR)")


@pytest.mark.parametrize("name", ["Llama-2-7b", "Llama-2-7b-chat", "Mistral-7B-Instruct-v0.2", "FollowIR-7B"])
def test_every_llm_card_prompt_is_one_of_the_authors_templates(name):
    from instir.systems import get_card, load_cards

    card = get_card(name, load_cards())
    reranker = reranker_from_name(name)
    assert reranker.template == card.params["prompt"] and reranker.dtype == (card.dtype or reranker.dtype)


def test_gritlm_by_its_hub_name_takes_the_authors_gritlm_prompt_and_dtype():
    # the name is matched whatever its case, as FollowIR and Mistral are: GritLM/GritLM-7B was given Llama's prompt
    assert authors_llm_prompt("GritLM/GritLM-7B") == "gritlm"
    kit = CausalLMPTrueReranker("GritLM/GritLM-7B")
    assert (kit.prompt, kit.dtype) == ("gritlm", "bfloat16")


def test_an_unknown_dtype_is_refused_naming_it():
    from instir.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="'float8'"):
        MonoT5Reranker("org/tiny-monot5", dtype="float8")


def test_a_reranker_given_no_name_is_named_by_its_kind_and_model_folder(t5_dir):
    assert MonoT5Reranker(str(t5_dir)).name == f"monot5-{t5_dir.name}"


@pytest.mark.parametrize("changed", [{"dtype": "float16"}, {"max_length": 8}])
def test_another_dtype_or_max_length_is_another_score_cache_identity(changed):
    # a Hub id not on disk has no fingerprint: its identity alone keeps float16 or truncated scores apart
    assert MonoT5Reranker("org/tiny-monot5", **changed).identity() != MonoT5Reranker("org/tiny-monot5").identity()


def test_a_reranker_card_without_dtype_or_max_length_runs_float32_at_its_doc_max_length():
    card = SimpleNamespace(name="mine", model="org/tiny-monot5", doc_max_length=16, params={})
    kit = MonoT5Reranker.from_card(card)
    assert (kit.dtype, kit.max_length) == ("float32", 16)
    assert MonoT5Reranker.from_card(SimpleNamespace(**{**vars(card), "params": {"max_length": 8}})).max_length == 8


def test_a_flan_t5_card_scores_by_its_own_label_tokens():
    # FollowIR's FLAN-T5 rerankers read "▁no"/"▁yes" (the card's false_token/true_token), not monoT5's "▁false"/"▁true"
    assert reranker_from_name("FLAN-T5-base").identity()["tokens"] == ["▁no", "▁yes"]


def test_a_monot5_max_length_truncates_as_a_tokenizer_of_that_length_does(t5_dir, tmp_path):
    short = build_t5(tmp_path / "t5", TEXTS, model_max_length=10)  # the same seed: the same weights
    kit = MonoT5Reranker(str(t5_dir), max_length=10)
    inputs = [kit.model_input(*t) for t in _pairs()[:4]]
    truncated = kit.score(inputs)
    assert truncated == pytest.approx(MonoT5Reranker(str(short)).score(inputs), abs=1e-6)
    assert truncated != pytest.approx(MonoT5Reranker(str(t5_dir)).score(inputs), abs=1e-6)


def test_a_dtype_or_batch_size_given_by_name_keeps_the_rest_of_the_card():
    # --batch-size once replaced the card's params: its query join and prompt were dropped for the class's own
    assert reranker_from_name("monoT5-base", dtype="float16").dtype == "float16"
    kit = reranker_from_name("Llama-2-7B-chat (FollowIR)", batch_size=2)
    assert kit.batch_size == 2 and "Query: wine cabinet I am a sommelier\n" in kit.model_input(
        "wine cabinet", "I am a sommelier", "D")


def test_a_monot5_template_with_a_field_it_cannot_fill_is_refused():
    with pytest.raises(ValueError, match="MonoT5Reranker template"):
        MonoT5Reranker("org/tiny-monot5", template="Query: {query} Passage: {passage} Relevant:")


def test_a_cross_encoder_truncates_the_passage_only_as_the_authors_do(bert_dir):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(bert_dir)
    query, instruction, passage = QUERIES[0], INSTRUCTIONS[0], max(PASSAGES, key=len)
    joined = f"{query} {instruction}".strip()
    limit = len(tok(joined)["input_ids"]) + 4  # the whole query and a few words of the passage
    kit = CrossEncoderReranker(str(bert_dir), max_length=limit)
    score = kit.score([kit.model_input(query, instruction, passage)])
    tokens = tok([joined], [passage], truncation="only_second", max_length=limit, return_tensors="pt")
    model = AutoModelForSequenceClassification.from_pretrained(bert_dir).eval()
    with torch.inference_mode():
        expected = torch.log_softmax(model(**tokens)[0], dim=1)[:, 1].exp().tolist()
    assert score == pytest.approx(expected, abs=1e-6)


def test_a_single_logit_cross_encoder_scores_by_its_raw_logit(bert_dir, tmp_path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(bert_dir, num_labels=1, ignore_mismatched_sizes=True)
    model.save_pretrained(tmp_path / "one")
    AutoTokenizer.from_pretrained(bert_dir).save_pretrained(tmp_path / "one")
    kit = CrossEncoderReranker(str(tmp_path / "one"))
    triples = _pairs()[:3]
    scores = kit.score([kit.model_input(*t) for t in triples])
    tok = AutoTokenizer.from_pretrained(tmp_path / "one")
    tokens = tok([f"{q} {i}".strip() for q, i, _ in triples], [p for _, _, p in triples], padding=True,
                 truncation="only_second", return_tensors="pt")
    with torch.inference_mode():
        expected = model.eval()(**tokens)[0][:, 0].tolist()
    assert scores == pytest.approx(expected, abs=1e-6)


def test_an_llm_prompt_is_cut_at_2048_tokens_when_its_tokenizer_sets_no_lower_limit(tmp_path):
    # Llama-2's and Mistral's tokenizers say model_max_length 1e30: the authors' min(2048, …) is what truncates
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = build_llama(tmp_path / "llama", TEXTS, model_max_length=10**30)
    kit = CausalLMPTrueReranker(str(folder), prompt="llama")
    long = kit.model_input(QUERIES[0], INSTRUCTIONS[0], " ".join(PASSAGES * 200))
    tok = AutoTokenizer.from_pretrained(folder)
    tokens = tok([long], truncation=True, max_length=2048, return_tensors="pt")
    assert len(tok(long)["input_ids"]) > 2048 == tokens["input_ids"].shape[1]
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.inference_mode():
        logits = model(**tokens).logits[:, -1, :]
    vocab = tok.get_vocab()
    pair = torch.log_softmax(torch.stack([logits[:, vocab["false"]], logits[:, vocab["true"]]], dim=1), dim=1)
    assert kit.score([long]) == pytest.approx(pair[:, 1].exp().tolist(), abs=1e-6)
