"""MTEB's prediction files as runs and back, and MTEB-ready copies of the benchmarks. The
fixtures under tests/fixtures/mteb were written by MTEB 2.26.24 itself (see their README)."""

import json
from pathlib import Path

import pytest
from says import raises_saying

from instir.benchmarks import load_benchmark
from instir.benchmarks.ifir import load_ifir
from instir.benchmarks.instructir import load_instructir
from instir.benchmarks.types import FormatError
from instir.cli import main
from instir.errors import UsageError
from instir.retrieval.mteb import (
    predictions_run,
    read_mteb_predictions,
    read_predictions_run,
    write_mteb_dataset,
    write_mteb_predictions,
)
from instir.retrieval.runs import Run

MTEB = Path(__file__).parents[1] / "fixtures" / "mteb" / "predictions"


@pytest.fixture(scope="module")
def fiqa():
    return load_benchmark("ifir-sample/fiqa")


def test_an_mteb_prediction_file_reads_as_a_run_under_the_kits_ids(fiqa):
    predictions = read_mteb_predictions(MTEB / "IFIRFiQA_predictions.json")
    assert (predictions.task, predictions.model_name, predictions.revision) == ("IFIRFiQA", "instir/bm25s-sample",
                                                                                 "fixture")
    assert (predictions.subset, predictions.split) == ("default", "test")
    run = predictions_run(predictions, fiqa)
    assert set(run.df["qid"]) == set(fiqa.queries) and len(run) == 3 * len(fiqa.queries)
    raw = predictions.scores["sample-fiqa-q1_v2"]
    top = run.df[run.df["qid"] == "sample-fiqa-q1_2"]
    assert list(top["docid"]) == sorted(raw, key=raw.get, reverse=True)
    assert run.meta["mteb_model_meta"] == {"model_name": "instir/bm25s-sample", "revision": "fixture"}


def test_a_kit_run_written_as_mteb_predictions_reads_back_the_same(fiqa, tmp_path):
    run = read_predictions_run(MTEB / "IFIRFiQA_predictions.json", fiqa)
    path = write_mteb_predictions(run, fiqa, tmp_path, model_name="instir/bm25s-sample", revision="fixture")
    assert path.name == "IFIRFiQA_predictions.json"
    data = json.loads(path.read_text())
    assert list(data) == ["mteb_model_meta", "default"] and list(data["default"]) == ["test"]
    assert set(data["default"]["test"]) == set(json.loads((MTEB / path.name).read_text())["default"]["test"])
    back = read_predictions_run(path, fiqa)
    assert back.df[["qid", "docid", "rank"]].equals(run.df[["qid", "docid", "rank"]])


@pytest.mark.parametrize(("text", "where"), [
    ('{"default": {"test": {"q": {"d": 1.0}', "line 1: not valid JSON"),
    ('[1, 2]', "expected a JSON object"),
    ('{"mteb_model_meta": [], "default": {}}', "field 'mteb_model_meta': expected an object"),
    ('{"other": {"test": {}}}', "field 'default': missing subset; the file has 'other'"),
    ('{"default": {"dev": {}, "train": {}}}', "subset 'default', field 'test': missing split"),
    ('{"default": {"test": {"sample-fiqa-q1_v1": [1, 2]}}}', "field 'sample-fiqa-q1_v1': expected an object"),
    ('{"default": {"test": {"sample-fiqa-q1_v1": {"d1": "high"}}}}',
     "query 'sample-fiqa-q1_v1', field 'd1': expected a finite number"),
    ('{"default": {"test": {"sample-fiqa-q1_v1": {"d1": NaN}}}}', "field 'd1': expected a finite number"),
])
def test_a_malformed_prediction_file_is_one_error_naming_the_file_and_field(tmp_path, text, where):
    path = tmp_path / "IFIRFiQA_predictions.json"
    path.write_text(text)
    with pytest.raises(FormatError) as err:
        read_mteb_predictions(path)
    assert str(err.value).startswith(str(path)) and where in str(err.value) and "\n" not in str(err.value)


def test_an_unknown_query_id_and_another_tasks_file_are_refused(fiqa, tmp_path):
    path = tmp_path / "IFIRFiQA_predictions.json"
    path.write_text(json.dumps({"default": {"test": {"sample-fiqa-q1_v1": {"d": 1.0}, "nope_v1": {"d": 1.0}}}}))
    with raises_saying(FormatError, "IFIRFiQA_predictions.json", "'default' > 'test'", "field 'nope_v1'",
                       "unknown query id", "ifir-sample/fiqa"):
        read_predictions_run(path, fiqa)
    with raises_saying(UsageError, "InstructIR", "ifir-sample/fiqa", "IFIRFiQA"):
        read_predictions_run(MTEB / "InstructIR_predictions.json", fiqa)


def test_the_mteb_ready_instructir_copy_sends_the_authors_text(tmp_path):
    sample = load_benchmark("instructir-sample")
    folder = write_mteb_dataset(sample, tmp_path / "instructir")
    queries = [json.loads(line) for line in (folder / "queries.jsonl").read_text().splitlines()]
    first = sample.queries[queries[0]["_id"]]
    assert queries[0]["text"] == f"{first.instruction} [SEP] {first.query}"
    assert not (folder / "instructions.jsonl").exists()  # no instruction config: MTEB appends nothing
    readme = (folder / "README.md").read_text()
    assert "config_name: instruction" not in readme and "path: qrels/test.jsonl" in readme
    again = load_instructir(folder)  # the kit reads it back (Hugging Face layout) as the same benchmark
    assert {q: (v.query, v.instruction) for q, v in again.queries.items()} == {
        q: (v.query, v.instruction) for q, v in sample.queries.items()}
    assert again.qrels == sample.qrels


def test_the_mteb_ready_ifir_copy_carries_levels_in_its_ids_and_reads_back(fiqa, tmp_path):
    folder = write_mteb_dataset(fiqa, tmp_path / "fiqa")
    ids = [json.loads(line)["_id"] for line in (folder / "queries.jsonl").read_text().splitlines()]
    assert ids[:3] == ["sample-fiqa-q1_v1", "sample-fiqa-q1_v2", "sample-fiqa-q1_v3"]
    assert "config_name: instruction" in (folder / "README.md").read_text()
    again = load_ifir(folder, "fiqa")
    assert again.layout == "mteb" and again.qrels == fiqa.qrels
    assert {q: (v.query, v.instruction, v.level) for q, v in again.queries.items()} == {
        q: (v.query, v.instruction, v.level) for q, v in fiqa.queries.items()}


def _loaded_counts(folder: Path, cache: Path) -> dict[str, int]:
    """What MTEB's loader gets from ``folder``: ``datasets.load_dataset(path, config, split)``."""
    datasets = pytest.importorskip("datasets")
    return {config: len(datasets.load_dataset(str(folder), config, split="test", cache_dir=str(cache)))
            for config in ("corpus", "queries", "default")}


def _counts(name: str) -> dict[str, int]:
    bench = load_benchmark(name)
    return {"corpus": len(bench.corpus), "queries": len(bench.queries),
            "default": sum(len(docs) for docs in bench.qrels.values())}


def test_two_exported_datasets_load_their_own_data_from_one_datasets_cache(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    folders = {}
    for name in ("ifir-sample/fiqa", "ifir-sample/nfcorpus"):
        out = tmp_path / name.replace("/", "-")
        assert main(["mteb-export", "--benchmark", name, "--dataset", "--out", str(out)]) == 0
        [folders[name]] = [p for p in out.iterdir() if p.is_dir()]
        assert str(folders[name]) in capsys.readouterr().out
    assert {name: _loaded_counts(folder, tmp_path / "hf-datasets") for name, folder in folders.items()} == {
        name: _counts(name) for name in folders}
    assert [f.name.rsplit("-", 1)[0] for f in folders.values()] == ["ifir-sample-fiqa-instructed",
                                                                   "ifir-sample-nfcorpus-instructed"]


def test_exports_moved_into_same_named_folders_keep_their_own_cache_entries(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    for name in ("ifir-sample/fiqa", "ifir-sample/nfcorpus"):
        folder = write_mteb_dataset(load_benchmark(name), tmp_path / "exports")
        (tmp_path / name).mkdir(parents=True)
        moved = folder.rename(tmp_path / name / "dataset")  # the README's configs carry the content hash
        assert _loaded_counts(moved, tmp_path / "hf-datasets") == _counts(name)


def test_runs_with_queries_outside_the_benchmark_are_not_written(fiqa, tmp_path):
    run = Run.from_scores({"elsewhere_1": {"d": 1.0}})
    with raises_saying(UsageError, "1 queries", "ifir-sample/fiqa"):
        write_mteb_predictions(run, fiqa, tmp_path, model_name="m")


def test_another_models_predictions_are_refused_the_same_models_other_ones_set_aside(fiqa, tmp_path, capsys):
    # exporting a second model into the folder replaced the first one's predictions; later, a second run of the
    # same model (its query-only run, say) replaced the first one's without a word
    other = tmp_path / "IFIRFiQA_predictions.json"
    other.write_bytes((MTEB / "IFIRFiQA_predictions.json").read_bytes())  # MTEB's own file, its model first
    before = other.read_bytes()
    run = Run.from_scores({next(iter(fiqa.queries)): {"d": 1.0}})
    with raises_saying(UsageError, str(other), "the predictions of 'instir/bm25s-sample'", "not of 'bm25'"):
        write_mteb_predictions(run, fiqa, tmp_path, model_name="bm25")
    assert other.read_bytes() == before
    with pytest.warns(UserWarning, match="holds other predictions of 'instir/bm25s-sample'.*set aside as"):
        assert write_mteb_predictions(run, fiqa, tmp_path, model_name="instir/bm25s-sample") == other
    [aside] = tmp_path.glob("IFIRFiQA_predictions.json.set-aside-*")
    assert aside.read_bytes() == before and other.read_bytes() != before
    written = other.read_bytes()
    write_mteb_predictions(run, fiqa, tmp_path, model_name="instir/bm25s-sample")  # the same again: nothing set aside
    assert other.read_bytes() == written and len(list(tmp_path.glob("*.set-aside-*"))) == 1
    other.write_text('{"default": {}}')
    with raises_saying(UsageError, "holds no predictions"):
        write_mteb_predictions(run, fiqa, tmp_path, model_name="instir/bm25s-sample")


def test_mteb_export_refuses_a_pair_template_or_a_template_without_a_dataset_before_writing_anything(tmp_path,
                                                                                                      capsys):
    # before, --run X --dataset --template <a pair template> wrote the predictions, then refused the template; and
    # --template without --dataset was ignored without a word
    from instir.retrieval import retrieve
    from instir.retrieval.lexical import BM25Retriever

    run = retrieve(load_benchmark("ifir-sample/fiqa"), BM25Retriever(show_progress=False), k=5, out_dir=tmp_path)
    base = ["mteb-export", "--benchmark", "ifir-sample/fiqa", "--run", run.meta["path"]]
    assert main([*base, "--dataset", "--template", "ifir-instructor", "--out", str(tmp_path / "a")]) == 2
    assert "[instruction, text] pairs" in capsys.readouterr().err and not (tmp_path / "a").exists()
    assert main([*base, "--template", "instructir", "--out", str(tmp_path / "b")]) == 2
    assert "give --dataset too" in capsys.readouterr().err and not (tmp_path / "b").exists()


def test_mteb_export_of_a_run_of_another_benchmark_names_the_run_file(tmp_path, capsys):
    (tmp_path / "r.trec").write_text("zz Q0 d1 1 3.0 t\n")
    assert main(["mteb-export", "--benchmark", "ifir-sample/fiqa", "--run", str(tmp_path / "r.trec"),
                 "--out", str(tmp_path / "out")]) == 2
    assert f"1 queries of the run {tmp_path / 'r.trec'} are not in ifir-sample/fiqa" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_mteb_export_with_nothing_to_write_is_one_line_and_writes_nothing(tmp_path, capsys):
    assert main(["mteb-export", "--benchmark", "ifir-sample/fiqa", "--out", str(tmp_path / "out")]) == 2
    assert "nothing to write: give --run FILE and/or --dataset" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_mteb_export_refuses_two_runs_for_one_folder_where_the_second_would_replace_the_first(tmp_path, capsys):
    # both are predictions of one task: MTEB's one <Task>_predictions.json per folder
    assert main(["mteb-export", "--benchmark", "ifir-sample/fiqa", "--run", str(tmp_path / "a.trec"),
                 "--run", str(tmp_path / "b.trec"), "--out", str(tmp_path / "out")]) == 2
    assert "write one --run per --out folder" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_mteb_export_names_the_predictions_after_the_runs_card_model_or_retriever(tmp_path):
    from instir.cli.mteb import run_identity

    path = tmp_path / "e5.trec"
    carded = {"system": {"model": "org/card-model", "revision": "abc123"},
              "retriever": {"name": "dense", "params": {"model": "org/other"}}}
    assert run_identity(carded, path) == ("org/card-model", "abc123")
    bundled = {"retriever": {"name": "dense", "params": {"model": "all-MiniLM-L6-v2 (bundled by instir)"}}}
    assert run_identity(bundled, path) == ("all-MiniLM-L6-v2", None)
    assert run_identity({"retriever": {"name": "bm25", "params": {}}}, path) == ("bm25", None)


def test_mteb_export_writes_the_model_name_and_revision_it_is_given(tmp_path, capsys):
    from instir.retrieval import retrieve
    from instir.retrieval.lexical import BM25Retriever

    run = retrieve(load_benchmark("ifir-sample/fiqa"), BM25Retriever(show_progress=False), k=5, out_dir=tmp_path)
    assert main(["mteb-export", "--benchmark", "ifir-sample/fiqa", "--run", run.meta["path"], "--model-name", "org/m",
                 "--revision", "r1", "--out", str(tmp_path / "out")]) == 0
    written = json.loads(next((tmp_path / "out").glob("*_predictions.json")).read_text())
    assert (written["mteb_model_meta"]["model_name"], written["mteb_model_meta"]["revision"]) == ("org/m", "r1")


def test_a_prediction_file_name_in_capitals_is_still_read_as_mteb_predictions():
    from instir.retrieval.mteb import is_mteb_predictions

    assert is_mteb_predictions("out/IFIRFIQA_PREDICTIONS.JSON") and is_mteb_predictions("x.Json")
    assert not is_mteb_predictions("run.trec")


def test_a_file_with_one_split_other_than_test_reads_that_split(tmp_path):
    path = tmp_path / "IFIRFiQA_predictions.json"
    path.write_text(json.dumps({"default": {"dev": {"sample-fiqa-q1_v1": {"d1": 2.0}}}}))
    predictions = read_mteb_predictions(path)
    assert predictions.split == "dev" and predictions.scores == {"sample-fiqa-q1_v1": {"d1": 2.0}}


def test_a_boolean_score_is_refused_and_integer_scores_read_as_floats(tmp_path):
    path = tmp_path / "IFIRFiQA_predictions.json"
    path.write_text('{"default": {"test": {"sample-fiqa-q1_v1": {"d1": true}}}}')
    with raises_saying(FormatError, "query 'sample-fiqa-q1_v1'", "field 'd1'", "expected a finite number", "true"):
        read_mteb_predictions(path)
    path.write_text('{"default": {"test": {"sample-fiqa-q1_v1": {"d1": 3, "d2": 1}}}}')
    scores = read_mteb_predictions(path).scores["sample-fiqa-q1_v1"]
    assert scores == {"d1": 3.0, "d2": 1.0} and all(type(s) is float for s in scores.values())


@pytest.mark.parametrize("key", ["model_name", "revision"])
def test_a_model_name_or_revision_that_is_no_string_is_refused_naming_it(tmp_path, key):
    path = tmp_path / "IFIRFiQA_predictions.json"
    path.write_text(json.dumps({"mteb_model_meta": {key: 5}, "default": {"test": {}}}))
    with raises_saying(FormatError, "mteb_model_meta", f"field '{key}'", "expected a string, got int"):
        read_mteb_predictions(path)


def test_two_mteb_ids_of_one_query_are_refused_not_one_silently_kept(fiqa, tmp_path):
    path = tmp_path / "IFIRFiQA_predictions.json"
    path.write_text(json.dumps({"default": {"test": {"sample-fiqa-q1_v1": {"d1": 1.0},
                                                     "sample-fiqa-q1-v1": {"d2": 5.0}}}}))
    with raises_saying(FormatError, "field 'sample-fiqa-q1-v1'", "a second MTEB id for query 'sample-fiqa-q1_1'"):
        read_predictions_run(path, fiqa)


def test_an_indented_prediction_file_of_the_same_model_is_set_aside_not_refused(fiqa, tmp_path):
    other = tmp_path / "IFIRFiQA_predictions.json"
    before = json.dumps(json.loads((MTEB / other.name).read_text()), indent=2)  # pretty-printed by hand
    other.write_text(before)
    run = Run.from_scores({next(iter(fiqa.queries)): {"d": 1.0}})
    with pytest.warns(UserWarning, match="holds other predictions of 'instir/bm25s-sample'"):
        write_mteb_predictions(run, fiqa, tmp_path, model_name="instir/bm25s-sample")
    [aside] = tmp_path.glob("IFIRFiQA_predictions.json.set-aside-*")
    assert aside.read_text() == before


def test_the_instructir_copy_keeps_each_bare_query_as_origin_query(tmp_path):
    sample = load_benchmark("instructir-sample")
    folder = write_mteb_dataset(sample, tmp_path / "instructir")
    queries = [json.loads(line) for line in (folder / "queries.jsonl").read_text().splitlines()]
    assert {q["_id"]: q["metadata"]["origin_query"] for q in queries} == {
        qid: query.query for qid, query in sample.queries.items()}
    ifir = write_mteb_dataset(load_benchmark("ifir-sample/fiqa"), tmp_path / "fiqa")
    assert all("metadata" not in json.loads(line) for line in (ifir / "queries.jsonl").read_text().splitlines())


@pytest.mark.parametrize(("key", "value"), [("query", "sample-fiqa q1_v1"), ("document", "d\x00 1")])
def test_a_query_or_document_id_no_trec_file_could_hold_is_refused_naming_it(tmp_path, key, value):
    path = tmp_path / "IFIRFiQA_predictions.json"
    qid, docid = (value, "d1") if key == "query" else ("sample-fiqa-q1_v1", value)
    path.write_text(json.dumps({"default": {"test": {qid: {docid: 1.0}}}}))
    with raises_saying(FormatError, f"{key} id", "remove it"):
        read_mteb_predictions(path)


def test_a_missing_subset_names_the_subsets_the_file_has_not_its_model_meta(tmp_path):
    path = tmp_path / "IFIRFiQA_predictions.json"
    path.write_text(json.dumps({"mteb_model_meta": {"model_name": "m"}, "Default": {"test": {}}}))
    with pytest.raises(FormatError) as err:
        read_mteb_predictions(path)
    assert str(err.value).endswith("missing subset; the file has 'Default'")


def test_other_predictions_of_the_same_model_and_size_are_set_aside_too(fiqa, tmp_path):
    qid = next(iter(fiqa.queries))
    first = write_mteb_predictions(Run.from_scores({qid: {"d": 1.0}}), fiqa, tmp_path, model_name="m")
    before = first.read_text()
    with pytest.warns(UserWarning, match="holds other predictions of 'm'"):
        write_mteb_predictions(Run.from_scores({qid: {"d": 2.0}}), fiqa, tmp_path, model_name="m")  # same length
    [aside] = tmp_path.glob("IFIRFiQA_predictions.json.set-aside-*")
    assert aside.read_text() == before and '"d": 2.0' in first.read_text()


def test_a_subset_with_no_split_is_one_error_naming_it(tmp_path):
    path = tmp_path / "IFIRFiQA_predictions.json"
    path.write_text('{"default": {}}')
    with raises_saying(FormatError, "subset 'default'", "field 'test'", "missing split; the subset has none"):
        read_mteb_predictions(path)


def test_a_long_model_name_is_recognised_in_its_own_earlier_predictions(fiqa, tmp_path):
    name = "an-organisation-with-a-long-name/" + "a-model-" * 10 + "v2"
    qid = next(iter(fiqa.queries))
    write_mteb_predictions(Run.from_scores({qid: {"d": 1.0}}), fiqa, tmp_path, model_name=name)
    with pytest.warns(UserWarning, match="holds other predictions"):  # set aside, not refused as another model's
        write_mteb_predictions(Run.from_scores({qid: {"d": 2.5}}), fiqa, tmp_path, model_name=name)


def test_a_run_read_from_predictions_records_their_subset_and_split(fiqa, tmp_path):
    path = tmp_path / "IFIRFiQA_predictions.json"
    path.write_text(json.dumps({"default": {"dev": {"sample-fiqa-q1_v1": {"d1": 2.0}}}}))
    meta = read_predictions_run(path, fiqa).meta
    assert (meta["mteb_subset"], meta["mteb_split"]) == ("default", "dev")


@pytest.mark.parametrize("name", ['org/café-model', 'org/"quoted"\\model'])
def test_a_model_name_json_escapes_is_recognised_in_its_own_earlier_predictions(fiqa, tmp_path, name):
    qid = next(iter(fiqa.queries))
    write_mteb_predictions(Run.from_scores({qid: {"d": 1.0}}), fiqa, tmp_path, model_name=name)
    with pytest.warns(UserWarning, match="holds other predictions"):  # set aside, not refused as another model's
        write_mteb_predictions(Run.from_scores({qid: {"d": 2.5}}), fiqa, tmp_path, model_name=name)


def test_mteb_export_dataset_names_every_file_it_wrote(tmp_path, capsys):
    # a FollowIR export also writes instructions.jsonl, top_ranked.jsonl and qrel_diff.jsonl: the line names them
    assert main(["mteb-export", "--benchmark", "followir-sample/core17", "--dataset", "--out", str(tmp_path)]) == 0
    [folder] = [p for p in tmp_path.iterdir() if p.is_dir()]
    written = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    assert {"instructions.jsonl", "top_ranked.jsonl", "qrel_diff.jsonl"} <= written
    printed = capsys.readouterr().out
    assert all(name in printed for name in written)
