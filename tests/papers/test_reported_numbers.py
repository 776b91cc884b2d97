"""The reported numbers load with exact counts, first/last rows, parsed values, scales,
secondary flags and model keys."""

import pandas as pd
import pytest

from instir.papers import canonical_measure, load_reported, model_key, paper_models, paper_names_for


@pytest.mark.parametrize("paper, rows", [("ifir", 1013), ("instructir", 26), ("followir", 192),
                                         ("mteb", 287)])
def test_reported_tables_have_exact_row_counts(paper, rows):
    assert len(load_reported(paper)) == rows


def test_ifir_first_and_last_rows_are_as_printed():
    table = load_reported("ifir")
    first, last = table.iloc[0], table.iloc[-1]
    assert (first["table"], first["model"], first["model_hf_id"], first["subset"], first["metric"]) == (
        "Table 3", "GTR-XL", "sentence-transformers/gtr-t5-xl", "FiQA", "nDCG@20")
    assert first["value"] == 0.44 and first["source_url"] == "https://arxiv.org/html/2503.04644v1#S3.T3"
    assert (first["subset_id"], first["measure"], first["scale"], first["secondary"]) == ("fiqa", "nDCG@20", 1.0, False)
    assert pd.isna(first["level"])
    assert last["metric"] == "Pearson r (instance level)" and last["value"] == 0.704


def test_ifir_table_sizes_match_the_paper_tables():
    sizes = load_reported("ifir").groupby("table").size()
    assert sizes["Table 3"] == 240 and sizes["Table 10"] == 180 and sizes["Table 11"] == 180
    assert sizes["Table 8 (end-to-end retrieval)"] == 240 and sizes["Table 1"] == 21


def test_printed_thousands_separators_become_numbers():
    table = load_reported("ifir")
    row = table[(table["table"] == "Table 1") & (table["subset_id"] == "scifact_open")
                & (table["metric"] == "Corpus Size")].iloc[0]
    assert row["value_printed"] == "500,000" and row["value"] == 500000.0


def test_instfol_is_printed_in_percent_and_ndcg_on_unit_scale():
    table = load_reported("ifir")
    assert set(table.loc[table["measure"] == "InstFol@20", "scale"]) == {100.0}
    assert set(table.loc[table["measure"] == "nDCG@20", "scale"]) == {1.0}


def test_per_level_tables_carry_levels_one_to_three():
    table = load_reported("ifir")
    levels = table.loc[table["table"] == "Table 10", "level"]
    assert levels.dtype == "Int64" and sorted(levels.unique()) == [1, 2, 3]
    assert set(table.loc[table["table"] == "Table 10", "subset_id"]) == {"fiqa", "scifact_open", "aila", "pm"}


def test_printed_rounding_is_half_the_last_digit():
    table = load_reported("ifir")
    assert table.loc[table["value_printed"] == "0.44", "rounding"].iloc[0] == pytest.approx(0.005)
    assert table.loc[table["value_printed"] == "0.392", "rounding"].iloc[0] == pytest.approx(0.0005)


def test_instructir_only_the_paper_numbers_are_primary():
    table = load_reported("instructir")
    primary = table[~table["secondary"]]
    assert list(primary["model"]) == ["RepLLaMA", "RepLLaMA"]
    assert list(primary["measure"]) == ["Robustness@10", "nDCG@10"] and list(primary["value"]) == [52.58, 87.62]
    promptriever = table[table["table"].str.contains("Promptriever")]
    assert len(promptriever) == 16 and promptriever["secondary"].all()
    assert set(promptriever["scale"]) == {100.0}


def test_instructir_first_row_keeps_its_source():
    first = load_reported("instructir").iloc[0]
    assert first["source_url"] == "https://arxiv.org/abs/2402.14334"
    assert first["reference"].startswith("InstructIR paper")


def test_mteb_rows_are_secondary_with_levels_and_settings():
    table = load_reported("mteb")
    assert table["secondary"].all()
    first = table.iloc[0]
    assert (first["task"], first["model"], first["metric"], first["value"]) == (
        "IFIRAila", "GritLM/GritLM-7B", "main_score(ndcg_at_20)", 0.08717)
    level2 = table[(table["metric"] == "ndcg_at_20_level_2") & (table["model"] == "GritLM/GritLM-7B")
                   & (table["subset_id"] == "aila")].iloc[0]
    assert (level2["measure"], level2["level"], level2["value"]) == ("nDCG@20", 2, 0.026533)
    legacy = table[table["benchmark"] == "instructir"]
    assert len(legacy) == 12 and set(legacy["setting"]) == {"instructed", "query-only"}
    assert table["source_path"].str.startswith("embeddings-benchmark/results:").all()


def test_unknown_paper_is_refused():
    with pytest.raises(ValueError, match="unknown paper"):
        load_reported("beir")


@pytest.mark.parametrize("name, expected", [
    ("GTR-XL", "sentence-transformers/gtr-t5-xl"),
    ("gtr-xl", "sentence-transformers/gtr-t5-xl"),
    ("BM25", "bm25"),
    ("bm25s", "bm25"),
    ("E5-mistral-7b-inst", "intfloat/e5-mistral-7b-instruct"),
    ("sentence-transformers/all-MiniLM-L6-v2", "sentence-transformers/all-minilm-l6-v2"),
    ("dense:sentence-transformers/all-MiniLM-L6-v2", "sentence-transformers/all-minilm-l6-v2"),
    ("OpenAI-v3-large", "openai:text-embedding-3-large"),
])
def test_model_key_maps_paper_names_ids_and_aliases(name, expected):
    assert model_key(name) == expected


def test_model_key_applies_the_callers_map_first():
    assert model_key("my-run", {"my-run": "GTR-Base"}) == "sentence-transformers/gtr-t5-base"


def test_paper_names_and_hf_ids_map_both_ways():
    models = paper_models("ifir").set_index("model")["model_hf_id"]
    assert models["Contriever"] == "facebook/contriever" and models["BM25"] == ""
    assert paper_names_for("intfloat/e5-mistral-7b-instruct") == ["E5-mistral-7B", "E5-mistral-7b-inst"]
    assert len(models) == 16


@pytest.mark.parametrize("name, expected", [
    ("MRR@20", ("RR@20", "")),
    ("nDCG@20[ifir-native]", ("nDCG@20", "ifir-native")),
    ("ndcg_at_20", ("nDCG@20", "")),
    ("recall_at_20", ("R@20", "")),
    ("hit_rate_at_10", ("Success@10", "")), ("NDCG_AT_10", ("nDCG@10", "")),  # the measures' one table
    ("Robustness(nDCG@10)", ("Robustness@10", "")),
    ("InstFol@20", ("InstFol@20", "")),
    ("main_score(ndcg_at_20)", ("main_score(ndcg_at_20)", "")),
    ("ndcg@\u0661\u0660", ("ndcg@\u0661\u0660", "")),  # no cutoff pytrec_eval reads: left as it is, as parse_measure
])
def test_canonical_measure_names(name, expected):
    assert canonical_measure(name) == expected


@pytest.mark.parametrize("paper", ["ifir", "instructir", "followir"])
def test_the_names_a_paper_prints_for_a_model_are_those_of_its_rows_the_comparison_aligns(paper):
    # before, FollowIR's "Contriever" (its row: contriever-msmarco) was named for facebook/contriever, IFIR's model:
    # notebook 05's "how system names match" table sent a run of one model to the row the comparison gave the other
    reported = load_reported(paper)
    # a hybrid row prints its dense model's name
    rows = reported[(reported["model_key"] != "") & ~reported["model_key"].str.startswith("hybrid:")]
    rows = rows.drop_duplicates(["model", "model_key"])
    for model, key in rows[["model", "model_key"]].itertuples(index=False):
        assert model in paper_names_for(key, paper), (model, key)
    if paper == "followir":
        assert paper_names_for("facebook/contriever-msmarco", paper) == ["Contriever"]
        assert "Contriever" not in paper_names_for("facebook/contriever", paper)


def test_every_ifir_number_keeps_the_paper_url_it_was_copied_from():
    table = load_reported("ifir")
    assert table["source"].str.startswith("https://").all()
    assert table["source"].tolist() == table["source_url"].tolist()


def test_instructir_reranking_rows_are_the_reranker_variant_not_a_retrieval_setup():
    # Promptriever's Table 2 reranks with FollowIR-7B and Mistral-7B-instruct (its setting ..._reranking)
    table = load_reported("instructir")
    rerankers = table["model"].isin(["FollowIR-7B", "Mistral-7B-instruct"])
    assert rerankers.sum() == 4 and set(table.loc[rerankers, "variant"]) == {"reranker"}
    assert set(table.loc[~rerankers, "variant"]) == {""}


def test_followir_scores_over_both_halves_are_not_read_as_the_original_half():
    rows = load_reported("followir")
    scores = rows[rows["metric"].str.startswith("Score")]
    assert len(scores) and (scores["measure"] == scores["metric"]).all()


def test_ifir_numbers_printed_for_all_subsets_keep_the_all_subset():
    rows = load_reported("ifir")
    assert set(rows.loc[rows["subset"] == "all", "subset_id"]) == {"all"}


def test_a_number_printed_without_decimals_rounds_to_half_a_unit():
    rows = load_reported("ifir")
    whole = rows[~rows["value_printed"].str.contains(".", regex=False)]
    assert len(whole) and set(whole["rounding"]) == {0.5}


def test_a_reported_table_changed_by_its_caller_is_not_what_the_next_caller_gets():
    mine = load_reported("ifir")
    mine["value"] = -1.0  # a notebook rescaling the numbers in place
    mine["model"] = "mine"
    again = load_reported("ifir")
    assert again["value"].iloc[0] == 0.44 and again["model"].iloc[0] == "GTR-XL"  # as printed (Table 3, FiQA)
