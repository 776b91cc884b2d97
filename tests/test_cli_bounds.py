"""The hostile suite, bounded inputs (issue 24, item 4): a document over the length limit, a run
or corpus path that is no regular file, characters trec_eval would not read as the kit read them.
Each answers as ``tests/test_cli_errors.py`` requires: one line on stderr naming the file, line
and field, exit status 2, before any retrieval or scoring."""

import json
import shutil

import pytest
from test_cli_errors import fails

from instir.benchmarks.registry import SAMPLE_ROOT


@pytest.fixture
def instructir_root(tmp_path):
    root = tmp_path / "instructir"
    shutil.copytree(SAMPLE_ROOT / "instructir-sample", root)
    return root


def test_retrieve_bm25_refuses_a_document_over_the_limit_before_tokenizing_it(capsys, tmp_path, instructir_root,
                                                                              monkeypatch):
    # on main: a 2 GiB document ended in a segmentation fault inside PyStemmer (rc 139); here the limit is lowered
    import instir.benchmarks.readers as readers

    monkeypatch.setattr(readers, "MAX_DOC_CHARS", 5000)
    corpus = instructir_root / "corpus.jsonl"
    lines = corpus.read_text().count("\n")
    with corpus.open("a") as fh:
        fh.write(json.dumps({"_id": "huge", "title": "", "text": "lorem " * 2000}) + "\n")
    line = fails(capsys, "retrieve", "--benchmark", "instructir", "--root", str(instructir_root),
                 "--retriever", "bm25", "--out", str(tmp_path / "runs"))
    assert line == (f"instir retrieve: {corpus}, line {lines + 1}, field 'text': document 'huge' holds 12,000 "
                    "characters, more than the 5,000 a document may hold (INSTIR_MAX_DOC_CHARS changes that)")
    assert not list((tmp_path / "runs").glob("*.trec"))
