"""The tidy table: slices, wide paper view, exports."""

import importlib.util

import pandas as pd
import pytest

from instir.benchmarks.types import Query
from instir.metrics.table import COLUMNS, combine, export, summarise, wide


def _per_query(values: dict[str, float], measure: str = "nDCG@20") -> pd.DataFrame:
    return pd.DataFrame({"qid": list(values), "measure": measure, "value": list(values.values())})


def test_one_row_per_measure_and_slice_with_query_counts(ifir_like):
    per_query = pd.concat([_per_query({"q1_1": 1.0, "q1_2": 0.5, "q1_3": 0.0}),
                           _per_query({"q1_1": 1.0, "q1_2": 1.0, "q1_3": 0.0}, "RR@20")])
    table = summarise(per_query, ifir_like, "bm25")
    assert list(table.columns) == COLUMNS
    rows = {(r.level, r.measure): (r.value, r.n_queries) for r in table.itertuples()}
    assert rows == {("all", "nDCG@20"): (0.5, 3), ("all", "RR@20"): (pytest.approx(2 / 3), 3),
                    ("1", "nDCG@20"): (1.0, 1), ("2", "nDCG@20"): (0.5, 1), ("3", "nDCG@20"): (0.0, 1),
                    ("1", "RR@20"): (1.0, 1), ("2", "RR@20"): (1.0, 1), ("3", "RR@20"): (0.0, 1)}
    assert set(table["system"]) == {"bm25"} and set(table["benchmark"]) == {"ifir-sample/fiqa"}
    assert set(table["subset"]) == {"fiqa"} and set(table["setting"]) == {"instructed"}


def test_benchmarks_without_levels_or_subsets_get_one_pooled_slice(instructir_like):
    table = summarise(_per_query({q: 1.0 for q in instructir_like.queries}, "nDCG@10"), instructir_like, "s")
    assert table[["subset", "level", "value", "n_queries"]].to_dict("records") == [
        {"subset": "all", "level": "all", "value": 1.0, "n_queries": 6}]


def test_scored_queries_unknown_to_the_benchmark_are_an_error(instructir_like):
    with pytest.raises(KeyError, match="not in"):
        summarise(_per_query({"nope": 1.0}), instructir_like, "s")


def test_single_level_subsets_have_no_per_level_rows(make_benchmark):
    queries = [Query(id=f"q{i}_0", query="q", group=f"q{i}", level=0, subset="nfcorpus") for i in range(2)]
    bench = make_benchmark("ifir-sample/nfcorpus", queries, {"q0_0": {"a": 1}, "q1_0": {"b": 1}})
    table = summarise(_per_query({"q0_0": 1.0, "q1_0": 0.0}), bench, "s")
    assert list(table["level"]) == ["all"]


def _table() -> pd.DataFrame:
    rows = [("bm25", "nDCG@10", 0.4567), ("bm25", "RR@10", 0.5), ("e5", "nDCG@10", 0.61234), ("e5", "RR@10", 0.7)]
    return pd.DataFrame([{"system": s, "benchmark": "instructir", "setting": "instructed", "subset": "all",
                          "level": "all", "measure": m, "value": v, "n_queries": 9906} for s, m, v in rows])[COLUMNS]


def test_wide_view_scales_rounds_and_drops_constant_column_levels():
    view = wide(_table())
    assert list(view.columns) == ["nDCG@10", "RR@10"]
    assert view.loc["e5", "nDCG@10"] == 61.2 and view.loc["bm25", "nDCG@10"] == 45.7


def test_wide_view_refuses_two_values_for_one_cell():
    with pytest.raises(ValueError, match="several values"):
        wide(combine([_table(), _table()]))


def test_combine_keeps_the_standard_columns():
    both = combine([_table(), _table().assign(system="x")])
    assert list(both.columns) == COLUMNS and len(both) == 8


def test_csv_and_parquet_round_trip_the_tidy_table(tmp_path):
    table = _table()
    back_csv = pd.read_csv(export(table, tmp_path / "t.csv"))
    back_parquet = pd.read_parquet(export(table, tmp_path / "t.parquet"))
    for back in (back_csv, back_parquet):
        assert list(back.columns) == COLUMNS
        assert back["value"].tolist() == table["value"].tolist()


def test_latex_export_holds_the_wide_view(tmp_path):
    text = export(_table(), tmp_path / "t.tex").read_text()
    assert "\\begin{tabular}" in text and "61.2" in text and "nDCG@10" in text


@pytest.mark.skipif(importlib.util.find_spec("tabulate") is None, reason="pandas.to_markdown needs tabulate")
def test_markdown_export_holds_the_wide_view(tmp_path):
    text = export(_table(), tmp_path / "t.md", digits=2).read_text()
    assert "| e5" in text and "61.23" in text


def test_unknown_export_formats_are_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown table format"):
        export(_table(), tmp_path / "t.xlsx")
