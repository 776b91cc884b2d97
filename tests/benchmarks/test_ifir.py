"""IFIR loader on tiny fixtures in every upstream layout: exact counts, exact first/last
records, levels, the rel-index mapping, and that all layouts of one content agree."""

import json
import shutil
from pathlib import Path

import pytest
from says import warns_saying

from instir.benchmarks import Doc, Query
from instir.benchmarks.ifir import load_ifir

FIXTURES = Path(__file__).parent / "fixtures"
LAYOUT_DIRS = {"ifir-songtingyu": "songtingyu", "ifir-beir": "songtingyu-beir", "ifir-readme": "songtingyu-beir",
               "ifir-mteb": "mteb"}

FIQA_FIRST = Query(id="4102_1", query="Is it worth paying a financial advisor?", instruction="General advice please.",
                   group="4102", level=1, subset="fiqa")
FIQA_LAST = Query(id="877_3", query="How do I start investing with little money?",
                  instruction="I am a student with $50 a month and want to learn about stocks.", group="877", level=3,
                  subset="fiqa")
FIQA_QRELS = {"4102_1": {"311": 1, "7420": 1, "15031": 1}, "4102_2": {"7420": 1, "15031": 1}, "4102_3": {"15031": 1},
              "877_1": {"2090": 1, "311": 1}, "877_2": {"2090": 1}, "877_3": {"2090": 1}}
FIRE_FIRST = Query(id="F12_0", query="Was the confession admissible as evidence?",
                   instruction="Only judgments where the confession was made to a police officer.", group="F12",
                   level=0, subset="fire")
FIRE_LAST = Query(id="F40_0", query="Can a tenant be evicted without notice?",
                  instruction="Focus on commercial leases.",
                  group="F40", level=0, subset="fire")
FIRE_QRELS = {"F12_0": {"C101": 1, "S7": 1}, "F40_0": {"C210": 1}}


@pytest.mark.parametrize("folder", list(LAYOUT_DIRS))
def test_fiqa_fixture_loads_with_exact_counts_and_records_in_every_layout(folder):
    bench = load_ifir(FIXTURES / folder, "fiqa")
    assert bench.name == "ifir/fiqa" and bench.layout == LAYOUT_DIRS[folder] and bench.setting == "instructed"
    assert bench.revision == "local" and not bench.is_sample
    assert len(bench.queries) == 6 and len(bench.groups()) == 2 and len(bench.corpus) == 5
    queries = list(bench.queries.values())
    assert queries[0] == FIQA_FIRST and queries[-1] == FIQA_LAST
    assert bench.qrels == FIQA_QRELS
    docs = list(bench.corpus)
    assert docs[0] == Doc(id="311", text="A fee-only advisor can be worth it when your situation is complex.")
    assert docs[-1] == Doc(id="99002", text="Mortgage points lower the rate in exchange for an upfront fee.")
    assert bench.describe()["levels"] == json.dumps({"1": 2, "2": 2, "3": 2})
    assert bench.describe()["avg_relevant"] == 1.67
    assert bench.meta["domain"] == "finance" and bench.meta["multi_level"] is True


@pytest.mark.parametrize("folder", ["ifir-songtingyu", "ifir-beir", "ifir-mteb"])
def test_single_level_fire_fixture_loads_as_level_zero_in_every_layout(folder):
    bench = load_ifir(FIXTURES / folder, "fire")
    assert len(bench.queries) == 2 and len(bench.groups()) == 2 and len(bench.corpus) == 4
    queries = list(bench.queries.values())
    assert queries[0] == FIRE_FIRST and queries[-1] == FIRE_LAST
    assert bench.qrels == FIRE_QRELS
    docs = list(bench.corpus)
    assert docs[0].id == "C101" and docs[-1].id == "C210"
    assert bench.describe()["levels"] == json.dumps({"0": 2})


def test_every_layout_of_one_content_gives_the_same_queries_and_qrels():
    for subset in ("fiqa", "fire"):
        reference = load_ifir(FIXTURES / "ifir-songtingyu", subset)
        for folder in LAYOUT_DIRS:
            if (FIXTURES / folder / subset).is_dir():
                other = load_ifir(FIXTURES / folder, subset)
                assert other.queries == reference.queries, folder
                assert other.qrels == reference.qrels, folder


def test_rel_indices_map_to_doc_ids_and_back():
    data = json.loads((FIXTURES / "ifir-songtingyu" / "fiqa" / "test_data.json").read_text())
    bench = load_ifir(FIXTURES / "ifir-songtingyu", "fiqa")
    for element in data:
        candidates = [c["_id"] for c in element["corpus"]]
        for item in element["instructions"]:
            relevant = bench.qrels[f"{element['_id']}_{item['level']}"]
            assert {candidates[i] for i in item["rel"]} == set(relevant)
            assert sorted(candidates.index(d) for d in relevant) == sorted(item["rel"])


def test_source_ids_map_instances_back_to_the_ids_in_the_file():
    assert load_ifir(FIXTURES / "ifir-songtingyu", "fiqa").meta["source_ids"] == {}
    assert load_ifir(FIXTURES / "ifir-mteb", "fiqa").meta["source_ids"]["877_2"] == "877_v2"
    assert load_ifir(FIXTURES / "ifir-beir", "fire").meta["source_ids"] == {"F12_0": "F12_1", "F40_0": "F40_1"}


def test_empty_documents_are_skipped_and_titles_kept_when_present():
    docs = {d.id: d for d in load_ifir(FIXTURES / "ifir-songtingyu", "fiqa").corpus}
    assert "99001" not in docs
    assert docs["2090"].indexed_text == "Micro-investing apps Apps let you buy fractional shares with a few dollars."
    assert docs["15031"].title == "" and docs["7420"].title == ""


def test_the_subset_folder_itself_is_accepted_as_root():
    bench = load_ifir(FIXTURES / "ifir-songtingyu" / "fiqa", "fiqa")
    assert bench.source == str(FIXTURES / "ifir-songtingyu" / "fiqa") and len(bench.queries) == 6


def _copy(tmp_path: Path, folder: str = "ifir-songtingyu") -> Path:
    root = tmp_path / folder
    shutil.copytree(FIXTURES / folder, root)
    return root


def test_a_repeated_level_gets_a_numbered_instance_id(tmp_path):
    root = _copy(tmp_path)
    path = root / "fire" / "test_data.json"
    data = json.loads(path.read_text())
    data[1]["instructions"].append({"level": 0, "instruction": "Focus on residential leases.", "rel": [1]})
    path.write_text(json.dumps(data))
    bench = load_ifir(root, "fire")
    assert list(bench.queries) == ["F12_0", "F40_0", "F40_0.2"]
    assert bench.queries["F40_0.2"].group == "F40" and bench.qrels["F40_0.2"] == {"C102": 1}


def test_a_relevant_document_with_empty_text_stays_in_the_qrels(tmp_path):
    root = _copy(tmp_path)
    path = root / "fiqa" / "test_data.json"
    data = json.loads(path.read_text())
    data[1]["corpus"].append({"_id": "99001"})
    data[1]["instructions"][0]["rel"].append(2)
    path.write_text(json.dumps(data))
    bench = load_ifir(root, "fiqa")
    assert bench.qrels["877_1"] == {"2090": 1, "311": 1, "99001": 1}
    assert "99001" not in bench.corpus and bench.meta["relevant_docs_without_text"] == 1


def test_an_instance_without_relevant_documents_is_kept_with_a_warning(tmp_path):
    root = _copy(tmp_path)
    path = root / "fiqa" / "test_data.json"
    data = json.loads(path.read_text())
    data[0]["instructions"][2]["rel"] = []
    path.write_text(json.dumps(data))
    with warns_saying(UserWarning, "1 IFIR instances", "no relevant document"):
        bench = load_ifir(root, "fiqa")
    assert "4102_3" in bench.queries and "4102_3" not in bench.qrels
    assert bench.meta["instances_without_relevant"] == 1


def test_beir_instance_text_without_the_bare_query_is_taken_as_the_instruction(tmp_path):
    root = _copy(tmp_path, "ifir-beir")
    path = root / "fire" / "fire-query.jsonl"
    lines = path.read_text().splitlines()
    lines[1] = json.dumps({"_id": "F12_1", "text": "Only judgments where the confession was made to a police officer."})
    path.write_text("\n".join(lines) + "\n")
    assert load_ifir(root, "fire").queries["F12_0"] == FIRE_FIRST


@pytest.mark.parametrize("qid,group,level", [("q7_v2", "q7", 2), ("7v3", "7", 3), ("v1-q7", "q7", 1),
                                             ("dev1_v2", "dev1", 2), ("q-v1_v2", "q-v1", 2)])
def test_mteb_level_token_is_found_anywhere_in_the_query_id(tmp_path, qid, group, level):
    root = _copy(tmp_path, "ifir-mteb")
    folder = root / "fiqa"
    (folder / "queries.jsonl").write_text(json.dumps({"_id": qid, "text": "Any query?"}) + "\n")
    (folder / "instructions.jsonl").write_text(json.dumps({"query-id": qid, "instruction": "Any."}) + "\n")
    (folder / "qrels" / "test.jsonl").write_text(json.dumps({"query-id": qid, "corpus-id": "311", "score": 1}) + "\n")
    (query,) = load_ifir(root, "fiqa").queries.values()
    assert (query.id, query.group, query.level) == (f"{group}_{level}", group, level)


def test_readme_query_json_written_as_json_lines_also_loads(tmp_path):
    root = _copy(tmp_path, "ifir-readme")
    path = root / "fiqa" / "fiqa-query.json"
    path.write_text("".join(json.dumps(rec) + "\n" for rec in json.loads(path.read_text())))
    bench = load_ifir(root, "fiqa")
    assert bench.layout == "songtingyu-beir" and bench.qrels == FIQA_QRELS


def test_a_document_repeated_in_rel_or_corpus_is_one_judgment(tmp_path):
    root = _copy(tmp_path)
    path = root / "fire" / "test_data.json"
    data = json.loads(path.read_text())
    data[0]["corpus"].append({"_id": "C101"})
    data[0]["instructions"][0]["rel"] = [0, 2, 2, 3]
    path.write_text(json.dumps(data))
    assert load_ifir(root, "fire").qrels == FIRE_QRELS


def test_a_beir_query_id_holding_an_underscore_keeps_it_in_the_group(tmp_path):
    # the level is what follows the last "_" of "<query id>_<level>" (the authors' BEIR files append it)
    root = _copy(tmp_path, "ifir-beir")
    for name in ("fiqa-query.jsonl", "fiqa-qrel.tsv"):
        path = root / "fiqa" / name
        path.write_text(path.read_text().replace("4102_", "dev_4102_"))
    bench = load_ifir(root, "fiqa")
    assert list(bench.queries) == ["dev_4102_1", "dev_4102_2", "dev_4102_3", "877_1", "877_2", "877_3"]
    assert (bench.queries["dev_4102_2"].group, bench.queries["dev_4102_2"].level) == ("dev_4102", 2)
    assert bench.qrels["dev_4102_2"] == {"7420": 1, "15031": 1}


def test_beir_qrels_grades_are_kept_as_written_a_zero_among_them(tmp_path):
    # each judgment keeps the grade its file gives: a 2 stays 2, a judged 0 stays a judged non-relevant document
    # (neither promoted to relevant nor dropped), as in every other reader of the kit (readers.read_qrels)
    root = _copy(tmp_path, "ifir-beir")
    path = root / "fiqa" / "fiqa-qrel.tsv"
    text = path.read_text().replace("4102_1\t7420\t1", "4102_1\t7420\t2")
    path.write_text(text.replace("877_1\t311\t1", "877_1\t311\t0"))
    bench = load_ifir(root, "fiqa")
    assert bench.qrels["4102_1"] == {"311": 1, "7420": 2, "15031": 1}
    assert bench.qrels["877_1"] == {"2090": 1, "311": 0}
