"""Data layer: benchmarks as plain types (queries with instruction and query kept apart,
streamed corpus, qrels), loaded by name from bundled samples, local files or the fetch cache.
Downloads live in :mod:`instir.benchmarks.fetch` (not re-exported, so that name stays the module)."""

from instir.benchmarks.catalog import family_of, ifir_subsets, is_sample, subset
from instir.benchmarks.fetch import FetchError, instir_home
from instir.benchmarks.ifir import load_ifir
from instir.benchmarks.instructir import INSTRUCTIR_SETTINGS, load_instructir
from instir.benchmarks.registry import (
    SAMPLE_ROOT,
    list_benchmarks,
    load_benchmark,
    sample_benchmarks,
)
from instir.benchmarks.types import Benchmark, Corpus, Doc, FormatError, Qrels, Query

__all__ = [
    "Benchmark", "Corpus", "Doc", "FetchError", "FormatError", "INSTRUCTIR_SETTINGS",
    "Qrels", "Query", "SAMPLE_ROOT", "family_of", "ifir_subsets", "instir_home", "is_sample", "list_benchmarks",
    "load_benchmark", "load_ifir", "load_instructir", "sample_benchmarks", "subset",
]

