"""Data roots in the real benchmarks' layouts, built at test time (nothing big is committed).

- InstructIR: the authors' real query set and qrels (``data/instructir-github``, linked) beside a
  generated ``corpus.jsonl`` holding every judged document id plus one distractor per query
  group. The real corpus is only on Hugging Face; the generated one is built so that BM25 gives
  non-trivial rankings: a target passage holds the bare query, some content words of its own
  instruction and a few of a sibling instruction's, a distractor the bare query twice and
  filler, so a retriever that reads the instruction tends to rank the target first and one
  that does not is drawn to the distractor.
- IFIR: the songtingyu layout (``<subset>/test_data.json`` + ``<subset>/<subset>-corpus.jsonl``)
  of the fixtures in ``tests/benchmarks/fixtures/ifir-songtingyu`` (fiqa: levels 1-3; fire:
  one level-0 instruction per query).

:func:`data_root` lays them out as ``instir fetch`` would in a cache, plus the GitHub release
as its own layout folder: ``<root>/instructir/github/`` and ``<root>/ifir/songtingyu/<subset>/``.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

TESTS = Path(__file__).resolve().parent
REAL_INSTRUCTIR = TESTS.parent / "data" / "instructir-github"
IFIR_SONGTINGYU = TESTS / "benchmarks" / "fixtures" / "ifir-songtingyu"

#: IFIR subsets of the fixture: one multi-level, one single-level
IFIR_FIXTURE_SUBSETS = ("fiqa", "fire")

_WORD = re.compile(r"[A-Za-z]{4,}")
_FILLER = "general overview page with links news updates contact details and other unrelated listings"


def _content_words(text: str, limit: int) -> list[str]:
    """Distinct words of four letters or more, in order of first occurrence."""
    return list(dict.fromkeys(w.lower() for w in _WORD.findall(text)))[:limit]


def generated_instructir_corpus(folder: Path = REAL_INSTRUCTIR) -> list[dict]:
    """Corpus records for the real InstructIR queries in ``folder``: each judged target
    ``<pid>_<k>`` (``qrels/test.tsv``) with the query and content words of its instance's
    instruction and of the next sibling instruction, then one distractor ``distractor-<group>``
    per query group."""
    instances = {}
    with (folder / "only_instruction_queries.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            rec = json.loads(line)
            instances[rec["_id"]] = (rec["metadata"]["origin_query"], rec["text"])
    judged = [line.split("\t")[:2] for line in
              (folder / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]]
    siblings = {}
    for qid, _ in judged:
        siblings.setdefault(qid.rpartition("_")[0], []).append(qid)
    docs = []
    for qid, docid in judged:
        query, instruction = instances[qid]
        group = siblings[qid.rpartition("_")[0]]
        sibling = instances[group[(group.index(qid) + 1) % len(group)]][1]
        words = _content_words(instruction, 24)[::3] + _content_words(sibling, 24)[1::6]
        docs.append({"_id": docid, "title": "", "text": f"{query}. " + " ".join(words)})
    docs += [{"_id": f"distractor-{group}", "title": "", "text": f"{instances[qids[0]][0]}. " * 2 + _FILLER}
             for group, qids in siblings.items()]
    return docs


def write_instructir_github(dest: Path) -> Path:
    """The GitHub release's files linked into ``dest`` beside a generated ``corpus.jsonl``,
    as the README tells users to assemble them."""
    dest.mkdir(parents=True, exist_ok=True)
    for entry in REAL_INSTRUCTIR.iterdir():
        (dest / entry.name).symlink_to(entry)
    with (dest / "corpus.jsonl").open("w", encoding="utf-8") as fh:
        for doc in generated_instructir_corpus():
            fh.write(json.dumps(doc) + "\n")
    return dest


def write_ifir_songtingyu(dest: Path, subsets: tuple[str, ...] = IFIR_FIXTURE_SUBSETS) -> Path:
    """IFIR's data root in the songtingyu layout: ``dest/<subset>/`` for every subset."""
    for subset in subsets:
        shutil.copytree(IFIR_SONGTINGYU / subset, dest / subset)
    return dest


def data_root(dest: Path) -> Path:
    """A data root serving both benchmarks: ``dest/instructir/github/`` and
    ``dest/ifir/songtingyu/<subset>/``."""
    write_instructir_github(dest / "instructir" / "github")
    write_ifir_songtingyu(dest / "ifir" / "songtingyu")
    return dest
