"""Sentences that say what a report's numbers show, computed from the numbers themselves, so
the text stays true whatever data, retrievers or judge a run used."""

from __future__ import annotations

import pandas as pd

from instir.benchmarks.catalog import Family
from instir.judge.types import LABELS
from instir.metrics.measures import Robustness, parse_measure
from instir.report.html import markdown_text

#: suffix notebook 02 gives the query-only run of a system
QUERY_ONLY = " (query-only)"


def _pct(value: float) -> str:
    return f"{100 * value:.1f}"


def explain_runs(table: pd.DataFrame, per_query: pd.DataFrame, spec: Family) -> str:
    """Markdown bullets on one benchmark's results, on the spec's first ``headline`` measure: per
    retriever, the instructed against the query-only run; where the second headline measure is the
    first one's Robustness (InstructIR's nDCG@10 and Robustness@10), how far it falls below the
    mean (each query group counts only its worst instance); and, where the spec says what an
    instance below 1 means (``[report] missed``), how many instances are. ``table``: the tidy
    metrics rows of that benchmark (``system``, ``measure``, ``value``, ``level``); ``per_query``:
    its per-instance values of the first measure (``system``, ``value``). Empty when no system has
    the measures."""
    measure, second = (list(spec.headline) + ["", ""])[:2]
    robust = second if second and parse_measure(second) == Robustness(parse_measure(measure)) else ""
    pooled = table[table["level"].astype(str) == "all"] if "level" in table.columns else table
    values = pooled.set_index(["system", "measure"])["value"]
    missed_what, why = spec.report.get("missed"), spec.report.get("missed_why", "")
    lines = []
    for system in dict.fromkeys(pooled["system"]):
        if system.endswith(QUERY_ONLY) or (system, measure) not in values or (robust and (system, robust)
                                                                                not in values):
            continue
        mean = float(values[(system, measure)])
        text = f"- **{markdown_text(system)}**: {markdown_text(measure)} {_pct(mean)}"
        alone = (system + QUERY_ONLY, measure)
        if alone in values:  # differences of the printed values, so the sentence adds up as a reader reads it
            gain = round(float(_pct(mean)) - float(_pct(float(values[alone]))), 1)
            text += (f" with the instruction against {_pct(float(values[alone]))} with the query alone "
                     f"({'+' if gain >= 0 else '−'}{abs(gain):.1f} points): "
                     + ("the instruction steers the ranking towards what it asks for." if gain > 0 else
                        "the instruction does not help this retriever here."))
        if robust:
            worst = float(values[(system, robust)])
            gap = round(float(_pct(mean)) - float(_pct(worst)), 1)
            text += (f" {markdown_text(robust)} is {_pct(worst)}, {abs(gap):.1f} points "
                     f"{'lower' if gap >= 0 else 'higher'}: it keeps only "
                     "the worst instance of each query group, so one instruction the retriever fails costs the whole "
                     "group.")
        scores = per_query.loc[per_query["system"] == system, "value"]
        missed = int((scores < 1.0 - 1e-12).sum())
        if len(scores) and missed_what:
            text += f" In {missed} of {len(scores)} instances {missed_what}" + (f": {why}" if missed else ".")
        lines.append(text)
    if not lines:
        return ""
    lexical = any(s.split(":", 1)[0].lower().startswith("bm25") for s in pooled["system"])
    if lexical:
        lines.append("- BM25 matches **words, not conditions**: a passage that uses the instruction's words while "
                     "violating what it asks for scores as high as one that satisfies it; telling them apart "
                     "needs a model that reads the instruction.")
    return "\n".join(lines)


def explain_agreement(per_query: pd.DataFrame, spec: Family) -> str:
    """A Markdown sentence on how often the two measures of the spec's ``[report] agree`` (IFIR's
    standard and IFIR-native nDCG@20) give an instance the same score, and why they can differ
    (``agree_why``), so two equal columns read as a finding instead of a bug. ``per_query``: the
    per-instance values of the family's runs (``benchmark``, ``system``, ``qid``, ``measure``,
    ``value``). Empty when the spec names no pair or no instance has both."""
    pair = spec.report.get("agree")
    if not pair:
        return ""
    first, second = pair
    both = (per_query[per_query["measure"].isin(pair)]
            .pivot_table(index=["benchmark", "system", "qid"], columns="measure", values="value", aggfunc="first")
            .dropna())
    if not len(both) or first not in both.columns or second not in both.columns:
        return ""
    equal = int(((both[first] - both[second]).abs() <= 1e-12).sum())
    names = f"{markdown_text(first)} and {markdown_text(second)}"
    why = spec.report.get("agree_why", "")
    if equal == len(both):
        return (f"**{names} are equal on all {len(both)} instance scores here** (every system and subset). "
                f"{why} On these runs neither changes a score.")
    return (f"**{names} are equal on {equal} of {len(both)} instance scores** (every system and subset); on the "
            f"other {len(both) - equal} they differ. {why}")


def constant_judge(pairs: pd.DataFrame) -> str | None:
    """A plain sentence when every successful judgment of the validation got the same label
    (the judge is constant, so it separates nothing here), else None. ``pairs``: the
    validation pairs (``judge_grade``, ``error``; with ``norm``, weighted scores that differ are said to be
    what the correlations, ROC AUC and InstFol still read)."""
    good = pairs[pairs["error"].isna() & pairs["judge_grade"].notna()]
    grades = set(good["judge_grade"].astype(int))
    if len(good) < 2 or len(grades) != 1:
        return None
    label = LABELS[next(iter(grades))].replace("_", " ")
    if "norm" in good and good["norm"].nunique() > 1:  # one label, weighted scores that still differ
        return (f"**The judge's labels are constant here:** it labelled all {len(good)} successfully judged pairs "
                f"**{markdown_text(label)}**, whatever their gold label, so its kappa figures are at chance or "
                "undefined; only its weighted scores differ from pair to pair, and the correlations, ROC AUC and "
                "InstFol read those.")
    return (f"**The judge is constant here:** it labelled all {len(good)} successfully judged pairs "
            f"**{markdown_text(label)}**, whatever their gold label. It does not tell passages apart on these pairs, "
            "so its agreement figures are undefined or at chance and its InstFol values carry no information about "
            "the retrievers.")
