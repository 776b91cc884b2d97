"""The `instir` console script: bare `instir` prints the help and a pointer to the bundled
samples; `instir systems` fits 120 columns. Its error handling is tested in test_cli_errors."""

import os
import subprocess
import sys

import pandas as pd
import pytest

from instir.cli import data as commands
from instir.cli import main
from instir.cli.options import TEXT_WIDTH
from instir.cli.retrieve import systems_text
from instir.progress import QUIET_BARS


def test_bare_instir_prints_the_help_and_a_short_pointer_to_the_bundled_samples(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: instir") and "evaluate" in out and "--debug" in out
    pointer = out.split("for the traceback.\n", 1)[1].strip()
    assert pointer.startswith("bundled samples: instructir-sample, ifir-sample (fiqa, nfcorpus), "
                              "followir-sample (news21, core17)")
    assert "instir summary" in pointer and len(pointer.splitlines()) == 3  # a pointer, not the sample table
    assert "avg_relevant" not in out and "{" not in out
    assert max(len(line) for line in out.splitlines()) <= TEXT_WIDTH


def test_instir_systems_fits_120_columns_and_says_each_reason_once(capsys):
    assert main(["systems"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= TEXT_WIDTH
    assert "ifir: " in out and "instructir: " in out and "BM25 (IFIR)" in out and "FollowIR-7B" in out
    notes = [line for line in out.splitlines() if line.startswith("[")]
    assert len(notes) == len(set(notes)) and "not in the Hugging Face cache" in out


def test_a_long_card_is_wrapped_to_fit():
    table = pd.DataFrame([{"name": "my card " * 12, "paper": "user", "kind": "retriever", "adapter": "hf-mean-pool",
                           "model": "org/" + "m" * 80, "runnable": False, "reason": "needs peft " * 30}])
    text = systems_text(table)
    assert max(len(line) for line in text.splitlines()) <= TEXT_WIDTH
    assert "no [1]" in text and "[1] needs peft" in text


def test_console_script_entry_point_runs_help():
    done = subprocess.run([sys.executable, "-m", "instir.cli", "--help"], capture_output=True, text=True)
    assert done.returncode == 0
    assert "summary" in done.stdout and "fetch" in done.stdout


@pytest.mark.parametrize("progress", ["0", "1"])
def test_a_command_runs_with_the_libraries_bars_off_exactly_when_the_kits_are(progress, monkeypatch):
    """``INSTIR_PROGRESS=0`` means no bars at all: transformers' "Loading weights", the Hub's
    downloads and bare tqdm bars read these switches (also in the kernels and Ray workers a
    command starts); the environment is as before once the command returns."""
    seen = {}

    def handler(args):
        seen.update({name: os.environ.get(name) for name in QUIET_BARS})
        return 0

    monkeypatch.setenv("INSTIR_PROGRESS", progress)
    for name in QUIET_BARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(commands, "summary_command", handler)
    assert main(["summary"]) == 0
    assert seen == (QUIET_BARS if progress == "0" else dict.fromkeys(QUIET_BARS))
    assert not set(QUIET_BARS) & set(os.environ)


def test_instir_run_takes_a_collection_name_for_its_benchmarks():
    from instir.cli import build_parser
    from instir.cli.run import cli_parameters

    args = build_parser().parse_args(["run", "--benchmark", "followir-sample", "instructir-sample"])
    assert cli_parameters(args)["benchmarks"] == ["followir-sample/news21", "followir-sample/core17",
                                                  "instructir-sample"]


def test_retrieve_without_k_ranks_to_the_depth_the_plan_gives_the_benchmark(tmp_path, capsys, monkeypatch):
    from instir.stages import plan

    asked = []
    monkeypatch.setattr(plan, "depth_of", lambda name: asked.append(name) or 3)  # the family's depth, made small
    assert main(["retrieve", "--benchmark", "instructir-sample", "--retriever", "bm25", "--out", str(tmp_path)]) == 0
    said = capsys.readouterr().out.splitlines()[0]
    queries = int(said.split(": ")[1].split()[0])
    assert asked == ["instructir-sample"] and f"{queries} queries, {3 * queries} rows" in said


@pytest.mark.parametrize("extra", [["--model", "some/model"], ["--windowing", "clean"]])
def test_retrieve_refuses_a_model_or_windowing_beside_a_system_card(tmp_path, capsys, extra):
    assert main(["retrieve", "--benchmark", "instructir-sample", "--system", "BM25", *extra,
                 "--out", str(tmp_path / "runs")]) == 2
    assert "--model and --windowing apply to --retriever dense/hybrid" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_systems_lists_only_the_paper_asked_for_and_refuses_an_unknown_one(capsys):
    assert main(["systems", "--paper", "ifir"]) == 0
    headers = [line for line in capsys.readouterr().out.splitlines() if line.endswith("can run here")]
    assert headers and all(line.startswith("ifir: ") for line in headers), headers
    cards, runnable = (int(headers[0].split()[i]) for i in (1, 3))  # ifir: N cards, M can run here
    assert 0 < runnable < cards  # here (no weights downloaded) the bundled BM25 runs, the model cards do not
    with pytest.raises(SystemExit) as ended:
        main(["systems", "--paper", "nopaper"])
    assert ended.value.code == 2 and "invalid choice: 'nopaper'" in capsys.readouterr().err
    assert main(["systems", "--paper", "user"]) == 0  # none given: said, not an empty line
    assert capsys.readouterr().out == "user: no cards (cards of your own are read from --cards FILE)\n"
