"""Measures as small value objects, in ir_measures' manner: what is computed (a name with its
parameters, the definition's source) apart from who computes it (pytrec_eval through
ir-measures, the IFIR authors' nDCG, the InstructIR authors' group minimum, a judge).

:class:`Standard`, :class:`Robustness`, :class:`Native`, :class:`Half` (a measure on the original-
or changed-instruction instances only), :class:`PMRR` (FollowIR's p-MRR) and :class:`InstFol`
(judged, never computed from a run alone); :func:`parse_measure` reads any of them from the kit's names,
ir-measures', ranx's lower-case ones and ir_measures objects. A family spec's ``derived`` names
the measures every scored measure brings along (:data:`DERIVED`). Imports nothing heavy:
ir-measures is imported when a name is read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, ClassVar

from instir.benchmarks.types import HALVES
from instir.errors import UsageError, quoted, unknown

#: Scoring protocols: ``authors`` (the default: the papers' official code) and ``mteb``
#: (MTEB 2.26's task definitions, :mod:`instir.metrics.mteb`).
PROTOCOLS = ("authors", "mteb")

#: ranx's and MTEB's lower-case measure names (``ndcg@10``, ``ndcg_at_10``) -> the ir-measures names
LOWER_CASE_NAMES = {"ndcg": "nDCG", "mrr": "RR", "recall": "R", "precision": "P", "map": "AP", "hit_rate": "Success"}

#: the tag of the IFIR authors' measures in result tables
NATIVE_TAG = "ifir-native"

_ROBUSTNESS = re.compile(r"robustness(?:@(\d+)|\((.+)\))$", re.IGNORECASE)
_NATIVE = re.compile(rf"(.+)\[{NATIVE_TAG}\]$", re.IGNORECASE)
_INSTFOL = re.compile(r"instfol@(\d+)$", re.IGNORECASE)
_HALF = re.compile(r"(.+)\[(og|changed)\]$", re.IGNORECASE)
_PMRR = re.compile(r"p-?mrr(?:\[(.+)\])?$", re.IGNORECASE)



@dataclass(frozen=True)
class Measure:
    """A measure: its ``name`` as result tables label it (``str()`` gives it), the ``unit`` one
    value describes (``query``, ``group`` or ``instance``) and the ``source`` of its definition."""

    unit: ClassVar[str] = "query"
    source: ClassVar[str] = ""

    @property
    def name(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Standard(Measure):
    """A trec_eval measure, computed by pytrec_eval through ir-measures (``measure`` is the
    ir_measures object: ``nDCG@10``, ``RR@10``, ``nDCG(gains={0:0,1:1,2:3})@10`` …)."""

    measure: Any
    source: ClassVar[str] = "trec_eval (pytrec_eval through ir-measures)"

    @property
    def name(self) -> str:
        return str(self.measure)

    @property
    def cutoff_only(self) -> bool:
        """Whether the measure's only parameter is its cutoff (``nDCG@20``, not ``nDCG(gains=…)@20``)."""
        return set(self.measure.params) == {"cutoff"}


@dataclass(frozen=True)
class Robustness(Measure):
    """The minimum of ``base`` over each query group's instances, averaged over groups
    (kaistAI/InstructIR ``eval/robust_eval.py``, its ``…_min`` output). InstructIR prints
    Robustness of nDCG@k as ``Robustness@k``; any other base keeps its name in parentheses."""

    base: Measure
    unit: ClassVar[str] = "group"
    source: ClassVar[str] = "kaistAI/InstructIR eval/robust_eval.py (the minimum per query group, averaged)"

    @property
    def name(self) -> str:
        match = re.fullmatch(r"nDCG@(\d+)", self.base.name)
        return f"Robustness@{match.group(1)}" if match else f"Robustness({self.base.name})"

    @classmethod
    def derive(cls, measure: Measure) -> Robustness | None:
        """The Robustness of a per-query measure (a spec's ``derived``)."""
        return cls(measure) if measure.unit == "query" else None


@dataclass(frozen=True)
class Native(Measure):
    """The IFIR authors' nDCG@k or RR@k (SighingSnow/IFIR ``src/eval.py``, their Elasticsearch
    path): binary gains, the ideal DCG of the retrieved top k re-sorted (:mod:`instir.metrics.native`)."""

    base: Standard
    source: ClassVar[str] = "SighingSnow/IFIR src/eval.py (ideal DCG of the retrieved top k re-sorted)"

    def __post_init__(self) -> None:
        if not isinstance(self.base, Standard) or self.base.measure.NAME not in ("nDCG", "RR") \
                or not self.base.cutoff_only:
            raise UsageError(f"IFIR-native measures are nDCG@k and RR@k, got {quoted(str(self.base))}")

    @property
    def name(self) -> str:
        return f"{self.base.name}[{NATIVE_TAG}]"

    @property
    def cutoff(self) -> int:
        return int(self.base.measure["cutoff"])

    @classmethod
    def derive(cls, measure: Measure) -> Native | None:
        """The IFIR-native form of a plain ``nDCG@k`` or ``RR@k`` (a spec's ``derived``)."""
        if isinstance(measure, Standard) and measure.measure.NAME in ("nDCG", "RR") and measure.cutoff_only:
            return cls(measure)
        return None


@dataclass(frozen=True)
class InstFol(Measure):
    """IFIR's InstFol@k (§4.1): the judged relative gain of the instructed top k over the
    query-only top k (:mod:`instir.judge.following`); computed by the judge stage."""

    k: int = 20
    unit: ClassVar[str] = "instance"
    source: ClassVar[str] = "IFIR §4.1, SighingSnow/IFIR src/llm_eval.py"

    @property
    def name(self) -> str:
        return f"InstFol@{self.k}"


def half_of(qid: str) -> str:
    """The FollowIR half an instance id belongs to, as MTEB splits them
    (``mteb/_evaluators/retrieval_metrics.py``, ``evaluate_p_mrr_change``): ``og`` for ids
    ending ``-og``, ``changed`` for every other id."""
    return "og" if qid.endswith(HALVES["og"]) else "changed"


@dataclass(frozen=True)
class Half(Measure):
    """A per-query measure averaged over one half of FollowIR's instances only: ``og`` (the
    original instructions: the score the FollowIR paper prints beside p-MRR, MAP@1000 or
    nDCG@5) or ``changed``; MTEB reports both as ``og`` / ``changed`` beside p-MRR."""

    base: Measure
    half: str = "og"
    source: ClassVar[str] = "FollowIR (arXiv:2403.15246 Table 2); mteb evaluate_p_mrr_change's og/changed scores"

    def __post_init__(self) -> None:
        if self.half not in HALVES:
            raise unknown("FollowIR half", self.half, tuple(HALVES))
        if self.base.unit != "query" or isinstance(self.base, (Half, PMRR)):
            raise UsageError(f"[{self.half}] applies to a per-query measure, got {quoted(str(self.base))}")

    @property
    def name(self) -> str:
        return f"{self.base.name}[{self.half}]"

    @classmethod
    def derive_og(cls, measure: Measure) -> Half | None:
        """The original-instruction half of a per-query measure (a spec's ``derived``)."""
        return cls(measure, "og") if measure.unit == "query" and not isinstance(measure, (Half, PMRR)) else None

    @classmethod
    def derive_changed(cls, measure: Measure) -> Half | None:
        """The changed-instruction half of a per-query measure (a spec's ``derived``)."""
        return cls(measure, "changed") if measure.unit == "query" and not isinstance(measure, (Half, PMRR)) else None


#: p-MRR's tie rules: ``mteb`` (ties by doc id descending, mteb 2.26 after PR #5241) and
#: ``insertion`` (ties in the run's row order, as the original FollowIR code and mteb before it).
PMRR_TIES = ("mteb", "insertion")


@dataclass(frozen=True)
class PMRR(Measure):
    """FollowIR's p-MRR (Weller et al. 2024, arXiv:2403.15246): per query, over the documents
    whose relevance the changed instruction took away, how their rank moved from the ``-og`` run
    to the ``-changed`` run (:mod:`instir.metrics.pmrr`); one value per query pair. ``ties`` is
    the rule for equal scores (:data:`PMRR_TIES`)."""

    ties: str = "mteb"
    unit: ClassVar[str] = "group"
    source: ClassVar[str] = ("mteb 2.26 mteb/_evaluators/retrieval_metrics.py (get_rank_from_dict, calculate_pmrr, "
                             "rank_score)")

    def __post_init__(self) -> None:
        if self.ties not in PMRR_TIES:
            raise unknown("p-MRR tie rule", self.ties, PMRR_TIES)

    @property
    def name(self) -> str:
        return "p-MRR" if self.ties == "mteb" else f"p-MRR[{self.ties}-ties]"


#: what a family spec's ``derived`` names -> the measure each scored measure brings along
DERIVED = {"Robustness": Robustness.derive, NATIVE_TAG: Native.derive, "og": Half.derive_og,
           "changed": Half.derive_changed}


def _ir_measure(text: str) -> Any:
    """ir-measures' object for a name (ranx's lower-case spelling and trec_eval's names read too), its parser's
    errors (``NameError``, ``ValueError``, ``AssertionError``) one :class:`UsageError`."""
    import ir_measures

    head, at, cutoff = text.partition("@")
    text = LOWER_CASE_NAMES.get(head.lower(), head) + at + cutoff
    try:
        return ir_measures.parse_measure(text)
    except NameError:
        try:  # trec_eval's own name (ndcg_cut_10, map, recip_rank, P_10): its one measure
            (measure,) = ir_measures.parse_trec_measure(text)
            return measure
        except (ValueError, KeyError, NameError, AssertionError):
            pass
        name = text.split("@")[0].split("(")[0]
        raise unknown("measure", name, sorted({m.NAME for m in ir_measures.pytrec_eval.SUPPORTED_MEASURES}),
                      where=f"in {quoted(text)}", more=" (e.g. nDCG@10, RR@10, R@100, P@10)") from None
    except (ValueError, AssertionError) as err:
        raise UsageError(f"cannot read measure {quoted(text)}: {err}") from None


def standard(measure: Any) -> Standard:
    """A :class:`Standard` of an ir_measures object, refused when the pytrec_eval provider cannot
    compute it (ir-measures would otherwise fall back to another provider, or silently score 0)."""
    import ir_measures

    uncut = measure
    if measure.NAME == "RR" and "cutoff" in measure.params:  # cut by truncating the run (standard.py)
        uncut = type(measure)(**{k: v for k, v in measure.params.items() if k != "cutoff"})
    if not ir_measures.pytrec_eval.supports(uncut):
        raise UsageError(f"measure {measure} is not supported by the pytrec_eval provider")
    return Standard(measure)


def parse_measure(value: object) -> Measure:
    """A measure from a name (the kit's ``Robustness@10``, ``Robustness(RR@10)``,
    ``nDCG@20[ifir-native]``, ``InstFol@20``, ``p-MRR``, ``p-MRR[insertion-ties]``, ``AP@1000[og]``;
    ir-measures' ``nDCG@10``; ranx's ``ndcg@10``), an ir_measures object, or a measure itself."""
    if isinstance(value, Measure):
        return value
    if not isinstance(value, str):
        if hasattr(value, "NAME") and hasattr(value, "params"):  # an ir_measures Measure
            return standard(value)
        raise UsageError(f"a measure is a name such as 'nDCG@10' or an ir_measures measure, got {quoted(value)}")
    text = value.strip()
    robust = _ROBUSTNESS.match(text)
    if robust:
        return Robustness(parse_measure(f"nDCG@{robust[1]}" if robust[1] else robust[2]))
    native = _NATIVE.match(text)
    if native:
        return Native(parse_measure(native[1]))
    instfol = _INSTFOL.match(text)
    if instfol:
        return InstFol(int(instfol[1]))
    pmrr = _PMRR.match(text)
    if pmrr:
        return PMRR(pmrr[1].lower().removesuffix("-ties") if pmrr[1] else "mteb")
    half = _HALF.match(text)
    if half:
        return Half(parse_measure(half[1]), half[2].lower())
    return standard(_ir_measure(text))


def parse_measures(values: Iterable[object]) -> list[Measure]:
    """:func:`parse_measure` of each, duplicates dropped, order kept; none at all is refused."""
    out: list[Measure] = []
    for value in values:
        measure = parse_measure(value)
        if measure not in out:
            out.append(measure)
    if not out:
        raise UsageError("no measures given")
    return out


def with_derived(measures: Iterable[Measure], derived: Iterable[str]) -> list[Measure]:
    """``measures`` followed by what a spec's ``derived`` adds for each of them (in the order of
    ``derived``, then of ``measures``), none twice."""
    out = list(dict.fromkeys(measures))
    for name in derived:
        for measure in list(out):
            extra = DERIVED[name](measure)
            if extra is not None and extra not in out:
                out.append(extra)
    return out
