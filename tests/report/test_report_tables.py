"""present(): every report table titled, rounded, escaped, without index or constant columns."""

import math
import re
import shutil
import subprocess

import pandas as pd
import pytest

from instir.report.tables import MISSING, format_fixed, format_p, integer_rows, present, small_n_warning
from instir.stages import describe_benchmarks

SCRIPT = "<script>alert('x')</script>"


def test_text_is_escaped_and_the_title_is_the_caption():
    out = present(pd.DataFrame({"system": [SCRIPT, "b"], "value": [0.5, 0.25]}), "Scores <b>x</b>")
    assert "<script>" not in out and "&lt;script&gt;" in out
    assert '<div class="title">Scores &lt;b&gt;x&lt;/b&gt;</div>' in out


def test_only_http_urls_become_links():
    frame = pd.DataFrame({"model": ["a", "b", "c"],
                          "source": ["https://arxiv.org/abs/2402.14334", "javascript:alert(1)", "data/ifir.csv"]})
    out = present(frame, "Sources")
    assert out.count("<a href=") == 1
    assert '<a href="https://arxiv.org/abs/2402.14334"' in out
    assert "javascript:alert(1)" in out and 'href="javascript' not in out and "data/ifir.csv" in out


def test_a_quote_in_a_url_cannot_break_out_of_the_attribute():
    out = present(pd.DataFrame({"source": ['https://x.org/"onmouseover="alert(1)', "https://y.org"]}), "t")
    assert 'onmouseover="alert' not in out and "&quot;onmouseover=&quot;" in out


def test_scaled_columns_are_multiplied_rounded_and_labelled():
    frame = pd.DataFrame({"system": ["bm25", "dense"], "nDCG@10": [0.94123, 0.5], "n": [24, 24]})
    out = present(frame, "t", scale=100, scaled=["nDCG@10"], digits=1)
    assert "<th>nDCG@10 ×100</th>" in out and ">94.1<" in out and ">50.0<" in out and "0.94123" not in out


def test_missing_values_show_a_dash_and_no_raw_reprs():
    frame = pd.DataFrame({"a": ["x", None, "z"], "b": [1.5, math.nan, 2.0],
                          "c": pd.array([1, pd.NA, 3], dtype="Int64"), "d": [["u", "v"], [], ["w"]]})
    out = present(frame, "t")
    assert "None" not in out and "nan" not in out.lower().replace("nan;", "") and "&lt;NA&gt;" not in out
    assert f">{MISSING}<" in out and ">u, v<" in out and "[" not in out.split("</style>")[1]


def test_p_values_below_a_thousandth_print_as_less_than():
    assert format_p(0.0001) == "<0.001" and format_p(0.0123) == "0.012" and format_p(None) == MISSING
    out = present(pd.DataFrame({"system": ["a", "b"], "p_ttest": [1e-6, 0.2]}), "t")
    assert "&lt;0.001" in out and ">0.200<" in out


def test_constant_columns_are_said_once_above_the_table():
    frame = pd.DataFrame({"benchmark": ["instructir-sample"] * 2, "system": ["a", "b"], "value": [0.1, 0.2]})
    out = present(frame, "t", keep=())
    assert "<th>benchmark</th>" not in out and "Same in every row — benchmark: instructir-sample" in out
    kept = present(frame, "t", keep=["benchmark"])
    assert "<th>benchmark</th>" in kept


def test_meaningful_index_becomes_columns_and_a_range_index_is_hidden():
    wide = pd.DataFrame({("fiqa", "nDCG@20"): [10.0, 20.0]}, index=pd.Index(["bm25", "dense"], name="system"))
    out = present(wide, "t")
    assert "<th>system</th>" in out and "<th>fiqa · nDCG@20</th>" in out
    plain = present(pd.DataFrame({"x": [1, 2]}), "t")
    assert "<th></th>" not in plain and ">0<" not in plain


def test_wide_tables_are_split_repeating_the_leading_columns():
    frame = pd.DataFrame({f"m{i}": [0.1, 0.2] for i in range(20)}, index=pd.Index(["a", "b"], name="system"))
    out = present(frame, "Wide", max_columns=8)
    assert out.count("<table>") == 3 and out.count("<th>system</th>") == 3 and "part 3 of 3" in out


def test_counts_stay_integers_and_flags_colour_cells():
    frame = pd.DataFrame({"n": [12, 30], "score": [44.0, 51.0], "verdict": ["within", "outside"]})
    out = present(frame, "t", flag_column="verdict", flags={"within": "good", "outside": "bad"}, other_digits=1)
    assert ">12<" in out and ">12.0<" not in out and ">44.0<" in out
    assert 'class="good">within' in out and 'class="bad">outside' in out


def test_small_samples_carry_a_warning():
    assert "only 5 queries" in small_n_warning([5, 40])
    assert small_n_warning([21, 40]) is None and small_n_warning([]) is None


def test_row_numbers_left_by_a_filter_are_not_shown():
    frame = pd.DataFrame({"paper": ["a", "b", "c"], "x": [1, 2, 3]}).iloc[[0, 2]]
    out = present(frame, "t")
    assert "<th>index</th>" not in out and "<th>paper</th>" in out


def test_an_integer_said_once_above_the_table_stays_an_integer():
    frame = pd.DataFrame({"system": ["a", "b"], "k": [100, 100], "search_s": [0.5, 1.25]})
    out = present(frame, "t", other_digits=2)
    assert "Same in every row — k: 100</p>" in out and "100.00" not in out


def test_integer_values_show_without_decimals_in_a_statistic_per_row_table():
    table = pd.DataFrame({"all": [75.0, 0.4321], "fiqa": [45.0, 0.5]},
                         index=pd.Index(["pairs", "kappa"], name="statistic"))
    out = present(integer_rows(table, ["pairs"]), "Agreement")
    assert ">75<" in out and ">45<" in out and "75.000" not in out and ">0.432<" in out


def test_a_value_that_rounds_to_zero_has_no_minus_sign():
    frame = pd.DataFrame({"system": ["a", "b", "c"], "delta": [-0.0004, -0.0123, 0.0], "x": [-0.00001, 1.0, 2.0]})
    out = present(frame, "t", scale=100, scaled=["delta"], digits=1)
    assert ">-0.0<" not in out and ">-0.000<" not in out and ">0.0<" in out and ">0.000<" in out and ">-1.2<" in out


def test_a_mapping_reads_as_keys_and_values_and_a_list_of_urls_as_links():
    frame = pd.DataFrame({"benchmark": ["a", "b"], "levels": [{"1": 6, "2": 6, "3": 6}, {"no level": 86}],
                          "source": [["https://x.org/1", "https://y.org/2"], "https://z.org"]})
    out = present(frame, "t")
    assert ">1: 6, 2: 6, 3: 6<" in out and ">no level: 86<" in out
    assert out.count("<a href=") == 3 and "[" not in out.split("</style>")[1]


def test_the_data_overview_reads_without_json_decimals_or_unnamed_levels(tmp_path):
    """Notebook 01's tables: levels as ``1: 6, …``, counts as integers, the length table's rows
    named ``measure`` and ``statistic``, InstructIR's corpus size once with both its sources."""
    data = describe_benchmarks(tmp_path, ["instructir-sample", "ifir-sample/fiqa"])
    overview = present(data.counts(), "Counts", keep=list(data.overview.columns), other_digits=2)
    assert "{" not in overview.split("</style>")[1] and ">no level: 86<" in overview
    assert re.search(r">1: \d+, 2: \d+, 3: \d+<", overview)
    lengths = present(data.lengths(), "Lengths", other_digits=1)
    assert "<th>measure</th><th>statistic</th>" in lengths and "index 0" not in lengths
    assert ">86<" in lengths and ">86.0<" not in lengths
    groups = present(data.group_sizes(), "Groups", keep=["count"], other_digits=1)
    assert '<td>instructir-sample</td><td class="num">12</td><td class="num">7.2</td>' in groups  # count, mean
    relevant = present(data.relevant(), "Relevant", keep=["count"], other_digits=1)
    assert '<td>instructir-sample</td><td>—</td><td class="num">86</td>' in relevant
    counts = next(view for view in data.papers() if view.title.startswith("InstructIR"))
    shown = present(counts.table, counts.title)
    assert shown.count("<td>num_corpus_documents</td>") == 1
    assert "henilp105/InstructIR" in shown and "Samoed/InstructIR" in shown


def test_a_table_without_rows_says_none_instead_of_showing_empty_parts():
    empty = pd.DataFrame(columns=[f"c{i}" for i in range(20)])
    out = present(empty, "Widened rows", max_columns=8, notes=["a note"])
    assert "<table>" not in out and "part 1 of" not in out and '<p class="note">none</p>' in out
    assert "Widened rows" in out and "a note" in out


def test_format_fixed_prints_zero_without_a_sign():
    assert format_fixed(-0.04) == "0.0" and format_fixed(-0.06) == "-0.1" and format_fixed(93.56) == "93.6"
    assert format_fixed(None) == MISSING and format_fixed(-0.0004, 3) == "0.000"


def test_a_score_equal_for_every_system_stays_in_its_column_when_told():
    frame = pd.DataFrame({"level 1 · nDCG@20": [95.5, 95.5], "level 2 · nDCG@20": [90.9, 63.9]},
                         index=pd.Index(["bm25", "bm25 (query-only)"], name="system"))
    folded, kept = str(present(frame, "per level")), str(present(frame, "per level", fold_constant=False))
    assert "Same in every row — level 1 · nDCG@20: 95.500" in folded
    assert "Same in every row" not in kept and kept.count(">95.500<") == 2 and "<th>level 1 · nDCG@20</th>" in kept


@pytest.mark.browser
@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian chromium not installed (apt-get install chromium)")
def test_a_long_path_without_spaces_stays_inside_its_cell_in_chromium(tmp_path):
    """A run file's path is one long word, and a flagged verdict a long sentence: the cell wraps them instead of
    letting them spill over the next cell and past the table's border (measured in Chromium, the pages' browser)."""
    path = "runs/instructir-sample__instructed__bm25__instructir__k100-beb11d6b.trec"  # breaks only at its hyphens
    system = "dense:sentence-transformers/all-MiniLM-L6-v2 (query-only)"
    verdict = "not comparable (data of ifir/fiqa: 6 queries where the paper has 1,718; 6 documents where it has 57,638)"
    table = present(pd.DataFrame({"system": [system, "bm25"], "template": ["query-only", "instructir"],
                                  "run_file": [path, path[:20]], "verdict": [verdict, "within tolerance"],
                                  "n": [3, 4]}), "Runs", flags={verdict: "muted", "within tolerance": "good"},
                    flag_column="verdict")
    page = tmp_path / "table.html"
    page.write_text(f"<html><head><meta charset='utf-8'></head><body>{table}<pre id='m'></pre><script>"
                    "const cells = [...document.querySelectorAll('td')];"
                    "document.getElementById('m').textContent = 'spill=' + cells.filter("
                    "c => c.scrollWidth > c.clientWidth + 1).length + ' cells=' + cells.length;"
                    "</script></body></html>", encoding="utf-8")
    dom = subprocess.run([shutil.which("chromium"), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          "--disable-background-networking", f"--user-data-dir={tmp_path / 'profile'}",
                          "--window-size=1200,900", "--dump-dom", page.as_uri()], check=True, capture_output=True,
                         text=True, timeout=120, env={"HOME": str(tmp_path)}).stdout
    assert "spill=0 cells=10" in dom, dom[-300:]


def test_a_p_value_next_to_the_significance_level_prints_on_its_own_side_of_it():
    # 0.01027 printed as 0.010 read as significant at p <= 0.01 beside "significant: no"
    assert format_p(0.01027) == "0.0103"
    assert format_p(0.010004) == "0.010004"
    assert format_p(0.00996) == "0.010" and format_p(0.01) == "0.010"
    assert format_p(0.0153) == "0.015"


def test_a_test_resting_on_exactly_the_threshold_of_queries_is_warned_about():
    # SMALL_N = 20: "at most 20 paired units" is small, 21 is not
    assert "only 20 queries (≤ 20)" in small_n_warning([20, 40])
    assert small_n_warning([3, 9], what="query groups", threshold=3) is not None
    assert small_n_warning([4, 9], threshold=3) is None


def test_a_flag_column_with_one_verdict_in_every_row_stays_a_coloured_column():
    frame = pd.DataFrame({"system": ["a", "b"], "verdict": ["within", "within"]})
    out = present(frame, "t", flag_column="verdict", flags={"within": "good"})
    assert "<th>verdict</th>" in out and out.count('class="good">within') == 2
    assert "Same in every row — verdict" not in out


def test_a_table_whose_every_column_is_constant_still_shows_its_rows():
    frame = pd.DataFrame({"system": ["bm25", "bm25"], "nDCG@10": [0.5, 0.5]})
    out = present(frame, "t", scale=100, scaled=["nDCG@10"])
    assert "Same in every row" not in out and "<th>system</th>" in out and out.count(">50.0<") == 2


def test_a_table_of_one_row_is_not_folded_into_a_note():
    frame = pd.DataFrame({"system": ["bm25"], "nDCG@10": [0.5], "n": [24]})
    out = present(frame, "t", scale=100, scaled=["nDCG@10"], keep=["system"])
    assert "Same in every row" not in out and "<th>nDCG@10 ×100</th>" in out and ">50.0<" in out and ">24<" in out


def _toy_benchmark():
    from instir.benchmarks.types import Benchmark, Corpus, Doc, Query

    queries = [Query(id="q1", query="one two three", instruction="only four words here", group="g1"),
               Query(id="q2", query="five", instruction="six seven", group="g2")]
    qrels = {"q1": {"d1": 1, "d2": 0, "d3": 2}, "q2": {"d2": 1}}
    corpus = Corpus.from_docs(Doc(id=d, text=f"text of {d}") for d in ("d1", "d2", "d3"))
    return Benchmark(name="toy", layout="test", revision="local", setting="instructed", corpus=corpus,
                     queries={q.id: q for q in queries}, qrels=qrels, is_sample=True)


def test_the_exploration_counts_words_and_relevant_passages_a_judged_irrelevant_one_apart():
    from instir.stages.explore import _example, _instances

    instances = _instances("toy", _toy_benchmark()).set_index("id")
    assert instances["query_words"].tolist() == [3, 1] and instances["instruction_words"].tolist() == [4, 2]
    assert instances["relevant"].tolist() == [2, 1]  # q1's d2 is judged, with grade 0: not relevant
    example = _example(_toy_benchmark())
    assert example.group == "g1" and list(zip(example.relevant["document"], example.relevant["grade"])) == [
        ("d1", 1), ("d3", 2)]
    lacking = _toy_benchmark()
    lacking.qrels["q1"]["d9"] = 1  # judged relevant, not in the corpus (real qrels have such ids): no KeyError
    assert _example(lacking).relevant["document"].tolist() == ["d1", "d3"]


def test_the_exploration_tables_keep_the_benchmarks_order_a_level_less_benchmark_and_whole_counts():
    from instir.stages.explore import Exploration

    # zeta: no levels, groups of 2 and 1 instances; alpha (given second): levels 1 and 2, one group of 2
    instances = pd.DataFrame({"benchmark": ["zeta"] * 3 + ["alpha"] * 2, "group": ["g1", "g1", "g2", "h1", "h1"],
                              "level": pd.array([None, None, None, 1, 2], dtype="Int64"),
                              "relevant": [1, 3, 2, 1, 1], "query_words": [1, 2, 3, 4, 5],
                              "instruction_words": [2, 3, 4, 5, 6]})
    documents = pd.DataFrame({"benchmark": ["zeta", "alpha"], "document_words": [10, 20]})
    data = Exploration(pd.DataFrame({"benchmark": ["zeta", "alpha"], "sample": False}), instances, documents, [], "")
    groups = data.group_sizes()
    assert list(groups.index) == ["zeta", "alpha"]
    assert [str(groups.loc["zeta", s]) for s in ("count", "min", "max", "mean")] == ["2", "1", "2", "1.5"]
    levels = data.levels()["instances"]
    assert [(b, None if pd.isna(level) else level, n) for (b, level), n in levels.items()] == [
        ("zeta", None, 3), ("alpha", 1, 1), ("alpha", 2, 1)]
    relevant = data.relevant()
    assert relevant["count"].tolist() == [3, 1, 1] and str(relevant["max"].iloc[0]) == "3"
    lengths = data.lengths()
    assert [str(lengths.loc[("query_words", s), "zeta"]) for s in ("count", "min", "max")] == ["3", "1", "3"]


def test_the_data_statement_names_a_benchmark_whose_data_is_not_the_papers():
    from instir.stages.explore import Exploration

    overview = pd.DataFrame({"benchmark": ["ifir/fiqa", "instructir"], "sample": [False, False]})
    data = Exploration(overview, pd.DataFrame(), pd.DataFrame(), [], "",
                       checks={"ifir/fiqa": "6 queries where the paper has 1,718", "instructir": None})
    text = data.data_statement()
    assert text.startswith("**Not the papers' data.**") and "6 queries where the paper has 1,718" in text
    assert "instructir" not in text


def test_the_length_table_describes_the_query_and_instruction_words_apart(tmp_path):
    from instir.benchmarks import load_benchmark

    lengths = describe_benchmarks(tmp_path, ["followir-sample/core17"]).lengths()["followir-sample/core17"]
    queries = load_benchmark("followir-sample/core17").queries.values()
    for measure, words in (("query_words", [len(q.query.split()) for q in queries]),
                           ("instruction_words", [len(q.instruction.split()) for q in queries])):
        assert (lengths[measure, "min"], lengths[measure, "max"]) == (min(words), max(words)), measure
        assert lengths[measure, "mean"] == pytest.approx(sum(words) / len(words)), measure


def test_the_data_statement_says_the_samples_are_samples_and_never_that_their_counts_are_the_papers():
    from instir.stages.explore import Exploration

    overview = pd.DataFrame({"benchmark": ["instructir-sample", "ifir/fiqa"], "sample": [True, False]})
    data = Exploration(overview, pd.DataFrame(), pd.DataFrame(), [], "",
                       checks={"instructir-sample": "a bundled sample", "ifir/fiqa": None})
    assert data.samples == ["instructir-sample"]
    text = data.data_statement()
    assert text.startswith("**SAMPLE statistics.**") and "are bundled samples" in text
    assert "Not the papers' data" not in text and "published ones" not in text
    only_real = Exploration(overview.iloc[1:], pd.DataFrame(), pd.DataFrame(), [], "", checks={"ifir/fiqa": None})
    assert only_real.data_statement().startswith("The counts above are the published ones for every benchmark")
