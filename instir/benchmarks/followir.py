"""FollowIR (arXiv:2403.15246): three TREC collections (Robust04, News21, Core17) whose topics
were re-annotated under an altered narrative. Every topic ``t`` becomes two instances,
``t-og`` (the original narrative as the instruction, its qrels) and ``t-changed`` (the altered
narrative, its qrels), grouped under ``t``; p-MRR compares how one run ranks the two.

Two layouts (docs/formats.md), detected per dataset folder and recorded in ``Benchmark.layout``:

- ``jhu-clsp``: the authors' release (``jhu-clsp/<dataset>-instructions``): ``corpus.jsonl``,
  ``queries.jsonl`` (one row per topic: ``_id``, ``text``, ``instruction_og``,
  ``instruction_changed``), ``top_ranked.jsonl`` (``qid``, ``pid``: one row per candidate, the
  same list for both instances), ``qrels_og/test.jsonl`` and ``qrels_changed/test.jsonl``.
  The changed documents are derived from the two qrels as mteb 1.x did
  (``AbsTaskInstructionRetrieval.create_qrel_diff``: judged under the original instruction, with
  another grade under the changed one; unjudged counts as 0).
- ``mteb``: MTEB 2.26's copies (``mteb/<Task>``): one folder per config (``corpus``,
  ``queries``, ``instruction``, ``qrels`` or ``data`` for the default config, ``top_ranked``,
  ``qrel_diff``) holding Parquet or JSON-lines files, ids already ``t-og`` / ``t-changed``;
  the changed documents are the release's ``qrel_diff``.

``meta["top_ranked"]`` holds every instance's candidate list (``{instance id: [doc ids]}``):
systems score those documents only (the spec's ``rerank``). ``meta["changed"]`` holds
``{topic: [doc ids]}``, what p-MRR is computed over.
"""

from __future__ import annotations

from pathlib import Path

from instir.benchmarks import catalog
from instir.benchmarks.docstore import jsonl_corpus
from instir.benchmarks.readers import (
    check_id,
    check_qrels,
    check_unique,
    data_folder,
    field_str,
    find_files,
    read_instructions,
    read_qrels,
    read_qrels_files,
    read_records,
    require_files,
)
from instir.benchmarks.types import Benchmark, FormatError, Qrels, Query, quoted

#: The family's instance forms (its spec's ``forms``): the original instruction's and the changed one's.
FORMS = catalog.family("followir").forms
OG, CHANGED = (f"-{form}" for form in FORMS.names)


def load(root: str | Path, *, subset: str | None, setting: str, name: str, revision: str,
         is_sample: bool) -> Benchmark:
    """The family's loader (the catalog's ``loader``): one dataset, in its only setting."""
    folder = data_folder(root, subset)
    if find_files(folder, ["queries.jsonl"]) and (folder / "qrels_og").is_dir():
        layout, corpus = "jhu-clsp", jsonl_corpus(_release_file(folder, "corpus.jsonl"))
        parts = _read_release(folder, corpus.id_set())
    elif find_files(folder, _config_patterns("queries")):
        layout, corpus = "mteb", jsonl_corpus(_config(folder, "corpus"))
        parts = _read_mteb(folder, corpus.id_set())
    else:
        raise FormatError(folder, None, None, "no FollowIR files found (expected the jhu-clsp release: queries.jsonl, "
                                              "qrels_og/, qrels_changed/, top_ranked.jsonl, corpus.jsonl; or MTEB's "
                                              "copy: queries/, instruction/, qrels/, top_ranked/, qrel_diff/, corpus/)")
    queries, qrels, top_ranked, changed, files = parts
    for qid in queries:
        queries[qid] = Query(id=qid, query=queries[qid].query, instruction=queries[qid].instruction,
                             group=FORMS.split(qid)[0], subset=subset or "")
    meta = {"subset": subset, "top_ranked": top_ranked, "changed": changed,
            "files": {k: [str(p) for p in paths] for k, paths in files.items()}}
    return Benchmark(name=name, layout=layout, revision=revision, setting=setting, corpus=corpus, queries=queries,
                     qrels=qrels, source=str(folder), is_sample=is_sample, meta=meta)


def _read_release(folder: Path, doc_ids: frozenset[str]) -> tuple:
    """The jhu-clsp layout: both instances of every topic, qrels, candidates, changed documents."""
    queries: dict[str, Query] = {}
    topics_at: dict[str, tuple[Path, int | str]] = {}
    path = folder / "queries.jsonl"  # found by load
    for n, rec in read_records(path):
        topic = field_str(rec, "_id", path, n)
        check_unique(topics_at, topic, path, n, "_id", "topic id")
        text = field_str(rec, "text", path, n)
        for suffix, key in ((OG, "instruction_og"), (CHANGED, "instruction_changed")):
            queries[topic + suffix] = Query(topic + suffix, text, field_str(rec, key, path, n))
    qrels: Qrels = {}
    qrels_files = []
    for suffix, sub in ((OG, "qrels_og"), (CHANGED, "qrels_changed")):
        qpath = require_files(folder / sub, ("test.jsonl", "test.tsv"), "the jhu-clsp layout's qrels")[0]
        judged, lines = read_qrels(qpath)
        renamed = {q + suffix: docs for q, docs in judged.items()}
        qrels.update(renamed)
        qrels_files.append((qpath, renamed, {(q + suffix, d): n for (q, d), n in lines.items()}))
    changed = FORMS.regraded(qrels)
    top_path = _release_file(folder, "top_ranked.jsonl")[0]
    topics = {q.removesuffix(OG) for q in queries if q.endswith(OG)}
    per_topic: dict[str, dict[str, None]] = {}
    for n, rec in read_records(top_path):
        topic, doc = field_str(rec, "qid", top_path, n), field_str(rec, "pid", top_path, n)
        if topic not in topics:
            raise FormatError(top_path, n, "qid", f"unknown topic id {quoted(topic)} (not in queries.jsonl)")
        _check_candidate(per_topic.setdefault(topic, {}), doc, doc_ids, top_path, n, "pid", topic)
    top_ranked = {qid: list(per_topic.get(FORMS.split(qid)[0], ())) for qid in queries}
    _require_candidates(top_ranked, top_path)
    for qpath, judged, lines in qrels_files:
        check_qrels(judged, lines, qpath, queries, doc_ids)
    files = {"corpus": [folder / "corpus.jsonl"], "queries": [path], "top_ranked": [top_path],
             "qrels": [qpath for qpath, _, _ in qrels_files]}
    return queries, qrels, top_ranked, changed, files


def _read_mteb(folder: Path, doc_ids: frozenset[str]) -> tuple:
    """The mteb layout: queries with their instructions, qrels, candidates and ``qrel_diff``; every
    config read from all of its shards, in name order."""
    texts: dict[str, str] = {}
    where: dict[str, tuple[Path, int | str]] = {}
    qpaths = _config(folder, "queries")
    for qpath in qpaths:
        for n, rec in read_records(qpath):
            qid = field_str(rec, "_id", qpath, n)
            check_unique(where, qid, qpath, n, "_id")
            if not qid.endswith((OG, CHANGED)):
                raise FormatError(qpath, n, "_id", f"query id {quoted(qid)} ends neither in {OG} nor in {CHANGED}")
            if qid in (OG, CHANGED):  # no topic before the form: FORMS.split would refuse it later, naming no line
                raise FormatError(qpath, n, "_id", f"query id {quoted(qid)} names no topic before its {qid}")
            texts[qid] = field_str(rec, "text", qpath, n)
    if not texts:
        raise FormatError(qpaths[0], None, None, "no queries found")
    ipaths = _config(folder, "instruction", "instructions")  # MTEB's name; instir mteb-export's file
    instructions = read_instructions(ipaths, where)
    queries = {qid: Query(qid, text, instructions[qid][0]) for qid, text in texts.items()}
    rpaths = _config(folder, "qrels", "data")
    qrels = read_qrels_files(rpaths, queries, doc_ids)
    tpaths = _config(folder, "top_ranked")
    top_ranked: dict[str, dict[str, None]] = {}
    for tpath in tpaths:
        for n, rec in read_records(tpath):
            qid = field_str(rec, "query-id", tpath, n)
            if qid not in queries:
                raise FormatError(tpath, n, "query-id", f"unknown query id {quoted(qid)} (not in the queries config)")
            listed = top_ranked.setdefault(qid, {})
            for doc in _id_list(rec, "corpus-ids", tpath, n):
                _check_candidate(listed, doc, doc_ids, tpath, n, "corpus-ids", qid)
    dpaths = _config(folder, "qrel_diff")
    changed: dict[str, list[str]] = {}
    seen: dict[str, tuple[Path, int | str]] = {}
    topics = {FORMS.split(qid)[0] for qid in queries}
    for dpath in dpaths:
        for n, rec in read_records(dpath):
            qid = field_str(rec, "query-id", dpath, n)  # the topic's, without -og / -changed
            check_unique(seen, qid, dpath, n, "query-id", "qrel_diff entry for query")
            if qid not in topics:  # p-MRR would skip it with a warning blaming the run, on every evaluation
                raise FormatError(dpath, n, "query-id", f"unknown topic {quoted(qid)} (the queries config has no "
                                                        f"{qid}{OG} or {qid}{CHANGED})")
            changed[qid] = _id_list(rec, "corpus-ids", dpath, n)
            stray = next((doc for doc in changed[qid] if doc not in doc_ids), None)
            if stray is not None:  # no run can rank it: p-MRR would count it as unmoved
                raise FormatError(dpath, n, "corpus-ids", f"changed document {quoted(stray)} of topic {quoted(qid)} "
                                                          "is not in the corpus")
    files = {"corpus": _config(folder, "corpus"), "queries": qpaths, "instruction": ipaths, "top_ranked": tpaths,
             "qrel_diff": dpaths, "qrels": rpaths}
    candidates = {q: list(top_ranked.get(q, ())) for q in queries}
    _require_candidates(candidates, tpaths[0])
    return queries, qrels, candidates, changed, files


def _id_list(rec: dict, name: str, path: Path, n: int) -> list[str]:
    """A list-of-ids field (``corpus-ids``), every id a string."""
    value = rec.get(name)
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v for v in value):
        raise FormatError(path, n, name, f"expected a list of document ids, got {quoted(value)}")
    return [check_id(v, path, n, name) for v in value]


def _check_candidate(listed: dict[str, None], doc: str, doc_ids: frozenset[str], path: Path, n: int, field: str,
                     query: str) -> None:
    """Add one candidate of ``query`` to its (ordered) list: it must be in the corpus and listed once."""
    if doc not in doc_ids:
        raise FormatError(path, n, field, f"candidate {quoted(doc)} of query {quoted(query)} is not in the corpus")
    if doc in listed:
        raise FormatError(path, n, field, f"query {quoted(query)} lists candidate {quoted(doc)} twice")
    listed[doc] = None


def _require_candidates(top_ranked: dict[str, list[str]], path: Path) -> None:
    """Every instance has a candidate list (a reranking task scores nothing else)."""
    empty = next((q for q, docs in top_ranked.items() if not docs), None)
    if empty is not None:
        raise FormatError(path, None, None, f"no candidate list for query {quoted(empty)}")


def _release_file(folder: Path, name: str) -> list[Path]:
    """A file of the jhu-clsp layout, found by the shared finder (:func:`require_files`)."""
    return require_files(folder, [name], "the jhu-clsp layout")


def _config_patterns(*names: str) -> list[str]:
    """The file patterns of a config of the mteb layout, the forms of one file (:func:`find_files` refuses two
    present): the shards in its folder (``<name>/**/*.parquet`` or ``.jsonl``), or one ``<name>.parquet`` or
    ``<name>.jsonl``."""
    return [pattern for name in names
            for pattern in (f"{name}/**/*.parquet", f"{name}/**/*.jsonl", f"{name}.parquet", f"{name}.jsonl")]


def _config(folder: Path, *names: str) -> list[Path]:
    """Every file of a config of the mteb layout (a Hugging Face config may be stored as several
    shards; each is read, in name order, as InstructIR's configs are), by the shared finder."""
    return require_files(folder, _config_patterns(*names), f"the mteb layout's {names[0]} config")
