"""One folder, one truth: every stage records what it was made from (the record's ``stages``), every page
which stage run it shows (``pages``), and the index marks a page or table that disagrees
with the folder's files as stale (never "ok"), naming what differs; a stage run from the lab's
folder takes the same folder's lock as the batch."""

import shutil
from pathlib import Path

import pytest

from instir.errors import UsageError, UserError
from instir.report.index import write_index
from instir.report.provenance import record_page, stale_pages
from instir.report.record import update_record
from instir.stages import paper_tables, retrieve_runs, score_runs
from tests.test_one_writer import Holder

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A reports folder holding ``r`` as :func:`_finished_report` leaves it, made once for the module: each test
    changes a copy of it (:func:`copy_finished`)."""
    reports = tmp_path_factory.mktemp("finished") / "reports"
    _finished_report(reports / "r")
    return reports


def copy_finished(finished: Path, out: Path) -> None:
    """``out`` (``<reports>/r``) and its index as :func:`_finished_report` leaves them: a copy of ``finished``
    that keeps the files' times, as a report folder copied stays as it was (tested below)."""
    shutil.copytree(finished, out.parent, copy_function=shutil.copy2)


def _finished_report(out: Path) -> None:
    """``out`` as a finished ``instir run`` of 02 and 03 leaves it (pages rendered, report.json ok)."""
    retrieve_runs(out, ["instructir-sample"], ["bm25"], k=100)
    score_runs(out, ["instructir-sample"])
    notebooks = []
    for name in ("02_retrieval", "03_metrics"):
        (out / f"{name}.html").write_text("<html>page</html>")
        record_page(out, name, f"{name}.html")
        notebooks.append({"name": name, "html": f"{name}.html", "status": "ok"})
    update_record(out, status="ok", notebooks=notebooks, parameters={"k": 100}, started="2026-01-01T00:00:00+00:00")
    write_index(out.parent)


def test_a_folder_whose_pages_agree_is_ok_and_a_later_stage_run_makes_the_pages_after_it_stale(tmp_path, finished):
    out = tmp_path / "reports" / "r"
    copy_finished(finished, out)
    assert stale_pages(out) == []
    assert '<span class="ok">ok</span>' in (tmp_path / "reports" / "index.html").read_text()

    retrieve_runs(out, ["instructir-sample"], ["bm25"], k=20)  # the homework: 02 again with k 20, alone

    stale = {found.notebook: " ".join(found.reasons) for found in stale_pages(out)}
    assert set(stale) == {"02_retrieval", "03_metrics"}
    assert "02_retrieval.html shows an earlier run" in stale["02_retrieval"] and "k 100 → 20" in stale["02_retrieval"]
    assert "it read runs/, which 02_retrieval wrote again" in stale["03_metrics"]
    assert "k 100 → 20" in stale["03_metrics"]
    index = (tmp_path / "reports" / "index.html").read_text()  # rewritten by the stage itself
    assert '<span class="ok">' not in index and '<span class="stale">stale</span>' in index
    assert "k 100 → 20" in index

    score_runs(out, ["instructir-sample"])  # 03 again: its files agree with runs/, its page still not
    stale = {found.notebook: " ".join(found.reasons) for found in stale_pages(out)}
    assert "it read runs/" not in stale["03_metrics"] and "03_metrics.html shows an earlier run" in stale["03_metrics"]


def test_files_changed_by_a_writer_that_records_nothing_make_the_stage_stale(tmp_path, finished):
    out = tmp_path / "reports" / "r"
    copy_finished(finished, out)
    (out / "metrics" / "metrics.csv").write_text("benchmark,system\nx,y\n")
    (reason,) = [found for found in stale_pages(out) if found.notebook == "03_metrics"]
    assert "metrics/ was changed after its last run" in reason.reasons[0]


@pytest.mark.parametrize("change", ["edited", "deleted"])
def test_a_run_file_edited_in_place_or_deleted_makes_the_pages_made_from_it_stale(tmp_path, change, finished):
    # the digest hashed the folder's tables only: runs.csv stayed as it was, and the index said ok
    out = tmp_path / "reports" / "r"
    copy_finished(finished, out)
    run = sorted((out / "runs").glob("*.trec"))[0]
    if change == "edited":  # the same documents, the ranking turned over: another run under the same name
        lines = run.read_text().splitlines()
        run.write_text("\n".join(lines[::-1]) + "\n")
    else:
        run.unlink()
    stale = {found.notebook: " ".join(found.reasons) for found in stale_pages(out)}
    assert "runs/ was changed after its last run" in stale["02_retrieval"]
    assert "it read runs/" in stale["03_metrics"]
    if change == "deleted":  # a listed run that is gone: the notebook that writes it is named (a bare OSError before)
        with pytest.raises(UserError, match=f"{run.name} is missing: run notebook 02_retrieval into"):
            score_runs(out, ["instructir-sample"])


def test_a_page_edited_or_deleted_after_the_kit_rendered_it_is_named_on_the_index(tmp_path, finished):
    # the record held each page's digest, but only the next instir run looked: the index said ok and linked a
    # deleted page, and a page reading "nDCG@10 99.9" passed for the kit's
    out = tmp_path / "reports" / "r"
    copy_finished(finished, out)
    (out / "03_metrics.html").write_text("<html>nDCG@10 (EDITED: 99.9)</html>")
    (out / "02_retrieval.html").unlink()
    stale = {found.notebook: " ".join(found.reasons) for found in stale_pages(out)}
    assert stale == {"02_retrieval": "its page 02_retrieval.html is gone",
                     "03_metrics": "its page 03_metrics.html was changed after the kit rendered it"}
    write_index(out.parent)
    index = (tmp_path / "reports" / "index.html").read_text()
    assert '<span class="ok">' not in index and "03_metrics.html was changed after the kit rendered it" in index


def test_a_folder_whose_runs_are_as_written_keeps_the_digest_an_earlier_version_recorded(tmp_path, finished):
    # the digest of the runs folder took in every run's state: every report made before read as stale
    import hashlib

    from instir import atomic
    from instir.report.provenance import folder_digest

    out = tmp_path / "reports" / "r"
    copy_finished(finished, out)
    tables_only = hashlib.sha256()
    for path in sorted((out / "runs").glob("*.csv")):
        tables_only.update(path.name.encode() + b"\0" + atomic.file_sha256(path).encode() + b"\0")
    assert folder_digest(out / "runs") == tables_only.hexdigest()


def test_a_report_folder_copied_with_its_times_or_without_stays_as_it_was(tmp_path, finished):
    out = finished / "r"  # the folder the stages wrote, only read here
    for copy, copier in ((tmp_path / "a" / "r", shutil.copy2), (tmp_path / "b" / "r", shutil.copy)):
        shutil.copytree(out, copy, copy_function=copier)
        assert stale_pages(copy) == []


def test_a_stage_called_from_the_labs_folder_takes_the_lock_the_batch_holds(tmp_path, monkeypatch, notebook_kernel):
    """JupyterLab runs a notebook in its own folder (lab/), where ``reports/sample`` means the
    repository's folder: the stage must lock that folder, not lab/reports/sample."""
    checkout = tmp_path / "checkout"
    (checkout / "lab").mkdir(parents=True)
    shutil.copy(REPO / "notebooks" / "02_retrieval.ipynb", checkout / "lab")
    folder = checkout / "reports" / "sample"
    monkeypatch.chdir(checkout / "lab")
    with Holder(folder, "instir run"), pytest.raises(UsageError, match=r"another writer \(instir run, pid"):
        retrieve_runs("reports/sample", ["instructir-sample"], ["bm25"])
    assert not (checkout / "lab" / "reports").exists()


@pytest.mark.parametrize(("call", "message"), [
    (lambda out: retrieve_runs(out, ["instructir-sample"], ["bm25"], k="10"),
     "parameter 'k' takes a whole number of at least 1 (at most 2,147,483,647), got '10'"),
    (lambda out: retrieve_runs(out, [], ["bm25"]), "parameter 'benchmarks' is empty"),
    (lambda out: retrieve_runs(out, ["instructir-sample"], []), "no system to run"),
    (lambda out: score_runs(out, ["instructir-sample", "ifir-sampel"]),
     "parameter 'benchmarks': unknown benchmark 'ifir-sampel'; did you mean 'ifir-sample'?"),
    (lambda out: score_runs(out, ["ifir-sample/fiqa"]), "runs.csv holds no run of 'ifir-sample/fiqa'"),
    # on 60bbc2d, scored every run before the comparison failed; paper_tables compared with no paper ('nope'), or
    # failed on 'ifir' read letter by letter
    (lambda out: score_runs(out, compare="bogus"), "parameter 'compare': unknown comparison 'bogus'"),
    (lambda out: paper_tables(out, papers=["nope"]), "parameter 'papers': unknown paper 'nope'"),
])
def test_a_students_mistake_in_a_stage_is_one_line_before_any_work(tmp_path, call, message):
    out = tmp_path / "r"
    retrieve_runs(out, ["instructir-sample"], ["bm25"], k=10)
    listed = (out / "runs" / "runs.csv").read_bytes()
    with pytest.raises(UserError) as caught:
        call(out)
    assert message in str(caught.value) and "\n" not in str(caught.value)
    assert caught.value._render_traceback_()[0].count("\n") == 0  # what the lab shows: one line
    assert (out / "runs" / "runs.csv").read_bytes() == listed


@pytest.mark.parametrize(("retrievers", "systems", "where"), [
    (["bm25", "dense"], ["bm25"], "'retrievers' or 'systems'"), (["bm25", "bm25"], [], "'retrievers'")])
def test_a_system_given_twice_to_notebook_02_is_refused_as_instir_run_refuses_it(tmp_path, retrievers, systems, where):
    """Notebook 02 wrote bm25 twice into runs.csv and notebook 03 died in pandas ("Index contains duplicate
    entries"); ``instir run --retrievers bm25 --systems bm25`` refused it in one line."""
    from instir.pipeline import notebook_parameters, validate_parameters
    from instir.stages import notebook_systems

    known = notebook_parameters(sorted((REPO / "notebooks").glob("0[1-5]_*.ipynb")))
    with pytest.raises(UsageError) as cli:
        validate_parameters({"retrievers": retrievers, "systems": systems}, known)
    with pytest.raises(UsageError) as notebook:
        retrieve_runs(tmp_path, ["instructir-sample"], notebook_systems(retrievers, "", systems), k=10)
    assert str(notebook.value) == str(cli.value) == f"parameter {where}: 'bm25' is given twice"
    assert not (tmp_path / "runs").exists()


def test_one_name_where_a_list_is_asked_is_a_list_of_one(tmp_path):
    # on 60bbc2d, paper_tables(out, papers="ifir") failed ("No objects to concatenate"), paper_tables(out, "/m")
    # read "/", "m" as MTEB result files, run_reports("nb.ipynb", …) looked for the notebooks "n", "b", …
    from instir.pipeline import run_reports

    out = tmp_path / "r"
    retrieve_runs(out, ["ifir-sample/fiqa"], ["bm25"], k=20)
    score_runs(out)
    assert set(paper_tables(out, papers="ifir").compared["paper"]) <= {"ifir"}
    with pytest.raises(UserError, match=f"{tmp_path / 'none'}"):
        paper_tables(out, str(tmp_path / "none"))
    with pytest.raises(FileNotFoundError, match=r"notebook\(s\) not found: \S*nb.ipynb$"):
        run_reports(str(tmp_path / "nb.ipynb"), {}, out)
    with pytest.raises(UserError, match="parameters are a mapping {name: value}, got a list"):
        run_reports(REPO / "notebooks" / "00_tour.ipynb", ["k"], tmp_path / "other")


def test_a_hidden_table_beside_a_stages_files_leaves_its_pages_as_they_were(tmp_path, finished):
    out = tmp_path / "reports" / "r"
    copy_finished(finished, out)
    (out / "metrics" / ".scratch.csv").write_text("a\n1\n")  # an editor's or one's own hidden file: not the stage's
    assert stale_pages(out) == []


def test_a_stale_page_names_only_the_parameters_that_differ(tmp_path, finished):
    out = tmp_path / "reports" / "r"
    copy_finished(finished, out)
    retrieve_runs(out, ["instructir-sample"], ["bm25"], k=20)
    stale = {found.notebook: " ".join(found.reasons) for found in stale_pages(out)}
    assert "(k 100 → 20)" in stale["02_retrieval"]  # the benchmarks and systems, the same, are not named


def test_a_page_that_is_gone_is_said_gone_not_said_to_show_an_earlier_run(tmp_path, finished):
    out = tmp_path / "reports" / "r"
    copy_finished(finished, out)
    retrieve_runs(out, ["instructir-sample"], ["bm25"], k=20)
    (out / "02_retrieval.html").unlink()
    stale = {found.notebook: " ".join(found.reasons) for found in stale_pages(out)}
    assert "its page 02_retrieval.html is gone" in stale["02_retrieval"]
    assert "shows an earlier run" not in stale["02_retrieval"]


def test_judging_again_after_the_paper_tables_makes_the_paper_tables_stale_naming_what_changed(tmp_path, finished):
    # notebook 05 compares judge/instfol.csv with the papers: InstFol judged again (another number of instances)
    # after it ran leaves its tables showing the earlier InstFol, and the index must not say ok
    from instir.stages import judge_runs

    out = tmp_path / "reports" / "r"
    copy_finished(finished, out)
    judge_runs(out, backend="baseline", max_instances=2, repeats=1, validate=False)
    paper_tables(out)
    assert "05_paper_tables" not in {found.notebook for found in stale_pages(out)}

    judge_runs(out, backend="baseline", max_instances=3, repeats=1, validate=False)

    stale = {found.notebook: " ".join(found.reasons) for found in stale_pages(out)}
    assert "it read judge/, which 04_judge_validation wrote again" in stale["05_paper_tables"]
    assert "max_instances 2 → 3" in stale["05_paper_tables"]
    assert "it read runs/" not in stale["05_paper_tables"] and "it read metrics/" not in stale["05_paper_tables"]
