"""Reproduced numbers next to reported ones: aligned by benchmark, subset, level, setting,
measure and model, with the delta, a tolerance verdict and the known reasons for divergence.

Numbers from a bundled SAMPLE benchmark are never judged against the papers: they come from
under a hundred queries each, so any agreement or disagreement would be meaningless. A report
may still show them aligned (``compare_to_papers(..., sample_ok=True)``), every row with the verdict
"not comparable (SAMPLE)", so a student sees the shape of the comparison before running on the
real data.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterable, Mapping

import pandas as pd

from instir.benchmarks import catalog
from instir.benchmarks.fetch import NOT_CHECKED
from instir.errors import UsageError, expect, quoted
from instir.metrics.measures import check_protocol
from instir.papers.divergences import reasons_for, voiding, withholding
from instir.papers.loader import canonical_measure, family_papers, model_key, paper_names_for

#: allowed |reproduced - reported| on the unit scale (0-1 for nDCG, Robustness and InstFol),
#: by measure prefix; ``default`` for the rest. The printed rounding is added on top.
DEFAULT_TOLERANCE: dict[str, float] = {"default": 0.02, "InstFol": 0.03}

_KEYS = ["benchmark", "subset_id", "level_key", "setting", "measure", "model_key"]

_COLUMNS = [
    "paper", "table", "model", "system", "benchmark", "subset_id", "level", "setting", "metric",
    "measure_reproduced", "reported", "reproduced", "delta", "tolerance", "widened_by", "within_tolerance", "verdict",
    "other_measure", "other_reproduced", "scale", "secondary", "paper_row_too", "sample", "windowing", "engine",
    "template", "judge", "reasons", "reference", "source",
]


#: the verdicts of :func:`compare_to_papers`; a number whose grounds do not hold gets ``not comparable (<why>)``
WITHIN, OUTSIDE, NO_VALUE, SAMPLE_VERDICT = ("within tolerance", "outside tolerance", "no value",
                                             "not comparable (SAMPLE)")
#: the judge backend of :mod:`instir.judge.chat`, the only one a paper's judge model can be called through
PAPER_JUDGE_BACKEND = "openai-compatible"


class NotComparableError(ValueError):
    """Reproduced numbers that must not be compared with reported ones (e.g. sample data)."""


def not_comparable_reason(reproduced: pd.DataFrame) -> str | None:
    """Why ``reproduced`` cannot be compared with the papers, or None when it can.

    It can only when it names its benchmarks (a ``benchmark`` column) and none of them is a
    bundled sample (by name, or an ``is_sample`` column that is true).
    """
    if "benchmark" not in reproduced.columns:
        return ("the reproduced table has no 'benchmark' column, so nothing shows that its numbers "
                "come from a full benchmark")
    names = sorted({str(b) for b in reproduced["benchmark"].dropna()})
    samples = [b for b in names if catalog.is_sample(b)]
    if "is_sample" in reproduced.columns and reproduced["is_sample"].fillna(False).astype(bool).any():
        samples = samples or names
    if samples:
        return (f"the numbers of the bundled SAMPLE benchmark(s) {', '.join(samples)} come from under a hundred "
                "queries each, not the benchmark the papers measured, so they are not comparable")
    return None


def compare_to_papers(reproduced: pd.DataFrame, reported: pd.DataFrame,
            tolerance: float | Mapping[str, float] = DEFAULT_TOLERANCE, *,
            model_map: Mapping[str, str] | None = None, runs: pd.DataFrame | None = None,
            data: Mapping[str, str | None] | None = None, sample_ok: bool = False,
            protocol: str = "authors", mteb_data: Mapping[str, str | None] | None = None) -> pd.DataFrame:
    """Align reproduced numbers with reported ones (from :func:`load_reported`).

    ``reproduced`` has one row per system x measure x slice: ``benchmark`` (``instructir``,
    ``ifir/fiqa``, …), ``measure`` (or ``metric``; ``nDCG@20[ifir-native]`` keeps its variant),
    ``value`` on the kit's unit scale, a system name in ``system`` (or ``model``), and
    optionally ``subset`` (``all``/empty = none, ``average`` = IFIR's Average), ``level``
    (empty/``all`` = pooled; 0, the single level of a one-level subset, counts as pooled) and
    ``setting`` (default ``instructed``): the layout of :mod:`instir.metrics.table`. System
    names are matched to the papers' models through :func:`model_key`; ``model_map`` maps
    other names first (e.g. ``{"hybrid-gritlm": "hybrid:gritlm/gritlm-7b+bm25"}``). An Average
    row is compared only when the reproduced table has the same system and measure on all
    seven IFIR subsets: an Average over the subsets a run happened to load is another number
    than the paper's. An optional ``widen`` column (unit scale, empty = 0) widens that row's
    tolerance, e.g. by the judge's own spread of InstFol
    (:func:`instir.judge.stability.tolerance_widening`).
    ``runs`` (``benchmark``, ``system``, ``windowing``, ``engine`` and ``k``: one row per run, as
    :func:`instir.retrieval.run_windowing` and :func:`instir.retrieval.run_engine` read them from the
    sidecars, ``k`` its depth) gives every reproduced number the windowing mode and BM25 engine of the run(s)
    behind it (an IFIR average: of all its subsets' runs, ``mixed`` when they differ; ``unknown`` without
    ``runs`` or without a matching run) and their least depth; a reproduced row's own ``depth`` takes its place
    (an InstFol's: the shallower of the two runs it compares, as the judge stage writes it; an InstFol without one
    has no known depth: the runs list names only its instructed run). An optional ``card_paper`` column of ``runs``
    names the paper of the system card each run ran (empty: none): a card's run is compared with rows of its own
    family's benchmark only (a FollowIR card runs FollowIR's settings, whatever model key it shares with an IFIR row).
    An optional ``other_data`` column names what a run was retrieved over other than the benchmark it was scored on
    (``corpus``, ``queries``: the evaluate stage's ``metrics/run_checks.csv``); such a run earns no verdict. An
    optional ``template`` column names the template each run's queries were formatted with (its sidecar's:
    :func:`instir.retrieval.run_template`); a row whose own card (``reported``'s ``card_template``, by default the
    template of the row's card of its paper: :func:`instir.systems.coverage.with_row_templates`) runs another earns no
    verdict. A run whose template nothing says (a file of one's own) is taken as it is.

    A verdict is given only where it is earned (:func:`ungrounded`): on the data the paper measured (``data``:
    benchmark name -> None when its data was verified, else why not, as
    :func:`instir.benchmarks.fetch.data_check` says; a benchmark it does not name is unverified), in the
    paper's protocol (a family spec's ``[papers.protocol]``: IFIR's nDCG@20 is the ``ifir-native`` one; a number of
    MTEB's, the rule of the mteb version its source names: :data:`MTEB_RULE_CHANGES`), for a
    BM25 row by the paper's engine (from ``runs``) and for InstFol by the paper's judge (the reproduced
    table's ``judge_backend`` and ``judge_model`` columns) on every instance of its slice (the reproduced table's
    ``instances``, as the judge stage's ``judge/instfol.csv`` counts them, against the published count; a level's: its
    subset's row's), from a run as deep as the measure's cutoff (the family's
    ``depth`` for one without, such as p-MRR); otherwise the verdict is ``not comparable (<the
    reason that decides it>)``. ``protocol`` is the one the reproduced numbers were scored under (``authors`` or
    ``mteb``, as :func:`instir.metrics.evaluate_runs` takes it, another refused as there): MTEB's results store is
    compared with ``mteb`` numbers only, the papers' tables with the authors' only. ``mteb_data`` is ``data`` for
    the rows of MTEB's store (its data checks against MTEB's copy, which holds fewer queries of some IFIR subsets;
    None: ``data``).

    Returns one row per reported number, in its printed units: ``reported``,
    ``reproduced``, ``delta`` (reproduced - reported), ``tolerance`` (``tolerance`` x scale +
    the printed rounding + ``widened_by``, the row's ``widen`` in printed units),
    ``within_tolerance`` (empty without a verdict), ``verdict`` (``within tolerance``, ``outside tolerance``,
    ``no value``, ``not comparable (…)``), ``other_measure`` and ``other_reproduced`` (the same number computed
    in the other protocol, shown beside it: IFIR's standard nDCG@20), ``scale`` (printed units per unit: 100
    where the paper prints ×100), ``secondary`` (a number the paper does not print itself), ``paper_row_too`` (a
    secondary source's number the paper prints a row of its own for: shown beside that row, not judged),
    ``sample`` (a bundled sample's number), ``windowing``, ``engine``, ``judge`` and ``reasons`` (keys of
    :func:`known_divergences` that apply).

    Raises :class:`NotComparableError` for sample data, unless ``sample_ok``: then a bundled
    sample is aligned as the benchmark it samples (``ifir-sample/fiqa`` as ``ifir/fiqa``) and
    every sample row's verdict is ``not comparable (SAMPLE)``, ``within_tolerance`` empty; the rows
    of real benchmarks in the same table are compared as usual.
    """
    check_protocol(protocol)
    for name, frame in (("reproduced", reproduced), ("reported", reported)):
        expect(frame, pd.DataFrame, f"compare_to_papers({name}, …)", "; the tidy table of evaluate_runs, load_reported")
    widths = [*(tolerance.values() if isinstance(tolerance, Mapping) else [tolerance]),
              *(pd.to_numeric(reproduced["widen"]).fillna(0.0) if "widen" in reproduced.columns else [])]
    wrong = next((w for w in widths if isinstance(w, bool) or not isinstance(w, numbers.Real) or not 0 <= w <= 1), None)
    if wrong is not None:  # a negative one turns equal numbers "outside", one past a whole unit anything "within"
        raise UsageError(f"a tolerance (or a reproduced row's widen) is a number from 0 to 1 on the unit scale, got "
                         f"{quoted(wrong)}")
    reason = not_comparable_reason(reproduced)
    if reason and not (sample_ok and "benchmark" in reproduced.columns):
        raise NotComparableError(reason)
    names = reproduced["benchmark"].astype(str)
    samples = [catalog.is_sample(b) for b in names]
    if "is_sample" in reproduced.columns:
        samples = [s or bool(flag) for s, flag in zip(samples, reproduced["is_sample"].fillna(False))]
    reproduced = reproduced.assign(benchmark=[catalog.unsampled(b) for b in names], _not_comparable=samples)
    ours = _normalise_reproduced(reproduced, model_map)
    ours["windowing"], ours["engine"], ours["card_paper"], ours["template"] = (
        _one_of(_of_runs(ours, runs, c)) for c in ("windowing", "engine", "card_paper", "template"))
    ours["other_data"] = [", ".join(sorted(v - {"", "nan"})) for v in _of_runs(ours, runs, "other_data")]
    listed = [min(depths) if depths and None not in depths else None
              for depths in ({_depth(k) for k in ks} for ks in _of_runs(ours, runs, "k", whole=True))]
    ours["depth"] = [_depth(str(d)) if pd.notna(d) else None if str(m).startswith("InstFol") else k
                     for d, k, m in zip(ours["depth"], listed, ours["measure"])]  # InstFol's: both its runs', its own
    ours["instances"], ours["instances_of"] = _judged_of(ours)
    theirs = reported[(reported["model_key"] != "") & (reported["setting"] != "")].copy()
    if "card_template" not in theirs.columns:  # the template each row's own card runs: the paper's setup
        from instir.systems.coverage import with_row_templates

        theirs = with_row_templates(theirs)
    theirs["level_key"] = theirs["level"].fillna(0).astype(int)
    theirs["subset_id"] = theirs["subset_id"].fillna("").astype(str)
    theirs = _repeats_folded(theirs)
    theirs["paper_row_too"] = _printed_by_the_paper_too(theirs)
    theirs["_number"] = range(len(theirs))
    merged = theirs.merge(ours, on=_KEYS, how="inner", suffixes=("", "_ours"))
    merged["reported"] = merged["value"]
    merged["reproduced"] = merged["value_ours"] * merged["scale"]
    merged["delta"] = merged["reproduced"] - merged["reported"]
    merged["widened_by"] = merged["widen"] * merged["scale"]
    merged["tolerance"] = [_tolerance_for(m, tolerance) * s + r + w for m, s, r, w in
                           zip(merged["measure"], merged["scale"], merged["rounding"], merged["widened_by"])]
    merged = _one_row_per_number(merged)
    within = merged["delta"].abs() <= merged["tolerance"] + 1e-12
    grounds = [ungrounded(row, mteb_data if row["paper"] == "mteb" and mteb_data is not None else data, protocol)
               for row in merged.to_dict("records")]
    merged["within_tolerance"] = within.astype("boolean").mask(merged["delta"].isna() | pd.Series(
        [g is not None for g in grounds], index=merged.index))
    merged["verdict"] = [SAMPLE_VERDICT if why == "SAMPLE" else f"not comparable ({why})" if why
                         else NO_VALUE if pd.isna(delta) else WITHIN if ok else OUTSIDE
                         for why, delta, ok in zip(grounds, merged["delta"], within)]
    merged["reasons"] = ["; ".join(reasons_for(row)) for row in merged.to_dict("records")]
    merged["model"] = merged["model"].fillna(merged["model_key"])
    return merged[_COLUMNS].reset_index(drop=True)


#: The scoring protocols, as a verdict's reason names them.
PROTOCOLS = {"authors": "the authors'", "mteb": "MTEB's"}


def ungrounded(row: Mapping, data: Mapping[str, str | None] | None, protocol: str = "authors") -> str | None:
    """The one reason a verdict on an aligned row (of :func:`compare_to_papers`) is not earned, None when it is:
    ``SAMPLE`` for a bundled sample's number, then a reported number its source says not to use or that measures
    something else (a known reason that ``voids`` it: another task, other data, another setup, a mislabelled file),
    the run's own data (retrieved over another corpus or queries than it was scored on), a system card of another
    family's paper (its settings are that paper's), the template (another than the
    paper's card formats queries with), the data (not verified as the
    paper's), the scoring ``protocol`` (MTEB's store is scored under MTEB's, the papers under the authors'), the
    variant of the measure (another than the paper's), the BM25 engine (a BM25 or hybrid row not run by the paper's
    engine), the windowing of long texts (a known reason that ``withholds`` it: not IFIR's windows), the judge (an
    InstFol not judged by the paper's judge), the instances judged (an InstFol judged on a sample of its slice's
    instances, or on an unknown number: the paper's is the mean over all of them) and the run's depth (unknown, or
    fewer documents a query than the measure's cutoff, the ranks past it counting as non-relevant; a measure without
    one, such as p-MRR, needs the family's retrieval ``depth``), the first that fails."""
    if row["sample"]:
        return "SAMPLE"
    if "do not use" in str(row.get("source") or ""):
        return "its source says not to use it as this model's number"
    void = voiding(row)
    if void is not None:
        return void.title
    if row.get("other_data"):
        return f"its run was retrieved over another {row['other_data']} than the benchmark it was scored on"
    card = row.get("card_paper")
    if card in catalog.families() and card != row["benchmark"] and row["benchmark"] in catalog.families():
        theirs = catalog.family(card).printed
        return f"a {theirs} card: its settings are {theirs}'s, not {catalog.family(row['benchmark']).printed}'s"
    theirs, used = str(row.get("card_template") or ""), row.get("template", "unknown")
    if theirs and used not in ("unknown", theirs):  # the paper's setup: the queries as its card formats them
        said = "templates differ across its runs" if used == "mixed" else f"template is {quoted(used)}"
        return f"its run's {said}, the paper's card runs {quoted(theirs)}"
    family = row["benchmark"] if row["benchmark"] in catalog.families() else None
    names = ([f"{family}/{s}" for s in catalog.family(family).subsets] if family and row["subset_id"] == "avg"
             else [f"{row['benchmark']}/{row['subset_id']}" if row["subset_id"] else str(row["benchmark"])])
    for name in names:
        problem = (data or {}).get(name, NOT_CHECKED)
        if problem:
            return f"data of {name}: {problem}"
    theirs = "mteb" if row["paper"] == "mteb" else "authors"
    if protocol != theirs:
        return (f"scored under {PROTOCOLS[protocol]} protocol, the reported number under "
                f"{PROTOCOLS[theirs]}")
    paper_family = catalog.family(row["paper"]) if row["paper"] in catalog.families() else None
    spec = paper_family.papers if paper_family else {}
    protocol = _paper_protocol(row["paper"], row["measure"], row.get("source"))
    if row["measure_variant"] != protocol:
        ours = row["measure_variant"] or "standard"
        whose = "MTEB's" if row["paper"] == "mteb" else "the paper's"  # a number of MTEB's store is no paper's
        return f"{whose} {row['measure']} is {protocol or 'the standard one'}, not {ours}"
    engine = paper_family.bm25.get("engine") if paper_family else None
    if engine and str(row["model_key"]).startswith(("bm25", "hybrid:")) and row["engine"] != engine:
        return f"BM25 by {row['engine']}, the paper's by {engine}"
    withheld = withholding(row)  # long texts cut otherwise than IFIR's windows
    if withheld is not None:
        return f"{withheld.title}: IFIR's windows are windowing 'ifir', its run's is {row['windowing']}"
    judge = spec.get("judge")
    if judge and str(row["measure"]).startswith("InstFol"):
        model = str(row["judge_model"]).split(" [")[0]
        if row["judge_backend"] != PAPER_JUDGE_BACKEND or not (model == judge or model.startswith(judge + "-")):
            return f"judged by {row['judge'] or 'an unknown judge'}, the paper's by {judge}"
    cutoff = max(map(int, re.findall(r"@(\d+)", str(row["measure"]))), default=0)  # AP@1000[og]; a mean of several
    needs = f"the cutoff of {row['measure']}"
    if not cutoff and family and catalog.family(family).depth:  # p-MRR: a document missing ranks below the last
        cutoff = catalog.family(family).depth
        needs = f"the authors' depth ({cutoff}) that {row['measure']} depends on"
    if str(row["measure"]).startswith("InstFol"):
        short = _judged_short(row, names)
        if short:
            return short
    depth = row.get("depth")
    if cutoff and (depth is None or pd.isna(depth)):
        return ("the depth of its run is unknown (no k for it in the runs list or its sidecar; an InstFol's is the "
                "judge stage's, which an earlier version did not write: judge again)")
    if cutoff and depth < cutoff:
        return f"its run ranks {int(depth)} documents a query, fewer than {needs}: retrieve at k = {cutoff} or more"
    return None


#: measures whose rule MTEB changed: measure -> (the first mteb version that computes the kit's standard one, the
#: kit's variant of the rule before it). mteb ranks p-MRR's ties by document id descending from 2.19.5 (PR #5241),
#: in insertion order before (divergence ``pmrr-ties``)
MTEB_RULE_CHANGES: dict[str, tuple[tuple[int, ...], str]] = {"p-MRR": ((2, 19, 5), "insertion-ties")}


def _paper_protocol(paper: str, measure: str, source: object = "") -> str:
    """The variant of ``measure`` the paper computed (its family spec's ``[papers.protocol]``; "" = the standard one);
    for a number of MTEB's (results store or file), the rule of the mteb version its ``source`` names
    (:data:`MTEB_RULE_CHANGES`; the standard one where the source names none)."""
    if paper == "mteb":
        change = MTEB_RULE_CHANGES.get(measure)
        version = re.search(r"\bmteb (\d+(?:\.\d+)*)", str(source or ""))
        older = change and version and tuple(int(part) for part in version.group(1).split(".")) < change[0]
        return change[1] if older else ""
    spec = catalog.family(paper).papers if paper in catalog.families() else {}
    return spec.get("protocol", {}).get(measure, "")


def _repeats_folded(theirs: pd.DataFrame) -> pd.DataFrame:
    """The reported rows less those that print a number of one paper again (another table, the same setup,
    slice, measure, model and printed value: IFIR's Table 8 repeats Table 3's nDCG@20), each named in the
    ``reference`` of the row that stays, so a reproduced number is judged against it once."""
    keys = ["paper", *_KEYS, "variant", "value", "rounding"]
    keys = [k for k in keys if k in theirs.columns]
    setup = pd.Series(["\x1f".join(row) for row in theirs[keys].astype(str).itertuples(index=False, name=None)],
                      index=theirs.index, dtype=object)  # not .agg(axis=1): a Series built per row took 0.2 s
    repeated = setup.duplicated()
    if not repeated.any():
        return theirs
    first = theirs[~repeated].copy()
    again = theirs[repeated].groupby(setup[repeated], sort=False)["table"].agg(lambda t: ", ".join(dict.fromkeys(t)))
    also = setup[~repeated].map(again)
    first["reference"] = [f"{ref}; the same number in {tables}" if isinstance(tables, str) else ref
                          for ref, tables in zip(first["reference"], also)]
    return first


def _printed_by_the_paper_too(theirs: pd.DataFrame) -> pd.Series:
    """Per reported row, whether it is a secondary source's number that its paper prints a row of its own for (same
    benchmark, slice, setting, measure, model and variant: InstructIR's RepLLaMA in the Promptriever paper's Table 2),
    so a reproduced number is judged once, by the paper's row (divergence ``secondary-beside-paper``)."""
    keys = [k for k in ["paper", *_KEYS, "variant"] if k in theirs.columns]
    secondary = theirs["secondary"].fillna(False).astype(bool)
    own = set(theirs.loc[~secondary, keys].astype(str).itertuples(index=False, name=None))
    setups = theirs[keys].astype(str).itertuples(index=False, name=None)
    return pd.Series([bool(s) and setup in own for s, setup in zip(secondary, setups)], index=theirs.index)


def _one_row_per_number(merged: pd.DataFrame) -> pd.DataFrame:
    """One row per reported number, system and data (a bundled sample's or the benchmark's it samples: each keeps its
    own row): where the kit computed the number in two protocols (IFIR's standard and native nDCG@20), the paper's
    (its family spec's ``[papers.protocol]``, for MTEB's numbers their mteb version's rule; else the standard one)
    stays and the other is named beside it (``other_measure``, ``other_reproduced``)."""
    keep, others = [], {}
    # the groups' rows by position, in their order (no sub-frame per group: 22 ms for 13 groups)
    groups: dict[int, list[int]] = {}
    for position, code in enumerate(merged.groupby(["_number", "system", "sample"], sort=False).ngroup().tolist()):
        if code >= 0:  # a key with a missing part: in no group
            groups.setdefault(code, []).append(position)
    if groups:
        labels = merged.index
        paper, measure, source, variant, printed, value = (merged[column].to_numpy(dtype=object) for column in (
            "paper", "measure", "source", "measure_variant", "measure_reproduced", "reproduced"))
        for rows in groups.values():
            wanted = _paper_protocol(paper[rows[0]], measure[rows[0]], source[rows[0]])
            first = next((labels[row] for row in rows if variant[row] == wanted), labels[rows[0]])
            keep.append(first)
            rest = [row for row in rows if labels[row] != first]
            if rest:
                others[first] = ("; ".join(printed[row] for row in rest), float(value[rest[0]]))
    out = merged.loc[sorted(keep)].copy()
    out["other_measure"] = [others.get(i, ("", None))[0] for i in out.index]
    out["other_reproduced"] = [others.get(i, ("", None))[1] for i in out.index]
    return out


def tolerance_statement(tolerance: float | Mapping[str, float] = DEFAULT_TOLERANCE) -> str:
    """The tolerance rule of :func:`compare_to_papers` in one sentence, on the ×100 scale the papers print."""
    if not isinstance(tolerance, Mapping):
        rule = f"{100 * float(tolerance):g} points"
    else:
        default = float(tolerance.get("default", DEFAULT_TOLERANCE["default"]))
        others = ", ".join(f"{prefix}: {100 * float(v):g}" for prefix, v in tolerance.items() if prefix != "default")
        rule = f"{100 * default:g} points" + (f" ({others})" if others else "")
    return (f"A reproduced number is within tolerance when |reproduced − reported| ≤ {rule} on the ×100 scale, "
            "plus half the paper's last printed digit (its rounding).")


def match_systems(systems: Iterable[str], model_map: Mapping[str, str] | None = None) -> pd.DataFrame:
    """How each reproduced system name is matched to the papers' model names: ``system``,
    ``model_key`` (:func:`model_key`), and per family's paper (``<printed> name``: ``InstructIR
    name``, ``IFIR name``) the names it prints for that key (empty when the paper reports no
    such model, so the system has no row to compare)."""
    papers = {f"{catalog.family(p).printed} name": p for p in family_papers()}
    rows = []
    for system in dict.fromkeys(str(s) for s in systems):
        key = model_key(system, model_map)
        rows.append({"system": system, "model_key": key,
                     **{column: ", ".join(paper_names_for(key, p)) for column, p in papers.items()}})
    return pd.DataFrame(rows, columns=["system", "model_key", *papers])


def comparison_view(compared: pd.DataFrame) -> pd.DataFrame:
    """The output of :func:`compare_to_papers` as a report shows it: one row per reproduced number, the
    paper's row first (paper, table, model as printed), then system, slice, measure, and
    reported, reproduced, delta and tolerance on the unit scale (a report multiplies them by
    100, as the papers print), the verdict, the same number in the other protocol where the kit computes two
    (``other protocol``, ``reproduced (other)``) and the known reasons. Sources are left to a table
    of their own (one per paper table, not one per row)."""
    scale = compared["scale"].astype(float)
    view = pd.DataFrame({
        "paper": compared["paper"], "table": compared["table"], "paper model": compared["model"],
        "system": compared["system"], "subset": compared["subset_id"].replace("", pd.NA),
        "level": compared["level"], "measure": compared["measure_reproduced"],
        "reported": compared["reported"] / scale, "reproduced": compared["reproduced"] / scale,
        "delta": compared["delta"] / scale, "tolerance": compared["tolerance"] / scale,
        "verdict": compared["verdict"], "other protocol": compared["other_measure"].replace("", pd.NA),
        "reproduced (other)": compared["other_reproduced"] / scale, "reasons": compared["reasons"],
    })
    return view.reset_index(drop=True)


def _tolerance_for(measure: str, tolerance: float | Mapping[str, float]) -> float:
    if not isinstance(tolerance, Mapping):
        return float(tolerance)
    for prefix, value in tolerance.items():
        if prefix != "default" and str(measure).startswith(prefix):
            return float(value)
    return float(tolerance.get("default", DEFAULT_TOLERANCE["default"]))


def _column(df: pd.DataFrame, names: tuple[str, ...], what: str) -> pd.Series:
    for name in names:
        if name in df.columns:
            return df[name]
    raise ValueError(f"reproduced table needs a {what} column (one of {', '.join(names)})")


def _normalise_reproduced(reproduced: pd.DataFrame, model_map: Mapping[str, str] | None) -> pd.DataFrame:
    """Reproduced rows with the alignment keys of the reported tables."""
    measures = [canonical_measure(m) for m in _column(reproduced, ("measure", "metric"), "measure")]
    systems = _column(reproduced, ("system", "model", "retriever"), "system")
    bench = reproduced["benchmark"].astype(str)
    subset = bench.str.partition("/")[2]
    if "subset" in reproduced.columns:
        given = reproduced["subset"].fillna("").astype(str)
        clash = (subset != "") & ~given.isin(["", "all", "average", "Average"]) & (given != subset)
        if clash.any():
            row = reproduced[clash].iloc[0]
            raise UsageError(f"reproduced table, column 'subset': {quoted(row['subset'])} contradicts the benchmark "
                             f"{quoted(row['benchmark'])}")
        subset = given.where(given != "", subset)
    subset = subset.replace({"all": "", "average": "avg", "Average": "avg"})
    level = reproduced["level"] if "level" in reproduced.columns else pd.Series(pd.NA, index=reproduced.index)
    ours = pd.DataFrame({
        "benchmark": [catalog.family_of(b) or b.partition("/")[0] for b in bench],
        "subset_id": subset.to_numpy(),
        "level_key": [_level_key(v) for v in level],
        "level_was_zero": [_is_zero(v) for v in level],
        "setting": (reproduced["setting"].fillna("instructed").astype(str)
                    if "setting" in reproduced.columns else "instructed"),
        "measure": [m for m, _ in measures],
        "measure_variant": [v for _, v in measures],
        "measure_reproduced": [f"{m}[{v}]" if v else m for m, v in measures],
        **{column: (reproduced[column].fillna("").astype(str).to_numpy() if column in reproduced.columns else "")
           for column in ("judge_backend", "judge_model")},
        "model_key": [model_key(s, model_map) for s in systems],
        "system": systems.astype(str).to_numpy(),
        "value": pd.to_numeric(_column(reproduced, ("value",), "value")).to_numpy(dtype=float),
        "widen": (pd.to_numeric(reproduced["widen"]).fillna(0.0).to_numpy(dtype=float)
                  if "widen" in reproduced.columns else 0.0),
        "sample": reproduced["_not_comparable"].to_numpy(dtype=bool) if "_not_comparable" in reproduced else False,
        "depth": reproduced["depth"].to_numpy(dtype=object) if "depth" in reproduced else None,
        "instances": reproduced["instances"].to_numpy(dtype=object) if "instances" in reproduced else None,
    })
    ours["judge"] = [f"{backend}: {model}" if model else "" for backend, model in
                     zip(ours["judge_backend"], ours["judge_model"])]
    ours = _without_partial_averages(ours)
    # a sample and the benchmark it samples may share a report; two systems of one model (a card's run beside a
    # run named after the model) are each compared with its row
    keys = _KEYS + ["system", "measure_reproduced", "sample"]
    zero_dupes = ours["level_was_zero"] & ours.duplicated(keys, keep=False)
    ours = ours[~zero_dupes]
    clash = ours[ours.duplicated(keys, keep=False)]
    if len(clash):
        first = clash.iloc[0]
        raise ValueError(
            f"reproduced table has several values for {first['system']} / {first['measure_reproduced']} / "
            f"{first['benchmark']} {first['subset_id']} level {first['level_key']}: give each run its own system name")
    return ours.drop(columns="level_was_zero")


def _without_partial_averages(ours: pd.DataFrame) -> pd.DataFrame:
    """``ours`` less the Average rows whose system and measure lack one of the subsets the paper
    averages over (every subset of a family whose spec has an Average: IFIR Table 3's seven)."""
    keys = ["benchmark", "system", "measure_reproduced"]
    averaged = {name: set(catalog.family(name).subsets) for name in catalog.families() if catalog.family(name).average}
    covered = ours.groupby(keys)["subset_id"].agg(set)
    is_average = ours["subset_id"] == "avg"
    complete = pd.Series([key[0] in averaged and averaged[key[0]] <= covered.get(key, set())
                          for key in zip(*(ours[k] for k in keys))], index=ours.index, dtype=bool)
    return ours[~is_average | complete]


def _of_runs(ours: pd.DataFrame, runs: pd.DataFrame | None, column: str, *, whole: bool = False) -> list[set[str]]:
    """Per reproduced row, what the run(s) behind it say in ``column`` of ``runs`` (their windowing
    mode, their BM25 engine, their depth; see :func:`compare_to_papers`), for a family's average those of its
    subsets' runs; an empty set where none does, and with ``whole`` for an average where a subset has no run.
    A bundled sample's row (renamed after the benchmark it samples) reads the sample's runs, a real row the real
    benchmark's."""
    if runs is None or column not in runs.columns:
        return [set() for _ in range(len(ours))]
    values: dict[tuple[str, str, str, bool], set[str]] = {}
    for benchmark, system, value in runs[["benchmark", "system", column]].itertuples(index=False):
        family, _, subset = catalog.unsampled(str(benchmark)).partition("/")
        values.setdefault((str(system), family, subset, catalog.is_sample(str(benchmark))), set()).add(str(value))

    def behind(system: str, benchmark: str, subset: str, sample: bool) -> set[str]:
        if subset != "avg" or benchmark not in catalog.families():
            return values.get((system, benchmark, subset, sample), set())
        each = [values.get((system, benchmark, s, sample), set()) for s in catalog.family(benchmark).subsets]
        return set().union(*each) if all(each) or not whole else set()

    rows = ours[["system", "benchmark", "subset_id", "sample"]].itertuples(index=False)
    return [behind(system, benchmark, subset, bool(sample)) for system, benchmark, subset, sample in rows]


def _judged_of(ours: pd.DataFrame) -> tuple[list[object], list[int | None]]:
    """Per reproduced row, for an InstFol, how many instances of its slice were judged and how many the slice has
    (the published count: :meth:`instir.benchmarks.catalog.Entry.expected_counts`; an Average's, of every
    subset); a level's are its subset's (the catalog counts no level, and a subset judged whole judged each level
    whole). None where not InstFol or not known."""
    keys = ["system", "benchmark", "subset_id", "measure_reproduced", "sample"]
    rows = ours[[*keys, "level_key", "instances"]].itertuples(index=False, name=None)
    pooled = {tuple(key): n for *key, level, n in rows if level == 0}
    judged, of = [], []
    for *key, level, n, measure in ours[[*keys, "level_key", "instances", "measure"]].itertuples(index=False,
                                                                                                   name=None):
        instfol = str(measure).startswith("InstFol")
        count = pooled.get(tuple(key)) if level else n
        judged.append(count if instfol and count is not None and pd.notna(count) else None)
        of.append(_slice_instances(key[1], key[2]) if instfol else None)
    return judged, of


def _slice_instances(family: str, subset: str) -> int | None:
    """The published instance count of a family's subset (``avg``: of all its subsets; a family without subsets:
    its own), None where the catalog has none."""
    if family not in catalog.families():
        return None
    spec = catalog.family(family)
    names = spec.benchmarks() if subset == "avg" or not spec.subsets else [f"{family}/{subset}"]
    if subset not in ("avg", "") and spec.subsets and subset not in spec.subsets:
        return None
    counts = [catalog.entry(name).expected_counts().get("queries") for name in names]
    return None if None in counts else sum(counts)


def _judged_short(row: Mapping, names: list[str]) -> str | None:
    """Why an InstFol ``row`` was not judged on every instance of its slice (its data ``names``), None when it was."""
    judged, total = row.get("instances"), row.get("instances_of")
    if judged is None or pd.isna(judged):
        return ("how many of its instances were judged is unknown (judge/instfol.csv without an 'instances' count: "
                "judge again)")
    if total is None or pd.isna(total) or int(judged) >= int(total):
        return None
    total = int(total)
    largest = max(_slice_instances(*name.partition("/")[::2]) or 0 for name in names)
    where = names[0] if len(names) == 1 else f"{row['benchmark']}'s {len(names)} subsets"
    return (f"judged on {int(judged):,} of the {total:,} instances of {where}, the paper's value is the mean over all "
            f"of them: judge every one (instir run -p judge_max_instances={largest} or more; instir judge without "
            "--max-instances)")


def _depth(value: str) -> int | None:
    """A run's depth as ``runs`` gives it (``20``, ``20.0`` from a CSV), None when it is no whole number from 1."""
    try:
        number = float(value) if value.strip().isascii() else math.nan
    except ValueError:
        return None
    return int(number) if number.is_integer() and number >= 1 else None


def _one_of(found: list[set[str]]) -> list[str]:
    """The one value each row's runs agree on, ``mixed`` where they differ, ``unknown`` where none says."""
    return [next(iter(m)) if len(m) == 1 else "mixed" if m else "unknown" for m in found]


def _level_key(value: object) -> int:
    """0 for pooled (empty, ``all``, NA, or level 0), else the level number."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return 0
    text = str(value).strip().lower()
    if text in ("", "all", "pooled", "none", "nan"):
        return 0
    try:
        number = float(text)
    except ValueError:
        number = math.nan
    if not number.is_integer() or number < 0:
        raise UsageError(f"reproduced table, column 'level': {quoted(value)} is no level (a whole number, or 'all')")
    return int(number)


def _is_zero(value: object) -> bool:
    return str(value).strip() in ("0", "0.0")
