"""The explore stage (notebook 01): the benchmarks before any model touches them: counts
(``data/statistics.csv``), instructions per query group and per level, lengths of queries,
instructions and documents, relevant passages per instance, the first group of each benchmark
with its relevant passages, and the statistics the papers print. Document lengths come from the
corpus index (computed once per corpus), and the example passages are read by id.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from instir import atomic
from instir.benchmarks import catalog
from instir.benchmarks.types import Benchmark, Query
from instir.papers.views import ReportedView, statistics_views
from instir.report.html import markdown_code, markdown_text
from instir.report.layout import LoadedBenchmarks, start_report
from instir.report.manifest import data_checks, read_datasets
from instir.report.stage_writer import writes_stage
from instir.report.tables import integer_rows

#: the statistics of ``describe()`` that are whole numbers when what it describes is (words, passages)
WHOLE = ("count", "min", "max")


@dataclass
class Example:
    """The first query group of a benchmark: its instances and the passages relevant to each
    (``instance, document, grade, text``)."""

    label: str
    group: str
    queries: list[Query]
    relevant: pd.DataFrame


@dataclass
class Exploration:
    """What the explore stage found. ``overview``: one row per benchmark (``data/statistics.csv``);
    ``instances``: one row per query instance with its word counts and relevant passages;
    ``documents``: words per document of every benchmark; ``examples``: the first group of each."""

    overview: pd.DataFrame
    instances: pd.DataFrame
    documents: pd.DataFrame
    examples: list[Example]
    summary: str
    checks: dict[str, str | None] = field(default_factory=dict)

    def data_statement(self) -> str:
        """Whether the counts are the papers' (Markdown): the samples named as such, and every real benchmark whose
        data is not verified as the paper's with the reason (:func:`instir.benchmarks.fetch.data_check`: a count
        that differs from the published one, files changed since the fetch), as notebook 05 then gives its numbers
        no verdict."""
        parts = []
        if self.samples:
            parts.append(f"**SAMPLE statistics.** {markdown_text(', '.join(self.samples))} are bundled samples made "
                         "for offline demos, under a hundred instances each. Their counts describe the sample "
                         "only and are **not comparable** with the benchmark statistics below, which are shown for "
                         "reference.")
        off = {name: why for name, why in self.checks.items() if why and name not in self.samples}
        if off:
            parts.append("**Not the papers' data.** " + "; ".join(f"{markdown_code(name)}: {markdown_text(why)}"
                                                                 for name, why in off.items())
                         + ". Notebook 05 gives the numbers of these benchmarks no verdict (*not comparable*).")
        elif not self.samples:
            parts.append("The counts above are the published ones for every benchmark (or its files are those "
                         "`instir fetch` verified): notebook 05 compares their numbers with the papers'.")
        return "\n\n".join(parts)

    @staticmethod
    def families() -> str:
        """Every benchmark family the catalog holds, bundled or registered from outside the package (Markdown, one
        item each: its name, paper and its spec's ``about``), so the notebook names no family by hand."""
        items = []
        for name in catalog.families():
            fam = catalog.family(name)
            about = f": {markdown_text(fam.about)}" if fam.about else ""  # text, as every spec value: no markup
            items.append(f"- **{markdown_text(fam.printed)}** ({markdown_text(fam.paper)}){about}")
        return "\n".join(items)

    @property
    def samples(self) -> list[str]:
        """The bundled sample benchmarks explored (their counts describe the sample only)."""
        return self.overview.loc[self.overview["sample"], "benchmark"].tolist()

    def counts(self) -> pd.DataFrame:
        """The overview as the page shows it: instances per level as ``1: 6, 2: 6, 3: 6`` (``no
        level: 86`` for a benchmark without levels) instead of the JSON the CSV holds."""
        def readable(levels: str) -> dict[str, int]:
            return {("no level" if key == "none" else key): n for key, n in json.loads(levels).items()}

        return self.overview.assign(levels=self.overview["levels"].map(readable))

    def papers(self) -> list[ReportedView]:
        """The statistics the papers print (:func:`instir.papers.views.statistics_views`)."""
        return statistics_views()

    def group_sizes(self) -> pd.DataFrame:
        """Instances per query group: count, mean, spread and quartiles per benchmark."""
        sizes = self.instances.groupby(["benchmark", "group"], sort=False).size().rename("instances per group")
        return _whole_count(sizes.groupby("benchmark", sort=False).describe())

    def levels(self) -> pd.DataFrame:
        """Instances per benchmark and level (``<NA>``: a benchmark without levels)."""
        return self.instances.groupby(["benchmark", "level"], dropna=False, sort=False).size().rename(
            "instances").to_frame()

    def lengths(self) -> pd.DataFrame:
        """Words per query, instruction and document, described per benchmark (``measure`` and
        ``statistic`` down, one column per benchmark; count, min and max as integers)."""
        texts = self.instances.groupby("benchmark", sort=False)[["query_words", "instruction_words"]].describe().T
        docs = self.documents.groupby("benchmark", sort=False)[["document_words"]].describe().T
        described = pd.concat([texts, docs]).rename_axis(["measure", "statistic"])
        return integer_rows(described, WHOLE, level="statistic")

    def relevant(self) -> pd.DataFrame:
        """Relevant passages per instance, described per benchmark and level."""
        return _whole_count(self.instances.groupby(["benchmark", "level"], dropna=False, sort=False)["relevant"]
                            .describe())


def _whole_count(described: pd.DataFrame) -> pd.DataFrame:
    """A ``describe()`` of counts with its count, min and max as integers (pandas gives floats)."""
    return described.astype(dict.fromkeys(WHOLE, int))


def _instances(name: str, bench: Benchmark) -> pd.DataFrame:
    frame = pd.DataFrame([asdict(q) for q in bench.queries.values()]).assign(benchmark=name)
    frame["level"] = frame["level"].astype("Int64")
    frame["query_words"] = frame["query"].str.split().str.len()
    frame["instruction_words"] = frame["instruction"].str.split().str.len()
    frame["relevant"] = [sum(grade > 0 for grade in bench.qrels.get(qid, {}).values()) for qid in frame["id"]]
    return frame


def _example(bench: Benchmark) -> Example:
    group, ids = next(iter(bench.groups().items()))
    judged = [(qid, d, grade) for qid in ids for d, grade in bench.qrels.get(qid, {}).items() if grade > 0]
    docs = bench.corpus.get({d for _, d, _ in judged})
    relevant = pd.DataFrame([(qid, d, grade, docs[d].indexed_text) for qid, d, grade in judged if d in docs],
                            columns=["instance", "document", "grade", "text"])
    return Example(bench.label, group, [bench.queries[qid] for qid in ids], relevant)


@writes_stage("01_data_exploration")
def describe_benchmarks(out_dir: str | Path, benchmarks: Sequence[str], data_root: str | None = None, *,
                        loaded: LoadedBenchmarks | None = None) -> Exploration:
    """The explore stage: load ``benchmarks`` (recording which data they are; ``loaded``: as
    :func:`instir.report.layout.start_report` takes it), describe them, and write the overview to
    ``out_dir/data/statistics.csv``."""
    report = start_report(out_dir, benchmarks, data_root, loaded)
    loaded = report.benchmarks
    overview = pd.DataFrame([bench.describe() for bench in loaded.values()])
    report.layout.data.mkdir(parents=True, exist_ok=True)
    atomic.write_frame(report.layout.statistics, overview)
    instances = pd.concat([_instances(name, bench) for name, bench in loaded.items()], ignore_index=True)
    documents = pd.concat([pd.DataFrame({"benchmark": name, "document_words": bench.corpus.word_counts()})
                           for name, bench in loaded.items()], ignore_index=True)
    return Exploration(overview, instances, documents, [_example(bench) for bench in loaded.values()], report.summary,
                       data_checks(read_datasets(out_dir), list(loaded)))  # made as each benchmark was loaded
