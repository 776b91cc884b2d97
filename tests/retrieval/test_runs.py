"""Runs: trec_eval-compatible ordering, strict scores, TREC + sidecar round trip, atomic
writes, bad run files, self-hits and bring-your-own id checks."""

import hashlib
import json
import os
import warnings

import numpy as np
import pandas as pd
import pytest
import pytrec_eval
from says import raises_saying

from instir import atomic
from instir.benchmarks.types import FormatError
from instir.errors import UserError
from instir.retrieval import runs
from instir.retrieval.runs import (
    Run,
    as_run,
    check_run_ids,
    drop_self_hits,
    ranked_depth,
    read_run,
    read_sidecar,
    run_is_complete,
    shallowest_query,
    sidecar_path,
    tied_again,
    write_run,
)


def frame(rows):
    return pd.DataFrame(rows, columns=["qid", "docid", "score"])


def random_tied_frame(seed: int, n_queries: int = 40, n_docs: int = 30) -> pd.DataFrame:
    """Scores from a handful of values, so most queries have many ties."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(n_queries):
        for d in rng.choice(n_docs, size=rng.integers(1, n_docs), replace=False):
            rows.append((f"q{q}", f"d{d}", float(rng.choice([0.5, 1.25, 2.0, 7.75]))))
    return frame(rows)


def test_ties_break_by_docid_descending_like_trec_eval():
    run = Run(frame([("q1", "a", 1.0), ("q1", "c", 2.0), ("q1", "b", 1.0), ("q1", "B", 1.0)]))
    assert run.df["docid"].tolist() == ["c", "b", "a", "B"]  # byte order: "B" < "a" < "b"
    assert run.df["rank"].tolist() == [1, 2, 3, 4]


def test_scores_are_strictly_decreasing_float32_and_only_ties_move():
    run = Run(frame([("q", "a", 1.0), ("q", "b", 1.0), ("q", "c", 1.0), ("q", "d", 0.5)]))
    scores = run.df["score"].to_numpy()
    assert scores[0] == 1.0 and scores[3] == 0.5
    assert np.all(np.diff(scores) < 0)
    assert scores[1] == np.nextafter(np.float32(1.0), np.float32(0)) == np.float32(scores[1])
    assert scores[2] == np.nextafter(np.float32(scores[1]), np.float32(0))


def test_tie_lowering_never_crosses_into_the_next_score():
    one = np.float32(1.0)
    just_below = float(np.nextafter(one, np.float32(0)))
    run = Run(frame([("q", "a", 1.0), ("q", "b", 1.0), ("q", "c", just_below), ("q", "d", just_below)]))
    assert run.df["docid"].tolist() == ["b", "a", "d", "c"]
    assert np.all(np.diff(run.df["score"].to_numpy()) < 0)


def test_input_order_does_not_matter():
    df = random_tied_frame(1)
    shuffled = df.sample(frac=1.0, random_state=7)
    first = Run(df).df
    # queries keep first-appearance order; put them back in the same order to compare rows
    again = Run(shuffled).df.set_index("qid").loc[pd.unique(first["qid"])].reset_index()
    pd.testing.assert_frame_equal(first, again[first.columns])


@pytest.mark.parametrize("swap", [False, True])
def test_rows_already_in_trec_order_give_the_same_run_as_any_other_order(swap):
    raw = random_tied_frame(3)
    first_seen = {q: i for i, q in enumerate(pd.unique(raw["qid"]))}
    laid_out = raw.assign(q=raw["qid"].map(first_seen), s=raw["score"].astype(np.float32),
                          d=raw["docid"].map(lambda d: d.encode())).sort_values(
        ["q", "s", "d"], ascending=[True, False, False]).drop(columns=["q", "s", "d"]).reset_index(drop=True)
    if swap:  # two tied rows the wrong way round: no longer in order, sorted again
        tied = laid_out.index[(laid_out["qid"] == laid_out["qid"].shift(-1))
                              & (laid_out["score"] == laid_out["score"].shift(-1))][0]
        laid_out.iloc[[tied, tied + 1]] = laid_out.iloc[[tied + 1, tied]].to_numpy()
    pd.testing.assert_frame_equal(Run(laid_out).df, Run(raw.sample(frac=1.0, random_state=5)).df
                                  .set_index("qid").loc[list(first_seen)].reset_index()[list(runs.RUN_COLUMNS)])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pytrec_eval_scores_the_canonical_run_like_the_raw_one(seed):
    raw = random_tied_frame(seed)
    qrels = {q: {f"d{d}": int(d % 3 == 0) for d in range(30)} for q in raw["qid"].unique()}
    as_dict = {}
    for q, d, s in raw.itertuples(index=False):
        as_dict.setdefault(q, {})[d] = s
    measures = {"P_1", "P_3", "ndcg_cut_5", "recip_rank"}
    expected = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(as_dict)
    got = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(Run(raw).to_dict())
    assert got == expected


def test_from_arrays_equals_building_the_frame():
    rng = np.random.default_rng(3)
    doc_ids = np.array([f"{i}_{i % 4}" for i in range(50)], dtype=object)
    indices = np.stack([rng.choice(50, size=12, replace=False) for _ in range(20)])
    scores = rng.choice([0.0, 1.0, 2.5, 3.0], size=indices.shape).astype(np.float32)
    keep = scores > 0
    qids = [f"q{i}" for i in range(20)]
    fast = Run.from_arrays(qids, doc_ids, indices, scores, {"k": 12}, keep=keep)
    rows = [(qids[i], doc_ids[indices[i, j]], float(scores[i, j])) for i in range(20) for j in range(12) if keep[i, j]]
    slow = Run(frame(rows))
    pd.testing.assert_frame_equal(fast.df, slow.df)
    assert fast.meta == {"k": 12, "ties": slow.meta["ties"]}  # the ties both broke, recorded alike


def test_from_arrays_rejects_duplicates_and_bad_shapes():
    with pytest.raises(ValueError, match="duplicate document 'd1' for query 'q0'"):
        Run.from_arrays(["q0"], ["d0", "d1"], np.array([[1, 1]]), np.array([[1.0, 0.5]]))
    with pytest.raises(ValueError, match="must be"):
        Run.from_arrays(["q0", "q1"], ["d0"], np.array([[0]]), np.array([[1.0]]))
    with pytest.raises(ValueError, match="query ids of the rows must be unique"):
        Run.from_arrays(["q0", "q0"], ["d0"], np.array([[0], [0]]), np.array([[1.0], [2.0]]))


def test_bad_frames_are_rejected():
    with pytest.raises(ValueError, match="missing \\['score'\\]"):
        Run(pd.DataFrame({"qid": ["q"], "docid": ["d"]}))
    with pytest.raises(ValueError, match="duplicate document 'd' for query 'q'|duplicate document d for query q"):
        Run(frame([("q", "d", 1.0), ("q", "d", 2.0)]))
    with pytest.raises(ValueError, match="finite"):
        Run(frame([("q", "d", float("nan"))]))


@pytest.mark.parametrize("score", [2e39, -1e39, -2e39, 1e300])
def test_a_score_beyond_single_precision_is_refused_naming_its_query_and_document(score):
    # on the commit before: 2e39 became inf and 1e39 3.4e38 with a RuntimeWarning, -1e39 and -2e39 -inf and NaN
    # ("run has NaN scores" from evaluate)
    said = ("document 'a'", "query 'q'", f"{score:.6g}", "does not fit a 32-bit float", "single-precision")
    with raises_saying(UserError, *said):
        Run(frame([("q", "b", 1.0), ("q", "a", score)]))
    with raises_saying(UserError, *said):
        Run.from_scores({"q": {"b": 1.0, "a": score}})
    with raises_saying(UserError, *said):
        Run.from_arrays(["p", "q"], ["a", "b"], np.array([[1, 0], [1, 0]]), np.array([[2.0, 1.0], [1.0, score]]))


def test_the_largest_single_precision_scores_are_kept_and_ties_below_the_lowest_are_refused():
    top = float(np.finfo(np.float32).max)
    assert Run.from_scores({"q": {"a": top, "b": -top}}).df["score"].tolist() == [top, -top]
    # on the commit before: the tie was broken to -inf and the next to NaN
    with raises_saying(UserError, "query 'q'", "tied", "the lowest 32-bit float"):
        Run.from_scores({"q": {"a": -top, "b": -top, "c": -top}})
    with raises_saying(UserError, "query 'q'", "tied", "the lowest 32-bit float"):
        Run.from_arrays(["p", "q"], ["a", "b"], np.array([[0, 1], [0, 1]]), np.array([[1.0, 0.5], [-top, -top]]))


def test_columns_and_dtypes_follow_the_run_contract():
    run = Run(pd.DataFrame({"qid": [1, 1], "docid": [7, 8], "score": [1, 2], "rank": [9, 9]}))
    assert list(run.df.columns) == ["qid", "docid", "score", "rank"]
    assert run.df["qid"].tolist() == ["1", "1"] and run.df["docid"].tolist() == ["8", "7"]
    assert run.df["score"].dtype == np.float64 and run.df["rank"].tolist() == [1, 2]  # given ranks ignored
    assert as_run(run.df).df.equals(run.df) and as_run(run) is run
    with pytest.raises(TypeError):
        as_run({"q": {"d": 1.0}})


def test_frames_assembled_by_concat_are_accepted():
    parts = [frame([("q1", "a", 1.0)]).astype({"qid": "str", "docid": "str"}),
             frame([("q1", "b", 2.0), ("q2", "a", 1.0)]).astype({"qid": "str", "docid": "str"})]
    run = Run(pd.concat(parts, ignore_index=True))  # Arrow-backed columns in several chunks
    assert run.df[["qid", "docid"]].values.tolist() == [["q1", "b"], ["q1", "a"], ["q2", "a"]]


def test_from_scores_top_and_to_dict():
    run = Run.from_scores({"q1": {"a": 3.0, "b": 2.0, "c": 1.0}, "q2": {"x": 1.0}}, {"k": 3})
    assert run.qids == ["q1", "q2"]
    assert run.top(2).df["docid"].tolist() == ["a", "b", "x"] and run.top(2).meta["k"] == 2
    assert run.to_dict() == {"q1": {"a": 3.0, "b": 2.0, "c": 1.0}, "q2": {"x": 1.0}}
    assert len(Run.from_scores({})) == 0


def test_a_run_cut_deeper_than_it_ranks_keeps_its_own_depth(instructir_sample):
    # on the commit before, top(100) of a 10-deep run without a k said k 100: evaluate's depth note (which trusts
    # the k a run was retrieved at) no longer said that nDCG@20 counts ranks 11-20 as non-relevant
    from instir.metrics import evaluate_runs

    shallow = Run.from_scores({"q1": {f"d{i}": 10.0 - i for i in range(10)}})
    assert shallow.top(100).meta["k"] == 10 and shallow.top(5).meta["k"] == 5
    asked = Run.from_scores({"q1": {"a": 1.0}}, {"k": 100})  # retrieved at 100, one document matched
    assert asked.top(50).meta["k"] == 50
    from instir.retrieval import retrieve
    from instir.retrieval.lexical import BM25Retriever

    run = retrieve(instructir_sample, BM25Retriever(show_progress=False), k=100)
    assert not evaluate_runs({"bm25": run.top(100)}, instructir_sample, ["nDCG@20"]).notes
    cut = Run(run.df[run.df["rank"] <= 10]).top(100)  # a run of one's own, cut at 10: no k of its own
    (note,) = evaluate_runs({"cut": cut}, instructir_sample, ["nDCG@20"]).notes
    assert note.startswith("cut: ranks at most 10 documents per query")


def test_trec_write_read_round_trip(tmp_path):
    run = Run(random_tied_frame(5), {"benchmark": {"name": "toy"}, "k": 30})
    path = write_run(run, tmp_path / "toy.trec")
    back = read_run(path)
    pd.testing.assert_frame_equal(back.df, run.df)
    assert back.meta["benchmark"] == {"name": "toy"} and back.meta["k"] == 30
    assert back.meta["path"] == str(path) and back.meta["tag"] == "instir"
    side = json.loads(sidecar_path(path).read_text())
    assert side["rows"] == len(run) and side["queries"] == run.df["qid"].nunique()
    assert {"python", "numpy", "pandas", "bm25s"} <= set(side["versions"])
    first = path.read_text().splitlines()[0].split()
    assert first[1] == "Q0" and first[3] == "1" and first[5] == "instir"


def test_written_scores_are_strictly_decreasing_in_the_file(tmp_path):
    path = write_run(Run(random_tied_frame(6)), tmp_path / "r.trec")
    lines = pd.read_csv(path, sep=" ", header=None, names=["q", "z", "d", "r", "s", "t"], dtype={"q": str})
    assert (lines.groupby("q", sort=False)["s"].diff().dropna() < 0).all()


def test_run_is_complete_checks_sidecar_and_hash(tmp_path):
    path = write_run(Run(random_tied_frame(7)), tmp_path / "r.trec")
    assert run_is_complete(path)
    with path.open("a") as fh:
        fh.write("q0 Q0 extra 999 0.001 instir\n")
    assert not run_is_complete(path)
    sidecar_path(path).unlink()
    assert not run_is_complete(path)
    assert not run_is_complete(tmp_path / "missing.trec")


def _crash_on_call(monkeypatch, n: int):
    """Make the n-th os.replace (1-based) raise, as if the process died there."""
    real, calls = os.replace, []

    def replace(src, dst):
        calls.append(dst)
        if len(calls) == n:
            raise KeyboardInterrupt("simulated crash")
        return real(src, dst)

    monkeypatch.setattr(atomic.os, "replace", replace)


@pytest.mark.parametrize("crash_at", [1, 2])
def test_crash_during_write_leaves_no_complete_run_and_no_temp_files(tmp_path, monkeypatch, crash_at):
    run = Run(random_tied_frame(8))
    _crash_on_call(monkeypatch, crash_at)
    with pytest.raises(KeyboardInterrupt):
        write_run(run, tmp_path / "r.trec")
    assert not run_is_complete(tmp_path / "r.trec")
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if crash_at == 1 else ["r.trec"])


def test_crash_while_overwriting_a_complete_run_invalidates_it(tmp_path, monkeypatch):
    path = write_run(Run(random_tied_frame(9)), tmp_path / "r.trec")
    _crash_on_call(monkeypatch, 2)  # new TREC text in place, old sidecar left behind
    with pytest.raises(KeyboardInterrupt):
        write_run(Run(random_tied_frame(10)), path)
    assert not run_is_complete(path)
    assert read_run(path).meta["source"] == "external"  # the stale sidecar is not trusted


def test_external_run_with_tabs_reads_and_reports_its_tag(tmp_path):
    path = tmp_path / "theirs.run"
    path.write_text("q1\tQ0\td1\t1\t12.5\tsystemX\nq1\tQ0\td2\t2\t11\tsystemX\n\nq2 Q0 d1 1 3 systemX\n")
    run = read_run(path)
    assert run.df["docid"].tolist() == ["d1", "d2", "d1"]
    assert run.meta["source"] == "external" and run.meta["tag"] == "systemX"


@pytest.mark.parametrize("text, line, field, problem", [
    ("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0\n", 2, None, "expected 6 whitespace-separated fields"),
    ("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 high t\n", 2, "score", "expected a number, got 'high'"),
    ("q1 Q0 d1 first 2.0 t\n", 1, "rank", "expected an integer, got 'first'"),
    ("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 nan t\n", 2, "score", "expected a finite number"),
    ("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 -1e39 t\n", 2, "score", "the score -1e+39 does not fit a 32-bit float"),
    ("q1 Q0 d1 1 2e39 t\nq1 Q0 d2 2 1e39 t\n", 1, "score", "the score 2e+39 does not fit a 32-bit float"),
    ("q1 Q0 d1 1 2.0 t\nq2 Q0 d1 1 2.0 t\nq1 Q0 d1 3 1.0 t\n", 3, "docid",
     "document 'd1' listed twice for query 'q1' (first on line 1)"),
])
def test_bad_run_lines_name_file_line_and_field(tmp_path, text, line, field, problem):
    path = tmp_path / "bad.trec"
    path.write_text(text)
    with pytest.raises(FormatError) as err:
        read_run(path)
    assert err.value.path == str(path) and err.value.where == line and err.value.field == field
    assert problem in str(err.value)


def test_missing_or_empty_run_file(tmp_path):
    with pytest.raises(FormatError, match="run file not found"):
        read_run(tmp_path / "nope.trec")
    for blank in (b"\n", b"\t\r\n", b" \x0b\x0c\n"):  # whitespace of any kind, as bytes.isspace reads it
        (tmp_path / "empty.trec").write_bytes(blank)
        with pytest.raises(FormatError, match="empty run file"):
            read_run(tmp_path / "empty.trec")


@pytest.mark.parametrize("text", [b"\xef\xbb\xbf", b"\xef\xbb\xbf\n \n"])
def test_a_run_file_holding_only_a_byte_order_mark_is_refused_as_empty(tmp_path, text):
    path = tmp_path / "saved-empty.trec"
    path.write_bytes(text)  # an editor's "empty" UTF-8 file: no run, not a run of every query scoring 0
    with pytest.raises(FormatError, match="empty run file"):
        read_run(path)


def test_a_run_with_no_results_round_trips_as_an_empty_run(tmp_path):
    path = write_run(Run.from_scores({}, {"k": 10}), tmp_path / "nothing.trec")
    assert path.read_bytes() == b"" and run_is_complete(path)
    assert json.loads(sidecar_path(path).read_text())["rows"] == 0
    back = read_run(path)
    assert len(back) == 0 and back.meta["k"] == 10
    assert list(back.df.columns) == list(runs.RUN_COLUMNS)


@pytest.mark.parametrize("scores", [{"q1": {"d1": 2.0, "d2": 1.0}}, {}], ids=["rows", "empty"])
def test_a_sidecar_vouches_for_a_run_file_by_all_its_bytes_a_byte_order_mark_included(tmp_path, scores):
    """A run saved again with a byte-order mark: the sidecar counts only when its hash is that of the file's
    bytes as they lie on disk (mark and all), as read_sidecar(path) itself hashes them."""
    path = write_run(Run.from_scores(scores, {"k": 10}), tmp_path / "r.trec")
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    side = json.loads(sidecar_path(path).read_text())  # its hash: of the bytes without the mark
    if scores:
        assert read_run(path).meta["source"] == "external" and read_sidecar(path) is None
    else:
        with pytest.raises(FormatError, match="empty run file"):
            read_run(path)
    sidecar_path(path).write_text(json.dumps({**side, "trec_sha256": hashlib.sha256(path.read_bytes()).hexdigest()}))
    back = read_run(path)
    assert back.meta["k"] == 10 and len(back) == sum(map(len, scores.values()))


def test_an_empty_file_whose_sidecar_does_not_vouch_for_it_is_refused(tmp_path):
    path = write_run(Run(random_tied_frame(11)), tmp_path / "r.trec")
    path.write_bytes(b"")  # truncated: the sidecar's hash and row count no longer match
    with pytest.raises(FormatError, match="empty run file"):
        read_run(path)
    sidecar_path(path).write_text(json.dumps({"rows": 0, "trec_sha256": "0" * 64}))
    with pytest.raises(FormatError, match="empty run file"):
        read_run(path)


@pytest.mark.parametrize("sep", [" ", "\t"])  # single spaces take the fast path, tabs the slow one
def test_quotes_in_run_files_are_literal_characters_on_both_paths(tmp_path, sep):
    path = tmp_path / "quoted.trec"
    path.write_text(sep.join(['q1', 'Q0', '"d1"', '1', '2.0', 't']) + "\n"
                    + sep.join(['q1', 'Q0', 'x"y', '2', '1.0', 't']) + "\n")
    assert read_run(path).df["docid"].tolist() == ['"d1"', 'x"y']
    path.write_text(sep.join(['q1', 'Q0', '"a', 'b"', '1', '2.0', 't']) + "\n")
    with pytest.raises(FormatError, match="expected 6 whitespace-separated fields") as err:
        read_run(path)  # a quoted id with a space is two fields, as trec_eval reads it
    assert err.value.where == 1


def test_ids_holding_quotes_are_written_literally_and_read_back(tmp_path):
    run = Run(frame([('q"1', '"d1"', 2.0), ('q"1', "d,2", 1.0)]))
    path = write_run(run, tmp_path / "r.trec")
    assert path.read_text() == 'q"1 Q0 "d1" 1 2 instir\nq"1 Q0 d,2 2 1 instir\n'
    pd.testing.assert_frame_equal(read_run(path).df, run.df)


@pytest.mark.parametrize("sep", [" ", "\t"])
def test_run_file_with_a_byte_order_mark_reads_on_both_paths(tmp_path, sep):
    path = tmp_path / "bom.trec"
    path.write_bytes(b"\xef\xbb\xbf" + sep.join(["q1", "Q0", "d1", "1", "2.0", "t"]).encode() + b"\n")
    assert read_run(path).df["qid"].tolist() == ["q1"]


@pytest.mark.parametrize("sep", [" ", "\t"])
def test_run_file_with_bytes_that_are_not_utf8_names_the_line(tmp_path, sep):
    path = tmp_path / "latin1.trec"
    path.write_bytes(sep.join(["q1", "Q0", "d1", "1", "2.0", "t"]).encode() + b"\n"
                     + sep.join(["q1", "Q0", "caf\xe9", "2", "1.0", "t"]).encode("latin-1") + b"\n")
    with pytest.raises(FormatError, match="not UTF-8 text") as err:
        read_run(path)
    assert err.value.where == 2


def test_a_huge_id_is_quoted_short_in_run_errors_and_id_checks(tmp_path, toy_benchmark):
    huge = "d" * 10_000_000
    path = tmp_path / "huge.trec"
    path.write_text(f"q1\tQ0\t{huge}\t1\t2.0\tt\nq1\tQ0\t{huge}\t2\t1.0\tt\n")
    with pytest.raises(FormatError) as err:
        read_run(path)
    assert len(str(err.value)) < 400 and "(10000000 chars)" in str(err.value)
    check = check_run_ids(Run(frame([("1_1", huge, 1.0), (huge, "10_1", 1.0)])), toy_benchmark())
    assert len(check.summary()) < 600 and check.summary().count("(10000000 chars)") == 2
    with pytest.raises(ValueError) as err:
        Run(frame([("q", huge, 1.0), ("q", huge, 2.0)]))
    assert len(str(err.value)) < 300


def test_ids_that_cannot_be_written_as_trec(tmp_path):
    with pytest.raises(ValueError, match="contains whitespace"):
        write_run(Run(frame([("q 1", "d", 1.0)])), tmp_path / "r.trec")
    with pytest.raises(ValueError, match="one word"):
        write_run(Run(frame([("q", "d", 1.0)])), tmp_path / "r.trec", tag="my tag")
    assert list(tmp_path.iterdir()) == []


def test_drop_self_hits_removes_query_id_docs_and_reranks():
    run = Run(frame([("5_1", "5_1", 9.0), ("5_1", "7_1", 5.0), ("5_1", "8_1", 4.0), ("6_1", "5_1", 1.0)]),
              {"self_hits_dropped": 2})
    out = drop_self_hits(run)
    assert out.df[["qid", "docid", "rank"]].values.tolist() == [["5_1", "7_1", 1], ["5_1", "8_1", 2],
                                                                 ["6_1", "5_1", 1]]
    assert out.meta["self_hits_dropped"] == 3
    clean = drop_self_hits(out.df)
    assert clean.df.equals(out.df) and clean.meta["self_hits_dropped"] == 0


def test_bring_your_own_run_reports_unknown_ids_without_dropping_them(toy_benchmark):
    bench = toy_benchmark()
    run = Run(frame([("1_1", "10_1", 3.0), ("1_1", "ghost-doc", 2.0), ("9_9", "10_1", 1.0), ("9_9", "x", 0.5),
                     ("2_1", "20_1", 1.0)]))
    check = check_run_ids(run, bench)
    assert not check.ok
    assert check.unknown_qids == ["9_9"] and check.rows_with_unknown_qid == 2
    assert check.unknown_docids == ["ghost-doc", "x"] and check.rows_with_unknown_docid == 2
    assert check.missing_qids == ["1_2", "2_2"]
    summary = check.summary()
    assert "1 query ids not in the benchmark (2 rows): '9_9'" in summary
    assert "2 document ids not in the corpus (2 rows): 'ghost-doc', 'x'" in summary
    assert "2 benchmark queries have no results" in summary
    assert len(run) == 5


def test_unknown_ids_are_listed_sorted_and_every_row_of_them_counted(toy_benchmark):
    """Unknown ids met in the order z, a: the check lists them a, z (as its summary does) and counts their rows."""
    run = Run(frame([("zz", "10_1", 3.0), ("zz", "zdoc", 2.0), ("aa", "adoc", 1.0), ("aa", "10_1", 0.5),
                     ("1_1", "zdoc", 1.0), ("1_1", "10_1", 0.9), ("1_2", "10_1", 1.0), ("2_1", "10_1", 1.0),
                     ("2_2", "10_1", 1.0)]))
    check = check_run_ids(run, toy_benchmark())
    assert (check.unknown_qids, check.rows_with_unknown_qid) == (["aa", "zz"], 4)
    assert (check.unknown_docids, check.rows_with_unknown_docid) == (["adoc", "zdoc"], 3)


def test_a_runs_depth_is_its_shallowest_benchmark_query_in_the_id_check_and_the_runs_list(toy_benchmark):
    # on the commit before, the id check (the depth notes') took the deepest query, 3, while ranked_depth (runs.csv's
    # k, the verdicts') took the shallowest of all, 1: a stray line of a query the benchmark lacks
    bench = toy_benchmark()
    rows = [("1_1", d, 3.0 - i) for i, d in enumerate(["10_1", "20_1", "30_1"])] + [("2_1", "10_1", 1.0),
                                                                                     ("2_1", "20_1", 0.5)]
    run = Run(frame([*rows, ("9_9", "10_1", 1.0)]))
    check = check_run_ids(run, bench)
    assert check.depth == ranked_depth(run, queries=bench.queries) == 2 and check.shallowest == "2_1"
    assert ranked_depth(run.to_dict(), queries=bench.queries) == 2  # MTEB's {qid: {doc: score}} alike
    even = check_run_ids(Run(frame([r for r in rows if r[0] == "1_1"] + [("2_1", "10_1", 1.0), ("2_1", "30_1", 0.9),
                                                                         ("2_1", "20_1", 0.8)])), bench)
    assert (even.depth, even.shallowest) == (3, None)  # every query as deep: the same number as before
    vouched = check_run_ids(Run(frame(rows), {"k": 100}), bench)  # its sidecar's k: a query may match fewer
    assert (vouched.depth, vouched.shallowest) == (100, None)


def test_a_clean_run_passes_the_id_check(toy_benchmark):
    bench = toy_benchmark()
    run = Run(frame([(q, d, 1.0) for q, rel in bench.qrels.items() for d in rel]))
    check = check_run_ids(run, bench)
    assert check.ok and check.missing_qids == [] and check.summary() == "all run ids are in the benchmark"


def test_run_and_sidecar_respect_the_umask_so_a_team_can_share_them(tmp_path):
    old = os.umask(0o022)
    try:
        path = write_run(Run(random_tied_frame(12)), tmp_path / "shared.trec")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o644 and sidecar_path(path).stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("line,field,words", [
    ("q1 Q0 d1 １ 2.5 t", "rank", "expected an integer, got '１' (U+FF11 FULLWIDTH DIGIT ONE"),
    ("q1 Q0 d1 1 ２.5 t", "score", "expected a number, got '２.5' (U+FF12 FULLWIDTH DIGIT TWO"),
    ("q1 Q0 d1 1 2_5 t", "score", "expected a number, got '2_5'"),
    ("q1\u00a0 Q0 d1 1 2.5 t", "qid", "'q1\\xa0' holds U+00A0 NO-BREAK SPACE at character 3"),
    ("q1 Q0 d1\u00a0x 1 2.5 t", "docid", "'d1\\xa0x' holds U+00A0 NO-BREAK SPACE at character 3"),
    ("q1\tQ0\td1\u2003\t1\t2.5\tt", "docid", "'d1\\u2003' holds U+2003 EM SPACE"),
])
def test_characters_trec_eval_reads_otherwise_are_refused_with_line_and_field(tmp_path, line, field, words):
    # on main: '１' read as 1, '２.5' as 2.5, '2_5' as 25; a no-break space kept (fast path) or stripped (slow path)
    path = tmp_path / "run.trec"
    path.write_text(f"q0 Q0 d0 1 3.0 t\n{line}\n", encoding="utf-8")
    with pytest.raises(FormatError) as err:
        read_run(path)
    assert str(err.value).startswith(f"{path}, line 2, field '{field}': {words}")


def test_a_line_break_python_sees_inside_an_id_is_no_line_break_for_the_run_reader(tmp_path):
    path = tmp_path / "run.trec"
    path.write_text("q1 Q0 d\u20281 1 2.5 t\n", encoding="utf-8")  # str.splitlines() split here
    with raises_saying(FormatError, "line 1", "field 'docid'", "U+2028"):
        read_run(path)


@pytest.mark.parametrize("separator", [" ", "\t"])  # the fast reader and the whitespace-tolerant one
def test_a_run_file_whose_ranks_put_the_lowest_score_first_is_said_once_and_read_as_trec_eval_reads_it(tmp_path,
                                                                                                    separator):
    # before, a run of distances (lower is better) with its rank column scored nDCG 0 without a word: trec_eval
    # ranks by score and ignores the rank column, and so does the kit
    # the queries' lines interleaved, as a file merged from two may hold them
    lines = ["q1 Q0 d1 1 0.1 t", "q2 Q0 d1 1 0.2 t", "q1 Q0 d2 2 0.5 t", "q2 Q0 d4 2 0.2 t", "q2 Q0 d5 3 0.7 t"]
    path = tmp_path / "distances.trec"
    path.write_text("\n".join(line.replace(" ", separator, 1) for line in lines) + "\n")
    with pytest.warns(UserWarning, match=r"distances.trec: in every query the rank column puts the lowest score first"):
        run = read_run(path)
    assert list(run.df[run.df.qid == "q1"]["docid"]) == ["d2", "d1"]  # by score, as trec_eval
    lines[2] = "q1 Q0 d2 2 0.05 t"  # one query ranked highest first: no warning
    path.write_text("\n".join(lines) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_run(path)


def test_interleaved_queries_many_lines_deep_are_judged_on_each_querys_ranks_in_file_order(tmp_path):
    """Two queries' lines alternating, 40 a query: every rank scores higher than the one before but rank 4, which
    falls below rank 3 (still above rank 2); read in each query's own file order that fall is seen, so the run is
    not said to put the lowest score first. Without rank 4 it is."""

    def score(r):
        return r / 100 if r != 4 else 0.025

    lines = [f"q{q} Q0 d{r} {r} {score(r)} t" for r in range(1, 41) for q in (1, 2)]
    path = tmp_path / "merged.trec"
    path.write_text("\n".join(lines) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read_run(path)
    path.write_text("\n".join(line for line in lines if " 4 " not in line) + "\n")
    with pytest.warns(UserWarning, match="the rank column puts the lowest score first"):
        read_run(path)


def test_ranks_counted_across_the_whole_file_are_judged_within_each_query(tmp_path):
    """Ranks 1..4 over two queries (a tool counting lines, not a query's ranks), each query lowest score first: the
    step from one query's last line to the next query's first is no step of a ranking, and the warning is given."""
    path = tmp_path / "global.trec"
    path.write_text("q1 Q0 a 1 0.1 t\nq1 Q0 b 2 0.5 t\nq2 Q0 c 3 0.2 t\nq2 Q0 d 4 0.6 t\n")
    with pytest.warns(UserWarning, match="the rank column puts the lowest score first"):
        read_run(path)


@pytest.mark.parametrize("separator", [" ", "\t"])
def test_a_run_file_whose_scores_are_all_tied_is_not_said_to_put_the_lowest_score_first(tmp_path, separator):
    """Ranks over equal scores say nothing of which end is best: no warning (only ranks that rise in score do)."""
    lines = [f"q{q}{separator}Q0 d{r} {r} 1.0 t" for q in (1, 2) for r in range(1, 6)]
    path = tmp_path / "tied.trec"
    path.write_text("\n".join(lines) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(read_run(path)) == 10


def test_the_shallowest_query_and_the_depth_count_only_the_benchmarks_queries():
    """A stray query the benchmark lacks, ranked 1 deep, neither sets the depth nor is named as the shallowest:
    of the benchmark's queries, 2_1 ranks 2 documents, 1_1 ranks 3 (for a Run and for MTEB's dict alike)."""
    scores = {"1_1": {"a": 3.0, "b": 2.0, "c": 1.0}, "2_1": {"a": 2.0, "b": 1.0}, "stray": {"a": 1.0}}
    for run in (Run.from_scores(scores), scores):
        assert shallowest_query(run, {"1_1", "2_1"}) == "2_1" and ranked_depth(run, queries={"1_1", "2_1"}) == 2
        assert shallowest_query(run) == "stray" and ranked_depth(run) == 1


def test_the_ties_a_run_broke_are_ties_again_for_a_rule_that_reads_them_and_nothing_else_moves(tmp_path):
    from instir.retrieval.runs import tied_again

    below = float(np.nextafter(np.float32(0.5), np.float32(0)))
    run = Run(pd.DataFrame({"qid": ["q"] * 7 + ["r"] * 2,
                            "docid": ["a", "c", "b", "e", "g", "f", "h", "x", "y"],
                            "score": [2.0, 1.0, 1.0, 1.0, 0.5, below, 0.25, 3.0, 3.0]}))
    assert run.df["score"].is_unique  # the ties were broken: e, c, b lowered one step after another
    for kept in (run, read_run(write_run(run, tmp_path / "r.trec"))):  # the record travels in the sidecar
        again = tied_again(kept)
        assert again["docid"].tolist() == run.df["docid"].tolist()
        by_doc = dict(zip(again["docid"], again["score"]))
        assert by_doc["e"] == by_doc["c"] == by_doc["b"] == 1.0 and by_doc["x"] == by_doc["y"] == 3.0
        assert (by_doc["a"], by_doc["h"]) == (2.0, 0.25)
        # g and f were one float32 step apart, g first, as a broken tie would be: they were no tie, and stay apart
        assert (by_doc["g"], by_doc["f"]) == (0.5, below)
    # a record of another frame (the run cut since) is not read
    assert tied_again(Run(run.df[run.df["rank"] <= 2], run.meta))["score"].is_unique


def test_a_run_made_from_part_of_a_tied_run_keeps_the_ties_of_that_part(tmp_path):
    # a run cut at k, cleared of self-hits, or kept to a task's candidates (FollowIR) was made from the parent's broken
    # scores, so its own record found no tie and p-MRR's insertion rule saw none
    from instir.retrieval.runs import drop_self_hits, tied_again
    from instir.retrieval.search import only_candidates

    run = Run(pd.DataFrame({"qid": ["q"] * 5, "docid": ["a", "q", "c", "b", "z"], "score": [3.0, 2.0, 1.0, 1.0, 0.5]}))
    for part in (run.top(4), drop_self_hits(run), only_candidates(run, {"q": ["b", "c", "a"]})):
        again = dict(zip(part.df["docid"], tied_again(part)["score"]))
        assert again["b"] == again["c"] == 1.0 and again["a"] == 3.0
    assert "ties" not in run.top(2).meta  # a 2-deep cut holds no tie: no record of the parent's


def test_scores_equal_in_single_precision_are_a_tie_broken_by_docid_as_trec_eval_reads_them():
    # trec_eval reads each score into a C float: 1 + 1e-9 and 1.0 are one float32, a tie, which "b" (the larger id)
    # wins; 1 + 1e-6 is a float32 of its own and ranks first. pytrec_eval (trec_eval's code) says the same.
    qrels = {"q": {"a": 0, "b": 1}}
    for above, first in ((1e-9, "b"), (1e-6, "a")):
        scores = {"q": {"a": 1.0 + above, "b": 1.0}}
        run = Run.from_scores(scores)
        assert run.df["docid"].tolist() == [first, "a" if first == "b" else "b"]
        evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"P_1"})
        assert evaluator.evaluate(run.to_dict()) == evaluator.evaluate(scores) == {"q": {"P_1": float(first == "b")}}


def test_a_querys_rows_given_apart_are_ranked_together():
    # rows of q1, then q2, then q1 again (two files concatenated), each query's rows already best first
    run = Run(frame([("q1", "a", 2.0), ("q2", "x", 1.0), ("q1", "b", 1.0)]))
    assert run.df[["qid", "docid", "rank"]].values.tolist() == [["q1", "a", 1], ["q1", "b", 2], ["q2", "x", 1]]
    assert run.top(1).df["docid"].tolist() == ["a", "x"]


def test_a_tie_record_given_to_another_runs_frame_is_not_read_where_its_rows_are_no_broken_tie():
    tied = Run(frame([("q", "a", 1.0), ("q", "b", 1.0)]))  # b, then a one float32 step below: a broken tie
    other = Run(frame([("q", "a", 1.0), ("q", "b", 2.0)]))  # same rows, same order, no tie
    other.meta = dict(tied.meta)  # its meta copied over, record and all
    assert other.df["docid"].tolist() == tied.df["docid"].tolist() == ["b", "a"]
    assert tied_again(other)["score"].tolist() == [2.0, 1.0]
    assert tied_again(tied)["score"].tolist() == [1.0, 1.0]
    assert np.all(np.diff(tied.df["score"]) < 0)


@pytest.mark.parametrize("sep", [" ", "\t"])  # the fast reader and the whitespace-tolerant one
def test_the_ties_of_a_run_file_without_a_sidecar_are_ties_again_for_a_rule_that_reads_them(tmp_path, sep):
    # p-MRR's insertion rule reads ties: a run of another tool, read from its TREC file alone, keeps the record of the
    # ties the kit broke when it read it, as a run the kit wrote keeps it in its sidecar
    path = tmp_path / "theirs.trec"
    path.write_text("".join(sep.join(["q", "Q0", d, str(r), s, "t"]) + "\n"
                            for r, (d, s) in enumerate([("a", "2.0"), ("b", "1.0"), ("c", "1.0")], 1)))
    run = read_run(path)
    assert run.meta["source"] == "external" and run.df["docid"].tolist() == ["a", "c", "b"]
    assert run.df["score"].is_unique
    assert tied_again(run)["score"].tolist() == [2.0, 1.0, 1.0]


def test_scores_are_written_in_their_shortest_single_precision_form(tmp_path):
    # float32(0.1) is 0.100000001490116…: the file says 0.1, the shortest text that reads back as that float32 (as
    # trec_eval reads it), not 0.10000000149011612
    run = Run(frame([("q", "a", 0.1), ("q", "b", 0.05), ("q", "c", 1e-7)]))
    text = write_run(run, tmp_path / "r.trec").read_text()
    assert text == "q Q0 a 1 0.1 instir\nq Q0 b 2 0.05 instir\nq Q0 c 3 1e-7 instir\n"


@pytest.mark.parametrize("qid, docid, bad", [("q", "", "docid ''"), ("", "d", "qid ''")])
def test_an_empty_id_is_refused_before_a_run_file_is_written(tmp_path, qid, docid, bad):
    # written, "q Q0  1 1 instir" would be a line of 5 fields for trec_eval and the kit's reader
    with raises_saying(ValueError, bad, "empty or contains whitespace", "not writable as TREC"):
        write_run(Run(frame([(qid, docid, 1.0)])), tmp_path / "r.trec")
    assert list(tmp_path.iterdir()) == []


def test_a_run_file_listed_last_rank_first_with_rank_1_on_the_best_score_reads_without_a_warning(tmp_path):
    # the rank column agrees with the scores (rank 1 scores highest): only the lines are in reverse order
    path = tmp_path / "reversed_lines.trec"
    path.write_text("q Q0 c 3 0.1 t\nq Q0 b 2 0.5 t\nq Q0 a 1 0.9 t\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run = read_run(path)
    assert run.df["docid"].tolist() == ["a", "b", "c"]


def test_a_candidate_the_system_did_not_return_ranks_below_every_one_it_did():
    # the lowest score found minus one (0.5 - 1): z, which the system never returned, ranks last; given the lowest
    # score itself it would tie c and, "z" > "c", go above it
    from instir.retrieval.search import only_candidates

    run = Run(frame([("q", "a", 2.0), ("q", "b", 1.0), ("q", "c", 0.5)]))
    kept = only_candidates(run, {"q": ["z", "b", "a", "c"]})
    assert kept.df[["docid", "score", "rank"]].values.tolist() == [["a", 2.0, 1], ["b", 1.0, 2], ["c", 0.5, 3],
                                                                   ["z", -0.5, 4]]


def test_two_runs_rank_alike_only_with_the_same_documents_in_the_same_order_and_the_same_scores():
    from instir.retrieval.runs import same_rankings

    run = Run(frame([("q", "a", 2.0), ("q", "b", 1.0), ("r", "a", 1.0)]))
    assert same_rankings(run, Run(run.df[["qid", "docid", "score"]].iloc[::-1]))  # the queries' order aside
    assert not same_rankings(run, Run(frame([("q", "a", 3.0), ("q", "b", 1.0), ("r", "a", 1.0)])))  # one score
    assert not same_rankings(run, Run(frame([("q", "b", 2.0), ("q", "a", 1.0), ("r", "a", 1.0)])))  # the order


def test_a_run_whose_sidecar_names_two_bm25_engines_is_said_to_mix_them():
    from instir.retrieval.runs import run_engine

    one = {"search": {"retriever": {"engine": "bm25s 0.2.14"}, "index": {"engine": "BM25S"}}}
    two = {"search": {"components": [{"engine": "bm25s 0.2.14"}, {"params": {"engine": "Anserini 0.24"}}]}}
    assert (run_engine(one), run_engine(two), run_engine({"search": {}}), run_engine({})) == (
        "bm25s", "mixed", "n/a", "unknown")
