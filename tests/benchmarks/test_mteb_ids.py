"""MTEB's task facts and query ids for the kit's benchmarks (MTEB 2.26,
``mteb/tasks/instruction_retrieval/eng/``: ``instruct_ir.py``, ``ifir_*.py``)."""

from pathlib import Path

from says import raises_saying

from instir.benchmarks import catalog, load_benchmark
from instir.benchmarks.ifir import load_ifir
from instir.benchmarks.mteb import mteb_ids, mteb_task
from instir.errors import UsageError

FIXTURES = Path(__file__).parent / "fixtures"


def test_mteb_tasks_carry_main_score_self_hit_rule_and_task_specific_scores():
    tasks = catalog.mteb_tasks()
    assert list(tasks) == ["InstructIR", "IFIRFiQA", "IFIRScifact", "IFIRNFCorpus", "IFIRAila", "IFIRFire",
                           "IFIRPm", "IFIRCds", "Robust04InstructionRetrieval", "News21InstructionRetrieval",
                           "Core17InstructionRetrieval"]
    assert tasks["InstructIR"].main_score == "robustness_at_10" and tasks["InstructIR"].robustness
    assert {t.main_score for name, t in tasks.items() if name.startswith("IFIR")} == {"ndcg_at_20"}
    assert {t.main_score for name, t in tasks.items() if name.endswith("InstructionRetrieval")} == {"p-MRR"}
    # only IFIRFiQA sets ignore_identical_ids = True; InstructIR keeps the self-hits the authors drop
    assert [name for name, t in tasks.items() if t.ignore_identical_ids] == ["IFIRFiQA"]
    # task_specific_scores with v1/v2/v3 levels: the four multi-level subsets' classes only
    assert [t.subset for t in tasks.values() if t.level_scores] == [
        s.id for s in catalog.family("ifir").subsets.values() if s.multi_level]
    assert mteb_task("ifir-sample/fiqa").name == "IFIRFiQA" and mteb_task("ifir/pm").name == "IFIRPm"


def test_instructir_ids_are_the_same_in_mteb():
    sample = load_benchmark("instructir-sample")
    ids = mteb_ids(sample)
    assert dict(ids.to_mteb) == {q: q for q in sample.queries}
    # MTEB's robustness_at_10 groups by id.split("_")[0], the kit by the part before the last "_"
    assert all(q.split("_")[0] == query.group for q, query in sample.queries.items())


def test_ifir_ids_carry_v_level_in_multi_level_subsets_and_drop_level_zero_elsewhere():
    fiqa = mteb_ids(load_benchmark("ifir-sample/fiqa"))
    assert fiqa.mteb_id("sample-fiqa-q1_1") == "sample-fiqa-q1_v1"
    assert fiqa.mteb_id("sample-fiqa-q1_3") == "sample-fiqa-q1_v3"
    nf = mteb_ids(load_benchmark("ifir-sample/nfcorpus"))
    assert nf.mteb_id("sample-nf-q1_0") == "sample-nf-q1" and nf.kit_id("sample-nf-q1") == "sample-nf-q1_0"


def test_the_songtingyu_files_and_mtebs_own_files_give_the_same_mteb_ids():
    songtingyu = mteb_ids(load_ifir(FIXTURES / "ifir-songtingyu", "fiqa"))
    own = mteb_ids(load_ifir(FIXTURES / "ifir-mteb", "fiqa"))
    assert dict(songtingyu.to_mteb) == dict(own.to_mteb)
    assert dict(mteb_ids(load_ifir(FIXTURES / "ifir-mteb", "fire")).to_mteb) == {"F12_0": "F12", "F40_0": "F40"}


def test_other_spellings_of_the_level_token_read_back_and_strangers_do_not():
    ids = mteb_ids(load_benchmark("ifir-sample/fiqa"))
    assert [ids.kit_id(m) for m in ("sample-fiqa-q2_v2", "sample-fiqa-q2-v2", "v2_sample-fiqa-q2")] == [
        "sample-fiqa-q2_2"] * 3
    assert ids.kit_id("sample-fiqa-q2_2") is None  # the kit's own spelling is not MTEB's
    assert ids.kit_id("sample-fiqa-q99_v1") is None and ids.kit_id("sample-fiqa-q2_v7") is None


def test_only_the_instructed_setting_is_an_mteb_task():
    with raises_saying(UsageError, "InstructIR", "instructed"):
        mteb_ids(load_benchmark("instructir-sample", "query-only"))


def test_two_queries_given_one_mteb_id_are_refused_naming_it():
    # single-level ids are the bare query id, ".<n>" for a repeated level: F12's second instance and the query
    # F12.2 would both be "F12.2" in MTEB
    from instir.benchmarks.types import Benchmark, Corpus, Doc, Query

    queries = {qid: Query(qid, "q", "i", group=group, level=0, subset="fire")
               for qid, group in (("F12_0", "F12"), ("F12_0.2", "F12"), ("F12.2_0", "F12.2"))}
    bench = Benchmark(name="ifir/fire", layout="songtingyu", revision="local", setting="instructed",
                      corpus=Corpus.from_docs([Doc("d", "t")]), queries=queries, qrels={})
    with raises_saying(UsageError, "two queries would have the MTEB id 'F12.2'"):
        mteb_ids(bench)


def test_a_benchmark_read_from_mtebs_files_keeps_their_own_spelling_of_each_id(tmp_path):
    import shutil

    root = tmp_path / "ifir-mteb"
    shutil.copytree(FIXTURES / "ifir-mteb", root)
    for name in ("queries.jsonl", "instructions.jsonl", "qrels/test.jsonl"):
        path = root / "fiqa" / name
        path.write_text(path.read_text().replace('"4102_v1"', '"v1-4102"'))
    ids = mteb_ids(load_ifir(root, "fiqa"))
    assert ids.mteb_id("4102_1") == "v1-4102" and ids.mteb_id("4102_2") == "4102_v2"
    assert ids.kit_id("v1-4102") == "4102_1"


def test_a_level_token_is_v_and_one_digit_not_after_a_letter_and_the_last_one_wins():
    from instir.benchmarks.mteb import level_from_mteb_id

    assert level_from_mteb_id("v2-rev1") == ("rev1", 2)  # "v1" after a letter is part of the query id
    assert level_from_mteb_id("q7_v12") == ("q7_v12", None)  # v12 is no level
    assert level_from_mteb_id("v1_q7_v3") == ("v1_q7", 3)
    assert level_from_mteb_id("q7.v2") == ("q7", 2)
