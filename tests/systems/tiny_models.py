"""Tiny random-initialised models saved to a folder (used by the tests and by
``benchmarks/systems_overhead.py``): a Llama with a word-level tokenizer (BOS added,
``</s>`` = EOS) plus a random LoRA adapter, and a BERT with ``[CLS] … [SEP]``."""

from pathlib import Path


def _word_tokenizer(words, specials: dict[str, int], unk: str, template: str, template_specials):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = dict(specials)
    for word in words:
        vocab.setdefault(word, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token=unk))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.post_processor = processors.TemplateProcessing(single=template, special_tokens=template_specials)
    return tok, len(vocab)


def build_tiny_llama(root: Path, words, seed: int = 0) -> tuple[Path, Path]:
    """``(base_dir, adapter_dir)`` under ``root``: LlamaModel (hidden 32, 2 layers) with its
    tokenizer, and a LoRA adapter (r 4 on q/k/v/o, init_lora_weights=False) naming the base."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModel, LlamaConfig, LlamaModel, PreTrainedTokenizerFast

    base_dir, adapter_dir = Path(root) / "base", Path(root) / "adapter"
    tok, size = _word_tokenizer(words, {"<unk>": 0, "<s>": 1, "</s>": 2}, "<unk>", "<s> $A", [("<s>", 1)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   padding_side="right")
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256,
                         bos_token_id=1, eos_token_id=2, pad_token_id=2)
    LlamaModel(config).save_pretrained(base_dir)
    fast.save_pretrained(base_dir)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"],
                      init_lora_weights=False)
    get_peft_model(AutoModel.from_pretrained(base_dir), lora).save_pretrained(adapter_dir)
    return base_dir, adapter_dir


def build_tiny_bert(root: Path, words, seed: int = 1) -> Path:
    """A BertModel (hidden 32, 2 layers, no pooler) and its tokenizer saved in ``root``."""
    import torch
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    path = Path(root)
    tok, size = _word_tokenizer(words, {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3}, "[UNK]",
                                "[CLS] $A [SEP]", [("[CLS]", 2), ("[SEP]", 3)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, cls_token="[CLS]", sep_token="[SEP]", pad_token="[PAD]",
                                   unk_token="[UNK]", model_max_length=512)
    torch.manual_seed(seed)
    BertModel(BertConfig(vocab_size=size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, max_position_embeddings=512), add_pooling_layer=False).save_pretrained(path)
    fast.save_pretrained(path)
    return path
