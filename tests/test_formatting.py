"""Every registered template against hand-written expected model inputs, user templates,
and the per-family defaults."""

import json

import pytest
from says import raises_saying

from instir import formatting
from instir.benchmarks.types import Doc, Query
from instir.errors import UsageError
from instir.formatting import default_template, family_of_model, get_template, list_templates, register_template

Q = Query("5001_2", " what is saffron ", "I am a chef planning a menu.", group="5001", level=2, subset="fiqa")
BARE = Query("5001", "what is saffron", "", group="5001", level=None, subset="pm")
DOC = Doc("9001_2", "Saffron is a spice.", title="Saffron")

E5_IFIR = "Instruct: Give a query, retrieval relevant passages\nQuery: "
GRIT = "<|user|>\nGive a query, retrieval relevant passages\n<|embed|>\n"
NV = "Instruct: Retrieve passages satisfying the query. \nQuery: "
E5_MTEB = "Instruct: Retrieve text based on user query.\nQuery: "
GRIT_MTEB = "<|user|>\nRetrieve text based on user query.\n<|embed|>\n"

# name: (query with instruction, bare query, document) -- written out by hand
EXPECTED = {
    "instructir": ("I am a chef planning a menu. [SEP] what is saffron", "what is saffron",
                   "Saffron Saffron is a spice."),
    "instructir-query-first": ("what is saffron [SEP] I am a chef planning a menu.", "what is saffron",
                               "Saffron Saffron is a spice."),
    "instructir-instructor": (["I am a chef planning a menu. ", " what is saffron"], ["", "what is saffron"],
                              ["Represent the document for retrieval:", "Saffron Saffron is a spice."]),
    "instructir-e5-mistral": (
        "Instruct: I am a chef planning a menu.\nQuery: what is saffron",
        "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery: what is saffron",
        "Saffron Saffron is a spice."),
    "instructir-repllama": ("I am a chef planning a menu. [SEP] what is saffron</s>", "what is saffron</s>",
                            "Saffron Saffron is a spice.</s>"),
    "ifir": ("what is saffron I am a chef planning a menu.", "what is saffron", "Saffron Saffron is a spice."),
    "ifir-instructor": (
        ["Represent the financial query for retrieve relevant paragraphs: ",
         "what is saffron I am a chef planning a menu."],
        ["Represent the biomedical query for retrieve relevant paragraphs: ", "what is saffron"],
        ["Represent the financial paragraph for retrieval: ", "Saffron Saffron is a spice."]),
    "ifir-e5-mistral": (E5_IFIR + "what is saffron I am a chef planning a menu.", E5_IFIR + "what is saffron",
                        E5_IFIR + "Saffron Saffron is a spice."),
    "ifir-gritlm": (GRIT + "what is saffron I am a chef planning a menu.", GRIT + "what is saffron",
                    "<|embed|>\nSaffron Saffron is a spice."),
    "ifir-promptriever": ("passage:  what is saffron I am a chef planning a menu.", "passage:  what is saffron",
                          "passage:  Saffron Saffron is a spice."),
    "ifir-nv-embed": (NV + "what is saffron I am a chef planning a menu.</s>", NV + "what is saffron</s>",
                      "Saffron Saffron is a spice.</s>"),
    "mteb": ("what is saffron I am a chef planning a menu.", "what is saffron", "Saffron Saffron is a spice."),
    "mteb-repllama": ("query:  what is saffron I am a chef planning a menu.", "query:  what is saffron",
                      "passage:  Saffron Saffron is a spice."),
    "mteb-e5-mistral": (E5_MTEB + "what is saffron I am a chef planning a menu.", E5_MTEB + "what is saffron",
                        "Saffron Saffron is a spice."),
    "mteb-gritlm": (GRIT_MTEB + "what is saffron I am a chef planning a menu.", GRIT_MTEB + "what is saffron",
                    GRIT_MTEB + "Saffron Saffron is a spice."),
    "query-only": ("what is saffron", "what is saffron", "Saffron Saffron is a spice."),
    "followir-e5": ("query: what is saffron I am a chef planning a menu.", "query: what is saffron",
                    "passage: Saffron Saffron is a spice."),
    "followir-bge": ("I am a chef planning a menu.: what is saffron", "what is saffron", "Saffron Saffron is a spice."),
    "followir-tart": ("what is saffron [SEP] I am a chef planning a menu.", "what is saffron",
                      "Saffron Saffron is a spice."),
    "followir-gritlm": ("<|user|>\nI am a chef planning a menu.\n<|embed|>\n what is saffron",
                        "<|embed|>\n what is saffron", "<|embed|>\n Saffron Saffron is a spice."),
}


@pytest.fixture
def registry(monkeypatch):
    """A private copy of the registry, so user templates do not leak between tests."""
    monkeypatch.setattr(formatting, "_REGISTRY", dict(formatting._REGISTRY))


def test_every_registered_template_has_a_hand_written_expectation():
    assert sorted(EXPECTED) == list_templates()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_template_renders_query_bare_query_and_doc_exactly(name):
    template = get_template(name)
    want_query, want_bare, want_doc = EXPECTED[name]
    assert template.format_query(Q) == want_query
    assert template.format_query(BARE) == want_bare
    assert template.format_doc(DOC, subset="fiqa") == want_doc


def test_empty_instruction_leaves_no_stray_separator():
    for name in list_templates():
        rendered = get_template(name).format_query(BARE)
        text = " ".join(rendered) if isinstance(rendered, list) else rendered
        assert "[SEP]" not in text and not text.endswith(" ") and "  query for" not in text, name


def test_describe_is_json_ready_and_names_every_format():
    described = get_template("ifir-instructor").describe()
    assert json.loads(json.dumps(described)) == described
    assert described["name"] == "ifir-instructor" and described["family"] == "instructor"
    assert described["query"][0] == "Represent the {domain} query for retrieve relevant paragraphs: "
    assert described["domains"]["aila"] == "legal"
    assert get_template("ifir").describe()["bare_query"] == "{query}"
    assert get_template("query-only").describe()["bare_query"] == "{query}"


def test_domain_template_rejects_a_subset_without_a_domain_word():
    with pytest.raises(ValueError, match="no domain word for subset 'robust04'"):
        get_template("ifir-instructor").format_query(Query("q", "x", "y", subset="robust04"))


def test_user_template_formats_level_and_subset(registry):
    mine = register_template("mine", "[{subset} L{level}] {instruction} :: {query}", doc="passage: {text}")
    assert mine.format_query(Q) == "[fiqa L2] I am a chef planning a menu. :: what is saffron"
    assert mine.format_query(BARE) == "[pm L]  :: what is saffron"  # no bare form given: same format, verbatim
    assert mine.format_doc(DOC) == "passage: Saffron Saffron is a spice."
    assert get_template("mine") is mine and mine.family == "custom"


@pytest.mark.parametrize("query", ["{query:>999999999}", "{query!r}", "{instruction} {query.__class__}", "{query"])
def test_a_template_fills_fields_with_text_as_it_is_no_format_spec_or_conversion(registry, query):
    # on the commit before, {query:>999999999} was accepted and built a gigabyte string per query
    with pytest.raises(ValueError, match="template 'bad', query: "):
        register_template("bad", query)


def test_a_rerankers_query_join_and_prompt_are_checked_as_templates_are():
    from instir.systems.rerankers import CrossEncoderReranker, MonoT5Reranker

    with pytest.raises(ValueError, match=r"query_format: field \{query\} takes no format spec"):
        CrossEncoderReranker("m", query_format="{query:>99999999} {instruction}")
    with pytest.raises(ValueError, match=r"MonoT5Reranker template: unknown field\(s\) \['document'\]"):
        MonoT5Reranker("m", template="Query: {query} Document: {document} Relevant:")


def test_user_template_with_bare_form_and_pairs(registry):
    pair = register_template("pair", ("{instruction}", "{query}"), bare_query=("Represent the query:", "{query}"))
    assert pair.format_query(Q) == ["I am a chef planning a menu.", "what is saffron"]
    assert pair.format_query(BARE) == ["Represent the query:", "what is saffron"]


def test_user_template_with_unknown_field_is_rejected(registry):
    with pytest.raises(ValueError, match=r"template 'bad', query: unknown field\(s\) \['title'\]"):
        register_template("bad", "{title} {query}")
    with pytest.raises(ValueError, match=r"template 'bad', doc: unknown field\(s\) \['query'\]"):
        register_template("bad", "{query}", doc="{query} {text}")
    with pytest.raises(ValueError, match="pair must have 2 parts"):
        register_template("bad", ("a", "b", "{query}"))
    assert "bad" not in list_templates()


def test_builtin_templates_cannot_be_replaced_but_user_ones_can(registry):
    with pytest.raises(ValueError, match="already exists"):
        register_template("instructir", "{query}", replace=True)
    register_template("mine", "{query}")
    with pytest.raises(ValueError, match="already exists"):
        register_template("mine", "{instruction}")
    assert register_template("mine", "{instruction}", replace=True).format_query(Q) == "I am a chef planning a menu."


def test_unknown_template_name_lists_the_known_ones():
    with pytest.raises(KeyError, match="known: followir-bge, followir-e5"):
        get_template("nope")


@pytest.mark.parametrize("family, benchmark, expected", [
    ("bm25", "instructir", "instructir"),
    ("bm25", "instructir-sample", "instructir"),
    ("dense", "instructir", "instructir"),
    ("instructor", "instructir", "instructir-instructor"),
    ("e5-mistral", "instructir", "instructir-e5-mistral"),
    ("repllama", "instructir", "instructir-repllama"),
    ("bm25", "ifir/fiqa", "ifir"),
    ("dense", "ifir-sample/nfcorpus", "ifir"),
    ("instructor", "ifir/pm", "ifir-instructor"),
    ("e5-mistral", "ifir/aila", "ifir-e5-mistral"),
    ("gritlm", "ifir/fire", "ifir-gritlm"),
    ("promptriever", "ifir/cds", "ifir-promptriever"),
    ("nv-embed", "ifir/scifact_open", "ifir-nv-embed"),
])
def test_default_template_per_family_and_benchmark(family, benchmark, expected):
    assert default_template(family, benchmark).name == expected


def test_default_template_for_query_first_setting():
    assert default_template("bm25", "instructir", "order-sensitivity").name == "instructir-query-first"
    assert default_template("bm25", "instructir", "prompt-sensitivity").name == "instructir"
    with raises_saying(ValueError, "instructor", "'order-sensitivity'"):
        default_template("instructor", "instructir", "order-sensitivity")


def test_default_template_refuses_combinations_the_authors_never_ran():
    with pytest.raises(ValueError, match="did not evaluate the repllama family"):
        default_template("repllama", "ifir/fiqa")
    with raises_saying(ValueError, "template", "'msmarco'"):
        default_template("bm25", "msmarco")
    with pytest.raises(ValueError, match="unknown model family"):
        default_template("colbert-v9", "instructir")


@pytest.mark.parametrize("model, family", [
    ("hkunlp/instructor-xl", "instructor"), ("intfloat/e5-mistral-7b-instruct", "e5-mistral"),
    ("GritLM/GritLM-7B", "gritlm"), ("samaya-ai/promptriever-llama2-7b-v1", "promptriever"),
    ("nvidia/NV-Embed-v2", "nv-embed"), ("castorini/repllama-v1-7b-lora-passage", "repllama"),
    ("sentence-transformers/all-MiniLM-L6-v2", "dense"), ("/models/gtr-t5-base", "dense"),
])
def test_family_of_model_from_model_id(model, family):
    assert family_of_model(model) == family


def test_an_instruction_of_only_whitespace_is_no_instruction_and_an_instructions_edges_are_trimmed():
    # a blank instruction takes each template's bare form (no stray "[SEP]" or prompt for nothing); an instruction
    # read with its line end or padding is rendered as its words: the same model input as the clean one
    blank = Query("5001", "what is saffron", " \t\n", group="5001", level=None, subset="pm")
    padded = Query("5001_2", " what is saffron ", "  I am a chef planning a menu.\n", group="5001", level=2,
                   subset="fiqa")
    for name in list_templates():
        assert get_template(name).format_query(blank) == EXPECTED[name][1], name
        assert get_template(name).format_query(padded) == EXPECTED[name][0], name


def test_a_one_text_taker_refuses_a_template_with_a_pair_in_any_query_format(registry):
    query_pair = register_template("query-pair", ("{instruction}", "{query}"), bare_query="{query}")
    bare_pair = register_template("bare-pair", "{instruction} {query}", bare_query=("Represent:", "{query}"))
    for template in (query_pair, bare_pair):
        with raises_saying(UsageError, f"template {template.name!r} makes [instruction, text] pairs", "BM25"):
            formatting.require_text(template, "BM25")
    doc_pair = register_template("doc-pair", "{query}", doc=("Represent:", "{text}"))
    formatting.require_text(doc_pair, "an embeddings API", documents=False)  # its queries are text: taken
    with raises_saying(UsageError, "template 'doc-pair' makes [instruction, text] pairs", "BM25"):
        formatting.require_text(doc_pair, "BM25")


def test_a_setting_named_with_a_benchmark_object_picks_that_settings_template(instructir_sample):
    assert instructir_sample.setting == "instructed"
    assert default_template("bm25", instructir_sample).name == "instructir"
    assert default_template("bm25", instructir_sample, "order-sensitivity").name == "instructir-query-first"
