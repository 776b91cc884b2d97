"""The paper-comparison stage (notebook 05's) on report folders made by hand: it reads only the
folder's files, aligns a real benchmark's numbers with the paper's rows and gives their verdicts,
and names each run's long-text windowing."""

import pandas as pd
import pytest

from instir.stages import paper_tables


def test_paper_tables_compare_numbers_from_a_real_benchmark(tmp_path):
    """05's stage reads only files: given metrics and InstFol of a real IFIR subset, it aligns them
    with the paper (BM25 on FiQA: nDCG@20 0.25 and InstFol@20 1.10 in Table 3)."""
    (tmp_path / "metrics").mkdir()
    (tmp_path / "judge").mkdir()
    pd.DataFrame({
        "system": ["bm25", "bm25", "bm25 (query-only)"], "benchmark": "ifir/fiqa", "setting": "instructed",
        "subset": "fiqa", "level": "all", "measure": ["nDCG@20[ifir-native]", "nDCG@20", "nDCG@20"],
        "value": [0.251, 0.10, 0.2], "n_queries": 1718,
    }).to_csv(tmp_path / "metrics" / "metrics.csv", index=False)
    pd.DataFrame({
        "scope": ["level", "subset"], "subset": "fiqa", "level": [3, None], "instfol": [0.05, 0.011],
        "s_q": 1.0, "s_inst": 1.1, "instances": 10, "scored": 10, "failed": 0, "dropped": 0,
        "system": "bm25", "benchmark": "ifir",
    }).to_csv(tmp_path / "judge" / "instfol.csv", index=False)
    paper_tables(tmp_path)
    compared = pd.read_csv(tmp_path / "paper_tables" / "comparison.csv")
    table3 = compared[(compared["table"] == "Table 3") & (compared["system"] == "bm25")].set_index("measure_reproduced")
    assert table3.loc["nDCG@20[ifir-native]", "within_tolerance"]
    assert not table3.loc["nDCG@20", "within_tolerance"]
    assert table3.loc["InstFol@20", "reproduced"] == pytest.approx(1.1)
    assert "ifir-native-ndcg" in table3.loc["nDCG@20", "reasons"]
    assert not (tmp_path / "paper_tables" / "not_comparable.txt").exists()
    assert "bm25 (query-only)" not in set(compared["system"])


def test_paper_tables_name_each_runs_windowing(tmp_path):
    """05's stage shows the long-text windowing each run recorded in its sidecar, and a compared row of a
    model IFIR encoded in windows carries the long-doc-windows note unless its run used 'ifir'."""
    from instir.retrieval import Run, write_run

    (tmp_path / "metrics").mkdir()
    (tmp_path / "judge").mkdir()
    systems = {"clean": "dense:facebook/contriever", "ifir": "dense:sentence-transformers/gtr-t5-base"}
    rows = []
    for mode, system in systems.items():
        run = Run(pd.DataFrame({"qid": ["q"], "docid": ["d"], "score": [1.0]}),
                  {"retriever": {"name": system, "params": {"windowing": mode}}})
        write_run(run, tmp_path / "runs" / f"{mode}.trec")
        rows.append({"benchmark": "ifir/fiqa", "system": system, "run_file": f"runs/{mode}.trec"})
    pd.DataFrame(rows).to_csv(tmp_path / "runs" / "runs.csv", index=False)
    pd.DataFrame({"system": list(systems.values()), "benchmark": "ifir/fiqa", "setting": "instructed", "subset": "fiqa",
                  "level": "all", "measure": "nDCG@20", "value": 0.3, "n_queries": 1718,
                  }).to_csv(tmp_path / "metrics" / "metrics.csv", index=False)
    pd.DataFrame(columns=["scope", "subset", "level", "instfol", "system", "benchmark"]).to_csv(
        tmp_path / "judge" / "instfol.csv", index=False)
    paper_tables(tmp_path)
    compared = pd.read_csv(tmp_path / "paper_tables" / "comparison.csv")
    table3 = compared[compared["table"] == "Table 3"].set_index("system")
    assert table3["windowing"].to_dict() == {systems["clean"]: "clean", systems["ifir"]: "ifir"}
    assert "long-doc-windows" in table3.loc[systems["clean"], "reasons"]
    assert "long-doc-windows" not in table3.loc[systems["ifir"], "reasons"]
