"""DenseRetriever's ``windowing`` modes end to end with a tiny random BERT encoder built here
(the WordPiece vocabulary of tiny_tokenizers.py, mean pooling, 512 positions): document and
query vectors are exactly the means of the windows IFIR's ``segment_text`` cuts (re-stated in
tiny_tokenizers.py), INSTRUCTOR pairs shrink their windows, the model truncates each
window itself, and the mode reaches params, sidecars and the cache keys."""

import copy

import numpy as np
import pytest
import torch
from tiny_tokenizers import authors_segment_text, text_of_exactly, wordpiece_tokenizer

from instir.benchmarks.types import Benchmark, Corpus, Doc, Query
from instir.formatting import get_template
from instir.retrieval import make_retriever, read_sidecar, retrieve, run_windowing
from instir.retrieval.dense import DenseRetriever

IFIR = get_template("ifir")


def build_tiny_encoder(path) -> None:
    from transformers import BertConfig, BertModel

    tokenizer = wordpiece_tokenizer()
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512)
    BertModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    """The tiny encoder saved twice: as a plain encoder and under a name of a family (E5-mistral)
    whose IFIR class encodes whole texts."""
    root = tmp_path_factory.mktemp("models")
    for name in ("tiny-bert", "tiny-e5-mistral"):
        build_tiny_encoder(root / name)
    return root


@pytest.fixture(scope="module")
def tiny(model_dirs):
    from sentence_transformers import SentenceTransformer

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield SentenceTransformer(str(model_dirs / "tiny-bert"), device="cpu")
    torch.set_num_threads(threads)


def retriever(model, tmp_path, **kw) -> DenseRetriever:
    return DenseRetriever(model, cache_dir=tmp_path / "emb", progress=False, **kw)


def authors_vector(model, text, instruction=""):
    """IFIR's embed_documents for one text: its segment_text windows (Instructor: shrunk by the
    instruction's tokens, instruction before every window), encoded, averaged."""
    tok = model.tokenizer
    windows = authors_segment_text(tok.tokenize, tok.convert_tokens_to_string, text,
                                   instruction_tokens=len(tok.tokenize(instruction)) if instruction else 0)
    return np.mean(model.encode([instruction + w for w in windows]), axis=0), len(windows)


def test_ifir_document_vectors_are_the_means_of_the_authors_windows(tiny, tmp_path):
    tok = tiny.tokenizer
    docs = [Doc("d100", text_of_exactly(100, tok.tokenize)), Doc("d400", text_of_exactly(400, tok.tokenize)),
            Doc("d896", text_of_exactly(896, tok.tokenize)),
            Doc("titled", text_of_exactly(700, tok.tokenize), title="Court of appeal")]
    got = retriever(tiny, tmp_path, windowing="ifir").embed_corpus(Corpus.from_docs(docs), IFIR).matrix
    counts = []
    for row, doc in zip(got, docs):
        expected, n = authors_vector(tiny, doc.title + " " + doc.text if doc.title else doc.text)
        np.testing.assert_allclose(row, expected, atol=1e-5)
        counts.append(n)
    assert counts == [1, 2, 3, 2]


def test_ifir_queries_longer_than_384_tokens_are_windowed_too(tiny, tmp_path):
    tok = tiny.tokenizer
    long_query = Query("long", text_of_exactly(300, tok.tokenize), text_of_exactly(150, tok.tokenize))
    short_query = Query("short", "the court held", "appeal dismissed")
    inputs = IFIR.format_queries([long_query, short_query])
    assert len(tok.tokenize(inputs[0])) == 450
    got = retriever(tiny, tmp_path, windowing="ifir").embed_queries(inputs).matrix
    expected, n = authors_vector(tiny, inputs[0])
    assert n == 2
    np.testing.assert_allclose(got[0], expected, atol=1e-5)
    np.testing.assert_allclose(got[1], tiny.encode([inputs[1]])[0], atol=1e-5)
    clean = retriever(tiny, tmp_path, windowing="clean").embed_queries(inputs).matrix
    np.testing.assert_allclose(clean[0], tiny.encode([inputs[0]])[0], atol=1e-5)  # clean: queries whole


def test_instructor_pair_windows_shrink_by_the_instruction_tokens(tiny, tmp_path):
    template = get_template("ifir-instructor")
    doc = Doc("d", text_of_exactly(896, tiny.tokenizer.tokenize))
    prompt = template.format_doc(doc, "aila")[0]
    assert prompt == "Represent the legal paragraph for retrieval: "
    r = retriever(tiny, tmp_path, windowing="ifir")
    got = r.embed_corpus(Corpus.from_docs([doc]), template, "aila").matrix
    expected, n = authors_vector(tiny, doc.text, instruction=prompt)
    assert n == 3
    np.testing.assert_allclose(got[0], expected, atol=1e-5)
    reserve = len(tiny.tokenizer.tokenize(prompt))
    windows = r.ifir_split([[prompt, doc.text]])[0]
    assert [p for p, _ in windows] == [prompt] * 3
    assert [len(tiny.tokenizer.tokenize(w)) for _, w in windows] == [512 - reserve, 512 - reserve, 128]


def test_ifir_windows_are_not_capped_at_the_model_input(tiny, tmp_path):
    short = copy.deepcopy(tiny)
    ifir = retriever(short, tmp_path, windowing="ifir", max_length=64)
    text = text_of_exactly(896, tiny.tokenizer.tokenize)
    assert (ifir.params()["window"], ifir.params()["stride"]) == (512, 384)
    assert [len(tiny.tokenizer.tokenize(w)) for w in ifir.ifir_split([text])[0]] == [512, 512, 128]
    assert (retriever(short, tmp_path, windowing="clean", max_length=64).params()["window"]) == 62


def test_the_model_truncates_each_512_token_window_to_510_plus_special_tokens(tiny):
    text = text_of_exactly(512, tiny.tokenizer.tokenize, "the court held that appeal was".split())
    tokens = tiny.tokenizer.tokenize(text)
    first_510 = tiny.tokenizer.convert_tokens_to_string(tokens[:510])
    np.testing.assert_allclose(tiny.encode([text])[0], tiny.encode([first_510])[0], atol=1e-6)
    assert not np.allclose(tiny.encode([text])[0], tiny.encode([tiny.tokenizer.convert_tokens_to_string(
        tokens[:509])])[0], atol=1e-6)


def test_ifir_mode_cuts_nothing_for_families_the_authors_encoded_whole(model_dirs, tiny, tmp_path):
    r = retriever(str(model_dirs / "tiny-e5-mistral"), tmp_path, windowing="ifir")
    params = r.params()
    assert r.family == "e5-mistral" and params["windowing"] == "ifir"
    assert params["windowed"] == [] and params["window"] is None
    doc = Doc("d", text_of_exactly(896, tiny.tokenizer.tokenize))
    got = r.embed_corpus(Corpus.from_docs([doc]), IFIR).matrix
    np.testing.assert_allclose(got[0], r.model.encode([doc.text])[0], atol=1e-5)


def test_a_text_without_tokens_stays_one_window(tiny, tmp_path):
    assert retriever(tiny, tmp_path, windowing="ifir").ifir_split(["  ", ["Represent: ", " "]]) == [
        ["  "], [["Represent: ", " "]]]


def toy_benchmark(tok) -> Benchmark:
    docs = [Doc("long", text_of_exactly(900, tok.tokenize)),
            Doc("short", "the court held that the appeal was dismissed")]
    queries = {"q": Query("q", text_of_exactly(420, tok.tokenize), "section"), "p": Query("p", "appeal", "")}
    return Benchmark("ifir-toy", "hand-made", "local", "instructed", Corpus.from_docs(docs), queries,
                     {"q": {"long": 1}, "p": {"short": 1}}, family="ifir")


def test_windowing_mode_is_part_of_the_document_and_query_cache_keys(tiny, tmp_path):
    bench = toy_benchmark(tiny.tokenizer)
    runs = {mode: retriever(tiny, tmp_path, windowing=mode).search(bench, IFIR, k=2)
            for mode in (None, "clean", "ifir")}
    embeddings = {mode: run.meta["embeddings"] for mode, run in runs.items()}
    assert len({e["document_cache_key"] for e in embeddings.values()}) == 3
    assert [e["documents_encoded"] for e in embeddings.values()] == [2, 2, 2]
    assert [e["queries_encoded"] for e in embeddings.values()] == [2, 0, 2]  # clean reuses the whole-query vectors
    assert len({e["query_cache"] for e in embeddings.values()}) == 2
    again = retriever(tiny, tmp_path, windowing="ifir").search(bench, IFIR, k=2).meta["embeddings"]
    assert again["documents_encoded"] == again["queries_encoded"] == 0


def test_run_sidecar_records_the_windowing_mode(model_dirs, tiny, tmp_path):
    bench = toy_benchmark(tiny.tokenizer)
    run = retrieve(bench, retriever(tiny, tmp_path, windowing="ifir"), k=2, out_dir=tmp_path / "runs")
    params = read_sidecar(run.meta["path"])["retriever"]["params"]
    assert (params["windowing"], params["windowed"], params["window"], params["stride"]) == (
        "ifir", ["documents", "queries"], 512, 384)
    assert run_windowing(read_sidecar(run.meta["path"])) == "ifir"
    hybrid = make_retriever("hybrid", str(model_dirs / "tiny-bert"), windowing="clean")
    assert run_windowing({"retriever": {"params": hybrid.params()}}) == "clean"


@pytest.mark.parametrize(("params", "mode"), [
    ({"windowing": None}, "none"), ({"windowing": "ifir"}, "ifir"),
    ({"long_doc_windows": True}, "clean"), ({"long_doc_windows": False}, "none"),
    ({"k1": 0.9, "b": 0.4}, "n/a"), ({"dense": {"windowing": "clean"}, "lexical": {}}, "clean"),
])
def test_run_windowing_reads_every_sidecar_generation(params, mode):
    assert run_windowing({"retriever": {"params": params}}) == mode
    assert run_windowing(None) == "unknown"


def test_unknown_windowing_is_refused(tiny, tmp_path):
    with pytest.raises(ValueError, match="unknown windowing 'sliding'"):
        retriever(tiny, tmp_path, windowing="sliding")
    with pytest.raises(ValueError, match="not bm25"):
        make_retriever("bm25", windowing="ifir")
