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


def test_a_count_two_sources_printed_is_one_row_naming_both():
    # the bundled file holds InstructIR's corpus size 16072 twice, once per Hugging Face mirror that printed it
    (listed,) = [view.table for view in statistics_views() if view.title.startswith("InstructIR statistics")]
    assert len(listed) == 7  # the file's 8 count rows, the two printings of one count made one
    (both,) = listed[listed["measure"] == "num_corpus_documents"].to_dict("records")
    assert both["value_printed"] == "16072"
    assert both["source"] == ["https://huggingface.co/datasets/henilp105/InstructIR/blob/"
                              "1548303ed949e95c1ad5a7fca820ec1cc71856ed/README.md",
                              "https://huggingface.co/datasets/Samoed/InstructIR/blob/main/README.md"]


def test_a_papers_tables_are_shown_in_the_order_the_paper_numbers_them():
    # not sorted as text, which puts Table 10 and 11 before Table 3
    views = reported_views({p: load_reported(p) for p in REPORTED_FILES})
    numbers = [view.title.split()[2] for view in views if view.title.startswith("IFIR Table")]
    assert numbers == ["3", "8", "8", "9", "9", "10", "11"]


def test_the_listed_scores_mark_the_secondary_ones_and_statistics_read_as_printed():
    views = {view.title: view.table for view in reported_views({p: load_reported(p) for p in REPORTED_FILES})}
    listed = views["InstructIR scores as reported (×100)"]
    from_paper = listed[~listed["secondary"].astype(bool)]  # the InstructIR paper's 2; 16 from Promptriever's Table 2
    assert sorted(zip(from_paper["model"], from_paper["measure"], from_paper["value"])) == [
        ("RepLLaMA", "Robustness@10", "52.58"), ("RepLLaMA", "nDCG@10", "87.62")]
    assert listed.loc[listed["secondary"].astype(bool), "reference"].str.startswith("SECONDARY: Promptriever").all()
    table1 = next(view.table for view in statistics_views() if view.title == "IFIR Table 1 (as printed)")
    assert table1.loc["FiQA", "Corpus Size"] == "57,638" and table1.loc["AILA", "Corpus Size"] == "2,914"
    assert table1.loc["FiQA", "# RP (avg relevant passages per instruction-following query)"] == "3.54"


def test_the_curves_are_ifirs_table_11_rows_only():
    import csv
    import io
    from importlib import resources

    from instir.papers import reported_curves

    text = resources.files("instir.papers").joinpath("reported", REPORTED_FILES["ifir"]).read_text(encoding="utf-8")
    table11 = [row for row in csv.DictReader(io.StringIO(text)) if row["table"] == "Table 11"]
    ((paper, rows),) = reported_curves({p: load_reported(p) for p in REPORTED_FILES})
    assert paper == "IFIR" and len(rows) == len(table11) > 0 and set(rows["table"]) == {"Table 11"}
