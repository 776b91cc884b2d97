"""instir: a reproducibility kit for instruction-following retrieval (InstructIR, IFIR).

The public API, one name per stage of the data flow (benchmark → formatted queries → run →
metrics / judgments → report). Names are imported on first use (PEP 562), so the ``instir``
command starts without loading torch, pandas or scipy.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    # benchmarks
    "Benchmark": "instir.benchmarks", "Query": "instir.benchmarks", "Doc": "instir.benchmarks",
    "FormatError": "instir.benchmarks", "load_benchmark": "instir.benchmarks", "list_benchmarks": "instir.benchmarks",
    # query formatting
    "Template": "instir.formatting", "get_template": "instir.formatting", "register_template": "instir.formatting",
    # runs and retrievers
    "Run": "instir.retrieval", "read_run": "instir.retrieval", "write_run": "instir.retrieval",
    "retrieve": "instir.retrieval", "make_retriever": "instir.retrieval", "system_name": "instir.retrieval",
    "BM25Retriever": "instir.retrieval.lexical", "DenseRetriever": "instir.retrieval.dense",
    "rrf": "instir.retrieval.fusion",
    # paper systems (cards and the adapters that build them)
    "SystemCard": "instir.systems", "load_cards": "instir.systems", "get_card": "instir.systems",
    "build_system": "instir.systems",
    # metrics
    "evaluate_runs": "instir.metrics", "paired_tests": "instir.metrics",
    # judge
    "rubric_for": "instir.judge", "CachedJudge": "instir.judge", "instfol": "instir.judge.following",
    "validate": "instir.judge.validation",
    # papers and reports
    "load_reported": "instir.papers", "run_reports": "instir.pipeline", "explore": "instir.report.explorer",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'instir' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
