"""Benchmarks by name: bundled samples, real ones from the cache or a root, the revision
from the fetch manifest, clear errors, no network, and ``instir summary``."""

import argparse
import importlib.metadata
import shutil
from pathlib import Path

import huggingface_hub
import pytest
from says import raises_saying, says

from instir.benchmarks import list_benchmarks, load_benchmark, sample_benchmarks
from instir.cli import main
from instir.cli.data import register
from instir.errors import UsageError
from tests.benchmarks import bundled_specs
from tests.conftest import write_fetch_manifest

FIXTURES = Path(__file__).parent / "fixtures"
BUNDLED = f"bundled-{importlib.metadata.version('instir')}"


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Loading must never reach the Hub: any attempt fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("the network was used while loading")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", refuse)
    monkeypatch.setattr(huggingface_hub, "HfApi", refuse)


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """An empty instir cache of this test's own."""
    monkeypatch.setenv("INSTIR_HOME", str(tmp_path))
    return tmp_path


def test_list_benchmarks_names_samples_then_real_benchmarks():
    assert list_benchmarks() == [*bundled_specs.SAMPLES, *bundled_specs.REAL]
    assert sample_benchmarks() == bundled_specs.SAMPLES
    assert "ifir-sample/pm" not in sample_benchmarks()  # the bundled IFIR sample holds fiqa and nfcorpus only


def test_samples_load_as_samples_with_the_bundled_revision():
    for name in sample_benchmarks():
        bench = load_benchmark(name)
        assert bench.name == name and bench.is_sample and bench.revision == BUNDLED
        assert "SAMPLE" in bench.label


def test_instructir_sample_passes_the_setting_on():
    bench = load_benchmark("instructir-sample", "query-only")
    assert bench.setting == "query-only" and all(q.instruction == "" for q in bench.queries.values())


def test_ifir_has_only_the_instructed_setting():
    with pytest.raises(ValueError, match="only the 'instructed' setting"):
        load_benchmark("ifir-sample/fiqa", "query-only")


@pytest.mark.parametrize("name", ["msmarco", "ifir/robust04", "ifir-sample/pm", "instructir/fiqa"])
def test_unknown_names_are_refused_with_the_known_ones(name):
    with pytest.raises(ValueError) as info:
        load_benchmark(name)
    assert f"unknown benchmark {name!r}" in str(info.value) and "ifir-sample/fiqa" in str(info.value)


@pytest.mark.parametrize("name, members", [
    ("followir-sample", "2 benchmarks (followir-sample/news21, followir-sample/core17)"),
    ("ifir", "7 benchmarks (ifir/fiqa, ifir/scifact_open, ifir/nfcorpus, ifir/aila, ifir/fire, ifir/pm, ifir/cds)"),
])
def test_a_collections_name_is_refused_naming_its_benchmarks(name, members, tmp_path, capsys):
    # before, "unknown benchmark 'followir-sample'; did you mean 'followir-sample/news21'?", as if a typo
    with raises_saying(UsageError, f"{name!r} is a collection of {members}: this takes one of them"):
        load_benchmark(name)
    for command in (["evaluate", "--run", str(tmp_path / "x.trec")], ["retrieve", "--retriever", "bm25"]):
        assert main([*command, "--benchmark", name, "--out", str(tmp_path / "out")]) == 2
        says(capsys.readouterr().err, f"{name!r} is a collection of {members}")
    if name == "followir-sample":  # instir summary takes several names: a collection's are its benchmarks
        assert main(["summary", name]) == 0
        assert capsys.readouterr().out.count("followir-sample/") == 2


@pytest.mark.parametrize("name", [Path("instructir-sample"), Path("ifir-sample/fiqa")])
def test_a_path_is_refused_as_a_benchmarks_name(name):
    # before, Path("instructir-sample") loaded with a PosixPath for its name, Path("ifir-sample/fiqa") an AttributeError
    with raises_saying(UsageError, "a benchmark's name is a str, got PosixPath(", "pass the name as text"):
        load_benchmark(name)


@pytest.mark.parametrize("name,command", [("ifir/fiqa", "instir fetch ifir --subset fiqa"),
                                          ("instructir", "instir fetch instructir")])
def test_a_real_benchmark_not_in_the_cache_says_how_to_fetch_it(home, name, command):
    with pytest.raises(FileNotFoundError) as info:
        load_benchmark(name)
    assert f"`{command}`" in str(info.value) and str(home) in str(info.value)
    assert "--root" in str(info.value)


def _cache(layout_dir: Path, source: Path, revision: str) -> None:
    """``source`` as instir fetch leaves it in ``layout_dir``: the files and a manifest listing them."""
    shutil.copytree(source, layout_dir)
    write_fetch_manifest(layout_dir, revision)


def test_a_fetched_ifir_subset_loads_from_the_cache_with_the_manifest_revision(home):
    _cache(home / "ifir" / "songtingyu" / "fire", FIXTURES / "ifir-songtingyu" / "fire", "a" * 40)
    bench = load_benchmark("ifir/fire")
    assert (bench.name, bench.layout, bench.revision, bench.is_sample) == ("ifir/fire", "songtingyu", "a" * 40, False)


def test_the_mteb_copy_is_used_when_it_is_the_only_one_cached(home):
    _cache(home / "ifir" / "mteb" / "fiqa", FIXTURES / "ifir-mteb" / "fiqa", "b" * 40)
    bench = load_benchmark("ifir/fiqa")
    assert (bench.layout, bench.revision, len(bench.queries)) == ("mteb", "b" * 40, 6)


def test_a_fetched_instructir_loads_from_the_cache(home):
    _cache(home / "instructir" / "hf", FIXTURES / "instructir-hf", "c" * 40)
    bench = load_benchmark("instructir")
    assert (bench.name, bench.layout, bench.revision) == ("instructir", "hf", "c" * 40)


def test_a_root_without_a_manifest_loads_as_local():
    bench = load_benchmark("ifir/fire", root=FIXTURES / "ifir-beir")
    assert (bench.layout, bench.revision, len(bench.queries)) == ("songtingyu-beir", "local", 2)
    assert load_benchmark("instructir", root=FIXTURES / "instructir-hf").revision == "local"


def test_a_relative_root_is_recorded_as_the_folder_it_names(tmp_path, monkeypatch):
    shutil.copytree(FIXTURES / "ifir-beir", tmp_path / "data")
    (tmp_path / "link").symlink_to(tmp_path / "data")
    monkeypatch.chdir(tmp_path)
    assert load_benchmark("ifir/fire", root="link").source == str(tmp_path / "data" / "fire")
    bench = load_benchmark("ifir/fire", root="data/../data")
    # before, 'link/fire' and 'data/../data/fire': a report's record named a folder only the shell it was run
    # from could find, and one folder two ways
    assert bench.source == str(tmp_path / "data" / "fire")
    assert bench.queries == load_benchmark("ifir/fire", root=tmp_path / "data").queries


def test_samples_come_from_the_package_whatever_the_root(tmp_path):
    for root in (FIXTURES / "instructir-hf", FIXTURES / "ifir-mteb", tmp_path / "missing"):
        for name in sample_benchmarks():
            bench = load_benchmark(name, root=root)
            assert bench.is_sample and bench.revision == BUNDLED
            assert bench.queries == load_benchmark(name).queries


def test_a_data_root_laid_out_like_the_cache_serves_both_benchmarks(tmp_path):
    shutil.copytree(FIXTURES / "instructir-hf", tmp_path / "instructir" / "hf")
    shutil.copytree(FIXTURES / "ifir-songtingyu" / "fire", tmp_path / "ifir" / "songtingyu" / "fire")
    _cache(tmp_path / "ifir" / "mteb" / "fiqa", FIXTURES / "ifir-mteb" / "fiqa", "d" * 40)
    loaded = {name: load_benchmark(name, root=tmp_path) for name in ("instructir", "ifir/fire", "ifir/fiqa")}
    assert {name: (b.layout, b.revision, b.is_sample) for name, b in loaded.items()} == {
        "instructir": ("hf", "local", False), "ifir/fire": ("songtingyu", "local", False),
        "ifir/fiqa": ("mteb", "d" * 40, False)}
    direct = load_benchmark("ifir/fire", root=FIXTURES / "ifir-songtingyu")  # a benchmark folder still works
    assert loaded["ifir/fire"].queries == direct.queries and loaded["ifir/fire"].qrels == direct.qrels


def test_a_data_root_may_hold_the_instructir_github_release_as_a_layout(tmp_path):
    """The README's way: the GitHub release with Hugging Face's corpus.jsonl beside it, in
    ``<root>/instructir/github/`` next to IFIR's ``<root>/ifir/songtingyu/``."""
    shutil.copytree(FIXTURES / "instructir-github", tmp_path / "instructir" / "github")
    shutil.copytree(FIXTURES / "ifir-songtingyu" / "fire", tmp_path / "ifir" / "songtingyu" / "fire")
    bench = load_benchmark("instructir", root=tmp_path)
    direct = load_benchmark("instructir", root=FIXTURES / "instructir-github")
    assert (bench.layout, bench.revision, bench.is_sample) == ("github", "local", False)
    assert bench.queries == direct.queries and bench.qrels == direct.qrels
    assert load_benchmark("instructir", "query-only", root=tmp_path).setting == "query-only"
    shutil.copytree(FIXTURES / "instructir-hf", tmp_path / "instructir" / "hf")
    assert load_benchmark("instructir", root=tmp_path).layout == "hf"  # a downloaded layout comes first


def test_the_github_layout_is_not_looked_for_in_the_cache(home):
    shutil.copytree(FIXTURES / "instructir-github", home / "instructir" / "github")
    with pytest.raises(FileNotFoundError, match="instir fetch instructir"):
        load_benchmark("instructir")


def test_the_default_layout_wins_in_a_data_root_holding_both(tmp_path):
    shutil.copytree(FIXTURES / "ifir-mteb" / "fire", tmp_path / "ifir" / "mteb" / "fire")
    shutil.copytree(FIXTURES / "ifir-songtingyu" / "fire", tmp_path / "ifir" / "songtingyu" / "fire")
    assert load_benchmark("ifir/fire", root=tmp_path).layout == "songtingyu"


def test_a_benchmark_missing_from_a_data_root_names_the_folders_it_looked_for(tmp_path):
    shutil.copytree(FIXTURES / "instructir-hf", tmp_path / "instructir" / "hf")
    with pytest.raises(FileNotFoundError) as info:
        load_benchmark("ifir/fire", root=tmp_path)
    message = str(info.value)
    assert "ifir/fire is not in the data root" in message
    assert str(tmp_path / "ifir" / "songtingyu" / "fire") in message
    assert str(tmp_path / "ifir" / "mteb" / "fire") in message
    shutil.rmtree(tmp_path / "instructir" / "hf")
    shutil.copytree(FIXTURES / "ifir-songtingyu" / "fire", tmp_path / "ifir" / "songtingyu" / "fire")
    with pytest.raises(FileNotFoundError, match="instructir/github"):
        load_benchmark("instructir", root=tmp_path)


def _summary(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="instir")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["summary", *argv])
    return args.handler(args)


def test_summary_prints_every_bundled_sample_by_default(capsys):
    assert _summary([]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["benchmark", "setting", "layout"] and len(lines) == 6
    fiqa = next(line.split() for line in lines if line.split()[0] == "ifir-sample/fiqa")
    assert fiqa[1:8] == ["instructed", "songtingyu", BUNDLED, "True", "18", "6", "38"] and fiqa[-1] == "2.33"


def test_summary_of_one_benchmark_from_a_root(capsys):
    assert _summary(["ifir/fire", "--root", str(FIXTURES / "ifir-mteb")]) == 0
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row[:4] == ["ifir/fire", "instructed", "mteb", "local"] and row[-1] == "1.5"


def test_summary_refuses_a_root_for_several_names():
    with pytest.raises(UsageError, match="--root needs exactly one benchmark name"):
        _summary(["ifir/fire", "ifir/fiqa", "--root", "x"])


def test_each_benchmark_names_the_settings_it_loads_in():
    from instir.benchmarks.instructir import INSTRUCTIR_SETTINGS
    from instir.benchmarks.registry import benchmark_settings

    assert benchmark_settings("instructir") == benchmark_settings("instructir-sample") == INSTRUCTIR_SETTINGS
    assert benchmark_settings("ifir/fiqa") == benchmark_settings("ifir-sample/nfcorpus") == ("instructed",)
    for setting in benchmark_settings("instructir-sample"):
        assert load_benchmark("instructir-sample", setting).setting == setting
    with pytest.raises(KeyError, match="unknown benchmark"):
        benchmark_settings("ifir-smaple/fiqa")
