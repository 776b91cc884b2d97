"""InstructIR loader on tiny fixtures in the three upstream layouts (three real query groups
of data/instructir-github, corpus written for the tests; see fixtures/instructir-github/README.md)."""

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from instir.benchmarks.instructir import INSTRUCTIR_SETTINGS, group_of, load_instructir
from instir.benchmarks.types import Doc, FormatError, Query

FIXTURES = Path(__file__).parent / "fixtures"
GITHUB = FIXTURES / "instructir-github"
HF = FIXTURES / "instructir-hf"
MTEB = FIXTURES / "instructir-mteb"

PORT = "which side is port side?"
PEPPER = "cherry dr pepper calories"
PORT_1 = ("I am a maritime history teacher preparing for my next lesson on ship orientation and I need to "
          "search for materials that explain 'which side is port side' using simple, educational visuals "
          "that I can directly incorporate into my presentation.")
PORT_2 = ("I am a first-time novelist writing a historical fiction set on a 17th-century pirate ship, and I "
          "need to search detailed nautical schematics that show 'which side is port side' to accurately "
          "describe the ship's layout in my book.")
PEPPER_6 = ("As a marketing manager for a grocery chain, I'm preparing a promotion for low-calorie drinks. I "
            "need to verify if Cherry Dr Pepper fits this category by finding out its calorie count.")
PEPPER_7 = ("I am a college student studying nutrition science, currently working on a research paper about "
            "the caloric differences between various soft drinks. I need the accurate calorie count of Cherry "
            "Dr Pepper for my analysis.")
FIRST_DOC = Doc("7749348_1", "Classroom handout: a simple labelled diagram of a ship shows port on the left when "
                             "you face the bow, with red port lights for students to remember.")
LAST_DOC = Doc("7564350", "Dr Pepper was first served in Waco, Texas in 1885.")


def judgments(bench):
    """Qrels as (qid, docid, grade) triples in file order."""
    return [(q, d, g) for q, rel in bench.qrels.items() for d, g in rel.items()]


def same_content(a, b):
    return a.queries == b.queries and a.qrels == b.qrels and list(a.corpus) == list(b.corpus)


# Per setting of the GitHub fixture: instances, groups, judgments, first and last instance,
# first and last judgment — the exact content of each query and qrels file.
SETTINGS = {
    "instructed": (19, 3, 19,
                   Query("1019179_1", PORT, PORT_1, "1019179"), Query("91422_7", PEPPER, PEPPER_7, "91422"),
                   ("1019179_1", "7749348_1", 1), ("91422_7", "7564348_7", 1)),
    "query-only": (3, 3, 19,
                   Query("1019179", PORT, "", "1019179"), Query("91422", PEPPER, "", "91422"),
                   ("1019179", "7749348_1", 1), ("91422", "7564348_7", 1)),
    "order-sensitivity": (19, 3, 19,
                          Query("1019179_1", PORT, PORT_1, "1019179"), Query("91422_7", PEPPER, PEPPER_7, "91422"),
                          ("1019179_1", "7749348_1", 1), ("91422_7", "7564348_7", 1)),
    "prompt-sensitivity": (3, 3, 3,
                           Query("1019179_2", PORT, PORT_2, "1019179"), Query("91422_6", PEPPER, PEPPER_6, "91422"),
                           ("1019179_2", "7749348_2", 1), ("91422_6", "7564348_6", 1)),
    "prompt-paraphrases": (15, 3, 15,
                           Query("1019179_2.1", PORT,
                                 "i'm penning my debut historical novel situated on a pirate vessel from the 17th "
                                 "century, and for precise depictions of the ship's design, i must locate detailed "
                                 "maritime blueprints that illustrate 'which side is the port side'.", "1019179"),
                           Query("91422_6.5", PEPPER,
                                 "while coordinating a marketing strategy for diet-friendly beverages at our grocery "
                                 "network, it's imperative that i determine whether cherry dr pepper has a calorie "
                                 "count appropriate for this category.", "91422"),
                           ("1019179_2.1", "7749348_2", 1), ("91422_6.5", "7564348_6", 1)),
}


def test_settings_cover_every_setting_name():
    assert tuple(SETTINGS) == INSTRUCTIR_SETTINGS


@pytest.mark.parametrize("setting", INSTRUCTIR_SETTINGS)
def test_github_fixture_loads_every_setting_with_exact_records(setting):
    n_queries, n_groups, n_judged, first, last, first_j, last_j = SETTINGS[setting]
    bench = load_instructir(GITHUB, setting)
    assert (bench.layout, bench.setting, bench.name, bench.revision) == ("github", setting, "instructir", "local")
    assert len(bench.queries) == n_queries
    assert len(bench.groups()) == n_groups
    qs = list(bench.queries.values())
    assert (qs[0], qs[-1]) == (first, last)
    triples = judgments(bench)
    assert len(triples) == n_judged
    assert (triples[0], triples[-1]) == (first_j, last_j)
    assert all(q.level is None and q.subset == "" for q in qs)


def test_corpus_fixture_has_exact_documents():
    docs = list(load_instructir(GITHUB).corpus)
    assert len(docs) == 22
    assert (docs[0], docs[-1]) == (FIRST_DOC, LAST_DOC)


def test_instructed_groups_hold_all_instances_of_an_original_query():
    groups = load_instructir(GITHUB).groups()
    assert {g: len(ids) for g, ids in groups.items()} == {"1019179": 6, "1088800": 6, "91422": 7}


def test_query_only_judges_every_rewritten_target_of_the_group():
    bench = load_instructir(GITHUB, "query-only")
    assert sorted(bench.qrels["1088800"]) == [f"7091089_{k}" for k in range(1, 7)]


def test_order_sensitivity_keeps_parts_and_marks_query_first():
    order = load_instructir(GITHUB, "order-sensitivity")
    instructed = load_instructir(GITHUB)
    assert order.queries == instructed.queries
    assert order.meta["query_order"] == "query-first"
    assert instructed.meta["query_order"] == "instruction-first"


def test_meta_names_the_files_read():
    bench = load_instructir(GITHUB, "prompt-paraphrases")
    assert bench.meta["files"] == {"queries": ["analysis_prompt_sensitivity/5new_queries.jsonl"],
                                   "qrels": ["analysis_prompt_sensitivity/qrels/5_test.tsv"],
                                   "corpus": ["corpus.jsonl"]}


def test_name_revision_and_sample_flag_pass_through():
    bench = load_instructir(HF, name="instructir-sample", revision="bundled-0.1.0", is_sample=True)
    assert (bench.name, bench.revision, bench.is_sample) == ("instructir-sample", "bundled-0.1.0", True)
    assert bench.source == str(HF)
    assert "SAMPLE" in bench.label


@pytest.mark.parametrize("root, layout", [(HF, "hf"), (MTEB, "mteb")])
def test_hf_and_mteb_fixtures_load_the_same_benchmark_as_github(root, layout):
    bench = load_instructir(root)
    assert bench.layout == layout
    assert same_content(bench, load_instructir(GITHUB))


def test_mteb_fixture_files_have_exact_counts_and_records():
    tables = {name: pq.read_table(next((MTEB / name).glob("*.parquet"))).to_pylist()
              for name in ("corpus", "queries", "instruction", "data")}
    counts = {name: len(rows) for name, rows in tables.items()}
    assert counts == {"corpus": 22, "queries": 19, "instruction": 19, "data": 19}
    assert tables["queries"][0] == {"_id": "1019179_1", "text": PORT}
    assert tables["instruction"][-1] == {"query-id": "91422_7", "instruction": PEPPER_7}
    assert tables["data"][-1] == {"query-id": "91422_7", "corpus-id": "7564348_7", "score": 1}


def test_hf_qrels_as_json_lines_load_the_same(tmp_path):
    root = tmp_path / "hf"
    shutil.copytree(HF, root)
    tsv = root / "qrels" / "test.tsv"
    rows = [line.split("\t") for line in tsv.read_text().splitlines()[1:]]
    (root / "qrels" / "test.jsonl").write_text(
        "".join(json.dumps({"query-id": q, "corpus-id": d, "score": float(s)}) + "\n" for q, d, s in rows))
    tsv.unlink()
    assert same_content(load_instructir(root), load_instructir(HF))


def test_hf_parquet_export_with_sharded_corpus_loads_the_same(tmp_path):
    """Parquet shards in per-config folders, metadata as a JSON string (as exports store it)."""
    root = tmp_path / "hf-parquet"
    shutil.copytree(HF / "qrels", root / "qrels")
    queries = [json.loads(line) for line in (HF / "queries.jsonl").read_text().splitlines()]
    (root / "queries").mkdir()
    pq.write_table(pa.Table.from_pylist([{**q, "metadata": json.dumps(q["metadata"])} for q in queries]),
                   root / "queries" / "queries-00000-of-00001.parquet")
    docs = [json.loads(line) for line in (HF / "corpus.jsonl").read_text().splitlines()]
    (root / "corpus").mkdir()
    for i, part in enumerate((docs[:10], docs[10:])):
        rows = [{"_id": d["_id"], "title": d["title"], "text": d["text"]} for d in part]
        pq.write_table(pa.Table.from_pylist(rows), root / "corpus" / f"corpus-0000{i}-of-00002.parquet")
    bench = load_instructir(root)
    assert bench.layout == "hf"
    assert len(bench.corpus.paths) == 2
    assert same_content(bench, load_instructir(HF))


def test_github_files_with_hf_queries_beside_load_the_same(tmp_path):
    root = tmp_path / "github"
    shutil.copytree(GITHUB, root)
    shutil.copy(HF / "queries.jsonl", root / "queries.jsonl")
    bench = load_instructir(root)
    assert bench.layout == "github"
    assert bench.meta["files"]["queries"] == ["only_instruction_queries.jsonl", "queries.jsonl"]
    assert same_content(bench, load_instructir(GITHUB))


@pytest.mark.parametrize("query_id, group", [
    ("1078446_6", "1078446"),
    ("1078446_6.1", "1078446"),
    ("1078446", "1078446"),
    ("5001_10", "5001"),
    ("dev_1078446_6.1", "dev_1078446"),  # the part before the last "_" (docs/formats.md)
])
def test_group_is_the_original_query_id(query_id, group):
    assert group_of(query_id) == group


def test_a_corpus_in_two_forms_is_refused_naming_both(tmp_path):
    # before, corpus.jsonl beside the corpus/ config was read and the config's shards were not, silently
    root = tmp_path / "mteb"
    shutil.copytree(MTEB, root)
    load_instructir(root)
    (root / "corpus.jsonl").write_text(json.dumps({"_id": "extra", "title": "", "text": "more"}) + "\n")
    with pytest.raises(FormatError) as info:
        load_instructir(root)
    assert info.value.path == str(next((root / "corpus").glob("*.parquet")))
    assert "corpus.jsonl and corpus/test-00000-of-00001.parquet are two forms of one file here" in str(info.value)


def test_the_text_is_split_on_its_first_sep(tmp_path):
    # docs/formats.md (InstructIR): "Split the text on the first [SEP] and strip both sides to get
    # (instruction, query)"; a second [SEP] stays in the query, which origin_query then confirms
    root = tmp_path / "hf"
    shutil.copytree(HF, root)
    path = root / "queries.jsonl"
    lines = path.read_text().splitlines()
    lines[7] = json.dumps({"_id": "1088800_2", "text": "An investor. [SEP] washington [SEP] county",
                           "metadata": {"origin_query": "washington [SEP] county"}})
    path.write_text("\n".join(lines) + "\n")
    query = load_instructir(root).queries["1088800_2"]
    assert (query.instruction, query.query) == ("An investor.", "washington [SEP] county")


def test_mteb_instructions_are_stripped_as_the_other_layouts_strip_theirs(tmp_path):
    root = tmp_path / "mteb"
    shutil.copytree(MTEB, root)
    path = next((root / "instruction").glob("*.parquet"))
    rows = pq.read_table(path).to_pylist()
    rows = [{**row, "instruction": f"  {row['instruction']}\n"} for row in rows]
    pq.write_table(pa.Table.from_pylist(rows), path)
    assert same_content(load_instructir(root), load_instructir(GITHUB))


def test_a_github_copy_holding_only_the_query_only_files_loads_that_setting(tmp_path):
    # only_queries.jsonl is a marker of the GitHub release as much as only_instruction_queries.jsonl is
    root = tmp_path / "github"
    shutil.copytree(GITHUB, root)
    (root / "only_instruction_queries.jsonl").unlink()
    bench = load_instructir(root, "query-only")
    assert bench.layout == "github" and len(bench.queries) == 3
