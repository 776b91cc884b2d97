"""A model's description remembered under its files (:mod:`instir.retrieval.model_files`): a rerun whose
runs and vectors exist loads no model and records what a loaded model records; a rewritten file, another
option or a damaged record brings the load back."""

import json
import os
from pathlib import Path

import pytest
import sentence_transformers
from says import warns_saying

from instir.benchmarks.types import Benchmark, Corpus, Doc, Query
from instir.formatting import get_template
from instir.retrieval import retrieve
from instir.retrieval.dense import DenseRetriever
from instir.retrieval.model_files import model_folder

BENCHMARK = Benchmark(
    "toy", "hand-made", "local", "instructed",
    Corpus.from_docs([Doc("saffron", "Saffron is a spice from the crocus flower."),
                      Doc("python", "Python is a programming language."),
                      Doc("eiffel", "The Eiffel Tower is in Paris.")]),
    {"q1": Query("q1", "what spice is yellow", "I am a chef", group="g1"),
     "q2": Query("q2", "how to write code", "", group="g2")},
    {"q1": {"saffron": 1}, "q2": {"python": 1}})
TEMPLATE = get_template("instructir")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    """A sentence-transformers model folder as the bundled MiniLM's is laid out (Transformer, mean Pooling,
    Normalize), on a tiny random BERT built here: it loads in milliseconds."""
    from sentence_transformers import models
    from tiny_models import build_tiny_bert

    root = tmp_path_factory.mktemp("tiny-st")
    words = sorted({w.strip(".").lower() for d in BENCHMARK.corpus for w in d.text.split()})
    bert = build_tiny_bert(root / "bert", words)
    transformer = models.Transformer(str(bert), max_seq_length=64)
    modules = [transformer, models.Pooling(transformer.get_word_embedding_dimension(), "mean"), models.Normalize()]
    sentence_transformers.SentenceTransformer(modules=modules, device="cpu").save(str(root / "model"))
    return root / "model"


@pytest.fixture
def model_copy(tiny_model, tmp_path) -> Path:
    """The tiny model as a folder of its own (links to its files), which a test may change."""
    source = tiny_model
    copy = tmp_path / "model"
    for path in source.rglob("*"):
        if path.is_file():
            target = copy / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(path)
    return copy


@pytest.fixture
def loads(monkeypatch) -> list[str]:
    """The model paths sentence-transformers is asked to load, from here on."""
    asked: list[str] = []
    real = sentence_transformers.SentenceTransformer

    def counted(path, *args, **kwargs):
        asked.append(str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", counted)
    return asked


def test_a_rerun_of_the_same_files_loads_no_model_and_gives_the_same_run(model_copy, tmp_path, loads):
    first = DenseRetriever(str(model_copy), cache_dir=tmp_path / "cache", progress=False)
    run = retrieve(BENCHMARK, first, TEMPLATE, k=2, out_dir=tmp_path / "runs")
    assert loads == [str(model_copy)]
    again = DenseRetriever(str(model_copy), cache_dir=tmp_path / "cache", progress=False)
    reused = retrieve(BENCHMARK, again, TEMPLATE, k=2, out_dir=tmp_path / "runs")
    searched = retrieve(BENCHMARK, DenseRetriever(str(model_copy), cache_dir=tmp_path / "cache", progress=False),
                        TEMPLATE, k=2)  # no run file: searched again from the cached vectors
    assert loads == [str(model_copy)]
    assert reused.meta["reused"] and reused.df.equals(run.df) and searched.df.equals(run.df)
    assert again.params() == first.params()  # what the loaded model recorded, read back


def test_the_remembered_description_is_what_the_loaded_model_says(model_copy, tmp_path):
    DenseRetriever(str(model_copy), cache_dir=tmp_path, progress=False).params()
    remembered = DenseRetriever(str(model_copy), cache_dir=tmp_path, progress=False)
    loaded = DenseRetriever(sentence_transformers.SentenceTransformer(str(model_copy), device="cpu"),
                            cache_dir=tmp_path / "other", progress=False)
    assert {**remembered.params(), "model": None} == {**loaded.params(), "model": None}
    assert remembered.params()["modules"] == ["Transformer", "Pooling", "Normalize"]
    assert not (tmp_path / "other" / "model-descriptions").exists()  # a model object is never remembered


@pytest.mark.parametrize("mtime", ["new", "given back"])
def test_a_rewritten_model_file_is_loaded_and_described_again(model_copy, tmp_path, loads, mtime):
    # "given back": the same size and the old mtime (touch -r) kept the record, a description of other weights
    before = DenseRetriever(str(model_copy), cache_dir=tmp_path, progress=False).params()
    config = model_copy / "1_Pooling" / "config.json"
    settings, stat = json.loads(config.read_text()), config.stat()
    text = json.dumps({**settings, "include_prompt": False})  # pooling now skips prompt tokens
    if mtime == "given back":
        text = text.ljust(stat.st_size)  # the same size: JSON takes the trailing spaces
    config.unlink()
    config.write_text(text)
    if mtime == "given back":
        os.utime(config, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert (config.stat().st_size, config.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    after = DenseRetriever(str(model_copy), cache_dir=tmp_path, progress=False).params()
    assert len(loads) == 2
    assert (before["prompt_excluded_from_pooling"], after["prompt_excluded_from_pooling"]) == (False, True)


def test_another_max_length_is_described_apart(model_copy, tmp_path, loads):
    DenseRetriever(str(model_copy), cache_dir=tmp_path, progress=False).params()
    shorter = DenseRetriever(str(model_copy), max_length=16, cache_dir=tmp_path, progress=False).params()
    assert len(loads) == 2 and shorter["max_seq_length"] == 16


def test_a_damaged_record_is_removed_with_a_warning_and_the_model_described_again(model_copy, tmp_path, loads):
    first = DenseRetriever(str(model_copy), cache_dir=tmp_path, progress=False).params()
    (record,) = (tmp_path / "model-descriptions").glob("*/description.json")
    record.write_text(json.dumps({"fingerprint": "forged"}))
    with warns_saying(UserWarning, "model description cache", str(record)):
        again = DenseRetriever(str(model_copy), cache_dir=tmp_path, progress=False).params()
    assert again == first and len(loads) == 2


# ------------------------------------------------------------------ where a model's files are


def _hub_cache(root: Path, repo: str, commit: str) -> Path:
    """``repo`` at ``commit`` (also ``main``) in the Hugging Face cache layout under ``root``."""
    folder = root / f"models--{repo.replace('/', '--')}"
    snapshot = folder / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (folder / "refs").mkdir()
    (folder / "refs" / "main").write_text(commit)
    return snapshot


def test_a_hub_id_is_found_on_disk_only_offline_or_at_a_commit(tmp_path, monkeypatch):
    from huggingface_hub import constants

    commit = "0123456789abcdef0123456789abcdef01234567"
    snapshot = _hub_cache(tmp_path, "org/model", commit)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)  # the suite's offline hub, online for this test
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    assert model_folder("org/model") is None  # online, main may have moved: the loader decides
    assert model_folder("org/model", commit) == snapshot
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert model_folder("org/model") == snapshot
    assert model_folder("org/absent") is None
    assert model_folder(str(snapshot)) == snapshot  # a folder is itself


@pytest.mark.parametrize(("env", "offline"), [
    ({"TRANSFORMERS_OFFLINE": "1"}, True),  # the hub reads it where HF_HUB_OFFLINE is unset or empty
    ({"HF_HUB_OFFLINE": "", "TRANSFORMERS_OFFLINE": "yes"}, True),
    ({"HF_HUB_OFFLINE": "0", "TRANSFORMERS_OFFLINE": "1"}, False),  # HF_HUB_OFFLINE set: it alone counts
    ({"HF_HUB_OFFLINE": " 1 "}, False),  # not stripped: the hub itself is online
    ({"HF_HUB_OFFLINE": "On"}, True),
])
def test_offline_is_read_as_huggingface_hub_reads_it_by_model_folder_and_hub_reachable(env, offline, tmp_path,
                                                                                      monkeypatch):
    """One rule for HF_HUB_OFFLINE (huggingface_hub.constants'), where model_folder once stripped the value
    and ignored TRANSFORMERS_OFFLINE, and hub_reachable read TRANSFORMERS_OFFLINE only at the hub's import."""
    from huggingface_hub import constants

    from instir import http_retry
    from instir.retrieval import model_files

    snapshot = _hub_cache(tmp_path, "org/model", "0123456789abcdef0123456789abcdef01234567")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert model_folder("org/model") == (snapshot if offline else None)
    asked = []
    monkeypatch.setattr(http_retry, "unreachable", lambda url, timeout_s: asked.append(url))  # None: it answers
    model_files.hub_reachable.cache_clear()
    try:
        assert model_files.hub_reachable(0.5) is not offline and bool(asked) is not offline
    finally:
        model_files.hub_reachable.cache_clear()


@pytest.mark.parametrize("endpoint", ["http://a..b", f"http://{'x' * 70}.org", "http://[::1"])
def test_a_hub_endpoint_no_connection_can_be_made_to_is_unreachable_not_a_traceback(endpoint, monkeypatch):
    # after 983fda5 hub_reachable went through http_retry.unreachable, which let the host name's UnicodeError through
    # (instir retrieve ended in a traceback where it had said the Hub cannot be reached); "http://[::1" always had
    from instir import http_retry
    from instir.retrieval import model_files

    assert http_retry.unreachable(endpoint, 0.5) is not None
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    model_files.hub_reachable.cache_clear()
    try:
        assert model_files.hub_reachable(0.5) is False
    finally:
        model_files.hub_reachable.cache_clear()


def test_a_hub_id_at_a_branch_is_not_read_from_the_local_cache_online(tmp_path, monkeypatch):
    # online, "main" may have moved since the cache was filled: the remembered description would be another model's
    from huggingface_hub import constants

    snapshot = _hub_cache(tmp_path, "org/model", "0123456789abcdef0123456789abcdef01234567")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    assert model_folder("org/model", "main") is None
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert model_folder("org/model", "main") == snapshot


def test_a_description_is_not_remembered_while_one_of_its_models_is_not_on_disk(tmp_path):
    # a base model on disk and a LoRA not on disk: the pair is described each time, never from a record
    from instir.retrieval.model_files import remembered

    folder = tmp_path / "base"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    calls = []

    def describe():
        calls.append(1)
        return {"fingerprint": f"f{len(calls)}"}

    assert remembered(tmp_path / "cache", [folder, None], {}, describe) == {"fingerprint": "f1"}
    assert remembered(tmp_path / "cache", [folder, None], {}, describe) == {"fingerprint": "f2"}
    assert remembered(tmp_path / "cache", [folder], {}, describe) == {"fingerprint": "f3"}
    assert remembered(tmp_path / "cache", [folder], {}, describe) == {"fingerprint": "f3"}


def test_an_upgraded_library_describes_the_model_again(model_copy, tmp_path, loads, monkeypatch):
    from instir.retrieval import model_files

    DenseRetriever(str(model_copy), cache_dir=tmp_path, progress=False).params()
    real = model_files.package_versions
    monkeypatch.setattr(model_files, "package_versions",
                        lambda names: {**real(names), "transformers": "999.0"})
    DenseRetriever(str(model_copy), cache_dir=tmp_path, progress=False).params()
    assert len(loads) == 2


def test_a_folder_named_without_a_leading_dot_slash_is_checked_as_a_local_folder(tmp_path, monkeypatch):
    from instir.retrieval.model_files import is_local_path, local_model_problem

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mymodel").mkdir()
    assert is_local_path("mymodel") and not is_local_path("org/absent")
    assert local_model_problem("mymodel", "cross-encoder") == "a folder without config.json (not a cross-encoder model)"


@pytest.mark.parametrize("only", ["adapter_config.json", "modules.json"])
def test_a_cached_hub_repo_holding_only_a_lora_or_sentence_transformers_config_is_present(tmp_path, monkeypatch, only):
    from huggingface_hub import constants

    from instir.retrieval.model_files import weights_present

    snapshot = _hub_cache(tmp_path, "org/model", "0123456789abcdef0123456789abcdef01234567")
    (snapshot / "config.json").rename(snapshot / only)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    assert weights_present("org/model") and not weights_present("org/absent")


def test_a_lora_folder_given_as_a_base_model_is_refused(tmp_path):
    # a LoRA card's base_model must be a whole model (config.json and weights), not another adapter
    from instir.retrieval.model_files import local_model_problem

    lora = tmp_path / "lora"
    lora.mkdir()
    (lora / "adapter_config.json").write_text("{}")
    (lora / "adapter_model.safetensors").write_bytes(b"")
    assert local_model_problem(str(lora), "peft-decoder") is None
    assert local_model_problem(str(lora), "peft-decoder", base=True) == \
        "a folder without config.json (not a peft-decoder model)"


def test_weights_neither_cached_nor_downloadable_are_refused_and_a_local_folder_never_is(tmp_path, monkeypatch):
    from instir.errors import UsageError
    from instir.retrieval import model_files

    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"")
    monkeypatch.setattr(model_files, "hub_reachable", lambda: False)
    model_files.check_model(str(folder))  # offline, a folder on disk is all there is to load
    with pytest.raises(UsageError, match="org/absent is not in the Hugging Face cache and the Hub cannot be reached"):
        model_files.check_model("org/absent")
    monkeypatch.setattr(model_files, "hub_reachable", lambda: True)
    model_files.check_model("org/absent")  # online, the library downloads it


def test_no_model_at_all_is_no_local_folder_to_check():
    from instir.retrieval.model_files import local_model_problem

    assert local_model_problem("", "bm25") is None  # a card without a model (BM25), not the current folder
