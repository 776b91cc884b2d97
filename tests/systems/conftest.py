"""Tiny models built at test time: a random-initialised Llama with a word-level tokenizer
(BOS added, ``</s>`` as EOS) and a random LoRA adapter saved with peft; a tiny BERT; and a
small IFIR-shaped benchmark whose words the tokenizer knows."""

import pytest

from instir.benchmarks.types import Benchmark, Corpus, Doc, Query

DOCS = [
    Doc("d1", "saffron threads colour paella and risotto golden", "Saffron"),
    Doc("d2", "farmers harvest crocus flowers by hand each autumn"),
    Doc("d3", "keep the wine cabinet away from the oven and sunlight and heat and direct light of the sun", "Wine"),
    Doc("d4", "a sommelier stores wine cool"),
    Doc("d5", "markets closed higher"),
    Doc("d6", "magma rises through the crust when volcanoes erupt and the ground shakes"),
]
QUERIES = {
    "q1": Query("q1", "what is saffron", "I cook paella", subset="fiqa"),
    "q2": Query("q2", "what is saffron", "I harvest crocus flowers by hand in autumn", subset="fiqa"),
    "q3": Query("q3", "wine cabinet", "where should it stand", subset="fiqa"),
    "q4": Query("q4", "wine cabinet", "", subset="fiqa"),
    "q5": Query("q5", "volcanoes", "why do they erupt and when does the ground shake", subset="fiqa"),
}


def _words() -> list[str]:
    from tokenizers.pre_tokenizers import Whitespace

    texts = [d.title + " " + d.text for d in DOCS] + [q.query + " " + q.instruction for q in QUERIES.values()]
    texts += ["query: passage: [SEP] Instruct: Query:"]
    ws = Whitespace()
    return sorted({w for t in texts for w, _ in ws.pre_tokenize_str(t)})


@pytest.fixture
def benchmark():
    """A five-query, six-document IFIR-shaped benchmark."""
    return Benchmark("ifir-toy/fiqa", "hand-made", "local", "instructed", Corpus.from_docs(DOCS), dict(QUERIES),
                     {"q1": {"d1": 1}, "q2": {"d2": 1}, "q3": {"d3": 1}, "q4": {"d3": 1}, "q5": {"d6": 1}})


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory):
    """``(base_dir, adapter_dir)``: a tiny random Llama (+ its tokenizer) and a random LoRA adapter
    (init_lora_weights=False, so merging changes the outputs) whose config names the base."""
    import torch
    from peft import LoraConfig, get_peft_model
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import AutoModel, LlamaConfig, LlamaModel, PreTrainedTokenizerFast

    root = tmp_path_factory.mktemp("tiny-llama")
    base_dir, adapter_dir = root / "base", root / "adapter"
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for word in _words():
        vocab.setdefault(word, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   padding_side="right")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256,
                         bos_token_id=1, eos_token_id=2, pad_token_id=2)
    LlamaModel(config).save_pretrained(base_dir)
    fast.save_pretrained(base_dir)
    base = AutoModel.from_pretrained(base_dir)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                      init_lora_weights=False)
    get_peft_model(base, lora).save_pretrained(adapter_dir)
    return base_dir, adapter_dir


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory):
    """A tiny random BERT (+ a word-level tokenizer with [CLS]/[SEP]/[PAD]) saved to a folder."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    path = tmp_path_factory.mktemp("tiny-bert")
    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}
    for word in _words():
        vocab.setdefault(word, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A [SEP]",
                                                       special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]",
                                   unk_token="[UNK]", model_max_length=512)
    torch.manual_seed(1)
    BertModel(BertConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=512), add_pooling_layer=False).save_pretrained(path)
    fast.save_pretrained(path)
    return path
