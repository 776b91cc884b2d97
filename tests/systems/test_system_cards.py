"""Card files: loading built-in and user cards (TOML and YAML), one clear error per bad card,
and lookup by name, by a name without its paper suffix, and by model id."""

import json

import pytest
from says import raises_saying

from instir.benchmarks.types import FormatError
from instir.systems import get_card, load_cards

GOOD = '''
[[card]]
name = "my-minilm"
paper = "user"
kind = "retriever"
adapter = "sentence-transformers"
model = "sentence-transformers/all-MiniLM-L6-v2"
template = "ifir"
query_max_length = 128
doc_max_length = 128
'''

RERANKER = '[[card]]\nname = "my-monot5"\npaper = "user"\nkind = "reranker"\nadapter = "monot5"\nmodel = "m"\n'
API = '[[card]]\nname = "my-api"\npaper = "user"\nkind = "retriever"\nadapter = "openai-embeddings"\nmodel = "m"\n'


def _write(tmp_path, text, name="mine.toml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_builtin_cards_load_and_names_are_unique_case_insensitively():
    cards = load_cards()
    assert len({name.lower() for name in cards}) == len(cards)
    assert {c.paper for c in cards.values()} == {"instructir", "ifir", "followir", "mteb"}


def test_user_toml_card_is_added_to_the_builtins(tmp_path):
    cards = load_cards([_write(tmp_path, GOOD)])
    assert cards["my-minilm"].query_max_length == 128
    assert "Promptriever-7B" in cards


@pytest.mark.parametrize("name", ["mine.yaml", "mine.yml"])
def test_user_yaml_card_is_read_like_toml(tmp_path, name):
    yaml_text = ("card:\n  - name: yaml-bm25\n    paper: user\n    kind: retriever\n    adapter: bm25\n"
                 "    template: ifir\n    params: {k1: 1.5, b: 0.5}\n")
    card = load_cards([_write(tmp_path, yaml_text, name)])["yaml-bm25"]
    assert dict(card.params) == {"k1": 1.5, "b": 0.5}


@pytest.mark.parametrize("change,field,words", [
    (('adapter = "sentence-transformers"', 'adapter = "faiss-magic"'), "adapter", "unknown adapter"),
    (('paper = "user"\n', ""), "paper", "missing"),
    (("query_max_length = 128", 'query_max_length = "long"'), "query_max_length",
     "must be a whole number from 1 to 2,147,483,647, got 'long'"),
    (("doc_max_length = 128", "doc_max_length = 100000000000000000000"), "doc_max_length",
     "whole number from 1 to 2,147,483,647"),  # before, any positive integer: a tokenizer's failure, late
    (('template = "ifir"', 'template = "no-such-template"'), "template", "unknown template"),
    (('template = "ifir"', 'template = "ifir"\ncolour = "blue"'), "colour", "unknown field; known: adapter"),
    # a slip of the pen is answered with the name meant, as the other unknown names are
    (('template = "ifir"', 'template = "ifir"\nmodle = "m"'), "modle", "unknown field (did you mean 'model'?)"),
    (('kind = "retriever"', 'kind = "retreiver"'), "kind", "'retreiver' (did you mean 'retriever'?); use one of"),
    (('adapter = "sentence-transformers"', 'adapter = "sentence-transformer"'), "adapter",
     "(did you mean 'sentence-transformers'?); known: bm25"),
    (('kind = "retriever"', 'kind = "reranker"'), "kind", "builds a retriever"),
    (('template = "ifir"', 'template = "ifir"\nresources = { gpus = 1 }'), "resources", "keys among num_gpus"),
    (('template = "ifir"', 'template = "ifir"\nresources = { memory_gb = -2 }'), "resources", "non-negative"),
    (("query_max_length = 128", "query_max_length = true"), "query_max_length", "whole number from 1"),
    (('paper = "user"', 'paper = ""'), "paper", "missing"),
    (('paper = "user"', 'paper = "nosuch"'), "paper", "unknown value 'nosuch'"),
    (('template = "ifir"', 'template = "ifir"\ndtype = "float8"'), "dtype", "unknown value 'float8'"),
    (('template = "ifir"', 'template = "ifir"\nrequires = ["peft", 3]'), "requires", "a list of python import names"),
])
def test_a_bad_card_is_refused_with_file_card_and_field(tmp_path, change, field, words):
    path = _write(tmp_path, GOOD.replace(*change))
    with pytest.raises(FormatError) as err:
        load_cards([path])
    message = str(err.value)
    assert str(path) in message and "my-minilm" in message and f"'{field}'" in message and words in message


SECOND_TOML = GOOD + '''
[[card]]
name = "my-bm25"
paper = "user"
kind = "retriever"
adapter = "bm25"

[card.params]
b = 0.5
k1 = -1
'''
SECOND_YAML = ("card:\n  - name: my-bm25\n    paper: user\n    kind: retriever\n    adapter: bm25\n"
               "  - name: my-hybrid\n    paper: user\n    kind: retriever\n    adapter: hybrid\n"
               "    params: {lexical: my-bm25, dense: no-such-card}\n")


@pytest.mark.parametrize("name,text,line,where", [
    ("mine.toml", SECOND_TOML, 20, "card 'my-bm25', field 'params.k1'"),  # in a [card.params] table
    ("mine.toml", SECOND_TOML.replace('paper = "user"\nkind = "retriever"\nadapter = "bm25"', 'kind = "retriever"\n'
                                      'adapter = "bm25"'), 12, "card 'my-bm25', field 'paper'"),  # missing: its start
    ("mine.toml", GOOD.replace("query_max_length = 128", "query_max_length = 0"), 9, "field 'query_max_length'"),
    ("mine.toml", GOOD.replace("template", 'source = """\n[[card]]\nk1 = 0.9\n"""\ntemplate') + SECOND_TOML[
        len(GOOD):], 24, "card 'my-bm25', field 'params.k1'"),  # not the lines in the string
    ("mine.toml", SECOND_TOML.replace("[card.params]\nb = 0.5\nk1 = -1", "params.k1 = -1"), 18, "field 'params.k1'"),
    ("mine.yaml", SECOND_YAML, 10, "card 'my-hybrid', field 'params.dense'"),  # in an inline mapping
    ("mine.yaml", "tags:\n- local\n" + SECOND_YAML, 12, "card 'my-hybrid', field 'params.dense'"),
    ("mine.yaml", SECOND_YAML.replace("    paper: user\n    kind: retriever\n    adapter: hybrid", "    kind: "
                                      "retriever\n    adapter: hybrid"), 6, "card 'my-hybrid', field 'paper'"),
])
@pytest.mark.hostile
def test_a_bad_card_names_the_line_of_its_field(tmp_path, name, text, line, where):
    # on the commit before a6c318c, the file, the card and the field, but no line; at a6c318c a line found by
    # its text alone: one in a string, a list before the cards or a dotted key gave a wrong line
    path = _write(tmp_path, text, name)
    with pytest.raises(FormatError) as err:
        load_cards([path])
    assert str(err.value).startswith(f"{path}, line {line}, ") and where in str(err.value), str(err.value)


@pytest.mark.parametrize("params,field", [
    ('{ api_key_env = "sk-proj-AbCdEf0123456789AbCdEf0123456789" }', "params.api_key_env"),
    ('{ base_url = "https://me:sk-proj-AbCdEf0123456789AbCdEf0123456789@api.example/v1" }', "params.base_url"),
])
def test_a_card_holding_a_key_is_refused_when_its_file_loads_naming_file_card_and_field(tmp_path, params, field):
    path = _write(tmp_path, GOOD.replace('template = "ifir"', f'template = "ifir"\nparams = {params}'))
    with pytest.raises(FormatError) as err:
        load_cards([path])
    message = str(err.value)
    assert str(path) in message and "my-minilm" in message and f"'{field}'" in message
    assert "AbCdEf0123456789" not in message


@pytest.mark.parametrize("params", ["{ batch_size = 0 }", "{ batch_size = -3 }", '{ batch_size = "many" }',
                                    "{ max_length = 1e9 }", "{ depth = true }", "{ depth = 100000000000000000000 }"])
def test_a_count_param_that_is_no_whole_number_of_at_least_1_is_refused_at_load(tmp_path, params):
    # on the commit before, 0, -3 and 1e9 ran (a run under their own key), and "many" was a ValueError traceback
    path = _write(tmp_path, RERANKER + f"params = {params}\n")
    field = params.split()[1]
    with raises_saying(FormatError, str(path), "my-monot5", f"field 'params.{field}'", "whole number of at least 1"):
        load_cards([path])


@pytest.mark.parametrize("value", ["0", "65", "10000", '"many"'])
def test_a_concurrency_out_of_bounds_is_refused_at_load_and_by_the_clients(tmp_path, value):
    # on the commit before, 10000 was accepted: as many threads, each a request to a paid API, at once
    path = _write(tmp_path, API + f"params = {{ concurrency = {value} }}\n")
    with raises_saying(FormatError, str(path), "my-api", "field 'params.concurrency'", "from 1 to 64"):
        load_cards([path])
    from instir.errors import UsageError
    from instir.judge.chat import OpenAICompatibleJudge
    from instir.systems.openai_embeddings import OpenAIEmbeddingClient

    for make in (OpenAICompatibleJudge, OpenAIEmbeddingClient):
        with raises_saying(UsageError, "concurrency must be a whole number from 1 to 64"):
            make("m", "http://127.0.0.1:9", concurrency=10000)


@pytest.mark.parametrize(("adapter", "params", "field", "said"), [
    ("bm25", '{ k1 = "high" }', "k1", "a number from 0 to 100"),
    ("bm25", "{ k1 = nan }", "k1", "a number from 0 to 100"),
    ("bm25", "{ k1 = 1e308, b = 1e308 }", "k1", "a number from 0 to 100"),  # was a trusted run of no rows
    ("bm25", "{ b = -5.0 }", "b", "a number from 0 to 1"),
    ("bm25", "{ bb = 0.75 }", "bb",
     "the bm25 adapter reads no such param (did you mean 'b'?); it reads: k1, b, method, stemmer, stopwords"),
    ("bm25", '{ method = "nonsense" }', "method", "one of robertson, lucene, atire, bm25l, bm25+"),
    ("bm25", '{ stemmer = "klingon" }', "stemmer", "'none' or a PyStemmer algorithm"),
    ("bm25", '{ stopwords = "xx" }', "stopwords", "a bm25s language such as 'en'"),
    ("bm25", "{ stopwords = { a = 1 } }", "stopwords", "a bm25s language such as 'en'"),
    ("bm25", '{ stopwords = ["a", 1] }', "stopwords", "a list of words"),
    ("paper-bm25", "{ epsilon = 7 }", "epsilon", "a number from 0 to 1"),
    ("paper-bm25", '{ stemmer = "porter" }', "stemmer", "reads no such param; it reads: k1, b, epsilon"),
])
def test_a_bm25_param_it_cannot_run_is_refused_at_load_naming_file_card_and_field(tmp_path, adapter, params, field,
                                                                                    said):
    # on the commit before, each was a traceback when the system was built or ran, or a run of no rows (exit 0)
    text = f'[[card]]\nname = "b"\npaper = "ifir"\nkind = "retriever"\nadapter = "{adapter}"\nparams = {params}\n'
    with raises_saying(FormatError, "card 'b'", f"field 'params.{field}'", said):
        load_cards([_write(tmp_path, text)])


def test_bm25_params_in_range_load(tmp_path):
    text = ('[[card]]\nname = "b"\npaper = "user"\nkind = "retriever"\nadapter = "bm25"\nparams = { k1 = 0, b = 1, '
            'method = "bm25+", stemmer = "english", stopwords = "de" }\n')
    assert load_cards([_write(tmp_path, text)])["b"].params["stopwords"] == "de"


def test_a_duplicate_name_is_refused_naming_the_first_definition(tmp_path):
    path = _write(tmp_path, GOOD.replace("my-minilm", "promptriever-7b"))
    with raises_saying(FormatError, "duplicate name", "instir/systems/cards/ifir.toml"):
        load_cards([path])


HYBRID = '[[card]]\nname = "h"\npaper = "user"\nkind = "retriever"\nadapter = "hybrid"\n'


@pytest.mark.parametrize(("text", "where"), [
    (HYBRID + 'params = { dense = "No Such Model", lexical = "BM25 (IFIR)" }\n', "card 'h', field 'params.dense'"),
    (RERANKER + 'params = { first_stage = "No Such Model" }\n', "card 'my-monot5', field 'params.first_stage'"),
])
def test_a_card_naming_a_missing_card_is_refused(tmp_path, text, where):
    with raises_saying(FormatError, where, "names no card: 'No Such Model'"):
        load_cards([_write(tmp_path, text)])


def test_a_card_may_name_another_card_in_any_case(tmp_path):
    text = HYBRID + 'params = { dense = "bm25 (ifir)", lexical = "BM25 (ifir)" }\n'
    assert load_cards([_write(tmp_path, text)])["h"].params["dense"] == "bm25 (ifir)"


def test_get_card_by_name_suffixless_name_and_model_id():
    cards = load_cards()
    assert get_card("promptriever-7b", cards).name == "Promptriever-7B"
    assert get_card(" bm25 (ifir) ", cards).name == "BM25 (IFIR)"  # outer spaces aside
    assert get_card("ColBERT", cards).name == "ColBERT (IFIR, mean-pooled)"
    assert get_card("castorini/repllama-v1-7b-lora-passage", cards).name == "RepLLaMA-7B"
    with raises_saying(KeyError, "ambiguous", "BM25 (FollowIR), BM25 (IFIR), BM25 (InstructIR)"):
        get_card("BM25", cards)
    with pytest.raises(KeyError, match="unknown system"):
        get_card("ColBERT-XXL", cards)


def test_to_dict_is_plain_json():
    import json

    card = get_card("GTR-XL + BM25 (hybrid)")
    assert json.loads(json.dumps(card.to_dict()))["params"]["weights"] == [1.0, 0.3]


def test_a_missing_card_file_is_one_clear_error(tmp_path):
    with pytest.raises(FormatError, match="no such card file"):
        load_cards([tmp_path / "nope.toml"])


def _card(adapter, kind="retriever", fields="", params="{}"):
    return (f'[[card]]\nname = "mine"\npaper = "user"\nkind = "{kind}"\nadapter = "{adapter}"\n{fields}'
            f'params = {params}\n')


@pytest.mark.parametrize(("card", "field", "said"), [
    (_card("sentence-transformers", fields='model = "m"\n', params="{ batchsize = 2, window = 3 }"), "params.batchsize",
     "the sentence-transformers adapter reads no such param (did you mean 'batch_size'?); it reads: batch_size, "
     "trust_remote_code, padding_side"),
    (_card("hf-mean-pool", params='{ padding_side = "left" }'), "params.padding_side", "it reads: batch_size"),
    (_card("colbert-late", params="{ nbits = 2 }"), "params.nbits", "the colbert-late adapter reads no such param"),
    (_card("hybrid", params='{ dense = "BM25 (IFIR)", lexical = "BM25 (IFIR)", k = 60 }'), "params.k",
     "it reads: dense, lexical, weights, rrf_k"),
    (_card("openai-embeddings", params='{ batch = 8 }'), "params.batch", "did you mean 'batch_size'?"),
    (_card("monot5", "reranker", params='{ truncation = "only_second" }'), "params.truncation", "reads no such param"),
    (_card("cross-encoder", "reranker", params='{ prompt = "x" }'), "params.prompt", "reads no such param"),
    (_card("llm-ptrue", "reranker", params='{ temperature = 0 }'), "params.temperature", "reads no such param"),
    (_card("peft-decoder", fields='windowing = "ifir"\n'), "windowing", "the peft-decoder adapter reads no windowing"),
    (_card("colbert-late", fields='dtype = "float16"\n'), "dtype", "the colbert-late adapter reads no dtype"),
    (_card("openai-embeddings", fields="normalize = true\n"), "normalize", "reads no normalize"),
    (_card("llm-ptrue", "reranker", fields="doc_max_length = 512\n"), "doc_max_length", "reads no doc_max_length"),
    (_card("bm25", fields='model = "m"\n'), "model", "the bm25 adapter reads no model; it reads: template"),
    (_card("sentence-transformers", fields='model = "m"\nbase_model = "b"\n'), "base_model",
     "the sentence-transformers adapter reads no base_model (did you mean 'model'?); it reads: model, "),
    (_card("hybrid", fields='pooling = "cls"\n'), "pooling", "the hybrid adapter reads no pooling"),
])
def test_a_param_or_field_its_adapter_does_not_read_is_refused_at_load_naming_file_line_and_field(tmp_path, card,
                                                                                                  field, said):
    # on the commit before, each loaded, ran (exit 0) without it, and the run's sidecar recorded it as applied
    path = _write(tmp_path, card)
    line = next(i for i, text in enumerate(card.splitlines(), 1) if text.startswith(field.split(".")[0]))
    with raises_saying(FormatError, f"{path}, line {line}, card 'mine', field '{field}'", said):
        load_cards([path])


@pytest.mark.parametrize(("card", "field", "said"), [
    (_card("hybrid", params='{ dense = "BM25 (IFIR)", lexical = "BM25 (IFIR)", weights = [1.0] }'), "params.weights",
     "must be two non-negative numbers (dense, lexical), not both 0, got [1.0]"),
    (_card("hybrid", params='{ dense = "BM25 (IFIR)", lexical = "BM25 (IFIR)", weights = ["a", "b"] }'),
     "params.weights", "two non-negative numbers"),
    (_card("hybrid", params='{ dense = "BM25 (IFIR)", lexical = "BM25 (IFIR)", weights = [0, 0] }'), "params.weights",
     "not both 0"),
    (_card("hybrid", params='{ dense = "BM25 (IFIR)", lexical = "BM25 (IFIR)", weights = [-1, 2] }'), "params.weights",
     "non-negative"),
    (_card("hybrid", params='{ dense = "BM25 (IFIR)", lexical = "BM25 (IFIR)", weights = [inf, 1] }'), "params.weights",
     "two non-negative numbers"),
    (_card("hybrid", params='{ dense = 3, lexical = "BM25 (IFIR)" }'), "params.dense", "must be a string, got 3"),
    # a hybrid without one of its two cards: a KeyError when built
    (_card("hybrid", params='{ dense = "BM25 (IFIR)" }'), "params.lexical", "the hybrid adapter cannot run without it"),
    (_card("hf-mean-pool", fields='pooling = "cls"\n'), "pooling", "the hf-mean-pool adapter takes 'mean', got 'cls'"),
    (_card("peft-decoder", fields='pooling = "mean"\n'), "pooling", "takes 'batch-last' or 'last-token' or 'eos'"),
    (_card("sentence-transformers", fields='pooling = "eos"\n'), "pooling", "takes 'mean' or 'cls' or 'last-token'"),
    (_card("openai-embeddings", fields='windowing = "clean"\n'), "windowing", "takes 'ifir', got 'clean'"),
    (_card("gritlm", params='{ attn = "xx" }'), "params.attn", "one of bbcc, cccc, bb, cc"),
    (_card("gritlm", params='{ mode = "generative" }'), "params.mode", "'embedding' (the one way the adapter runs)"),
    (_card("sentence-transformers", params='{ trust_remote_code = "yes" }'), "params.trust_remote_code",
     "must be true or false"),
    (_card("peft-decoder", params='{ padding_side = "up" }'), "params.padding_side", "one of left, right"),
    (_card("peft-decoder", params='{ doc_order = "random" }'), "params.doc_order", "'length-desc' or empty"),
    (_card("llm-ptrue", "reranker", params='{ true_token = "yes" }'), "params.true_token", "'true' (the one way"),
    (_card("openai-embeddings", params='{ query_params = { v = 1 } }'), "params.query_params", "a table of strings"),
    (_card("bm25", params='{ b = 1.5 }'), "params.b", "must be a number from 0 to 1, got 1.5"),
    # a card of any adapter, even one the kit cannot run, holds a variable's name, never a key
    (_card("unavailable", params='{ reason = "no client", api_key_env = "sk-abcdefghijklmnopqrstuvwxyz123456" }'),
     "params.api_key_env", "environment variable"),
])
def test_a_param_or_field_value_its_adapter_cannot_take_is_refused_at_load(tmp_path, card, field, said):
    # on the commit before, a hybrid's odd weights ran both halves, then failed in a traceback; the others ran anyway
    with raises_saying(FormatError, "card 'mine'", f"field '{field}'", said):
        load_cards([_write(tmp_path, card)])


def test_every_builtin_card_gives_only_what_its_adapter_reads():
    from instir.systems.cards import reads_problem

    assert {card.name: reads_problem(card.to_dict()) for card in load_cards().values()} == {
        name: None for name in load_cards()}


def test_what_each_adapter_reads_loads(tmp_path):
    text = (_card("hybrid", params='{ dense = "BM25 (IFIR)", lexical = "BM25 (IFIR)", weights = [0.3, 0], rrf_k = 60 }')
            + _card("peft-decoder", fields='pooling = "eos"\nbase_model = "b"\n',
                    params='{ doc_order = "", padding_side = "left", tokenizer = "t" }').replace('"mine"', '"d"')
            + _card("unavailable", fields='pooling = "cls"\n', params='{ reason = "no client", anything = 1 }')
            .replace('"mine"', '"u"'))
    cards = load_cards([_write(tmp_path, text)])
    assert cards["mine"].params["weights"] == [0.3, 0] and cards["d"].pooling == "eos" and cards["u"].pooling == "cls"


def test_an_ambiguous_name_says_the_paper_option_that_resolves_it():
    # on the commit before, `instir systems E5-mistral-7b-inst` listed the three cards without saying that the name,
    # as a paper prints it, finds that paper's card with --paper (paper= in Python)
    cards = load_cards()
    with raises_saying(KeyError, "ambiguous", "E5-mistral-7B,", "--paper PAPER", "paper=PAPER",
                       "followir, ifir, instructir"):
        get_card("E5-mistral-7b-inst", cards)
    assert get_card("E5-mistral-7b-inst", cards, paper="ifir").name == "E5-mistral-7B"


NAMELESS = '[[card]]\npaper = "user"\nkind = "retriever"\nadapter = "bm25"\n'


@pytest.mark.parametrize(("name", "text", "said"), [
    ("mine.toml", '[[card]]\nname = "x"\nname = "y"\n',
     "mine.toml: not valid TOML: Cannot overwrite a value (at line 3"),
    ("mine.toml", GOOD + NAMELESS, "mine.toml, line 11, card #2, field 'name': missing"),
    ("mine.yaml", "base: &b {paper: user}\ncard:\n  - name: x\n    <<: *b\n",
     "mine.yaml, line 4: YAML aliases are not"),
    # before, PyYAML's message of four lines: "not valid YAML: while parsing a flow sequence\n  in …"
    ("mine.yaml", "card:\n  - name: x\n    paper: [user\n", "mine.yaml, line 4: not valid YAML (expected ','"),
    ("mine.yaml", "card:\n  - {name: x, paper: user, kind: retriever, adapter: bm25}\n  - just a string\n",
     "mine.yaml, card #2: each card must be a table (mapping)"),
])
def test_a_card_file_that_does_not_parse_or_holds_a_nameless_card_is_one_line_naming_file_and_where(tmp_path, name,
                                                                                                    text, said):
    path = _write(tmp_path, text, name)
    with pytest.raises(FormatError) as err:
        load_cards([path])
    assert str(err.value).startswith(str(tmp_path)) and said in str(err.value) and "\n" not in str(err.value)


def test_a_card_file_of_thousands_of_cards_is_checked_in_time_linear_in_their_number(tmp_path):
    # on main: every card's references were checked against a set of all names made again for each card: a card file
    # of 13,500 cards (1 MB, under the 1 MiB a card file may hold) took 37 s to load; here str.lower is counted
    import sys

    path = tmp_path / "many.toml"
    n = 1500
    path.write_text("".join(f'[[card]]\nname = "c{i}"\npaper = "user"\nkind = "retriever"\nadapter = "bm25"\n'
                            for i in range(n)))
    lowered = [0]

    def count(frame, event, arg):
        if event == "c_call" and getattr(arg, "__name__", "") == "lower":
            lowered[0] += 1

    sys.setprofile(count)
    try:
        cards = load_cards([path])
    finally:
        sys.setprofile(None)
    assert f"c{n - 1}" in cards and lowered[0] < 20 * n  # on main: over n * n


@pytest.mark.parametrize("mark", ["\x1b]0;owned\x07", "\u202e", "\n", "\u200b"])
def test_a_card_whose_name_a_terminal_would_act_on_is_refused_naming_file_card_and_field(tmp_path, mark):
    # on the commit before, "my<RLO>BM25" loaded: its runs, tables and pages showed the system's name reordered
    path = tmp_path / "cards.toml"
    path.write_text(f'[[card]]\nname = {json.dumps(f"my{mark}BM25")}\npaper = "user"\nkind = "retriever"\n'
                    'adapter = "bm25"\n')
    with raises_saying(FormatError, f"{path}, line 2", "field 'name'", "holds a control character, a line break or "
                                                                       "an invisible mark"):
        load_cards([path])


def test_a_card_given_as_a_mapping_whose_name_a_terminal_would_act_on_is_named_by_its_name_escaped():
    from instir.systems.cards import card_from_mapping

    card = {"name": "my\u202eBM25", "paper": "user", "kind": "retriever", "adapter": "bm25"}
    with raises_saying(FormatError, "cards.yaml, card 'my\\u202eBM25', field 'name'", "holds a control character"):
        card_from_mapping(card, "cards.yaml", 0)
