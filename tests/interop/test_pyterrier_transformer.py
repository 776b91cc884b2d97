"""Kit systems inside PyTerrier 1.x (no JVM): ``instir.interop.pyterrier.transformer`` retrieves and
reranks in pipelines and ``pt.Experiment``, named as the kit names the system, with the kit's own
scores bit for bit; the qid chooses the query instance, and what cannot be scored as the kit
does is one line."""

from dataclasses import replace

import ir_measures
import numpy as np
import pandas as pd
import pytest

from instir.benchmarks.registry import load_benchmark
from instir.errors import UsageError
from instir.formatting import default_template
from instir.metrics.scoring import evaluate
from instir.retrieval.rerank import rerank
from instir.retrieval.runs import Run
from instir.retrieval.search import retrieve
from instir.systems.registry import build_system

#: PyTerrier 1.1.2 calls pandas with inplace=, which pandas 3.1 deprecates (its warning, not the kit's)
pytestmark = [pytest.mark.interop, pytest.mark.filterwarnings("ignore:The inplace keyword in DataFrame")]


class Overlap:
    """A reranker of the kit's protocol: query words found in the document, plus a length tie-break."""

    name = "overlap"
    batch_size = 16

    def identity(self):
        return {"kind": "fake-overlap"}

    def model_input(self, query, instruction, text):
        return [f"{query} {instruction}", text]

    def score(self, inputs):
        return [len(set(q.lower().split()) & set(d.lower().split())) + len(d) / 1e4 for q, d in inputs]


@pytest.fixture
def kit(interop_pt):
    from instir.interop.pyterrier import transformer

    return transformer


@pytest.fixture
def interop_pt(pt, irds):
    import instir.interop

    instir.interop.register_ir_datasets()
    return pt


def _topics(pt, dataset_id):
    dataset = pt.get_dataset(f"irds:{dataset_id}")
    return dataset.get_topics("text"), dataset.get_qrels()


def _same_rows(frame, run):
    """The frame holds the run's rows in its order, scores equal to the bit, ranks from 0."""
    assert frame["qid"].tolist() == run.df["qid"].tolist() and frame["docno"].tolist() == run.df["docid"].tolist()
    assert np.array_equal(frame["score"].to_numpy(), run.df["score"].to_numpy())
    assert frame["rank"].tolist() == (run.df["rank"] - 1).tolist()


def test_pt_experiment_takes_kit_retrievers_names_them_and_scores_as_instir_evaluate(kit, interop_pt,
                                                                                    instructir_sample):
    topics, qrels = _topics(interop_pt, "instir/instructir-sample")
    systems = [kit("bm25", instructir_sample), kit("bm25", instructir_sample, template="query-only")]
    table = interop_pt.Experiment(systems, topics, qrels, eval_metrics=[ir_measures.nDCG @ 10])
    assert table["name"].tolist() == ["bm25", "bm25 (query-only)"]
    bm25 = build_system("bm25")
    for (_, row), variant in zip(table.iterrows(), [None, "query-only"]):
        ours = evaluate(instructir_sample, retrieve(instructir_sample, bm25, variant), "nDCG@10")
        assert row["nDCG@10"] == pytest.approx(ours, abs=1e-12)


@pytest.mark.parametrize("system", ["bm25", "dense"])
def test_a_retriever_returns_the_kits_run_bit_for_bit_with_the_topics_columns(kit, interop_pt, instructir_sample,
                                                                              system):
    topics, _ = _topics(interop_pt, "instir/instructir-sample")
    frame = kit(system, instructir_sample)(topics)
    assert list(frame.columns) == ["qid", "query", "docno", "score", "rank"]
    _same_rows(frame, retrieve(instructir_sample, build_system(system)))
    assert (frame["query"] == frame["qid"].map(dict(zip(topics["qid"], topics["query"])))).all()


def test_the_qid_chooses_the_instance_and_the_query_text_is_carried_through_unread(kit, instructir_sample):
    qids = list(instructir_sample.queries)[3:6]
    bm25 = kit("bm25", instructir_sample)
    frame = bm25(pd.DataFrame({"qid": qids, "query": ["anything at all"] * 3}))
    run = retrieve(instructir_sample, build_system("bm25"))
    _same_rows(frame, type(run)(run.df[run.df["qid"].isin(qids)]))
    assert set(frame["query"]) == {"anything at all"}


def test_a_setting_and_a_card_are_in_the_name(kit, interop_pt):
    assert str(kit("bm25", "instructir-sample", setting="order-sensitivity")) == "bm25 [order-sensitivity]"
    fiqa = load_benchmark("ifir-sample/fiqa")
    card = kit("BM25 (IFIR)", fiqa)
    topics, qrels = _topics(interop_pt, "instir/ifir-sample/fiqa")
    table = interop_pt.Experiment([card], topics, qrels, eval_metrics=[ir_measures.nDCG @ 20])
    assert table["name"].tolist() == ["BM25 (IFIR)"]
    run = retrieve(fiqa, build_system("BM25 (IFIR)"))
    _same_rows(card(topics), run)
    assert table["nDCG@20"].iloc[0] == pytest.approx(evaluate(fiqa, run, "nDCG@20"), abs=1e-12)


def test_a_kit_reranker_rescores_the_retrievers_top_as_the_kits_rerank(kit, interop_pt, instructir_sample, tmp_path):
    topics, qrels = _topics(interop_pt, "instir/instructir-sample")
    pipeline = (kit("bm25", instructir_sample) % 10
                >> kit(Overlap(), instructir_sample, cache=tmp_path / "scores.sqlite"))
    frame = pipeline(topics)
    expected = rerank(retrieve(instructir_sample, build_system("bm25")), instructir_sample, Overlap(), depth=10,
                      cache=tmp_path / "other.sqlite", progress=False)
    _same_rows(frame, expected)
    assert list(frame.columns) == ["qid", "query", "docno", "score", "rank"]
    table = interop_pt.Experiment([pipeline], topics, qrels, eval_metrics=[ir_measures.nDCG @ 10])
    assert table["name"].tolist() == ["(bm25 >> RankCutoff(10) >> overlap)"]
    assert table["nDCG@10"].iloc[0] == pytest.approx(evaluate(instructir_sample, expected, "nDCG@10"), abs=1e-12)


def test_a_retriever_scores_followir_candidates_as_retrieve_does_on_the_reranking_task(kit, interop_pt):
    news = load_benchmark("followir-sample/news21")
    candidates = pd.DataFrame([(q, d, news.queries[q].query) for q, docs in news.meta["top_ranked"].items()
                               for d in docs], columns=["qid", "docno", "query"])
    frame = kit("bm25", news)(candidates)
    _same_rows(frame, retrieve(news, build_system("bm25")))
    assert list(frame.columns) == ["qid", "docno", "query", "score", "rank"]
    pipeline = interop_pt.Transformer.from_df(candidates) >> kit("bm25", news)
    topics = candidates[["qid", "query"]].drop_duplicates()
    assert np.array_equal(pipeline(topics)["score"].to_numpy(), frame["score"].to_numpy())


def test_pyterrier_inspects_the_outputs_and_a_reranker_needs_a_result_frame(kit, interop_pt, instructir_sample):
    assert interop_pt.inspect.transformer_outputs(kit("bm25", instructir_sample), ["qid", "query"]) == [
        "qid", "query", "docno", "score", "rank"]
    with pytest.raises(interop_pt.validate.InputValidationError):
        interop_pt.inspect.transformer_outputs(kit(Overlap(), instructir_sample), ["qid", "query"])
    empty = kit("bm25", instructir_sample)(pd.DataFrame(columns=["qid", "query"]))
    assert list(empty.columns) == ["qid", "query", "docno", "score", "rank"] and len(empty) == 0


@pytest.mark.parametrize("mistake, message", [
    (lambda kit, s: kit("bm25", s)(pd.DataFrame({"qid": ["no-such-query"], "query": ["q"]})),
     r"1 qid\(s\) of the frame are not query instances of instructir-sample .*'no-such-query'"),
    (lambda kit, s: kit(Overlap(), s)(pd.DataFrame({"qid": [next(iter(s.queries))], "docno": ["nowhere"]})),
     r"1 docno\(s\) of the frame are not documents of the corpus of instructir-sample .*'nowhere'"),
    (lambda kit, s: kit(Overlap(), s)(pd.DataFrame({"qid": [next(iter(s.queries))], "query": ["q"]})),
     r"overlap is a reranker: it rescores a result frame \(qid, docno\), so put a retriever before it"),
    (lambda kit, s: kit("bm25", s)(pd.DataFrame({"qid": [next(iter(s.queries))], "query": ["q2"], "query_0": ["q"]})),
     r"the query was rewritten earlier in the pipeline \(query_0\)"),
    (lambda kit, s: kit(Overlap(), s, template="query-only"), r"template do\(es\) not apply to 'overlap', a reranker"),
    (lambda kit, s: kit("bm25", s, query_split="fields"), r"query_split do\(es\) not apply to 'bm25', a retriever"),
    (lambda kit, s: kit(Overlap(), s, device="cpu"), r"device go\(es\) with a system name"),
    (lambda kit, s: kit(object(), s), r"is neither a kit retriever nor a reranker"),
    (lambda kit, s: kit("bm25", s, setting="query-only"), r"setting and root go with a benchmark name"),
])
def test_what_cannot_be_scored_as_the_kit_does_is_one_line(kit, instructir_sample, mistake, message):
    with pytest.raises(UsageError, match=message) as info:
        mistake(kit, instructir_sample)
    assert "\n" not in str(info.value)


def test_a_reranker_rescores_every_candidate_of_lists_of_different_lengths(kit, instructir_sample, tmp_path):
    top = kit("bm25", instructir_sample)(pd.DataFrame({"qid": list(instructir_sample.queries)[:2], "query": "q"}))
    first, second = top["qid"].unique()
    frame = pd.concat([top[top["qid"] == first].head(3), top[top["qid"] == second].head(6)])
    out = kit(Overlap(), instructir_sample, cache=tmp_path / "scores.sqlite")(frame)
    expected = rerank(Run.from_pyterrier(frame), instructir_sample, Overlap(), depth=6,
                      cache=tmp_path / "other.sqlite", progress=False)
    _same_rows(out, expected)
    assert set(zip(out["qid"], out["docno"])) == set(zip(frame["qid"], frame["docno"]))


def test_a_retriever_given_some_of_the_candidates_ranks_only_those(kit):
    news = load_benchmark("followir-sample/news21")
    given = pd.DataFrame([(q, d) for q, docs in news.meta["top_ranked"].items() for d in docs[:3]],
                         columns=["qid", "docno"])
    frame = kit("bm25", news)(given)
    assert sorted(zip(frame["qid"], frame["docno"])) == sorted(zip(given["qid"], given["docno"]))


@pytest.mark.parametrize("mistake, message", [
    (lambda kit, s, tmp: kit(Overlap(), s, k=5), r"k do\(es\) not apply to 'overlap', a reranker"),
    (lambda kit, s, tmp: kit(Overlap(), s, out_dir=tmp), r"out_dir do\(es\) not apply to 'overlap', a reranker"),
    (lambda kit, s, tmp: kit("bm25", s, cache=tmp / "c.sqlite"), r"cache do\(es\) not apply to 'bm25', a retriever"),
    (lambda kit, s, tmp: kit("bm25", s, root=tmp), r"setting and root go with a benchmark name"),
])
def test_an_option_the_system_would_ignore_is_refused(kit, instructir_sample, tmp_path, mistake, message):
    with pytest.raises(UsageError, match=message):
        mistake(kit, instructir_sample, tmp_path)


def test_the_count_of_unknown_qids_counts_each_qid_once(kit, instructir_sample):
    with pytest.raises(UsageError, match=r"^1 qid\(s\) of the frame"):
        kit("bm25", instructir_sample)(pd.DataFrame({"qid": ["no-such-query"] * 2, "query": ["q", "q"]}))


def test_a_retrievers_k_is_the_depth_of_its_lists(kit, instructir_sample):
    qids = list(instructir_sample.queries)[:2]
    frame = kit("bm25", instructir_sample, k=5)(pd.DataFrame({"qid": qids, "query": "q"}))
    assert frame.groupby("qid").size().to_dict() == dict.fromkeys(qids, 5)


class QueryLength:
    """A reranker of the kit's protocol that scores the length of the query part it is given."""

    name = "query-length"
    batch_size = 16

    def identity(self):
        return {"kind": "fake-query-length"}

    def model_input(self, query, instruction, text):
        return [query, text]

    def score(self, inputs):
        return [float(len(q)) for q, _ in inputs]


def test_a_rerankers_query_split_and_score_cache_are_used(kit, instructir_sample, tmp_path):
    qid = next(iter(instructir_sample.queries))
    query = replace(instructir_sample.queries[qid], query="wine [SEP] cabinets")
    bench = replace(instructir_sample, queries={qid: query}, qrels={})
    frame = pd.DataFrame({"qid": qid, "docno": instructir_sample.corpus.ids()[:2], "score": [2.0, 1.0]})
    fields = kit(QueryLength(), bench, query_split="fields", cache=tmp_path / "scores.sqlite")(frame)
    assert fields["score"].tolist() == pytest.approx([float(len("wine [SEP] cabinets"))] * 2)  # not " cabinets"
    assert (tmp_path / "scores.sqlite").is_file()


def test_a_template_objects_name_is_in_the_systems_name(kit, instructir_sample):
    template = default_template("e5-mistral", instructir_sample)
    assert str(kit("bm25", instructir_sample, template=template)) == f"bm25 ({template.name})"


def test_a_system_option_goes_to_build_system(kit, instructir_sample):
    with pytest.raises(UsageError, match="no_such_option"):
        kit("bm25", instructir_sample, no_such_option=1)


def test_a_retriever_scores_candidates_with_its_template(kit):
    news = load_benchmark("followir-sample/news21")
    candidates = pd.DataFrame([(q, d) for q, docs in news.meta["top_ranked"].items() for d in docs],
                              columns=["qid", "docno"])
    _same_rows(kit("bm25", news, template="query-only")(candidates),
               retrieve(news, build_system("bm25"), "query-only"))
