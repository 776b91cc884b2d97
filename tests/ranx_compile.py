"""ranx's numba functions that the suite calls, compiled into ``NUMBA_CACHE_DIR``: run by ``make`` while pip
installs the test environment (on the core pip leaves idle: ~45 s here), and by :func:`conftest.ranx` once per
session where that has not happened. The calls build what the kit's conversions build (``qrels_to_ranx`` and
``Run.to_ranx`` add lists of Python strings and numbers: one signature for any id length) and what a ranx user
builds (``ranx.Run`` from a dict), then evaluate and compare on the measures the suite and the docs ask ranx for
(nDCG, MRR: nDCG@20 is the same function). Only ranx is imported, so it runs before the kit is installed."""


def compile_ranx() -> None:
    """Call each ranx function the suite uses once, with the argument types the suite gives it."""
    import ranx

    qrels = ranx.Qrels()
    qrels.add_multi(["q1", "q2"], [["d1", "d2"], ["d1"]], [[1, 2], [1]])
    made = ranx.Run({"q1": {"d1": 1.0, "d2": 0.5}, "q2": {"d1": 0.2, "d3": 0.3}}, name="a")
    converted = ranx.Run(name="b")
    converted.add_multi(["q1", "q2"], [["d2", "d1"], ["d1"]], [[0.5, 0.1], [0.9]])
    ranx.evaluate(qrels, made, ["ndcg@10", "mrr@10"])
    ranx.compare(qrels, [made, converted], ["ndcg@10"], max_p=0.01)


if __name__ == "__main__":
    compile_ranx()
