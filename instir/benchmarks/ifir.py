"""IFIR (arXiv:2503.04644): seven expert-domain subsets whose queries carry one instruction
(``nfcorpus``, ``fire``, ``cds``: level 0) or three cumulative instruction levels 1-3
(``fiqa``, ``scifact_open``, ``aila``, ``pm``). Every instruction instance becomes one
:class:`Query` with its own qrels; instances of one query share a ``group``.

The layout (``songtingyu``: ``test_data.json``, the authors' file; ``songtingyu-beir``: the same
folder's BEIR files; ``mteb``: MTEB's ``if-ir/<subset>``; their files are in docs/formats.md) is
detected per subset folder and recorded in ``Benchmark.layout``. Instance ids are
``<query id>_<level>`` in every layout (``.<n>`` appended when one query repeats a level), so one
content read from different layouts gives equal queries and qrels; ``meta["source_ids"]`` maps
instance ids back to ids of the file where they differ. From ``test_data.json``,
``meta["candidates"]`` keeps each query's candidate list (``{query id: [doc ids]}``): passages
judged for the query but not relevant to a given instruction, which judge validation uses as
hard negatives. A relevant document that is in the corpus file only with empty text stays in the
qrels (it can never be retrieved, as upstream) and is counted in
``meta["relevant_docs_without_text"]``.
"""

from __future__ import annotations

import json
import os
import warnings
from collections import Counter
from collections.abc import Container, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from instir.benchmarks import catalog
from instir.benchmarks.docstore import IndexedCorpus, jsonl_corpus
from instir.benchmarks.mteb import level_from_mteb_id
from instir.benchmarks.readers import (
    check_unique,
    data_folder,
    field_str,
    find_files,
    json_object,
    read_instructions,
    read_json_array,
    read_qrels,
    read_records,
    read_text,
    require_files,
)
from instir.benchmarks.types import Benchmark, FormatError, Qrels, Query, quoted

#: The family's spec (subsets, levels, domains).
IFIR = catalog.family("ifir")

Where = tuple[Path, "str | int | None", "str | None"]


@dataclass
class _Instance:
    """One instruction instance as read: the query, the id in its file, and its relevant
    documents with their grades and where each judgment is (for error messages)."""

    query: Query
    source_id: str
    relevant: dict[str, tuple[int, Where]] = field(default_factory=dict)


def load(root: str | Path, *, subset: str | None, setting: str, name: str, revision: str,
         is_sample: bool) -> Benchmark:
    """The family's loader (the catalog's ``loader``): one subset, in its only setting."""
    return load_ifir(root, subset, name_prefix=name.partition("/")[0], revision=revision, is_sample=is_sample)


def load_ifir(root: str | Path, subset: str, *, name_prefix: str = "ifir", revision: str = "local",
              is_sample: bool = False) -> Benchmark:
    """Load one IFIR subset from ``root`` (the folder holding ``<subset>/`` folders, or the
    subset folder itself), in whichever layout is there. Reads local files only.

    The benchmark is named ``<name_prefix>/<subset>`` and has the single setting
    ``instructed``: the no-instruction run of IFIR uses the same instances and qrels with the
    bare query (a query-only template), so it needs no setting of its own.
    """
    facts = IFIR.subset(subset)
    folder = data_folder(root, subset)
    layout, files = detect_layout(folder, subset)
    corpus_path = files["corpus"]
    corpus = jsonl_corpus(corpus_path, skip_empty=True)
    candidates: dict[str, list[str]] = {}
    if layout == "songtingyu":
        instances, candidates = _read_test_data(files["test_data"], subset)
    elif layout == "songtingyu-beir":
        instances = _read_beir(files["queries"], files["qrels"], subset)
    else:
        instances = _read_mteb(files["queries"], files["instructions"], files["qrels"], subset)
    queries, qrels, meta = _assemble(instances, corpus, corpus_path)
    meta.update(subset=subset, domain=facts.domain, multi_level=facts.multi_level,
                files={k: str(p) for k, p in files.items()})
    if candidates:
        meta["candidates"] = candidates
    return Benchmark(name=f"{name_prefix}/{subset}", layout=layout, revision=revision, setting="instructed",
                     corpus=corpus, queries=queries, qrels=qrels, source=str(folder), is_sample=is_sample,
                     meta=meta)


def detect_layout(folder: Path, subset: str) -> tuple[str, dict[str, Path]]:
    """The layout of one subset folder and the files it will be read from."""
    corpus = [f"{subset}-corpus.jsonl"]
    test_data = folder / "test_data.json"
    if os.path.lexists(test_data):
        return "songtingyu", {"test_data": test_data,
                              "corpus": require_files(folder, corpus, "the songtingyu layout")[0]}
    beir_queries = find_files(folder, [f"{subset}-query.jsonl", f"{subset}-query.json"])
    if beir_queries:
        needs = f"the songtingyu-beir layout, beside {beir_queries[0].name},"
        return "songtingyu-beir", {"queries": beir_queries[0],
                                   "qrels": require_files(folder, [f"{subset}-qrel.tsv", f"{subset}-qrel.jsonl"],
                                                          needs)[0],
                                   "corpus": require_files(folder, corpus, needs)[0]}
    instructions = find_files(folder, ["instructions.jsonl", "instructions.parquet"])
    if instructions:
        needs = f"the mteb layout, beside {instructions[0].name},"
        files = {key: require_files(folder, names, needs)[0]
                 for key, names in (("queries", ["queries.jsonl", "queries.parquet"]),
                                    ("corpus", ["corpus.jsonl", "corpus.parquet"]),
                                    ("qrels", ["qrels/test.jsonl", "qrels/test.parquet", "qrels/test.tsv"]))}
        return "mteb", {"instructions": instructions[0], **files}
    raise FormatError(folder, None, None,
                      f"no IFIR files found; expected test_data.json + {subset}-corpus.jsonl (songtingyu), "
                      f"{subset}-query.jsonl + {subset}-qrel.tsv + {subset}-corpus.jsonl (songtingyu BEIR files), "
                      "or corpus.jsonl + queries.jsonl + instructions.jsonl + qrels/test.jsonl (mteb)")


def _check_level(level: Any, subset: str, where: Where) -> int:
    """A level as an int, allowed for the subset: 1-3 in multi-level subsets, 0 otherwise."""
    if isinstance(level, bool) or not isinstance(level, int):
        raise FormatError(*where, f"expected an integer level, got {quoted(level)}")
    if IFIR.subset(subset).multi_level and level not in (1, 2, 3):
        raise FormatError(*where, f"level {level} outside 1-3 ({subset} is a multi-level subset)")
    if not IFIR.subset(subset).multi_level and level != 0:
        raise FormatError(*where, f"level {level} where 0 is expected ({subset} is a single-level subset)")
    return level


def _instance_id(group: str, level: int, seen_levels: Counter) -> str:
    """``<group>_<level>``, with ``.<n>`` for the n-th repeat of a level within one query."""
    seen_levels[level] += 1
    n = seen_levels[level]
    return f"{group}_{level}" if n == 1 else f"{group}_{level}.{n}"


def _read_test_data(path: Path, subset: str) -> tuple[list[_Instance], dict[str, list[str]]]:
    """Instances of ``test_data.json`` (each element's instructions, ``rel`` mapped to doc ids)
    and each query's candidate list (its ``corpus``: the passages the annotators judged)."""
    out: list[_Instance] = []
    judged: dict[str, list[str]] = {}
    first_at: dict[str, tuple[Path, int | str]] = {}
    for i, element in enumerate(read_json_array(path)):
        at = f"array index {i}"
        element = json_object(element, path, at)
        qid = field_str(element, "_id", path, at)
        check_unique(first_at, qid, path, at, "_id")
        text = field_str(element, "text", path, at)
        candidates = judged[qid] = _candidate_ids(element, path, at)
        instructions = element.get("instructions")
        if not isinstance(instructions, list) or not instructions:
            raise FormatError(path, at, "instructions", "missing or empty (expected a list of instructions)")
        seen_levels: Counter = Counter()
        for j, item in enumerate(instructions):
            iat = f"{at}, instructions[{j}]"
            item = json_object(item, path, iat)
            level = _check_level(item.get("level"), subset, (path, iat, "level"))
            instruction = field_str(item, "instruction", path, iat)
            rel = item.get("rel")
            if not isinstance(rel, list):
                raise FormatError(path, iat, "rel", "missing (expected a list of indices into the element's corpus)")
            iid = _instance_id(qid, level, seen_levels)  # instances have no id of their own in this file
            inst = _Instance(Query(id=iid, query=text, instruction=instruction, group=qid, level=level,
                                   subset=subset), iid)
            for k, index in enumerate(rel):
                where = (path, iat, f"rel[{k}]")
                if isinstance(index, bool) or not isinstance(index, int):
                    raise FormatError(*where, f"expected an integer index, got {quoted(index)}")
                if not 0 <= index < len(candidates):
                    raise FormatError(*where, f"index {index} out of range: the element's corpus holds "
                                              f"{len(candidates)} candidates (valid 0-{len(candidates) - 1})")
                # a document listed twice (in rel or in corpus) is one judgment
                inst.relevant.setdefault(candidates[index], (1, (path, f"{at}, corpus[{index}]", "_id")))
            out.append(inst)
    return out, judged


def _candidate_ids(element: dict, path: Path, at: str) -> list[str]:
    candidates = element.get("corpus")
    if not isinstance(candidates, list):
        raise FormatError(path, at, "corpus", "missing (expected a list of {\"_id\": …} candidates)")
    ids = []
    for k, item in enumerate(candidates):
        ids.append(field_str(json_object(item, path, f"{at}, corpus[{k}]"), "_id", path, f"{at}, corpus[{k}]"))
    return ids


def _query_records(path: Path) -> Iterator[tuple[int | str, dict]]:
    """Records of a BEIR query file: JSON lines, or (``.json``) a JSON array or JSON lines."""
    if path.suffix == ".json":
        try:
            data = json.loads(read_text(path))
        except (ValueError, RecursionError):  # JSONDecodeError is a ValueError, as is an int of 4300+ digits
            data = None  # several JSON documents (JSON lines), or one too deep or long: read (and refused) below
        if isinstance(data, list):
            for i, rec in enumerate(data):
                yield f"array index {i}", json_object(rec, path, f"array index {i}")
            return
    yield from read_records(path)


def _read_beir(query_path: Path, qrels_path: Path, subset: str) -> list[_Instance]:
    """Instances of the BEIR-style files: ``<qid>_0`` bare, ``<qid>_<level>`` instructed, its text
    assumed to be ``query + " " + instruction`` (the authors' BEIR script); judgments of the bare
    queries are not kept."""
    bare: dict[str, tuple[str, int | str]] = {}
    instructed: list[tuple[str, str, int, str, int | str]] = []
    first_at: dict[str, tuple[Path, int | str]] = {}
    for at, rec in _query_records(query_path):
        fid = field_str(rec, "_id", query_path, at)
        check_unique(first_at, fid, query_path, at, "_id")
        text = field_str(rec, "text", query_path, at)
        group, sep, suffix = fid.rpartition("_")
        if not sep or not group or not suffix.isdigit():
            raise FormatError(query_path, at, "_id", f"expected '<query id>_<level>', got {quoted(fid)}")
        if int(suffix) == 0:
            bare[group] = (text, at)
        else:
            instructed.append((fid, group, int(suffix), text, at))
    out: list[_Instance] = []
    by_source: dict[str, _Instance] = {}
    levels_of: dict[str, Counter] = {}
    for fid, group, level, text, at in instructed:
        if group not in bare:
            raise FormatError(query_path, at, "_id", f"no bare query {quoted(group + '_0')} for instance {quoted(fid)}")
        query = bare[group][0]
        instruction = (text[len(query):] if text.startswith(query) else text).strip()
        if not instruction:
            raise FormatError(query_path, at, "text",
                              f"instance {quoted(fid)} has no instruction beyond the bare query")
        if not IFIR.subset(subset).multi_level:
            if group in levels_of:
                raise FormatError(query_path, at, "_id", f"second instructed record for query {quoted(group)} "
                                                         f"({subset} is a single-level subset)")
            level = 0
        _check_level(level, subset, (query_path, at, "_id"))
        seen = levels_of.setdefault(group, Counter())
        inst = _Instance(Query(id=_instance_id(group, level, seen), query=query, instruction=instruction,
                               group=group, level=level, subset=subset), fid)
        out.append(inst)
        by_source[fid] = inst
    orphan = next((group for group in bare if group not in levels_of), None)
    if orphan is not None:
        raise FormatError(query_path, bare[orphan][1], "_id",
                          f"query {quoted(orphan)} has only its bare '_0' record (no instruction instance)")
    _attach_qrels(qrels_path, query_path, by_source, first_at)
    return out


def _read_mteb(query_path: Path, instruction_path: Path, qrels_path: Path, subset: str) -> list[_Instance]:
    """Instances of MTEB's ``if-ir/<subset>``: bare queries joined with their instructions."""
    records: dict[str, tuple[int, dict]] = {}
    where: dict[str, tuple[Path, int | str]] = {}
    for n, rec in read_records(query_path):
        qid = field_str(rec, "_id", query_path, n)
        check_unique(where, qid, query_path, n, "_id")
        records[qid] = (n, rec)
    instruction_of = read_instructions([instruction_path], where)
    out: list[_Instance] = []
    by_source: dict[str, _Instance] = {}
    levels_of: dict[str, Counter] = {}
    for qid, (n, rec) in records.items():
        group, level = level_from_mteb_id(qid)
        if IFIR.subset(subset).multi_level:
            if level is None:
                raise FormatError(query_path, n, "_id", f"no level token v1/v2/v3 in query id {quoted(qid)} "
                                                        f"({subset} is a multi-level subset)")
            _check_level(level, subset, (query_path, n, "_id"))
        else:
            level = 0
        if not group:
            raise FormatError(query_path, n, "_id", f"query id {quoted(qid)} is only a level token")
        seen = levels_of.setdefault(group, Counter())
        inst = _Instance(Query(id=_instance_id(group, level, seen), query=field_str(rec, "text", query_path, n),
                               instruction=instruction_of[qid][0], group=group, level=level, subset=subset),
                         qid)
        out.append(inst)
        by_source[qid] = inst
    _attach_qrels(qrels_path, query_path, by_source, by_source)
    return out


def _attach_qrels(qrels_path: Path, query_path: Path, by_source: dict[str, _Instance],
                  known: Container[str]) -> None:
    """The judgments of ``qrels_path`` added to the instances they name (by their id in the
    file); a query id not ``known`` is an error, a known one without an instance is skipped."""
    qrels, lines = read_qrels(qrels_path)
    for (qid, doc_id), line in lines.items():
        if qid not in known:
            raise FormatError(qrels_path, line, "query-id",
                              f"unknown query id {quoted(qid)} (not in {query_path.name})")
        if qid in by_source:
            by_source[qid].relevant[doc_id] = (qrels[qid][doc_id], (qrels_path, line, "corpus-id"))


def _assemble(instances: list[_Instance], corpus: IndexedCorpus,
              corpus_path: Path) -> tuple[dict[str, Query], Qrels, dict]:
    """Queries and qrels from the instances, after checking that every relevant document is
    in the corpus file. Instance ids are unique by construction: the query id is unique (or
    the group, for the BEIR and MTEB files) and levels repeat only with a ``.<n>`` suffix."""
    queries: dict[str, Query] = {}
    qrels: Qrels = {}
    source_ids: dict[str, str] = {}
    for inst in instances:
        q = inst.query
        queries[q.id] = q
        if inst.source_id != q.id:
            source_ids[q.id] = inst.source_id
        if inst.relevant:
            qrels[q.id] = {doc_id: grade for doc_id, (grade, _) in inst.relevant.items()}
    missing = {doc_id: where for inst in instances for doc_id, (_, where) in inst.relevant.items()
               if doc_id not in corpus}
    without_text = set()
    if missing:
        without_text = set(corpus.index().skipped_ids)  # records skipped for empty text
        for doc_id, where in missing.items():
            if doc_id not in without_text:
                raise FormatError(*where, f"unknown document id {quoted(doc_id)} (not in {corpus_path.name})")
    no_relevant = [q for q in queries if q not in qrels]
    if no_relevant:
        warnings.warn(f"{len(no_relevant)} IFIR instances have no relevant document (first: {quoted(no_relevant[0])}); "
                      "they are kept as queries but have no qrels", stacklevel=3)
    meta = {"source_ids": source_ids, "relevant_docs_without_text": len(missing.keys() & without_text),
            "instances_without_relevant": len(no_relevant)}
    return queries, qrels, meta

