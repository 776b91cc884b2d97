"""The stages of the report chain, one function each, called alike by the notebooks, the CLI
and the Ray sweep: each reads the files of the stages before it from the report folder
(:class:`instir.report.layout.ReportLayout`), computes, writes its own files atomically and
returns a result object for display whose views come from the family specs. Which runs exist,
and in which order, is the plan's (:func:`plan_runs`).

=================  ==================================  ============================================
stage (notebook)   function                            writes
=================  ==================================  ============================================
explore (01)       :func:`describe_benchmarks`         ``data/statistics.csv``
retrieve (02)      :func:`retrieve_runs`               ``runs/*.trec`` + sidecars, ``runs/runs.csv``
evaluate (03)      :func:`score_runs`                  ``metrics/`` (tables, per query, comparisons)
judge (04)         :func:`judge_runs`                  ``judge/`` (validation, InstFol, stability)
compare (05)       :func:`paper_tables`                ``paper_tables/``
=================  ==================================  ============================================

Beside them :func:`plan_runs` (which runs exist, in which order), :func:`notebook_systems` (a notebook's
``systems`` parameter resolved) and :func:`publish_page` (a notebook's HTML page, written beside the others).
"""

from instir._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "plan": ("plan_runs",),
    "explore": ("describe_benchmarks",),
    "retrieve": ("retrieve_runs",),
    "evaluate": ("score_runs",),
    "judge": ("judge_runs",),
    "compare": ("paper_tables",),
    # a notebook's own parameters and page: the systems it names, its HTML page published beside the others
    "instir.systems.specs": ("notebook_systems",),
    "instir.pipeline": ("publish_page",),
}, deprecated={
    "explore_benchmarks": "describe_benchmarks", "compare_with_papers": "paper_tables",
    "read_runs_table": "instir.report.layout:read_runs_table",
    # names that left the namespace for their modules
    **{name: f"instir.stages.{module}:{name}" for module, names in {
        "plan": ("PlannedRun",), "explore": ("Exploration",),
        "retrieve": ("Retrieval", "retrieve_planned", "write_runs_table"),
        "evaluate": ("Metrics", "MetricsView", "run_scores", "write_metrics", "compare_to_baseline"),
        "judge": ("Judging", "RunPair", "judge_pair", "run_pairs", "write_instfol"),
        "compare": ("PaperComparison",)}.items() for name in names},
})
