"""Scoring runs: the one path every front end takes. :func:`evaluate_runs` scores many runs on a
benchmark (what the evaluate stage, ``instir evaluate`` and the sweep's cells call);
:func:`evaluate` scores one run in ranx's argument order for a Python session, on a Benchmark
or on qrels in any shape. Both compute :mod:`instir.metrics.measures` objects with one set of
providers (:class:`Scorer`). On a Benchmark, self-hits are dropped first (as the InstructIR
authors do), and the family's spec says which measures are scored by default and which each
brings along (``derived``); the ``mteb`` protocol is a parameter of the same path.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import numbers
import warnings
from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from instir.benchmarks.forms import Forms
from instir.benchmarks.types import Benchmark, Qrels
from instir.errors import UsageError, quoted, unknown
from instir.metrics import native, robustness, table
from instir.metrics.evaluation import Evaluation
from instir.metrics.inputs import given_rows, qrels_of, run_of
from instir.metrics.measures import (
    Form,
    GroupMeasure,
    GroupScope,
    Measure,
    Native,
    Robustness,
    check_protocol,
    parse_measure,
    parse_measures,
    with_derived,
)
from instir.metrics.standard import Evaluator, RunLike, mean_by_measure, run_frame
from instir.progress import tqdm
from instir.retrieval.runs import (
    Run,
    RunIdCheck,
    ShallowRunsWarning,
    check_run_ids,
    drop_self_hits,
    ranked_phrase,
    refuse_unanswered,
    tied_again,
)
from instir.retrieval.search import OtherDataWarning, other_data

#: Measures scored on a benchmark of no family when none are asked for: trec_eval's staples.
GENERIC_MEASURES = ("nDCG@10", "RR@10", "R@100", "P@10")


def default_measures(benchmark: Benchmark | str) -> tuple[str, ...]:
    """The measures scored on a benchmark (or benchmark name) when none are asked for: its
    family's (the spec's ``measures``), else :data:`GENERIC_MEASURES`."""
    spec = benchmark.spec if isinstance(benchmark, Benchmark) else _spec(benchmark)
    return spec.measures if spec else GENERIC_MEASURES


def headline(benchmark: Benchmark | str) -> tuple[str, ...]:
    """The measures a benchmark's paper headlines (the spec's ``headline``: compared against the
    baseline and shown first; the first is its score), else its first default measure."""
    spec = benchmark.spec if isinstance(benchmark, Benchmark) else _spec(benchmark)
    return spec.headline if spec else GENERIC_MEASURES[:1]


def _spec(name: str):
    from instir.benchmarks import catalog

    family = catalog.family_of(name)
    return catalog.family(family) if family else None


def scored_measures(benchmark: Benchmark, measures: Sequence[object] | object | None = None, *,
                    derived: bool = True) -> list[Measure]:
    """The measures :func:`evaluate_runs` scores: those asked for (default
    :func:`default_measures`) and, with ``derived``, what the family's spec says each brings along; a spec whose
    ``headline`` names a measure it does not score (or judge) is one line at that line, before any is scored."""
    asked = parse_measures(_as_list(measures) if measures is not None else default_measures(benchmark))
    spec = benchmark.spec
    scored = with_derived(asked, spec.derived, spec.forms) if derived and spec else asked
    for i, name in enumerate(spec.headline if measures is None and derived and spec else ()):
        if (measure := parse_measure(name)).unit != "instance" and measure not in scored:
            raise UsageError(f"{spec.at('headline', i)}: field 'headline': {quoted(name)} is none of the measures the "
                             f"family scores ({', '.join(map(str, scored))})")
    return scored


def without_self_hits(run: RunLike) -> RunLike:
    """The run without documents whose id is the query id (``drop_self_hits``, as the
    InstructIR authors score), or the run itself when it has none (dropping re-sorts the run)."""
    frame = run_frame(run)
    return drop_self_hits(run) if (frame["qid"] == frame["docid"]).any() else run


def _group_rows(measure: GroupMeasure, frame: pd.DataFrame, scope: GroupScope) -> pd.DataFrame:
    """A group measure's :meth:`~instir.metrics.measures.GroupMeasure.per_group` rows once they hold one row per group
    and a finite number in ``value`` and ``n_queries``; anything else is one line naming the measure's class and
    file, never a mean over what is left (a mean skips NaN) nor a traceback from the table."""
    where = f"group measure {type(measure).__name__} ({inspect.getfile(type(measure))})"
    try:
        rows = measure.per_group(frame, scope)
    except Exception as err:
        err.add_note(f"raised by the {where}")
        raise
    columns = ["group", "value", "n_queries"]
    if not isinstance(rows, pd.DataFrame) or not set(columns) <= set(rows.columns):
        got = f"the columns {list(rows.columns)}" if isinstance(rows, pd.DataFrame) else f"a {type(rows).__name__}"
        raise UsageError(f"{where}: per_group returned {got}, not a DataFrame with the columns {columns}")
    for column in columns[1:]:
        bad = rows[~rows[column].map(lambda v: isinstance(v, numbers.Real) and math.isfinite(v))]
        if len(bad):
            raise UsageError(f"{where}: per_group gave the group {quoted(bad['group'].iloc[0])} the {column} "
                             f"{quoted(bad[column].tolist()[0])}, not a finite number")
    twice = rows["group"][rows["group"].duplicated()]
    if len(twice):
        raise UsageError(f"{where}: per_group gave the group {quoted(twice.iloc[0])} more than one row")
    return rows.assign(measure=measure.name)


def refuse_judged(measures: Iterable[Measure]) -> None:
    """Refuse a judged measure (InstFol): a judge computes it, not a run and qrels."""
    judged = next((m for m in measures if m.unit == "instance"), None)
    if judged is not None:
        raise UsageError(f"{judged} is judged, not computed from a run and qrels: the judge stage computes it "
                         "(instir judge, instir.stages.judge_runs)")


class Scorer:
    """The providers of a list of measures, built once for one qrels and applied to any number
    of runs: per-query values of every per-query measure (and of every Robustness and form's
    base), group minima of every Robustness measure, and every group measure's values per group
    (:class:`~instir.metrics.measures.GroupMeasure`: p-MRR per query pair). ``forms``: the
    family's instance forms (None: a form's instances are the ids ending ``-<form>``); ``release``:
    the benchmark's own data the group measures read (``Benchmark.meta``)."""

    def __init__(self, qrels: Qrels, measures: Sequence[Measure], forms: Forms | None = None,
                 release: Mapping[str, object] | None = None):
        self.measures = list(measures)
        refuse_judged(self.measures)
        self.robust = [m for m in self.measures if isinstance(m, Robustness)]
        self.grouped = [m for m in self.measures if isinstance(m, GroupMeasure)]
        self.forms = [m for m in self.measures if isinstance(m, Form)]
        if forms is not None:
            for measure in self.forms:
                if measure.form not in forms.names:
                    raise unknown("instance form", measure.form, forms.names, where=f"in {quoted(measure.name)}")
        per_query = list(dict.fromkeys([*(m for m in self.measures if m.unit == "query" and not isinstance(m, Form)),
                                        *(m.base for m in (*self.robust, *self.forms))]))
        self.native = [m for m in per_query if isinstance(m, Native)]
        self.standard = [m for m in per_query if not isinstance(m, Native)]
        self.evaluator = Evaluator(qrels, self.standard) if self.standard else None
        self.qrels = qrels
        self.scope = GroupScope(qrels, forms, dict(release or {}))

    @classmethod
    def for_benchmark(cls, benchmark: Benchmark, measures: Sequence[Measure]) -> "Scorer":
        """The scorer of ``measures`` on a benchmark: its qrels, its family's forms, and its release's
        data (FollowIR's changed documents and candidate lists, which p-MRR reads)."""
        spec = benchmark.spec
        own = spec.group_measure_classes() if spec else []
        for measure in measures:
            if isinstance(measure, GroupMeasure) and type(measure) not in own:  # it would score no group at all
                raise UsageError(f"measure {measure.name} is not {benchmark.name}'s: it is scored on the benchmarks "
                                 "of the family that brings it (their release's data)")
        return cls(benchmark.qrels, measures, spec.forms if spec else None, benchmark.meta)

    @property
    def excluded(self) -> list[str]:
        """Qrels queries without a relevant document (not averaged)."""
        return self.evaluator.excluded if self.evaluator else []

    def form_of(self, qid: str) -> str | None:
        """The instance form of a query id: by the family's forms (an id of none is refused), else the form
        of the measures asked that ends it (None: none does)."""
        forms = self.scope.forms
        if forms is not None:
            return forms.form_of(qid)
        return next((m.form for m in self.forms if qid.endswith(f"-{m.form}")), None)

    def per_query(self, run: RunLike) -> pd.DataFrame:
        """``qid``, ``measure``, ``value`` of every per-query measure: standard ones first, then
        IFIR-native ones, then each form's (its base's values on that form's instances); a query
        without results scores 0."""
        frames = [self.evaluator.per_query(run)] if self.evaluator else []
        if self.native:
            frames.append(native.native_per_query(run, self.qrels, [str(m.base) for m in self.native]))
        if not frames:
            return pd.DataFrame({"qid": pd.Series(dtype=str), "measure": pd.Series(dtype=str),
                                 "value": pd.Series(dtype=float)})
        scores = pd.concat(frames, ignore_index=True)
        if self.forms:
            form = scores["qid"].map({q: self.form_of(q) for q in scores["qid"].unique()})
            frames += [scores[(scores["measure"] == str(m.base)) & (form == m.form)].assign(measure=m.name)
                       for m in self.forms]
            scores = pd.concat(frames, ignore_index=True)
        return scores

    def group_minima(self, per_query: pd.DataFrame, groups: Mapping[str, str]) -> pd.DataFrame:
        """Each Robustness measure's minimum per group (:func:`instir.metrics.robustness.group_minima`)."""
        bases = [str(m.base) for m in self.robust]
        return robustness.group_minima(per_query[per_query["measure"].isin(bases)], groups)

    def warn_alone(self, groups: Mapping[str, str], stacklevel: int = 3) -> None:
        """Warn, once per scoring, when Robustness is scored where every query group holds one query (InstructIR's
        query-only setting): each minimum is then the query's own value, and Robustness the mean of its measure."""
        if self.robust and groups and len(set(groups.values())) == len(groups):
            warnings.warn(f"every query group holds one query here, so {', '.join(m.name for m in self.robust)} is "
                          f"the mean of {', '.join(str(m.base) for m in self.robust)}: a worst case over instructions "
                          "needs groups of several (the instructed setting)", UserWarning, stacklevel=stacklevel)

    def group_values(self, run: RunLike) -> pd.DataFrame | None:
        """Each group measure per group (:meth:`~instir.metrics.measures.GroupMeasure.per_group`):
        ``group``, ``measure``, ``value``, ``n_queries``; None when no group measure is scored."""
        if not self.grouped:
            return None
        frame = tied_again(run) if isinstance(run, Run) else run_frame(run)  # p-MRR's insertion rule reads ties
        values = [_group_rows(m, frame, self.scope) for m in self.grouped]
        return pd.concat(values, ignore_index=True)[["group", "measure", "value", "n_queries"]]

    def evaluation(self, scores: pd.DataFrame, benchmark: Benchmark, system: str, check: RunIdCheck,
                   pairs: pd.DataFrame | None = None) -> Evaluation:
        """One run's evaluation from its per-query values (:meth:`per_query`) and, when the
        measures hold group measures, their values per group (:meth:`group_values`): the table's rows
        per subset and level, the group minima and Robustness of every Robustness measure, and
        every group measure per group and averaged; a run shallower than a measure's cutoff is noted
        (:meth:`depth_notes`)."""
        tables = [table.summarise(scores, benchmark, system)] if len(scores) else []
        per_group = []
        if self.robust:
            minima = self.group_minima(scores, robustness.query_groups(benchmark))
            tables.append(table.with_slice(robustness.average_minima(minima), benchmark, system))
            per_group.append(minima.assign(system=system))
        if pairs is not None and len(pairs):
            tables.append(table.with_slice(robustness.average_minima(pairs), benchmark, system,
                                           subset=benchmark.shared_subset or "all"))
            per_group.append(pairs.assign(system=system))
        return Evaluation.collect([scores.assign(system=system)], per_group, tables, excluded=self.excluded,
                                  checks={system: check},
                                  notes=self.depth_notes(system, check.depth, benchmark.rankable(), check.shallowest))

    def depth_notes(self, system: str, depth: int, most: int, shallowest: str | None = None) -> list[str]:
        """A note when a run ranks fewer documents per query (``depth``, :func:`~instir.retrieval.runs.ranked_depth`;
        0: not known) than a measure's cutoff and than a query can have ranked (``most``, :meth:`Benchmark.rankable`),
        naming the query that ranks fewest where others rank more (``shallowest``): trec_eval counts the ranks past
        its depth as non-relevant, so R@100 of a run cut at 10 is no recall at 100."""
        cutoffs = {m.name: int(m.cutoff if isinstance(m, Native) else m.measure.params.get("cutoff") or 0)
                   for m in (*self.standard, *self.native)}
        deeper = [name for name, cutoff in cutoffs.items() if min(cutoff, most) > depth]
        if not depth or not deeper:
            return []
        deeper_run = f"retrieve at k = {max(cutoffs.values())} for these"
        advice = deeper_run if shallowest is None else (  # measured, no k given: cut short, or all its system found
            f"if the run was cut short, {deeper_run}; if its system found no more documents for that query, nothing "
            "is lost")
        return [f"{system}: {ranked_phrase(depth, shallowest)}, fewer than the cutoff of {', '.join(deeper)}: "
                f"the ranks past {depth} count as non-relevant ({advice})"]


def data_differs(meta: Mapping | None, benchmark: Benchmark, check: RunIdCheck, name: str = "the run", *,
                 stacklevel: int = 3) -> RunIdCheck:
    """``check`` with what of ``benchmark``'s data the run of ``meta`` (its sidecar, or ``run.meta``) was not
    retrieved over (:func:`~instir.retrieval.search.other_data`), said in one :class:`OtherDataWarning` naming its
    file (else ``name``): a run may be scored on other data on purpose, but its numbers are not that data's."""
    differs = other_data(meta, benchmark)
    if differs:
        file = (meta or {}).get("path") or name
        what = " and ".join({"corpus": "a corpus"}.get(d, d) for d in differs)
        warnings.warn(f"{file} was retrieved over {what} other than {benchmark.name}'s (its "
                      f"sidecar's {' and '.join(d + ' hash' for d in differs)} differ from the benchmark's): it is "
                      f"scored as asked, but its numbers are not numbers of {benchmark.name}'s data",
                      OtherDataWarning, stacklevel=stacklevel)
    return dataclasses.replace(check, other_data=differs)


def evaluate_runs(runs: Mapping[str, RunLike], benchmark: Benchmark, measures: Sequence[object] | None = None, *,
                  derived: bool = True, protocol: str = "authors") -> Evaluation:
    """Score ``runs`` (``{system name: Run or DataFrame}``) on ``benchmark``: the measures of
    :func:`scored_measures` (names or measure objects), per query, per query group (Robustness)
    and as the tidy table (per subset and level). ``protocol="mteb"`` scores as MTEB does instead
    (:func:`instir.metrics.mteb.evaluation`: MTEB's measure names, averaging, rounding and
    self-hit rule; ``derived`` does not apply)."""
    check_protocol(protocol)
    require_runs(runs, benchmark, "evaluate_runs(runs, benchmark)", mteb_scores=protocol == "mteb")
    if protocol == "mteb":
        from instir.metrics import mteb

        result = mteb.evaluation(runs, benchmark, measures)
        result.checks = {system: data_differs(getattr(runs[system], "meta", None), benchmark, check, system)
                         for system, check in result.checks.items()}
        return result
    scorer = Scorer.for_benchmark(benchmark, scored_measures(benchmark, measures, derived=derived))
    evaluations = []
    for system, run in tqdm(runs.items(), desc="scoring runs", disable=len(runs) < 2):
        kept = without_self_hits(run)
        check = data_differs(getattr(run, "meta", None), benchmark, check_run_ids(run, benchmark), system)
        evaluations.append(scorer.evaluation(scorer.per_query(kept), benchmark, system, check,
                                             scorer.group_values(kept)))
    for note in (note for e in evaluations for note in e.notes):  # said here, as instir.evaluate says them; the
        warnings.warn(note, ShallowRunsWarning, stacklevel=2)  # evaluate stage keeps them in run_checks.csv instead
    scorer.warn_alone(robustness.query_groups(benchmark))
    return Evaluation.join(evaluations)


def require_runs(runs: object, benchmark: object, signature: str, *, mteb_scores: bool = False) -> None:
    """Refuse in one line ``runs`` that are no ``{system name: run}`` mapping of one run or more, each a :class:`Run`
    or a DataFrame (under MTEB's protocol also ``{qid: {docid: score}}``), or a ``benchmark`` that is no
    :class:`Benchmark` (the two swapped, say), naming the function's ``signature``."""
    if not isinstance(runs, Mapping) or not isinstance(benchmark, Benchmark):
        swapped = " (the two swapped?)" if isinstance(runs, Benchmark) else ""
        raise UsageError(f"{signature} takes runs as a mapping {{system name: run}} and a Benchmark; runs is a "
                         f"{type(runs).__name__} and benchmark a {type(benchmark).__name__}{swapped}")
    if not runs:
        raise UsageError(f"{signature}: no runs given (a mapping {{system name: run}})")
    kinds = (Run, pd.DataFrame, Mapping) if mteb_scores else (Run, pd.DataFrame)
    for system, run in runs.items():
        if not isinstance(run, kinds):
            raise UsageError(f"{signature} takes each run as a Run or a DataFrame; {quoted(str(system))} is a "
                             f"{type(run).__name__} (a TREC file: instir.read_run(path); a {{qid: {{docid: score}}}} "
                             "dict: instir.Run.from_scores(scores))")


def instance_groups(qids: Sequence[str]) -> dict[str, str]:
    """``{qid: group}`` from ids of the form ``<group>_<n>`` (InstructIR's ``<query>_<n>``, the
    kit's ``<query>_<level>``): what Robustness needs when no Benchmark says the groups. The group
    is the id before its last ``_``, as the InstructIR loader reads it."""
    lone = [q for q in qids if "_" not in q]
    if lone:
        raise UsageError(f"Robustness needs query groups, and query {quoted(lone[0])} has no '<group>_<n>' id: pass a "
                         "Benchmark as qrels, or groups={qid: group}")
    return {q: q.rpartition("_")[0] for q in qids}


def _given_groups(groups: object, qids: Sequence[str]) -> Mapping[str, str]:
    """``evaluate``'s ``groups`` when it is a ``{qid: group}`` mapping that groups every scored query in ``qids``:
    Robustness is the mean of each group's minimum, and a query left out would leave its group's minimum higher."""
    if not isinstance(groups, Mapping):
        raise UsageError(f"evaluate(…, groups) takes {{query id: group}} (a dict), got a {type(groups).__name__}")
    lone = [q for q in qids if q not in groups]
    if lone:
        raise UsageError(f"evaluate(…, groups) gives no group to {len(lone)} scored queries, e.g. "
                         f"{', '.join(quoted(q) for q in lone[:3])}: Robustness needs the group of each")
    return groups


def _given_changed(changed: object) -> Mapping[str, Sequence[str]]:
    """``evaluate``'s ``changed`` when it is a ``{query: [changed document ids]}`` mapping (a string in place of the
    list would read as its characters)."""
    if not isinstance(changed, Mapping):
        raise UsageError(f"evaluate(…, changed) takes {{query id: [changed document ids]}} (a dict), got a "
                         f"{type(changed).__name__}")
    out = {}
    for query, docs in changed.items():  # a list, a set, an array or a Series (groupby(...).unique()) of ids
        if isinstance(docs, (str, bytes, Mapping)) or not isinstance(docs, Iterable):
            raise UsageError(f"evaluate(…, changed) takes {{query id: [changed document ids]}}; query "
                             f"{quoted(str(query))} has {quoted(docs)} (a {type(docs).__name__}), not a list")
        out[query] = list(docs)
    return out


def _single(measures: object) -> bool:
    """Whether ``measures`` is one measure (a name, an object) rather than a sequence of them."""
    return isinstance(measures, str) or not isinstance(measures, Sequence)


def _as_list(measures: object) -> list:
    """One measure as a list of one; a sequence as a list."""
    return [measures] if _single(measures) else list(measures)


def _looks_like_run(value: object) -> bool:
    """A Run, or a frame with a score column: what an old ``evaluate(run, qrels, …)`` call passes first."""
    from instir.retrieval.runs import Run

    return isinstance(value, Run) or (isinstance(value, pd.DataFrame) and "score" in value.columns)


class PaperNameWarning(UserWarning):
    """A measure given by the name a paper prints, scored as what the paper computed under that name."""


def _papers_name(measure: object, benchmark: Benchmark | None) -> object:
    """``measure`` as the benchmark's paper computed it, where the family spec's ``[papers.names]`` maps the name
    the paper prints (FollowIR's ``MAP@1000`` is ``AP@1000[og]``), said in a :class:`PaperNameWarning`."""
    spec = benchmark.spec if benchmark is not None else None
    meant = spec.papers.get("names", {}).get(measure) if spec is not None and isinstance(measure, str) else None
    if meant is None:
        return measure
    warnings.warn(f"{measure} on {benchmark.name} is scored as {meant}, what the {spec.printed} paper reports under "
                  f"that name; {parse_measure(measure)} scores every instance", PaperNameWarning, stacklevel=4)
    return meant


class RunIdWarning(UserWarning):
    """A run scored against a benchmark holds ids the benchmark does not know (they score nothing)."""


def check_ids_belong(run: Run, qrels: Benchmark | Mapping[str, Mapping[str, int]]) -> RunIdCheck | None:
    """Refuse in one line a run none of whose queries ``qrels`` holds (a run of another benchmark scores 0 on every
    measure), and warn (:class:`RunIdWarning`, :meth:`RunIdCheck.summary`) about query or document
    ids it does not know and queries it leaves out (each scores 0); returns the benchmark's :class:`RunIdCheck` (None
    for plain qrels)."""
    if not isinstance(qrels, Benchmark):
        asked = run.df["qid"].unique()
        refuse_unanswered(run, asked, qrels, "the qrels")
        unknown_q = [q for q in asked if q not in qrels]
        answered = set(asked)
        missing = [q for q in qrels if q not in answered]
        if unknown_q:
            warnings.warn(f"{len(unknown_q)} query ids of the run are not in the qrels (they score nothing): "
                          f"{', '.join(quoted(str(q)) for q in unknown_q[:5])}", RunIdWarning, stacklevel=3)
        if missing:
            warnings.warn(f"{len(missing)} queries of the qrels have no results in the run (they score 0): "
                          f"{', '.join(quoted(str(q)) for q in missing[:5])}", RunIdWarning, stacklevel=3)
        return None
    check = data_differs(run.meta, qrels, check_run_ids(run, qrels), stacklevel=4)
    if not check.ok or check.missing_qids:  # a query the run leaves out scores 0: said, as instir evaluate says it
        warnings.warn(f"{qrels.name}: {check.summary()}", RunIdWarning, stacklevel=3)
    return check


def evaluate(qrels: object, run: object, measures: object, *, groups: Mapping[str, str] | None = None,
             changed: Mapping[str, Sequence[str]] | None = None,
             per_query: bool = False) -> float | dict | pd.DataFrame:
    """Score one run in ranx's argument order (``ranx.evaluate(qrels, run, metrics)``): the mean of
    one measure as a float, or ``{measure: mean}`` for a list, keyed by the measures as given
    (names, or ir_measures objects as ``ir_measures.calc_aggregate`` keys them).

    ``qrels``: a :class:`~instir.benchmarks.types.Benchmark` (its self-hits rule and query groups
    apply, as in :func:`evaluate_runs`, whose numbers these are) or any qrels shape
    :func:`instir.metrics.inputs.qrels_of` reads; ``run``: any run shape
    :func:`~instir.metrics.inputs.run_of` reads; ``measures``: any spelling
    :func:`~instir.metrics.measures.parse_measure` reads, ``Robustness@10`` (groups from the
    Benchmark, ``groups``, or ``<group>_<n>`` ids) and ``nDCG@20[ifir-native]`` only when asked.
    ``p-MRR`` needs qrels whose ids carry ``-og`` / ``-changed`` and a run holding both; its
    changed documents are ``changed`` (``{query: [doc ids]}``), else the benchmark's release's,
    else derived from the two qrels (:meth:`instir.benchmarks.forms.Forms.regraded`).
    Averaged like every kit table. ``per_query=True``: a DataFrame, one row per query and one
    column per measure (not for Robustness or p-MRR, which have one value per group)."""
    if _looks_like_run(qrels) and not _looks_like_run(run):
        warnings.warn("evaluate(run, qrels, measures) is the old argument order; the order is now "
                      "evaluate(qrels, run, measures), as in ranx", DeprecationWarning, stacklevel=2)
        qrels, run = run, qrels
    benchmark = qrels if isinstance(qrels, Benchmark) else None
    the_run = run_of(run)
    the_qrels = qrels_of(qrels)
    check = check_ids_belong(the_run, benchmark if benchmark is not None else the_qrels)
    if benchmark is not None:
        the_run = without_self_hits(the_run)
    given = _as_list(measures)
    if not given:
        raise UsageError("no measures given (e.g. ['nDCG@10', 'Robustness@10'])")
    asked = {i: parse_measure(_papers_name(m, benchmark)) for i, m in enumerate(given)}
    robust = any(isinstance(m, Robustness) for m in asked.values())
    grouped = any(isinstance(m, GroupMeasure) for m in asked.values())
    if per_query and (robust or grouped):
        raise UsageError("Robustness and p-MRR have one value per query group, not per query: leave them out of "
                         "per_query")
    release = dict(benchmark.meta) if benchmark is not None else {}
    if changed is not None:
        release["changed"] = _given_changed(changed)
    spec = benchmark.spec if benchmark is not None else None
    scorer = Scorer(the_qrels, list(dict.fromkeys(asked.values())), spec.forms if spec else None, release)
    scores = scorer.per_query(the_run)
    if scorer.excluded:  # the kit's one aggregation rule (instir.metrics.standard), said where a mean is asked for
        warnings.warn(f"{len(scorer.excluded)} queries of the qrels have no relevant document and are not averaged "
                      "(trec_eval, ir-measures and ranx count each as 0): "
                      f"{', '.join(quoted(q) for q in scorer.excluded[:5])}", UserWarning, stacklevel=2)
    if per_query:
        wide = scores.pivot(index="qid", columns="measure", values="value")
        return pd.DataFrame({str(key): wide[str(asked[i])] for i, key in enumerate(given)})
    means = mean_by_measure(scores)
    if robust:
        if groups is None:
            groups = (robustness.query_groups(benchmark) if benchmark is not None
                      else instance_groups(sorted(set(scores["qid"]))))
        else:
            groups = _given_groups(groups, scores["qid"].unique())
        means.update(mean_by_measure(scorer.group_minima(scores, groups)))
        scorer.warn_alone(groups)
    if grouped:  # the rows as given: p-MRR's insertion tie rule ranks ties in their order
        means.update(mean_by_measure(scorer.group_values(the_run if benchmark is not None else given_rows(run))))
    for i, key in enumerate(given):
        if str(asked[i]) not in means:
            why = (f": {asked[i].requires}" if isinstance(asked[i], GroupMeasure) and asked[i].requires
                   else ": no query of the run is in the qrels")
            raise UsageError(f"{quoted(str(key))} has no value on {getattr(qrels, 'name', 'these qrels')}{why}")
    if check is not None:  # on a benchmark, as evaluate_runs notes it
        for note in scorer.depth_notes("the run", check.depth, benchmark.rankable(), check.shallowest):
            warnings.warn(note, ShallowRunsWarning, stacklevel=2)
    values = {key: float(means[str(asked[i])]) for i, key in enumerate(given)}
    return values[given[0]] if _single(measures) else values
