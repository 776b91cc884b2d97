"""The authors' real query and qrels files (data/instructir-github) through the loader, with a
generated one-line-per-document corpus holding the judged ids (the real corpus is only on
Hugging Face)."""

import json
from collections import Counter
from pathlib import Path

import pytest

from instir.benchmarks.instructir import load_instructir

REAL = Path(__file__).resolve().parents[2] / "data" / "instructir-github"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """The real files linked into a temp folder beside a generated corpus.jsonl."""
    root = tmp_path_factory.mktemp("instructir-real")
    for entry in REAL.iterdir():
        (root / entry.name).symlink_to(entry)
    doc_ids = [line.split("\t")[1] for line in (REAL / "qrels" / "test.tsv").read_text().splitlines()[1:]]
    with (root / "corpus.jsonl").open("w") as fh:
        for did in doc_ids:
            fh.write(json.dumps({"_id": did, "title": "", "text": f"passage {did}"}) + "\n")
    return root


@pytest.fixture(scope="module")
def instructed(root):
    return load_instructir(root)


def test_real_instructed_has_9906_instances_in_1267_groups_of_6_to_10(instructed):
    assert len(instructed.queries) == 9906
    sizes = Counter(len(ids) for ids in instructed.groups().values())
    assert sizes == {6: 239, 7: 309, 8: 302, 9: 277, 10: 140}
    assert sum(sizes.values()) == 1267


def test_real_instructed_first_and_last_instances(instructed):
    qs = list(instructed.queries.values())
    assert (qs[0].id, qs[0].group, qs[0].query) == ("1078446_1", "1078446", "wine cabinets definition")
    assert qs[0].instruction.startswith("I am an interior designer focused on high-end kitchen remodels")
    assert (qs[-1].id, qs[-1].group, qs[-1].query) == ("544277_10", "544277", "weather in france in july")
    assert qs[-1].instruction.endswith("so I can set the dates and inform my guests with confidence.")


def test_real_instance_k_has_one_relevant_target_k(instructed):
    for qid, rel in instructed.qrels.items():
        [(did, grade)] = rel.items()
        assert (did.rpartition("_")[2], grade) == (qid.rpartition("_")[2], 1)


def test_real_query_only_has_1267_queries_judged_against_their_group_targets(root, instructed):
    bench = load_instructir(root, "query-only")
    assert len(bench.queries) == 1267
    assert all(q.instruction == "" for q in bench.queries.values())
    targets: dict[str, set[str]] = {}
    for qid, rel in instructed.qrels.items():
        targets.setdefault(instructed.queries[qid].group, set()).update(rel)
    assert {qid: set(rel) for qid, rel in bench.qrels.items()} == targets


def test_real_order_sensitivity_has_the_same_9906_instances(root, instructed):
    bench = load_instructir(root, "order-sensitivity")
    assert bench.queries == instructed.queries
    assert bench.qrels == instructed.qrels


def test_real_prompt_sensitivity_picks_1267_instances_one_per_group(root, instructed):
    bench = load_instructir(root, "prompt-sensitivity")
    assert len(bench.queries) == 1267
    assert len(bench.groups()) == 1267
    assert all(instructed.queries[qid] == q for qid, q in bench.queries.items())
    assert all(instructed.qrels[qid] == rel for qid, rel in bench.qrels.items())


def test_real_paraphrases_are_6335_five_per_chosen_instance(root):
    og = load_instructir(root, "prompt-sensitivity")
    bench = load_instructir(root, "prompt-paraphrases")
    assert len(bench.queries) == 6335
    per_instance = Counter(qid.rpartition(".")[0] for qid in bench.queries)
    assert set(per_instance) == set(og.queries) and set(per_instance.values()) == {5}
    for qid, q in bench.queries.items():
        base = qid.rpartition(".")[0]
        assert (q.query, q.group) == (og.queries[base].query, og.queries[base].group)
        assert q.instruction != og.queries[base].instruction
        assert bench.qrels[qid] == og.qrels[base]
