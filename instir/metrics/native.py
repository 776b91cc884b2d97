"""IFIR-native nDCG@k and MRR@k (the IFIR authors' Elasticsearch path; nDCG's definition is
in docs/metrics.md): with binary qrels, IFIR's, never lower than standard nDCG@k, and equal when
every relevant document is in the top k. MRR@k: reciprocal rank of the first relevant document
in the top k (0 if none). Values are always labelled ``<measure>[ifir-native]`` so they are never
confused with the standard ``nDCG@20``. Averaged queries and document order follow
:mod:`instir.metrics.standard`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from instir.benchmarks.types import Qrels
from instir.metrics.measures import Native, parse_measure
from instir.metrics.standard import RunLike, ranked, relevant_queries, run_frame


def native_per_query(run: RunLike, qrels: Qrels, measures: Sequence[str] = ("nDCG@20", "RR@20")) -> pd.DataFrame:
    """Per-query IFIR-native values: columns ``qid``, ``measure`` (labelled), ``value``; one
    row per relevant-bearing qrels query and measure."""
    parsed = [Native(parse_measure(m)) for m in measures]
    qids = relevant_queries(qrels)
    depth = max(m.cutoff for m in parsed)
    frame = run_frame(run)
    top = ranked(frame[frame["qid"].isin(qids)], depth)
    judged = pd.DataFrame([(q, d) for q in qids for d, g in qrels[q].items() if g > 0], columns=["qid", "docid"])
    top = top.merge(judged.assign(rel=1.0), on=["qid", "docid"], how="left")
    top["rel"] = top["rel"].fillna(0.0)
    rows = []
    for measure in parsed:
        k = measure.cutoff
        cut = top[top["rank"] <= k]
        if measure.base.measure.NAME == "RR":
            value = (cut["rel"] / cut["rank"]).groupby(cut["qid"]).max()
        else:
            gain = cut["rel"] / np.log2(cut["rank"] + 1.0)
            dcg = gain.groupby(cut["qid"]).sum()
            hits = cut["rel"].groupby(cut["qid"]).sum().astype(int).to_numpy()
            # ideal DCG of h relevant documents ranked first; h = 0 divides by inf, giving 0
            ideal = np.concatenate([[np.inf], np.cumsum(1.0 / np.log2(np.arange(2, k + 2)))])
            value = dcg / ideal[hits]
        value = value.reindex(qids, fill_value=0.0)
        rows.append(pd.DataFrame({"qid": qids, "measure": measure.name, "value": value.to_numpy(dtype=float)}))
    return pd.concat(rows, ignore_index=True)
