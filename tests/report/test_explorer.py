"""The instance explorer on an out_dir laid out as notebooks 02-04 leave it: the group view's
data, the static rendering (escaped, relevant documents marked), the widget's callbacks driven
without a browser, and the static page in headless Chromium."""

import re
import shutil
import subprocess
from dataclasses import replace

import pandas as pd
import pytest

from instir.benchmarks import load_benchmark
from instir.benchmarks.types import Doc
from instir.judge import BaselineJudge, CachedJudge
from instir.judge.following import instfol
from instir.metrics import evaluate_runs
from instir.report.explorer import Explorer, ExplorerData, explore, pick_groups, render_group, render_static
from instir.retrieval import retrieve
from instir.retrieval.lexical import BM25Retriever

BENCHMARKS = ("instructir-sample", "ifir-sample/fiqa")


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory):
    """runs/runs.csv + runs, metrics/per_query.parquet, judge/instfol_instances.csv and
    judge/judgments.sqlite, written as notebooks 02, 03 and 04 write them (BM25, baseline judge)."""
    out = tmp_path_factory.mktemp("lab")
    retriever = BM25Retriever(show_progress=False)
    rows, per_query, judged = [], [], []
    judge = CachedJudge(BaselineJudge("lexical"), out / "judge" / "judgments.sqlite")
    for name in BENCHMARKS:
        bench = load_benchmark(name)
        runs = {}
        for variant, template, system in (("instructed", None, "bm25"),
                                          ("query-only", "query-only", "bm25 (query-only)")):
            run = retrieve(bench, retriever, template, k=20, out_dir=out / "runs")
            runs[system] = run
            rows.append({"benchmark": name, "retriever": "bm25", "system": system, "variant": variant,
                         "run_file": f"runs/{run.meta['path'].split('/')[-1]}"})
        per_query.append(evaluate_runs(runs, bench).per_query.assign(benchmark=name))
        if name.startswith("ifir"):
            result = instfol(runs["bm25"], runs["bm25 (query-only)"], bench, judge, max_instances=2)
            judged.append(result.instances.assign(benchmark=name, family="ifir", system="bm25"))
    pd.DataFrame(rows).to_csv(out / "runs" / "runs.csv", index=False)
    (out / "metrics").mkdir()
    pd.concat(per_query, ignore_index=True).to_parquet(out / "metrics" / "per_query.parquet", index=False)
    pd.concat(judged, ignore_index=True).to_csv(out / "judge" / "instfol_instances.csv", index=False)
    judge.cache.close()
    return out


@pytest.fixture(scope="module")
def data(out_dir):
    return ExplorerData(out_dir)


def test_the_group_view_marks_exactly_the_qrels_relevant_documents(data):
    bench = data.benchmark("instructir-sample")
    group = data.groups("instructir-sample")[0]
    view = data.group("instructir-sample", group)
    assert set(view.instances["qid"]) == set(bench.groups()[group])
    assert view.systems == ["bm25", "bm25 (query-only)"]
    for r in view.lists.itertuples():
        assert r.grade == max(bench.qrels.get(r.qid, {}).get(r.docid, 0), 0)
        assert r.rank <= 10
    assert (view.lists["grade"] > 0).any()
    assert view.query == bench.queries[view.instances["qid"].iloc[0]].query


def test_the_robustness_minimum_is_the_lowest_ndcg_of_the_group(data):
    group = data.groups("instructir-sample")[0]
    view = data.group("instructir-sample", group)
    assert view.measure == "nDCG@10" and view.marks_minimum
    mine = view.scores[view.scores["system"] == "bm25"]
    assert set(mine.loc[mine["group_min"], "qid"]) == set(mine.loc[mine["value"] == mine["value"].min(), "qid"])
    html = str(render_group(view))
    assert html.count("class='ix-min'>min</span>") == 1 + int(view.scores["group_min"].sum())  # + the legend


def test_ndcg_under_each_list_is_on_the_tables_scale(data):
    """×100 with one decimal, as every table of the reports prints it, and the page says so."""
    view = data.group("instructir-sample", data.groups("instructir-sample")[0])
    html = str(render_group(view))
    value = view.scores.loc[view.scores["system"] == "bm25", "value"].iloc[0]
    assert f"nDCG@10 ×100 {value * 100:.1f}" in html and f"nDCG@10 {value:.3f}" not in html
    assert "under each list its nDCG@10 ×100, as in the tables" in html


def test_ifir_lists_carry_the_judges_scores_where_judged(data, out_dir):
    judged = pd.read_csv(out_dir / "judge" / "instfol_instances.csv")
    qid = judged["qid"].iloc[0]
    group = data.benchmark("ifir-sample/fiqa").queries[qid].group
    view = data.group("ifir-sample/fiqa", group)
    assert view.judge.startswith("baseline-lexical")
    both = view.lists[view.lists["qid"] == qid]
    assert both["judged"].notna().all()  # instructed and query-only top 10 both judged against this instance
    assert set(both["system"]) == {"bm25", "bm25 (query-only)"}
    assert not view.marks_minimum and view.measure == "nDCG@20"
    assert "InstFol ×100" in str(render_group(view))


def test_passage_text_and_instructions_are_escaped(data):
    view = data.group("instructir-sample", data.groups("instructir-sample")[0])
    docid = view.lists["docid"].iloc[0]
    view.docs[docid] = Doc(docid, "<script>alert('x')</script> & more", title="<b>t</b>")
    html = str(render_group(view))
    assert "<script>alert" not in html and "&lt;script&gt;alert" in html and "&lt;b&gt;t&lt;/b&gt;" in html


def test_static_rendering_picks_one_group_per_benchmark(data):
    picks = pick_groups(data, n=3)
    assert [b for b, _ in picks] == list(BENCHMARKS)
    html = str(render_static(data, picks))
    for bench, group in picks:
        assert f"group {group}" in html


def test_widget_callbacks_rerender_without_a_browser(data):
    pytest.importorskip("ipywidgets")
    ex = Explorer(data)
    assert ex.view.benchmark == "instructir-sample" and "class='ix-rel'" in ex.output.value
    second = data.groups("instructir-sample")[1]
    ex.group.value = second
    assert ex.view.group == second and f"group {second}" in ex.output.value

    ex.systems.value = ("bm25 (query-only)",)
    assert ex.view.systems == ["bm25 (query-only)"] and "<th>bm25</th>" not in ex.output.value

    ex.benchmark.value = "ifir-sample/fiqa"
    assert ex.view.benchmark == "ifir-sample/fiqa"
    assert ex.group.value in data.groups("ifir-sample/fiqa")
    assert ex.view.systems == ["bm25", "bm25 (query-only)"]  # the new benchmark's systems, all chosen

    docid = ex.passage.options[0]
    ex.passage.value = docid
    assert ex.view.docs[docid].text[:40].replace("&", "&amp;").replace("<", "&lt;")[:20] in ex.text.value


def test_the_systems_selector_is_as_wide_as_its_longest_name_with_a_row_per_system(data):
    """The default 300 px cut both dense runs to ``dense:sentence-transformers/all-Mi…``: the
    instructed run and its query-only twin looked the same."""
    pytest.importorskip("ipywidgets")
    ex = Explorer(data)
    assert ex.systems.layout.width == "max-content" and ex.systems.rows == len(data.systems("instructir-sample"))


def test_explore_display_carries_the_widget_and_the_static_fallback(out_dir):
    pytest.importorskip("ipywidgets")
    bundle = explore(out_dir)._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert "class='ix-rel'" in bundle["text/html"] and "static view of 2 group(s)" in bundle["text/html"]


CHROMIUM = shutil.which("chromium")


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="Debian chromium not installed (apt-get install chromium)")
def test_static_rendering_shows_marked_relevant_documents_in_chromium(data, tmp_path):
    view = data.group("instructir-sample", data.groups("instructir-sample")[0])
    page = tmp_path / "explorer.html"
    page.write_text(f"<html><head><meta charset='utf-8'><title>explorer</title></head><body>"
                    f"{render_group(view)}</body></html>", encoding="utf-8")
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                          "--disable-background-networking", f"--user-data-dir={tmp_path / 'profile'}",
                          "--dump-dom", page.as_uri()], check=True, capture_output=True, text=True, timeout=120,
                         env={"HOME": str(tmp_path)}).stdout
    relevant = view.lists[view.lists["grade"] > 0]
    assert dom.count('class="ix-rel"') == len(relevant)
    first = relevant.iloc[0]
    assert f"{first['docid']} ({first['grade']})" in dom


def test_offline_report_shows_a_widgets_static_fallback(tmp_path):
    """A notebook executed by papermill keeps the widget state, but the offline report has no
    widget manager: the output must render from the static HTML its display carries."""
    import nbformat

    from instir.pipeline import render_html

    view = {"model_id": "abc123", "version_major": 2, "version_minor": 0}
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("explore(out)")
    cell.outputs = [nbformat.v4.new_output("display_data", data={
        "application/vnd.jupyter.widget-view+json": view, "text/plain": "VBox(...)",
        "text/html": "<div class='instir-explorer'>STATIC GROUP VIEW</div>"})]
    nb.cells.append(cell)
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": {"abc123": {"model_name": "VBoxModel", "model_module": "@jupyter-widgets/controls",
                             "model_module_version": "2.0.0", "state": {}}}, "version_major": 2, "version_minor": 0}}
    executed = tmp_path / "nb.ipynb"
    nbformat.write(nb, executed)
    html = render_html(executed, tmp_path / "nb.html").read_text(encoding="utf-8")
    assert '<div class="instir-explorer">STATIC GROUP VIEW</div>' in html  # re-serialised by nbconvert
    assert 'type="application/vnd.jupyter.widget-view+json"' not in html


def test_the_cache_lists_the_judges_it_holds(out_dir):
    from instir.judge.cache import JudgmentCache

    with JudgmentCache(out_dir / "judge" / "judgments.sqlite") as cache:
        assert cache.judges() == [("baseline-lexical", "stemmed-term-overlap")]


def test_the_passages_scores_are_those_of_the_judge_whose_instfol_is_shown(tmp_path):
    # before, the passages carried the scores of the cache's first judge by name (an earlier baseline, here the
    # lexical one: its name sorts first, and it loads no model) beside the InstFol of the judge notebook 04 ran last
    from instir.stages import judge_runs, retrieve_runs

    retrieve_runs(tmp_path, ["ifir-sample/fiqa"], ["bm25"])
    judge_runs(tmp_path, ["ifir-sample/fiqa"], backend="baseline", model="lexical", max_instances=3, repeats=1)
    lexical = BaselineJudge("lexical")
    lexical.name, lexical.model = "openai-compatible", "gpt-4o-mini [ifir]"  # named as the papers' judge names itself
    judge = CachedJudge(lexical, tmp_path / "judge" / "judgments.sqlite")
    judge_runs(tmp_path, ["ifir-sample/fiqa"], judge=judge, max_instances=3, repeats=1, validate=False)
    judge.close()
    data = ExplorerData(tmp_path)
    qid = data.instfol["qid"].iloc[0]
    view = data.group("ifir-sample/fiqa", data.benchmark("ifir-sample/fiqa").queries[qid].group)
    # a review: the rubric label in the model's name ("[ifir]") was cut before matching, and no judge was kept
    assert view.judge == "openai-compatible / gpt-4o-mini [ifir]"


def test_a_runs_list_of_the_required_columns_shows_its_runs_in_its_order(out_dir, tmp_path):
    # a review: instir.explore(out_dir) was a KeyError ('retriever') on one's own list of the required columns;
    # without variant and retriever its runs are instructed ones, as far as the kit can tell
    own = shutil.copytree(out_dir, tmp_path / "own")
    listed = pd.read_csv(own / "runs" / "runs.csv")
    listed[["benchmark", "system", "run_file"]].iloc[::-1].to_csv(own / "runs" / "runs.csv", index=False)
    data = ExplorerData(own)
    assert data.systems("instructir-sample") == ["bm25 (query-only)", "bm25"]
    assert data.group("instructir-sample", data.groups("instructir-sample")[0]).systems == ["bm25 (query-only)", "bm25"]


def test_a_stored_score_outside_its_rubrics_range_is_not_shown(out_dir, tmp_path):
    """An edited cache (weighted 1e300, its checksum made to match) is judged again by the judge; the explorer
    showed the number as the passage's score."""
    import sqlite3
    from contextlib import closing

    from instir.judge.cache import row_checksum

    shutil.copytree(out_dir, tmp_path / "out")
    columns = ("backend, model, rubric_version, text_sha256, rubric, score, weighted, probs, weighting, raw, error, "
               "latency_s, prompt_tokens, completion_tokens, cost, served_model, warning")
    with closing(sqlite3.connect(tmp_path / "out" / "judge" / "judgments.sqlite")) as db, db:
        db.create_function("instir_row_checksum", 17, row_checksum, deterministic=True)
        db.execute("UPDATE judgments SET weighted = 1e300")
        db.execute(f"UPDATE judgments SET checksum = instir_row_checksum({columns})")
    qid = pd.read_csv(out_dir / "judge" / "instfol_instances.csv")["qid"].iloc[0]
    data = ExplorerData(tmp_path / "out")
    view = data.group("ifir-sample/fiqa", data.benchmark("ifir-sample/fiqa").queries[qid].group)
    judged = view.lists.loc[view.lists["qid"] == qid, "judged"]
    assert len(judged) and judged.isna().all() and "1e+300" not in str(render_group(view))


def test_each_list_shows_exactly_the_top_k_ranks(data):
    group = data.groups("instructir-sample")[0]
    for k in (3, 10):
        view = data.group("instructir-sample", group, k=k)
        depth = view.lists.groupby(["system", "qid"])["rank"].agg(["min", "max", "size"])
        assert (depth["min"] == 1).all() and (depth["max"] == k).all() and (depth["size"] == k).all()
        rows = str(render_group(view)).count("<tr><th>")
        assert rows == len(view.instances) * (k + 2)  # the head, k ranks, the scores


def test_only_relevant_documents_are_green_and_carry_a_grade(data):
    view = data.group("instructir-sample", data.groups("instructir-sample")[0])
    html = str(render_group(view))
    relevant = view.lists[view.lists["grade"] > 0]
    assert 0 < len(relevant) < len(view.lists)
    assert html.count("<td class='ix-rel'>") == len(relevant) and " (0)" not in html


def test_documents_judged_not_relevant_are_neither_relevant_nor_graded_below_zero(out_dir):
    fresh = ExplorerData(out_dir)
    bench = fresh.benchmark("instructir-sample")
    group = fresh.groups("instructir-sample")[0]
    unjudged = fresh.group("instructir-sample", group).lists.query("grade == 0")
    (q0, d0), (q1, d1) = zip(unjudged["qid"].iloc[:2], unjudged["docid"].iloc[:2])
    bench.qrels[q0][d0], bench.qrels[q1][d1] = 0, -1  # judged: not relevant, and harmful
    view = fresh.group("instructir-sample", group)
    assert not {(q0, d0), (q1, d1)} & set(zip(view.relevant["qid"], view.relevant["docid"]))
    listed = view.lists.set_index(["qid", "docid"])["grade"]
    assert (listed.loc[[(q0, d0), (q1, d1)]] == 0).all()


def test_an_instruction_a_query_and_an_id_holding_markup_show_as_text(data):
    view = data.group("instructir-sample", data.groups("instructir-sample")[0])
    instances = view.instances.copy()
    instances.loc[0, "instruction"], instances.loc[0, "qid"] = "<i>only</i> reviews", "<b>q</b>"
    html = str(render_group(replace(view, instances=instances, query="<u>q</u>", judge="<s>judge</s>")))
    assert not re.search(r"<(i|b|u|s)>", html)
    assert "&lt;i&gt;only&lt;/i&gt; reviews" in html and "&lt;b&gt;q&lt;/b&gt;" in html
    assert "&lt;u&gt;q&lt;/u&gt;" in html and "judge &lt;s&gt;judge&lt;/s&gt;" in html


def test_a_long_passage_is_cut_with_an_ellipsis_on_the_page(data):
    view = data.group("instructir-sample", data.groups("instructir-sample")[0])
    docid = view.lists["docid"].iloc[0]
    docs = {**view.docs, docid: Doc(docid, "word " * 400 + "THE END")}
    html = str(render_group(replace(view, docs=docs), max_chars=100))
    assert "THE END" not in html and "word word…" in html


def test_no_instance_is_marked_as_the_minimum_where_the_benchmark_has_no_robustness(data):
    group = data.groups("ifir-sample/fiqa")[0]
    view = data.group("ifir-sample/fiqa", group)
    assert not view.marks_minimum and view.scores["group_min"].any()
    assert "class='ix-min'" not in str(render_group(view))


def test_the_static_rendering_picks_the_group_whose_instances_differ_most_and_at_most_n(data):
    assert len(pick_groups(data, n=1)) == 1
    pq = data.per_query
    part = pq[(pq["benchmark"] == "instructir-sample") & (pq["system"] == "bm25") & (pq["measure"] == "nDCG@10")]
    groups = {qid: q.group for qid, q in data.benchmark("instructir-sample").queries.items()}
    spread = part.assign(group=part["qid"].map(groups)).groupby("group")["value"].agg(lambda v: v.max() - v.min())
    [(benchmark, picked)] = pick_groups(data, n=1)
    assert benchmark == "instructir-sample" and spread[picked] == spread.max() > spread.min()


def test_instfol_under_a_list_is_on_the_tables_scale(data, out_dir):
    judged = pd.read_csv(out_dir / "judge" / "instfol_instances.csv", dtype={"qid": str})
    row = judged.loc[judged["instfol"].abs().idxmax()]
    assert row.instfol != 0
    view = data.group("ifir-sample/fiqa", data.benchmark("ifir-sample/fiqa").queries[row.qid].group)
    assert f"InstFol ×100 {row.instfol * 100:.1f}" in str(render_group(view))


def test_the_widgets_passage_shows_an_id_and_text_holding_markup_as_text(data):
    pytest.importorskip("ipywidgets")
    ex = Explorer(data)
    docid = "<b>d1</b>"
    ex.view.docs[docid] = Doc(docid, "<i>text</i>", title="<u>title</u>")
    ex.passage.options = [*ex.passage.options, docid]
    ex.passage.value = docid
    assert not re.search(r"<(b|i|u)>", ex.text.value)
    assert "&lt;b&gt;d1&lt;/b&gt;" in ex.text.value and "&lt;i&gt;text&lt;/i&gt;" in ex.text.value


def test_another_accounts_report_is_explored_without_its_judgments_and_one_warning(out_dir, tmp_path, monkeypatch):
    # a report folder read-only to this account: ExplorerData stopped at "cannot open the judgment cache …"
    import os

    shutil.copytree(out_dir, tmp_path / "out")
    db = tmp_path / "out" / "judge" / "judgments.sqlite"
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode, **kw: str(path) != str(db) and real_access(path, mode, **kw))
    with pytest.warns(UserWarning, match=rf"{re.escape(str(db))}.*cannot be written.*without their judgments"):
        data = ExplorerData(tmp_path / "out")
    qid = pd.read_csv(out_dir / "judge" / "instfol_instances.csv")["qid"].iloc[0]
    view = data.group("ifir-sample/fiqa", data.benchmark("ifir-sample/fiqa").queries[qid].group)
    assert view.lists["judged"].isna().all() and len(view.lists)


@pytest.mark.parametrize("table", ["metrics/per_query.parquet", "judge/instfol_instances.csv"])
def test_a_truncated_or_emptied_table_the_explorer_reads_is_one_line_naming_it(out_dir, tmp_path, table):
    # was ArrowInvalid / EmptyDataError out of the notebooks' explorer
    from instir.benchmarks.types import FormatError

    copy = shutil.copytree(out_dir, tmp_path / "lab")
    (copy / table).write_bytes(b"")
    with pytest.raises(FormatError, match=rf"^{copy / table}: not a table the kit can read .*run notebook 0"):
        ExplorerData(copy)


def test_the_judged_instances_qids_are_read_as_written_so_a_qid_of_leading_zeros_meets_its_query(tmp_path):
    # a qid '007' read as the number 7 would match no query of the benchmark: its InstFol shown under no list
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "runs.csv").write_text("benchmark,system,run_file\nifir-sample/fiqa,bm25,runs/a.trec\n")
    (tmp_path / "judge").mkdir()
    (tmp_path / "judge" / "instfol_instances.csv").write_text(
        "benchmark,system,qid,instfol\nifir-sample/fiqa,bm25,007,0.5\nifir-sample/fiqa,bm25,10,0.25\n")
    assert ExplorerData(tmp_path).instfol["qid"].tolist() == ["007", "10"]
