"""Measures as small value objects, in ir_measures' manner: what is computed (a name with its
parameters, the definition's source) apart from who computes it (pytrec_eval through
ir-measures, the IFIR authors' nDCG, the InstructIR authors' group minimum, a judge).

:class:`Standard`, :class:`Robustness`, :class:`Native`, :class:`Form` (a measure on one instance
form only: FollowIR's original- or changed-instruction instances), :class:`GroupMeasure` (one value
per query group from all of its instances' rankings: a family's own, such as FollowIR's p-MRR in
:mod:`instir.metrics.pmrr`, named in its spec's ``group_measures``) and :class:`InstFol` (judged,
never computed from a run alone); :func:`parse_measure` reads any of them from the kit's names,
ir-measures', ranx's lower-case ones and ir_measures objects. A family spec's ``derived`` names
the measures every scored measure brings along (:data:`DERIVED`, and ``forms``: one per instance
form). Imports nothing heavy: ir-measures is imported when a name is read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from instir.benchmarks import catalog
from instir.benchmarks.forms import Forms
from instir.errors import UsageError, quoted, unknown
from instir.parameters import depth

if TYPE_CHECKING:
    import pandas as pd

#: Scoring protocols: ``authors`` (the default: the papers' official code) and ``mteb``
#: (MTEB 2.26's task definitions, :mod:`instir.metrics.mteb`).
PROTOCOLS = ("authors", "mteb")


def check_protocol(protocol: object) -> None:
    """Refuse a ``protocol`` not in :data:`PROTOCOLS` with the closest (scoring's and the comparison with papers'
    one rule: a typo would score, or judge verdicts, under a protocol nobody asked for)."""
    if protocol not in PROTOCOLS:
        raise unknown("protocol", protocol, PROTOCOLS)

#: ranx's and MTEB's lower-case measure names (``ndcg@10``, ``ndcg_at_10``; MTEB's first for each) and the short
#: ones papers print (``p@10``, ``rr@10``) -> the ir-measures names
LOWER_CASE_NAMES = {"ndcg": "nDCG", "mrr": "RR", "recall": "R", "precision": "P", "map": "AP", "hit_rate": "Success",
                    "rr": "RR", "r": "R", "p": "P", "ap": "AP", "r-precision": "Rprec"}

#: the tag of the IFIR authors' measures in result tables
NATIVE_TAG = "ifir-native"

_ROBUSTNESS = re.compile(r"robustness(?:@(\d+)|\((.+)\))$", re.IGNORECASE)
_NATIVE = re.compile(rf"(.+)\[{NATIVE_TAG}\]$", re.IGNORECASE)
_INSTFOL = re.compile(r"instfol@(\d+)$", re.IGNORECASE)
_FORM = re.compile(r"(.+)\[([A-Za-z0-9][\w-]*)\]$")


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


@dataclass(frozen=True)
class Form(Measure):
    """A per-query measure averaged over the instances of one form only (a family spec's ``forms``):
    FollowIR's ``og`` (the original instructions: the score its paper prints beside p-MRR, MAP@1000 or
    nDCG@5) or ``changed``, as MTEB reports both beside p-MRR. Without a spec the form's instances are
    the ids ending ``-<form>``."""

    base: Measure
    form: str = ""
    source: ClassVar[str] = ("the family's instance forms (FollowIR: arXiv:2403.15246 Table 2; mteb "
                             "evaluate_p_mrr_change's og/changed scores)")

    def __post_init__(self) -> None:
        if self.base.unit != "query" or isinstance(self.base, Form):
            raise UsageError(f"[{self.form}] applies to a per-query measure, got {quoted(str(self.base))}")

    @property
    def name(self) -> str:
        return f"{self.base.name}[{self.form}]"

    @classmethod
    def derive(cls, measure: Measure, form: str) -> Form | None:
        """A per-query measure on one form's instances (a spec's ``derived = ["forms"]``)."""
        return cls(measure, form) if measure.unit == "query" and not isinstance(measure, Form) else None


@dataclass(frozen=True)
class GroupScope:
    """What a group measure reads besides the run: the qrels, the family's instance forms (None: no
    spec says them) and the release's own data (``Benchmark.meta``: FollowIR's changed documents
    ``changed`` and candidate lists ``top_ranked``)."""

    qrels: Mapping[str, Mapping[str, int]]
    forms: Forms | None = None
    release: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class GroupMeasure(Measure):
    """A measure with one value per query group, computed from the rankings of all of a group's
    instances in one run (FollowIR's p-MRR compares a topic's reference and changed instances). A
    family brings its own through its spec's ``group_measures`` (``module:Class``); the one scoring
    path computes it without knowing it. A subclass gives ``name``, :meth:`parse` and
    :meth:`per_group`, and ``requires``: what a group needs, for the message when no group has it."""

    unit: ClassVar[str] = "group"
    requires: ClassVar[str] = ""
    #: what the measure is, and why, for a query-only run (every instance of a group given the same text), said
    #: beside its value; empty when that fixes nothing
    query_only: ClassVar[str] = ""

    @classmethod
    def parse(cls, text: str) -> GroupMeasure | None:
        """The measure a name stands for, None when the name is not this measure's."""
        raise NotImplementedError

    def per_group(self, run: pd.DataFrame, scope: GroupScope) -> pd.DataFrame:
        """One row per group of ``run`` (``qid``, ``docid``, ``score``, in the run's row order): ``group``,
        ``value``, ``n_queries`` (the instances behind the value)."""
        raise NotImplementedError


#: what a family spec's ``derived`` names -> the measure each scored measure brings along
DERIVED = {"Robustness": Robustness.derive, NATIVE_TAG: Native.derive}
#: what ``derived`` names for one measure per instance form of the family (:class:`Form`)
PER_FORM = "forms"


def _ir_measure(text: str) -> Any:
    """ir-measures' object for a name (ranx's lower-case spelling and trec_eval's names read too), its parser's
    errors (``NameError``, ``ValueError``, ``AssertionError``) one :class:`UsageError`."""
    import ir_measures

    head, cutoff = split_cutoff(text)
    if cutoff is not None and not re.fullmatch(r"[0-9]+", cutoff):  # ir-measures said "invalid decimal literal" …
        apart = "; measures are given apart: nDCG@10 R@100" if "," in cutoff else ""
        try:  # the depth rule says what a cutoff takes
            depth(int(cutoff) if re.fullmatch(r"-[0-9]+", cutoff) else cutoff,
                  where=f"measure {quoted(text)}: the cutoff")
        except UsageError as err:
            raise UsageError(f"{err}{apart}") from None
    spelled = LOWER_CASE_NAMES.get(head.lower(), head) + ("" if cutoff is None else f"@{cutoff}")
    try:
        return ir_measures.parse_measure(spelled)
    except NameError:
        try:  # trec_eval's own name (ndcg_cut_10, map, recip_rank, P_10): its one measure
            (measure,) = ir_measures.parse_trec_measure(spelled)
            return measure
        except (ValueError, KeyError, NameError, AssertionError):
            pass
        known = sorted({m.NAME for m in ir_measures.pytrec_eval.SUPPORTED_MEASURES})
        raise unknown("measure", head.split("(")[0], known,
                      where=f"in {quoted(text)}", more=" (e.g. nDCG@10, RR@10, R@100, P@10)") from None
    except (ValueError, AssertionError) as err:
        raise UsageError(f"cannot read measure {quoted(text)}: {err}") from None


def split_cutoff(name: str) -> tuple[str, str | None]:
    """A measure name's head and what follows its cutoff mark (``@``, or ranx's and MTEB's ``_at_`` before a
    digit, in any case), None without one: ``ndcg_at_10`` -> ``("ndcg", "10")``. One reading of the mark for
    :func:`parse_measure` and the papers' tables."""
    head, at, cutoff = re.fullmatch(r"(.*?)(@|_at_(?=\d)|$)(.*)", name, re.DOTALL | re.IGNORECASE).groups()
    return head, (cutoff if at else None)


#: Measures whose cutoff pytrec_eval cannot apply itself: for these, the uncut measure is
#: computed on the run truncated to its top ``cutoff`` documents (exact for RR, whose value
#: depends only on the first relevant document).
CUT_BY_TRUNCATION = frozenset({"RR"})


def uncut(measure: Any) -> Any:
    """The ir_measures ``measure`` itself, or its cutoff-free form when its cutoff is applied by truncating the run
    (:data:`CUT_BY_TRUNCATION`): what pytrec_eval is asked for."""
    if measure.NAME in CUT_BY_TRUNCATION and "cutoff" in measure.params:
        return type(measure)(**{k: v for k, v in measure.params.items() if k != "cutoff"})
    return measure


def standard(measure: Any) -> Standard:
    """A :class:`Standard` of an ir_measures object, refused when the pytrec_eval provider cannot
    compute it (ir-measures would otherwise fall back to another provider, or silently score 0)."""
    import ir_measures

    cutoff = measure.params.get("cutoff")
    if cutoff is not None:
        # pytrec_eval aborts the process on a cutoff of 0 (a failed C assertion), ir-measures asserts on 10.5, and
        # a cutoff past a C int (parameters.MAX_CUTOFF) came back under another name (a KeyError)
        depth(cutoff, where=f"measure {measure.NAME}@{cutoff}: the cutoff")
    if not ir_measures.pytrec_eval.supports(uncut(measure)):
        raise UsageError(f"measure {measure} is not supported by the pytrec_eval provider")
    return Standard(measure)


def parse_measure(value: object) -> Measure:
    """A measure from a name (the kit's ``Robustness@10``, ``Robustness(RR@10)``,
    ``nDCG@20[ifir-native]``, ``InstFol@20``, ``AP@1000[og]``; a family's group measures, such as
    ``p-MRR`` and ``p-MRR[insertion-ties]``; ir-measures' ``nDCG@10``; ranx's ``ndcg@10``), an
    ir_measures object, or a measure itself."""
    if isinstance(value, Measure):
        return value
    if not isinstance(value, str):
        if hasattr(value, "NAME") and hasattr(value, "params"):  # an ir_measures Measure
            return standard(value)
        raise UsageError(f"a measure is a name such as 'nDCG@10' or an ir_measures measure, got {quoted(value)}")
    text = value.strip()
    try:
        kit, refused = _kit_measure(text), None
    except UsageError as err:
        kit, refused = None, err
    for name in catalog.families():
        spec = catalog.family(name)
        for kind in spec.group_measure_classes():
            grouped = kind.parse(text)
            if grouped is not None and kit is not None:  # a plugin's class would change every family's numbers
                raise UsageError(f"{spec.at('group_measures')}: group measure {kind.__qualname__} reads "
                                 f"{quoted(text)}, the name of the kit's {kit.name}")
            if grouped is not None:
                return grouped
    if kit is None:
        raise refused
    return kit


def _kit_measure(text: str) -> Measure:
    """The measure the kit itself reads in a name (its own or ir-measures'; a form's of any), one
    :class:`UsageError` when it reads none."""
    robust = _ROBUSTNESS.match(text)
    if robust:
        try:
            return Robustness(parse_measure(f"nDCG@{robust[1]}" if robust[1] else robust[2]))
        except UsageError as err:  # named as given, not as the measure it is the minimum of
            raise UsageError(f"{quoted(text)}: {err}") from None
    native = _NATIVE.match(text)
    if native:
        return Native(parse_measure(native[1]))
    instfol = _INSTFOL.match(text)
    if instfol:
        return InstFol(int(instfol[1]))
    form = _FORM.match(text)
    if form:
        return Form(parse_measure(form[1]), form[2])
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


def with_derived(measures: Iterable[Measure], derived: Iterable[str], forms: Forms | None = None) -> list[Measure]:
    """``measures`` followed by what a spec's ``derived`` adds for each of them (in the order of
    ``derived``, then of ``measures``; :data:`PER_FORM`: one per form of ``forms``, in their order),
    none twice."""
    out = list(dict.fromkeys(measures))
    for name in derived:
        if name not in DERIVED and name != PER_FORM:
            raise unknown("derived measure", name, [*DERIVED, PER_FORM], where="in a family spec's 'derived'")
    steps = [step for name in derived for step in (
        [lambda m, f=f: Form.derive(m, f) for f in (forms.names if forms else ())] if name == PER_FORM
        else [DERIVED[name]])]
    for step in steps:
        for measure in list(out):
            extra = step(measure)
            if extra is not None and extra not in out:
                out.append(extra)
    return out
