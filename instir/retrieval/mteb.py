"""MTEB's files, read and written: prediction files as runs, and a copy of a benchmark that
MTEB loads with the query text the authors sent.

Prediction files (MTEB 2.26 ``mteb/abstasks/abstask.py`` ``AbsTask._save_task_predictions``,
called by ``AbsTaskRetrieval._evaluate_subset`` when ``mteb.evaluate(...,
prediction_folder=…)`` is given): one JSON file per task, ``<task name>_predictions.json``
(``AbsTask.prediction_file_name``), holding ``{"mteb_model_meta": {"model_name": …,
"revision": …}, "<hf subset>": {"<split>": {query id: {document id: score}}}}``. For InstructIR
and IFIR the subset is ``default`` and the split ``test``; the results are the top 1,000 per
query (``max(k_values)``), written *before* ``ignore_identical_ids`` removes self-hits, under
MTEB's query ids. :func:`read_mteb_predictions` checks that layout (every problem is one
:class:`~instir.benchmarks.types.FormatError` naming the file and the field);
:func:`predictions_run` maps the ids to the kit's (:mod:`instir.benchmarks.mteb`), and
:func:`write_mteb_predictions` writes a kit run in MTEB's layout and ids.

MTEB-ready copies (:func:`write_mteb_dataset`): MTEB sends ``query + " " + instruction``, and
the hook its InstructIR task names for the authors' order is never called (``docs/mteb.md``). The
copy written here puts the authors' text (template ``instructir``: ``instruction [SEP] query``)
into the queries' ``text`` and leaves the ``instruction`` config out, so MTEB sends that text as is.
IFIR's copy keeps MTEB's own layout (bare query + ``instruction`` config: MTEB's
``query instruction`` is the IFIR authors' text) with ids that carry ``v<level>``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from instir import atomic
from instir.benchmarks.mteb import MtebIds, mteb_ids
from instir.benchmarks.readers import check_id, read_text
from instir.benchmarks.types import Benchmark, FormatError, quoted
from instir.errors import UsageError, shorten
from instir.formatting import Template, get_template, require_text
from instir.inputs import file_problem, read_head
from instir.retrieval.runs import Run, as_run, score_problem
from instir.retrieval.search import file_slug

#: Largest prediction file read, in bytes (refused before reading): MTEB's top 1,000 of 10,000
#: queries, the largest InstructIR/IFIR/FollowIR task, take about 0.4 GB.
MAX_PREDICTIONS_BYTES = 1 << 30
#: Most digits of an integer in a prediction file (Python refuses beyond 4,300, a traceback).
MAX_DIGITS = 400

#: the suffix of MTEB's prediction files (``AbsTask.prediction_file_name``)
PREDICTIONS_SUFFIX = "_predictions.json"
#: MTEB's subset and split names for InstructIR and IFIR (one subset, ``eval_splits=["test"]``)
DEFAULT_SUBSET, DEFAULT_SPLIT = "default", "test"


@dataclass
class MtebPredictions:
    """One MTEB prediction file as read: ``scores`` (``{query id: {document id: score}}``,
    MTEB's ids, the scores as written), the ``task`` its name says (``InstructIR`` for
    ``InstructIR_predictions.json``; empty when the name does not follow MTEB's pattern), the
    ``model_name`` and ``revision`` of its ``mteb_model_meta``, and the ``subset`` and ``split``
    read."""

    path: Path
    task: str
    model_name: str
    revision: str
    subset: str
    split: str
    scores: dict[str, dict[str, float]] = field(repr=False)


def is_mteb_predictions(path: str | Path) -> bool:
    """Whether a file name is an MTEB prediction file's (``…_predictions.json``) or any
    ``.json`` file (a run file of the kit is TREC text, never JSON)."""
    return Path(path).name.lower().endswith(".json")


def _object(value, path: Path, where: str | None, name: str | None, expected: str) -> dict:
    if not isinstance(value, dict):
        raise FormatError(path, where, name, f"expected {expected}, got {type(value).__name__}")
    return value


class _Refused(ValueError):
    """A value the JSON parser's hooks refuse: ``field`` (the key, when known), ``problem`` and ``literal`` (a number's
    text as written, by which its line is found)."""

    def __init__(self, field: str | None, problem: str, literal: str | None = None):
        super().__init__(problem)
        self.field, self.problem, self.literal = field, problem, literal


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    """A JSON object whose keys are unique (a repeated query or document id would let the last
    silently win)."""
    obj: dict = {}
    for key, value in pairs:
        if key in obj:
            raise _Refused(key, "the key appears twice in one object (a repeated query or document id: which "
                                "one counts?)")
        obj[key] = value
    return obj


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise _Refused(None, f"an integer of {len(text.lstrip('-')):,} digits (more than {MAX_DIGITS}) is no score",
                       text)
    return int(text)


def _bounded_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise _Refused(None, f"the number {shorten(text, 40)} lies outside 64-bit floats", text)
    return value


def read_mteb_predictions(path: str | Path) -> MtebPredictions:
    """Read an MTEB prediction file (see the module docstring): subset ``default``, split ``test``,
    else the file's only split. Raises :class:`~instir.benchmarks.types.FormatError` naming the
    file, where in it and the field for a file that is not JSON or not in MTEB's layout (a
    query whose value is not an object, a score that is not a finite number …)."""
    path = Path(path)
    problem = file_problem(path)
    if problem is not None:
        raise FormatError(path, None, None, "prediction file not found" if problem == "not found"
                          else f"prediction file {problem}")
    size = os.path.getsize(path)
    if size > MAX_PREDICTIONS_BYTES:
        raise FormatError(path, None, None, f"{size:,} bytes, more than the {MAX_PREDICTIONS_BYTES:,} a prediction "
                                            "file may have (MTEB's top 1,000 of 10,000 queries take about 0.4 GB)")
    text = read_text(path)
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys, parse_int=_bounded_int, parse_float=_bounded_float)
    except json.JSONDecodeError as err:
        raise FormatError(path, err.lineno, None, f"not valid JSON: {err.msg} (column {err.colno})") from None
    except _Refused as err:  # a number is found by its text: the hooks are not told where they are
        at = -1 if err.literal is None else text.find(err.literal)
        raise FormatError(path, None if at < 0 else text.count("\n", 0, at) + 1, err.field, err.problem) from None
    except RecursionError:
        raise FormatError(path, None, None, "nested deeper than Python reads (MTEB's layout is 4 objects deep)") \
            from None
    layout = '{"mteb_model_meta": {…}, "<subset>": {"<split>": {query id: {document id: score}}}}'
    data = _object(data, path, None, None, f"a JSON object {layout}")
    meta = _object(data.get("mteb_model_meta", {}), path, None, "mteb_model_meta",
                   'an object {"model_name": …, "revision": …}')
    subsets = [k for k in data if k != "mteb_model_meta"]
    subset = DEFAULT_SUBSET
    if subset not in data:
        have = ", ".join(map(quoted, subsets)) or "none"
        raise FormatError(path, None, subset, f"missing subset; the file has {have}")
    splits = _object(data[subset], path, None, subset, "an object {split: predictions}")
    split = DEFAULT_SPLIT if DEFAULT_SPLIT in splits or len(splits) != 1 else next(iter(splits))
    if split not in splits:
        raise FormatError(path, f"subset {quoted(subset)}", split,
                          f"missing split; the subset has {', '.join(map(quoted, splits)) or 'none'}")
    where = f"{quoted(subset)} > {quoted(split)}"
    predictions = _object(splits[split], path, f"subset {quoted(subset)}", split,
                          "an object {query id: {document id: score}}")
    scores: dict[str, dict[str, float]] = {}
    for qid, docs in predictions.items():
        check_id(qid, path, where, "query id")
        docs = _object(docs, path, where, qid, "an object {document id: score}")
        ranked = {}
        for docid, score in docs.items():
            check_id(docid, path, f"{where} > query {quoted(qid)}", "document id")
            if isinstance(score, bool) or not isinstance(score, (int, float)):
                raise FormatError(path, f"{where} > query {quoted(qid)}", docid,
                                  f"expected a finite number (the score), got {quoted(json.dumps(score))}")
            problem = score_problem(score)  # the one rule of a run's scores: finite, within single precision
            if problem is not None:
                raise FormatError(path, f"{where} > query {quoted(qid)}", docid, problem)
            ranked[docid] = float(score)
        scores[qid] = ranked
    for key in ("model_name", "revision"):
        if meta.get(key) is not None and not isinstance(meta[key], str):
            raise FormatError(path, "mteb_model_meta", key, f"expected a string, got {type(meta[key]).__name__}")
    task = path.name[: -len(PREDICTIONS_SUFFIX)] if path.name.endswith(PREDICTIONS_SUFFIX) else ""
    return MtebPredictions(path, task, meta.get("model_name") or "", meta.get("revision") or "", subset, split,
                           scores)


def predictions_scores(predictions: MtebPredictions, benchmark: Benchmark, ids: MtebIds | None = None
                       ) -> dict[str, dict[str, float]]:
    """The prediction file's scores under the kit's query ids, ``{qid: {docid: score}}``
    (scores as written). A file named for another task than the benchmark's is refused, and so
    is a query id that names none of the benchmark's instances (a
    :class:`~instir.benchmarks.types.FormatError` naming the file and the id)."""
    ids = ids or mteb_ids(benchmark)
    if predictions.task and predictions.task != ids.task.name:
        raise UsageError(f"{predictions.path} holds MTEB's {predictions.task} predictions; {benchmark.label} is "
                         f"MTEB's {ids.task.name}")
    where = f"{quoted(predictions.subset)} > {quoted(predictions.split)}"
    mapped: dict[str, dict[str, float]] = {}
    for mid, docs in predictions.scores.items():
        kit = ids.kit_id(mid)
        if kit is None:
            example = next(iter(ids.to_kit), "")
            raise FormatError(predictions.path, where, mid, f"unknown query id: no query of {benchmark.label} has "
                                                            f"this MTEB id (they look like {quoted(example)})")
        if kit in mapped:
            raise FormatError(predictions.path, where, mid, f"a second MTEB id for query {quoted(kit)}")
        mapped[kit] = docs
    return mapped


def predictions_run(predictions: MtebPredictions, benchmark: Benchmark, ids: MtebIds | None = None) -> Run:
    """The prediction file as a :class:`~instir.retrieval.runs.Run` of ``benchmark`` under the
    kit's query ids (:func:`predictions_scores`; documents as given, self-hits kept as the file
    has them, scores put in trec_eval's float32 order as every Run is)."""
    ids = ids or mteb_ids(benchmark)
    meta = {"source": "mteb-predictions", "path": str(predictions.path), "mteb_task": ids.task.name,
            "mteb_model_meta": {"model_name": predictions.model_name, "revision": predictions.revision},
            "mteb_subset": predictions.subset, "mteb_split": predictions.split}
    return Run.from_scores(predictions_scores(predictions, benchmark, ids), meta)


def read_predictions_run(path: str | Path, benchmark: Benchmark) -> Run:
    """:func:`read_mteb_predictions` then :func:`predictions_run`: an MTEB prediction file as a
    run of ``benchmark``, in the kit's order (as the authors' protocol scores it)."""
    return predictions_run(read_mteb_predictions(path), benchmark)


def check_mteb_queries(run: Run, benchmark: Benchmark, ids: MtebIds | None = None) -> None:
    """Refuse a run with queries that are not in ``benchmark``: MTEB has no id for them."""
    ids = ids or mteb_ids(benchmark)
    unknown = [q for q in dict.fromkeys(as_run(run).df["qid"]) if q not in ids.to_mteb]
    if unknown:
        named = f" {run.meta['path']}" if run.meta.get("path") else ""
        raise UsageError(f"{len(unknown)} queries of the run{named} are not in {benchmark.label} (e.g. "
                         f"{', '.join(map(quoted, unknown[:3]))}); MTEB has no id for them")


def write_mteb_predictions(run: Run, benchmark: Benchmark, folder: str | Path, *, model_name: str,
                           revision: str | None = None) -> Path:
    """Write ``run`` as MTEB's ``<task>_predictions.json`` in ``folder`` (atomically; an existing file of the
    same ``model_name`` and other predictions is set aside, :func:`instir.atomic.set_aside`) and return its path. An
    existing file of another model, or one that names none, is refused (:class:`UsageError`): one folder per
    model, as MTEB's results, and no one's predictions lost.

    MTEB's query ids, documents in rank order, queries in run order; queries that are not in
    ``benchmark`` are refused (MTEB has no id for them)."""
    run = as_run(run)
    ids = mteb_ids(benchmark)
    check_mteb_queries(run, benchmark, ids)
    predictions: dict[str, dict[str, float]] = {}
    for qid, docid, score in zip(run.df["qid"].tolist(), run.df["docid"].tolist(), run.df["score"].tolist()):
        predictions.setdefault(ids.mteb_id(qid), {})[docid] = score
    data = {"mteb_model_meta": {"model_name": model_name, "revision": revision},
            DEFAULT_SUBSET: {DEFAULT_SPLIT: predictions}}
    path = Path(folder) / f"{ids.task.name}{PREDICTIONS_SUFFIX}"
    text = json.dumps(data)
    if os.path.lexists(path):
        held = _model_named(path)
        if held != model_name:
            raise UsageError(f"{path} holds {f'the predictions of {quoted(held)}' if held else 'no predictions'}, "
                             f"not of {quoted(model_name)}, and this would replace it: write into another folder "
                             "(one per model) or move it")
        if path.stat().st_size != len(text.encode()) or path.read_text(encoding="utf-8") != text:
            atomic.set_aside(path, f"{path} holds other predictions of {quoted(model_name)} (another run: a "
                                   "query-only one?)", "writing this run's")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, text)
    return path


def _model_named(path: Path) -> str | None:
    """The ``mteb_model_meta.model_name`` at the head of a predictions file (where instir and MTEB write it), read
    from its first 64 KiB only (the file may hold gigabytes); None when it names none or is no regular file."""
    head = (read_head(path, 1 << 16) or b"").decode("utf-8", errors="replace")
    found = re.match(r'\s*\{\s*"mteb_model_meta"\s*:\s*\{\s*"model_name"\s*:\s*("(?:[^"\\]|\\.)*")', head)
    return json.loads(found.group(1)) if found else None


def _jsonl(records) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)


def _readme(task: str, benchmark: Benchmark, configs: Mapping[str, str], text_rule: str, digest: str) -> str:
    lines = ["---", "configs:"]
    for config, file in configs.items():  # mteb loads FollowIR's qrel_diff with split="qrel_diff"
        split = "qrel_diff" if config == "qrel_diff" else DEFAULT_SPLIT
        # the description enters the hash that Hugging Face datasets keys its cache by (besides the
        # folder's name), so two exports never share a cache entry, even moved into same-named folders
        lines += [f"- config_name: {config}", f"  description: instir export {digest}", "  data_files:",
                  f"  - split: {split}", f"    path: {file}"]
    lines += ["---", "", f"# {benchmark.name} for MTEB's {task} task", "",
              f"Written by instir from {benchmark.label} (revision {benchmark.revision}, layout "
              f"{benchmark.layout}). {text_rule}", "",
              "Point a copy of MTEB's task at this folder (its `metadata.dataset` `path`), e.g.:", "",
              "```python",
              "import mteb",
              f"task = mteb.get_task({task!r})",
              "task.metadata.dataset = {**task.metadata.dataset, \"path\": \"<this folder>\"}",
              "```", ""]
    return "\n".join(lines)


def dataset_template(benchmark: Benchmark, template: str | Template | None = "default") -> Template | None:
    """The template an MTEB dataset of ``benchmark`` writes its queries with (:func:`write_mteb_dataset`'s
    ``template``: ``"default"`` is the family spec's), refused when it makes ``[instruction, text]`` pairs, which no
    MTEB query file can hold: what ``instir mteb-export`` checks before it writes anything."""
    if template == "default":
        template = mteb_ids(benchmark).task.dataset_template
    if isinstance(template, str):
        template = get_template(template)
    if template is not None:
        require_text(template, "MTEB's queries", documents=False)  # its documents are written as they are
    return template


def write_mteb_dataset(benchmark: Benchmark, out: str | Path, *, template: str | Template | None = "default"
                       ) -> Path:
    """Write ``benchmark`` as a dataset folder in MTEB's retrieval layout under ``out`` and return
    it: ``out/<benchmark>-<setting>-<hash12>`` (``ifir-sample-fiqa-instructed-3f2a…``, the hash of
    what is written). Hugging Face ``datasets`` keys its cache of a local folder by the folder's
    name and the README's configs, not by the files, so each export has a name of its own and its
    hash in each config's ``description`` (a moved copy keeps its entry too). The folder is loadable
    by MTEB's ``RetrievalDatasetLoader`` (Hugging Face ``datasets`` reads the configs from
    README.md): ``corpus.jsonl`` (``_id``, ``title``, ``text``), ``queries.jsonl`` (``_id``,
    ``text``), ``qrels/test.jsonl`` (``query-id``, ``corpus-id``, ``score``: config ``default``)
    and, when the text is left to MTEB, ``instructions.jsonl`` (``query-id``, ``instruction``:
    config ``instruction``); a reranking task's ``top_ranked.jsonl`` (``query-id``,
    ``corpus-ids``) and FollowIR's ``qrel_diff.jsonl`` (``query-id`` = topic, ``corpus-ids``).
    Query ids are MTEB's (:func:`instir.benchmarks.mteb.mteb_ids`).

    ``template``: ``"default"`` is the family spec's ``[mteb] dataset_template``: InstructIR's
    authors' text (``instructir``: ``instruction [SEP] query``), and MTEB's own layout for IFIR
    (none: bare query + instruction; MTEB's ``query instruction`` is the IFIR authors' text); a
    template name puts that template's text in ``text`` without an ``instruction`` config;
    ``None`` keeps MTEB's layout (MTEB then sends ``query instruction``). Where the spec says
    ``origin_query``, a templated query also keeps ``metadata.origin_query`` (InstructIR's)."""
    ids = mteb_ids(benchmark)
    task = ids.task
    template = dataset_template(benchmark, template)
    queries = []
    for qid, query in benchmark.queries.items():
        if template is None:
            record = {"_id": ids.mteb_id(qid), "text": query.query}
        else:
            record = {"_id": ids.mteb_id(qid), "text": template.format_query(query)}
            if task.origin_query:  # the bare query beside the text, as the family's release keeps it
                record["metadata"] = {"origin_query": query.query}
        queries.append(record)
    files = {"corpus.jsonl": _jsonl({"_id": d.id, "title": d.title, "text": d.text} for d in benchmark.corpus),
             "queries.jsonl": _jsonl(queries),
             "qrels/test.jsonl": _jsonl({"query-id": ids.mteb_id(q), "corpus-id": d, "score": int(g)}
                                        for q, docs in benchmark.qrels.items() for d, g in docs.items())}
    configs = {"corpus": "corpus.jsonl", "queries": "queries.jsonl", "default": "qrels/test.jsonl"}
    if template is None:
        files["instructions.jsonl"] = _jsonl({"query-id": ids.mteb_id(q), "instruction": query.instruction}
                                             for q, query in benchmark.queries.items())
        configs["instruction"] = "instructions.jsonl"
        rule = ("Queries hold the bare query and `instructions.jsonl` the instruction, as in MTEB's own copy: MTEB "
                "sends `query + \" \" + instruction`.")
    else:
        rule = (f"Queries hold the text of template `{template.name}` ({template.description}) and there is no "
                "instruction config, so MTEB sends that text unchanged.")
    if benchmark.meta.get("top_ranked"):  # a reranking task: the candidate lists, and p-MRR's changed documents
        files["top_ranked.jsonl"] = _jsonl({"query-id": ids.mteb_id(q), "corpus-ids": docs}
                                           for q, docs in benchmark.meta["top_ranked"].items())
        configs["top_ranked"] = "top_ranked.jsonl"
    if benchmark.meta.get("changed"):
        files["qrel_diff.jsonl"] = _jsonl({"query-id": q, "corpus-ids": docs}
                                          for q, docs in benchmark.meta["changed"].items())
        configs["qrel_diff"] = "qrel_diff.jsonl"
    content = hashlib.sha256(json.dumps(configs, sort_keys=True).encode())
    for name, text in files.items():
        content.update(f"\x00{name}\x00".encode())
        content.update(text.encode())
    digest = content.hexdigest()[:12]
    folder = Path(out) / f"{file_slug(f'{benchmark.name}-{benchmark.setting}').lower()}-{digest}"
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        atomic.write_text(folder / name, text)
    atomic.write_text(folder / "README.md", _readme(task.name, benchmark, configs, rule, digest))
    return folder
