"""instir: a reproducibility kit for instruction-following retrieval (InstructIR, IFIR).

The public API, one name per stage of the data flow (benchmark → formatted queries → run →
metrics / judgments → report). Names are imported on first use (PEP 562), so the ``instir``
command starts without loading torch, pandas or scipy.
"""

import warnings

from instir._lazy import lazy_exports

__version__ = "0.1.0"

# tqdm.auto (the kit's bars, and bm25s', huggingface_hub's) in a Jupyter kernel without ipywidgets: the
# plain text bar, the one wanted there, without the "IProgress not found" warning it gives first (a red
# box on every report page). Set before any submodule, so before any library imports tqdm.auto.
warnings.filterwarnings("ignore", message="IProgress not found")

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    # benchmarks
    "instir.benchmarks": ("Benchmark", "Query", "Doc", "FormatError", "load_benchmark", "list_benchmarks"),
    # query formatting
    "instir.formatting": ("Template", "get_template", "register_template"),
    # runs and retrievers
    "instir.retrieval": ("Run", "read_run", "write_run", "retrieve", "make_retriever", "system_name"),
    "instir.retrieval.lexical": ("BM25Retriever",),
    "instir.retrieval.dense": ("DenseRetriever",),
    "instir.retrieval.fusion": ("rrf",),
    # paper systems (cards and the adapters that build them)
    "instir.systems": ("SystemCard", "load_cards", "get_card", "build_system"),
    # metrics
    "instir.metrics": ("evaluate", "evaluate_runs", "compare_runs", "paired_tests"),
    # judge
    "instir.judge": ("rubric_for", "CachedJudge"),
    "instir.judge.factory": ("make_judge",),
    "instir.judge.following": ("instfol",),
    "instir.judge.validation": ("validate_judge",),
    # papers and reports
    "instir.papers": ("load_reported", "compare_to_papers"),
    "instir.pipeline": ("run_reports",),
    "instir.report.explorer": ("explore",),
}, deprecated={"compare": "compare_to_papers", "validate": "validate_judge"},
    namespaces=("show",))  # the notebooks' tables and figures
