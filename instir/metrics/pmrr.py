"""FollowIR's p-MRR as mteb 2.26 computes it (``mteb/_evaluators/retrieval_metrics.py``:
``get_rank_from_dict``, ``calculate_pmrr``, ``rank_score``; the definition and its sources are
in docs/metrics.md): the measure (:class:`PMRR`, FollowIR's group measure, named in its spec's
``group_measures``) and its computation.

Each query ``q`` has two instances in one run, ``q-og`` and ``q-changed`` (the family's reference
form and the other; :data:`PAIRED` where no spec says the forms); its changed documents are those
whose grade the changed instruction altered (the release's ``qrel_diff``, or
:meth:`instir.benchmarks.forms.Forms.regraded`). A document's rank in an instance's results
is its 1-based position by (score, doc id) descending (``ties="mteb"``) or by score with ties in
insertion order (``ties="insertion"``: the original FollowIR code and mteb before PR #5241, whose
dicts held each query's candidates in list order); a document missing from the results ranks one
below the last. Per changed document with ranks ``og`` and ``new``: ``new/og - 1`` when it moved
up or stayed, ``1 - og/new`` when it moved down; the mean per query, then over queries. A query without both
instances in the run is skipped with a warning, as mteb does.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from instir.benchmarks.forms import Forms
from instir.errors import UsageError, unknown
from instir.metrics.measures import GroupMeasure, GroupScope

#: The forms p-MRR compares where no family spec says them: MTEB's ``<query>-og`` and ``<query>-changed`` ids.
PAIRED = Forms(("og", "changed"), "og")
#: queries named one warning each when a run lacks them (the rest are counted in one more)
WARNED = 3
#: p-MRR's tie rules: ``mteb`` (ties by doc id descending, mteb 2.26 after PR #5241) and
#: ``insertion`` (ties in the run's row order, as the original FollowIR code and mteb before it).
PMRR_TIES = ("mteb", "insertion")
_NAME = re.compile(r"p-?mrr(?:\[(.+)\])?$", re.IGNORECASE)


@dataclass(frozen=True)
class PMRR(GroupMeasure):
    """FollowIR's p-MRR (Weller et al. 2024, arXiv:2403.15246): per query, over the documents
    whose grade the changed instruction altered, how their rank moved from the reference
    instance's run to the changed one's (:func:`per_query`); one value per query pair. ``ties`` is
    the rule for equal scores (:data:`PMRR_TIES`)."""

    ties: str = "mteb"
    source: ClassVar[str] = ("mteb 2.26 mteb/_evaluators/retrieval_metrics.py (get_rank_from_dict, calculate_pmrr, "
                             "rank_score)")
    requires: ClassVar[str] = ("p-MRR compares each query's -og and -changed instances (FollowIR's ids), which these "
                               "qrels do not have")
    query_only: ClassVar[str] = ("0 by construction: a query-only run gives a pair's og and changed halves the same "
                                 "text, so no document's rank can move")

    def __post_init__(self) -> None:
        if self.ties not in PMRR_TIES:
            raise unknown("p-MRR tie rule", self.ties, PMRR_TIES)

    @property
    def name(self) -> str:
        return "p-MRR" if self.ties == "mteb" else f"p-MRR[{self.ties}-ties]"

    @classmethod
    def parse(cls, text: str) -> PMRR | None:
        """``p-MRR``, ``pmrr``, ``p-MRR[insertion-ties]``."""
        found = _NAME.match(text)
        return cls(found[1].lower().removesuffix("-ties") if found[1] else "mteb") if found else None

    def per_group(self, run: pd.DataFrame, scope: GroupScope) -> pd.DataFrame:
        """p-MRR per query pair: the changed documents are the release's (``scope.release["changed"]``), else
        the qrels' regraded ones; the insertion tie rule follows the release's candidate lists."""
        forms = scope.forms or PAIRED
        changed = scope.release.get("changed")
        if changed is None:
            changed = forms.regraded(scope.qrels)
        values = per_query(run, changed, self.ties, order_of=scope.release.get("top_ranked"), forms=forms)
        return values.assign(n_queries=2)[["group", "value", "n_queries"]]


def _ranks(frame: pd.DataFrame, ties: str, order_of: Mapping[str, Sequence[str]] | None = None) -> pd.DataFrame:
    """Every (qid, docid) of a run frame with its rank under ``ties``; insertion ties follow
    ``order_of[qid]`` (a candidate list) where given, else the frame's row order."""
    order = frame.assign(_row=np.arange(len(frame)))
    if ties == "insertion" and order_of:
        listed = pd.DataFrame([(q, d, i) for q in order["qid"].unique() for i, d in enumerate(order_of.get(q, ()))],
                              columns=["qid", "docid", "_listed"])
        order = order.merge(listed, on=["qid", "docid"], how="left", sort=False)
        order["_row"] = order["_listed"].fillna(len(order) + order["_row"]).to_numpy()
    if ties == "mteb":
        order = order.sort_values(["qid", "score", "docid"], ascending=[True, False, False], kind="mergesort")
    else:
        order = order.sort_values(["qid", "score", "_row"], ascending=[True, False, True], kind="mergesort")
    order["rank"] = order.groupby("qid", sort=False).cumcount() + 1
    return order[["qid", "docid", "rank"]]


def rank_score(og_rank: np.ndarray, new_rank: np.ndarray) -> np.ndarray:
    """Per changed document, the rank change as ``rank_score`` writes it (same arithmetic)."""
    og, new = og_rank.astype(float), new_rank.astype(float)
    return np.where(og >= new, ((1 / og) / (1 / new)) - 1, 1 - ((1 / new) / (1 / og)))


def per_query(run: pd.DataFrame, changed: Mapping[str, Iterable[str]], ties: str = "mteb", *,
              order_of: Mapping[str, Sequence[str]] | None = None, forms: Forms = PAIRED) -> pd.DataFrame:
    """p-MRR of every query with both instances in ``run`` (a frame with ``qid``, ``docid``,
    ``score``) and at least one changed document: columns ``group`` (the query id without its
    suffix), ``value``, ``n_docs``. ``ties="insertion"`` ranks equal scores in the order the
    original code's dicts held them: ``order_of[instance]`` (the candidate list mteb 1.x scored
    in order) where given, else the frame's row order. ``forms``: the reference instance's form and
    the changed one's (the first other)."""
    og, changed_form = f"-{forms.reference}", f"-{forms.others[0]}"
    if ties not in PMRR_TIES:
        raise UsageError(f"unknown p-MRR tie rule {ties!r}; use one of {', '.join(PMRR_TIES)}")
    present = set(run["qid"].unique())
    wanted = [(q, list(docs)) for q, docs in changed.items()]
    missing = {q for q, _ in wanted if q + og not in present or q + changed_form not in present}
    skipped = sorted(missing)
    for query in skipped[:WARNED]:  # one warning per query as mteb, a count past the first few
        warnings.warn(f"query {query} not found in the runs for calculating p-MRR (needs {query}{og} and "
                      f"{query}{changed_form}); skipped, as mteb skips it", stacklevel=3)
    if len(skipped) > WARNED:
        warnings.warn(f"{len(skipped) - WARNED} more queries not found in the runs for calculating p-MRR "
                      f"(e.g. {skipped[WARNED]}); skipped", stacklevel=3)
    pairs = pd.DataFrame([(q, d) for q, docs in wanted if q not in missing for d in docs], columns=["group", "docid"],
                         dtype=object)
    if pairs.empty:
        return pd.DataFrame({"group": pd.Series(dtype=object), "value": pd.Series(dtype=float),
                             "n_docs": pd.Series(dtype=int)})
    frame = run[run["qid"].isin({q + s for q in pairs["group"].unique() for s in (og, changed_form)})]
    ranks = _ranks(frame[["qid", "docid", "score"]], ties, order_of)
    length = frame.groupby("qid", sort=False).size()
    out = pairs.copy()
    for half, suffix in (("og", og), ("new", changed_form)):
        keyed = out.assign(qid=out["group"] + suffix)
        found = keyed.merge(ranks, on=["qid", "docid"], how="left")["rank"]
        absent = keyed["qid"].map(length) + 1
        out[f"{half}_rank"] = found.fillna(absent).to_numpy(dtype=np.int64)
    out["value"] = rank_score(out["og_rank"].to_numpy(), out["new_rank"].to_numpy())
    return (out.groupby("group", sort=False).agg(value=("value", "mean"), n_docs=("value", "size")).reset_index())
