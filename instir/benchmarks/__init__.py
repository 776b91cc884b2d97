"""Data layer: benchmarks as plain types (queries with instruction and query kept apart,
streamed corpus, qrels), loaded by name from bundled samples, local files or the fetch cache.
Downloads live in :mod:`instir.benchmarks.fetch` (not re-exported, so that name stays the module)."""

from instir.benchmarks.fetch import FetchError, instir_home
from instir.benchmarks.ifir import IFIR_SUBSETS, MULTI_LEVEL, load_ifir
from instir.benchmarks.instructir import INSTRUCTIR_SETTINGS, load_instructir
from instir.benchmarks.registry import (
    SAMPLE_ROOT,
    list_benchmarks,
    load_benchmark,
    sample_benchmarks,
)
from instir.benchmarks.types import Benchmark, Corpus, Doc, FormatError, Qrels, Query

__all__ = [
    "Benchmark", "Corpus", "Doc", "FetchError", "FormatError", "IFIR_SUBSETS", "INSTRUCTIR_SETTINGS",
    "MULTI_LEVEL", "Qrels", "Query", "SAMPLE_ROOT", "instir_home", "list_benchmarks",
    "load_benchmark", "load_ifir", "load_instructir", "sample_benchmarks",
]

