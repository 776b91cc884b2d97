"""The numbers the papers report, as package data, loaded into one tidy shape.

Four CSV files travel with the package (``instir/papers/reported/``), copied unchanged from
the project's reference notes, each keeping its own source column:

- ``ifir_reported.csv``: every number printed in the IFIR paper (arXiv:2503.04644v1).
- ``instructir_reported.csv``: the InstructIR headline numbers (arXiv:2402.14334), dataset
  statistics from third-party summaries, and SECONDARY scores that the Promptriever paper
  (arXiv:2409.11136, Table 2) reports for InstructIR.
- ``followir_reported.csv``: every number of the FollowIR paper's Table 2 (arXiv:2403.15246v3,
  after the 2024-04-24 data correction; values as printed, ×100).
- ``mteb_results.csv``: what MTEB's public results store holds for the IFIR tasks (standard
  nDCG, MTEB data revisions), a legacy InstructIR task and FollowIR's p-MRR for a few models.

:func:`load_reported` keeps every original column and adds those the comparison aligns on, so
a notebook can show the rows as printed and :func:`instir.papers.compare_to_papers` can align them.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from functools import cache
from importlib import resources
from pathlib import Path

import pandas as pd

from instir.benchmarks import catalog
from instir.benchmarks.readers import TOO_DEEP, read_text
from instir.benchmarks.types import FormatError, quoted
from instir.inputs import file_problem
from instir.metrics.measures import LOWER_CASE_NAMES, split_cutoff

#: paper name -> CSV file under ``instir/papers/reported/``: each family's (its spec's ``[papers] file``),
#: and MTEB's results store
REPORTED_FILES = {**{name: catalog.family(name).papers["file"] for name in catalog.families()
                     if catalog.family(name).papers.get("file")}, "mteb": "mteb_results.csv"}


def family_papers() -> tuple[str, ...]:
    """The papers of the benchmark families (one per family with reported numbers), in the catalog's order."""
    return tuple(name for name in REPORTED_FILES if name != "mteb")

#: names a user or a retriever may give a model -> the key models are aligned on
#: (lower-case Hugging Face id; ``bm25`` for BM25, which has no model id)
MODEL_ALIASES = {
    "bm25": "bm25",
    "bm25s": "bm25",
    "all-minilm-l6-v2": "sentence-transformers/all-minilm-l6-v2",
    "minilm": "sentence-transformers/all-minilm-l6-v2",
}

#: model keys of IFIR's hybrid rows look like ``hybrid:gritlm/gritlm-7b+bm25``
HYBRID_PREFIX = "hybrid:"

#: measure names as sources spell them -> the kit's names (ir-measures style): ranx's and MTEB's, and the papers' own
_MEASURE_NAMES = {**LOWER_CASE_NAMES, "robustness": "Robustness", "instfol": "InstFol"}

#: IFIR table name -> the variant of the system it reports (None: the plain model)
_IFIR_VARIANTS = {
    "Table 8 (hybrid retrieval with BM25)": "hybrid with BM25 (RRF)",
    "Table 9 (no model prompt)": "no model prompt",
    "Table 9 (with model's own task prompt)": "model's own task prompt",
}

_INSTRUCTIR_SETTINGS = {
    "main": "instructed",
    "secondary_promptriever_table2": "instructed",
    "secondary_promptriever_table2_reranking": "instructed",
}


def _form_names() -> set[str]:
    """Every family's instance forms (FollowIR's ``og``, ``changed``): a measure on one form is its own number."""
    specs = (catalog.family(name) for name in catalog.families())
    return {form for spec in specs if spec.forms for form in spec.forms.names}


def canonical_measure(name: str) -> tuple[str, str]:
    """Split a measure name into its canonical base and variant: ``"MRR@20"`` ->
    ``("RR@20", "")``, ``"nDCG@20[ifir-native]"`` -> ``("nDCG@20", "ifir-native")``,
    ``"ndcg_at_20"`` -> ``("nDCG@20", "")``, ``"Robustness@10"`` (the metrics table's and
    InstructIR's name) and the older spelling ``"Robustness(nDCG@10)"`` -> ``("Robustness@10", "")``.
    A FollowIR half stays part of the measure (``"AP@1000[og]"`` -> ``("AP@1000[og]", "")``): it
    is another number than the measure over both halves. Unknown names come back unchanged."""
    text = str(name).strip()
    variant = ""
    bracket = re.fullmatch(r"(.*?)\s*\[(.+)\]", text)
    if bracket:
        text, variant = bracket.group(1), bracket.group(2).strip()
        if variant in _form_names():
            return f"{canonical_measure(text)[0]}[{variant}]", ""
    robust = re.fullmatch(r"Robustness\((.+)\)", text)
    if robust:
        inner, _ = canonical_measure(robust.group(1))
        return (inner.replace("nDCG@", "Robustness@") if inner.startswith("nDCG@") else text), variant
    head, cutoff = split_cutoff(text)
    if cutoff and cutoff.isascii() and cutoff.isdigit() and head.lower() in _MEASURE_NAMES:
        return f"{_MEASURE_NAMES[head.lower()]}@{cutoff}", variant
    return text, variant


def model_key(name: object, model_map: Mapping[str, str] | None = None) -> str:
    """The key a model is aligned on: its lower-case Hugging Face id (``bm25`` for BM25).

    Accepts paper names (``GTR-XL``), Hugging Face ids in any case, retriever names that
    end in an id (``dense:sentence-transformers/all-MiniLM-L6-v2``) and the aliases in
    :data:`MODEL_ALIASES`; ``model_map`` adds the caller's own names first. IFIR's hybrid
    systems have keys ``hybrid:<dense key>+bm25``, which are kept as they are.
    """
    if name is None or (isinstance(name, float) and pd.isna(name)):
        return ""
    text = str(name).strip()
    if model_map and text in model_map:
        text = str(model_map[text]).strip()
    low = text.lower()
    if low in MODEL_ALIASES:
        return MODEL_ALIASES[low]
    by_paper_name = _paper_name_keys()
    if low in by_paper_name:
        return by_paper_name[low]
    if ":" in low and not low.startswith(HYBRID_PREFIX) and "/" in low.rsplit(":", 1)[1]:
        return model_key(low.rsplit(":", 1)[1])
    return low


@cache
def _paper_name_keys() -> dict[str, str]:
    """Lower-case paper model names -> model keys, from the reported tables themselves."""
    keys: dict[str, str] = {}
    # IFIR's table first: a name several papers print keeps IFIR's id ("Contriever"; FollowIR's rows
    # carry their own ids, which _shape_followir keys them by)
    for paper in sorted(family_papers(), key=lambda p: (p != "ifir", p != "instructir")):
        raw = _read_csv(paper)
        for model, hf_id in raw[["model", "model_hf_id"]].dropna(subset=["model"]).itertuples(index=False):
            key = str(hf_id).lower() if isinstance(hf_id, str) and hf_id else str(model).lower()
            keys.setdefault(str(model).lower(), MODEL_ALIASES.get(key, key))
    return keys


def paper_models(paper: str = "ifir") -> pd.DataFrame:
    """The models a paper reports, one row per paper name: ``model`` (as printed),
    ``model_hf_id`` (empty for BM25; ``openai:…`` for API models), ``model_key``."""
    raw = _read_csv(paper)
    id_col = "model_hf_id" if "model_hf_id" in raw.columns else "model"  # MTEB names models by id
    models = raw.dropna(subset=["model"]).drop_duplicates(subset=["model"])
    out = pd.DataFrame({
        "model": models["model"].astype(str),
        "model_hf_id": models[id_col].fillna("").astype(str),
    })
    # by the paper's own id where it gives one: a name two papers print for two models (FollowIR's "Contriever" is
    # contriever-msmarco, IFIR's facebook/contriever) keys as that paper's rows do (load_reported)
    out["model_key"] = [model_key(i or m) for m, i in zip(out["model"], out["model_hf_id"])]
    return out.reset_index(drop=True)


def paper_names_for(model: str, paper: str = "ifir") -> list[str]:
    """Every name a paper prints for a model given by HF id, paper name or alias (IFIR calls
    e5-mistral both ``E5-mistral-7B`` and ``E5-mistral-7b-inst``)."""
    key = model_key(model)
    models = paper_models(paper)
    return models.loc[models["model_key"] == key, "model"].tolist()


def load_reported(paper: str) -> pd.DataFrame:
    """Reported numbers of ``paper`` (a family's, :func:`family_papers`, or ``"mteb"``).

    Every CSV column is kept (``value`` becomes a float, the printed text stays in
    ``value_printed``). Added columns: ``paper``; ``benchmark`` (``ifir``, ``instructir`` or
    ``followir``); ``subset_id`` (kit subset id, ``avg`` for the paper's Average, empty for
    InstructIR); ``level`` (nullable int, NA = pooled over levels); ``measure`` and
    ``variant`` (canonical measure name, e.g. ``RR@20`` for the printed ``MRR@20``);
    ``setting`` (``instructed``/``query-only``, empty for statistics); ``scale`` (printed
    units per unit: 100 for percentages and InstructIR's 0-100 scores, else 1);
    ``rounding`` (half the printed step, in printed units); ``table`` (for MTEB: the
    task); ``secondary`` (True when the number does not come from the paper itself);
    ``reference`` (who printed it); ``source`` (URL or repository path); ``model_key``
    (see :func:`model_key`).
    """
    return _shaped(paper).copy()


@catalog.remembered  # the subsets' printed names, the MTEB tasks and the instance forms come from the families;
def _shaped(paper: str) -> pd.DataFrame:  # the coverage and the compare stage ask for each table many times per page
    raw = _read_csv(paper)
    builders = {"ifir": _shape_ifir, "instructir": _shape_instructir, "followir": _shape_followir, "mteb": _shape_mteb}
    return _with_values(builders[paper](raw), raw, paper)


def _with_values(out: pd.DataFrame, raw: pd.DataFrame, paper: str) -> pd.DataFrame:
    """``out`` (shaped from ``raw``) with its ``paper``, ``value`` (a float; ``value_printed`` the
    text) and ``rounding`` (half the printed step) columns."""
    out.insert(0, "paper", paper)
    out["value_printed"] = raw["value"].astype(str)
    out["value"] = pd.to_numeric(out["value_printed"].str.replace(",", "", regex=False))
    out["rounding"] = [0.5 * 10.0 ** -_decimals(v) for v in out["value_printed"]]
    return out


@cache
def _read_csv(paper: str) -> pd.DataFrame:
    """The packaged CSV as read (cached; callers copy before changing it)."""
    if paper not in REPORTED_FILES:
        raise ValueError(f"unknown paper {paper!r}; choose one of {sorted(REPORTED_FILES)}")
    with resources.files("instir.papers").joinpath("reported", REPORTED_FILES[paper]).open("rb") as fh:
        return pd.read_csv(fh, dtype={"value": str})


def _decimals(printed: str) -> int:
    return len(printed.split(".", 1)[1]) if "." in printed else 0


def _shape_ifir(raw: pd.DataFrame) -> pd.DataFrame:
    out = raw.copy()
    out["benchmark"] = "ifir"
    printed = {sub.printed: sub.id for sub in catalog.family("ifir").subsets.values()}
    out["subset_id"] = out["subset"].map({**printed, "avg": "avg", "all": "all"}).fillna("")  # summaries as printed
    out["level"] = out["instruction_level"].astype("Int64")
    measures = [canonical_measure(m) for m in out["metric"]]
    out["measure"] = [m for m, _ in measures]
    out["variant"] = out["table"].map(_IFIR_VARIANTS).fillna("")
    is_score = out["model"].notna()
    out["setting"] = is_score.map({True: "instructed", False: ""})
    out["scale"] = out["measure"].str.startswith("InstFol").map({True: 100.0, False: 1.0})
    out["secondary"] = False
    out["reference"] = "IFIR paper (arXiv:2503.04644v1), " + out["table"]
    out["source"] = out["source_url"]
    hybrid = out["variant"].str.startswith("hybrid")
    keys = [model_key(m) for m in out["model"]]
    out["model_key"] = [f"{HYBRID_PREFIX}{k}+bm25" if h else k for k, h in zip(keys, hybrid)]
    return out


def _shape_instructir(raw: pd.DataFrame) -> pd.DataFrame:
    out = raw.copy()
    out["benchmark"] = "instructir"
    out["subset_id"] = ""
    out["level"] = pd.array([pd.NA] * len(out), dtype="Int64")
    out["measure"] = [canonical_measure(m)[0] for m in out["metric"]]
    out["variant"] = out["setting"].str.endswith("_reranking").map({True: "reranker", False: ""})
    out["setting"] = out["setting"].map(_INSTRUCTIR_SETTINGS).fillna("")
    is_score = out["measure"].isin(["nDCG@10", "Robustness@10"])
    out["scale"] = is_score.map({True: 100.0, False: 1.0})
    from_paper = out["source_url"].str.contains("arxiv.org/abs/2402.14334", regex=False)
    out["secondary"] = ~from_paper
    out["reference"] = out["table"]
    out["source"] = out["source_url"]
    out["model_key"] = [model_key(m) for m in out["model"]]
    return out


def _shape_followir(raw: pd.DataFrame) -> pd.DataFrame:
    out = raw.copy()
    out["benchmark"] = "followir"
    out["subset_id"] = out["subset"].replace({"average": "avg"})
    out["level"] = pd.array([pd.NA] * len(out), dtype="Int64")
    # the paper's MAP@1000 and nDCG@5 are scored on the original instructions only (its footnote 6)
    out["measure"] = [m if m == "p-MRR" or m.startswith("Score") else f"{canonical_measure(m)[0]}[og]"
                      for m in out["metric"]]
    out["variant"] = ""
    out["setting"] = "instructed"
    out["scale"] = 100.0
    out["secondary"] = False
    out["reference"] = "FollowIR paper (arXiv:2403.15246v3), " + out["table"]
    out["source"] = out["source_url"]
    out["model_key"] = [model_key(i if isinstance(i, str) and i else m) for m, i in zip(out["model"],
                                                                                       out["model_hf_id"])]
    return out


def _shape_mteb(raw: pd.DataFrame) -> pd.DataFrame:
    out = raw.copy()
    tasks = catalog.mteb_tasks()
    task = out["task"].astype(str).str.partition("[")[0]  # a legacy task is named "<task>[<note>]"
    out["benchmark"] = task.map({name: t.family for name, t in tasks.items()}).fillna("")
    out["subset_id"] = task.map({name: t.subset for name, t in tasks.items()}).fillna("")
    levels = out["metric"].str.extract(r"_level_(\d)$")[0]
    out["level"] = pd.to_numeric(levels).astype("Int64")
    base = (out["metric"].str.replace(r"_level_\d$", "", regex=True)
            .str.replace(r"^NDCG@10 \(.*$", "ndcg_at_10", regex=True))  # legacy "NDCG@10 (with … instruction)"
    out["measure"] = [canonical_measure(m)[0] for m in base]
    out["variant"] = ""
    without = out["metric"].str.contains("without instruction", regex=False)
    out["setting"] = without.map({True: "query-only", False: "instructed"})
    out["scale"] = 1.0
    out["secondary"] = True
    out["table"] = "MTEB results store, " + out["task"]
    out["reference"] = "MTEB results store (embeddings-benchmark/results), " + out["task"]
    out["source"] = out["source_path"]
    out["model_hf_id"] = out["model"]
    out["model_key"] = [model_key(m) for m in out["model"]]
    return out


#: keys of a TaskResult's scores that are no measure (``TaskResult.from_task_results``)
_NOT_MEASURES = frozenset({"hf_subset", "languages", "mteb_version", "accuracy", "previous_results_model_meta"})


def _task_result_files(paths: Iterable[str | Path]) -> list[Path]:
    """The result files named by ``paths``: files as given, and in folders (recursively) every
    ``<task>.json`` of a task the catalog knows (MTEB's other tasks and ``model_meta.json``
    are none of the kit's)."""
    tasks = catalog.mteb_tasks()
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            found = sorted(f for f in p.rglob("*.json") if f.stem in tasks)
            if not found:
                examples = ", ".join(f"{t}.json" for t in list(tasks)[:3])
                raise FormatError(p, None, None, "no MTEB result file of an InstructIR, IFIR or FollowIR task in this "
                                                 f"folder (<task>.json: {examples} …)")
            files += found
        else:
            problem = file_problem(p)
            if problem is not None:
                raise FormatError(p, None, None, f"MTEB result file or folder {problem}")
            files.append(p)
    return files


def _result_model(path: Path, model: str | None) -> str:
    """The model of a result file: ``model``, else ``model_meta.json``'s ``name`` beside it, else
    the folder ``results/<model with __>/<revision>/`` it sits in (as MTEB's ``ResultCache``
    reads it)."""
    if model:
        return model
    meta = path.parent / "model_meta.json"
    if meta.is_file():
        try:
            name = json.loads(read_text(meta)).get("name")
        except (json.JSONDecodeError, AttributeError):
            raise FormatError(meta, None, "name", "not a JSON object with the model's name") from None
        if isinstance(name, str) and name:
            return name
    if len(path.parents) >= 2 and path.parents[1].name not in ("", "results"):
        return path.parents[1].name.replace("__", "/")
    raise FormatError(path, None, None, "no model name: no model_meta.json beside it and not in MTEB's "
                                        "results/<model>/<revision>/ layout (pass the model's name)")


def _task_result_rows(path: Path, model: str | None) -> list[dict]:
    """Rows (``task``, ``model``, ``metric``, ``value``, ``source_path``) of one result file."""
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as err:
        raise FormatError(path, err.lineno, None, f"not valid JSON: {err.msg} (column {err.colno})") from None
    except RecursionError:
        raise FormatError(path, None, None, TOO_DEEP) from None
    if not isinstance(data, dict) or not isinstance(data.get("scores"), dict):
        raise FormatError(path, None, "scores", 'expected an MTEB TaskResult {"task_name": …, "scores": {split: '
                                                "[{measure: value, …}]}, …}")
    task = data.get("task_name")
    tasks = catalog.mteb_tasks()
    if task not in tasks:
        raise FormatError(path, None, "task_name", f"{task!r} is not an InstructIR, IFIR or FollowIR task of MTEB "
                                                   f"(known: {', '.join(tasks)})")
    if path.stem in tasks and path.stem != task:  # MTEB names each result file after its task
        raise FormatError(path, None, "task_name", f"{task!r} in the file of {path.stem}")
    pinned, given = tasks[task].revision, str(data.get("dataset_revision") or "")
    if pinned and given and not (given.startswith(pinned) or pinned.startswith(given)):
        raise FormatError(path, None, "dataset_revision", f"{given!r} is not the revision of {task} the kit compares "
                                                          f"with ({pinned}): its scores are of other data")
    split = data["scores"].get("test")
    if not isinstance(split, list):
        raise FormatError(path, "scores", "test", "expected a list of score objects (MTEB 1.11's layout or later)")
    entries = [e for e in split if isinstance(e, dict) and e.get("hf_subset", "default") == "default"]
    if len(entries) != 1:
        raise FormatError(path, "scores > test", "hf_subset", f"{len(entries) or 'no'} score objects for the subset "
                                                              "'default' (one is read)")
    entry = entries[0]
    languages = entry.get("languages")
    if isinstance(languages, list) and languages and "eng-Latn" not in languages:  # the tasks are English
        raise FormatError(path, "scores > test > default", "languages", f"{quoted(languages)}: not the English task")
    name = _result_model(path, model)
    source = (f"{path} (MTEB result file: dataset_revision={data.get('dataset_revision')}, "
              f"mteb {data.get('mteb_version')})")
    main = tasks[task].main_score
    flat: dict[str, object] = {}
    for key, value in entry.items():
        if key == "level_scores" and isinstance(value, dict):
            flat.update({f"{main}_{level}": v for level, v in value.items()})
        elif key == "main_score":
            flat[f"main_score({main})"] = value
        elif key not in _NOT_MEASURES and not key.startswith("nauc_"):
            flat[key] = value
    rows = []
    for metric, value in flat.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            continue
        low = -1 if "p-mrr" in metric.lower().replace("_", "-") else 0  # p-MRR lies in [-1, 1], the rest in [0, 1]
        if not low <= value <= 1:  # 5.0 was printed as a reported 500.00
            raise FormatError(path, "scores > test > default", metric,
                              f"{value!r} is no score: MTEB stores fractions from {low} to 1")
        rows.append({"task": task, "model": name, "metric": metric, "value": repr(float(value)),
                     "source_path": source})
    if not rows:  # every score NaN or not a number: a KeyError in the table's shaping
        raise FormatError(path, "scores > test > default", None, "no score that is a finite number")
    return rows


def load_mteb_results(paths: Iterable[str | Path], model: str | None = None) -> pd.DataFrame:
    """MTEB ``TaskResult`` files (``<task>.json``, as ``mteb.evaluate`` writes them to its results
    cache: ``results/<model with __>/<revision>/<task>.json`` beside ``model_meta.json``) of the
    InstructIR, IFIR and FollowIR tasks, in the layout of :func:`load_reported` ``("mteb")`` so they sit
    beside the papers' numbers in :func:`instir.papers.compare_to_papers`. ``paths`` are files or folders
    (searched recursively for the tasks' files); ``model`` names the model when the files do not
    say it. Measures are read from the test split's ``default`` subset as MTEB stored them
    (``TaskResult.to_disk`` rounds to 6 decimals); ``level_scores`` become ``<main>_level_<n>``
    and ``main_score`` ``main_score(<main>)``, as in the bundled results-store table; ``nAUC``
    and ``accuracy`` are left out. A file that is not a TaskResult of these tasks is one
    :class:`~instir.benchmarks.types.FormatError` naming it and the field."""
    rows = [row for path in _task_result_files(paths) for row in _task_result_rows(path, model)]
    raw = pd.DataFrame(rows, columns=["task", "model", "metric", "value", "source_path"])
    out = _with_values(_shape_mteb(raw), raw, "mteb")
    out["table"] = "MTEB result file, " + out["task"]
    out["reference"] = "MTEB result file, " + out["task"]
    return out
