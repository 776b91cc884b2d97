"""Dense retrieval with the bundled all-MiniLM-L6-v2: real rankings, the embedding cache
seen from the retriever, long-document windows, pair inputs, exact blocked top-k, metadata.
One model load is shared by the whole module."""

import copy

import numpy as np
import pytest
import torch

from instir.benchmarks.types import Benchmark, Corpus, Doc, Query
from instir.formatting import Template, get_template
from instir.retrieval import retrieve, system_name
from instir.retrieval.dense import DenseRetriever, bundled_model_path, model_fingerprint
from instir.retrieval.runs import Run

DOCS = [
    Doc("saffron", "Saffron is a spice harvested from the crocus flower; it colours paella and risotto."),
    Doc("stocks", "Stock markets fell sharply on Monday as investors sold technology shares."),
    Doc("python", "Python is a programming language; write a function with the def keyword."),
    Doc("eiffel", "The Eiffel Tower is a wrought-iron lattice tower in Paris, France."),
    Doc("whales", "Blue whales are the largest animals ever known, feeding mostly on krill."),
    Doc("volcano", "A volcano erupts when magma rises through the crust and escapes as lava."),
]
QUERIES = {
    "q1": Query("q1", "what spice makes paella yellow", "I am a chef planning a Spanish menu", group="g1"),
    "q2": Query("q2", "how do I define a function", "I am learning to program in Python", group="g2"),
    "q3": Query("q3", "tall iron tower", "I am a tourist visiting France", group="g3"),
    "q4": Query("q4", "largest animal on earth", "", group="g4"),
    "q5": Query("q5", "why did shares drop", "Answer for an investor", group="g5"),
}
QRELS = {"q1": {"saffron": 1}, "q2": {"python": 1}, "q3": {"eiffel": 1}, "q4": {"whales": 1}, "q5": {"stocks": 1}}
TEMPLATE = get_template("instructir")


def make_benchmark(docs=DOCS, queries=QUERIES) -> Benchmark:
    return Benchmark("toy", "hand-made", "local", "instructed", Corpus.from_docs(docs), dict(queries), QRELS)


@pytest.fixture(scope="module")
def model():
    """One model load for the module; one torch thread (inputs are tiny, and on a shared
    machine idle-spinning worker threads make each forward pass many times slower)."""
    from sentence_transformers import SentenceTransformer

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield SentenceTransformer(bundled_model_path(), device="cpu")
    torch.set_num_threads(threads)


@pytest.fixture
def counted(model, monkeypatch):
    """Counts the texts given to ``model.encode`` (per call)."""
    calls: list[int] = []
    real = model.encode

    def encode(texts, *args, **kwargs):
        calls.append(len(texts))
        return real(texts, *args, **kwargs)

    monkeypatch.setattr(model, "encode", encode)
    return calls


def retriever(model, tmp_path, **kw) -> DenseRetriever:
    return DenseRetriever(model, cache_dir=tmp_path / "emb", progress=False, **kw)


def test_dense_ranks_the_relevant_document_first(model, tmp_path):
    run = retriever(model, tmp_path).search(make_benchmark(), TEMPLATE, k=3)
    top = run.df[run.df["rank"] == 1].set_index("qid")["docid"].to_dict()
    assert top == {q: next(iter(rel)) for q, rel in QRELS.items()}
    assert run.df.groupby("qid").size().tolist() == [3] * 5
    assert (run.df.groupby("qid")["score"].diff().dropna() < 0).all()


def test_second_search_encodes_no_documents_and_no_queries(model, tmp_path, counted):
    r = retriever(model, tmp_path)
    first = r.search(make_benchmark(), TEMPLATE, k=3)
    assert sum(counted) == len(DOCS) + len(QUERIES)
    counted.clear()
    second = retriever(model, tmp_path).search(make_benchmark(), TEMPLATE, k=3)
    assert counted == []
    assert second.meta["embeddings"]["documents_encoded"] == 0
    assert second.df.equals(first.df)


def test_changed_corpus_misses_the_document_cache(model, tmp_path, counted):
    retriever(model, tmp_path).search(make_benchmark(), TEMPLATE, k=3)
    counted.clear()
    edited = DOCS[:-1] + [Doc("volcano", "Volcanoes erupt when molten rock reaches the surface.")]
    run = retriever(model, tmp_path).search(make_benchmark(docs=edited), TEMPLATE, k=3)
    assert run.meta["embeddings"]["documents_encoded"] == len(DOCS)
    assert run.meta["embeddings"]["queries_encoded"] == 0


def test_changed_document_template_misses_but_query_template_reuses_documents(model, tmp_path):
    retriever(model, tmp_path).search(make_benchmark(), TEMPLATE, k=3)
    query_only = retriever(model, tmp_path).search(make_benchmark(), get_template("query-only"), k=3)
    assert query_only.meta["embeddings"]["documents_encoded"] == 0
    assert query_only.meta["embeddings"]["queries_encoded"] == len(QUERIES)
    prefixed = retriever(model, tmp_path).search(make_benchmark(), get_template("ifir-promptriever"), k=3)
    assert prefixed.meta["embeddings"]["documents_encoded"] == len(DOCS)


def test_fingerprint_is_unchanged_by_using_the_model():
    from sentence_transformers import SentenceTransformer

    fresh = SentenceTransformer(bundled_model_path(), device="cpu")  # never used: tokenizer state untouched
    before = model_fingerprint(fresh)
    fresh.encode(["any text at all"])
    assert model_fingerprint(fresh) == before
    # the tokenizer's spec is remembered between fingerprints: a changed vocabulary is another spec all the same
    fresh.tokenizer.add_tokens(["<an-added-token>"])
    assert model_fingerprint(fresh) != before


def test_changed_model_weights_miss_the_cache(model, tmp_path):
    retriever(model, tmp_path).search(make_benchmark(), TEMPLATE, k=3)
    tuned = copy.deepcopy(model)
    with torch.no_grad():
        next(tuned.parameters()).mul_(1.01)
    assert model_fingerprint(tuned) != model_fingerprint(model)
    run = retriever(tuned, tmp_path).search(make_benchmark(), TEMPLATE, k=3)
    assert run.meta["embeddings"]["documents_encoded"] == len(DOCS)


def test_a_model_object_trained_after_a_search_is_searched_as_the_model_it_is_now(model, tmp_path):
    # a class fine-tunes the model it passed in and searches again with the same retriever: the first search's
    # fingerprint was kept, so the second returned the first run (nDCG@10 0.785 where the tuned model gives 0.151)
    tuned = copy.deepcopy(model)
    dense = retriever(tuned, tmp_path)
    first = dense.search(make_benchmark(), TEMPLATE, k=3)
    with torch.no_grad():
        for parameter in tuned.parameters():
            parameter.mul_(-1.0)
    again = dense.search(make_benchmark(), TEMPLATE, k=3)
    fresh = retriever(tuned, tmp_path / "fresh").search(make_benchmark(), TEMPLATE, k=3)
    assert again.meta["embeddings"]["documents_encoded"] == len(DOCS)
    assert again.df[["qid", "docid", "score"]].equals(fresh.df[["qid", "docid", "score"]])
    assert not again.df["score"].equals(first.df["score"])


def test_changed_max_length_misses_the_cache(model, tmp_path):
    first = retriever(model, tmp_path).search(make_benchmark(), TEMPLATE, k=3)
    shorter = retriever(copy.deepcopy(model), tmp_path, max_length=8).search(make_benchmark(), TEMPLATE, k=3)
    assert shorter.meta["retriever"]["params"]["max_seq_length"] == 8
    assert shorter.meta["embeddings"]["document_cache_key"] != first.meta["embeddings"]["document_cache_key"]


def test_the_facts_of_a_model_folder_are_remembered_apart_for_each_max_length(tmp_path):
    # a second retriever of the same model files with another max_length is that length (its vectors keyed by it),
    # not the length the first one remembered
    def facts(max_length):
        return DenseRetriever(bundled_model_path(), max_length=max_length, cache_dir=tmp_path, device="cpu",
                              progress=False).facts()

    assert (facts(8)["max_seq_length"], facts(16)["max_seq_length"], facts(8)["max_seq_length"]) == (8, 16, 8)


def test_the_same_corpus_under_another_subsets_domain_word_is_encoded_anew(model, tmp_path):
    # IFIR formats each subset's documents with its own domain word: another subset's word is other text
    template = Template("domains", "custom", "a domain word before each document", "{query}",
                        doc="{domain}: {text}", domains={"fiqa": "finance", "aila": "law"})
    corpus = make_benchmark().corpus
    retriever(model, tmp_path).embed_corpus(corpus, template, "fiqa")
    law = retriever(model, tmp_path).embed_corpus(corpus, template, "aila")
    assert law.encoded == len(DOCS)
    np.testing.assert_allclose(law.matrix[0], model.encode(["law: " + DOCS[0].text])[0], atol=1e-5)


def test_clean_mode_document_embedding_is_the_mean_of_its_window_embeddings(model, tmp_path):
    long_text = " ".join(f"Sentence {i} tells about the history of tower number {i} in Paris." for i in range(12))
    r = retriever(model, tmp_path, windowing="clean", window=32, stride=24)
    windows = r.clean_split([long_text])[0]
    token_counts = [len(model.tokenizer(w, add_special_tokens=False)["input_ids"]) for w in windows]
    n_tokens = len(model.tokenizer(long_text, add_special_tokens=False)["input_ids"])
    assert len(windows) == 1 + -(-(n_tokens - 32) // 24) and max(token_counts) <= 32
    assert long_text.startswith(windows[0]) and long_text.endswith(windows[-1])

    corpus = Corpus.from_docs([Doc("short", "A short document."), Doc("long", long_text)])
    got = r.embed_corpus(corpus, TEMPLATE).matrix
    np.testing.assert_allclose(got[1], model.encode(windows).mean(axis=0), atol=1e-5)
    np.testing.assert_allclose(got[0], model.encode(["A short document."])[0], atol=1e-5)


def test_clean_window_is_capped_at_what_the_model_takes(model, tmp_path):
    params = retriever(model, tmp_path, windowing="clean").params()
    assert (params["window"], params["stride"]) == (254, 254)  # max_seq_length 256 minus [CLS], [SEP]
    assert params["windowing"] == "clean" and params["windowed"] == ["documents"]


def test_instructor_pairs_are_joined_unless_pooling_skips_the_prompt(model, tmp_path):
    pair = ["Represent the question for retrieval: ", "what is saffron"]
    joined = retriever(model, tmp_path).encode([pair])[0]
    np.testing.assert_allclose(joined, model.encode(["".join(pair)])[0], atol=1e-6)

    instructor_like = copy.deepcopy(model)
    instructor_like.set_pooling_include_prompt(False)
    r = retriever(instructor_like, tmp_path)
    got = r.encode([pair, ["Other instruction: ", "what is saffron"], "a plain string"])
    np.testing.assert_allclose(got[0], instructor_like.encode([pair[1]], prompt=pair[0])[0], atol=1e-6)
    assert not np.allclose(got[0], joined, atol=1e-3)
    assert "prompt=" in r.params()["pair_inputs"]


def test_self_hits_are_dropped_without_shortening_the_list(model, tmp_path):
    queries = {**QUERIES, "eiffel": Query("eiffel", "the Eiffel Tower in Paris", "")}
    run = retriever(model, tmp_path).search(make_benchmark(queries=queries), TEMPLATE, k=3)
    hits = run.df[run.df["qid"] == "eiffel"]
    assert "eiffel" not in hits["docid"].tolist() and len(hits) == 3
    assert run.meta["self_hits_dropped"] == 1


def test_run_metadata_names_model_template_and_cache(model, tmp_path):
    run = retriever(model, tmp_path).search(make_benchmark(), TEMPLATE, k=2)
    meta, params = run.meta, run.meta["retriever"]["params"]
    assert isinstance(run, Run) and meta["template"] == "instructir"
    assert meta["retriever"]["name"] == system_name("dense") and meta["retriever"]["family"] == "dense"
    assert params["similarity"] == "cosine" and params["fingerprint"] == model_fingerprint(model)
    assert params["modules"] == ["Transformer", "Pooling", "Normalize"] and params["precision"] == "float32"
    assert params["windowing"] is None and params["windowed"] == [] and params["window"] is None
    assert meta["embeddings"]["documents_encoded"] == len(DOCS)


def test_retrieve_writes_a_reusable_dense_run(model, tmp_path):
    r = retriever(model, tmp_path)
    first = retrieve(make_benchmark(), r, template=TEMPLATE, k=2, out_dir=tmp_path / "runs")
    again = retrieve(make_benchmark(), r, template=TEMPLATE, k=2, out_dir=tmp_path / "runs")
    assert again.meta.get("reused") is True
    assert again.df.equals(first.df)
    assert first.meta["search"]["embeddings"]["documents_encoded"] == len(DOCS)


def test_normalize_false_on_a_normalizing_model_is_refused(model, tmp_path):
    with pytest.raises(ValueError, match="Normalize"):
        retriever(model, tmp_path, normalize=False).search(make_benchmark(), TEMPLATE, k=1)


def test_normalize_true_on_a_model_without_normalize_scores_unit_vectors(model, tmp_path):
    # MiniLM without its Normalize module: raw vectors several units long. normalize=True with dot similarity scores
    # the cosine, which the full model (its own Normalize) scores with dot
    from sentence_transformers import SentenceTransformer

    bare = SentenceTransformer(modules=[model[0], model[1]], device="cpu")
    assert np.linalg.norm(bare.encode(["what is saffron"])[0]) > 1.5
    unit = retriever(bare, tmp_path / "unit", normalize=True, similarity="dot").search(make_benchmark(), TEMPLATE, k=3)
    full = retriever(model, tmp_path / "full", similarity="dot").search(make_benchmark(), TEMPLATE, k=3)
    assert unit.meta["retriever"]["params"]["normalize"] is True
    assert unit.df[["qid", "docid"]].values.tolist() == full.df[["qid", "docid"]].values.tolist()
    np.testing.assert_allclose(unit.df["score"], full.df["score"], atol=1e-5)


def test_an_instruction_is_joined_to_its_text_as_it_is_no_space_added(model, tmp_path):
    # INSTRUCTOR and sentence-transformers' prompt= concatenate: an instruction not ending in a space runs into
    # the text ("saffronthreads", one unknown word), which a space would have kept two words
    got = retriever(model, tmp_path).encode([["saffron", "threads"]])[0]
    np.testing.assert_allclose(got, model.encode(["saffronthreads"])[0], atol=1e-6)
    assert not np.allclose(got, model.encode(["saffron threads"])[0], atol=1e-3)


def test_searches_cut_in_other_windows_share_no_cached_vectors(model, tmp_path):
    text = " ".join(f"tower {i} stands in Paris" for i in range(15))  # 75 words: several windows of 32 tokens
    a = retriever(model, tmp_path, windowing="ifir", window=32, stride=24)
    b = retriever(model, tmp_path, windowing="ifir", window=32, stride=16)  # same cache folder, another stride
    first, second = a.embed_queries([text]), b.embed_queries([text])
    assert second.encoded == 1 and not np.allclose(first.matrix, second.matrix, atol=1e-4)
    corpus = Corpus.from_docs([Doc("long", text)])
    a.embed_corpus(corpus, TEMPLATE)
    assert b.embed_corpus(corpus, TEMPLATE).encoded == 1
    # "clean" keys its documents by [window, stride], the form of the caches written before the modes were named
    clean = retriever(model, tmp_path, windowing="clean", window=32, stride=24)
    assert clean.document_encoder(TEMPLATE)["windows"] == [32, 24]


def test_one_retriever_reuses_its_corpus_vectors_only_for_the_same_document_format(model, tmp_path):
    # the instructed and the query-only run of one benchmark share the corpus's vectors, held from the first;
    # a template formatting documents otherwise ("passage: " first) encodes them anew
    r = retriever(model, tmp_path)
    first = r.search(make_benchmark(), TEMPLATE, k=2)
    second = r.search(make_benchmark(queries={"q4": QUERIES["q4"]}), TEMPLATE, k=2)
    prefixed = r.search(make_benchmark(), get_template("ifir-promptriever"), k=2)
    assert first.meta["embeddings"]["documents_encoded"] == len(DOCS)
    assert second.meta["embeddings"]["documents_encoded"] == 0
    assert prefixed.meta["embeddings"]["documents_encoded"] == len(DOCS)


def test_a_corpus_edited_in_place_is_encoded_anew_by_the_same_retriever(model, tmp_path):
    r = retriever(model, tmp_path)
    before = r.embed_corpus(make_benchmark().corpus, TEMPLATE).matrix
    edited = [Doc("saffron", "Whales sing long songs across the cold ocean."), *DOCS[1:]]  # as many documents
    after = r.embed_corpus(Corpus.from_docs(edited), TEMPLATE).matrix
    assert not np.allclose(after[0], before[0], atol=1e-3)
    np.testing.assert_allclose(after[1:], before[1:], atol=1e-5)


def test_a_similarity_given_is_the_one_the_run_is_scored_by(model, tmp_path):
    cosine = retriever(model, tmp_path).search(make_benchmark(), TEMPLATE, k=3)
    euclidean = retriever(model, tmp_path, similarity="euclidean").search(make_benchmark(), TEMPLATE, k=3)
    assert euclidean.meta["retriever"]["params"]["similarity"] == "euclidean"
    # the model's vectors are unit vectors: -|q - d| = -sqrt(2 - 2 cos(q, d)), the same order
    assert euclidean.df[["qid", "docid"]].values.tolist() == cosine.df[["qid", "docid"]].values.tolist()
    np.testing.assert_allclose(euclidean.df["score"], -np.sqrt(2 - 2 * cosine.df["score"]), atol=1e-3)


def test_clean_windows_keep_a_documents_title(model, tmp_path):
    # a short document is one window: encoded as the whole document, its title included, as without windows
    items = [["Saffron", "A spice from the crocus flower."], ["", "A spice from the crocus flower."]]
    windowed = retriever(model, tmp_path, windowing="clean").encode_documents(TEMPLATE, "", items)
    whole = retriever(model, tmp_path).encode_documents(TEMPLATE, "", items)
    np.testing.assert_allclose(windowed, whole, atol=1e-5)
    assert not np.allclose(windowed[0], windowed[1], atol=1e-3)


def test_a_tokenizer_spec_is_fingerprinted_whatever_the_order_its_keys_are_written_in():
    from types import SimpleNamespace

    from instir.retrieval.dense import weights_fingerprint

    def tokenizer(written: str):
        return SimpleNamespace(backend_tokenizer=SimpleNamespace(to_str=lambda: written))

    state = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3)}
    one = '{"version": "1.0", "truncation": null, "model": {"vocab": {"a": 0, "b": 1}, "type": "WordPiece"}}'
    # the same spec written by another version of tokenizers: keys in another order, truncation state set
    other = ('{"model": {"type": "WordPiece", "vocab": {"b": 1, "a": 0}}, "truncation": {"max_length": 8}, '
             '"version": "1.0"}')
    more = '{"version": "1.0", "model": {"vocab": {"a": 0, "b": 1, "c": 2}, "type": "WordPiece"}}'
    assert weights_fingerprint("m", tokenizer(one), state) == weights_fingerprint("m", tokenizer(other), state)
    assert weights_fingerprint("m", tokenizer(one), state) != weights_fingerprint("m", tokenizer(more), state)
