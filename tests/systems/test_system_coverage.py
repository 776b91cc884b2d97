"""The coverage matrix joins every model row of both papers' reported tables to a card."""

import pandas as pd

from instir.systems.coverage import coverage_matrix, systems_table


def test_every_paper_row_has_a_card():
    matrix = coverage_matrix()
    assert (matrix["card"] != "").all(), matrix.loc[matrix["card"] == "", ["paper", "model"]]


def test_a_row_without_a_card_of_its_paper_gets_the_other_papers_card_of_that_model():
    """InstructIR's Promptriever number comes from the Promptriever paper (its tevatron scripts are
    not public): the kit runs the model with the IFIR card, and the row says so."""
    matrix = coverage_matrix().set_index(["paper", "model_key"])
    row = matrix.loc[("instructir", "samaya-ai/promptriever-llama2-7b-v1")]
    assert row["model"] == "Promptriever" and row["card"] == "Promptriever-7B"
    assert row["reason"].startswith("the ifir paper's card of this model")
    ifir = matrix.loc[("ifir", "samaya-ai/promptriever-llama2-7b-v1")]
    assert ifir["card"] == "Promptriever-7B" and "paper's card" not in ifir["reason"]


def test_rows_join_on_paper_and_model_key():
    matrix = coverage_matrix().set_index(["paper", "model_key"])
    assert matrix.loc[("instructir", "castorini/repllama-v1-7b-lora-passage"), "card"] == "RepLLaMA-7B"  # not (fixed)
    assert matrix.loc[("ifir", "hybrid:gritlm/gritlm-7b+bm25"), "card"] == "GritLM-7B + BM25 (hybrid)"
    assert matrix.loc[("ifir", "openai:text-embedding-3-large"), "card"] == "OpenAI-v3-large"
    assert matrix.loc[("instructir", "bm25"), "card"] == "BM25 (InstructIR)"
    e5 = coverage_matrix().query("paper == 'ifir' and model_key == 'intfloat/e5-mistral-7b-instruct'")
    assert set(e5["model"]) == {"E5-mistral-7B", "E5-mistral-7b-inst"} and set(e5["card"]) == {"E5-mistral-7B"}


def test_reproduced_values_come_from_the_metrics_table(tmp_path):
    (tmp_path / "metrics").mkdir()
    pd.DataFrame([
        {"system": "BM25 (IFIR)", "benchmark": "ifir/fiqa", "setting": "instructed", "subset": "fiqa", "level": "all",
         "measure": "nDCG@20", "value": 0.3125, "n_queries": 10},
        {"system": "BM25 (IFIR)", "benchmark": "ifir/fiqa", "setting": "instructed", "subset": "fiqa", "level": "1",
         "measure": "nDCG@20", "value": 0.5, "n_queries": 3},
        {"system": "BM25 (InstructIR)", "benchmark": "instructir", "setting": "instructed", "subset": "all",
         "level": "all", "measure": "nDCG@10", "value": 0.5, "n_queries": 10},
    ]).to_csv(tmp_path / "metrics" / "metrics.csv", index=False)
    matrix = coverage_matrix(tmp_path).set_index(["paper", "card"])
    assert matrix.loc[("ifir", "BM25 (IFIR)"), "reproduced"] == "ifir/fiqa fiqa nDCG@20=31.2"
    assert matrix.loc[("instructir", "BM25 (InstructIR)"), "reproduced"] == "instructir nDCG@10=50.0"
    assert matrix.loc[("ifir", "Promptriever-7B"), "reproduced"] == ""


def test_systems_table_says_why_a_card_cannot_run():
    table = systems_table().set_index("name")
    assert table.loc["BM25 (IFIR)", "runnable"]
    assert not table.loc["ColBERTv2", "runnable"]
    assert "not in the Hugging Face cache" in table.loc["ColBERTv2", "reason"]
    assert not table.loc["GritLM-7B", "runnable"]
    reason = "weights of GritLM/GritLM-7B not in the Hugging Face cache or a local path"
    assert table.loc["GritLM-7B", "reason"] == reason


def test_each_row_says_what_running_its_card_needs(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty cache
    matrix = coverage_matrix()
    matrix = matrix[~matrix["model_key"].str.startswith("hybrid:")].set_index(["paper", "model"])
    promptriever = matrix["what you need"][("ifir", "Promptriever-7B")]
    assert promptriever.startswith("1 GPU, 20 GiB")
    assert "download meta-llama/Llama-2-7b-hf (gated), samaya-ai/promptriever-llama2-7b-v1" in promptriever
    needs = matrix["what you need"]
    assert needs[("ifir", "BM25")] == "" and matrix.loc[("ifir", "BM25"), "runnable"]


def test_a_row_of_no_card_of_its_own_says_how_to_write_one_and_keeps_a_borrowed_cards_needs_as_the_cards():
    # on the commit before, InstructIR's Promptriever row (whose only card is IFIR's) gave the IFIR card's GPU and
    # downloads as what it needs, though that card's number is only shown beside the row, never judged; a row of no
    # card said only "a system card (--cards FILE)", with no pointer to what a card file holds
    from instir.systems import load_cards

    matrix = coverage_matrix().set_index(["paper", "model_key"])
    borrowed = matrix.loc[("instructir", "samaya-ai/promptriever-llama2-7b-v1"), "what you need"]
    assert borrowed.startswith("no card reproduces this row's setup: write one ([[card]] entries in a TOML or YAML")
    assert "README.md, Paper systems" in borrowed and "--cards FILE" in borrowed
    said = "Promptriever-7B, the ifir paper's card (shown beside this row, not judged), needs: 1 GPU, 20 GiB"
    assert said in borrowed
    own = matrix.loc[("ifir", "samaya-ai/promptriever-llama2-7b-v1"), "what you need"]
    assert own.startswith("1 GPU, 20 GiB")
    cards = {name: card for name, card in load_cards().items() if "RepLLaMA" not in name}
    bare = coverage_matrix(cards=cards).set_index(["paper", "model_key"])
    none = bare.loc[("instructir", "castorini/repllama-v1-7b-lora-passage")]
    assert none["card"] == "" and none["what you need"].startswith("no card reproduces this row's setup: write one")


def test_a_row_joined_to_another_papers_card_gets_no_template_so_no_verdict():
    # the template is the setup a run must share to be judged on a row: a borrowed card's never is
    from instir.systems import get_card
    from instir.systems.coverage import with_row_templates

    rows = pd.DataFrame({"paper": ["instructir", "ifir"], "model_key": ["samaya-ai/promptriever-llama2-7b-v1"] * 2})
    templates = with_row_templates(rows)["card_template"].tolist()
    assert templates == ["", get_card("Promptriever-7B").template] and templates[1]


def test_a_row_of_no_card_cannot_run_and_a_borrowed_card_shows_its_own_numbers_beside_it(tmp_path):
    from instir.systems import load_cards

    (tmp_path / "metrics").mkdir()
    pd.DataFrame([{"system": "Promptriever-7B", "benchmark": "ifir/fiqa", "setting": "instructed", "subset": "fiqa",
                   "level": "all", "measure": "nDCG@20", "value": 0.25, "n_queries": 10}]
                 ).to_csv(tmp_path / "metrics" / "metrics.csv", index=False)
    matrix = coverage_matrix(tmp_path).set_index(["paper", "model_key"])
    borrowed = matrix.loc[("instructir", "samaya-ai/promptriever-llama2-7b-v1")]
    assert borrowed["reproduced"] == "ifir/fiqa fiqa nDCG@20=25.0"  # named by its benchmark: never taken for the row's
    cards = {name: card for name, card in load_cards().items() if "RepLLaMA" not in name}
    none = coverage_matrix(cards=cards).set_index(["paper", "model_key"]).loc[
        ("instructir", "castorini/repllama-v1-7b-lora-passage")]
    assert (none["runnable"], none["reason"], none["reproduced"]) == (False, "no system card", "")


def test_a_kit_variant_is_never_a_paper_rows_card_whatever_the_order_of_the_cards():
    import dataclasses

    from instir.systems import load_cards

    cards = load_cards()
    base = cards["Contriever"]
    mine = dataclasses.replace(base, name="Contriever (mine)", variant_of=base.name)
    matrix = coverage_matrix(cards={mine.name: mine, **cards})  # the variant first
    assert base.name in set(matrix["card"]) and mine.name not in set(matrix["card"])
