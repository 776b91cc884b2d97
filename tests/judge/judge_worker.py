"""Subprocess used by the cache tests: judges ``numbered_requests(n, start)`` through a
CachedJudge over an OpenAICompatibleJudge pointed at a test server, then prints its stats.

    python judge_worker.py DB URL START N CONCURRENCY
"""

import json
import sys
from dataclasses import asdict

from judge_fakes import numbered_requests

from instir.judge.cache import CachedJudge
from instir.judge.chat import OpenAICompatibleJudge

if __name__ == "__main__":
    db, url, start, n, concurrency = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
    backend = OpenAICompatibleJudge("fake-model", url, concurrency=concurrency, backoff_s=0.01, progress=False)
    judge = CachedJudge(backend, db)
    out = judge.judge(numbered_requests(n, start))
    print(json.dumps({**asdict(judge.stats), "ok": sum(j.ok for j in out)}))
