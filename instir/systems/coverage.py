"""Which paper rows the kit can reproduce: every model a paper reports -> its system card ->
whether that card can run here (or why not) -> the reproduced value where a run exists.

Paper rows and cards meet on the paper and the model key of
:func:`instir.papers.loader.model_key` (lower-case Hugging Face id, ``bm25``,
``openai:<model>``, ``hybrid:<dense key>+bm25``), so a card's name need not equal the
printed one (IFIR prints ``E5-mistral-7B`` and ``E5-mistral-7b-inst`` for one model). A
paper row with no card of its own paper is joined to the other paper's card of the same model
(InstructIR's Promptriever row, from the Promptriever paper, runs with the IFIR card
``Promptriever-7B``), and its reason says so. A row whose key is no card's (a model the paper
names only by its printed name: FollowIR's ``OpenAI v3 Large``, ``TART-Contriever``) is joined to
the card of its paper with that name, ``(…)`` suffix aside. Kit variants (cards with
``variant_of``) are not paper rows and are never joined.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import pandas as pd

from instir.benchmarks import catalog
from instir.papers.loader import HYBRID_PREFIX, family_papers, load_reported, model_key
from instir.systems.cards import SystemCard, base_name, get_card, load_cards
from instir.systems.registry import API_ADAPTERS, system_status


def paper_row_key(card: SystemCard, cards: Mapping[str, SystemCard]) -> str:
    """The model key of the paper row ``card`` reproduces."""
    if card.adapter == "bm25":
        return "bm25"
    if card.adapter == "hybrid":
        return f"{HYBRID_PREFIX}{paper_row_key(get_card(card.params['dense'], cards), cards)}+bm25"
    if card.adapter in API_ADAPTERS:
        return model_key(f"openai:{card.model}")
    return model_key(card.model)


def systems_table(paths: Iterable[str | Path] = (), cards: Mapping[str, SystemCard] | None = None) -> pd.DataFrame:
    """One row per card (built-in and from ``paths``): name, paper, kind, adapter, model,
    template, whether it can run here and why not, and its source in the authors' code."""
    cards = load_cards(paths) if cards is None else cards
    rows = []
    for card in cards.values():
        runnable, reason = system_status(card, cards)
        rows.append({"name": card.name, "paper": card.paper, "kind": card.kind, "adapter": card.adapter,
                     "model": card.model, "template": card.template, "runnable": runnable, "reason": reason,
                     "source": card.source})
    return pd.DataFrame(rows)


def _reproduced(out_dir: Path | None) -> dict[str, str]:
    """Card name -> the headline values that ``<out_dir>/metrics/metrics.csv`` holds for it
    (instructed runs, all levels), one ``benchmark subset measure=value`` per slice, the value
    ×100 as the papers print it."""
    path = None if out_dir is None else Path(out_dir) / "metrics" / "metrics.csv"
    if path is None or not path.is_file():
        return {}
    table = pd.read_csv(path, dtype={"level": str, "subset": str})
    headline = {name: catalog.family(name).headline[0] for name in catalog.families()}
    wanted = table[(table["level"] == "all") & (table["measure"] == table["benchmark"].map(catalog.family_of)
                                                                   .map(headline))]
    out: dict[str, list[str]] = {}
    for row in wanted.itertuples(index=False):
        subset = "" if row.subset in ("all", "", "nan") else f" {row.subset}"
        out.setdefault(str(row.system), []).append(f"{row.benchmark}{subset} {row.measure}={100 * row.value:.1f}")
    return {system: "; ".join(values) for system, values in out.items()}


def _other_papers_card(by_key: Mapping[tuple[str, str], SystemCard], paper: str, key: str) -> SystemCard | None:
    """The card of model ``key`` made for another paper than ``paper``, if any."""
    return next((card for (other, k), card in by_key.items() if k == key and other != paper), None)


def coverage_matrix(out_dir: str | Path | None = None, cards: Mapping[str, SystemCard] | None = None) -> pd.DataFrame:
    """Every model row of the families' reported tables (hybrid rows separately),
    with its card (empty when the kit has none), whether the card can run here, why not,
    and the values reproduced for it in ``out_dir`` (runs named after the card, as notebook
    02 names its ``systems``)."""
    cards = load_cards() if cards is None else cards
    by_key: dict[tuple[str, str], SystemCard] = {}
    by_name: dict[tuple[str, str], SystemCard] = {}
    for card in cards.values():
        if card.paper in family_papers() and not card.variant_of:
            by_key.setdefault((card.paper, paper_row_key(card, cards)), card)
            by_name.setdefault((card.paper, base_name(card.name)), card)
    reproduced = _reproduced(Path(out_dir) if out_dir is not None else None)
    rows = []
    for paper in family_papers():
        reported = load_reported(paper)
        models = reported[reported["model"].notna() & (reported["model"].astype(str) != "")]
        for (model, key), _ in models.groupby(["model", "model_key"], sort=False):
            card = (by_key.get((paper, key)) or by_name.get((paper, base_name(model)))
                    or _other_papers_card(by_key, paper, key))
            if card is None:
                runnable, reason = False, "no system card"
            else:
                runnable, reason = system_status(card, cards)
                if card.paper != paper:
                    borrowed = f"the {card.paper} paper's card of this model (settings as that paper ran it)"
                    reason = f"{borrowed}; {reason}" if reason else borrowed
            rows.append({"paper": paper, "model": model, "model_key": key, "card": card.name if card else "",
                         "adapter": card.adapter if card else "", "runnable": runnable, "reason": reason,
                         "reproduced": reproduced.get(card.name, "") if card else ""})
    return pd.DataFrame(rows)
