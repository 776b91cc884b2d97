"""The guided tour's glue (:mod:`instir.report.tour`): the release beside the sample, ranking one
typed query, the side-by-side tables, the playground's two displays and the exercises' checks
(placeholder, wrong and right answers)."""

import json
import subprocess
import sys
from dataclasses import replace

import pandas as pd
import pytest

from instir.benchmarks import load_benchmark
from instir.benchmarks.types import Benchmark, Corpus, Doc, Query
from instir.report import tour
from instir.retrieval.lexical import BM25Retriever

GROUP = "1078446"
DOCS = [Doc("d1", "a wine cabinet stores bottles of wine"), Doc("d2", "compact wine cabinet for a small dining room"),
        Doc("d3", "convert an old armoire into a wine cabinet with racks"), Doc("d4", "growing squash in the garden")]


def toy() -> Benchmark:
    queries = [Query("g_1", "wine cabinet", "small dining room", group="g"),
               Query("g_2", "wine cabinet", "old armoire conversion", group="g")]
    return Benchmark("instructir-toy", "hand-made", "local", "instructed", Corpus.from_docs(DOCS),
                     {q.id: q for q in queries}, {"g_1": {"d2": 1}, "g_2": {"d3": 1}}, family="instructir")


def bm25() -> BM25Retriever:
    return BM25Retriever(show_progress=False)


@pytest.mark.processes
def test_the_quiet_environment_is_the_kits_and_importing_the_module_imports_no_tqdm():
    from instir.progress import ENV_VAR, QUIET_BARS

    assert tour.QUIET_ENV == {ENV_VAR: "0", **QUIET_BARS}
    heavy = ("tqdm", "huggingface_hub", "torch")
    code = ("import json, sys, instir.report.tour; "
            f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {heavy!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []  # quiet_kernel must run before either reads its environment


def test_quiet_kernel_sets_the_environment_and_imports_tqdm_without_a_warning(monkeypatch):
    for name in tour.QUIET_ENV:  # set, then removed: the monkeypatch restores each as it was after the test
        monkeypatch.setenv(name, "before")
        monkeypatch.delenv(name)
    tour.quiet_kernel()
    import os

    assert {name: os.environ[name] for name in tour.QUIET_ENV} == tour.QUIET_ENV


def test_release_group_reads_one_group_of_the_authors_files(tmp_path):
    (tmp_path / "qrels").mkdir()
    rows = [{"_id": "7_1", "text": "I am a chef.", "metadata": {"origin_query": "soup"}},
            {"_id": "8_1", "text": "other", "metadata": {"origin_query": "x"}},
            {"_id": "7_2", "text": "I am a child.", "metadata": {"origin_query": "soup"}}]
    (tmp_path / "only_instruction_queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "qrels" / "test.tsv").write_text("qid\tpid\tscore\n7_1\t70_1\t1\n7_2\t70_2\t1\n8_1\t80_1\t1\n")
    frame = tour.release_group(tmp_path, "7")
    assert frame.to_dict(orient="list") == {"qid": ["7_1", "7_2"], "query": ["soup", "soup"],
                                            "instruction": ["I am a chef.", "I am a child."],
                                            "target": ["70_1", "70_2"]}


def test_the_bundled_sample_holds_the_releases_group_with_its_targets_origins():
    folder = tour.release_folder()
    if folder is None:
        pytest.skip("no data/instructir-github in this checkout")
    sample = load_benchmark("instructir-sample")
    check = tour.provenance(sample, tour.release_group(folder, GROUP))
    assert list(check["qid"]) == sample.groups()[GROUP] and len(check) == 6
    flags = ["in sample", "same query", "same instruction", "same target", "origin = target's MS MARCO id"]
    assert check[flags].all().all()
    assert set(check["origin_target"]) == {"7865137"}


def test_provenance_notices_an_edited_instruction_and_a_missing_instance():
    sample = load_benchmark("instructir-sample")
    release = pd.DataFrame({"qid": [f"{GROUP}_1", f"{GROUP}_2", f"{GROUP}_99"], "query": "wine cabinets definition",
                            "instruction": [sample.queries[f"{GROUP}_1"].instruction, "edited", "new"],
                            "target": ["7865137_1", "7865137_2", "7865137_99"]})
    check = tour.provenance(sample, release).set_index("qid")
    assert check.loc[f"{GROUP}_1", "same instruction"] and not check.loc[f"{GROUP}_2", "same instruction"]
    assert check.loc[f"{GROUP}_2", "same target"]
    assert not check.loc[f"{GROUP}_99", "in sample"] and not check.loc[f"{GROUP}_99", "same target"]


def test_only_keeps_the_instances_and_shares_the_corpus():
    bench = toy()
    one = tour.only(bench, ["g_2"])
    assert list(one.queries) == ["g_2"] and one.qrels == {"g_2": {"d3": 1}} and one.corpus is bench.corpus


def test_rank_text_uses_the_instructed_template_and_the_bare_query_without_instruction():
    bench, retriever = toy(), bm25()
    bare = tour.rank_text(bench, retriever, "wine cabinet", "", k=3)
    assert set(bare["docid"]) == {"d1", "d2", "d3"} and list(bare["rank"]) == [1, 2, 3]
    typed = tour.rank_text(bench, retriever, "wine cabinet", "an old armoire", k=3)
    assert typed["docid"].iloc[0] == "d3" and set(typed["qid"]) == {"typed"}
    assert list(tour.rank(bench, retriever, "query-only", k=2).columns) == ["qid", "rank", "docid", "score"]


def test_side_by_side_marks_documents_and_leaves_short_lists_blank():
    lists = {"A": pd.DataFrame({"qid": "q", "rank": [1, 2], "docid": ["d2", "d9"]}),
             "B": pd.DataFrame({"qid": ["q", "other"], "rank": [1, 1], "docid": ["d1", "d2"]})}
    frame = tour.side_by_side(lists, "q", {"d2": tour.TARGET}, k=3)
    assert frame.to_dict(orient="list") == {"rank": [1, 2, 3], "A": ["d2 ★", "d9", ""], "B": ["d1", "", ""]}


def test_marks_and_target_ranks_of_a_group():
    bench = toy()
    assert tour.marks_for(bench, ["g_1", "g_2"], focus="g_2") == {"d2": "target of _1", "d3": tour.TARGET}
    lists = {"run": pd.DataFrame({"qid": ["g_1", "g_1", "g_2"], "rank": [1, 2, 1], "docid": ["d1", "d2", "d1"]})}
    ranks = tour.target_ranks(lists, bench.qrels, ["g_1", "g_2"])
    assert ranks["run"].tolist()[0] == 2 and pd.isna(ranks["run"].iloc[1])


def test_the_playground_always_carries_the_static_rankings_of_its_example(monkeypatch):
    bench = toy()
    playground = tour.Playground(bench, {"BM25": bm25()}, "wine cabinet", "an old armoire <b>", marks={"d3": "★"})
    monkeypatch.setattr(tour, "has_widgets", lambda: False)
    bundle = playground._repr_mimebundle_()
    assert set(bundle) == {"text/html", "text/plain"}
    assert "d3 ★" in bundle["text/html"] and "&lt;b&gt;" in bundle["text/html"] and "<b>" not in bundle["text/html"]


def test_the_playground_widget_reranks_on_a_new_instruction():
    pytest.importorskip("ipywidgets")
    playground = tour.Playground(toy(), {"BM25": bm25()}, "wine cabinet", "an old armoire")
    bundle = playground._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle and "text/html" in bundle
    box, out = playground.widget().children
    assert out.value.index("d3") < out.value.index("d2")
    box.value = "a small dining room"
    assert out.value.index("d2") < out.value.index("d3")


@pytest.mark.parametrize("placeholder", [None, "", "   ", float("nan"), True])
def test_every_check_says_not_yet_to_a_placeholder(placeholder):
    bench = toy()
    table = pd.DataFrame({"qid": ["a"], "group": ["A"], "nDCG@10": [1.0]})
    verdicts = [tour.check_ndcg_single_target(placeholder, rank=3), tour.check_robustness(placeholder, table),
                tour.check_template(placeholder), tour.check_instfol_zero(placeholder),
                tour.check_top_document(placeholder, bench, bm25(), bench.queries["g_1"])]
    for verdict in verdicts:
        assert verdict.ok is not True and str(verdict).startswith("not yet: ")


def test_ndcg_check_knows_the_answer_and_the_usual_mistakes():
    assert tour.check_ndcg_single_target(0.5, rank=3).ok
    assert tour.check_ndcg_single_target("50", rank=3).ok  # ×100, as the papers print
    assert "reciprocal rank" in tour.check_ndcg_single_target(1 / 3, rank=3).message
    assert "off by one" in tour.check_ndcg_single_target(0.631, rank=3).message
    assert tour.check_ndcg_single_target(0, rank=11).ok  # below the cut-off


def test_robustness_check_computes_the_mean_of_group_minima():
    table = pd.DataFrame({"qid": ["A_1", "A_2", "B_1", "B_2"], "group": ["A", "A", "B", "B"],
                          "nDCG@10": [1.0, 0.5, 0.2, 0.4]})
    assert tour.check_robustness(0.35, table).ok
    assert not tour.check_robustness(0.525, table).ok
    assert "mean over instances" in tour.check_robustness(0.525, table).message
    assert "best instance" in tour.check_robustness(0.7, table).message


def test_template_check_wants_the_e5_mistral_template():
    right = tour.check_template("instructir-e5-mistral")
    assert right.ok and repr("Instruct: {instruction}\nQuery: {query}") in right.message and "task" in right.message
    assert tour.check_template("Instruct: {instruction}\nQuery: {query}").ok
    assert tour.check_template("instructir").ok is False


def test_instfol_check_accepts_only_b():
    assert tour.check_instfol_zero(" B ").ok
    assert tour.check_instfol_zero("a").ok is False


def test_top_document_check_compares_with_the_bare_query():
    bench = toy()
    query = bench.queries["g_2"]
    bare_top = tour.rank_text(bench, bm25(), query.query, "", k=1)["docid"].iloc[0]
    changed = tour.check_top_document("convert an old armoire", bench, bm25(), query)
    assert changed.ok and "target of g_2" in changed.message and bare_top != "d3"
    assert tour.check_top_document("wine", replace(bench), bm25(), query).ok is False


def test_a_verdict_shows_escaped_html():
    html = tour.Verdict(False, "<script>x</script>")._repr_html_()
    assert "&lt;script&gt;" in html and "<script>" not in html and "not yet" in html


def test_the_answer_key_passes_every_check_with_the_hand_worked_answers():
    key = tour.answer_key().set_index("exercise")
    assert list(key.index) == ["1", "2", "3", "4", "5", "6"] and key["correct"].tolist() == [True] * 6
    assert key.loc["1", "answer"] == pytest.approx(0.5)  # 1/log2(3 + 1)
    assert key.loc["3", "answer"] == pytest.approx((0.5 + 1.0 + 0.0) / 3)  # minima of A, B, C
    assert key.loc["4", "answer"] == "instructir-e5-mistral" and key.loc["5", "answer"] == "b"
    assert "target of 1078446_2" in key.loc["2", "why"]  # the bonus too
    assert key.loc["6", "answer"] == pytest.approx(0.6)  # 1 - 2/5: moved down


def test_the_pmrr_check_says_correct_to_the_right_answer_hints_wrong_ones_and_never_raises():
    for right in (0.6, 1 - 2 / 5, 3 / 5, "0.6"):
        assert tour.check_pmrr_change(right).ok is True, right
    for wrong, hint in ((1.5, "moved-up formula"), (-0.6, "wrong sign"), (0.4, "R_og / R_new alone"), (0.5, "")):
        verdict = tour.check_pmrr_change(wrong)
        assert verdict.ok is False and hint in verdict.message and str(verdict).startswith("not yet"), wrong
    for placeholder in (None, "", "  "):
        verdict = tour.check_pmrr_change(placeholder)
        assert verdict.ok is None and "answer_6" in verdict.message
    for no_number in (True, float("nan"), [0.6]):  # an answer, but no number: said so, not taken for an empty cell
        verdict = tour.check_pmrr_change(no_number)
        assert verdict.ok is False and "is not a number" in verdict.message



def test_release_targets_and_provenance_count_only_relevant_judgments(tmp_path):
    (tmp_path / "qrels").mkdir()
    rows = [{"_id": f"{GROUP}_1", "text": "x", "metadata": {"origin_query": "wine cabinets definition"}}]
    (tmp_path / "only_instruction_queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "qrels" / "test.tsv").write_text(f"qid\tpid\tscore\n{GROUP}_1\t7865137_1\t1\n{GROUP}_1\tzz\t0\n")
    assert tour.release_group(tmp_path, GROUP)["target"].tolist() == ["7865137_1"]
    sample = load_benchmark("instructir-sample")
    judged = replace(sample, qrels={**sample.qrels, f"{GROUP}_1": {**sample.qrels[f"{GROUP}_1"], "zz": 0}})
    release = pd.DataFrame({"qid": [f"{GROUP}_1"], "query": ["q"], "instruction": ["i"], "target": ["7865137_1"]})
    assert tour.provenance(judged, release)["target (sample)"].tolist() == ["7865137_1"]


def test_marks_star_the_only_instance_and_skip_grade_0_and_keep_the_first_label():
    bench = replace(toy(), qrels={"g_1": {"d2": 1, "d4": 0}, "g_2": {"d3": 1, "d2": 1}})
    assert tour.marks_for(bench, ["g_1"]) == {"d2": tour.TARGET}
    assert tour.marks_for(bench, ["g_1", "g_2"], focus="g_2") == {"d2": "target of _1", "d3": tour.TARGET}


def test_side_by_side_shows_the_kth_document():
    lists = {"A": pd.DataFrame({"qid": "q", "rank": [1, 2, 3], "docid": ["d1", "d2", "d3"]})}
    assert tour.side_by_side(lists, "q", {}, k=2)["A"].tolist() == ["d1", "d2"]
    assert tour.side_by_side(lists, "q", {}, k=3)["A"].tolist() == ["d1", "d2", "d3"]


def test_target_ranks_give_the_best_placed_relevant_document_not_a_grade_0_one():
    qrels = {"q": {"d2": 1, "d3": 1, "d1": 0}}
    lists = {"run": pd.DataFrame({"qid": "q", "rank": [1, 2, 3], "docid": ["d1", "d2", "d3"]})}
    assert tour.target_ranks(lists, qrels, ["q"])["run"].tolist() == [2]


def test_a_top_document_judged_not_relevant_is_not_called_the_target():
    bench = replace(toy(), qrels={"g_1": {"d2": 1}, "g_2": {"d3": 0, "d1": 1}})
    verdict = tour.check_top_document("convert an old armoire", bench, bm25(), bench.queries["g_2"])
    assert "is the target" not in verdict.message and "it is not the target of g_2" in verdict.message


def test_the_pmrr_check_says_a_document_that_stayed_did_not_move_down():
    verdict = tour.check_pmrr_change(0, r_og=3, r_new=3)
    assert verdict.ok and "moved up or stayed" in verdict.message


def test_an_unanswered_verdict_is_shown_as_not_yet_in_amber():
    html = tour.Verdict(None, "put your answer in x")._repr_html_()
    assert "not yet" in html and "#fff3cd" in html and "#d4edda" not in html


def test_the_tours_judgments_live_in_the_tour_folder_of_the_report(tmp_path):
    path = tour.judgments_file(tmp_path)
    assert (path.parent.name, path.name) == ("tour", "judgments.sqlite") and tmp_path in path.parents


def test_a_release_folder_without_the_queries_file_is_no_release(tmp_path, monkeypatch):
    monkeypatch.setattr(tour, "RELEASE_DIR", tmp_path)
    assert tour.release_folder() is None
    (tmp_path / "only_instruction_queries.jsonl").write_text("")
    assert tour.release_folder() == tmp_path


def test_provenance_notices_an_edited_query_and_targets_in_another_order(tmp_path):
    (tmp_path / "qrels").mkdir()
    rows = [{"_id": f"{GROUP}_1", "text": "x", "metadata": {"origin_query": "edited"}}]
    (tmp_path / "only_instruction_queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "qrels" / "test.tsv").write_text(f"qid\tpid\tscore\n{GROUP}_1\tb_1\t1\n{GROUP}_1\ta_1\t1\n")
    release = tour.release_group(tmp_path, GROUP)
    assert release["target"].tolist() == ["a_1,b_1"]
    sample = load_benchmark("instructir-sample")
    check = tour.provenance(replace(sample, qrels={**sample.qrels, f"{GROUP}_1": {"a_1": 1, "b_1": 1}}), release)
    assert check["same target"].tolist() == [True] and check["same query"].tolist() == [False]
    assert tour.provenance(sample, release)["same target"].tolist() == [False]


def test_shorten_cuts_a_title_at_100_characters():
    cut = tour.shorten("x" * 150)
    assert tour.shorten("x" * 100) == "x" * 100 and cut.startswith("x" * 100) and len(cut) == 101  # and the "…"


def test_robustness_check_names_the_mean_of_group_means():
    table = tour.robustness_exercise()
    means = table.groupby("group")["nDCG@10"].mean().mean()
    assert "each group's mean" in tour.check_robustness(round(means, 4), table).message


def test_the_playground_shows_its_note_under_the_title():
    playground = tour.Playground(toy(), {"BM25": bm25()}, "wine cabinet", "an old armoire", note="Scores are BM25's")
    assert "Scores are BM25" in str(playground.html("an old armoire"))
