"""``instir retrieve``: write a run + sidecar for a benchmark and a retriever or a named
system card (reusing a complete run made from the same inputs); ``instir systems``: list
the cards and whether each can run here. Heavy modules are imported inside the handlers."""

from __future__ import annotations

import argparse

from instir.benchmarks import catalog
from instir.cli.options import (
    TEXT_WIDTH,
    add_benchmark_arguments,
    benchmark_from_args,
    depth_option,
    output_folder,
    text_table,
)
from instir.errors import UsageError
from instir.retrieval.windows import WINDOWING_MODES
from instir.terminal import terminal_text


def paper_name(text: str) -> str:
    """``--paper``'s value, one of the cards' papers (:data:`instir.systems.cards.PAPERS`): read when given, so the
    cards (and pandas) load for the command that names one, not at every command's start."""
    from instir.systems.cards import PAPERS

    if text not in PAPERS:
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(PAPERS)})")
    return text


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``retrieve`` and ``systems`` subcommands."""
    p = subparsers.add_parser("retrieve", help="retrieve with BM25, a dense model, a hybrid or a named system; "
                                               "write TREC runs",
                              description="Write a TREC run and its JSON sidecar under --out; running it again "
                                          "with the same inputs reuses the existing run.")
    add_benchmark_arguments(p)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--retriever", choices=("bm25", "dense", "hybrid"))
    which.add_argument("--system", help="a system card name (see `instir systems`), e.g. 'Promptriever-7B'")
    p.add_argument("--model", default=None,
                   help="sentence-transformers model id or path for dense/hybrid (default: bundled all-MiniLM-L6-v2)")
    p.add_argument("--cards", action="append", default=[], metavar="FILE",
                   help="extra system card file (TOML/YAML); may be repeated")
    p.add_argument("--windowing", default=None, choices=WINDOWING_MODES,
                   help="dense/hybrid: encode long texts as the mean of windows, cut as IFIR's code does (ifir: "
                        "documents and queries) or the kit's way (clean: documents only); default: no windows")
    p.add_argument("--template", default=None,
                   help="query/document template name (default: the system card's, else the authors' template "
                        "for the model family)")
    p.add_argument("--k", type=depth_option, default=None,
                   help="documents per query (default: the family's depth, else 100; on a reranking task such as "
                        "FollowIR, every candidate, whatever --k)")
    p.add_argument("--out", required=True, help="output directory for runs")
    p.set_defaults(handler=_retrieve)

    s = subparsers.add_parser("systems", help="list the system cards and whether each can run here; one card whole",
                              description="Every built-in card (one per paper row) and the cards of --cards files, "
                                          "with whether it can run on this machine and why not; with a NAME, that "
                                          "card whole: what it runs, its weights and how to download them, what "
                                          "it needs (packages, GPU, memory, the judge of an InstFol row).")
    s.add_argument("name", nargs="?", default=None, metavar="NAME",
                   help="one card's name (or its model id): show it whole")
    s.add_argument("--cards", action="append", default=[], metavar="FILE",
                   help="extra system card file (TOML/YAML); may be repeated")
    s.add_argument("--paper", type=paper_name, default=None, metavar="PAPER",
                   help=f"only this paper's cards ({', '.join(catalog.families())}, mteb: MTEB-comparable variants, "
                        "user: --cards files); with NAME, the name as this paper prints it")
    s.set_defaults(handler=_systems)


def _retrieve(args: argparse.Namespace) -> int:
    from instir.formatting import get_template
    from instir.retrieval import make_retriever, retrieve
    from instir.stages.plan import depth_of

    template = get_template(args.template) if args.template else None  # a bad name fails before any loading
    card = None
    if args.system is not None:
        if args.model is not None or args.windowing is not None:
            raise UsageError("--model and --windowing apply to --retriever dense/hybrid; a system card sets its own")
        from instir.systems import build_system, load_cards
        from instir.systems.registry import check_weights_reachable, retriever_card

        cards = load_cards(args.cards)
        card = retriever_card(args.system, cards, paper=catalog.family_of(args.benchmark))  # its paper's printed names
        check_weights_reachable(card, cards)  # offline, a missing model is one line, not the Hub client's retries
        retriever = build_system(card, cards=cards)
    else:
        retriever = make_retriever(args.retriever, args.model, windowing=args.windowing)
    benchmark = benchmark_from_args(args)
    out = output_folder(args.out)  # before the retrieval, after the benchmark is found
    try:
        k = args.k or depth_of(benchmark.name)
        run = retrieve(benchmark, retriever, template=template, k=k, out_dir=out)
    except OSError as err:  # weights neither cached nor downloadable
        if card is None:
            raise
        from instir.systems import load_cards, system_status

        _, why = system_status(card, load_cards(args.cards))
        raise UsageError(f"system {card.name!r} cannot load its model: {why or err}") from None
    state = "reused" if run.meta.get("reused") else f"written in {run.meta['wall_time_s']:.1f} s"
    print(f"{benchmark.label}: {run.df['qid'].nunique()} queries, {len(run)} rows, "
          f"template {run.meta['template']['name']} ({state})")
    print(run.meta["path"])
    return 0


def _systems(args: argparse.Namespace) -> int:
    from instir.systems.coverage import card_sheet, systems_table

    if args.name is not None:
        print(sheet_text(card_sheet(args.name, args.cards, paper=args.paper)))
        return 0
    table = systems_table(args.cards)
    if args.paper:
        table = table[table["paper"] == args.paper]
        if table.empty:  # only "user" can be empty: cards of one's own come from files
            print(f"{args.paper}: no cards (cards of your own are read from --cards FILE)")
            return 0
    print(systems_text(table))
    return 0


def sheet_text(sheet: list[tuple[str, str]], width: int = TEXT_WIDTH) -> str:
    """A card's sheet (:func:`instir.systems.coverage.card_sheet`) as ``instir systems NAME`` prints it: one field
    per paragraph, its text wrapped under the field's name, no line wider than ``width``."""
    import textwrap

    indent = max(len(field) for field, _ in sheet) + 2
    return "\n".join(textwrap.fill(terminal_text(text), width, initial_indent=f"{field}:".ljust(indent),
                                   subsequent_indent=" " * indent, break_on_hyphens=False, break_long_words=False)
                     for field, text in sheet)


def systems_text(table, width: int = TEXT_WIDTH) -> str:
    """The cards as ``instir systems`` prints them, no line wider than ``width``: one table per
    paper (name, kind, adapter, model, whether it runs here), and why a card cannot run as a
    numbered note below, each distinct reason once (a card's own model id said as "the card's
    model", so the cards that lack only their weights share one note)."""
    import textwrap

    notes: dict[str, int] = {}
    parts = []
    for paper, cards in table.groupby("paper", sort=False):
        rows = []
        for card in cards.itertuples(index=False):
            runs = "yes"
            if not card.runnable:
                why = card.reason.replace(f" {card.model} ", " the card's model ") if card.model else card.reason
                runs = f"no [{notes.setdefault(why, len(notes) + 1)}]"
            rows.append({"name": card.name, "kind": card.kind, "adapter": card.adapter, "model": card.model or "",
                         "runs": runs})
        runnable = int(cards["runnable"].sum())
        parts.append(f"{terminal_text(paper)}: {len(cards)} cards, {runnable} can run here\n"
                     + text_table(rows, width, wrap=("model", "name", "adapter")))
    parts.append("\n".join(textwrap.fill(f"[{n}] {terminal_text(why)}", width, subsequent_indent="    ")
                            for why, n in notes.items()))
    return "\n\n".join(part for part in parts if part)
