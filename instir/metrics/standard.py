"""Standard IR measures (nDCG@k, RR@k, R@k, P@k, …) through ir-measures' pytrec_eval
provider (the maintained ``pytrec-eval-terrier``, i.e. trec_eval's own code).

The aggregation rule, the same everywhere in the kit: every query of the qrels with at least one
relevant document (grade > 0) is averaged, and one with no retrieved documents scores 0; queries
of the run outside the qrels are ignored (``check_run_ids`` reports them). trec_eval averages
over the queries of both run and qrels, and it and ir-measures average in the queries judged all
non-relevant as 0; the kit drops those (``Evaluator.excluded``): no system can score on them, so
they would only pull every mean towards 0. Documents are in trec_eval's order
(:mod:`instir.retrieval.runs`); a bare frame's ``rank`` column is not used.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import islice
from typing import Union

import ir_measures
import numpy as np
import pandas as pd
from ir_measures.measures.base import Measure

from instir.benchmarks.types import Qrels, quoted
from instir.errors import UsageError
from instir.metrics.measures import Standard, parse_measures, uncut
from instir.retrieval.runs import Run

RunLike = Union[Run, pd.DataFrame]
#: Measures that, given a cutoff k, look at nothing below rank k (trec_eval's P_k, recall_k,
#: ndcg_cut_k, map_cut_k, success_k, and RR@k above): the run can be pruned to its top k.
_TOP_K_LOCAL = frozenset({"P", "R", "nDCG", "AP", "Success", "RR"})


def run_frame(run: RunLike) -> pd.DataFrame:
    """A Run's own frame (typed and checked when the Run was made, ``rank`` included), or the
    ``qid``/``docid``/``score`` columns of any other run as str/str/float. Raises
    ``ValueError`` on missing columns or NaN scores."""
    if isinstance(run, Run):
        return run.df
    df = run.df if hasattr(run, "df") else run
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"expected a Run or a pandas DataFrame, got {type(run).__name__}")
    missing = [c for c in ("qid", "docid", "score") if c not in df.columns]
    if missing:
        raise ValueError(f"run is missing column(s) {missing} (has {list(df.columns)})")
    out = pd.DataFrame({
        "qid": df["qid"].astype(str),
        "docid": df["docid"].astype(str),
        "score": df["score"].astype(float),
    })
    if out["score"].isna().any():
        raise ValueError("run has NaN scores")
    return out


def top_candidates(frame: pd.DataFrame, k: int) -> pd.DataFrame:
    """Rows of a run frame whose score is at least the k-th best score of their query: a
    superset of every query's top k whatever the tie-break (ties at rank k are all kept).
    Scores compare at float32 precision, as trec_eval reads them. A cheap numeric
    pre-filter before sorting strings or building dicts; a run already laid out query by
    query with non-increasing scores (as retrievers write them) is not re-sorted."""
    codes, uniques = pd.factorize(frame["qid"])
    scores = frame["score"].to_numpy().astype(np.float32)
    same = codes[1:] == codes[:-1]
    laid_out = bool(np.all(codes[1:] >= codes[:-1]) and np.all(scores[1:][same] <= scores[:-1][same]))
    order = np.arange(len(codes)) if laid_out else np.lexsort((-scores, codes))
    grouped = codes[order]
    position = np.arange(len(order)) - np.searchsorted(grouped, grouped, side="left")
    kth = np.full(len(uniques), -np.inf, dtype=np.float32)
    at_k = position == k - 1
    kth[grouped[at_k]] = scores[order][at_k]
    return frame[scores >= kth[codes]]


def ranked(run: RunLike, k: int | None = None) -> pd.DataFrame:
    """The run in trec_eval's order with 1-based ``rank`` (a :class:`Run`'s own frame, or a
    bare frame put into that order by ``Run``); only the top ``k`` per query if given."""
    if isinstance(run, Run):
        df = run.df
    else:
        frame = run_frame(run)
        df = Run(top_candidates(frame, k) if k is not None else frame).df
    return df[df["rank"] <= k].reset_index(drop=True) if k is not None else df


def run_dict(run: RunLike) -> dict[str, dict[str, float]]:
    """The run as ``{qid: {docid: score}}`` (pytrec_eval's input). Raises ``ValueError`` when
    a (qid, docid) pair occurs twice: a dict would silently keep only one of them."""
    df = run_frame(run)
    codes, qids = pd.factorize(df["qid"])
    docs, scores = df["docid"].to_numpy(dtype=object), df["score"].to_numpy()
    if not bool((codes[1:] >= codes[:-1]).all()):  # a query's rows apart (a Run's are together, in first-seen order)
        order = np.argsort(codes, kind="stable")
        codes, docs, scores = codes[order], docs[order], scores[order]
    # plain lists: slicing and iterating them is twice as fast as numpy's or Arrow's scalars
    bounds, docs, scores = np.searchsorted(codes, np.arange(len(qids) + 1)).tolist(), docs.tolist(), scores.tolist()
    out = {q: dict(zip(docs[a:b], scores[a:b])) for q, a, b in zip(qids.tolist(), bounds[:-1], bounds[1:])}
    if sum(map(len, out.values())) != len(df):
        dup = df[df.duplicated(["qid", "docid"])].iloc[0]
        raise ValueError(f"run lists document {quoted(dup['docid'])} more than once for query {quoted(dup['qid'])}")
    return out


def _trec(measure: object) -> Measure:
    """The ir_measures object of a standard measure (:class:`~instir.metrics.measures.Standard`)."""
    if not isinstance(measure, Standard):
        raise UsageError(f"{measure} is not a trec_eval measure (pytrec_eval computes nDCG@k, RR@k, R@k, P@k …)")
    return measure.measure


def relevant_queries(qrels: Qrels) -> list[str]:
    """Query ids with at least one relevant document (grade > 0): the averaged set."""
    return [q for q, docs in qrels.items() if any(g > 0 for g in docs.values())]


def labelled(metrics: Iterable[ir_measures.Metric], labels: Mapping[Measure, str]) -> list[tuple[str, str, float]]:
    """``(query id, label, value)`` of the metrics whose measure ``labels`` names. Each measure
    object is looked up once, not once per query (an ir_measures measure hashes by its repr)."""
    names: dict[int, str | None] = {}
    rows = []
    for m in metrics:
        if id(m.measure) not in names:
            names[id(m.measure)] = labels.get(m.measure)
        if (name := names[id(m.measure)]) is not None:
            rows.append((m.query_id, name, float(m.value)))
    return rows


def metric_rows(evaluator, run: dict[str, dict[str, float]],
                labels: Mapping[Measure, str]) -> list[tuple[str, str, float]]:
    """:func:`labelled` of ``evaluator.iter_calc(run)``: an ir_measures pytrec_eval evaluator's per-query values
    read straight from pytrec_eval's answer, as its ``iter_calc`` reads them (a measure's default, 0, for a query
    of the qrels the run does not answer), without a Metric and a set of (measure, query) pairs a value; any other
    evaluator through its ``iter_calc``."""
    invokers = getattr(evaluator, "invokers", None)
    if type(evaluator).__name__ != "PytrecEvalEvaluator" or not isinstance(invokers, list) or not all(
            hasattr(invoker, "evaluator") and isinstance(getattr(invoker, "measure_map", None), dict)
            for invoker in invokers):
        return labelled(evaluator.iter_calc(run), labels)
    rows = []
    answered: list[tuple[Measure, set[str]]] = []  # each measure pytrec_eval was asked, and the queries it answered
    for invoker in invokers:
        by_string = {text: (measure, labels.get(measure), set()) for text, (measure, _) in invoker.measure_map.items()}
        for qid, values in invoker.evaluator.evaluate(run).items():
            for text, value in values.items():
                _, name, seen = by_string[text]
                seen.add(qid)
                if name is not None:
                    rows.append((qid, name, float(value)))
        answered += [(measure, seen) for measure, _, seen in by_string.values()]
    for measure in evaluator.measures:
        if (name := labels.get(measure)) is not None:
            seen = set().union(*(qids for other, qids in answered if other == measure))
            rows += [(qid, name, float(measure.DEFAULT)) for qid in evaluator.qrel_qids if qid not in seen]
    return rows


class Evaluator:
    """Scores runs against one qrels with a fixed set of measures.

    Built once per qrels (pytrec_eval indexes the qrels when the evaluator is made), then
    applied to any number of runs. ``qids`` are the averaged queries, ``excluded`` those of
    the qrels without a relevant document (see the module docstring).
    """

    def __init__(self, qrels: Qrels, measures: Sequence[object]):
        self.measures = [_trec(m) for m in parse_measures(measures)]
        self.qids = relevant_queries(qrels)
        if not self.qids:
            raise ValueError("the qrels have no relevant document for any query: nothing to average")
        self.excluded = sorted(set(qrels) - set(self.qids))
        kept = {q: {d: int(g) for d, g in qrels[q].items()} for q in self.qids}
        direct = [m for m in self.measures if uncut(m) is m]
        self._direct = ir_measures.pytrec_eval.evaluator(direct, kept) if direct else None
        #: cutoff → (measure as labelled, cutoff-free measure) for the truncation path
        self._cut: dict[int, list[tuple[Measure, Measure]]] = {}
        for m in self.measures:
            if uncut(m) is not m:
                self._cut.setdefault(m["cutoff"], []).append((m, uncut(m)))
        cut_free = list(dict.fromkeys(u for pairs in self._cut.values() for _, u in pairs))
        self._uncut = ir_measures.pytrec_eval.evaluator(cut_free, kept) if cut_free else None
        #: how deep runs need to be read: the largest cutoff, or everything (None)
        local = all(m.NAME in _TOP_K_LOCAL and "cutoff" in m.params for m in self.measures)
        self.depth: int | None = max(m["cutoff"] for m in self.measures) if local else None

    @property
    def labels(self) -> list[str]:
        """Measure names as they appear in result frames (``str`` of the measure)."""
        return [str(m) for m in self.measures]

    def per_query(self, run: RunLike) -> pd.DataFrame:
        """One row per averaged query and measure: columns ``qid``, ``measure``, ``value``.
        Queries the run does not retrieve anything for get 0."""
        frame = run_frame(run)
        if isinstance(run, Run):  # its scores strictly decrease in a query: its top k are the rows ranked k or better
            keep = frame["qid"].isin(self.qids).to_numpy()
            if self.depth is not None:
                keep = keep & (frame["rank"].to_numpy() <= self.depth)
            frame = frame if keep.all() else frame[keep]  # no copy of a run that holds nothing else
        else:
            frame = frame[frame["qid"].isin(self.qids)]
            if self.depth is not None:
                frame = top_candidates(frame, self.depth)
        rows: list[tuple[str, str, float]] = []
        whole = run_dict(frame) if self._direct is not None else None
        if whole is not None:
            rows += metric_rows(self._direct, whole, {m: str(m) for m in self.measures})
        for cutoff, pairs in self._cut.items():
            # a Run's frame stays in trec_eval's order, its ranks intact, when whole queries and
            # each query's tail are dropped: its top k are the rows ranked k or better, the first k
            # of each query's documents in the run's dict (which keeps the frame's order)
            if isinstance(run, Run):
                top = {q: dict(islice(docs.items(), cutoff)) for q, docs in whole.items()} if whole is not None \
                    else run_dict(frame[frame["rank"] <= cutoff])
            else:
                top = run_dict(ranked(frame, cutoff))
            rows += metric_rows(self._uncut, top, {u: str(m) for m, u in pairs})
        out = pd.DataFrame(rows, columns=["qid", "measure", "value"])
        # Sort into a stable layout: measures in the order asked, queries in qrels order.
        out["measure"] = pd.Categorical(out["measure"], categories=self.labels)
        out["qid"] = pd.Categorical(out["qid"], categories=self.qids)
        out = out.sort_values(["measure", "qid"]).reset_index(drop=True)
        out["measure"] = out["measure"].astype(str)
        out["qid"] = out["qid"].astype(str)
        expected = len(self.qids) * len(self.measures)
        if len(out) != expected:
            raise RuntimeError(f"pytrec_eval returned {len(out)} values, expected {expected}")
        return out


def mean_by_measure(per_query: pd.DataFrame) -> dict[str, float]:
    """``{measure: mean value}`` of a per-query frame, measures in their order of appearance."""
    means = per_query.groupby("measure", sort=False)["value"].mean()
    return {str(k): float(v) for k, v in means.items()}
