"""Data layer: benchmarks as plain types (queries with instruction and query kept apart,
streamed corpus, qrels), loaded by name from bundled samples, local files or the fetch cache;
every benchmark family is a spec kept as data in :mod:`instir.benchmarks.catalog`; the cached
corpus index (ids, content hash, word counts, single-record reads) in
:mod:`instir.benchmarks.docstore`. Downloads live in :mod:`instir.benchmarks.fetch` (not
re-exported, so that name stays the module)."""

from instir._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "catalog": ("SAMPLE_ROOT", "entry", "families", "family", "family_of", "is_sample", "sample_benchmarks"),
    "docstore": ("CorpusIndex", "CorpusIndexWarning", "IndexedCorpus", "build_index", "load_index"),
    "fetch": ("FetchError",),
    "instir.home": ("instir_home",),
    "ifir": ("load_ifir",),
    "instructir": ("INSTRUCTIR_SETTINGS", "load_instructir"),
    "registry": ("benchmark_settings", "list_benchmarks", "load_benchmark"),
    "types": ("Benchmark", "Corpus", "Doc", "FormatError", "Qrels", "Query"),
})
