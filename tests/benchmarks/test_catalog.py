"""The benchmark catalog: each family one spec kept as data (families/*.toml), the one home of
subsets, levels, domains, sources, counts, settings, measures and templates; names resolve
through it, never by their shape."""

from dataclasses import replace

import pytest

from instir.benchmarks import catalog
from instir.benchmarks.types import Benchmark, Corpus
from instir.errors import UnknownNameError
from instir.papers.loader import load_reported
from tests.benchmarks import bundled_specs

IFIR = catalog.family("ifir")
INSTRUCTIR = catalog.family("instructir")


def test_ifir_subsets_come_in_the_papers_column_order():
    assert list(IFIR.subsets) == ["fiqa", "scifact_open", "nfcorpus", "aila", "fire", "pm", "cds"]
    assert [s.printed for s in IFIR.subsets.values()] == [
        "FiQA", "SciFact-open", "NFCorpus", "AILA", "FIRE", "TREC-PM", "TREC-CDS"]


def test_multi_level_subsets_have_levels_one_to_three_and_the_others_level_zero():
    assert [s.id for s in IFIR.subsets.values() if s.multi_level] == ["fiqa", "scifact_open", "aila", "pm"]
    assert [s.id for s in IFIR.subsets.values() if not s.multi_level] == ["nfcorpus", "fire", "cds"]
    assert all(s.levels == (1, 2, 3) for s in IFIR.subsets.values() if s.multi_level)


def test_domains_follow_ifir_table_one():
    assert {s.id: s.domain for s in IFIR.subsets.values()} == {
        "fiqa": "finance", "scifact_open": "science", "nfcorpus": "science", "aila": "law", "fire": "law",
        "pm": "healthcare", "cds": "healthcare"}


def test_the_families_and_their_benchmarks_come_from_the_specs_in_order():
    # the expected lists come from the spec files and sample folders themselves (bundled_specs.py), so a family
    # added to the package is checked here without an edit
    assert catalog.families() == bundled_specs.ORDER
    assert list(catalog.entries()) == [*bundled_specs.SAMPLES, *bundled_specs.REAL]
    assert {"instructir-sample", "ifir-sample/fiqa", "ifir/cds", "followir/robust04"} <= set(catalog.entries())
    entry = catalog.entry("ifir-sample/fiqa")
    assert (entry.family.name, entry.subset.id, entry.sample, entry.collection) == ("ifir", "fiqa", True,
                                                                                    "ifir-sample")


@pytest.mark.parametrize(("name", "family"), [
    ("instructir", "instructir"), ("instructir-sample", "instructir"), ("ifir/fiqa", "ifir"),
    ("ifir-sample/pm", None), ("ifir-sample", "ifir"), ("ifir-toy/fiqa", None), ("toy", None), ("ifirx/fiqa", None)])
def test_family_of_resolves_names_through_the_catalog_never_by_their_shape(name, family):
    # ifir-sample/pm has the shape of a sample name, but the bundled sample holds no pm
    assert catalog.family_of(name) == family


def test_a_benchmark_asks_the_catalog_for_its_family_unless_it_names_one():
    bench = Benchmark("ifir-sample/fiqa", "test", "local", "instructed", Corpus.from_docs([]), {}, {})
    assert bench.family == "ifir" and bench.spec is IFIR
    mine = Benchmark("ifir-toy/fiqa", "test", "local", "instructed", Corpus.from_docs([]), {}, {})
    assert mine.family is None and mine.spec is None
    named = Benchmark("mine", "test", "local", "instructed", Corpus.from_docs([]), {}, {}, family="ifir")
    assert named.spec is IFIR


def test_only_the_bundled_samples_are_samples():
    assert catalog.is_sample("instructir-sample") and catalog.is_sample("ifir-sample/nfcorpus")
    assert catalog.is_sample("ifir-sample")  # the collection a sample's subsets are averaged under
    assert not catalog.is_sample("ifir/fire") and not catalog.is_sample("instructir")
    assert not catalog.is_sample("my-sample/fire")


def test_a_sample_stands_for_the_benchmark_it_samples():
    assert catalog.unsampled("ifir-sample/fiqa") == "ifir/fiqa"
    assert catalog.unsampled("ifir-sample") == "ifir" and catalog.unsampled("instructir-sample") == "instructir"
    assert catalog.unsampled("ifir/fiqa") == "ifir/fiqa" and catalog.unsampled("toy") == "toy"


def test_an_unknown_subset_or_name_is_refused_with_the_closest_one():
    with pytest.raises(UnknownNameError, match="did you mean 'scifact_open'"):
        IFIR.subset("scifact")
    with pytest.raises(UnknownNameError, match="did you mean 'ifir-sample/fiqa'"):
        catalog.entry("ifir-sample/fiq")


def test_sources_keep_the_default_layout_first_and_pin_mteb_per_subset():
    assert list(INSTRUCTIR.sources) == ["hf", "mteb"]
    assert list(IFIR.sources) == ["songtingyu", "mteb"]
    assert IFIR.sources["mteb"].pinned("aila") == ("if-ir/aila", "1cb8772")
    assert INSTRUCTIR.sources["hf"].pinned(None) == (
        "kaist-ai/InstructIR", "1615ed0ee07d6d33b0082362f008bfe62041a54b")


def test_expected_counts_use_mtebs_query_count_only_for_the_mteb_layout():
    assert catalog.entry("instructir").expected_counts() == {"queries": 9906, "groups": 1267, "documents": 16072}
    assert catalog.entry("ifir/fire").expected_counts() == {"queries": 168, "documents": 1745}
    assert catalog.entry("ifir/fire").expected_counts("mteb") == {"queries": 167, "documents": 1745}
    assert catalog.entry("ifir/aila").expected_counts("mteb") == {"queries": 85, "documents": 2914}


def test_a_family_spec_says_its_settings_variants_measures_and_headline():
    assert INSTRUCTIR.settings[0] == "instructed" and "order-sensitivity" in INSTRUCTIR.settings
    assert IFIR.settings == ("instructed",)
    assert INSTRUCTIR.pair == IFIR.pair == ("instructed", "query-only")
    assert INSTRUCTIR.variants == ("instructed", "query-only") and INSTRUCTIR.variant_template("instructed") is None
    assert IFIR.variant_template("query-only") == "query-only"
    assert INSTRUCTIR.measures == ("nDCG@10", "RR@10", "R@100", "P@10") and INSTRUCTIR.derived == ("Robustness",)
    assert IFIR.headline == ("nDCG@20", "nDCG@20[ifir-native]") and IFIR.average and not INSTRUCTIR.average
    assert INSTRUCTIR.template_for("bm25") == "instructir"
    assert INSTRUCTIR.template_for("bm25", "order-sensitivity") == "instructir-query-first"
    assert INSTRUCTIR.template_for("instructor", "order-sensitivity") is None  # only bm25 and dense have one
    assert IFIR.template_for("repllama") is None


def test_every_spec_names_a_loader_module_with_a_load_function():
    for name in catalog.families():
        assert callable(catalog.family(name).loader_module().load), name


def test_a_collection_name_stands_for_its_benchmarks_in_the_catalogs_order():
    assert catalog.expand(["followir-sample", "instructir-sample", "ifir/fiqa", "followir-sample/core17"]) == [
        "followir-sample/news21", "followir-sample/core17", "instructir-sample", "ifir/fiqa"]
    assert catalog.expand(["no-such-name"]) == ["no-such-name"]


def test_a_source_per_subset_pins_each_subsets_repo_and_revision():
    followir = catalog.family("followir")
    assert followir.sources["mteb"].pinned("core17") == ("mteb/Core17InstructionRetrieval",
                                                         "67d8733dd0691f08f34ed9dda5941578cba8d91c")
    assert followir.sources["jhu-clsp"].pinned("robust04") == ("jhu-clsp/robust04-instructions",
                                                               "a5a1c4fe2bc528ac12e83f8cdf82178da85d2f1d")
    assert followir.rerank and not IFIR.rerank


def test_a_family_without_a_sample_folder_has_no_sample_names():
    assert replace(INSTRUCTIR, sample="no-such-sample").sample_benchmarks() == []
    assert IFIR.sample_benchmarks() == ["ifir-sample/fiqa", "ifir-sample/nfcorpus"]


def test_the_papers_reported_subset_names_are_the_catalogs_printed_names():
    printed = {s.printed for s in IFIR.subsets.values()}
    ifir = load_reported("ifir")
    assert set(ifir["subset"].dropna()) - {"avg", "all"} == printed
    assert set(ifir.loc[ifir["subset"].isin(printed), "subset_id"]) == set(IFIR.subsets)


def test_the_mteb_results_tasks_are_the_catalogs_mteb_task_names():
    reported = load_reported("mteb")
    ifir_tasks = {t for t in reported["task"] if str(t).startswith("IFIR")}
    assert ifir_tasks == {s.mteb_task for s in IFIR.subsets.values()}
    assert set(reported.loc[reported["task"].isin(ifir_tasks), "subset_id"]) == set(IFIR.subsets)
    assert list(catalog.mteb_tasks()) == ["InstructIR", *(s.mteb_task for s in IFIR.subsets.values()),
                                          "Robust04InstructionRetrieval", "News21InstructionRetrieval",
                                          "Core17InstructionRetrieval"]


def test_an_unknown_variant_is_refused_with_the_closest_one():
    with pytest.raises(UnknownNameError, match="unknown IFIR variant 'query_only'.*did you mean 'query-only'"):
        IFIR.variant_template("query_only")


def test_an_mteb_task_carries_its_specs_measures_flags_and_revision():
    for family in ("instructir", "followir"):
        spec = bundled_specs.SPECS[family]
        task = catalog.entry(catalog.family(family).benchmarks()[0]).mteb_task()
        assert task.measures == tuple(spec["mteb"]["measures"])
        assert (task.origin_query, task.pairwise) == (spec["mteb"].get("origin_query", False),
                                                      spec["mteb"].get("pairwise", False))
    assert catalog.entry("instructir").mteb_task().origin_query  # the two flags differ: a swap shows
    assert catalog.entry("instructir").mteb_task().revision == next(
        s["revision"] for s in bundled_specs.SPECS["instructir"]["sources"] if s["layout"] == "mteb")
    assert catalog.entry("ifir/aila").mteb_task().revision == IFIR.subsets["aila"].mteb_revision != ""


def test_a_name_outside_the_catalog_is_its_own_collection():
    assert catalog.collection_of("ifir-sample/fiqa") == "ifir-sample" and catalog.collection_of("ifir") == "ifir"
    assert catalog.collection_of("mine/part") == "mine/part" and catalog.collection_of("toy") == "toy"


def test_a_family_without_a_spec_file_points_at_its_spec_by_name():
    assert replace(INSTRUCTIR, spec_file=None).at("loader") == "<family spec>"
    assert INSTRUCTIR.at("loader").startswith(f"{INSTRUCTIR.spec_file}:")
