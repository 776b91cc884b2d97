"""Two Ray nodes on loopback (``ray.cluster_utils.Cluster``): cells land on both, results match
the serial path, and a corpus encoding survives a killed encoder actor."""

import functools
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray
from ray.cluster_utils import Cluster  # noqa: E402

from instir.benchmarks.types import Corpus, Doc  # noqa: E402
from instir.distributed.encode import encode_corpus  # noqa: E402
from instir.distributed.grid import parse_grid  # noqa: E402
from instir.distributed.sweep import run_sweep, start_with_retries  # noqa: E402
from instir.formatting import get_template  # noqa: E402
from instir.retrieval.dense import DenseRetriever  # noqa: E402

CHUNK = 8


@pytest.fixture(scope="module")
def two_nodes(worker_environment):
    ray.shutdown()  # the session's local Ray, if an earlier module started it (this module runs last)
    with worker_environment():
        cluster = start_with_retries(lambda: Cluster(initialize_head=True,
                                                     head_node_args={"num_cpus": 1, "include_dashboard": False}))
        start_with_retries(lambda: cluster.add_node(num_cpus=1))
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, log_to_driver=False)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def test_cells_land_on_both_nodes_and_match_the_serial_loop(two_nodes, tmp_path):
    grid = parse_grid({"benchmarks": ["instructir-sample", "ifir-sample/fiqa"], "systems": ["bm25"], "k": 20})
    spread = run_sweep(grid, tmp_path / "ray")
    serial = run_sweep(grid, tmp_path / "serial", executor="serial")
    assert spread.count("done") == serial.count("done") == 4
    assert len({r.node for r in spread.results.values()}) == 2
    for name in ("runs/runs.csv", "metrics/metrics.csv", "metrics/comparisons.csv"):
        if name.endswith("runs.csv"):
            import pandas as pd

            cols = ["benchmark", "retriever", "system", "variant", "template", "run_file"]
            assert pd.read_csv(tmp_path / "ray" / name)[cols].equals(pd.read_csv(tmp_path / "serial" / name)[cols])
        else:
            assert (tmp_path / "ray" / name).read_bytes() == (tmp_path / "serial" / name).read_bytes()
    for run in (tmp_path / "serial" / "runs").glob("*.trec"):
        assert (tmp_path / "ray" / "runs" / run.name).read_bytes() == run.read_bytes()


def test_cpu_encoding_takes_one_actor_per_node(two_nodes):
    from instir.distributed.encode import encoder_pool

    assert encoder_pool() == (2, 1)


#: words per document: short ones fit MiniLM's window; every LONG_EVERY-th is long enough for two windows (their mean,
#: encoded on the actors too). 120 words for every document took 21 s to encode in one process here, 30 words 3.6 s.
WORDS, LONG_WORDS, LONG_EVERY = 30, 120, 24


def _corpus(n: int) -> Corpus:
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(500)]
    return Corpus.from_docs(Doc(f"d{i}", " ".join(rng.choice(words, LONG_WORDS if i % LONG_EVERY == 0 else WORDS)),
                                f"title {i}") for i in range(n))


def _encoder_pids() -> set[int]:
    """Live processes of Ray Data's encoder actors (their title names the actor class)."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if b"_ChunkEncoder" in (entry / "cmdline").read_bytes():
                    pids.add(int(entry.name))
            except OSError:
                pass
    return pids - {os.getpid()}


@pytest.fixture(scope="module")
def killed_run(two_nodes, tmp_path_factory):
    """A sharded encoding of 24 chunks during which one encoder actor is killed (SIGKILL by
    pid) once the first chunk is written: (result, killed pids, corpus, encoder factory, the
    models the driver loaded)."""
    folder = tmp_path_factory.mktemp("killed")
    corpus = _corpus(24 * CHUNK)
    factory = functools.partial(DenseRetriever, None, cache_dir=str(folder), chunk_size=CHUNK, progress=False)
    result, killed, driver_loads = {}, [], []
    worker = threading.Thread(target=lambda: result.update(
        done=encode_corpus(factory, corpus, get_template("query-only"), actors=2)))
    import sentence_transformers  # here, not at collection: the import costs every worker seconds

    with pytest.MonkeyPatch.context() as patch:  # models loaded in this (the driver's) process
        loaded = sentence_transformers.SentenceTransformer
        patch.setattr(sentence_transformers, "SentenceTransformer",
                      lambda *a, **kw: driver_loads.append(a) or loaded(*a, **kw))
        worker.start()
        deadline = time.monotonic() + 300
        while worker.is_alive() and time.monotonic() < deadline and not killed:
            if list(folder.rglob("chunk*.npy")) and (pids := _encoder_pids()):
                pid = min(pids)
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            time.sleep(0.05)
        worker.join()
    return result["done"], killed, corpus, factory, driver_loads


def test_killed_encoder_costs_only_its_chunk_and_vectors_match_one_process(killed_run, tmp_path):
    done, killed, corpus, _, _ = killed_run
    assert killed, "the encoding finished before an encoder could be killed"
    indices = [i for i, _ in done.written]
    assert sorted(indices) == list(range(24)) and done.present == []  # each chunk written exactly once
    single = DenseRetriever(None, cache_dir=tmp_path / "single", chunk_size=CHUNK, progress=False)
    expected = single.embed_corpus(corpus, get_template("query-only"))
    assert done.embeddings.key == expected.key
    np.testing.assert_array_equal(np.asarray(done.embeddings.matrix), np.asarray(expected.matrix))


def test_rerun_of_a_finished_encoding_encodes_nothing(killed_run):
    first, _, corpus, factory, _ = killed_run
    again = encode_corpus(factory, corpus, get_template("query-only"), actors=2)
    assert len(first.written) == 24 and again.written == [] and again.present == []
    assert again.embeddings.encoded == 0
    np.testing.assert_array_equal(np.asarray(again.embeddings.matrix), np.asarray(first.embeddings.matrix))


def test_the_driver_loads_no_model_for_the_cache_key(killed_run):
    """The key holds the model's fingerprint; a worker with the encoders' resources computes it
    (on a cluster the driver may be a head node with no GPU and little memory)."""
    assert killed_run[4] == []
