"""The papers' tables as notebook 05 shows them (:mod:`instir.papers.views`)."""

from instir import show
from instir.papers import REPORTED_FILES, load_reported, reported_views, statistics_views


def test_reported_numbers_keep_the_precision_the_paper_printed():
    # on the commit before, IFIR Table 3's InstFol printed 0.03 showed as 0.0, -4.85 as -4.8 and 1.10 as 1.1, its
    # nDCG@20 printed 0.25 as 25.0, and InstructIR's 76.0 as 76.00
    views = {view.title: view.table for view in reported_views({p: load_reported(p) for p in REPORTED_FILES})}
    table3 = views["IFIR Table 3 (×100)"]
    assert table3.loc["GTR-XL", ("FiQA", "InstFol@20")] == "-4.85"
    assert table3.loc["BM25", ("FiQA", "nDCG@20")] == "25" and table3.loc["BM25", ("FiQA", "InstFol@20")] == "1.10"
    assert "0.03" in set(table3.to_numpy().ravel())
    listed = views["InstructIR scores as reported (×100)"]
    values = set(zip(listed["model"], listed["measure"], listed["value"]))
    assert {("BM25", "nDCG@10", "76.0"), ("RepLLaMA", "nDCG@10", "87.62")} <= values
    page = str(show.table(table3, "IFIR Table 3 (×100)"))
    assert ">-4.85<" in page and ">25<" in page and ">25.0<" not in page


def test_every_reported_view_names_the_source_of_its_numbers():
    # a paper's table carries its source; the listed scores carry one per row (secondary sources differ)
    views = reported_views({p: load_reported(p) for p in REPORTED_FILES})
    for view in views:
        if "source" in view.table.columns:
            assert view.table["source"].str.startswith("https://").all(), view.title
        else:
            assert view.source.startswith("https://"), view.title
    table3 = next(v for v in views if v.title == "IFIR Table 3 (×100)")
    assert "arxiv.org" in table3.source


def test_the_listed_scores_are_the_instructed_scores_only():
    views = {view.title: view.table for view in reported_views({p: load_reported(p) for p in REPORTED_FILES})}
    listed = views["InstructIR scores as reported (×100)"]
    scores = load_reported("instructir")
    assert len(listed) == (scores["setting"] == "instructed").sum() == 18
    assert not listed["measure"].str.startswith("num_").any()


def test_every_statistics_view_names_who_printed_its_counts():
    for view in statistics_views():
        if "source" in view.table.columns:  # listed: each count with the sources that printed it
            assert all(sources and all(s.startswith("https://") for s in sources) for sources in view.table["source"])
        else:
            assert view.source.startswith("https://"), view.title
