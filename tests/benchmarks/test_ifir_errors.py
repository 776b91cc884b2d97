"""Bad IFIR input: every error names the file, the place (array index or line) and the field."""

import json
import shutil
from pathlib import Path

import pytest

from instir.benchmarks import FormatError
from instir.benchmarks.ifir import load_ifir

FIXTURES = Path(__file__).parent / "fixtures"


def _copy(tmp_path: Path, folder: str) -> Path:
    root = tmp_path / folder
    shutil.copytree(FIXTURES / folder, root)
    return root


def _edit_test_data(tmp_path: Path, subset: str, change) -> Path:
    root = _copy(tmp_path, "ifir-songtingyu")
    path = root / subset / "test_data.json"
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=1))
    return root


def _error(root: Path, subset: str) -> FormatError:
    with pytest.raises(FormatError) as info:
        load_ifir(root, subset)
    return info.value


def test_rel_index_out_of_range_names_array_index_and_field(tmp_path):
    root = _edit_test_data(tmp_path, "fiqa", lambda d: d[1]["instructions"][2].update(rel=[2]))
    err = _error(root, "fiqa")
    assert err.path.endswith("fiqa/test_data.json") and err.where == "array index 1, instructions[2]"
    assert err.field == "rel[0]" and "index 2 out of range" in str(err) and "2 candidates" in str(err)


def test_rel_index_that_is_not_an_integer_is_refused(tmp_path):
    root = _edit_test_data(tmp_path, "fiqa", lambda d: d[0]["instructions"][1].update(rel=[1, "2"]))
    err = _error(root, "fiqa")
    assert (err.where, err.field) == ("array index 0, instructions[1]", "rel[1]")
    assert "expected an integer index" in str(err)


def test_relevant_candidate_missing_from_the_corpus_names_its_corpus_entry(tmp_path):
    root = _edit_test_data(tmp_path, "fiqa", lambda d: d[0]["corpus"][1].update(_id="ghost"))
    err = _error(root, "fiqa")
    assert err.path.endswith("test_data.json") and (err.where, err.field) == ("array index 0, corpus[1]", "_id")
    assert "unknown document id 'ghost'" in str(err) and "fiqa-corpus.jsonl" in str(err)


def test_missing_instructions_field_is_refused(tmp_path):
    root = _edit_test_data(tmp_path, "fire", lambda d: d[1].pop("instructions"))
    err = _error(root, "fire")
    assert (err.where, err.field) == ("array index 1", "instructions")


def test_missing_query_text_is_refused(tmp_path):
    root = _edit_test_data(tmp_path, "fiqa", lambda d: d[1].pop("text"))
    err = _error(root, "fiqa")
    assert (err.where, err.field) == ("array index 1", "text") and "missing" in str(err)


def test_duplicate_query_id_is_refused(tmp_path):
    root = _edit_test_data(tmp_path, "fire", lambda d: d[1].update(_id="F12"))
    err = _error(root, "fire")
    assert (err.where, err.field) == ("array index 1", "_id")
    assert "duplicate query id 'F12' (first at array index 0)" in str(err)


def test_multi_level_subset_with_a_level_outside_one_to_three_is_refused(tmp_path):
    root = _edit_test_data(tmp_path, "fiqa", lambda d: d[1]["instructions"][0].update(level=0))
    err = _error(root, "fiqa")
    assert (err.where, err.field) == ("array index 1, instructions[0]", "level") and "outside 1-3" in str(err)


def test_single_level_subset_with_a_level_other_than_zero_is_refused(tmp_path):
    root = _edit_test_data(tmp_path, "fire", lambda d: d[0]["instructions"][0].update(level=2))
    err = _error(root, "fire")
    assert (err.where, err.field) == ("array index 0, instructions[0]", "level") and "single-level" in str(err)


def test_level_given_as_text_is_refused(tmp_path):
    root = _edit_test_data(tmp_path, "fiqa", lambda d: d[0]["instructions"][0].update(level="1"))
    assert _error(root, "fiqa").field == "level"


def test_malformed_test_data_json_names_the_line(tmp_path):
    root = _copy(tmp_path, "ifir-songtingyu")
    path = root / "fiqa" / "test_data.json"
    lines = path.read_text().splitlines()
    lines[2] = lines[2].rstrip(",")
    path.write_text("\n".join(lines) + "\n")
    err = _error(root, "fiqa")
    assert err.where == 4 and "malformed JSON" in str(err)


def test_a_test_data_json_nested_deeper_than_python_parses_is_a_format_error_naming_the_file(tmp_path):
    root = _copy(tmp_path, "ifir-songtingyu")
    (root / "fiqa" / "test_data.json").write_text("[" * 200_000)  # json.loads raises RecursionError
    err = _error(root, "fiqa")
    assert err.path.endswith("test_data.json") and "nested deeper than Python reads" in str(err)


def test_duplicate_corpus_document_names_the_line(tmp_path):
    root = _copy(tmp_path, "ifir-songtingyu")
    path = root / "fire" / "fire-corpus.jsonl"
    path.write_text(path.read_text() + json.dumps({"_id": "C102", "text": "Again."}) + "\n")
    err = _error(root, "fire")
    assert err.path.endswith("fire-corpus.jsonl") and (err.where, err.field) == (5, "_id")


def test_beir_query_id_without_level_suffix_is_refused(tmp_path):
    root = _copy(tmp_path, "ifir-beir")
    path = root / "fiqa" / "fiqa-query.jsonl"
    path.write_text(path.read_text() + json.dumps({"_id": "55", "text": "What is a bond?"}) + "\n")
    err = _error(root, "fiqa")
    assert err.path.endswith("fiqa-query.jsonl") and (err.where, err.field) == (9, "_id")
    assert "'<query id>_<level>'" in str(err)


def test_beir_qrels_for_an_unknown_query_name_the_line(tmp_path):
    root = _copy(tmp_path, "ifir-beir")
    path = root / "fire" / "fire-qrel.tsv"
    path.write_text(path.read_text() + "F99_1\tC101\t1\n")
    err = _error(root, "fire")
    assert err.path.endswith("fire-qrel.tsv") and (err.where, err.field) == (8, "query-id")


def test_beir_single_level_subset_with_two_instructed_records_is_refused(tmp_path):
    root = _copy(tmp_path, "ifir-beir")
    path = root / "fire" / "fire-query.jsonl"
    path.write_text(path.read_text() + json.dumps({"_id": "F40_2", "text": "Can a tenant be evicted? Other."}) + "\n")
    err = _error(root, "fire")
    assert (err.where, err.field) == (5, "_id") and "single-level" in str(err)


def test_readme_query_json_array_errors_name_the_array_index(tmp_path):
    root = _copy(tmp_path, "ifir-readme")
    path = root / "fiqa" / "fiqa-query.json"
    data = json.loads(path.read_text())
    del data[3]["text"]
    path.write_text(json.dumps(data))
    err = _error(root, "fiqa")
    assert (err.where, err.field) == ("array index 3", "text")


def test_mteb_query_without_an_instruction_is_refused(tmp_path):
    root = _copy(tmp_path, "ifir-mteb")
    path = root / "fire" / "instructions.jsonl"
    path.write_text(path.read_text().splitlines()[0] + "\n")
    err = _error(root, "fire")
    assert err.path.endswith("fire/queries.jsonl") and (err.where, err.field) == (2, "_id")
    assert "no instruction for query 'F40' in fire/instructions.jsonl" in str(err)


def test_mteb_multi_level_query_id_without_a_level_token_is_refused(tmp_path):
    root = _copy(tmp_path, "ifir-mteb")
    for name in ("queries.jsonl", "instructions.jsonl", "qrels/test.jsonl"):
        path = root / "fiqa" / name
        path.write_text(path.read_text().replace('"877_v3"', '"877"'))
    err = _error(root, "fiqa")
    assert (err.where, err.field) == (6, "_id") and "no level token" in str(err)


def test_mteb_qrels_pointing_at_an_unknown_document_name_the_line(tmp_path):
    root = _copy(tmp_path, "ifir-mteb")
    path = root / "fire" / "qrels" / "test.jsonl"
    path.write_text(path.read_text() + json.dumps({"query-id": "F40", "corpus-id": "C999", "score": 1}) + "\n")
    err = _error(root, "fire")
    assert err.path.endswith("test.jsonl") and (err.where, err.field) == (4, "corpus-id")
    assert "unknown document id 'C999'" in str(err)


def test_a_folder_without_ifir_files_lists_what_was_expected(tmp_path):
    (tmp_path / "fiqa").mkdir()
    err = _error(tmp_path, "fiqa")
    assert "test_data.json" in str(err) and "fiqa-query.jsonl" in str(err) and "instructions.jsonl" in str(err)


def test_songtingyu_folder_without_its_corpus_file_is_refused(tmp_path):
    root = _copy(tmp_path, "ifir-songtingyu")
    (root / "fire" / "fire-corpus.jsonl").unlink()
    err = _error(root, "fire")
    assert err.path.endswith("fire-corpus.jsonl") and "file not found" in str(err)


def test_unknown_subset_is_refused():
    with pytest.raises(ValueError, match="unknown IFIR subset 'robust04'"):
        load_ifir(FIXTURES / "ifir-songtingyu", "robust04")


@pytest.mark.parametrize("change, where, field, named", [
    (lambda d: d.append(5), "array index 2", None, "expected a JSON object, got int"),
    (lambda d: d[0]["instructions"].__setitem__(0, "General advice"), "array index 0, instructions[0]", None,
     "got str"),
    (lambda d: d[0]["instructions"][0].pop("rel"), "array index 0, instructions[0]", "rel", "missing"),
    (lambda d: d[1].pop("corpus"), "array index 1", "corpus", "missing"),
    (lambda d: d[0]["corpus"].__setitem__(1, "C1"), "array index 0, corpus[1]", None, "got str"),
])
def test_a_test_data_element_of_the_wrong_shape_is_named_by_its_place(tmp_path, change, where, field, named):
    err = _error(_edit_test_data(tmp_path, "fiqa", change), "fiqa")
    assert err.path.endswith("fiqa/test_data.json") and (err.where, err.field) == (where, field)
    assert named in str(err)


def _append_line(path: Path, record: dict) -> None:
    path.write_text(path.read_text() + json.dumps(record) + "\n")


@pytest.mark.parametrize("record, line, named", [
    ({"_id": "4102_1", "text": "Is it worth paying a financial advisor? Again."}, 9,
     "duplicate query id '4102_1' (first on line 2)"),
    ({"_id": "77_1", "text": "A question of its own? With an instruction."}, 9, "no bare query '77_0'"),
    ({"_id": "88_0", "text": "A bare question alone?"}, 9, "has only its bare '_0' record"),
])
def test_beir_query_records_that_make_no_instance_name_their_line(tmp_path, record, line, named):
    root = _copy(tmp_path, "ifir-beir")
    _append_line(root / "fiqa" / "fiqa-query.jsonl", record)
    err = _error(root, "fiqa")
    assert err.path.endswith("fiqa-query.jsonl") and (err.where, err.field) == (line, "_id") and named in str(err)


def test_a_beir_instance_that_only_repeats_its_bare_query_has_no_instruction(tmp_path):
    root = _copy(tmp_path, "ifir-beir")
    _append_line(root / "fiqa" / "fiqa-query.jsonl", {"_id": "55_0", "text": "What is a bond?"})
    _append_line(root / "fiqa" / "fiqa-query.jsonl", {"_id": "55_1", "text": "What is a bond? "})
    err = _error(root, "fiqa")
    assert (err.where, err.field) == (10, "text") and "'55_1' has no instruction beyond the bare query" in str(err)


@pytest.mark.parametrize("layout, missing, named", [
    ("ifir-beir", "fiqa-qrel.tsv", "needs fiqa-qrel.tsv or fiqa-qrel.jsonl"),
    ("ifir-mteb", "corpus.jsonl", "the mteb layout, beside instructions.jsonl, needs corpus.jsonl"),
])
def test_a_layout_without_one_of_its_files_names_the_file(tmp_path, layout, missing, named):
    root = _copy(tmp_path, layout)
    (root / "fiqa" / missing).unlink()
    err = _error(root, "fiqa")
    assert err.path.endswith(f"fiqa/{missing}") and "file not found" in str(err) and named in str(err)


@pytest.mark.parametrize("file, record, line, field, named", [
    ("instructions.jsonl", {"query-id": "4102_v1", "instruction": "Again."}, 7, "query-id",
     "duplicate instruction for query '4102_v1' (first on line 1)"),
    ("instructions.jsonl", {"query-id": "999_v1", "instruction": "Nobody asked."}, 7, "query-id",
     "unknown query id '999_v1' (not in fiqa/queries.jsonl)"),
    ("queries.jsonl", {"_id": "4102_v1", "text": "Is it worth paying a financial advisor?"}, 7, "_id",
     "duplicate query id '4102_v1' (first on line 1)"),
])
def test_mteb_records_that_repeat_or_match_nothing_name_their_line(tmp_path, file, record, line, field, named):
    root = _copy(tmp_path, "ifir-mteb")
    _append_line(root / "fiqa" / file, record)
    err = _error(root, "fiqa")
    assert err.path.endswith(f"fiqa/{file}") and (err.where, err.field) == (line, field) and named in str(err)


def test_an_mteb_query_id_that_is_only_a_level_token_is_refused(tmp_path):
    root = _copy(tmp_path, "ifir-mteb")
    _append_line(root / "fiqa" / "queries.jsonl", {"_id": "v1", "text": "A question?"})
    _append_line(root / "fiqa" / "instructions.jsonl", {"query-id": "v1", "instruction": "Any."})
    err = _error(root, "fiqa")
    assert (err.where, err.field) == (7, "_id") and "'v1' is only a level token" in str(err)


def test_a_test_data_json_that_is_no_regular_file_is_named_not_taken_for_a_missing_layout(tmp_path):
    root = _copy(tmp_path, "ifir-songtingyu")
    (root / "fire" / "test_data.json").unlink()
    (root / "fire" / "test_data.json").mkdir()
    err = _error(root, "fire")
    assert err.path.endswith("test_data.json") and "no IFIR files found" not in str(err)


def test_query_text_of_only_whitespace_is_refused_as_empty(tmp_path):
    root = _edit_test_data(tmp_path, "fiqa", lambda d: d[1].update(text=" \n\t "))
    err = _error(root, "fiqa")
    assert (err.where, err.field) == ("array index 1", "text") and "empty" in str(err)


def test_a_test_data_json_that_is_an_object_not_an_array_is_refused(tmp_path):
    root = _copy(tmp_path, "ifir-songtingyu")
    (root / "fiqa" / "test_data.json").write_text("{}\n")
    err = _error(root, "fiqa")
    assert err.path.endswith("test_data.json") and "expected a JSON array at top level, got dict" in str(err)
