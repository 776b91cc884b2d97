"""Speed scripts (run from the repository root as ``python -m perf.<script>``); results are
medians of repeated runs, printed for the reports and docstrings that quote them."""
