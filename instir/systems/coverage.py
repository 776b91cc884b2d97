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

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

import pandas as pd

from instir.benchmarks import catalog
from instir.extras import install_hint
from instir.papers.loader import HYBRID_PREFIX, family_papers, load_reported, model_key
from instir.retrieval.model_files import hub_command
from instir.systems.cards import UNAVAILABLE, SystemCard, base_name, get_card, load_cards
from instir.systems.registry import (
    API_ADAPTERS,
    card_weights,
    missing_requirements,
    requirements,
    system_status,
)


def paper_row_key(card: SystemCard, cards: Mapping[str, SystemCard]) -> str:
    """The model key of the paper row ``card`` reproduces."""
    if card.adapter in ("bm25", "paper-bm25"):
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


def card_sheet(name: str, paths: Iterable[str | Path] = (), cards: Mapping[str, SystemCard] | None = None, *,
               paper: str | None = None) -> list[tuple[str, str]]:
    """One card whole, as ``instir systems NAME`` prints it, ``(field, text)`` in reading order: what it runs (every
    field the card sets), the weights it loads (here or not, gated or not) and the commands that download them, the
    packages it needs, the GPU and memory its ``resources`` ask for, the judge an InstFol row of its paper needs,
    whether it can run here and why not, and where in the authors' code it comes from. ``name`` as
    :func:`instir.systems.cards.get_card` finds it (``paper``'s printed names first)."""
    cards = load_cards(paths) if cards is None else cards
    card = get_card(name, cards, paper=paper)
    runnable, reason = system_status(card, cards)
    shown = {key: value for key, value in card.to_dict().items()
             if key not in ("name", "paper", "kind", "adapter", "requires", "resources", "source", "variant_of")
             and value not in ("", None, {}, [])}
    runs = "; ".join(f"{key} {value}" if not isinstance(value, dict) else
                     f"{key} " + ", ".join(f"{k}={v}" for k, v in value.items()) for key, value in shown.items())
    weights = card_weights(card, cards)
    missing = missing_requirements(card)
    gpus, memory = card.resources.get("num_gpus"), card.resources.get("memory_gb")
    family = catalog.family(card.paper) if card.paper in catalog.families() else None
    judge = family.papers.get("judge") if family else None
    sheet = [("card", card.name + (f" (a variant of {card.variant_of})" if card.variant_of else "")),
             ("paper", card.paper + (f" ({paper} has no card of that name)" if paper and paper != card.paper else "")),
             ("kind", f"{card.kind}, adapter {card.adapter}"), ("runs", runs or "—"),
             ("weights", "; ".join(f"{w.model}" + (f" @ {w.revision}" if w.revision else "") + f" ({w.role}: "
                                   + ("here" if w.present else "not here") + (", gated: accept its licence on "
                                   f"https://huggingface.co/{w.model}, then {hub_command('login')}" if w.gated else "")
                                   + ")" for w in weights) or "none to download"),
             ("download", "; ".join(w.download for w in weights if not w.present) or "nothing"),
             ("needs", ", ".join(requirements(card)) + (f" ({'; '.join(dict.fromkeys(map(install_hint, missing)))})"
                                                        if missing else " (installed)") if requirements(card)
              else "nothing beyond the kit"),
             ("resources", (f"{gpus:g} GPU" if gpus else "no GPU") + (f", {memory:g} GiB memory" if memory else "")
              + ("" if card.resources else " (the card asks for nothing: runs on a CPU)"))]
    if judge:
        sheet.append(("InstFol", f"the paper judged with {judge} through an OpenAI-compatible endpoint: instir "
                                 f"run --judge openai -p judge_model={judge} (the key from OPENAI_API_KEY); another "
                                 "judge's InstFol gets no verdict"))
    sheet += [("runs here", "yes" if runnable else f"no: {reason}"), ("source", card.source or "—")]
    return sheet


def card_needs(card: SystemCard, cards: Mapping[str, SystemCard]) -> str:
    """What running ``card`` needs that this machine lacks, in a few words (the coverage table's "what you need"):
    the GPU and memory its ``resources`` ask for, the extra of its missing packages, the weights not here (gated
    ones said so), an API key; empty when nothing is missing and it asks for no GPU."""
    needs = []
    gpus, memory = card.resources.get("num_gpus"), card.resources.get("memory_gb")
    if gpus:
        needs.append(f"{gpus:g} GPU" + (f", {memory:g} GiB" if memory else ""))
    needs += list(dict.fromkeys(install_hint(m) for m in missing_requirements(card)))
    absent = [w.model + (" (gated)" if w.gated else "") for w in card_weights(card, cards) if not w.present]
    if absent:
        needs.append("download " + ", ".join(absent))
    if card.adapter in API_ADAPTERS:
        needs.append(f"an API key in {card.params.get('api_key_env', 'OPENAI_API_KEY')}")
    if card.adapter == UNAVAILABLE:
        needs.append("no adapter in the kit")
    return "; ".join(needs)


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
    with its card (empty when the kit has none), whether the card can run here, why not, what it
    needs (:func:`card_needs`; ``instir systems NAME`` says it whole) and the values reproduced for
    it in ``out_dir`` (runs named after the card, as notebook 02 names its ``systems``)."""
    cards = load_cards() if cards is None else cards
    reproduced = _reproduced(Path(out_dir) if out_dir is not None else None)
    rows = []
    for paper, model, key, card in paper_rows(cards):
        if card is None:
            runnable, reason = False, "no system card"
        else:
            runnable, reason = system_status(card, cards)
            if card.paper != paper:
                borrowed = (f"the {card.paper} paper's card of this model (settings as that paper ran it: its number "
                            "is shown beside this row, not judged)")
                reason = f"{borrowed}; {reason}" if reason else borrowed
        rows.append({"paper": paper, "model": model, "model_key": key, "card": card.name if card else "",
                     "adapter": card.adapter if card else "", "runnable": runnable, "reason": reason,
                     "what you need": row_needs(paper, card, cards),
                     "reproduced": reproduced.get(card.name, "") if card else ""})
    return pd.DataFrame(rows)


#: How to give a paper row a card of its own (the coverage table's "what you need" for a row that has none).
WRITE_A_CARD = ("no card reproduces this row's setup: write one ([[card]] entries in a TOML or YAML file, fields as "
                "in instir/systems/cards/<paper>.toml; README.md, Paper systems), pass --cards FILE")


def row_needs(paper: str, card: SystemCard | None, cards: Mapping[str, SystemCard]) -> str:
    """What a paper row needs for a verdict (the coverage table's "what you need"): what running its own card needs
    (:func:`card_needs`), else a card of its setup (:data:`WRITE_A_CARD`), and for a row joined to another paper's
    card, that card's needs said as that card's: its number is shown beside the row, never judged."""
    if card is None:
        return WRITE_A_CARD
    if card.paper == paper:
        return card_needs(card, cards)
    needs = card_needs(card, cards) or "nothing more here"
    return (f"{WRITE_A_CARD}; {card.name}, the {card.paper} paper's card (shown beside this row, not judged), "
            f"needs: {needs}")


def with_row_templates(reported: pd.DataFrame, cards: Mapping[str, SystemCard] | None = None) -> pd.DataFrame:
    """``reported`` (rows with ``paper`` and ``model_key``) with ``card_template``: the template each row's own card
    formats queries with, the setup a run must share to earn a verdict on that row (:func:`instir.papers.
    compare_to_papers`); empty for a row without a card of its own paper, or whose card names none (a reranker)."""
    cards = load_cards() if cards is None else cards
    templates = {(paper, key): card.template for paper, _, key, card in paper_rows(cards)
                 if card is not None and card.paper == paper and card.template}
    return reported.assign(card_template=[templates.get((str(p), str(k)), "")
                                          for p, k in zip(reported["paper"], reported["model_key"])])


def paper_rows(cards: Mapping[str, SystemCard]) -> Iterator[tuple[str, str, str, SystemCard | None]]:
    """Every model row of the families' reported tables as ``(paper, printed model, model key, card)``: the
    card of its paper with its key, else the one named as the row is, else another paper's card of the model
    (None: no card). The one join of rows and cards, for the coverage matrix and :func:`card_row_keys`."""
    by_key: dict[tuple[str, str], SystemCard] = {}
    by_name: dict[tuple[str, str], SystemCard] = {}
    for card in cards.values():
        if card.paper in family_papers() and not card.variant_of:
            by_key.setdefault((card.paper, paper_row_key(card, cards)), card)
            by_name.setdefault((card.paper, base_name(card.name)), card)
    for paper in family_papers():
        reported = load_reported(paper)
        models, keys = reported["model"], reported["model_key"]
        named = models.notna() & (models.astype(str) != "") & keys.notna()
        # each (model, key) pair once, in the order of its first row (as a groupby without sorting meets them)
        for model, key in dict.fromkeys(zip(models[named], keys[named])):
            yield paper, model, key, (by_key.get((paper, key)) or by_name.get((paper, base_name(model)))
                                      or _other_papers_card(by_key, paper, key))


def card_row_keys(cards: Mapping[str, SystemCard] | None = None) -> dict[str, str]:
    """Card name -> the model key of the row of its own paper it reproduces (as :func:`paper_rows` joins them):
    what a run of the card is compared with (``model_map`` of :func:`instir.papers.compare_to_papers`), whatever
    the run is named. Kit variants and cards no row of their paper joins are not here."""
    cards = load_cards() if cards is None else cards
    out: dict[str, str] = {}
    for paper, _, key, card in paper_rows(cards):
        if card is not None and card.paper == paper:
            out.setdefault(card.name, key)
    return out
