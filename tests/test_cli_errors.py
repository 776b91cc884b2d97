"""The hostile suite: every user mistake, run through ``instir.cli.main`` as a user would type
it, answers with exactly one line on stderr — ``instir <command>: <message>`` naming the file,
line and field or the bad name — and exit status 2, with no traceback unless ``--debug`` (or
``INSTIR_DEBUG=1``) asks for one; nothing is started or written before the check. A few cases
run as a real process. Part of `make test-quick`."""

import shutil
import subprocess
import sys
from pathlib import Path

import huggingface_hub.constants
import pytest
from says import says

from instir.benchmarks import load_benchmark
from instir.benchmarks.catalog import SAMPLE_ROOT
from instir.cli import main
from instir.errors import UsageError, quoted
from instir.judge.cache import JudgmentCache
from instir.terminal import MAX_MESSAGE_CHARS

TOY_NOTEBOOKS = Path(__file__).parent / "fixtures" / "notebooks"


def fails(capsys, *argv: str) -> str:
    """Run ``instir ARGV``; assert exit 2, one stderr line starting ``instir <command>: `` and
    no traceback anywhere; return that line."""
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse's own errors
        code = exit_.code
    captured = capsys.readouterr()
    assert code == 2, (code, captured)
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err + captured.out
    assert lines[0].startswith(f"instir {argv[0]}: "), lines[0]
    return lines[0]


@pytest.fixture
def good_run(tmp_path) -> Path:
    """A valid run on instructir-sample: every query retrieves its relevant documents."""
    sample = load_benchmark("instructir-sample")
    lines = [f"{qid} Q0 {doc} {rank} {10 - rank} t" for qid, docs in sample.qrels.items()
             for rank, doc in enumerate(sorted(docs), start=1)]
    path = tmp_path / "good.trec"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def a_file(tmp_path) -> Path:
    path = tmp_path / "a_file"
    path.write_text("x\n")
    return path


# -- files ------------------------------------------------------------------------------------

def test_missing_run_file(capsys, tmp_path):
    line = fails(capsys, "evaluate", "--benchmark", "instructir-sample", "--run", str(tmp_path / "nope.trec"))
    assert "nope.trec" in line and "not found" in line


def test_malformed_run_line(capsys, tmp_path):
    run = tmp_path / "bad.trec"
    run.write_text("q1 Q0 d1 1 1.0 t\nq1 Q0 d2 two 0.5 t\n")
    line = fails(capsys, "evaluate", "--benchmark", "instructir-sample", "--run", str(run))
    assert "bad.trec, line 2, field 'rank'" in line and "'two'" in line


def test_a_huge_field_is_not_echoed_in_full(capsys, tmp_path):
    run = tmp_path / "huge.trec"
    run.write_text(f"q1 Q0 d1 {'9x' * 500_000} 1.0 t\n")
    line = fails(capsys, "evaluate", "--benchmark", "instructir-sample", "--run", str(run))
    assert "huge.trec, line 1" in line and len(line) < MAX_MESSAGE_CHARS + 200 and "(1000000 chars)" in line



def test_a_message_of_any_length_is_cut_to_the_bound_saying_how_much_more_there_was():
    # the readers cut a huge field themselves (above); whatever else quotes a 10 MB id is cut here
    from instir.terminal import describe

    line = describe(UsageError("x" * (MAX_MESSAGE_CHARS + 3000)))
    assert len(line) < MAX_MESSAGE_CHARS + 100 and line.endswith("(3000 more characters)")


def test_a_message_one_over_the_bound_keeps_exactly_the_bound_and_says_one_more():
    from instir.terminal import describe

    assert describe(UsageError("x" * (MAX_MESSAGE_CHARS + 1))) == "x" * MAX_MESSAGE_CHARS + "… (1 more characters)"


@pytest.mark.parametrize("kind, said", [("gz", "gzip-compressed, not text: decompress it first (gunzip)"),
                                        ("parquet", "a Parquet file, not text")])
def test_a_compressed_or_parquet_run_is_said_to_be_one_not_told_to_be_saved_as_utf8(capsys, good_run, kind, said):
    # on the commit before: "run.trec.gz, line 1: not UTF-8 text (byte 0x8b at column 2); save the file as UTF-8"
    import gzip

    import pandas as pd

    run = good_run.with_name(f"good.trec.{kind}")
    if kind == "gz":
        run.write_bytes(gzip.compress(good_run.read_bytes()))
    else:
        pd.read_csv(good_run, sep=" ", header=None).to_parquet(run)
    line = fails(capsys, "evaluate", "--benchmark", "instructir-sample", "--run", str(run))
    assert line.startswith(f"instir evaluate: {run}: {said}")
    assert "UTF-8" not in line


def test_a_gzipd_corpus_under_a_text_name_is_said_to_be_compressed(tmp_path):
    import gzip

    from instir.benchmarks.readers import iter_corpus_docs
    from instir.benchmarks.types import FormatError

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_bytes(gzip.compress(b'{"_id": "d1", "text": "a"}\n' * 100))
    with pytest.raises(FormatError, match=rf"^{corpus}: gzip-compressed, not text"):
        list(iter_corpus_docs(corpus))


def test_missing_qrels_file_in_a_root_folder(capsys, tmp_path):
    root = tmp_path / "instructir"
    shutil.copytree(SAMPLE_ROOT / "instructir-sample", root)
    shutil.rmtree(root / "qrels")
    line = fails(capsys, "summary", "instructir", "--root", str(root))
    assert str(root / "qrels" / "test.tsv") in line and "missing" in line


def test_bad_root(capsys, tmp_path):
    line = fails(capsys, "retrieve", "--benchmark", "instructir", "--retriever", "bm25",
                 "--root", str(tmp_path / "nowhere"), "--out", str(tmp_path / "runs"))
    assert str(tmp_path / "nowhere") in line and "not a directory" in line
    assert not (tmp_path / "runs").exists()


def test_benchmark_not_fetched(capsys):
    line = fails(capsys, "summary", "ifir/fiqa")
    assert "not in the instir cache" in line and "`instir fetch ifir --subset fiqa`" in line


def test_corrupt_judgment_cache(capsys, tmp_path):
    cache = tmp_path / "judgments.sqlite"
    JudgmentCache(cache).close()
    cache.write_bytes(cache.read_bytes()[:16] + bytes(range(256)) * 16)  # SQLite's mark, then no database
    line = fails(capsys, "judge-validate", "--benchmark", "instructir-sample", "--backend", "baseline",
                 "--cache", str(cache), "--per-stratum", "1")
    assert str(cache) in line and "damaged" in line and f"mv {cache} {cache}.corrupt" in line


def test_judgment_cache_that_is_a_folder(capsys, tmp_path):
    line = fails(capsys, "judge-validate", "--benchmark", "instructir-sample", "--backend", "baseline",
                 "--cache", str(tmp_path), "--per-stratum", "1")
    assert f"cannot open the judgment cache {tmp_path}" in line


def test_unwritable_out_of_evaluate(capsys, good_run, a_file):
    line = fails(capsys, "evaluate", "--benchmark", "instructir-sample", "--run", str(good_run),
                 "--out", str(a_file / "sub"))
    assert line.endswith(f"Not a directory: {a_file / 'sub'}")


def test_out_that_is_a_file(capsys, a_file):
    line = fails(capsys, "retrieve", "--benchmark", "instructir-sample", "--retriever", "bm25", "--out", str(a_file))
    assert line == f"instir retrieve: --out {a_file} is a file, not a folder"


def test_out_of_run_that_is_a_file_is_said_to_be_one(capsys, a_file):
    line = fails(capsys, "run", "--notebooks", str(TOY_NOTEBOOKS), "--out", str(a_file))
    assert line == f"instir run: the report folder {a_file.resolve()} is a file, not a folder; choose another --out"
    assert a_file.read_text() == "x\n"


def test_unwritable_out_of_run_before_any_kernel(capsys, a_file):
    line = fails(capsys, "run", "--notebooks", str(TOY_NOTEBOOKS), "--out", str(a_file / "report"))
    assert str(a_file / "report") in line and "Not a directory" in line


def test_fetch_without_network(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    line = fails(capsys, "fetch", "instructir", "--cache-dir", str(tmp_path))
    assert "could not download kaist-ai/InstructIR" in line


# -- names ------------------------------------------------------------------------------------

def test_unknown_benchmark(capsys):
    line = fails(capsys, "summary", "ifir-sample/fiq")
    says(line, "'ifir-sample/fiq'", "did you mean 'ifir-sample/fiqa'?", "ifir/cds")


def test_unknown_template(capsys, tmp_path):
    line = fails(capsys, "retrieve", "--benchmark", "instructir-sample", "--retriever", "bm25",
                 "--template", "instructor", "--out", str(tmp_path / "runs"))
    says(line, "'instructor'", "did you mean 'instructir'?", "query-only")
    assert not (tmp_path / "runs").exists()


def test_template_bm25_cannot_take(capsys, tmp_path):
    line = fails(capsys, "retrieve", "--benchmark", "instructir-sample", "--retriever", "bm25",
                 "--template", "instructir-instructor", "--out", str(tmp_path / "runs"))
    says(line, "'instructir-instructor'", "[instruction, text] pairs", "BM25")


def test_unknown_setting(capsys, tmp_path):
    line = fails(capsys, "retrieve", "--benchmark", "instructir-sample", "--retriever", "bm25",
                 "--setting", "instructd", "--out", str(tmp_path / "runs"))
    says(line, "'instructd'", "did you mean 'instructed'?")


def test_setting_ifir_does_not_have(capsys):
    line = fails(capsys, "summary", "ifir-sample/fiqa", "--setting", "query-only")
    says(line, "IFIR", "'instructed'", "'query-only'")


def test_unknown_measure(capsys, good_run):
    line = fails(capsys, "evaluate", "--benchmark", "instructir-sample", "--run", str(good_run),
                 "--measures", "nDCG@10", "nDGC@10")
    assert "unknown measure 'nDGC' in 'nDGC@10'; did you mean 'nDCG'?" in line


def test_unreadable_measure(capsys, good_run):
    line = fails(capsys, "evaluate", "--benchmark", "instructir-sample", "--run", str(good_run),
                 "--measures", "nDCG@x")
    assert "measure 'nDCG@x': the cutoff takes a whole number of at least 1" in line


def test_two_runs_with_one_name(capsys, tmp_path, good_run):
    (tmp_path / "other").mkdir()
    shutil.copy(good_run, tmp_path / "other" / good_run.name)
    line = fails(capsys, "evaluate", "--benchmark", "instructir-sample", "--run", str(good_run),
                 "--run", str(tmp_path / "other" / good_run.name))
    assert "run files need distinct names (got ['good', 'good'])" in line


def test_unknown_baseline(capsys, good_run):
    line = fails(capsys, "evaluate", "--benchmark", "instructir-sample", "--run", str(good_run), "--baseline", "bm25")
    assert "unknown --baseline 'bm25'" in line and "good" in line


def test_bad_judge_backend(capsys, tmp_path):
    line = fails(capsys, "judge-validate", "--benchmark", "instructir-sample", "--backend", "gpt")
    assert "argument --backend: invalid choice: 'gpt'" in line and "(see instir judge-validate --help)" in line


def test_openai_judge_without_a_model(capsys, tmp_path):
    line = fails(capsys, "judge-validate", "--benchmark", "instructir-sample", "--backend", "openai",
                 "--cache", str(tmp_path / "j.sqlite"))
    assert "the openai judge backend needs a model name" in line


def test_model_given_to_bm25(capsys, tmp_path):
    line = fails(capsys, "retrieve", "--benchmark", "instructir-sample", "--retriever", "bm25", "--model", "e5",
                 "--out", str(tmp_path / "runs"))
    assert "--model applies to dense and hybrid retrievers, not bm25" in line


def test_summary_root_with_two_names(capsys, tmp_path):
    line = fails(capsys, "summary", "instructir", "ifir/fiqa", "--root", str(tmp_path))
    assert "--root needs exactly one benchmark name" in line


def test_fetch_subset_of_instructir(capsys, tmp_path):
    line = fails(capsys, "fetch", "instructir", "--subset", "fiqa", "--cache-dir", str(tmp_path))
    assert "instructir has no subsets" in line


def test_judge_runs_that_share_no_instance(capsys, tmp_path, good_run):
    other = tmp_path / "other.trec"
    other.write_text("no-such-query Q0 d1 1 1.0 t\n")
    line = fails(capsys, "judge", "--benchmark", "instructir-sample", "--backend", "baseline", "--run", str(good_run),
                 "--query-only-run", str(other), "--cache", str(tmp_path / "j.sqlite"))
    assert "the instructed and query-only runs share no instance of instructir-sample" in line


# -- counts -----------------------------------------------------------------------------------

def test_k_zero(capsys, tmp_path):
    line = fails(capsys, "retrieve", "--benchmark", "instructir-sample", "--retriever", "bm25", "--k", "0",
                 "--out", str(tmp_path / "runs"))
    assert "argument --k: must be at least 1, got 0" in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("option", ["--k", "--max-instances"])
def test_judge_counts_below_one(capsys, tmp_path, option):
    line = fails(capsys, "judge", "--benchmark", "instructir-sample", "--backend", "baseline", "--run", "a.trec",
                 "--query-only-run", "b.trec", option, "-3")
    assert f"argument {option}: must be at least 1, got -3" in line


@pytest.mark.parametrize("given,said", [
    ("100000000000000000000", "takes a whole number of at least 1 (at most 2,147,483,647), got 100000000000000000000"),
    ("1_0", "expected a whole number, got '1_0'")])
def test_k_past_the_deepest_cutoff_or_with_underscores_is_refused_before_any_run(capsys, tmp_path, given, said):
    # on the commit before, --k 100000000000000000000 wrote runs (nDCG at that cutoff is refused) and --k 1_0 was 10
    line = fails(capsys, "retrieve", "--benchmark", "instructir-sample", "--retriever", "bm25", "--k", given,
                 "--out", str(tmp_path / "runs"))
    assert f"argument --k: {said}" in line
    assert not (tmp_path / "runs").exists()


def test_count_that_is_not_a_number(capsys, tmp_path):
    line = fails(capsys, "judge-validate", "--benchmark", "instructir-sample", "--backend", "baseline",
                 "--per-stratum", "many")
    assert "argument --per-stratum: expected a whole number, got 'many'" in line


# -- instir run parameters (checked before any kernel starts) ----------------------------------

def run_fails(capsys, tmp_path, *argv: str) -> str:
    out = tmp_path / "reports" / "r"
    line = fails(capsys, "run", "--out", str(out), *argv)
    assert not out.exists(), "a refused run must not create its report folder"
    return line


def test_run_parameter_with_an_unknown_name(capsys, tmp_path):
    line = run_fails(capsys, tmp_path, "--notebooks", str(TOY_NOTEBOOKS), "-p", "row=2")
    assert "unknown notebook parameter 'row'; did you mean 'rows'? known: out_dir, rows" in line


def test_run_parameter_of_the_wrong_type(capsys, tmp_path):
    line = run_fails(capsys, tmp_path, "--notebooks", str(TOY_NOTEBOOKS), "-p", "rows=abc")
    assert """parameter 'rows' expects a whole number (default: 3), got "abc\"""" in line


def test_run_parameter_without_a_value(capsys, tmp_path):
    line = run_fails(capsys, tmp_path, "--notebooks", str(TOY_NOTEBOOKS), "-p", "rows")
    assert "-p expects NAME=VALUE, got 'rows'" in line


def test_run_report_folder_given_as_a_parameter_is_refused_not_overridden(capsys, tmp_path):
    line = run_fails(capsys, tmp_path, "--notebooks", str(TOY_NOTEBOOKS), "-p", f"out_dir={tmp_path / 'else'}")
    assert "-p out_dir: the report folder is given as --out" in line and not (tmp_path / "else").exists()


def test_run_secret_parameter(capsys, tmp_path):
    line = run_fails(capsys, tmp_path, "--notebooks", str(TOY_NOTEBOOKS), "-p", "api_key=abc")
    assert "'api_key' looks like a secret" in line


def test_run_folder_without_notebooks(capsys, tmp_path):
    line = run_fails(capsys, tmp_path, "--notebooks", str(tmp_path / "empty"))
    assert f"no [0-9][0-9]_*.ipynb notebooks in {tmp_path / 'empty'}" in line


def test_run_unknown_benchmark(capsys, tmp_path):
    line = run_fails(capsys, tmp_path, "--benchmark", "instructir-sample", "ifir-sample/fiq")
    assert "parameter 'benchmarks': unknown benchmark 'ifir-sample/fiq'; did you mean 'ifir-sample/fiqa'?" in line


@pytest.mark.parametrize("given", [["-p", "retrievers=[]"], ["-p", "retrievers=", "-p", "systems=[]"]])
def test_run_with_no_system_at_all_is_refused_before_any_notebook(capsys, tmp_path, given):
    # on the commit before, notebook 01 ran and 02 failed ("no system to run"), leaving a report folder of a failure
    line = run_fails(capsys, tmp_path, *given)
    assert "parameter 'retrievers' or 'systems' is empty: name at least one, e.g. 'bm25'" in line


def test_run_k_that_is_not_a_number(capsys, tmp_path):
    line = run_fails(capsys, tmp_path, "-p", "k=abc")
    assert "parameter 'k' takes a whole number of at least 1 (at most 2,147,483,647), got 'abc'" in line


def test_run_judge_max_instances_null_is_refused_not_taken_as_every_instance(capsys, tmp_path):
    # docs/reproducing-a-paper-row.md: "the parameter takes a whole number, not `null`" (null would judge them all)
    line = run_fails(capsys, tmp_path, "-p", "judge_max_instances=null")
    assert "parameter 'judge_max_instances' expects a whole number (default: 5), got null" in line


def test_run_k_zero(capsys, tmp_path):
    line = run_fails(capsys, tmp_path, "-p", "k=0")
    assert "parameter 'k' takes a whole number of at least 1 (at most 2,147,483,647), got 0" in line


def test_run_unknown_retriever_in_a_comma_list(capsys, tmp_path):
    line = run_fails(capsys, tmp_path, "-p", "retrievers=bm25,splade")
    assert "parameter 'retrievers': unknown retriever 'splade'" in line


def test_run_bad_judge_backend(capsys, tmp_path):
    line = run_fails(capsys, tmp_path, "--judge", "gpt4")
    assert "parameter 'judge_backend': backend 'gpt4'; use one of openai, hf, baseline" in line


def test_run_list_of_numbers_where_names_are_needed(capsys, tmp_path):
    line = run_fails(capsys, tmp_path, "-p", "benchmarks=[1, 2]")
    assert "parameter 'benchmarks' expects a list of str values" in line and "got 1 in it" in line


# -- --debug, unexpected errors, interrupts, a real process ------------------------------------

@pytest.mark.parametrize("argv, said", [
    (["run", "--benchmark", "instructir-sample", "--benchmark", "ifir-sample/fiqa"],
     "--benchmark is given twice: only the last would count; give it once with all its values"),
    (["evaluate", "--benchmark", "instructir-sample", "--run", "r.trec", "--measures", "nDCG@10", "--measures",
      "R@100"],
     "--measures is given twice: only the last would count; give it once with all its values"),
    (["retrieve", "--bench", "instructir-sample", "--benchmark", "ifir-sample/fiqa", "--retriever", "bm25", "--out",
      "o"],
     "--benchmark is given twice (first as --bench): only the last would count; give it once"),
    (["retrieve", "--benchmark", "instructir-sample", "--retriever", "bm25", "--k", "10", "--k=20", "--out", "o"],
     "--k is given twice: only the last would count"),
    (["retrieve", "--benchmark", "instructir-sample", "--retriever", "bm25", "--k=10", "--k", "20", "--out", "o"],
     "--k is given twice: only the last would count"),  # one spelling, with or without "=": no "(first as …)"
])
def test_an_option_given_twice_is_refused_not_its_first_value_dropped(capsys, tmp_path, monkeypatch, argv, said):
    # on the commit before, argparse kept the last: instir run --benchmark A --benchmark B ran B alone, without a word
    monkeypatch.chdir(tmp_path)
    assert said in fails(capsys, *argv)
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("inside", ["", "run"])  # the folder's own name, or a folder's on its way
@pytest.mark.parametrize("mark", ["\ninstir retrieve: forged", "\u202e", "\x1b[2J"])
def test_an_output_folder_a_terminal_would_act_on_is_refused_before_anything_is_written(capsys, tmp_path, mark, inside):
    # on the commit before, instir retrieve printed "r" and "instir retrieve: forged/….trec" as two lines
    out = tmp_path / f"r{mark}" / inside
    line = fails(capsys, "retrieve", "--benchmark", "ifir-sample/fiqa", "--retriever", "bm25", "--out", str(out))
    assert "--out's path may not hold a control character, a line break or an invisible mark" in line
    assert mark not in line and not any(tmp_path.iterdir())


@pytest.mark.parametrize("path, shown", [("a\u202eb", "a\\u202eb"), ("r\ninstir: forged", "r\\ninstir: forged")])
def test_a_folder_refused_for_a_mark_a_terminal_would_act_on_is_named_with_the_mark_escaped(path, shown):
    # the message itself is read in a notebook's traceback too, where no escaping stream stands between it and the eye
    from instir.errors import UsageError
    from instir.terminal import refuse_unshown

    with pytest.raises(UsageError) as err:
        refuse_unshown(Path(path), "--out's path")
    assert str(err.value).startswith(f"{shown}: --out's path may not hold a control character")


def test_a_folder_whose_name_ends_in_a_space_is_no_mark_a_terminal_acts_on():
    from instir.terminal import refuse_unshown

    assert refuse_unshown(Path("reports/run "), "--out's path") is None


def test_debug_shows_the_traceback(capsys):
    assert main(["summary", "ifir-smaple", "--debug"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("Traceback") and "UnknownNameError" in err
    assert err.splitlines()[-1].startswith("instir summary: unknown benchmark 'ifir-smaple'")


def test_instir_debug_variable_shows_the_traceback(capsys, monkeypatch):
    monkeypatch.setenv("INSTIR_DEBUG", "1")
    assert main(["summary", "ifir-smaple"]) == 2
    assert "Traceback" in capsys.readouterr().err


def test_unexpected_errors_keep_their_traceback(monkeypatch):
    import instir.cli.data as commands

    def broken(args):
        raise ValueError("a bug, not a user mistake")

    monkeypatch.setattr(commands, "summary_command", broken)
    with pytest.raises(ValueError, match="a bug"):
        main(["summary"])


def test_interrupt_is_one_line(capsys, monkeypatch):
    import instir.cli.data as commands

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(commands, "summary_command", interrupted)
    assert main(["summary"]) == 130
    assert capsys.readouterr().err == "instir summary: interrupted\n"


def instir_process(*argv: str, **env: str) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "instir.cli", *argv], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=300)


def test_a_real_process_exits_2_with_one_line(tmp_path):
    done = instir_process("evaluate", "--benchmark", "instructir-sample", "--run", str(tmp_path / "nope.trec"))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == f"instir evaluate: {tmp_path / 'nope.trec'}: run file not found\n"


def test_a_real_process_shows_the_traceback_with_instir_debug(tmp_path):
    done = instir_process("evaluate", "--benchmark", "instructir-sample", "--run", str(tmp_path / "nope.trec"),
                          INSTIR_DEBUG="1")
    assert done.returncode == 2 and "Traceback" in done.stderr and "FormatError" in done.stderr


def test_a_real_process_keeps_the_traceback_of_a_bug(tmp_path):
    code = ("import sys, instir.cli.data as c\n"
            "def broken(args): raise RuntimeError('a bug')\n"
            "c.summary_command = broken\n"
            "from instir.cli import main\nsys.exit(main(['summary']))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 1 and "Traceback" in done.stderr and "RuntimeError: a bug" in done.stderr


@pytest.mark.parametrize(("argv", "said"), [
    (["-p", "k=10", "-p", "k=20"], "-p k=20: k is given twice (also as -p k=10); give it once"),
    (["--benchmark", "instructir-sample", "-p", "benchmarks=ifir-sample"],
     "-p benchmarks=ifir-sample: benchmarks is given twice (also as --benchmark); give it once"),
])
def test_a_parameter_given_twice_is_refused_not_the_last_one_kept(capsys, tmp_path, argv, said):
    # on the commit before, the last one won without a word (a grid refuses a duplicate key)
    assert fails(capsys, "run", *argv, "--out", str(tmp_path / "out")) == f"instir run: {said}"
    assert not (tmp_path / "out").exists()


def test_a_report_folder_whose_path_is_no_utf8_text_is_one_line_before_anything_is_written(capsys, tmp_path):
    # on the commit before, a UnicodeEncodeError traceback after the folder was made, on every later run into it
    import os

    from instir.retrieval import retrieve
    from instir.stages import score_runs

    out = tmp_path / os.fsdecode(b"bad\xffdir")
    run = retrieve(load_benchmark("instructir-sample"), "bm25", k=10, out_dir=tmp_path / "runs").meta["path"]
    for command, *more in (("run",), ("evaluate", "--run", run)):  # evaluate wrote report.json and runs.csv first
        # the character is named by its place: a long path is quoted cut short (under pytest-xdist tmp_path is long)
        assert fails(capsys, command, "--benchmark", "instructir-sample", *more, "--out", str(out)) == (
            f"instir {command}: {quoted(str(out))} is no UTF-8 text (byte 0xff at character {len(str(tmp_path)) + 5}; "
            "a name, value or path the kit would write into its records, tables and pages): give it as UTF-8")
    # a value the kit writes into its record: on the commit before, a UnicodeEncodeError traceback after the
    # folder was made
    assert fails(capsys, "run", "-p", "judge_model=" + os.fsdecode(b"a\xff"), "--out", str(tmp_path / "r")).startswith(
        "instir run: 'judge_model=a\\udcff' is no UTF-8 text")
    with pytest.raises(UsageError, match="no UTF-8 text"):  # a stage, as a notebook calls it
        score_runs(out)
    assert not out.exists() and not (tmp_path / "r").exists()


def test_what_is_no_utf8_is_named_by_its_byte_and_place_however_long_the_text():
    from instir.errors import utf8_problem

    assert utf8_problem("/a/b") is None
    assert utf8_problem("/" + "a" * 200 + "\udcffb") == "byte 0xff at character 202"  # a file name's byte 0xff
    assert utf8_problem("x\ud800") == "U+D800 at character 2"  # a lone surrogate of no byte


def test_a_notebook_that_is_no_json_is_one_line_naming_it(capsys, tmp_path):
    # on the commit before: nbformat's NotJSONError, a 48-line traceback
    notebooks = tmp_path / "nbs"
    notebooks.mkdir()
    (notebooks / "00_x.ipynb").write_text("{")
    line = fails(capsys, "run", "--notebooks", str(notebooks), "--out", str(tmp_path / "out"))
    assert line.startswith(f"instir run: {notebooks / '00_x.ipynb'}: not a notebook papermill can read (NotJSONError")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv", [["judge", "--timeout", "{key}"], ["judge", "--model", "{key}"],
                                  ["retrieve", "--name", "run-{key}"], ["evaluate", "--run", "{upper}"]])
def test_a_key_in_any_argument_is_refused_before_any_option_quotes_it(argv, capsys, monkeypatch, tmp_path):
    # argparse quoted --timeout's value back; --model and --name went into the judge's tables, the cache, runs.csv
    key = "Zk0LmN-3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
    monkeypatch.setenv("LAB_GATEWAY_KEY", key)
    monkeypatch.chdir(tmp_path)
    assert main([arg.format(key=key, upper=key.upper()) for arg in argv]) == 2
    err = capsys.readouterr().err
    assert err == (f"instir {argv[0]}: an argument holds the value of $LAB_GATEWAY_KEY: keys are read from environment "
                   "variables only (--api-key-env names one); nothing was run or written\n")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("argv", [["retrieve", "--benchmark", "instructir-sample", "--retriever", "bm25", "--out",
                                   "~no-such-user-here/r"],
                                  ["run", "--out", "~no-such-user-here/r"],
                                  ["run", "-p", "data_root=~no-such-user-here/x", "--out", "{tmp}/r"]])
def test_a_home_folder_no_account_has_is_one_line(argv, capsys, tmp_path):
    # Python's expanduser raised RuntimeError("Could not determine home directory."): a traceback, exit 1
    assert main([arg.format(tmp=tmp_path) for arg in argv]) == 2
    assert capsys.readouterr().err == (f"instir {argv[0]}: ~no-such-user-here/{'x' if '-p' in argv else 'r'}: "
                                       "'~no-such-user-here' is no home folder here (no such user)\n")


def test_a_message_over_several_lines_is_one_line_with_its_breaks_as_spaces():
    from instir.terminal import describe

    assert describe(UsageError("first line\n   second line\n")) == "first line second line"


def test_what_a_command_prints_keeps_its_newlines_and_tabs_and_escapes_every_other_control():
    import io

    from instir.terminal import TerminalStream

    out = io.StringIO()
    TerminalStream(out).write("name\tvalue\nbm25\x1b[2J\t0.5\n")
    assert out.getvalue() == "name\tvalue\nbm25\\x1b[2J\t0.5\n"


def test_a_carriage_return_printed_is_escaped_so_it_cannot_overwrite_the_line():
    import io

    from instir.terminal import TerminalStream

    out = io.StringIO()
    TerminalStream(out).write("fake ok\rbm25\n")
    assert out.getvalue() == "fake ok\\rbm25\n"


def test_a_name_shown_on_the_terminal_has_its_newline_and_tab_escaped_too():
    from instir.terminal import terminal_text

    assert terminal_text("run\n\tfake: ok\r") == "run\\n\\tfake: ok\\r"


def test_a_command_leaves_warnings_shown_as_python_shows_them_after_it():
    import warnings

    from instir.terminal import escaped_stdout

    before = warnings.showwarning
    with escaped_stdout("instir"):
        assert warnings.showwarning is not before
    assert warnings.showwarning is before


def test_a_database_error_is_one_line_exit_2_and_a_commands_own_status_is_its_exit(capsys):
    import sqlite3

    from instir.terminal import answered

    def broken():
        raise sqlite3.DatabaseError("file is not a database")

    assert answered("instir", broken) == 2
    assert capsys.readouterr().err == "instir: database error: file is not a database\n"
    assert answered("instir", lambda: 3) == 3 and answered("instir", lambda: None) == 0


def test_a_message_at_the_bound_is_whole():
    from instir.terminal import describe

    assert describe(UsageError("x" * MAX_MESSAGE_CHARS)) == "x" * MAX_MESSAGE_CHARS


def test_an_error_is_described_by_its_kind_when_it_says_nothing_and_names_both_files_of_a_rename():
    import errno
    import sqlite3

    from instir.terminal import describe

    assert describe(UsageError()) == "UsageError"
    assert describe(OSError(errno.EEXIST, "File exists", "/r/a.trec", None, "/r/b.trec")) == (
        "File exists: /r/a.trec -> /r/b.trec")
    assert describe(sqlite3.DatabaseError("file is not a database")) == "database error: file is not a database"


def test_an_os_error_naming_a_file_without_a_reason_says_the_systems_reason_for_its_number():
    import errno

    from instir.terminal import describe

    assert describe(FileNotFoundError(errno.ENOENT, None, "/r/run.trec")) == "No such file or directory: /r/run.trec"
    assert describe(OSError(None, None, "/r/run.trec")) == "OSError: /r/run.trec"


def test_with_debug_a_warning_is_pythons_own_form_saying_where(capsys):
    import warnings

    from instir.terminal import answered

    def call():
        warnings.warn("careful", UserWarning)

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        assert answered("instir x", call, debug=True) == 0
    err = capsys.readouterr().err
    assert "UserWarning: careful" in err and "instir x: warning" not in err


# ------------------------------------------------------------------ review72z: messages at their bounds


def test_a_value_of_the_quote_limit_is_quoted_whole_and_one_character_more_is_cut():
    from instir.errors import QUOTE_LIMIT, shorten

    whole = "d" * QUOTE_LIMIT
    assert quoted(whole) == repr(whole) and shorten(whole) == whole
    assert quoted(whole + "x") == f"{whole!r}… ({QUOTE_LIMIT + 1} chars)"
    assert shorten(whole + "x") == f"{whole}… ({QUOTE_LIMIT + 1} chars)"


def test_an_integer_of_sixty_digits_is_quoted_whole_and_a_longer_one_by_its_size():
    assert quoted(10**59) == str(10**59)  # 60 digits
    assert quoted([10**59]) == f"[{10**59}]"
    assert quoted(10**70) == "<an integer of about 71 digits>"


def test_a_nested_value_is_quoted_three_levels_deep():
    assert quoted([[[[1]]]]) == "[[[[...]]]]"
    assert quoted({"a": {"b": {"c": {"d": 1}}}}) == "{'a': {'b': {'c': {...}}}}"


def test_the_first_byte_that_is_no_utf8_is_named_at_its_place():
    from instir.errors import utf8_problem

    assert utf8_problem("\udc80") == "byte 0x80 at character 1"
    assert utf8_problem("ab\udcff") == "byte 0xff at character 3"


def test_a_user_error_reads_as_its_message_and_in_a_notebook_as_one_line(monkeypatch):
    error = UsageError("grid.yaml:3: field 'k' takes a whole number")
    assert str(error) == "grid.yaml:3: field 'k' takes a whole number"
    monkeypatch.delenv("INSTIR_DEBUG", raising=False)
    assert error._render_traceback_() == ["\x1b[31mUsageError\x1b[0m: grid.yaml:3: field 'k' takes a whole number"]


def test_an_unknown_name_suggests_the_known_one_of_another_case_and_lists_them_all():
    from instir.errors import UnknownNameError, unknown

    err = unknown("benchmark", "FollowIR-Core17", ["followir-core17", "instructir-sample"])
    assert isinstance(err, KeyError) and isinstance(err, ValueError) and isinstance(err, UnknownNameError)
    assert str(err) == ("unknown benchmark 'FollowIR-Core17'; did you mean 'followir-core17'? known: followir-core17, "
                        "instructir-sample")
    assert str(unknown("benchmark", "instructir-sampel", ["instructir-sample"])) == (
        "unknown benchmark 'instructir-sampel'; did you mean 'instructir-sample'? known: instructir-sample")
    assert str(unknown("measure", "zzz", ["nDCG@10"], more=" (instir measures)")) == (
        "unknown measure 'zzz'; known: nDCG@10 (instir measures)")


def test_a_wrong_type_names_the_argument_and_quotes_a_plain_value():
    from instir.errors import expect

    with pytest.raises(ValueError, match=r"retrieve\(benchmark, …\) takes a str, got 12 \(a int\)"):
        expect(12, str, "retrieve(benchmark, …)")
    with pytest.raises(UsageError, match=r"takes a str or Path, got a object"):
        expect(object(), (str, Path), "load(path)")


@pytest.mark.parametrize(("argv", "said"), [
    # before: "the following arguments are required: --benchmark, --out", blaming what the slip left out
    (["retrieve", "--benchmrk", "instructir-sample", "--retriever", "bm25", "--out", "x"],
     "unrecognized argument --benchmrk (did you mean --benchmark?)"),
    # before: "instir: unrecognized arguments: --mesures nDCG@10", said by the parser of commands
    (["evaluate", "--benchmark", "instructir-sample", "--run", "r.trec", "--mesures", "nDCG@10"],
     "unrecognized argument --mesures (did you mean --measures?)"),
    (["retrieve", "--benchmark", "instructir-sample", "--colour=red"], "unrecognized argument --colour"),
    # a known option's abbreviation is argparse's to take; the mistake after it is the one said
    (["retrieve", "--bench", "instructir-sample", "--retriever", "bm25", "--out", "x", "--k", "0"],
     "argument --k: must be at least 1, got 0"),
])
def test_an_option_a_command_does_not_take_is_said_by_the_command_with_the_one_meant(capsys, argv, said):
    assert fails(capsys, *argv) == f"instir {argv[0]}: {said} (see instir {argv[0]} --help)"


def test_a_rerank_of_a_run_file_that_is_not_there_names_the_file_before_any_model_is_looked_for(capsys, tmp_path):
    # before, offline: "… castorini/monot5-base-msmarco-10k is not in the Hugging Face cache …", the run never named
    line = fails(capsys, "rerank", "--benchmark", "instructir-sample", "--system", "monoT5-base", "--run",
                 str(tmp_path / "nope.trec"), "--out", str(tmp_path / "out"))
    assert line.endswith("nope.trec: run file not found") and not (tmp_path / "out").exists()


def test_an_unknown_command_is_said_as_such_not_as_an_unknown_option_of_the_parser_of_commands(capsys):
    with pytest.raises(SystemExit) as done:
        main(["retreive", "--benchmark", "instructir-sample"])
    (line,) = capsys.readouterr().err.splitlines()
    assert done.value.code == 2 and "--benchmark" not in line
    assert line.startswith("instir: argument COMMAND: invalid choice: 'retreive'")


def test_what_follows_a_double_dash_is_no_option_to_be_said_unknown(capsys):
    # after "--" every argument is a positional one: the command's own complaint is said, not "--weird"
    line = fails(capsys, "systems", "--paper", "nope", "--", "--weird")
    assert line.startswith("instir systems: argument --paper: invalid choice: 'nope'") and "--weird" not in line
