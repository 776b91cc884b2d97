"""Grid files and system names (no Ray needed)."""

import dataclasses

import pytest
from says import raises_saying, says

from instir.distributed.grid import Grid, GridError, load_grid, parse_grid
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
    labels = [c.label for c in grid.cells()]
    assert labels == ["bm25", "bm25 [order-sensitivity]", "bm25"]


def test_every_cell_of_a_grid_runs_to_the_grids_k_else_to_its_familys_depth():
    benchmarks = ["instructir-sample", "followir-sample/core17"]
    asked = parse_grid({"benchmarks": benchmarks, "systems": ["bm25"], "k": 20})
    assert [(c.benchmark, c.k) for c in asked.cells()] == [(b, 20) for b in benchmarks for _ in range(2)]
    default = parse_grid({"benchmarks": benchmarks, "systems": ["bm25"]})
    assert [c.k for c in default.cells()] == [100, 100, 1000, 1000]  # FollowIR's spec says 1000


def test_a_collection_name_in_a_grid_stands_for_its_benchmarks():
    grid = parse_grid({"benchmarks": ["followir-sample"], "systems": ["bm25"], "variants": ["instructed"]})
    assert [c.benchmark for c in grid.cells()] == ["followir-sample/news21", "followir-sample/core17"]


def test_query_only_variant_is_labelled_as_notebook_02_labels_it():
    grid = parse_grid({"benchmarks": ["instructir-sample"], "systems": ["dense"]})
    assert [c.label for c in grid.cells()] == [f"dense:{BUNDLED_MODEL_ID}",
                                                   f"dense:{BUNDLED_MODEL_ID} (query-only)"]


def test_bad_system_in_grid_file_names_file_and_field(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_text("benchmarks: [instructir-sample]\nsystems: [bm25, splade]\n")
    with raises_saying(GridError, "grid.yaml", "'systems'", "'splade'"):
        load_grid(path)


HEAD = "# my grid\nbenchmarks: [instructir-sample]\n\nsystems: [bm25]\n"  # benchmarks on line 2, systems on 4


@pytest.mark.parametrize("rest,said", [
    ('k: "10"\n', "grid.yaml:5: field 'k' takes a whole number"),
    ("variants: [yes]\n", "grid.yaml:5: field 'variants': unknown variant 'yes'"),
    ("judge: {backend: baseline, modl: x}\n", "grid.yaml:5: field 'judge.modl': unknown key 'modl'"),
    ("judge:\n  backend: baseline\n  colour: blue\n", "grid.yaml:7: field 'judge.colour': unknown key 'colour'"),
    ("judge:\n  backend: baseline\n\n  max_instances: 0\n", "grid.yaml:8: field 'judge.max_instances'"),
    ("judge:\n  backend: openai\n", "grid.yaml:5: field 'judge.model': the openai backend needs a model"),
    ("settings: [instructed]\nshard_min_docs: -1\n", "grid.yaml:6: field 'shard_min_docs'"),
    ("bogus: 1\n", "grid.yaml:5: unknown field(s) bogus"),
])
def test_a_bad_grid_value_names_the_line_of_its_field(tmp_path, rest, said):
    # on the commit before, each named the file and the field but no line: "grid.yaml: field 'k' takes …"
    path = tmp_path / "grid.yaml"
    path.write_text(HEAD + rest)
    with raises_saying(GridError, f"{path.parent}/{said}"):
        load_grid(path)
    path.write_text(HEAD.replace("[bm25]", "[bm26]") + rest)
    if "bogus" not in rest:  # the first mistake, on its line
        with raises_saying(GridError, f"{path.parent}/grid.yaml:4: field 'systems': unknown system 'bm26'"):
            load_grid(path)


def test_unknown_field_and_broken_yaml_are_one_line_errors(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_text("benchmarks: [instructir-sample]\nsystems: [bm25]\nsytems: [dense]\n")
    with pytest.raises(GridError, match=r"unknown field\(s\) sytems \(did you mean 'systems'\?\)"):
        load_grid(path)
    path.write_text("benchmarks: [instructir-sample\nsystems: [bm25]\n")
    with pytest.raises(GridError, match=r"grid\.yaml:\d+: not valid YAML"):
        load_grid(path)


def test_a_toml_grid_is_read_as_a_card_file_is_and_its_mistakes_are_named_at_their_line(tmp_path):
    # before, a grid.toml was read as YAML: "a grid is a mapping with benchmarks and systems, got 'benchmarks = …'"
    path = tmp_path / "grid.toml"
    path.write_text('benchmarks = ["instructir-sample"]\nsystems = ["bm25"]\n[judge]\nbackend = "baseline"\n')
    grid = load_grid(path)
    assert grid == parse_grid({"benchmarks": ["instructir-sample"], "systems": ["bm25"],
                               "judge": {"backend": "baseline"}})
    path.write_text('benchmarks = ["instructir-sample"]\nsystems = ["bm25"]\nk = "x"\n')
    with raises_saying(GridError, f"{path}:3: field 'k' takes a whole number"):
        load_grid(path)
    path.write_text('benchmarks = ["instructir-sample"\nsystems = ["bm25"]\n')
    with raises_saying(GridError, f"{path}: not valid TOML: ", "(at line 2"):
        load_grid(path)


@pytest.mark.parametrize("text, got", [("- instructir-sample\n- bm25\n", "['instructir-sample', 'bm25']"),
                                       ("just words\n", "'just words'"), ("", "None")],
                         ids=["list", "words", "empty"])
def test_a_grid_file_that_holds_no_mapping_is_one_line_saying_what_a_grid_is(tmp_path, text, got):
    # without the check, a list's items or a string's letters were called unknown fields, an empty file a TypeError
    path = tmp_path / "grid.yaml"
    path.write_text(text)
    with raises_saying(GridError, f"{path}: a grid is a mapping with benchmarks and systems, got {got}"):
        load_grid(path)


@pytest.mark.parametrize("text, said", [
    (b"benchmarks: [instructir-sample]\nsystems: [bm25]\nsystems: [dense]\n",
     "grid.yaml:3: key 'systems' is given twice (first on line 2)"),
    (b"benchmarks: [instructir-sample]\nsystems: [bm25]\n# caf\xe9\n", "grid.yaml:3: not UTF-8 text (byte 0xe9)"),
    (b"# my grid\nbenchmarks: [ifir-sample/fiqa]\nsystems: [bm25]\nsettings: [order-sensitivity]\n",
     "grid.yaml:4: the grid asks for no run"),
    (b"benchmarks: [instructir-sample]\nsystems: [bm25]\nk: @x\n", "grid.yaml:3: not valid YAML")],
    ids=["twice", "not-utf8", "no-run", "broken-yaml"])
def test_a_grid_file_the_reader_refuses_or_that_asks_for_no_run_is_named_at_its_line(tmp_path, text, said):
    path = tmp_path / "grid.yaml"
    path.write_bytes(text)
    with raises_saying(GridError, f"{path.parent}/{said}"):
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


# ------------------------------------------------------------------ every value checked before any cell


@pytest.mark.parametrize("extra,words", [
    ({"data_root": 123}, "field 'data_root' takes a folder path (a string), got 123"),
    ({"cache_dir": {"x": 1}}, "field 'cache_dir' takes a folder path (a string), got {'x': 1}"),
    ({"judge": {"backend": "baseline", "modle": "lexical"}},
     "field 'judge.modle': unknown key 'modle'; did you mean 'model'?"),
    ({"judge": {"backend": "baselin"}},
     "field 'judge.backend': backend 'baselin' (did you mean 'baseline'?); use one of openai, hf, baseline"),
    ({"judge": {"backend": "baseline", "max_instances": "x"}},
     "field 'judge.max_instances': max_instances must be a whole number from 1 to 10,000, got 'x'"),
    ({"judge": {"backend": "baseline", "requests_per_minute": "fast"}},
     "field 'judge.requests_per_minute' takes a positive number, got 'fast'"),
    ({"judge": {"backend": "openai"}}, "field 'judge.model': the openai backend needs a model"),
    ({"judge": {"backend": "openai", "model": "m", "base_url": "http://u:pw@localhost:8080/v1"}},
     "field 'judge.base_url' holds credentials"),
    ({"judge": {"backend": "baseline", "model": ["lexical"]}}, "field 'judge.model' takes a string, got ['lexical']"),
    ({"benchmarks": ["instructir-smaple"]},
     "field 'benchmarks': unknown benchmark 'instructir-smaple'; did you mean 'instructir-sample'?"),
    ({"settings": ["instructed", "order-sensitivty"]},
     "field 'settings': unknown setting 'order-sensitivty'; did you mean 'order-sensitivity'?"),
    ({"systems": ["bm25", "bm25"]}, "field 'systems': 'bm25' is given twice"),
    ({"systems": ["dense", f"dense:{BUNDLED_MODEL_ID}"]},
     f"field 'systems': 'dense' and 'dense:{BUNDLED_MODEL_ID}' are one system"),
    ({"systems": ["BM25 (IFIR)", "bm25 (ifir)"]}, "field 'systems': 'BM25 (IFIR)' and 'bm25 (ifir)' are one system"),
    ({"benchmarks": ["instructir-sample", "instructir-sample"]},
     "field 'benchmarks': 'instructir-sample' is given twice"),
    ({"k": "10"}, "field 'k' takes a whole number of at least 1 (at most 2,147,483,647), got '10'"),
    ({"systems": []}, "field 'systems' is empty: name at least one, e.g. 'bm25'"),  # ran 0 cells, exit 0
])
def test_a_bad_grid_value_is_refused_before_any_cell_naming_file_field_and_value(tmp_path, extra, words):
    # on main each of these was accepted: the cells then failed one by one, or a traceback came after all of them
    with pytest.raises(GridError) as err:
        parse_grid({"benchmarks": ["instructir-sample"], "systems": ["bm25"], **extra}, "grid.yaml")
    assert str(err.value).startswith("grid.yaml: ") and words in str(err.value) and "\n" not in str(err.value)


def test_instir_sweep_refuses_a_bad_grid_with_one_line_and_status_2_before_writing_anything(tmp_path, capsys):
    from instir.cli import main

    path = tmp_path / "grid.yaml"
    path.write_text("benchmarks: [instructir-sample, no-such-benchmark]\nsystems: [bm25]\n")
    assert main(["sweep", str(path), "--serial", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"instir sweep: {path}:1: field 'benchmarks': unknown benchmark 'no-such-benchmark'")
    assert err.count("\n") == 1 and not (tmp_path / "out").exists()


def test_a_large_grid_is_refused_without_yes_with_its_cell_count_and_estimate(tmp_path, capsys):
    from instir.benchmarks.registry import list_benchmarks
    from instir.cli import main
    from instir.cli.sweep import CONFIRM_CELLS

    names = list_benchmarks()
    systems = [f"dense:org/model-{i}" for i in range(10_000 // (2 * len(names)) + 1)]
    path = tmp_path / "grid.yaml"
    path.write_text(f"benchmarks: {names}\nsystems: {systems}\n")
    cells = len(names) * len(systems) * 2
    assert cells >= 10_000 > CONFIRM_CELLS
    assert main(["sweep", str(path), "--serial", "--out", str(tmp_path / "out")]) == 2  # on main: started at once
    err = capsys.readouterr().err
    assert err.startswith(f"instir sweep: {path}: {cells} cells ({len(names)} benchmarks x 1 setting x "
                          f"{len(systems)} systems x 2 variants); about ")
    assert "documents indexed or encoded" in err and err.endswith(f"more than {CONFIRM_CELLS} cells; add --yes "
                                                                   "to start them\n")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("systems", "options", "said"), [
    (200, [], "is not in the instir cache"),  # 200 cells start without --yes (here stopped by the data they lack)
    (201, [], "201 cells (1 benchmark x 1 setting x 201 systems x 1 variant)"),
    (201, ["--yes"], "is not in the instir cache")])
def test_a_grid_of_more_than_200_cells_waits_for_yes_and_one_of_200_does_not(tmp_path, capsys, systems, options,
                                                                             said):
    from instir.cli import main

    path = tmp_path / "grid.yaml"
    listed = ", ".join(f"'dense:org/model-{i}'" for i in range(systems))
    path.write_text(f"benchmarks: [ifir/fiqa]\nsystems: [{listed}]\nvariants: [instructed]\n")
    assert main(["sweep", str(path), "--serial", "--out", str(tmp_path / "out"), *options]) == 2
    err = capsys.readouterr().err
    assert said in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()
    assert ("add --yes" in err) == (said.startswith("201 cells"))


def test_the_estimate_counts_published_sizes_once_per_corpus_and_system():
    from instir.benchmarks import catalog
    from instir.distributed.grid import describe_estimate, grid_estimate

    grid = parse_grid({"benchmarks": ["instructir-sample", "ifir/fiqa"], "systems": ["bm25", "dense"]})
    fiqa = catalog.entry("ifir/fiqa").expected_counts()
    assert grid_estimate(grid) == {"cells": 8, "queries": 4 * fiqa["queries"], "documents": 2 * fiqa["documents"],
                                   "sample_cells": 4}
    assert describe_estimate(grid) == (f"8 cells (2 benchmarks x 1 setting x 2 systems x 2 variants); about "
                                       f"{4 * fiqa['queries']:,} queries searched, {2 * fiqa['documents']:,} "
                                       "documents indexed or encoded (published sizes); 4 cells on bundled samples")


def test_instir_sweep_without_ray_says_what_to_install_in_one_line(tmp_path, capsys, monkeypatch):
    import sys

    from instir.cli import main

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray now raises ModuleNotFoundError
    path = tmp_path / "grid.yaml"
    path.write_text("benchmarks: [instructir-sample]\nsystems: [bm25]\n")
    assert main(["sweep", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and not (tmp_path / "out").exists()
    says(err.strip(), "instir sweep", "ray", "pip install 'instir[distributed]'", "--serial")


def test_a_grid_of_samples_only_is_described_without_published_sizes_and_names_the_settings_a_family_lacks():
    from instir.distributed.grid import describe_estimate

    grid = parse_grid({"benchmarks": ["instructir-sample", "ifir-sample/fiqa"], "systems": ["bm25"],
                       "settings": ["instructed", "order-sensitivity", "query-only"]})
    # InstructIR: 3 settings x 2 variants, IFIR: 1 x 2
    assert describe_estimate(grid) == ("8 cells (2 benchmarks x 3 settings x 1 system x 2 variants, IFIR in the "
                                       "instructed setting only); 8 cells on bundled samples")


def test_a_grids_shard_min_docs_is_the_sweeps_else_20000():
    grid = {"benchmarks": ["instructir-sample"], "systems": ["dense"]}
    assert parse_grid({**grid, "shard_min_docs": 500}).shard_min_docs == 500
    assert parse_grid(grid).shard_min_docs == 20000
    # a Grid made in Python (public) without the field shards as a grid file without it does
    parsed = {f.name: getattr(parse_grid(grid), f.name) for f in dataclasses.fields(Grid) if f.name != "shard_min_docs"}
    assert Grid(**parsed).shard_min_docs == 20000


def test_a_grid_whose_settings_no_benchmark_has_is_refused_not_run_as_zero_cells():
    # on the commit before, instir sweep ran "0 cells: 0 done" and exited 0
    with pytest.raises(GridError, match=r"grid.yaml: the grid asks for no run: ifir-sample/fiqa has none of the "
                                        r"settings order-sensitivity"):
        parse_grid({"benchmarks": ["ifir-sample/fiqa"], "systems": ["bm25"], "settings": ["order-sensitivity"]},
                   "grid.yaml")


@pytest.mark.parametrize("rest,said", [
    ("variants: [instructed]\n", "add 'query-only' to 'variants' (line 5)"),
    ("variants: [query-only]\n", "add 'instructed' to 'variants' (line 5)"),
    ("settings: [order-sensitivity]\n", "add 'instructed' to 'settings' (line 5)"),
])
def test_a_grid_whose_judge_has_no_run_pair_to_judge_is_refused_before_any_cell(tmp_path, rest, said):
    # on the commit before, the sweep retrieved every cell, then said "FAILED judge: … lists no instructed and
    # query-only run" and exited 1, without paper_tables/
    path = tmp_path / "grid.yaml"
    path.write_text(HEAD + rest + "judge: {backend: baseline, model: lexical}\n")
    with raises_saying(GridError, "grid.yaml:6: field 'judge'", "instructed and query-only runs", said):
        load_grid(path)
    path.write_text(HEAD + rest)  # without a judge, the same cells are a grid
    assert load_grid(path).cells()


def test_a_systems_factory_builds_it_with_the_grids_embedding_cache():
    # the sweep's workers build each system with the grid's cache_dir (its embedding cache), not the default one
    factory = resolve_system("dense").factory("/tmp/embeddings")
    assert factory.args == ("dense",) and factory.keywords == {"cache_dir": "/tmp/embeddings"}
    assert resolve_system("bm25").factory().keywords == {}
