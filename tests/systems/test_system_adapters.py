"""Adapters built from cards give the same results as the kit's retrievers (or, for
hf-mean-pool, as a plain AutoModel with masked mean pooling, IFIR ``src/utils/embeddings.py``
``Contriever``/``ColBERT``); runs record the full card; missing packages and adapters get
one clear message; ``instir retrieve --system`` and ``instir systems`` work end to end."""

import dataclasses
import functools
import importlib
import json

import numpy as np
import pytest
from says import raises_saying, says

from instir.errors import UnknownNameError, UsageError
from instir.formatting import get_template
from instir.retrieval import BUNDLED_MODEL_ID, retrieve
from instir.retrieval.dense import DenseRetriever
from instir.retrieval.model_files import hub_command
from instir.systems import MissingDependency, SystemCard, build_system, get_card, load_cards, registry, system_status

MINILM = SystemCard(name="MiniLM (user)", paper="user", kind="retriever", adapter="sentence-transformers",
                    model=BUNDLED_MODEL_ID, template="ifir", params={"batch_size": 16})


def _cards(*extra):
    cards = dict(load_cards())
    cards.update({c.name: c for c in extra})
    return cards


def test_hf_mean_pool_equals_automodel_masked_mean(tiny_bert, benchmark, tmp_path):
    import torch
    from transformers import AutoModel, AutoTokenizer

    card = dataclasses.replace(get_card("Contriever"), model=str(tiny_bert), windowing="")
    system = build_system(card, cache_dir=tmp_path, progress=False)
    inputs = get_template("ifir").format_queries(benchmark.queries.values())
    got = system.inner.embed_queries(inputs).matrix

    tok, model = AutoTokenizer.from_pretrained(tiny_bert), AutoModel.from_pretrained(tiny_bert).eval()
    with torch.no_grad():  # Contriever.embed_documents + mean_pooling
        enc = tok(inputs, padding=True, truncation=True, return_tensors="pt")
        hidden = model(**enc)[0].masked_fill(~enc["attention_mask"][..., None].bool(), 0.0)
        expected = hidden.sum(dim=1) / enc["attention_mask"].sum(dim=1)[..., None]
    np.testing.assert_allclose(got, expected.numpy(), atol=1e-5)
    assert system.inner.similarity == "cosine" and "Pooling" in system.inner.params()["modules"]


def test_sentence_transformers_card_runs_like_the_dense_retriever_and_records_the_card(benchmark, tmp_path):
    run = retrieve(benchmark, build_system(MINILM, cards=_cards(MINILM), cache_dir=tmp_path, progress=False), k=3)
    plain = retrieve(benchmark, DenseRetriever(batch_size=16, cache_dir=tmp_path, progress=False), "ifir", k=3)
    assert run.df.equals(plain.df)
    assert run.meta["system"] == MINILM.to_dict()
    assert run.meta["template"]["name"] == "ifir"  # the card's template
    assert run.meta["retriever"]["name"] == MINILM.name == "MiniLM (user)"  # the card name, as reports say it


def test_a_missing_optional_package_names_the_card_and_the_install(monkeypatch):
    real = registry.importlib.util.find_spec
    monkeypatch.setattr(registry.importlib.util, "find_spec", lambda name: None if name == "peft" else real(name))
    needs_peft = r"system 'Promptriever-7B' needs .*peft.*pip install 'instir\[systems\]'"
    with pytest.raises(MissingDependency, match=needs_peft):
        build_system("Promptriever-7B")
    card = dataclasses.replace(MINILM, requires=("no_such_package_xyz",))
    assert system_status(card) == (False, "needs no_such_package_xyz (pip install no_such_package_xyz)")


def test_a_card_built_in_python_with_an_unknown_adapter_is_refused():
    with raises_saying(UnknownNameError, "'gritlmm'", "'GritLM-7B'", "did you mean 'gritlm'"):
        dataclasses.replace(get_card("GritLM-7B"), adapter="gritlmm")


def test_sentence_transformers_card_sets_the_padding_side(tmp_path):
    card = dataclasses.replace(MINILM, params={"padding_side": "left"})
    system = build_system(card, cards=_cards(card), cache_dir=tmp_path, progress=False)
    assert system.inner.model.tokenizer.padding_side == "left"


def test_status_sees_local_weights_and_api_keys(tiny_bert, monkeypatch):
    local = dataclasses.replace(get_card("Contriever"), model=str(tiny_bert))
    assert system_status(local) == (True, "")
    assert system_status(get_card("Contriever"))[1].startswith("weights of facebook/contriever not in")
    assert system_status(MINILM) == (True, "")  # bundled with the kit
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert system_status(get_card("OpenAI-v3-small")) == (False, "API key variable OPENAI_API_KEY is not set")
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    assert system_status(get_card("OpenAI-v3-small")) == (True, "")


def test_cli_retrieves_a_named_system_and_lists_the_systems(tmp_path, capsys):
    from instir.cli import main

    assert main(["retrieve", "--system", "BM25 (FollowIR)", "--benchmark", "followir-sample/core17", "--k", "5",
                 "--out", str(tmp_path)]) == 0  # rank_bm25 in process: no JVM in this tier
    sidecar = next(tmp_path.glob("*.json"))
    assert json.loads(sidecar.read_text())["system"]["name"] == "BM25 (FollowIR)"
    capsys.readouterr()
    assert main(["systems", "--paper", "ifir"]) == 0
    listing = capsys.readouterr().out
    assert "Promptriever-7B" in listing and "BM25 (InstructIR)" not in listing
    assert main(["retrieve", "--system", "monoT5-base", "--benchmark", "instructir-sample",
                 "--out", str(tmp_path)]) == 2
    assert "is a reranker" in capsys.readouterr().err


def test_every_card_is_wired_to_an_adapter(tmp_path):
    """The registry knows every adapter a built-in card names, and builds the adapters that load
    their models lazily (API, ColBERT, LoRA decoders, rerankers, BM25) without any weights here."""
    from instir.systems import load_cards
    from instir.systems.cards import ADAPTERS

    for adapter, (_, target) in ADAPTERS.items():
        module, _, attr = target.partition(":")
        assert callable(functools.reduce(getattr, attr.split("."), importlib.import_module(module))), adapter
    cards = load_cards()
    lazy = {"bm25", "openai-embeddings", "colbert-late", "peft-decoder", "gritlm", "monot5", "cross-encoder",
            "llm-ptrue"}
    for card in cards.values():
        if card.adapter in lazy:
            assert build_system(card, cards=cards, cache_dir=tmp_path, progress=False).name, card.name


def test_offline_a_card_whose_weights_are_not_cached_fails_at_once_in_one_line(monkeypatch, capsys):
    """Before, ``instir retrieve --system NV-Embed-v2`` offline spent about two minutes on the Hub client's
    retries before its own error."""
    import time

    from instir.cli import main

    monkeypatch.setattr(registry, "hub_reachable", lambda: False)
    start = time.perf_counter()
    code = main(["retrieve", "--system", "NV-Embed-v2", "--benchmark", "ifir-sample/fiqa", "--out", "runs"])
    err = capsys.readouterr().err.strip()
    assert code != 0 and time.perf_counter() - start < 5
    assert says(err, "'NV-Embed-v2'", "nvidia/NV-Embed-v2", "offline", hub_command("download", "nvidia/NV-Embed-v2"))
    monkeypatch.setattr(registry, "hub_reachable", lambda: True)  # online, the library downloads (not here)
    registry.check_weights_reachable(get_card("NV-Embed-v2", load_cards()))
    registry.check_weights_reachable(MINILM)  # the bundled model is always there


def test_instir_systems_name_shows_one_card_whole_with_what_it_needs(capsys, tmp_path, monkeypatch):
    """``instir systems NAME``: what a paper row runs, its weights (here or not, gated or not) and the commands that
    download them, the extra it needs, GPU and memory from its ``resources``, the judge an InstFol row needs."""
    from instir.cli import main

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache: nothing is here
    assert main(["systems", "Promptriever-7B"]) == 0
    shown = dict(line.split(":", 1) for line in capsys.readouterr().out.replace("\n           ", " ").splitlines())
    assert shown["card"].strip() == "Promptriever-7B" and shown["paper"].strip() == "ifir"
    says(shown["weights"], "meta-llama/Llama-2-7b-hf", "not here", "gated", hub_command("login"),
         "samaya-ai/promptriever-llama2-7b-v1", "not here")
    says(shown["download"], hub_command("download", "meta-llama/Llama-2-7b-hf"),
         hub_command("download", "samaya-ai/promptriever-llama2-7b-v1"))
    says(shown["needs"], "peft")
    says(shown["resources"], "1 GPU", "20 GiB")
    says(shown["InstFol"], "gpt-4o-mini", "--judge openai", "judge_model=gpt-4o-mini")
    says(shown["runs here"], "no", "not in the Hugging Face cache")
    assert main(["systems", "BM25 (InstructIR)"]) == 0
    shown = capsys.readouterr().out
    assert "none to download" in shown and "no GPU" in shown and "InstFol" not in shown  # InstructIR has no judge
    assert main(["systems", "no such card"]) == 2
    says(capsys.readouterr().err.strip(), "unknown system", "no such card")


def test_a_card_shown_for_a_paper_that_has_none_of_that_name_says_so(capsys):
    """``instir systems RepLLaMA --paper ifir``: IFIR has no RepLLaMA row; the InstructIR card shown says it is not
    IFIR's (it was shown as if it were)."""
    from instir.cli import main

    assert main(["systems", "RepLLaMA", "--paper", "ifir"]) == 0
    shown = dict(line.split(":", 1) for line in capsys.readouterr().out.replace("\n           ", " ").splitlines())
    assert shown["paper"].strip() == "instructir (ifir has no card of that name)"
    assert main(["systems", "Promptriever-7B", "--paper", "ifir"]) == 0
    shown = dict(line.split(":", 1) for line in capsys.readouterr().out.replace("\n           ", " ").splitlines())
    assert shown["paper"].strip() == "ifir"


def test_card_weights_say_what_is_here_what_is_gated_and_how_to_download(tmp_path):
    from instir.systems.registry import card_weights

    cards = load_cards()
    (base, lora) = card_weights(get_card("RepLLaMA-7B", cards), cards)
    assert (base.role, base.model, base.gated, base.present) == ("base_model", "meta-llama/Llama-2-7b-hf", True, False)
    assert (lora.role, lora.gated) == ("model", False)
    assert lora.download.startswith(hub_command("download", lora.model))
    (bundled,) = card_weights(MINILM, cards)
    assert bundled.present and not bundled.gated
    hybrid = card_weights(get_card("GTR-XL + BM25 (hybrid)", cards), cards)
    assert [w.model for w in hybrid] == ["sentence-transformers/gtr-t5-xl"]  # the dense part's; BM25 has none


def test_every_name_a_paper_prints_finds_the_card_its_row_runs_with():
    """Printed names (``RepLLaMA``, IFIR's ``E5-mistral-7b-inst``, ``GTR-XL``, which two papers print) resolve, given
    the paper (the family of the benchmark a system runs on), to the card the coverage table joins that row to."""
    from instir.systems.coverage import coverage_matrix

    cards = load_cards()
    rows = coverage_matrix(cards=cards)
    rows = rows[(rows["card"] != "") & ~rows["model_key"].str.startswith("hybrid:")]  # a hybrid prints its model's name
    assert len(rows) > 40
    for paper, printed, card in rows[["paper", "model", "card"]].itertuples(index=False):
        assert get_card(printed, cards, paper=paper).name == card, (paper, printed)
    assert get_card("GTR-XL", cards, paper="instructir").name == "GTR-xl (InstructIR)"
    with pytest.raises(UnknownNameError, match="ambiguous"):
        get_card("GTR-XL", cards)  # two papers print it: without a paper the candidates are listed


def test_instir_retrieve_takes_the_name_the_benchmarks_paper_prints(tmp_path, capsys):
    from instir.cli import main

    assert main(["retrieve", "--system", "BM25", "--benchmark", "followir-sample/core17", "--k", "5",
                 "--out", str(tmp_path)]) == 0
    sidecar = next(tmp_path.glob("*.json"))
    assert json.loads(sidecar.read_text())["system"]["name"] == "BM25 (FollowIR)"
    assert get_card("BM25", paper="ifir").name == "BM25 (IFIR)"  # each family's own


def test_a_card_named_exactly_as_asked_comes_before_a_papers_card_of_that_name(tmp_path, capsys):
    # before, with the benchmark's paper asked first, a user's card "bm25" was replaced by "BM25 (InstructIR)"
    # (Anserini, k1=0.9, b=0.4) without a word, while `instir systems bm25` showed the user's card
    from instir.cli import main

    path = tmp_path / "mine.toml"
    path.write_text('[[card]]\nname = "bm25"\npaper = "user"\nkind = "retriever"\nadapter = "bm25"\n'
                    "params = {k1 = 3.0, b = 0.1}\n")
    cards = load_cards([path])
    assert get_card("bm25", cards, paper="instructir").params == {"k1": 3.0, "b": 0.1}
    claimed = tmp_path / "claimed.toml"  # a user's card saying which paper it reproduces: still the user's
    claimed.write_text(path.read_text().replace('paper = "user"', 'paper = "ifir"'))
    assert get_card("bm25", load_cards([claimed]), paper="instructir").params == {"k1": 3.0, "b": 0.1}
    assert get_card("BM25", cards, paper="instructir").name == "bm25"  # the case aside, as every name
    assert main(["retrieve", "--system", "bm25", "--cards", str(path), "--benchmark", "instructir-sample",
                 "--k", "5", "--out", str(tmp_path / "out")]) == 0
    sidecar = next((tmp_path / "out").glob("*.json"))
    assert json.loads(sidecar.read_text())["system"]["params"] == {"k1": 3.0, "b": 0.1}


def test_a_card_built_in_python_is_refused_when_built_if_its_adapter_does_not_read_a_param():
    # a card file's are refused as it is read; on the commit before, this one ran with batch_size 64
    card = dataclasses.replace(MINILM, params={"batchsize": 2})
    with raises_saying(UsageError, "system 'MiniLM (user)', field 'params.batchsize'", "did you mean 'batch_size'?"):
        build_system(card, cards=_cards(card))


def test_a_sentence_transformers_card_pooling_other_than_its_models_is_refused_when_built(tmp_path):
    # on the commit before, pooling = "cls" ran the model's mean pooling and the sidecar recorded "cls"
    cls = dataclasses.replace(MINILM, pooling="cls")
    with raises_saying(UsageError, "system 'MiniLM (user)', field 'pooling'", "pools by mean, not 'cls'"):
        build_system(cls, cards=_cards(cls), cache_dir=tmp_path, progress=False)
    mean = dataclasses.replace(MINILM, pooling="mean")
    assert build_system(mean, cards=_cards(mean), cache_dir=tmp_path, progress=False).card.pooling == "mean"


def test_a_cards_model_keeps_its_cards_dtype_on_cuda_where_a_model_by_name_runs_in_float16(tmp_path, monkeypatch):
    # found by a review against the authors' code: DenseRetriever halved every model on CUDA, so a card saying
    # float32 (Contriever, TART, E5-mistral on InstructIR; the authors' own) ran in float16 all the same
    import torch
    from sentence_transformers import SentenceTransformer

    halved = []
    monkeypatch.setattr(SentenceTransformer, "device", property(lambda self: torch.device("cuda")))
    monkeypatch.setattr(SentenceTransformer, "half", lambda self: halved.append(self) or self)
    carded = build_system(MINILM, cache_dir=tmp_path, progress=False)
    assert carded.inner.half is False and carded.inner.model is not None and not halved
    assert carded.inner.params()["precision"] == "float32"  # read from the weights, not from the device
    by_name = DenseRetriever(cache_dir=tmp_path, progress=False)
    assert by_name.model is not None and halved == [by_name.model]


@pytest.mark.parametrize("name, option, takes", [
    ("BM25 (IFIR)", {"k1": 2.0}, "takes the options device, cache_dir, progress"),
    ("monoT5-base", {"batch_size": 2}, "takes the options device, cache_dir, progress")])
def test_an_option_a_cards_adapter_would_drop_is_refused_naming_the_options_it_takes(name, option, takes):
    # before, build_system("BM25 (IFIR)", k1=2.0) ran the card's own k1 without a word, and a reranker its own batch
    with raises_saying(UsageError, f"system {name!r}", takes, "a card's settings are its fields"):
        build_system(name, **option)


def test_an_option_an_adapter_passes_on_still_reaches_it():
    # a review of the check above: it refused what the OpenAI embeddings adapter passes on (cache, tokenizer …)
    from instir.systems.openai_embeddings import OpenAIEmbeddingsRetriever

    cards = load_cards()
    card = next(c for c in cards.values() if c.adapter == "openai-embeddings")
    built = build_system(card, cards=cards, progress=False, tokenizer_name="mine", concurrency=2)
    assert isinstance(built.inner, OpenAIEmbeddingsRetriever)
    assert built.inner.tokenizer_name == "mine" and built.inner.client.concurrency == 2
    with raises_saying(UsageError, "give cache or cache_dir (the same option), not both"):  # one was dropped
        build_system(card, cards=cards, cache="a", cache_dir="b")


@pytest.mark.parametrize("name, option, takes", [
    ("OpenAI-v3-small", {"k1": 1.2}, "takes the options device, cache_dir, progress, base_url"),
    ("OpenAI-v3-small", {"batch_size": 8}, "tokenizer"),  # the card sets its batch size
    ("ColBERTv2", {"k1": 1.2}, "takes the options device, cache_dir, progress, query_maxlen"),
    ("GTR-XL + BM25 (hybrid)", {"k1": 1.2}, "takes the options device, cache_dir, progress;")])
def test_an_option_an_adapter_passing_options_on_would_not_take_is_refused_naming_the_card_built(name, option, takes):
    # a review of the check above: these were a TypeError traceback (unexpected keyword argument, or multiple values
    # for one the card sets), and a hybrid's refusal named its dense card, not the card the user built
    with raises_saying(UsageError, f"system {name!r}", takes, f"got {next(iter(option))!r}",
                       "a card's settings are its fields"):
        build_system(name, **option)


def test_card_weights_carry_the_revision_the_card_pins_into_the_download_command():
    from instir.systems.registry import card_weights

    cards = load_cards()
    card = get_card("RepLLaMA-7B (MTEB)", cards)
    (base, lora) = card_weights(card, cards)
    assert card.revision and lora.revision == card.revision  # the LoRA's; the base model is not pinned by it
    assert lora.download == hub_command("download", lora.model, "--revision", card.revision)
    assert base.revision == "" and base.download == hub_command("download", base.model)


BM25_MINE = SystemCard(name="bm25 (mine)", paper="user", kind="retriever", adapter="bm25", params={"k1": 3.0, "b": 0.1})


def test_a_bm25_cards_params_reach_the_retriever():
    built = build_system(BM25_MINE, cards=_cards(BM25_MINE))
    assert (built.inner.k1, built.inner.b) == (3.0, 0.1)


def test_a_paper_bm25_card_runs_its_papers_engine_settings_unless_its_params_say_otherwise(monkeypatch):
    from instir.benchmarks import catalog
    from instir.retrieval import lucene

    card = get_card("BM25 (FollowIR)")
    spec = catalog.family("followir").bm25
    plain = build_system(card).inner
    assert (plain.k1, plain.b, plain.epsilon) == (spec["k1"], spec["b"], 0.25)
    mine = build_system(dataclasses.replace(card, params={"k1": 2.0, "epsilon": 0.5})).inner
    assert (mine.k1, mine.b, mine.epsilon) == (2.0, spec["b"], 0.5)
    monkeypatch.setattr(lucene, "java", lambda: "java")  # no JVM is started: the retriever is only built
    monkeypatch.setattr(lucene, "anserini_jar", lambda: "anserini.jar")
    anserini = build_system("BM25 (InstructIR)").inner
    assert (anserini.k1, anserini.b, anserini.analyzer) == (0.9, 0.4, "english")  # InstructIR's porter stemmer


def test_a_hybrid_card_fuses_its_dense_and_lexical_cards_with_its_weights(tmp_path):
    hybrid = SystemCard(name="hybrid (mine)", paper="user", kind="retriever", adapter="hybrid",
                        params={"dense": MINILM.name, "lexical": BM25_MINE.name, "weights": [0.3, 0.7], "rrf_k": 10})
    built = build_system(hybrid, cards=_cards(MINILM, BM25_MINE, hybrid), cache_dir=tmp_path, progress=False).inner
    assert (built.dense.name, built.lexical.name) == (MINILM.name, BM25_MINE.name)
    assert (built.weights, built.rrf_k) == ((0.3, 0.7), 10)


def test_a_sentence_transformers_card_settings_reach_the_dense_retriever(tmp_path):
    card = dataclasses.replace(MINILM, query_max_length=32, normalize=True, similarity="dot", dtype="float16",
                               windowing="ifir")
    built = build_system(card, cards=_cards(card), cache_dir=tmp_path, progress=False).inner
    assert (built.batch_size, built.max_length, built.normalize, built.windowing) == (16, 32, True, "ifir")
    assert built.similarity == "dot"
    assert built.params()["precision"] == "float32"  # the card's float16 is for CUDA; on a CPU the authors' float32
    both = dataclasses.replace(MINILM, query_max_length=128, doc_max_length=256)
    with raises_saying(ValueError, "system 'MiniLM (user)'", "one max length", "query 128 and doc 256"):
        build_system(both, cards=_cards(both), cache_dir=tmp_path, progress=False)


def test_a_cards_revision_and_remote_code_setting_reach_the_model_loaders(monkeypatch):
    import sentence_transformers
    from sentence_transformers.sentence_transformer import modules

    asked = {}

    class Stop(Exception):
        pass

    def stop(*args, **kwargs):
        asked.update(kwargs)
        raise Stop

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", stop)
    monkeypatch.setattr(modules, "Transformer", stop)
    card = dataclasses.replace(MINILM, revision="0123456789abcdef0123456789abcdef01234567", query_max_length=40)
    with pytest.raises(Stop):
        registry.build_adapter(card, cards=_cards(card))
    assert asked["revision"] == card.revision and asked["trust_remote_code"] is False
    pooled = dataclasses.replace(card, adapter="hf-mean-pool", template="", pooling="")
    with pytest.raises(Stop):
        registry.build_adapter(pooled, cards=_cards(pooled))
    assert asked["model_kwargs"] == {"revision": card.revision} and asked["max_seq_length"] == 40


@pytest.mark.parametrize(("name", "package"), [
    ("Promptriever-7B", "peft"),  # the peft-decoder adapter's, though the card below lists none of its own
    ("BM25 (InstructIR)", "pyserini"), ("BM25 (IFIR)", "jnius"), ("BM25 (FollowIR)", "rank_bm25"),  # the engines'
])
def test_a_card_needs_its_adapters_packages_and_its_papers_bm25_engines(monkeypatch, name, package):
    real = registry.importlib.util.find_spec
    monkeypatch.setattr(registry.importlib.util, "find_spec", lambda mod: None if mod == package else real(mod))
    card = dataclasses.replace(get_card(name), requires=())
    ok, why = system_status(card)
    assert not ok and why.startswith(f"needs {package} (")
    with pytest.raises(MissingDependency) as err:
        build_system(card)
    assert f"system {name!r} needs the python package(s) {package}, not installed here" in str(err.value)


def test_every_missing_package_is_named_with_its_install():
    card = dataclasses.replace(MINILM, requires=("no_such_a", "no_such_b"))
    with pytest.raises(MissingDependency) as err:
        build_system(card)
    assert str(err.value).endswith("needs the python package(s) no_such_a, no_such_b, not installed here: "
                                   "pip install no_such_a; pip install no_such_b")


def test_a_card_the_kit_cannot_run_says_its_reason():
    card = SystemCard(name="x", paper="user", kind="retriever", adapter="unavailable",
                      params={"reason": "an API without a client here"})
    assert system_status(card) == (False, "no adapter in the kit: an API without a client here")
    with raises_saying(UsageError, "system 'x' cannot run here: no adapter in the kit: an API without a client here"):
        build_system(card)


def test_a_hybrid_takes_only_the_options_both_its_cards_take(tmp_path):
    path = tmp_path / "h.toml"
    path.write_text('[[card]]\nname = "h"\npaper = "user"\nkind = "retriever"\nadapter = "hybrid"\n'
                    'params = { dense = "ColBERTv2", lexical = "BM25 (IFIR)" }\n', encoding="utf-8")
    cards = load_cards([path])
    with raises_saying(UsageError, "system 'h' (hybrid) takes the options device, cache_dir, progress;",
                       "got 'query_maxlen'"):
        build_system("h", cards=cards, query_maxlen=64)  # ColBERT's option, which BM25 would not take


def test_a_reranker_card_builds_the_reranker_itself_not_a_retriever():
    from instir.systems.registry import SystemRetriever
    from instir.systems.rerankers import MonoT5Reranker

    built = build_system("monoT5-base")
    assert isinstance(built, MonoT5Reranker) and not isinstance(built, SystemRetriever)


def test_a_kinds_name_may_hold_spaces_around_its_model():
    # as a card's name is found with outer spaces aside, so is "dense: MODEL" (typed after a comma in a list)
    assert build_system(" dense: sentence-transformers/all-MiniLM-L6-v2 ").name == f"dense:{BUNDLED_MODEL_ID}"


def test_a_base_model_folder_that_is_no_model_is_refused_naming_the_base_model_field():
    card = SystemCard(name="x", paper="user", kind="retriever", adapter="peft-decoder", model="org/lora",
                      base_model="/etc")
    with raises_saying(UsageError, "system 'x', field 'base_model': /etc: a folder without config.json"):
        build_system(card)
