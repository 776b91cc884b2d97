"""Fixtures of the interop tests: the libraries (each test that needs one is skipped only where it
is not installed; ``make test`` installs them with the ``interop`` extra), imported inside the
tests so that ir_datasets makes its folders in the isolated home (``ranx``, compiled once per
session, is the suite's: tests/conftest.py), and kit runs on the samples."""

import pandas as pd
import pytest

from instir.retrieval.lexical import BM25Retriever
from instir.retrieval.runs import Run
from instir.retrieval.search import retrieve


@pytest.fixture
def pt():
    return pytest.importorskip("pyterrier")


@pytest.fixture
def irds():
    return pytest.importorskip("ir_datasets")


@pytest.fixture(scope="module")
def bm25_run(instructir_sample) -> Run:
    """BM25 on the InstructIR sample, its queries in reverse benchmark order (so not sorted by id:
    ranx sorts them, the kit keeps a run's own order)."""
    run = retrieve(instructir_sample, BM25Retriever(), k=100)
    order = {q: i for i, q in enumerate(reversed(run.qids))}
    reordered = Run(run.df.iloc[run.df["qid"].map(order).argsort(kind="stable")], run.meta)
    assert reordered.qids != sorted(reordered.qids)
    return reordered


@pytest.fixture
def tied_frame() -> pd.DataFrame:
    """Two queries, most scores tied, ids out of order: where the tie-break decides the ranking."""
    rows = [("q2", "d1", 1.0), ("q2", "d3", 1.0), ("q2", "d2", 1.0), ("q2", "d10", 0.5), ("q1", "d9", 2.0),
            ("q1", "d4", 2.0), ("q1", "d7", 3.0), ("q1", "d5", 2.0)]
    return pd.DataFrame(rows, columns=["qid", "docid", "score"])
