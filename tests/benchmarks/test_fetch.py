"""Fetching at pinned revisions, with the Hub replaced by a fake that copies fixture folders
(never the network): manifests, count checks, resolved commits, offline messages, CLI."""

import argparse
import dataclasses
import fnmatch
import hashlib
import json
import os
import shutil
import warnings
from pathlib import Path
from types import SimpleNamespace

import huggingface_hub
import pytest
from huggingface_hub.errors import RevisionNotFoundError
from says import raises_saying, warns_saying

from instir.benchmarks import catalog
from instir.benchmarks.fetch import FetchError, fetch, instir_home, read_manifest
from instir.cli.data import register
from instir.errors import UserError
from instir.retrieval.model_files import hub_command

FIXTURES = Path(__file__).parent / "fixtures"
COMMIT = "c0ffee" + "0" * 34


class FakeHub:
    """Stands in for HfApi().dataset_info and snapshot_download: repos are fixture folders."""

    def __init__(self, repos: dict[str, Path], fail: Exception | None = None):
        self.repos = repos
        self.fail = fail
        self.calls: list[tuple] = []

    def dataset_info(self, repo_id, *, revision=None):
        self.calls.append(("resolve", repo_id, revision))
        if self.fail:
            raise self.fail
        source = self.repos[repo_id]
        return SimpleNamespace(sha=COMMIT, siblings=[SimpleNamespace(rfilename=p.relative_to(source).as_posix())
                                                     for p in sorted(source.rglob("*")) if p.is_file()])

    def snapshot_download(self, repo_id, *, repo_type, revision, local_dir, allow_patterns=None):
        self.calls.append(("download", repo_id, revision, allow_patterns))
        assert repo_type == "dataset"
        source = self.repos[repo_id]
        for path in source.rglob("*"):
            rel = path.relative_to(source).as_posix()
            if path.is_file() and (allow_patterns is None or any(fnmatch.fnmatch(rel, p) for p in allow_patterns)):
                target = Path(local_dir) / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, target)
        return str(local_dir)


@pytest.fixture
def hub(monkeypatch):
    def install(repos: dict[str, Path], fail: Exception | None = None) -> FakeHub:
        fake = FakeHub(repos, fail)
        monkeypatch.setattr(huggingface_hub, "HfApi", lambda: fake)
        monkeypatch.setattr(huggingface_hub, "snapshot_download", fake.snapshot_download)
        return fake

    return install


def test_ifir_subset_is_fetched_at_main_resolved_to_a_commit_with_a_manifest(hub, tmp_path):
    fake = hub({"songtingyu/IFIR": FIXTURES / "ifir-songtingyu"})
    with warns_saying(UserWarning, "counts differ", "queries 6", "1718"):
        root = fetch("ifir", "fiqa", cache_dir=tmp_path)
    assert root == tmp_path / "ifir" / "songtingyu"
    assert fake.calls == [("resolve", "songtingyu/IFIR", "main"), ("download", "songtingyu/IFIR", COMMIT, ["fiqa/*"])]
    assert not (root / "fire").exists()
    manifest = read_manifest(root / "fiqa")
    assert (manifest["benchmark"], manifest["repo"], manifest["layout"]) == ("ifir/fiqa", "songtingyu/IFIR",
                                                                             "songtingyu")
    assert (manifest["requested_revision"], manifest["resolved_revision"]) == ("main", COMMIT)
    assert manifest["counts"] == {"queries": {"expected": 1718, "found": 6, "ok": False},
                                  "documents": {"expected": 57638, "found": 6, "ok": False}}
    assert manifest["verified"] is False and manifest["describe"]["revision"] == COMMIT
    corpus = FIXTURES / "ifir-songtingyu" / "fiqa" / "fiqa-corpus.jsonl"
    fetched = root / "fiqa" / "fiqa-corpus.jsonl"
    assert {"path": "fiqa-corpus.jsonl", "bytes": corpus.stat().st_size, "mtime_ns": fetched.stat().st_mtime_ns,
            "sha256": hashlib.sha256(corpus.read_bytes()).hexdigest()} in manifest["files"]
    assert [f["path"] for f in manifest["files"]] == ["fiqa-corpus.jsonl", "test_data.json"]


def test_counts_equal_to_the_published_ones_verify_without_warning(hub, tmp_path, monkeypatch):
    hub({"songtingyu/IFIR": FIXTURES / "ifir-songtingyu"})
    monkeypatch.setattr(catalog.Entry, "expected_counts", lambda *args: {"queries": 2, "documents": 4})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        root = fetch("ifir", "fire", cache_dir=tmp_path)
    assert read_manifest(root / "fire")["verified"] is True


def test_all_ifir_subsets_come_from_one_resolved_commit(hub, tmp_path, monkeypatch):
    fake = hub({"songtingyu/IFIR": FIXTURES / "ifir-songtingyu"})
    ifir = catalog.family("ifir")
    two = dataclasses.replace(ifir, subsets={s: ifir.subsets[s] for s in ("fiqa", "fire")})
    monkeypatch.setattr(catalog, "family", lambda name: two if name == "ifir" else ifir)
    with pytest.warns(UserWarning):
        root = fetch("ifir", cache_dir=tmp_path)
    assert [c[0] for c in fake.calls] == ["resolve", "download", "download"]
    assert {read_manifest(root / s)["resolved_revision"] for s in ("fiqa", "fire")} == {COMMIT}


def test_mteb_ifir_is_one_repo_per_subset_at_mtebs_pinned_hash(hub, tmp_path):
    fake = hub({"if-ir/fiqa": FIXTURES / "ifir-mteb" / "fiqa"})
    with pytest.warns(UserWarning):
        root = fetch("ifir", "fiqa", layout="mteb", cache_dir=tmp_path)
    assert fake.calls == [("resolve", "if-ir/fiqa", "1670fc6"), ("download", "if-ir/fiqa", COMMIT, None)]
    assert (root / "fiqa" / "instructions.jsonl").is_file()
    manifest = read_manifest(root / "fiqa")
    assert (manifest["layout"], manifest["loader_layout"], manifest["requested_revision"]) == ("mteb", "mteb",
                                                                                               "1670fc6")


def test_mteb_ifir_expects_mtebs_own_query_counts(hub, tmp_path):
    hub({"if-ir/fire": FIXTURES / "ifir-mteb" / "fire"})
    with pytest.warns(UserWarning, match=r"queries 2 \(published 167\)"):
        fetch("ifir", "fire", layout="mteb", cache_dir=tmp_path)


@pytest.mark.parametrize("layout,repo,commit", [
    ("hf", "kaist-ai/InstructIR", "1615ed0ee07d6d33b0082362f008bfe62041a54b"),
    ("mteb", "mteb/InstructIR-mteb", "42c3afabe480643b755a7099dbf0f9ebeedaf6ca"),
])
def test_instructir_is_fetched_at_its_pinned_commit(hub, tmp_path, layout, repo, commit):
    fake = hub({repo: FIXTURES / f"instructir-{layout}"})
    with pytest.warns(UserWarning, match=r"queries 19 \(published 9906\)"):
        root = fetch("instructir", layout=layout, cache_dir=tmp_path)
    assert root == tmp_path / "instructir" / layout
    assert fake.calls[0] == ("resolve", repo, commit)
    manifest = read_manifest(root)
    assert manifest["counts"]["groups"] == {"expected": 1267, "found": 3, "ok": False}
    assert manifest["counts"]["documents"]["found"] == 22 and manifest["loader_layout"] == layout


def test_a_given_revision_overrides_the_pin(hub, tmp_path):
    fake = hub({"songtingyu/IFIR": FIXTURES / "ifir-songtingyu"})
    with pytest.warns(UserWarning):
        root = fetch("ifir", "fire", cache_dir=tmp_path, revision="abc1234")
    assert fake.calls[0] == ("resolve", "songtingyu/IFIR", "abc1234")
    assert read_manifest(root / "fire")["requested_revision"] == "abc1234"


def test_offline_fetch_says_what_to_do_without_network(tmp_path, monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)  # the real client, kept offline
    with pytest.raises(FetchError) as info:
        fetch("ifir", "fiqa", cache_dir=tmp_path)
    message = str(info.value)
    assert "OfflineModeIsEnabled" in message and "songtingyu/IFIR @ main" in message
    assert "`instir fetch ifir --subset fiqa`" in message and "INSTIR_HOME" in message and "--root" in message
    assert hub_command("download", "songtingyu/IFIR", "--repo-type", "dataset") in message
    assert "instructir-sample" in message


def test_a_network_failure_gives_the_offline_steps(hub, tmp_path):
    hub({}, fail=ConnectionRefusedError("connection refused"))
    with pytest.raises(FetchError, match="ConnectionRefusedError: connection refused") as info:
        fetch("instructir", cache_dir=tmp_path)
    assert "`instir fetch instructir`" in str(info.value) and str(tmp_path / "instructir" / "hf") in str(info.value)


def test_the_offline_steps_repeat_the_layout_and_revision_that_fill_the_folder_named(hub, tmp_path):
    # the command to run elsewhere dropped --layout and --revision: it filled another folder than the one named
    hub({}, fail=ConnectionRefusedError("connection refused"))
    with pytest.raises(FetchError) as info:
        fetch("ifir", "cds", layout="mteb", revision="abc1234", cache_dir=tmp_path)
    assert "`instir fetch ifir --subset cds --layout mteb --revision abc1234`" in str(info.value)
    assert str(tmp_path / "ifir" / "mteb" / "cds") in str(info.value)
    with pytest.raises(FetchError) as info:
        fetch("ifir", "cds", layout="songtingyu", cache_dir=tmp_path)  # the default layout: no option needed
    assert "`instir fetch ifir --subset cds`" in str(info.value)


class _RevisionNotFound(RevisionNotFoundError):
    """The Hub's error without an HTTP response object (its constructor needs one)."""

    def __init__(self, message: str):
        Exception.__init__(self, message)


def test_an_unknown_revision_is_reported_as_such(hub, tmp_path):
    hub({}, fail=_RevisionNotFound("Revision Not Found"))
    with raises_saying(FetchError, "if-ir/cds", "'9a05fd6'") as info:
        fetch("ifir", "cds", layout="mteb", cache_dir=tmp_path)
    assert "--revision" in str(info.value) and "INSTIR_HOME" not in str(info.value)


def test_bad_arguments_are_refused_before_any_download(hub, tmp_path):
    fake = hub({})
    with pytest.raises(ValueError, match="unknown IFIR subset"):
        fetch("ifir", "robust04", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="unknown layout 'github'"):
        fetch("ifir", "fiqa", layout="github", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="instructir has no subsets"):
        fetch("instructir", "fiqa", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="unknown benchmark to fetch 'msmarco'"):
        fetch("msmarco", cache_dir=tmp_path)
    assert fake.calls == []


def test_instir_home_is_the_env_variable_or_the_user_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("INSTIR_HOME", str(tmp_path / "cache"))
    assert instir_home() == tmp_path / "cache"
    monkeypatch.delenv("INSTIR_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert instir_home() == tmp_path / ".cache" / "instir"


def _cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="instir")
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.handler(args)


def test_fetch_command_downloads_into_the_cache_and_reports_the_commit(hub, tmp_path, monkeypatch, capsys):
    hub({"songtingyu/IFIR": FIXTURES / "ifir-songtingyu"})
    monkeypatch.setenv("INSTIR_HOME", str(tmp_path))
    with pytest.warns(UserWarning):
        assert _cli(["fetch", "ifir", "--subset", "fire"]) == 0
    out = capsys.readouterr().out
    assert f"ifir/fire: songtingyu/IFIR @ {COMMIT} -> {tmp_path / 'ifir' / 'songtingyu' / 'fire'}" in out
    assert "COUNTS DIFFER" in out


def test_fetch_command_offline_exits_with_the_instructions(tmp_path, monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(FetchError, match="could not download kaist-ai/InstructIR"):
        _cli(["fetch", "instructir", "--cache-dir", str(tmp_path)])


def test_the_offline_instructions_give_the_data_root_option_of_every_command(tmp_path, monkeypatch):
    # on the commit before, they said only "pass --root DIR", which instir run does not take (-p data_root=DIR)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(FetchError) as raised:
        _cli(["fetch", "instructir", "--cache-dir", str(tmp_path)])
    said = " ".join(str(raised.value).split())
    assert ("--root DIR (instir retrieve, evaluate, judge, …), -p data_root=DIR (instir run), "
            "load_benchmark(name, root=DIR) (Python)") in said


def test_a_cache_folder_that_is_a_file_is_one_line_before_the_hub_is_asked(tmp_path, monkeypatch, capsys):
    # on the commit before, the offline steps, telling to copy the data under the file
    from instir.cli import main

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    (tmp_path / "a-file").write_text("")
    assert main(["fetch", "instructir", "--cache-dir", str(tmp_path / "a-file")]) == 2
    assert capsys.readouterr().err == f"instir fetch: --cache-dir {tmp_path / 'a-file'} is a file, not a folder\n"


def test_manifest_is_json_next_to_the_data(hub, tmp_path):
    hub({"songtingyu/IFIR": FIXTURES / "ifir-songtingyu"})
    with pytest.warns(UserWarning):
        root = fetch("ifir", "fire", cache_dir=tmp_path)
    data = json.loads((root / "fire" / "instir-manifest.json").read_text())
    assert data["fetched_at"].endswith("+00:00") and data["instir_version"]


@pytest.mark.parametrize("layout,subset,repo,revision", [
    ("jhu-clsp", "core17", "jhu-clsp/core17-instructions", "e39ff896cf3efbbdeeb950e6bd7c79f266995b07"),
    ("mteb", "news21", "mteb/News21InstructionRetrieval", "c6fffeb9cdd95c1ffa81c62c687b48b56352872b"),
])
def test_followir_is_one_repo_per_dataset_at_its_layouts_pin(hub, tmp_path, layout, subset, repo, revision):
    fake = hub({repo: catalog.SAMPLE_ROOT / "followir-sample" / subset})
    with pytest.warns(UserWarning, match="counts differ"):  # the sample stands in for the release
        root = fetch("followir", subset, layout=layout, cache_dir=tmp_path)
    assert fake.calls == [("resolve", repo, revision), ("download", repo, COMMIT, None)]
    manifest = read_manifest(root / subset)
    assert (manifest["layout"], manifest["loader_layout"], manifest["resolved_revision"]) == (layout, layout, COMMIT)
    assert manifest["counts"]["queries"]["expected"] == catalog.family("followir").subset(subset).queries


def _fetched_fiqa(hub, tmp_path, monkeypatch) -> Path:
    """``ifir/fiqa`` fetched into an instir home at tmp_path (its folder)."""
    hub({"songtingyu/IFIR": FIXTURES / "ifir-songtingyu"})
    with pytest.warns(UserWarning, match="counts differ"):
        root = fetch("ifir", "fiqa", cache_dir=tmp_path)
    monkeypatch.setenv("INSTIR_HOME", str(tmp_path))
    return root / "fiqa"


def _loaded_revision() -> str:
    from instir.benchmarks import load_benchmark

    return load_benchmark("ifir/fiqa").revision


@pytest.mark.parametrize("change", ["append", "same size", "stray file", "hub record", "hub record fifo",
                                    "hub record at the family root", "removed"])
def test_a_folder_changed_after_fetch_is_never_reported_as_the_fetched_revision(hub, tmp_path, monkeypatch, change):
    folder = _fetched_fiqa(hub, tmp_path, monkeypatch)
    assert _loaded_revision() == COMMIT  # untouched: the pinned commit
    corpus = next(p for p in sorted(folder.rglob("*.jsonl")) if "corpus" in p.name)
    if change == "append":
        corpus.write_text(corpus.read_text() + '{"_id": "extra", "text": "added later"}\n')
    elif change == "same size":  # found by its digest, on request
        text = corpus.read_text()
        corpus.write_text(text.replace("a", "b", 1) if "a" in text else text.replace("e", "f", 1))
        monkeypatch.setenv("INSTIR_VERIFY_DIGESTS", "1")
    elif change == "stray file":
        (folder / "notes.jsonl").write_text("{}\n")
    elif change == "hub record at the family root":  # where the Hub puts it for a subset of songtingyu/IFIR
        record = folder.parent / ".cache" / "huggingface" / "download" / folder.name / f"{corpus.name}.metadata"
        record.parent.mkdir(parents=True)
        record.write_text("deadbeef" * 5 + "\netag\n1.0\n")
    elif change.startswith("hub record"):
        record = folder / ".cache" / "huggingface" / "download" / f"{corpus.name}.metadata"
        record.parent.mkdir(parents=True)
        if change.endswith("fifo"):  # on the commit before, reading it blocked for ever
            os.mkfifo(record)
        else:
            record.write_text("deadbeef" * 5 + "\netag\n1.0\n")
    else:
        (folder / "test_data.json").unlink()
    said = rf"{folder} was changed after instir fetch .*reported as c0ffee000000\+changed"
    with pytest.warns(UserWarning, match=said):
        try:
            revision = _loaded_revision()
        except Exception as err:  # a removed file may stop the loader: then the load fails, it does not mislabel
            assert change == "removed", err
            return
    assert revision == f"{COMMIT}+changed"


def test_a_damaged_manifest_is_one_error_naming_it(hub, tmp_path, monkeypatch):
    folder = _fetched_fiqa(hub, tmp_path, monkeypatch)
    (folder / "instir-manifest.json").write_text('{"files": ')
    with pytest.raises(UserError, match=rf"{folder / 'instir-manifest.json'}: unreadable fetch manifest"):
        _loaded_revision()


def test_an_edit_that_keeps_a_files_size_is_found_by_its_time_without_asking_for_digests(hub, tmp_path, monkeypatch):
    # before, a same-size edit (5,000 qrels grades zeroed) kept the fetched revision unless INSTIR_VERIFY_DIGESTS=1:
    # only a file written since the fetch has its digest computed now, on every load
    folder = _fetched_fiqa(hub, tmp_path, monkeypatch)
    monkeypatch.delenv("INSTIR_VERIFY_DIGESTS", raising=False)
    corpus = folder / "fiqa-corpus.jsonl"  # one letter of a document: another text, the same size
    corpus.write_bytes(corpus.read_bytes().replace(b"a", b"b", 1))
    with pytest.warns(UserWarning, match=r"fiqa-corpus.jsonl has other bytes \(SHA-256\)"):
        assert _loaded_revision() == f"{COMMIT}+changed"
    untouched = _fetched_fiqa(hub, tmp_path / "again", monkeypatch)
    corpus = next(p for p in sorted(untouched.rglob("*.jsonl")) if "corpus" in p.name)
    os.utime(corpus)  # written again with the same bytes: read, found equal
    assert _loaded_revision() == COMMIT



def test_a_file_of_another_size_with_its_fetch_time_kept_is_found_by_its_size(hub, tmp_path, monkeypatch):
    # a copy that keeps the modification time (cp -p, rsync -t): only the size tells it from the fetched file
    folder = _fetched_fiqa(hub, tmp_path, monkeypatch)
    monkeypatch.delenv("INSTIR_VERIFY_DIGESTS", raising=False)
    corpus = folder / "fiqa-corpus.jsonl"
    fetched = corpus.stat()
    corpus.write_text(corpus.read_text() + '{"_id": "extra", "text": "added later"}\n')
    os.utime(corpus, ns=(fetched.st_atime_ns, fetched.st_mtime_ns))
    with pytest.warns(UserWarning, match=r"fiqa-corpus.jsonl has [\d,]+ bytes, not \d+"):
        assert _loaded_revision() == f"{COMMIT}+changed"


def test_verify_digests_finds_a_same_size_edit_whose_fetch_time_was_kept(hub, tmp_path, monkeypatch):
    folder = _fetched_fiqa(hub, tmp_path, monkeypatch)
    corpus = folder / "fiqa-corpus.jsonl"
    fetched = corpus.stat()
    corpus.write_bytes(corpus.read_bytes().replace(b"a", b"b", 1))
    os.utime(corpus, ns=(fetched.st_atime_ns, fetched.st_mtime_ns))
    monkeypatch.delenv("INSTIR_VERIFY_DIGESTS", raising=False)
    assert _loaded_revision() == COMMIT  # sizes and times only, by default: not read
    monkeypatch.setenv("INSTIR_VERIFY_DIGESTS", "1")
    with pytest.warns(UserWarning, match=r"fiqa-corpus.jsonl has other bytes \(SHA-256\)"):
        assert _loaded_revision() == f"{COMMIT}+changed"


def test_a_symlink_swapped_in_for_a_fetched_file_is_read_whatever_its_targets_size_and_time(hub, tmp_path, monkeypatch):
    # on the commit before, a link to an edited copy of the same size, its time kept (cp -p), was the fetched revision
    folder = _fetched_fiqa(hub, tmp_path, monkeypatch)
    monkeypatch.delenv("INSTIR_VERIFY_DIGESTS", raising=False)
    corpus = folder / "fiqa-corpus.jsonl"
    fetched, original = corpus.stat(), corpus.read_bytes()
    copy = tmp_path / "edited.jsonl"
    copy.write_bytes(original.replace(b"a", b"b", 1))
    os.utime(copy, ns=(fetched.st_atime_ns, fetched.st_mtime_ns))
    corpus.unlink()
    corpus.symlink_to(copy)
    with pytest.warns(UserWarning, match=r"fiqa-corpus.jsonl has other bytes \(SHA-256\)"):
        assert _loaded_revision() == f"{COMMIT}+changed"
    copy.write_bytes(original)  # a link to the fetched bytes (an older Hub client links into its cache): no change
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _loaded_revision() == COMMIT


def test_a_fetched_folder_swapped_for_a_symlink_to_an_edited_copy_is_read_and_a_linked_home_is_not_a_change(
        hub, tmp_path, monkeypatch):
    # on the commit before, MTEB's qrels/ swapped for a link to a copy with one grade changed (same size, times kept
    # by cp -p) was the pinned revision
    hub({"if-ir/fiqa": FIXTURES / "ifir-mteb" / "fiqa"})
    with pytest.warns(UserWarning):
        fetch("ifir", "fiqa", layout="mteb", cache_dir=tmp_path / "real")
    (tmp_path / "home").symlink_to(tmp_path / "real")  # a home reached by a link (~/.cache on another disk)
    monkeypatch.setenv("INSTIR_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("INSTIR_VERIFY_DIGESTS", raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _loaded_revision() == COMMIT
    qrels = tmp_path / "real" / "ifir" / "mteb" / "fiqa" / "qrels"
    copy = shutil.copytree(qrels, tmp_path / "edited", copy_function=shutil.copy2)
    fetched, text = (qrels / "test.jsonl").stat(), (copy / "test.jsonl").read_text()
    (copy / "test.jsonl").write_text(text.replace('"score": 1', '"score": 0', 1))
    os.utime(copy / "test.jsonl", ns=(fetched.st_atime_ns, fetched.st_mtime_ns))
    shutil.rmtree(qrels)
    qrels.symlink_to(copy)
    with pytest.warns(UserWarning, match=r"qrels/test.jsonl has other bytes \(SHA-256\)"):
        assert _loaded_revision() == f"{COMMIT}+changed"


def test_a_huge_hub_download_record_is_read_by_its_first_line_only(hub, tmp_path, monkeypatch):
    # on the commit before, a record of 200 MB without a newline was read whole (585 MB) on every load
    import tracemalloc

    from instir.benchmarks.fetch import changes_since_fetch

    folder = _fetched_fiqa(hub, tmp_path, monkeypatch)
    record = folder / ".cache" / "huggingface" / "download" / "fiqa-corpus.jsonl.metadata"
    record.parent.mkdir(parents=True)
    record.write_bytes(b"deadbeef" * 5 + b"x" * 20_000_000)
    tracemalloc.start()
    try:
        changes = changes_since_fetch(folder, read_manifest(folder))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(changes) == 1 and "names commit 'deadbeefdead'" in changes[0] and peak < 1_000_000


def test_a_hub_download_record_of_the_fetched_commit_is_no_change(hub, tmp_path, monkeypatch):
    folder = _fetched_fiqa(hub, tmp_path, monkeypatch)
    record = folder / ".cache" / "huggingface" / "download" / "fiqa-corpus.jsonl.metadata"
    record.parent.mkdir(parents=True)
    record.write_text(f"{COMMIT}\netag\n1.0\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _loaded_revision() == COMMIT


@pytest.mark.parametrize("text", ['{"files": []}', '{"resolved_revision": "' + COMMIT + '"}',
                                  '{"resolved_revision": "' + COMMIT + '", "files": {}}'])
def test_a_manifest_without_a_revision_or_a_file_list_is_one_error_naming_it(hub, tmp_path, monkeypatch, text):
    # never loaded as a local folder (no revision to report) nor a crash over the missing list
    folder = _fetched_fiqa(hub, tmp_path, monkeypatch)
    (folder / "instir-manifest.json").write_text(text)
    with pytest.raises(UserError, match=rf"{folder / 'instir-manifest.json'}: not a fetch manifest"):
        _loaded_revision()


def test_fetch_command_downloads_at_the_revision_it_is_given(hub, tmp_path, monkeypatch, capsys):
    fake = hub({"songtingyu/IFIR": FIXTURES / "ifir-songtingyu"})
    monkeypatch.setenv("INSTIR_HOME", str(tmp_path))
    with pytest.warns(UserWarning):
        assert _cli(["fetch", "ifir", "--subset", "fire", "--revision", "abc1234"]) == 0
    assert fake.calls[0] == ("resolve", "songtingyu/IFIR", "abc1234")
    assert read_manifest(tmp_path / "ifir" / "songtingyu" / "fire")["requested_revision"] == "abc1234"


@pytest.mark.parametrize("file_list", ["dataset_info", "list_repo_files"])
def test_a_file_the_repository_lacks_at_the_commit_is_left_out_of_the_manifest_and_reported_as_a_change(
        hub, tmp_path, monkeypatch, file_list):
    # before, the manifest listed whatever the folder held, so a file left by a fetch of another revision (or
    # added by hand) was certified as part of the fetched commit and the data reported as that revision
    fake = hub({"songtingyu/IFIR": FIXTURES / "ifir-songtingyu"})
    if file_list == "list_repo_files":  # the Hub left the file list out of dataset_info: asked for at the commit
        info = fake.dataset_info
        fake.dataset_info = lambda repo_id, *, revision=None: SimpleNamespace(sha=info(repo_id, revision=revision).sha,
                                                                              siblings=None)
        fake.list_repo_files = lambda repo_id, *, repo_type, revision: (
            [s.rfilename for s in info(repo_id, revision=revision).siblings] if revision == COMMIT else [])
    stale = tmp_path / "ifir" / "songtingyu" / "fiqa" / "fiqa-corpus-v0.jsonl"
    stale.parent.mkdir(parents=True)
    stale.write_text('{"_id": "old", "text": "from an earlier revision"}\n')
    with pytest.warns(UserWarning) as said:
        fetch("ifir", "fiqa", cache_dir=tmp_path)
    assert any("holds 1 file(s) that songtingyu/IFIR does not at c0ffee000000" in str(w.message)
               and "fiqa-corpus-v0.jsonl" in str(w.message) for w in said)
    assert [f["path"] for f in read_manifest(stale.parent)["files"]] == ["fiqa-corpus.jsonl", "test_data.json"]
    monkeypatch.setenv("INSTIR_HOME", str(tmp_path))
    with pytest.warns(UserWarning, match=r"fiqa-corpus-v0.jsonl is not in the manifest"):
        assert _loaded_revision() == f"{COMMIT}+changed"
    stale.unlink()
    assert _loaded_revision() == COMMIT
