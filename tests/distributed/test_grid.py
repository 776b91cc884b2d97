"""Grid files and system names (no Ray needed)."""

import pytest

from instir.distributed.grid import GridError, load_grid, parse_grid
from instir.retrieval import BUNDLED_MODEL_ID
from instir.systems.specs import resolve_system


def test_system_strings_resolve_to_kind_model_label_and_resources():
    assert resolve_system("bm25").label == "bm25" and resolve_system("bm25").resources == {}
    dense = resolve_system("dense")
    assert (dense.kind, dense.model, dense.label) == ("dense", None, f"dense:{BUNDLED_MODEL_ID}")
    assert dense.resources == {}  # the bundled MiniLM runs on a CPU
    big = resolve_system("hybrid:GritLM/GritLM-7B")
    assert (big.kind, big.model, big.label) == ("hybrid", "GritLM/GritLM-7B", "hybrid:GritLM/GritLM-7B+bm25")
    assert big.resources == {"num_gpus": 1}


@pytest.mark.parametrize("name", ["bm25:x", "splade", "sparse:foo"])
def test_unknown_system_is_refused(name):
    with pytest.raises(ValueError, match="unknown system"):
        resolve_system(name)


def test_card_names_resolve_as_instir_retrieve_resolves_them_with_the_cards_resources():
    from instir.systems.registry import SystemRetriever

    grit = resolve_system("GritLM-7B")
    assert (grit.kind, grit.label, grit.card, grit.model) == ("system", "GritLM-7B", "GritLM-7B", "GritLM/GritLM-7B")
    assert grit.resources == {"num_gpus": 1.0, "memory_gb": 20.0}  # the card's, not the generic hint
    bm25 = resolve_system("bm25 (ifir)")  # case-insensitive, as --system
    assert (bm25.label, bm25.resources) == ("BM25 (IFIR)", {})
    built = bm25.factory()()
    assert isinstance(built, SystemRetriever) and built.card.name == "BM25 (IFIR)"
    colbert = resolve_system("colbert")  # a card name without its (...) suffix
    assert colbert.card == "ColBERT (IFIR, mean-pooled)"


@pytest.mark.parametrize("name,words", [("monoT5-base", "is a reranker"), ("BM25", "is ambiguous")])
def test_reranker_and_ambiguous_card_names_are_refused(name, words):
    with pytest.raises(ValueError, match=words):
        resolve_system(name)


def test_grid_cells_skip_settings_ifir_lacks():
    grid = parse_grid({"benchmarks": ["instructir-sample", "ifir-sample/fiqa"], "systems": ["bm25"],
                       "settings": ["instructed", "order-sensitivity"], "variants": ["instructed"]})
    assert [(c.benchmark, c.setting) for c in grid.cells()] == [
        ("instructir-sample", "instructed"), ("instructir-sample", "order-sensitivity"),
        ("ifir-sample/fiqa", "instructed")]
    labels = [c.run_label for c in grid.cells()]
    assert labels == ["bm25", "bm25 [order-sensitivity]", "bm25"]


def test_query_only_variant_is_labelled_as_notebook_02_labels_it():
    grid = parse_grid({"benchmarks": ["instructir-sample"], "systems": ["dense"]})
    assert [c.run_label for c in grid.cells()] == [f"dense:{BUNDLED_MODEL_ID}",
                                                   f"dense:{BUNDLED_MODEL_ID} (query-only)"]


def test_bad_system_in_grid_file_names_file_and_field(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_text("benchmarks: [instructir-sample]\nsystems: [bm25, splade]\n")
    with pytest.raises(GridError, match=r"grid\.yaml: field 'systems': unknown system 'splade'"):
        load_grid(path)


def test_unknown_field_and_broken_yaml_are_one_line_errors(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_text("benchmarks: [instructir-sample]\nsystems: [bm25]\nsytems: [dense]\n")
    with pytest.raises(GridError, match="unknown field.*sytems"):
        load_grid(path)
    path.write_text("benchmarks: [instructir-sample\nsystems: [bm25]\n")
    with pytest.raises(GridError, match=r"grid\.yaml:\d+: not valid YAML"):
        load_grid(path)


def test_cell_groups_put_model_systems_first_and_keep_one_benchmark_per_group():
    from instir.distributed.sweep import cell_groups

    grid = parse_grid({"benchmarks": ["instructir-sample", "ifir-sample/fiqa"], "systems": ["bm25", "dense"]})
    groups = [[(c.benchmark, c.system.name, c.variant) for c in g] for g in cell_groups(grid.cells())]
    assert groups == [
        [("instructir-sample", "dense", "instructed"), ("instructir-sample", "dense", "query-only")],
        [("ifir-sample/fiqa", "dense", "instructed"), ("ifir-sample/fiqa", "dense", "query-only")],
        [("instructir-sample", "bm25", "instructed"), ("instructir-sample", "bm25", "query-only")],
        [("ifir-sample/fiqa", "bm25", "instructed"), ("ifir-sample/fiqa", "bm25", "query-only")]]
