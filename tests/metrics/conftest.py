"""Small in-memory benchmarks for the metrics tests."""

import shutil
import tempfile

import pytest
from toy import toy_family

from instir.benchmarks.types import Benchmark, Corpus, Doc, Qrels, Query


def build_benchmark(name: str, queries: list[Query], qrels: Qrels, extra_docs: tuple[str, ...] = ()) -> Benchmark:
    """A Benchmark over the judged documents plus ``extra_docs``."""
    doc_ids = sorted({d for docs in qrels.values() for d in docs} | set(extra_docs))
    corpus = Corpus.from_docs(Doc(id=d, text=f"text of {d}") for d in doc_ids)
    return Benchmark(name=name, layout="test", revision="local", setting="instructed", corpus=corpus,
                     queries={q.id: q for q in queries}, qrels=qrels, is_sample=True, family=toy_family(name))


@pytest.fixture
def instructir_like() -> Benchmark:
    """Two groups of InstructIR-style instances (``<qid>_<k>``), one relevant doc each."""
    queries = [Query(id=f"{g}_{k}", query=f"query {g}", instruction=f"instruction {k}", group=g)
               for g in ("100", "200") for k in (1, 2, 3)]
    qrels = {q.id: {f"p{q.id}": 1} for q in queries}
    return build_benchmark("instructir-sample", queries, qrels, extra_docs=("x1", "x2", "x3"))


@pytest.fixture
def ifir_like() -> Benchmark:
    """An IFIR-style subset: one query with three cumulative levels, binary qrels."""
    queries = [Query(id=f"q1_{lv}", query="query", instruction=f"level {lv}", group="q1", level=lv, subset="fiqa")
               for lv in (1, 2, 3)]
    qrels = {"q1_1": {"a": 1, "b": 1, "c": 1}, "q1_2": {"b": 1, "c": 1}, "q1_3": {"c": 1}}
    return build_benchmark("ifir-sample/fiqa", queries, qrels, extra_docs=("n1", "n2", "n3"))


@pytest.fixture
def make_benchmark():
    """The :func:`build_benchmark` factory, for tests that need their own layout."""
    return build_benchmark



def pytest_configure(config):
    """Hypothesis caches under ``./.hypothesis`` (already while collecting); keep it in a
    temporary directory that is removed when the session ends."""
    from hypothesis.configuration import set_hypothesis_home_dir

    config._instir_hypothesis_dir = tempfile.mkdtemp(prefix="instir-hypothesis-")
    set_hypothesis_home_dir(config._instir_hypothesis_dir)


def pytest_unconfigure(config):
    shutil.rmtree(getattr(config, "_instir_hypothesis_dir", ""), ignore_errors=True)
