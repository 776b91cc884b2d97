"""The benchmark catalog: the one home of subsets, levels, domains, sources and counts."""

import pytest

from instir.benchmarks import catalog
from instir.benchmarks.types import Benchmark, Corpus
from instir.errors import UnknownNameError
from instir.papers.loader import load_reported


def test_ifir_subsets_come_in_the_papers_column_order():
    assert catalog.ifir_subsets() == ("fiqa", "scifact_open", "nfcorpus", "aila", "fire", "pm", "cds")
    assert [catalog.subset(s).printed for s in catalog.ifir_subsets()] == [
        "FiQA", "SciFact-open", "NFCorpus", "AILA", "FIRE", "TREC-PM", "TREC-CDS"]


def test_multi_level_subsets_have_levels_one_to_three_and_the_others_level_zero():
    assert catalog.multi_level_subsets() == ("fiqa", "scifact_open", "aila", "pm")
    assert catalog.single_level_subsets() == ("nfcorpus", "fire", "cds")
    assert all(catalog.subset(s).levels == (1, 2, 3) for s in catalog.multi_level_subsets())


def test_domains_follow_ifir_table_one():
    assert {s: catalog.subset(s).domain for s in catalog.ifir_subsets()} == {
        "fiqa": "finance", "scifact_open": "science", "nfcorpus": "science", "aila": "law", "fire": "law",
        "pm": "healthcare", "cds": "healthcare"}


@pytest.mark.parametrize(("name", "family"), [
    ("instructir", "instructir"), ("instructir-sample", "instructir"), ("ifir/fiqa", "ifir"),
    ("ifir-sample/pm", "ifir"), ("ifir-toy/fiqa", "ifir"), ("toy", None), ("ifirx/fiqa", None)])
def test_family_of_reads_the_part_before_the_slash(name, family):
    assert catalog.family_of(name) == family


def test_benchmark_family_asks_the_catalog():
    bench = Benchmark("ifir-sample/aila", "test", "local", "instructed", Corpus.from_docs([]), {}, {})
    assert bench.family == "ifir"


def test_only_names_whose_head_ends_in_sample_are_samples():
    assert catalog.is_sample("instructir-sample") and catalog.is_sample("ifir-sample/fire")
    assert not catalog.is_sample("ifir/fire") and not catalog.is_sample("instructir")


def test_an_unknown_subset_is_refused_with_the_closest_name():
    with pytest.raises(UnknownNameError, match="did you mean 'scifact_open'"):
        catalog.subset("scifact")


def test_sources_keep_the_default_layout_first_and_pin_mteb_per_subset():
    assert list(catalog.family("instructir").sources) == ["hf", "mteb"]
    assert list(catalog.family("ifir").sources) == ["songtingyu", "mteb"]
    assert catalog.family("ifir").sources["mteb"].pinned("aila") == ("if-ir/aila", "1cb8772")
    assert catalog.family("instructir").sources["hf"].pinned(None) == (
        "kaist-ai/InstructIR", "1615ed0ee07d6d33b0082362f008bfe62041a54b")


def test_expected_counts_use_mtebs_query_count_only_for_the_mteb_layout():
    assert catalog.expected_counts("instructir") == {"queries": 9906, "groups": 1267, "documents": 16072}
    assert catalog.expected_counts("ifir", "fire") == {"queries": 168, "documents": 1745}
    assert catalog.expected_counts("ifir", "fire", "mteb") == {"queries": 167, "documents": 1745}
    assert catalog.expected_counts("ifir", "aila", "mteb") == {"queries": 85, "documents": 2914}


def test_the_papers_reported_subset_names_are_the_catalogs_printed_names():
    printed = set(catalog.subset_by_printed_name())
    ifir = load_reported("ifir")
    assert set(ifir["subset"].dropna()) - {"avg", "all"} == printed
    assert set(ifir.loc[ifir["subset"].isin(printed), "subset_id"]) == set(catalog.ifir_subsets())


def test_the_mteb_results_tasks_are_the_catalogs_mteb_task_names():
    reported = load_reported("mteb")
    ifir_tasks = {t for t in reported["task"] if str(t).startswith("IFIR")}
    assert ifir_tasks == set(catalog.subset_by_mteb_task())
    assert set(reported.loc[reported["task"].isin(ifir_tasks), "subset_id"]) == set(catalog.ifir_subsets())
