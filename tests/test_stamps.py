"""The one rule for times and JSON digests (instir.stamps): the stores that moved onto it keep the keys they
wrote before, so no cached index, reranker score or model description is lost to the merge."""

import hashlib
import json
from datetime import datetime

from instir.retrieval.bm25_cache import FORMAT_VERSION, entry_key
from instir.retrieval.score_cache import ScoreCache
from instir.retrieval.search import key_digest
from instir.stamps import json_sha256, utc_now

VALUE = {"model": "café", "k": 10, "path": __file__, "nested": {"b": [1, 2.5, None], "a": True}}


def _old(value, **options) -> str:
    """The digest as each store wrote it before the merge (json.dumps with sorted keys)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, **options).encode()).hexdigest()


def test_the_stores_keys_are_the_ones_they_wrote_before_the_merge():
    assert entry_key(VALUE) == _old({"format": FORMAT_VERSION, **VALUE}, default=str)
    assert ScoreCache.reranker_key(VALUE) == _old(VALUE, ensure_ascii=False, default=str)
    assert ScoreCache.input_key(["quéry", "doc"]) == _old(["quéry", "doc"], ensure_ascii=False, default=str)
    assert key_digest(VALUE) == _old(VALUE)[:8]
    assert json_sha256(VALUE) != json_sha256(VALUE, ensure_ascii=False)  # non-ASCII text: each store keeps its own


def test_a_value_json_cannot_hold_is_hashed_as_its_text():
    assert json_sha256({"when": datetime(2026, 12, 5)}) == _old({"when": "2026-12-05 00:00:00"})


def test_the_time_is_utc_iso_8601_to_the_asked_precision():
    seconds, micro = utc_now(), utc_now("microseconds")
    assert seconds.endswith("+00:00") and len(seconds) == len("2026-12-05T21:11:04+00:00")
    assert datetime.fromisoformat(micro).microsecond == int(micro[20:26])
