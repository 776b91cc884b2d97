"""Kit systems as PyTerrier transformers: ``transformer("bm25", "instructir-sample")`` is a
``pt.Transformer`` that pipelines and ``pt.Experiment`` take, named as the kit's reports name the
system (``bm25``, ``bm25 (query-only)``, ``BM25 (IFIR)``, ``monoT5-base``) so ``pt.Experiment``
needs no ``names=``. Its scores are the kit's own, bit for bit: it runs :func:`instir.retrieve`
or :func:`instir.retrieval.rerank.rerank` and hands their run over as a PyTerrier frame.

The qid decides what is scored: a row's ``qid`` names a query instance of the benchmark (in its
setting), and the system sees that instance as the kit formats it for that system (``template``:
the card's or the family authors' when None, ``"query-only"`` for the bare query), documents as
the kit reads them from the corpus. The ``query`` and ``text`` columns are carried through,
never read; a qid or docno the benchmark lacks, and a query rewritten earlier in the pipeline
(PyTerrier's ``query_0``), are refused in one line, since they cannot be scored as the kit does.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pandas as pd

from instir.benchmarks.registry import load_benchmark
from instir.benchmarks.types import Benchmark
from instir.errors import UsageError, quoted
from instir.extras import require
from instir.formatting import Template
from instir.progress import enabled as progress_enabled
from instir.retrieval.rerank import QuerySplit, Reranker, rerank
from instir.retrieval.runs import Run
from instir.retrieval.score_cache import ScoreCache
from instir.retrieval.search import Retriever, retrieve
from instir.systems.cards import SystemCard
from instir.systems.registry import build_system

pt = require("pyterrier")

#: the columns a transformer adds to its input (PyTerrier's result-frame columns; rank from 0)
RESULT_COLUMNS = ["docno", "score", "rank"]


class KitTransformer(pt.Transformer):
    """A kit retriever or reranker on one benchmark, as a PyTerrier transformer (build it with
    :func:`transformer`). Given a query frame (``qid``) a retriever returns its top ``k`` per
    query; given a result frame (``qid``, ``docno``) a retriever scores those candidates as the
    kit scores a reranking task's (FollowIR), and a reranker rescores them. Output rows are in
    the kit's order, with the input's columns in place and ``docno``, ``score``, ``rank`` (from 0) its own."""

    def __init__(self, system: Retriever | Reranker, benchmark: Benchmark, *,
                 template: Template | str | None = None, k: int = 100,
                 out_dir: str | Path | None = None, cache: ScoreCache | str | Path | None = None,
                 query_split: QuerySplit = "authors"):
        self.system, self.benchmark, self.template, self.k, self.out_dir = system, benchmark, template, k, out_dir
        self.cache, self.query_split = cache, query_split
        self.reranks_only = not isinstance(system, Retriever)
        self._run: Run | None = None

    def __repr__(self) -> str:
        """The system's name as the kit's reports give it: what ``pt.Experiment`` prints."""
        name = self.template if isinstance(self.template, str) else getattr(self.template, "name", None)
        variant = "" if name is None else " (query-only)" if name == "query-only" else f" ({name})"
        setting = "" if self.benchmark.setting == "instructed" else f" [{self.benchmark.setting}]"
        return f"{self.system.name}{variant}{setting}"

    def transform_outputs(self, input_columns: list) -> list:
        """The columns :meth:`transform` returns for these input columns (``pt.inspect``): a
        retriever takes a query or a result frame, a reranker a result frame only."""
        with pt.validate.any(input_columns, context=self) as v:
            if not self.reranks_only:
                v.query_frame(mode="retrieve")
            v.result_frame(mode="rerank")
        return list(input_columns) + [c for c in RESULT_COLUMNS if c not in input_columns]

    def transform(self, inp: pd.DataFrame) -> pd.DataFrame:
        """Retrieve for a query frame, or rescore a result frame (see the class docstring)."""
        reranking = "docno" in inp.columns
        if not reranking and self.reranks_only:
            raise UsageError(f"{self!r} is a reranker: it rescores a result frame (qid, docno), so put a retriever "
                             f"before it, e.g. transformer('bm25', benchmark) >> transformer({self.system.name!r}, "
                             "benchmark)")
        if "query_0" in inp.columns:
            raise UsageError(f"{self!r} scores the query instances of {self.benchmark.label} by qid, as the kit "
                             "formats them; the query was rewritten earlier in the pipeline (query_0), which it "
                             "cannot honour")
        columns = self.transform_outputs(list(inp.columns))
        inp = inp.astype({"qid": str, **({"docno": str} if reranking else {})})
        kept = inp.drop(columns=[c for c in ("score", "rank") if c in inp.columns])
        if len(inp) == 0:
            return kept.reindex(columns=columns)
        self._check_ids(inp, reranking)
        run = (self._rescored(inp) if reranking else self._retrieved()).df
        found = pd.DataFrame({"qid": run["qid"], "docno": run["docid"], "score": run["score"],
                              "rank": run["rank"] - 1})
        if reranking:  # the new ranking's order, each row with the input's other columns
            return found.merge(kept, on=["qid", "docno"], how="left")[columns]
        return kept.merge(found, on="qid", how="inner")[columns]

    def _check_ids(self, inp: pd.DataFrame, reranking: bool) -> None:
        """Refuse qids that are not query instances of the benchmark, and docnos not in its corpus."""
        checks = [("qid", set(self.benchmark.queries), "query instances of")]
        if reranking:
            checks.append(("docno", self.benchmark.corpus.id_set(), "documents of the corpus of"))
        for column, known, what in checks:
            missing = inp.loc[~inp[column].isin(known), column].unique()
            if len(missing):
                raise UsageError(f"{len(missing)} {column}(s) of the frame are not {what} {self.benchmark.label} "
                                 f"(first: {quoted(missing[0])}), which {self!r} scores as the kit does: take the "
                                 "frame from the same benchmark and setting")

    def _retrieved(self) -> Run:
        """The kit's run of the system on every query instance (made once, then kept)."""
        if self._run is None:
            self._run = retrieve(self.benchmark, self.system, self.template, self.k, self.out_dir)
        return self._run

    def _rescored(self, inp: pd.DataFrame) -> Run:
        """The frame's candidates scored by the system: a reranker rescores all of them (the
        kit's rerank at the depth of the longest list); a retriever ranks the corpus for these
        queries and keeps the candidates, as :func:`instir.retrieve` does on a reranking task."""
        candidates = {qid: list(docs) for qid, docs in inp.groupby("qid", sort=False)["docno"]}
        if self.reranks_only:
            first = inp if "score" in inp.columns else inp.assign(score=0.0)
            return rerank(Run.from_pyterrier(first), self.benchmark, self.system,
                          depth=max(map(len, candidates.values())), cache=self.cache,
                          query_split=self.query_split, progress=progress_enabled())
        asked = replace(self.benchmark, queries={q: self.benchmark.queries[q] for q in candidates},
                        meta={**self.benchmark.meta, "top_ranked": candidates})
        return retrieve(asked, self.system, self.template)


def transformer(system: str | SystemCard | Retriever | Reranker, benchmark: str | Benchmark, *,
                setting: str = "instructed", root: str | Path | None = None,
                template: Template | str | None = None, k: int = 100, out_dir: str | Path | None = None,
                cache: ScoreCache | str | Path | None = None, query_split: QuerySplit = "authors",
                **options) -> KitTransformer:
    """A kit system on a benchmark as a PyTerrier transformer (:class:`KitTransformer`).

    ``system``: a name or card as :func:`instir.build_system` takes it (``bm25``, ``dense:MODEL``,
    ``hybrid:MODEL``, ``"BM25 (IFIR)"``, ``monoT5-base`` …; ``options`` such as ``device``,
    ``cache_dir`` go to it), or a built retriever or reranker. ``benchmark``: a
    :class:`~instir.Benchmark`, or a name loaded in ``setting`` from ``root`` as
    :func:`instir.load_benchmark` does. A retriever takes :func:`instir.retrieve`'s ``template``
    (``"query-only"``: the bare-query variant), ``k`` and ``out_dir`` (a run made before with the
    same inputs is read back); a reranker takes :func:`~instir.retrieval.rerank.rerank`'s score
    ``cache`` and ``query_split``. An option that does not apply to the system is refused."""
    if isinstance(benchmark, Benchmark):
        if setting != "instructed" or root is not None:
            raise UsageError("setting and root go with a benchmark name; this Benchmark is loaded already "
                             f"({benchmark.label})")
    else:
        benchmark = load_benchmark(benchmark, setting, root=root)
    if isinstance(system, (str, SystemCard)):
        system = build_system(system, **options)
    elif options:
        raise UsageError(f"{', '.join(options)} go(es) with a system name; this system is built already")
    if not isinstance(system, (Retriever, Reranker)):
        raise UsageError(f"{quoted(system)} is neither a kit retriever nor a reranker: pass a system name such as "
                         "'bm25', or what instir.build_system builds")
    retriever = isinstance(system, Retriever)
    given = ({"cache": cache is not None, "query_split": query_split != "authors"} if retriever else
             {"template": template is not None, "k": k != 100, "out_dir": out_dir is not None})
    wrong = [name for name, set_ in given.items() if set_]
    if wrong:
        kind = "retriever" if retriever else "reranker"
        raise UsageError(f"{', '.join(wrong)} do(es) not apply to {system.name!r}, a {kind}")
    return KitTransformer(system, benchmark, template=template, k=k, out_dir=out_dir, cache=cache,
                          query_split=query_split)
