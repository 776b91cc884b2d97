"""The bundled InstructIR SAMPLE (instir/benchmarks/sample/instructir-sample): exact counts and
records of every file, consistent ids across files, and a BM25 quality gate showing that its
passages need the instruction (the point of the sample) while the bare query finds them all."""

from pathlib import Path
from statistics import mean

import bm25s
import ir_measures
import pytest
import Stemmer
from ir_measures import R, nDCG

import instir.benchmarks.instructir as instructir_module
from instir.benchmarks.instructir import INSTRUCTIR_SETTINGS, load_instructir
from instir.benchmarks.readers import read_qrels, read_records

SAMPLE = Path(instructir_module.__file__).parent / "sample" / "instructir-sample"

GROUP_SIZES = {"1078446": 6, "792847": 6, "798883": 8, "177238": 7, "874299": 7, "922024": 10,
               "115833": 6, "245416": 6, "844658": 7, "954711": 6, "952520": 9, "375891": 8}
N_TARGETS, N_ON_TOPIC, N_UNRELATED, N_NEAR_MISS = 86, 27, 15, 24
#: near-miss passage -> the instance whose instruction's words it uses while violating it
NEAR_MISSES = {
    "9000043": "1078446_2", "9000044": "1078446_4", "9000045": "792847_5", "9000046": "792847_4",
    "9000047": "798883_3", "9000048": "798883_1", "9000049": "177238_5", "9000050": "177238_2",
    "9000051": "874299_2", "9000052": "874299_1", "9000053": "922024_7", "9000054": "922024_5",
    "9000055": "115833_5", "9000056": "115833_1", "9000057": "245416_4", "9000058": "245416_3",
    "9000059": "844658_5", "9000060": "844658_4", "9000061": "954711_5", "9000062": "954711_4",
    "9000063": "952520_6", "9000064": "952520_3", "9000065": "375891_3", "9000066": "375891_6",
}

INSTR_FIRST = (
    "I am an interior designer focused on high-end kitchen remodels, and my current project includes a "
    "request for a custom wine storage solution. I need to search for the definition of \"wine cabinets\" "
    "to ensure that my understanding aligns with industry standards and that the furniture I suggest will "
    "meet my client's expectations in terms of form, function, and climate control features.")
INSTR_LAST = (
    "As the founder of a cat shelter, I need to ensure our guests can visit without any severe allergic "
    "reactions. I want to look up the best ways to minimize cat allergens in a large multi-animal "
    "environment to promote a safe and welcoming space for potential adopters.")
WINE, CATS = "wine cabinets definition", "how to remove cat allergens from house"

# file -> (number of records, first record, last record); TSV records are the raw lines.
RECORDS = {
    "corpus.jsonl": (N_TARGETS + N_ON_TOPIC + N_UNRELATED + N_NEAR_MISS, {
        "_id": "7865137_1", "title": "",
        "text": "In kitchen design, a wine cabinet is defined as a built-in or freestanding cabinet engineered "
                "to store wine bottles under controlled conditions. For high-end remodels, designers specify "
                "custom wine cabinets with dual-zone climate control, UV-filtering glass doors and panels that "
                "match the surrounding millwork, so the unit satisfies the client on both form and function. "
                "Industry standards call for zones between 45 and 65°F, vibration dampening and front venting "
                "for integrated installation under counters or as full-height columns.",
        "metadata": {"origin_target": {
            "_id": "7865137", "title": "",
            "text": "A wine cabinet is a cabinet or piece of furniture designed to store bottles of wine, "
                    "usually with racks and often with temperature control."}}}, {
        "_id": "9000066", "title": "",
        "text": "Removing cat allergens from your house the traditional way, without gadgets: no air filters, "
                "no smart home devices and no new technology, just regular vacuuming, washing bedding and "
                "keeping the cat out of the bedroom."}),
    "queries.jsonl": (86,
        {"_id": "1078446_1", "text": f"{INSTR_FIRST} [SEP] {WINE}", "metadata": {"origin_query": WINE}},
        {"_id": "375891_8", "text": f"{INSTR_LAST} [SEP] {CATS}", "metadata": {"origin_query": CATS}}),
    "only_queries.jsonl": (12,
        {"_id": "1078446", "text": WINE, "metadata": {}},
        {"_id": "375891", "text": CATS, "metadata": {}}),
    "only_instruction_queries.jsonl": (86,
        {"_id": "1078446_1", "text": INSTR_FIRST, "metadata": {"origin_query": WINE}},
        {"_id": "375891_8", "text": INSTR_LAST, "metadata": {"origin_query": CATS}}),
    "analysis_order_sensitivity/new_queries.jsonl": (86,
        {"_id": "1078446_1", "text": f"] {WINE} [SEP] {INSTR_FIRST} ["},
        {"_id": "375891_8", "text": f"] {CATS} [SEP] {INSTR_LAST} ["}),
    "analysis_prompt_sensitivity/og_queries.jsonl": (12, {
        "_id": "1078446_6",
        "text": "I'm an amateur winemaker and want to store my creations correctly. I am looking for a "
                "definition of \"wine cabinets\" that includes information on bottle capacity, humidity "
                "control, and the range of temperatures that can be maintained to ensure that my wine ages "
                f"properly in the limited space of my city apartment. [SEP] {WINE}"}, {
        "_id": "375891_1",
        "text": "I am an asthmatic person living with a cat, and I'm aware that my symptoms are getting worse "
                "due to cat allergens in the home. For my health, I need to find ways to minimize these "
                "allergens without harming my pet. I'll look for search results that provide practical, safe "
                "methods for people with respiratory conditions to effectively remove cat allergens from "
                f"living spaces. [SEP] {CATS}"}),
    "analysis_prompt_sensitivity/5new_queries.jsonl": (60, {
        "_id": "1078446_6.1",
        "text": "seeking proper storage solutions for my homemade wine, i need to understand what \"wine "
                "cabinets\" are, specifically their bottle capacity, humidity regulation, and the span of "
                "temperatures they sustain to guarantee optimal aging of my wine within my compact urban "
                f"dwelling. [SEP] {WINE}"}, {
        "_id": "375891_1.5",
        "text": "as an individual with asthma residing with a cat, i have noticed a deterioration in my "
                "symptoms due to allergens from the pet. it's essential for my well-being to pinpoint "
                "strategies to diminish these allergens that won't harm my cat. i am dedicated to finding "
                "search results on how to safely and efficiently rid living areas of cat allergens for people "
                f"who suffer from respiratory ailments. [SEP] {CATS}"}),
    "qrels/test.tsv": (86, "1078446_1\t7865137_1\t1", "375891_8\t7983927_8\t1"),
    "qrels/for_only_query_test.tsv": (86, "1078446\t7865137_1\t1", "375891\t7983927_8\t1"),
    "analysis_prompt_sensitivity/qrels/test.tsv": (12, "1078446_6\t7865137_6\t1", "375891_1\t7983927_1\t1"),
    "analysis_prompt_sensitivity/qrels/5_test.tsv": (60, "1078446_6.1\t7865137_6\t1", "375891_1.5\t7983927_1\t1"),
}

# setting -> (instances, query file, qrels file)
SETTINGS = {
    "instructed": (86, "only_instruction_queries.jsonl", "qrels/test.tsv"),
    "query-only": (12, "only_queries.jsonl", "qrels/for_only_query_test.tsv"),
    "order-sensitivity": (86, "analysis_order_sensitivity/new_queries.jsonl", "qrels/test.tsv"),
    "prompt-sensitivity": (12, "analysis_prompt_sensitivity/og_queries.jsonl",
                           "analysis_prompt_sensitivity/qrels/test.tsv"),
    "prompt-paraphrases": (60, "analysis_prompt_sensitivity/5new_queries.jsonl",
                           "analysis_prompt_sensitivity/qrels/5_test.tsv"),
}


@pytest.fixture(scope="module")
def sample_from_loader():
    return load_instructir(SAMPLE, name="instructir-sample", is_sample=True)


@pytest.fixture(scope="module")
def corpus_records():
    return [rec for _, rec in read_records(SAMPLE / "corpus.jsonl")]


@pytest.fixture(scope="module")
def bm25(sample_from_loader):
    """bm25s over the sample corpus (English stopwords, Snowball stemmer) and a search function
    that returns a run ``{qid: {docid: score}}`` over the whole corpus."""
    docs = list(sample_from_loader.corpus)
    stemmer = Stemmer.Stemmer("english")
    index = bm25s.BM25()
    index.index(bm25s.tokenize([d.indexed_text for d in docs], stopwords="en", stemmer=stemmer,
                               show_progress=False), show_progress=False)

    def search(texts: dict[str, str]) -> dict[str, dict[str, float]]:
        qids = list(texts)
        tokens = bm25s.tokenize([texts[q] for q in qids], stopwords="en", stemmer=stemmer, show_progress=False)
        hits, scores = index.retrieve(tokens, k=len(docs), show_progress=False)
        return {q: {docs[j].id: float(s) for j, s in zip(hits[i], scores[i])} for i, q in enumerate(qids)}

    return search


def test_sample_has_12_groups_86_instances_and_128_documents(sample_from_loader):
    assert sample_from_loader.is_sample and "SAMPLE" in sample_from_loader.label
    assert {g: len(ids) for g, ids in sample_from_loader.groups().items()} == GROUP_SIZES
    assert len(sample_from_loader.queries) == sum(GROUP_SIZES.values()) == N_TARGETS
    assert len(sample_from_loader.corpus) == N_TARGETS + N_ON_TOPIC + N_UNRELATED + N_NEAR_MISS == 152


@pytest.mark.parametrize("setting", INSTRUCTIR_SETTINGS)
def test_every_setting_loads_with_exact_instance_count(setting):
    bench = load_instructir(SAMPLE, setting, name="instructir-sample", is_sample=True)
    assert len(bench.queries) == SETTINGS[setting][0]
    assert set(bench.groups()) == set(GROUP_SIZES)


@pytest.mark.parametrize("relpath", RECORDS)
def test_file_has_exact_count_and_first_and_last_record(relpath):
    count, first, last = RECORDS[relpath]
    if relpath.endswith(".tsv"):
        lines = (SAMPLE / relpath).read_text(encoding="utf-8").splitlines()
        assert lines[0] == "qid\tpid\tscore"
        records = lines[1:]
    else:
        records = [rec for _, rec in read_records(SAMPLE / relpath)]
    assert (len(records), records[0], records[-1]) == (count, first, last)


@pytest.mark.parametrize("setting", SETTINGS)
def test_every_query_is_judged_and_every_judged_doc_is_in_the_corpus(setting, corpus_records):
    _, query_file, qrels_file = SETTINGS[setting]
    query_ids = {rec["_id"] for _, rec in read_records(SAMPLE / query_file)}
    qrels, _ = read_qrels(SAMPLE / qrels_file)
    assert set(qrels) == query_ids
    judged = {did for rel in qrels.values() for did in rel}
    assert judged <= {rec["_id"] for rec in corpus_records}


def test_instance_k_has_its_own_target_k_with_origin_target_and_40_to_110_words(sample_from_loader, corpus_records):
    by_id = {rec["_id"]: rec for rec in corpus_records}
    for qid, rel in sample_from_loader.qrels.items():
        [(did, grade)] = rel.items()
        pid, _, k = did.rpartition("_")
        assert (k, grade) == (qid.rpartition("_")[2], 1)
        target = by_id[did]
        assert target["title"] == "" and target["metadata"]["origin_target"]["_id"] == pid
        assert 40 <= len(target["text"].split()) <= 110, did
    origins = {by_id[next(iter(rel))]["metadata"]["origin_target"]["text"] for rel in sample_from_loader.qrels.values()}
    assert len(origins) == len(GROUP_SIZES)


def test_distractors_have_plain_unused_numeric_ids_and_no_metadata(sample_from_loader, corpus_records):
    targets = {did for rel in sample_from_loader.qrels.values() for did in rel}
    distractors = [rec for rec in corpus_records if rec["_id"] not in targets]
    assert [rec["_id"] for rec in distractors] == [str(9000001 + i)
                                                     for i in range(N_ON_TOPIC + N_UNRELATED + N_NEAR_MISS)]
    assert all(set(rec) == {"_id", "title", "text"} and rec["title"] == "" for rec in distractors)


def test_bm25_with_instruction_beats_bare_query_by_at_least_0_15_ndcg10(sample_from_loader, bm25):
    qrels = sample_from_loader.qrels
    instructed = bm25({q.id: f"{q.instruction} [SEP] {q.query}" for q in sample_from_loader.queries.values()})
    bare = bm25({q.id: q.query for q in sample_from_loader.queries.values()})
    with_instruction = mean(m.value for m in ir_measures.iter_calc([nDCG @ 10], qrels, instructed))
    without = mean(m.value for m in ir_measures.iter_calc([nDCG @ 10], qrels, bare))
    assert with_instruction - without >= 0.15, (with_instruction, without)


def test_near_misses_beat_some_targets_so_instructed_bm25_is_good_but_not_perfect(sample_from_loader, bm25):
    """Each near-miss uses the words of one instance's instruction while violating it: BM25, which
    matches words and not conditions, ranks every near-miss in its instance's top 2 and above the
    target for some instances, so instructed BM25 scores below 1 and Robustness lower still."""
    instructed = bm25({q.id: f"{q.instruction} [SEP] {q.query}" for q in sample_from_loader.queries.values()})
    ranks = {qid: sorted(docs, key=docs.get, reverse=True) for qid, docs in instructed.items()}
    assert all(ranks[qid].index(doc) < 2 for doc, qid in NEAR_MISSES.items())
    above_target = [qid for doc, qid in NEAR_MISSES.items() if ranks[qid][0] == doc]
    assert len(above_target) >= 8, above_target
    per_query = {m.query_id: m.value for m in ir_measures.iter_calc([nDCG @ 10], sample_from_loader.qrels, instructed)}
    assert 0.8 < mean(per_query.values()) < 0.98
    assert min(per_query[qid] for qid in above_target) < 1.0


def test_bare_query_finds_all_targets_of_its_group_without_favouring_one(bm25):
    """The no-instruction setting: each bare query retrieves every target of its group in the
    top 15, and the group's weakest target scores at least a third of its strongest, so the bare
    query cannot tell which instance a target was written for."""
    only = {rec["_id"]: rec["text"] for _, rec in read_records(SAMPLE / "only_queries.jsonl")}
    qrels, _ = read_qrels(SAMPLE / "qrels/for_only_query_test.tsv")
    run = bm25(only)
    recall = {m.query_id: m.value for m in ir_measures.iter_calc([R @ 15], qrels, run)}
    assert recall == {qid: 1.0 for qid in only}
    for qid, rel in qrels.items():
        scores = [run[qid][did] for did in rel]
        assert min(scores) >= max(scores) / 3, (qid, scores)
