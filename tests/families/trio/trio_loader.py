"""The Trio test family's loader: ``corpus.jsonl``, ``queries.jsonl`` (``_id`` = ``<topic>-<form>``, ``text``,
``instruction``) and ``qrels.tsv``, read with the kit's readers (every bad record names file, line and field)."""

from pathlib import Path

from instir.benchmarks import catalog
from instir.benchmarks.docstore import IndexedCorpus
from instir.benchmarks.readers import check_qrels, check_unique, field_str, read_qrels, read_records
from instir.benchmarks.types import Benchmark, FormatError, Query


def load(root, *, subset, setting, name, revision, is_sample):
    folder = Path(root)
    family = catalog.family_of(name)  # "trio" (a copy renamed in its spec needs no edit here)
    forms = catalog.family(family).forms
    corpus = IndexedCorpus([folder / "corpus.jsonl"])
    queries, seen = {}, {}
    path = folder / "queries.jsonl"
    for n, rec in read_records(path):
        qid = field_str(rec, "_id", path, n)
        check_unique(seen, qid, path, n, "_id")
        try:
            topic, _ = forms.split(qid)
        except ValueError as err:
            raise FormatError(path, n, "_id", str(err)) from None
        queries[qid] = Query(qid, field_str(rec, "text", path, n), field_str(rec, "instruction", path, n), group=topic)
    qrels, lines = read_qrels(folder / "qrels.tsv")
    check_qrels(qrels, lines, folder / "qrels.tsv", frozenset(queries), corpus.id_set())
    return Benchmark(name=name, layout=family, revision=revision, setting=setting, corpus=corpus, queries=queries,
                     qrels=qrels, source=str(folder), is_sample=is_sample)
