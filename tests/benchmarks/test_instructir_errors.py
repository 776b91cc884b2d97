"""Bad InstructIR input: every error names the file, the line and the field (or what is missing)."""

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from says import raises_saying

from instir.benchmarks.instructir import load_instructir
from instir.benchmarks.types import FormatError

FIXTURES = Path(__file__).parent / "fixtures"


def copy(layout: str, tmp_path: Path) -> Path:
    root = tmp_path / layout
    shutil.copytree(FIXTURES / f"instructir-{layout}", root)
    return root


def edit_json(path: Path, line: int, change) -> None:
    """Let ``change`` mutate the record on a 1-based line of a JSON-lines file."""
    rec = json.loads(path.read_text(encoding="utf-8").splitlines()[line - 1])
    change(rec)
    replace_line(path, line, json.dumps(rec))


def replace_line(path: Path, line: int, text: str) -> None:
    lines = path.read_text(encoding="utf-8").splitlines()
    lines[line - 1] = text
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def edit_parquet(path: Path, change) -> None:
    rows = pq.read_table(path).to_pylist()
    change(rows)
    pq.write_table(pa.Table.from_pylist(rows), path)


def load_error(root: Path, path: Path, line: int | None, field: str | None, setting: str = "instructed") -> str:
    with pytest.raises(FormatError) as info:
        load_instructir(root, setting)
    err = info.value
    assert (Path(err.path), err.where, err.field) == (path, line, field)
    message = str(err)
    assert message.startswith(str(path))
    if line is not None:
        assert f"line {line}" in message
    if field is not None:
        assert f"field '{field}'" in message
    return message


def test_malformed_json_names_file_and_line(tmp_path):
    root = copy("hf", tmp_path)
    replace_line(root / "queries.jsonl", 4, '{"_id": "1019179_4", "text": ')
    assert "malformed JSON" in load_error(root, root / "queries.jsonl", 4, None)


def test_a_json_line_nested_deeper_than_python_parses_is_a_format_error_naming_its_line(tmp_path):
    root = copy("hf", tmp_path)
    replace_line(root / "queries.jsonl", 4, "[" * 200_000)  # json.loads raises RecursionError
    assert "nested deeper than Python reads" in load_error(root, root / "queries.jsonl", 4, None)


def test_query_without_id_is_rejected(tmp_path):
    root = copy("hf", tmp_path)
    edit_json(root / "queries.jsonl", 2, lambda rec: rec.pop("_id"))
    assert "missing" in load_error(root, root / "queries.jsonl", 2, "_id")


def test_instruction_without_text_is_rejected(tmp_path):
    root = copy("github", tmp_path)
    edit_json(root / "only_instruction_queries.jsonl", 5, lambda rec: rec.pop("text"))
    load_error(root, root / "only_instruction_queries.jsonl", 5, "text")


def test_instruction_without_origin_query_is_rejected(tmp_path):
    root = copy("github", tmp_path)
    edit_json(root / "only_instruction_queries.jsonl", 7, lambda rec: rec["metadata"].clear())
    load_error(root, root / "only_instruction_queries.jsonl", 7, "metadata.origin_query")


def test_duplicate_query_id_is_rejected(tmp_path):
    root = copy("hf", tmp_path)
    edit_json(root / "queries.jsonl", 3, lambda rec: rec.update(_id="1019179_1"))
    assert "duplicate query id '1019179_1' (first on line 1)" in load_error(
        root, root / "queries.jsonl", 3, "_id")


def test_missing_sep_is_rejected(tmp_path):
    root = copy("hf", tmp_path)
    edit_json(root / "queries.jsonl", 8, lambda rec: rec.update(text=rec["text"].replace("[SEP]", "")))
    assert "[SEP]" in load_error(root, root / "queries.jsonl", 8, "text")


def test_missing_sep_in_order_file_is_rejected(tmp_path):
    root = copy("github", tmp_path)
    path = root / "analysis_order_sensitivity" / "new_queries.jsonl"
    edit_json(path, 19, lambda rec: rec.update(text=rec["text"].replace(" [SEP] ", " ")))
    load_error(root, path, 19, "text", "order-sensitivity")


def test_empty_instruction_is_rejected(tmp_path):
    root = copy("github", tmp_path)
    path = root / "analysis_prompt_sensitivity" / "og_queries.jsonl"
    edit_json(path, 2, lambda rec: rec.update(text=" [SEP] washington county arkansas property tax"))
    assert "empty instruction" in load_error(root, path, 2, "text", "prompt-sensitivity")


def test_query_part_disagreeing_with_origin_query_is_rejected(tmp_path):
    root = copy("hf", tmp_path)
    edit_json(root / "queries.jsonl", 10, lambda rec: rec["metadata"].update(origin_query="washington county tax"))
    assert "differs from metadata.origin_query" in load_error(root, root / "queries.jsonl", 10, "text")


def test_hf_queries_disagreeing_with_github_instructions_are_rejected(tmp_path):
    root = copy("github", tmp_path)
    shutil.copy(FIXTURES / "instructir-hf" / "queries.jsonl", root / "queries.jsonl")
    edit_json(root / "queries.jsonl", 6, lambda rec: rec.update(text="Another instruction. [SEP] " + rec["text"][-24:]))
    assert "disagrees with only_instruction_queries.jsonl" in load_error(root, root / "queries.jsonl", 6, "text")


def test_judgment_of_unknown_document_is_rejected(tmp_path):
    root = copy("hf", tmp_path)
    path = root / "qrels" / "test.tsv"
    path.write_text(path.read_text().replace("91422_3\t7564348_3", "91422_3\t7564348_99"))
    # the field as the file's header names it (qid, pid, score): before, 'corpus-id', a name the file does not hold
    assert "'7564348_99'" in load_error(root, path, 16, "pid")


def test_judgment_of_unknown_query_is_rejected(tmp_path):
    root = copy("github", tmp_path)
    path = root / "qrels" / "for_only_query_test.tsv"
    path.write_text(path.read_text() + "1234\t7749348_1\t1\n")
    assert "'1234'" in load_error(root, path, 21, "qid", "query-only")


def test_unjudged_instance_is_rejected(tmp_path):
    root = copy("github", tmp_path)
    path = root / "analysis_prompt_sensitivity" / "qrels" / "5_test.tsv"
    path.write_text("".join(line for line in path.read_text().splitlines(keepends=True)
                            if not line.startswith("1088800_1.4\t")))
    message = load_error(root, root / "analysis_prompt_sensitivity" / "5new_queries.jsonl", 9, "_id",
                         "prompt-paraphrases")
    assert "'1088800_1.4' has no judgments in 5_test.tsv" in message


def test_non_numeric_grade_is_rejected(tmp_path):
    root = copy("hf", tmp_path)
    path = root / "qrels" / "test.tsv"
    path.write_text(path.read_text().replace("1019179_2\t7749348_2\t1", "1019179_2\t7749348_2\tyes"))
    load_error(root, path, 3, "score")


def test_duplicate_document_id_is_rejected(tmp_path):
    root = copy("hf", tmp_path)
    edit_json(root / "corpus.jsonl", 20, lambda rec: rec.update(_id="7749348_1"))
    load_error(root, root / "corpus.jsonl", 20, "_id")


def test_document_id_repeated_across_corpus_shards_is_rejected_at_its_line_naming_the_first(tmp_path):
    # one rule for every loader's corpus files (docstore.jsonl_corpus): before it, InstructIR named the corpus
    # folder with no line ("the same document id occurs in more than one of 2 corpus files")
    root = copy("mteb", tmp_path)
    shard = root / "corpus" / "test-00000-of-00001.parquet"
    rows = pq.read_table(shard).to_pylist()
    pq.write_table(pa.Table.from_pylist(rows[:12]), shard)
    second = root / "corpus" / "test-00001-of-00001.parquet"
    pq.write_table(pa.Table.from_pylist(rows[11:]), second)
    message = load_error(root, second, 1, "_id")
    assert f"duplicate document id '{rows[11]['_id']}' (first on test-00000-of-00001.parquet line 12)" in message


def test_mteb_instruction_for_unknown_query_is_rejected(tmp_path):
    root = copy("mteb", tmp_path)
    path = root / "instruction" / "test-00000-of-00001.parquet"
    edit_parquet(path, lambda rows: rows[4].update({"query-id": "1019179_9"}))
    load_error(root, path, 5, "query-id")


def test_mteb_query_without_instruction_is_rejected(tmp_path):
    root = copy("mteb", tmp_path)
    edit_parquet(root / "instruction" / "test-00000-of-00001.parquet", lambda rows: rows.pop(12))
    message = load_error(root, root / "queries" / "test-00000-of-00001.parquet", 13, "_id")
    assert "no instruction for query '91422_1' in instruction/test-00000-of-00001.parquet" in message


def test_unrecognised_folder_lists_the_expected_layouts(tmp_path):
    (tmp_path / "notes.txt").write_text("not a benchmark")
    message = load_error(tmp_path, tmp_path, None, None)
    for expected in ("only_instruction_queries.jsonl", "queries.jsonl", "instruction/"):
        assert expected in message


def test_setting_missing_from_layout_names_file_and_setting(tmp_path):
    root = copy("hf", tmp_path)
    message = load_error(root, root / "analysis_order_sensitivity" / "new_queries.jsonl", None, None,
                         "order-sensitivity")
    assert "setting 'order-sensitivity'" in message and "layout 'hf'" in message


def test_github_release_without_corpus_says_where_to_get_it(tmp_path):
    root = copy("github", tmp_path)
    (root / "corpus.jsonl").unlink()
    assert "kaist-ai/InstructIR" in load_error(root, root / "corpus.jsonl", None, None, "query-only")


def test_unknown_setting_is_a_value_error():
    with raises_saying(ValueError, "InstructIR", "'instructions'"):
        load_instructir(FIXTURES / "instructir-hf", "instructions")


def test_missing_root_is_rejected(tmp_path):
    assert "not a directory" in load_error(tmp_path / "absent", tmp_path / "absent", None, None)


def test_empty_query_part_is_rejected(tmp_path):
    root = copy("hf", tmp_path)
    edit_json(root / "queries.jsonl", 8, lambda rec: (rec.update(text=rec["text"].split("[SEP]")[0] + "[SEP] "),
                                                      rec.pop("metadata")))
    assert "empty query" in load_error(root, root / "queries.jsonl", 8, "text")


def test_hf_queries_beside_github_files_missing_an_instance_are_rejected(tmp_path):
    root = copy("github", tmp_path)
    lines = (FIXTURES / "instructir-hf" / "queries.jsonl").read_text().splitlines()
    (root / "queries.jsonl").write_text("\n".join(lines[:5] + lines[6:]) + "\n")
    message = load_error(root, root / "queries.jsonl", None, "_id")
    assert "1 instances of only_instruction_queries.jsonl are missing" in message
    assert json.loads(lines[5])["_id"] in message


def test_an_empty_query_file_is_refused_naming_it(tmp_path):
    root = copy("github", tmp_path)
    (root / "only_queries.jsonl").write_text("")
    assert "no queries found" in load_error(root, root / "only_queries.jsonl", None, None, "query-only")

