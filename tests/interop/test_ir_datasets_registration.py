"""The benchmarks as ir_datasets datasets, read through ir_datasets 0.6 and PyTerrier 1.x themselves:
every benchmark, subset and setting has an id; docs, queries (the kit's text and the raw parts) and
qrels are what load_benchmark loads, from the bundled samples and from upstream-layout fixtures."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tomllib
from pathlib import Path

import ir_measures
import pytest

from instir.benchmarks.registry import load_benchmark
from instir.formatting import default_template
from instir.metrics import qrels_of
from instir.metrics.scoring import evaluate_runs

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "benchmarks" / "fixtures"

IDS = ["instir/instructir-sample", "instir/instructir-sample/query-only", "instir/instructir-sample/order-sensitivity",
       "instir/instructir-sample/prompt-sensitivity", "instir/instructir-sample/prompt-paraphrases",
       "instir/ifir-sample/fiqa", "instir/ifir-sample/nfcorpus", "instir/followir-sample/news21",
       "instir/followir-sample/core17",
       "instir/instructir", "instir/instructir/query-only", "instir/instructir/order-sensitivity",
       "instir/instructir/prompt-sensitivity", "instir/instructir/prompt-paraphrases",
       "instir/ifir/fiqa", "instir/ifir/scifact_open", "instir/ifir/nfcorpus", "instir/ifir/aila", "instir/ifir/fire",
       "instir/ifir/pm", "instir/ifir/cds", "instir/followir/robust04", "instir/followir/news21",
       "instir/followir/core17"]

#: PyTerrier 1.1.2 calls pandas with inplace=, which pandas 3.1 deprecates (its warning, not the kit's)
pytestmark = [pytest.mark.interop, pytest.mark.filterwarnings("ignore:The inplace keyword in DataFrame")]


@pytest.fixture
def interop(irds):
    """instir.interop with the datasets registered on the fetch cache, and that root again afterwards."""
    import instir.interop

    instir.interop.register_ir_datasets()
    yield instir.interop
    instir.interop.register_ir_datasets()


def _kit_records(benchmark):
    template = default_template("bm25", benchmark)
    docs = [(d.id, d.text, d.title) for d in benchmark.corpus]
    queries = [(q.id, template.format_query(q), q.query, q.instruction, q.group, q.level, q.subset)
               for q in benchmark.queries.values()]
    return docs, queries


def _assert_same(dataset, benchmark):
    docs, queries = _kit_records(benchmark)
    assert [tuple(d) for d in dataset.docs_iter()] == docs
    assert [tuple(q) for q in dataset.queries_iter()] == queries
    assert dataset.qrels_dict() == benchmark.qrels
    assert (dataset.docs_count(), dataset.queries_count(), dataset.qrels_count()) == (
        len(docs), len(queries), sum(len(r) for r in benchmark.qrels.values()))


def test_importing_instir_and_its_interop_package_imports_none_of_the_libraries():
    code = ("import sys, instir, instir.interop; instir.interop.__all__; "
            "print(sorted(m for m in ('ranx', 'pyterrier', 'ir_datasets', 'numba') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_every_benchmark_subset_and_setting_has_an_id(interop, irds):
    assert list(interop.dataset_ids()) == IDS
    assert interop.register_ir_datasets() == IDS  # a second call registers nothing twice
    assert set(IDS) <= set(irds.registry)


def test_the_instructir_sample_reads_through_ir_datasets_as_the_kit_loads_it(interop, irds):
    dataset = irds.load("instir/instructir-sample")
    _assert_same(dataset, load_benchmark("instructir-sample"))
    assert (dataset.docs_count(), dataset.queries_count(), dataset.qrels_count()) == (152, 86, 86)
    first, *_, last = dataset.queries_iter()
    assert first.query_id == "1078446_1" and first.query == "wine cabinets definition"
    assert first.text == f"{first.instruction} [SEP] wine cabinets definition" and first.level is None
    assert last.query_id == list(load_benchmark("instructir-sample").queries)[-1]
    assert dataset.qrels_defs()[1].startswith("relevant")


@pytest.mark.parametrize("setting", ["query-only", "order-sensitivity", "prompt-sensitivity", "prompt-paraphrases"])
def test_every_instructir_setting_reads_as_the_kit_loads_it(interop, irds, setting):
    dataset = irds.load(f"instir/instructir-sample/{setting}")
    benchmark = load_benchmark("instructir-sample", setting)
    _assert_same(dataset, benchmark)
    first = next(iter(dataset.queries_iter()))
    if setting == "order-sensitivity":  # the query comes first in this setting's text
        assert first.text == f"{first.query} [SEP] {first.instruction}"
    if setting == "query-only":
        assert first.instruction == "" and first.text == first.query


@pytest.mark.parametrize("name", ["ifir-sample/fiqa", "ifir-sample/nfcorpus"])
def test_the_ifir_samples_read_with_levels_and_the_query_first_text(interop, irds, name):
    dataset = irds.load(f"instir/{name}")
    _assert_same(dataset, load_benchmark(name))
    first = next(iter(dataset.queries_iter()))
    assert first.text == f"{first.query} {first.instruction}" and first.subset == name.split("/")[1]
    assert first.level == (1 if name.endswith("fiqa") else 0)


def test_real_benchmarks_read_from_a_data_root_in_the_upstream_layouts(interop, irds, tmp_path):
    shutil.copytree(FIXTURES / "instructir-hf", tmp_path / "instructir" / "hf")
    for subset in ("fiqa", "fire"):
        shutil.copytree(FIXTURES / "ifir-songtingyu" / subset, tmp_path / "ifir" / "songtingyu" / subset)
    interop.register_ir_datasets(root=tmp_path)
    for name in ("instructir", "ifir/fiqa", "ifir/fire"):
        _assert_same(irds.load(f"instir/{name}"), load_benchmark(name, root=tmp_path))
    levels = {q.level for q in irds.load("instir/ifir/fiqa").queries_iter()}
    assert levels == {1, 2, 3}


def test_one_benchmarks_own_folder_serves_as_the_root_too(interop, irds):
    interop.register_ir_datasets(root=FIXTURES / "ifir-songtingyu")
    _assert_same(irds.load("instir/ifir/fire"), load_benchmark("ifir/fire", root=FIXTURES / "ifir-songtingyu"))


def test_a_benchmark_never_fetched_says_how_to_fetch_it(interop, irds):
    dataset = irds.load("instir/ifir/cds")  # registering reads nothing
    with pytest.raises(FileNotFoundError, match="instir fetch ifir --subset cds"):
        next(iter(dataset.queries_iter()))


def test_documents_are_looked_up_by_id_and_settings_share_the_corpus(interop, irds):
    benchmark = load_benchmark("instructir-sample")
    store = irds.load("instir/instructir-sample").docs_store()
    doc = next(iter(benchmark.corpus))
    assert tuple(store.get(doc.id)) == (doc.id, doc.text, doc.title)
    some = benchmark.corpus.ids()[5:9]
    assert sorted(store.get_many(some)) == sorted(some)
    assert irds.docs_parent_id("instir/instructir-sample/query-only") == "instir/instructir-sample"
    with pytest.raises(KeyError):
        store.get("no-such-document")


def test_the_ir_datasets_command_sees_the_kits_datasets_through_python_m_instir_interop(irds, tmp_path):
    """ir_datasets 0.6 loads no other package's datasets, so its own command cannot see them: the
    kit's module registers them, then hands the arguments to that command (``ir_datasets.main``)."""
    command = [sys.executable, "-m", "instir.interop", "export", "instir/ifir-sample/fiqa", "queries",
               "--format", "jsonl"]
    out = subprocess.run(command, capture_output=True, text=True, check=True, cwd=tmp_path).stdout.splitlines()
    queries = load_benchmark("ifir-sample/fiqa").queries
    assert [json.loads(line)["query_id"] for line in out] == list(queries)
    assert json.loads(out[0])["instruction"] == next(iter(queries.values())).instruction


def test_a_misspelt_or_unfetched_dataset_is_one_line_from_python_m_instir_interop(irds, tmp_path, monkeypatch, capsys):
    """The kit's command errors, not ir_datasets' tracebacks: a misspelt id names the closest one, a benchmark not
    fetched says how to fetch it; ``--debug`` adds the traceback."""
    from instir.interop.__main__ import main

    monkeypatch.setenv("INSTIR_HOME", str(tmp_path / "empty"))
    monkeypatch.delenv("INSTIR_DEBUG", raising=False)
    for argv in (["export", "instir/ifir-sample/fiqq", "queries"], ["lookup", "--qid", "instir/ifir-sample/fiqq", "q"],
                 ["lookup", "--format", "jsonl", "instir/ifir-sample/fiqq", "d"]):  # the id found after options too
        assert main(argv) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith("python -m instir.interop: unknown dataset 'instir/ifir-sample/fiqq'; did you mean "
                               "'instir/ifir-sample/fiqa'?")
    assert main(["lookup", "--format", "jsonl", "instir/ifir-sample/fiqa", "sample-fiqa-d101"]) == 0
    assert json.loads(capsys.readouterr().out)["doc_id"] == "sample-fiqa-d101"
    qid = next(iter(load_benchmark("ifir-sample/fiqa").queries))  # on the commit before, an AttributeError
    assert main(["lookup", "--qid", "--format", "jsonl", "instir/ifir-sample/fiqa", qid, "no-such-query"]) == 0
    out = capsys.readouterr()
    assert [json.loads(line)["query_id"] for line in out.out.splitlines()] == [qid] and "no-such-query" in out.err
    assert main(["export", "instir/ifir/fiqa", "docs"]) == 2
    (line,) = [e for e in capsys.readouterr().err.splitlines() if not e.startswith("[INFO]")]
    assert "ifir/fiqa is not in the instir cache" in line and "instir fetch ifir --subset fiqa" in line
    assert main(["export", "instir/ifir/fiqa", "docs", "--debug"]) == 2
    assert "Traceback (most recent call last)" in capsys.readouterr().err


def test_an_unknown_export_field_is_one_line_and_an_interrupted_export_never_exits_zero(irds, monkeypatch, capsys):
    """ir_datasets' tsv and jsonl exporters look each ``--fields`` name up unchecked (a KeyError traceback), and its
    export swallows Ctrl-C with exit 0: a cut export read as whole by ``export … > file && next``."""
    from instir.interop.__main__ import main

    monkeypatch.delenv("INSTIR_DEBUG", raising=False)
    for fmt in ("tsv", "jsonl"):  # and lookup's, which uses the same exporters
        argv = ["export", "instir/ifir-sample/fiqa", "queries", "--format", fmt, "--fields", "query_id", "txt"]
        assert main(argv) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith("python -m instir.interop: unknown field 'txt' in --fields; did you mean 'text'?")
        argv = ["lookup", "--qid", "--format", fmt, "--fields", "query_id", "txt", "--", "instir/ifir-sample/fiqa", "q"]
        assert main(argv) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith("python -m instir.interop: unknown field 'txt' in --fields; did you mean 'text'?")
    import ir_datasets.commands.export as export

    def interrupted(data_cls, out, fields=None):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C

    monkeypatch.setitem(export.DEFAULT_EXPORTERS, "tsv", interrupted)
    assert main(["export", "instir/ifir-sample/fiqa", "queries"]) == 130
    assert capsys.readouterr().err.splitlines()[-1] == "python -m instir.interop: interrupted"
    print("stderr is still open")  # ir_datasets closed it: the kit's own line and what follows are still written


def test_the_level_of_a_query_is_exported_and_looked_up(irds, monkeypatch, capsys):
    """ir_datasets' exporters skipped ``level`` (typed Optional[int]) with an INFO line and exit 0, even when
    ``--fields`` named it: IFIR's key field, which docs/interop.md lists among the queries' fields."""
    from instir.interop.__main__ import main

    monkeypatch.delenv("INSTIR_DEBUG", raising=False)
    levels = {q.id: q.level for q in load_benchmark("ifir-sample/fiqa").queries.values()}
    assert main(["export", "instir/ifir-sample/fiqa", "queries", "--format", "jsonl"]) == 0
    out = capsys.readouterr()
    assert {r["query_id"]: r["level"] for r in map(json.loads, out.out.splitlines())} == levels
    assert "Skipping" not in out.err
    assert main(["export", "instir/ifir-sample/fiqa", "queries", "--fields", "query_id", "level"]) == 0
    rows = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert rows == [[qid, str(level)] for qid, level in levels.items()]
    qid = next(iter(levels))
    argv = ["lookup", "--qid", "--format", "jsonl", "--fields", "level", "--", "instir/ifir-sample/fiqa", qid]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out) == {"level": levels[qid]}
    assert main(["export", "instir/instructir-sample", "queries", "--format", "jsonl", "--fields", "level"]) == 0
    assert {json.loads(line)["level"] for line in capsys.readouterr().out.splitlines()} == {None}  # no levels: null


@pytest.mark.parametrize("name", ["followir-sample/news21", "followir-sample/core17"])
def test_a_reranking_tasks_candidate_lists_are_its_scoreddocs_in_their_order(interop, irds, name):
    # before, FollowIR had no scoreddocs: a system run through ir_datasets ranked the whole corpus, not the task's lists
    dataset, benchmark = irds.load(f"instir/{name}"), load_benchmark(name)
    lists = {}
    for scored in dataset.scoreddocs_iter():
        lists.setdefault(scored.query_id, []).append((scored.doc_id, scored.score))
    assert {q: [d for d, _ in docs] for q, docs in lists.items()} == benchmark.meta["top_ranked"]
    assert all([s for _, s in docs] == sorted((s for _, s in docs), reverse=True) for docs in lists.values())
    assert not irds.load("instir/instructir-sample").has_scoreddocs()


def test_what_a_dataset_lacks_or_no_command_at_all_is_one_line_never_exit_0_or_1(irds, monkeypatch, capsys):
    # on the commit before: ir_datasets printed "… does not provide scoreddocs" and exited 0, and its usage line
    # (naming ir_datasets) with exit 1 for no command or a misspelt one
    from instir.interop.__main__ import main

    monkeypatch.delenv("INSTIR_DEBUG", raising=False)
    for argv, said in ((["export", "instir/ifir-sample/fiqa", "scoreddocs"], "instir/ifir-sample/fiqa provides no "
                                                                            "scoreddocs"),
                       (["exprot", "instir/ifir-sample/fiqa", "docs"], "unknown command 'exprot'; did you mean "
                                                                       "'export'?"),
                       ([], "unknown command ''")):
        assert main(argv) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith(f"python -m instir.interop: {said}")


def test_an_ir_datasets_dataset_that_cannot_be_downloaded_is_one_line_naming_the_sources(irds, monkeypatch, capsys):
    import ir_datasets.commands.export as export
    from ir_datasets.util.download import RequestsDownload

    from instir.interop.__main__ import main

    def offline(data_cls, out, fields=None):  # as ir_datasets' Download.path raises when every mirror fails
        raise RuntimeError("All download sources failed", [(RequestsDownload(f"https://{host}/npl.tar.gz"),
                                                            ConnectionError("Name or service not known"))
                                                           for host in ("ir.example", "mirror.example")])

    monkeypatch.delenv("INSTIR_DEBUG", raising=False)
    monkeypatch.setitem(export.DEFAULT_EXPORTERS, "tsv", offline)
    assert main(["export", "instir/ifir-sample/fiqa", "docs"]) == 2
    (line,) = [e for e in capsys.readouterr().err.splitlines() if not e.startswith("[INFO]")]
    assert line == ("python -m instir.interop: ir_datasets could not download the dataset's files (offline?); tried "
                    "https://ir.example/npl.tar.gz, https://mirror.example/npl.tar.gz")


#: slices as ir_datasets takes them: ranges, steps, negative ends, fractions, empty and past the end
SLICES = [slice(None, 3), slice(3, 7), slice(-3, None), slice(3, -4, 4), slice(None, None, 5), slice(0.25, 0.5),
          slice(None, 0.5), slice(7, 2), slice(30, 100), slice(-10, -2, 3)]


def test_docs_iter_slices_as_ir_datasets_own_docstore_iterator(interop, irds, tmp_path):
    """Against a TSV dataset of ir_datasets 0.6 itself (``TsvDocs``, its docstore built: the
    ``Lz4PickleIter`` its ``docs_iter()`` returns) holding the same documents in the same order."""
    from ir_datasets.formats import TsvDocs
    from ir_datasets.util import LocalDownload

    dataset = irds.load("instir/ifir-sample/fiqa")
    ids = [d.doc_id for d in dataset.docs_iter()]
    (tmp_path / "docs.tsv").write_text("".join(f"{doc_id}\t{i}\n" for i, doc_id in enumerate(ids)))
    theirs = TsvDocs(LocalDownload(tmp_path / "docs.tsv"))
    theirs.docs_store().build()

    def doc_ids(docs):
        return [d.doc_id for d in docs]

    assert len(ids) == 38 and doc_ids(theirs.docs_iter()) == ids
    for key in SLICES:
        assert doc_ids(dataset.docs_iter()[key]) == doc_ids(theirs.docs_iter()[key]), key
    assert doc_ids(dataset.docs_iter()[10:][::3][2:5]) == doc_ids(theirs.docs_iter()[10:][::3][2:5])
    for index in (0, 5, -1, -len(ids)):
        assert dataset.docs_iter()[index].doc_id == theirs.docs_iter()[index].doc_id
    ours_it, theirs_it = dataset.docs_iter(), theirs.docs_iter()
    assert doc_ids([next(ours_it), next(ours_it)]) == doc_ids([next(theirs_it), next(theirs_it)])
    assert doc_ids(ours_it[:3]) == doc_ids(theirs_it[:3]) == ids[2:5]  # counted from what is consumed
    for key, error in ((len(ids), IndexError), (slice(None, None, -1), ValueError), ("3", TypeError)):
        for docs in (dataset.docs_iter(), theirs.docs_iter()):
            with pytest.raises(error):
                docs[key]
    corpus = load_benchmark("ifir-sample/fiqa").corpus
    assert [tuple(d) for d in dataset.docs_iter()[:3]] == [(d.id, d.text, d.title) for d in list(corpus)[:3]]


def test_pyterrier_reads_the_registered_sample_and_scores_a_kit_run_on_its_qrels(interop, pt, bm25_run,
                                                                                  instructir_sample):
    dataset = pt.get_dataset("irds:instir/instructir-sample")
    topics = dataset.get_topics("text")
    assert list(topics.columns) == ["qid", "query"]
    assert topics["query"].tolist() == [q for _, q, *_ in _kit_records(instructir_sample)[1]]
    qrels = dataset.get_qrels()
    assert qrels_of(qrels) == instructir_sample.qrels
    frame = pt.text.get_text(dataset, "text")(bm25_run.to_pyterrier())  # PyTerrier's text loader on the docstore
    texts = {d.id: d.text for d in instructir_sample.corpus}
    assert frame["text"].tolist() == [texts[d] for d in frame["docno"]]
    kit = evaluate_runs({"bm25": bm25_run}, instructir_sample, ["nDCG@10"], derived=False).per_query
    theirs = pt.Evaluate(bm25_run.to_pyterrier(), qrels, [ir_measures.nDCG @ 10])["nDCG@10"]
    assert theirs == pytest.approx(kit["value"].mean(), abs=1e-12)


def test_pyterriers_instir_provider_serves_every_id_without_the_prefix(interop, pt):
    from instir.interop.pt_provider import InstirDatasetProvider

    provider = InstirDatasetProvider()
    assert list(provider.list_dataset_names()) == [i.removeprefix("instir/") for i in IDS]
    topics = provider.get_dataset("ifir-sample/nfcorpus").get_topics("text")
    assert len(topics) == 5 and topics["qid"].iloc[0] == "sample-nf-q1_0"
    with pytest.raises(KeyError):
        provider.get_dataset("ifir/no-such-subset")


def test_the_declared_entry_point_gives_pyterrier_the_instir_datasets(interop, pt, tmp_path, monkeypatch):
    """pyproject.toml's ``pyterrier.dataset_provider`` entry point, installed as pip installs it
    (an ``entry_points.txt`` in a dist-info on the path), is what ``pt.get_dataset("instir:…")`` finds."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    value = declared["pyterrier.dataset_provider"]["instir"]
    info = tmp_path / "instir_entry_point_check-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: instir-entry-point-check\nVersion: 0\n")
    (info / "entry_points.txt").write_text(f"[pyterrier.dataset_provider]\ninstir = {value}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    dataset = pt.get_dataset("instir:instructir-sample/query-only")
    assert len(dataset.get_topics("text")) == 12
    assert qrels_of(dataset.get_qrels()) == load_benchmark("instructir-sample", "query-only").qrels


def test_a_reranking_tasks_candidates_are_scored_from_the_list_length_down_to_1(interop, irds):
    lists = {}
    for scored in irds.load("instir/followir-sample/news21").scoreddocs_iter():
        lists.setdefault(scored.query_id, []).append(scored.score)
    assert lists and all(scores == [float(n) for n in range(len(scores), 0, -1)] for scores in lists.values())


def test_graded_qrels_keep_their_grades_through_ir_datasets(interop, irds):
    benchmark = load_benchmark("followir-sample/news21")
    grades = {g for docs in benchmark.qrels.values() for g in docs.values()}
    assert grades == {0, 1, 2}  # the sample judges not relevant, relevant and highly relevant
    dataset = irds.load("instir/followir-sample/news21")
    assert dataset.qrels_dict() == benchmark.qrels
    # before, qrels_defs defined 0 and 1 only: FollowIR's grade 2 was left without a meaning
    assert sorted(dataset.qrels_defs()) == [0, 1, 2]
    assert dataset.qrels_defs()[2] == "relevant, grade 2 (a higher grade is more relevant)"
    assert sorted(irds.load("instir/ifir-sample/fiqa").qrels_defs()) == [0, 1]


def test_a_documents_default_text_is_what_the_kit_indexes_title_included(interop, irds):
    corpus = {d.id: d for d in load_benchmark("ifir-sample/fiqa").corpus}
    docs = list(irds.load("instir/ifir-sample/fiqa").docs_iter())
    assert any(d.title for d in docs)
    assert all(d.default_text() == corpus[d.doc_id].indexed_text for d in docs)


def test_the_docstore_refuses_a_field_other_than_doc_id(interop, irds):
    with pytest.raises(ValueError, match="by doc_id, not 'title'"):
        irds.load("instir/ifir-sample/fiqa").docs_store("title")


def test_debug_after_double_dash_is_an_argument_not_the_flag(irds, monkeypatch, capsys):
    from instir.interop.__main__ import main

    monkeypatch.delenv("INSTIR_DEBUG", raising=False)
    qid = next(iter(load_benchmark("ifir-sample/fiqa").queries))
    assert main(["lookup", "--qid", "--format", "jsonl", "--fields", "query_id", "--", "instir/ifir-sample/fiqa",
                 qid, "--debug"]) == 0
    out = capsys.readouterr()
    assert [json.loads(line) for line in out.out.splitlines()] == [{"query_id": qid}] and "--debug" in out.err


def test_the_command_leaves_ir_datasets_and_the_sigint_handler_as_it_found_them(irds, monkeypatch, capsys):
    # a notebook that runs the command, then ir_datasets itself, gets ir_datasets' own load, exporters and Ctrl-C
    import ir_datasets.commands.export as export
    import ir_datasets.commands.lookup as lookup

    from instir.interop.__main__ import main

    monkeypatch.delenv("INSTIR_DEBUG", raising=False)
    before = (irds.load, export.main_docs, export.main_queries, lookup.qid_lookup, signal.getsignal(signal.SIGINT))
    assert main(["export", "instir/ifir-sample/fiqa", "queries", "--fields", "query_id"]) == 0
    assert main(["export", "instir/ifir-sample/fiqq", "queries"]) == 2
    capsys.readouterr()
    assert (irds.load, export.main_docs, export.main_queries, lookup.qid_lookup,
            signal.getsignal(signal.SIGINT)) == before
