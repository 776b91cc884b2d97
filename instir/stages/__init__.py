"""The stages of the report chain, one function each, called alike by the notebooks, the CLI
and the Ray sweep: each reads the files of the stages before it from the report folder
(:class:`instir.report.layout.ReportLayout`), computes, writes its own files atomically and
returns a result object for display.

=================  ==================================  ============================================
stage (notebook)   function                            writes
=================  ==================================  ============================================
explore (01)       :func:`explore_benchmarks`          ``data/statistics.csv``
retrieve (02)      :func:`retrieve_runs`               ``runs/*.trec`` + sidecars, ``runs/runs.csv``
evaluate (03)      :func:`score_runs`                  ``metrics/`` (tables, per query, comparisons)
judge (04)         :func:`judge_runs`                  ``judge/`` (validation, InstFol, stability)
compare (05)       :func:`compare_with_papers`         ``paper_tables/``
=================  ==================================  ============================================
"""

from instir._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "explore": ("Exploration", "explore_benchmarks"),
    "retrieve": ("Retrieval", "retrieve_runs", "retrieve_variant", "write_runs_table", "read_runs_table"),
    "evaluate": ("Metrics", "RunScores", "score_run", "score_runs", "write_metrics", "compare_to_baseline"),
    "judge": ("Judging", "RunPair", "judge_pair", "judge_runs", "run_pairs", "write_instfol"),
    "compare": ("PaperComparison", "compare_with_papers"),
})
