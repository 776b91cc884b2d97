"""How far a judge can be trusted: its answers on (instruction, passage) pairs whose label is
known from the benchmark's own relevance judgments.

Gold labels (:func:`gold_pairs`), per instance:

``relevant``       the passage is relevant to this instance (grade > 0 in its qrels);
``sibling``        it is relevant only to a sibling: on IFIR, relevant at another level of the
                   same query, or one of the query's candidate passages that this instance's
                   ``rel`` leaves out (when the loader lists candidates in
                   ``Benchmark.meta["candidates"]``, ``{group: [doc ids]}``); on InstructIR, the
                   target of another instruction of the same query group;
``not_relevant``   a corpus passage labelled for no instance of the query group, drawn at random
                   (easy negatives: they show whether a judge separates topics, while the
                   sibling stratum shows whether it reads the instruction).

The sample is stratified by (subset, level, label), ``per_stratum`` pairs each, with a fixed
seed. Judge labels come from the rubric ladder (:func:`judge_grade`): all steps met = relevant,
none = not relevant, some = sibling (only relevant to a looser version of the instruction); a
level-1 rubric has no middle step. :func:`agreement` compares them with the gold labels, failed
judgments left out and counted; :func:`ranking_agreement` gives Kendall's tau between the system
rankings of a judge-based score (e.g. InstFol) and of gold nDCG.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from instir.benchmarks.types import Benchmark
from instir.errors import expect
from instir.judge.following import stratum_rng
from instir.judge.outcomes import judge_each, judgment_counts, judgment_frame
from instir.judge.rubrics import rubric_for
from instir.judge.types import LABELS, Judge, JudgeRequest
from instir.parameters import count_within

GRADE = {label: grade for grade, label in enumerate(LABELS)}

#: Tries per wanted not-relevant pair before a stratum is left short (tiny corpora).
_NEGATIVE_TRIES = 50

#: Pairs per stratum at most: each is a judgment (paid, with an API), and a stratum the corpus
#: cannot fill costs :data:`_NEGATIVE_TRIES` draws per pair wanted.
MAX_PER_STRATUM = 10_000


def check_per_stratum(value: object, what: str = "per_stratum") -> int:
    """``value`` when it is a whole number from 1 to :data:`MAX_PER_STRATUM`, else a :class:`UsageError`
    naming ``what`` (10^23 drew negatives for ever)."""
    return count_within(value, 1, MAX_PER_STRATUM, what)


def gold_pairs(benchmark: Benchmark, per_stratum: int = 20, seed: int = 0) -> pd.DataFrame:
    """A stratified sample of labelled (instance, passage) pairs from ``benchmark``.

    Columns: ``qid``, ``docid``, ``subset`` (the benchmark name where queries have none),
    ``level``, ``label`` (see the module docstring) and ``grade`` (0, 1, 2). At most
    ``per_stratum`` pairs per (subset, level, label); a stratum with fewer pairs takes them all.
    """
    check_per_stratum(per_stratum)
    in_corpus = benchmark.corpus.id_set()  # a relevant id may lack text (IFIR skips empty documents)
    relevant = {qid: {d for d, g in rel.items() if g > 0 and d in in_corpus} for qid, rel in benchmark.qrels.items()}
    candidates: Mapping[str, list[str]] = benchmark.meta.get("candidates") or {}
    labelled: dict[str, set[str]] = {}
    for group, qids in benchmark.groups().items():
        labelled[group] = (set(candidates.get(group, ())) & in_corpus).union(*(relevant.get(q, set()) for q in qids))

    pools: dict[tuple, list[tuple[str, str]]] = {}
    instances: dict[tuple, list[str]] = {}
    for q in benchmark.queries.values():
        key = (q.subset or benchmark.name, q.level)
        instances.setdefault(key, []).append(q.id)
        own = relevant.get(q.id, set())
        pools.setdefault((*key, "relevant"), []).extend((q.id, d) for d in sorted(own))
        pools.setdefault((*key, "sibling"), []).extend((q.id, d) for d in sorted(labelled[q.group] - own))

    rows = []
    for (subset, level, label), pool in sorted(pools.items(), key=lambda item: str(item[0])):
        take = min(per_stratum, len(pool))
        for j in sorted(stratum_rng(seed, (subset, level, label)).choice(len(pool), take, replace=False)):
            rows.append((*pool[j], subset, level, label))
    doc_ids = benchmark.corpus.ids()
    for key, qids in sorted(instances.items(), key=lambda item: str(item[0])):
        rng = stratum_rng(seed, (*key, "not_relevant"))
        chosen: set[tuple[str, str]] = set()
        for _ in range(per_stratum * _NEGATIVE_TRIES):
            if len(chosen) == per_stratum:
                break
            qid = qids[rng.integers(len(qids))]
            docid = doc_ids[rng.integers(len(doc_ids))]
            if docid not in labelled[benchmark.queries[qid].group]:
                chosen.add((qid, docid))
        rows.extend((qid, docid, *key, "not_relevant") for qid, docid in sorted(chosen))
    out = pd.DataFrame(rows, columns=["qid", "docid", "subset", "level", "label"])
    out["level"] = out["level"].astype("Int64")
    out["grade"] = out["label"].map(GRADE).astype("int64")
    return out


def judge_grade(score: int, max_score: int) -> int:
    """A rubric score as a gold-comparable grade: 2 when every ladder step is met, 0 when none
    is, 1 in between."""
    return 2 if score >= max_score else 0 if score <= 0 else 1


@dataclass
class ValidationResult:
    """Judged gold pairs and the statistics drawn from them.

    ``pairs``: the gold pairs plus :data:`~instir.judge.outcomes.JUDGMENT_COLUMNS`,
    ``max_score``, ``norm`` (weighted / max_score) and ``judge_grade``. ``agreement``: one row per
    statistic (:func:`agreement`). ``confusion``: gold label (rows) by judge label (columns) over
    the successful judgments.
    """

    pairs: pd.DataFrame
    agreement: pd.DataFrame
    confusion: pd.DataFrame
    meta: dict = field(default_factory=dict)


def validate_judge(benchmark: Benchmark, judge: Judge | str, pairs: pd.DataFrame | None = None, *,
                   per_stratum: int = 20, seed: int = 0) -> ValidationResult:
    """Judge gold pairs (``pairs``, or :func:`gold_pairs` of ``benchmark``) and compare the
    answers with the gold labels. Each pair is judged against its instance's query and
    instruction on the instance's rubric; identical requests are judged once. ``judge`` may be a
    backend name (``"baseline"``), as :func:`~instir.judge.following.instfol` takes it."""
    from instir.judge.factory import as_judge

    expect(benchmark, Benchmark, "validate_judge(benchmark, judge)")
    judge = as_judge(judge)
    if pairs is None:
        pairs = gold_pairs(benchmark, per_stratum=per_stratum, seed=seed)
    docs = benchmark.corpus.get(set(pairs["docid"]))
    requests = [JudgeRequest.for_instance(benchmark.queries[q], docs[d]) if d in docs else None
                for q, d in zip(pairs["qid"], pairs["docid"])]
    picked, judgments = judge_each(judge, requests, "document not in the corpus")
    out = judgment_frame(pairs, picked).assign(max_score=[rubric_for(benchmark.queries[q].subset,
                                                                     benchmark.queries[q].level).max_score
                                                          for q in pairs["qid"]])
    out["norm"] = out["weighted"] / out["max_score"]
    out["judge_grade"] = pd.array([judge_grade(j.score, m) if j.ok else None for j, m in zip(picked, out["max_score"])],
                                  dtype="Int64")
    meta = {"benchmark": benchmark.name, "sample": benchmark.is_sample,
            "judge": {"name": judge.name, "model": judge.model},
            "per_stratum": per_stratum, "seed": seed, "unique_requests": len(judgments), **judgment_counts(judgments)}
    return ValidationResult(pairs=out, agreement=agreement(out), confusion=confusion(out), meta=meta)


def _varies(*columns: np.ndarray) -> bool:
    return all(len(np.unique(c)) > 1 for c in columns)


def agreement(pairs: pd.DataFrame) -> pd.DataFrame:
    """Agreement statistics of judged pairs (columns ``grade``, ``judge_grade``, ``norm``,
    ``error``, ``weighting``, ``latency_s``, ``cost``, ``from_cache``) as rows ``statistic, value, n``.

    Computed on the successful judgments (``n`` of them): Cohen's kappa on binarised labels
    (relevant vs the rest) and on graded labels (linear weights: the labels are ordered);
    Pearson and Spearman correlation and ROC AUC of ``norm`` against the gold grade or relevance;
    ``parsed_share``, the share weighted by the parsed integer alone (``weighting="parsed"``). A
    statistic that is undefined on the data (one class only, a constant score) is NaN. Latency is
    the mean over judgments made now (not read from the cache); cost sums them where the backend
    reports cost.
    """
    from scipy import stats  # scipy and scikit-learn only where agreement is computed: instir evaluate imports this
    from sklearn.metrics import cohen_kappa_score, roc_auc_score  # module (through the compare stage) in 1.9 s else

    ok = pairs["error"].isna() & pairs["norm"].notna()
    good = pairs[ok]
    gold = good["grade"].to_numpy(dtype=int)
    graded = good["judge_grade"].to_numpy(dtype=int)
    norm = good["norm"].to_numpy(dtype=float)
    gold_bin = (gold == GRADE["relevant"]).astype(int)
    judge_bin = (graded == GRADE["relevant"]).astype(int)
    n = len(good)
    nan = math.nan
    errors = pairs["error"].dropna().astype(str)
    fresh = pairs[~pairs["from_cache"].astype(bool)]
    costs = fresh["cost"].dropna()
    rows = [
        ("pairs", float(len(pairs)), len(pairs)),
        ("failure_rate", float((~ok).mean()) if len(pairs) else nan, len(pairs)),
        ("parse_failure_rate", float(errors.str.startswith("malformed").sum() / len(pairs)) if len(pairs) else nan,
         len(pairs)),
        ("parsed_share", float((good["weighting"] == "parsed").mean()) if n else nan, n),
        ("kappa_binary", float(cohen_kappa_score(gold_bin, judge_bin))
         if _varies(np.r_[gold_bin, judge_bin]) else nan, n),
        ("kappa_graded_linear", float(cohen_kappa_score(gold, graded, weights="linear"))
         if _varies(np.r_[gold, graded]) else nan, n),
        ("pearson_r", float(stats.pearsonr(norm, gold).statistic) if n > 1 and _varies(norm, gold) else nan, n),
        ("spearman_rho", float(stats.spearmanr(norm, gold).statistic) if n > 1 and _varies(norm, gold) else nan, n),
        ("roc_auc", float(roc_auc_score(gold_bin, norm)) if _varies(gold_bin) else nan, n),
        ("mean_latency_s", float(fresh["latency_s"].mean()) if len(fresh) else nan, len(fresh)),
        ("cost", float(costs.sum()) if len(costs) else nan, len(costs)),
    ]
    return pd.DataFrame(rows, columns=["statistic", "value", "n"])


def confusion(pairs: pd.DataFrame) -> pd.DataFrame:
    """Gold label (rows) by judge label (columns), counts over the successful judgments."""
    from sklearn.metrics import confusion_matrix

    good = pairs[pairs["error"].isna() & pairs["judge_grade"].notna()]
    matrix = (confusion_matrix(good["grade"].to_numpy(dtype=int), good["judge_grade"].to_numpy(dtype=int),
                               labels=list(range(len(LABELS))))
              if len(good) else np.zeros((len(LABELS), len(LABELS)), dtype=int))  # every judgment failed
    return pd.DataFrame(matrix, index=pd.Index(LABELS, name="gold"), columns=pd.Index(LABELS, name="judge"))


#: below this many successful judgments the agreement figures are said to be a rough indication (at 100 pairs,
#: half of them relevant, ROC AUC's standard error is still about 0.03-0.05)
FEW_PAIRS = 100


def describe_agreement(rows: pd.DataFrame) -> str:
    """One Markdown sentence on :func:`agreement` rows (``statistic``, ``value``, ``n``): ROC AUC
    and binary kappa on how many successful judgments, each figure read for the reader; a
    statistic the data leave undefined (one class only) is said to be so, and figures from fewer than
    100 judgments (:data:`FEW_PAIRS`) a rough indication. Empty when no judgment succeeded: then there is nothing to
    state but the failures."""
    value = rows.set_index("statistic")["value"]
    n = int(rows.set_index("statistic").loc["roc_auc", "n"])
    if n == 0:
        return ""

    def shown(name: str) -> str:
        return "undefined (one class only)" if pd.isna(value[name]) else f"{value[name]:.2f}"

    caution = (" These are few pairs: treat the figures as a rough indication, not a measurement."
               if n < FEW_PAIRS else "")
    return (f"On {n} successfully judged of {int(value['pairs'])} labelled pairs this judge reaches ROC AUC "
            f"{shown('roc_auc')} (0.5 is chance, 1 is perfect separation of relevant from other passages) and "
            f"Cohen's kappa {shown('kappa_binary')} on relevant-vs-rest (0 is chance agreement).{caution}")


def ranking_agreement(judge_scores: Mapping[str, float], gold_scores: Mapping[str, float]) -> dict:
    """Kendall's tau (tau-b, ties allowed) between the system ranking by a judge-based score
    (e.g. InstFol per run) and by a gold measure (e.g. nDCG@20), over the systems in both.
    Returns ``tau``, ``p_value`` and ``systems``; needs at least two systems."""
    from scipy import stats

    systems = sorted(set(judge_scores) & set(gold_scores))
    if len(systems) < 2:
        raise ValueError(f"Kendall's tau needs at least two systems scored both ways, got {systems}")
    result = stats.kendalltau([judge_scores[s] for s in systems], [gold_scores[s] for s in systems])
    return {"tau": float(result.statistic), "p_value": float(result.pvalue), "systems": systems}
