"""Fixtures shared with the retrieval tests (the hand-made toy benchmark)."""

from tests.retrieval.conftest import toy_benchmark  # noqa: F401
