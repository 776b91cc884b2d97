"""Tiny random-initialised models built at test time (no downloads), for the tests and for
``perf/systems_overhead.py``: a T5 with a tokenizer that knows "▁true"/"▁false"
(monoT5), Llamas (P(true) with "true"/"false" in the vocabulary; an embedder base with a random
LoRA adapter saved with peft), and BERTs (monoBERT, ColBERT, mean-pooled encoders).
Vocabularies are word lists, so any text tokenises offline."""


from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

SPECIAL_T5 = ["<pad>", "</s>", "<unk>"]
SPECIAL_LLAMA = ["<unk>", "<s>", "</s>"]
SPECIAL_BERT = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[unused0]", "[unused1]"]


def words_of(texts: Iterable[str]) -> list[str]:
    """Distinct whitespace words of ``texts``, in first-seen order."""
    seen: dict[str, None] = {}
    for text in texts:
        for w in text.split():
            seen.setdefault(w, None)
    return list(seen)


def build_t5(folder: Path, texts: Iterable[str], *, model_max_length: int = 48, seed: int = 0) -> Path:
    """A 2-layer T5 (d_model 16) and a Metaspace word-level tokenizer ending inputs with </s>."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast, T5Config, T5ForConditionalGeneration

    vocab = {t: i for i, t in enumerate(SPECIAL_T5 + ["▁false", "▁true"])}
    for w in words_of(texts):
        vocab.setdefault("▁" + w, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>",
                                   model_max_length=model_max_length)
    torch.manual_seed(seed)
    config = T5Config(vocab_size=len(vocab), d_model=16, d_kv=4, d_ff=32, num_layers=2, num_heads=2,
                      decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    model = T5ForConditionalGeneration(config).eval()
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def build_llama(folder: Path, texts: Iterable[str], *, model_max_length: int = 2048, seed: int = 0) -> Path:
    """A 2-layer Llama (hidden 16) and a whitespace word-level tokenizer that adds <s> (BOS)
    and parses a literal "<s>" in the text as BOS, like Llama's."""
    import torch
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, processors
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {t: i for i, t in enumerate(SPECIAL_LLAMA + ["false", "true"])}
    for w in words_of(texts):
        for piece in re.findall(r"\w+|[^\w\s]", w):
            vocab.setdefault(piece, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens([AddedToken(t, special=True) for t in SPECIAL_LLAMA])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   model_max_length=model_max_length)
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                         bos_token_id=1, eos_token_id=2)
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


def build_bert_vocab(folder: Path, texts: Iterable[str], *, exclude: Iterable[str] = ()) -> Path:
    """A WordPiece vocab.txt (lower-cased words and punctuation, without the pieces in
    ``exclude``) and a BertTokenizerFast."""
    from transformers import BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    vocab = dict.fromkeys(SPECIAL_BERT)
    left_out = set(exclude)
    for w in words_of(texts):
        for piece in re.findall(r"\w+|[^\w\s]", w.lower()):
            if piece not in left_out:
                vocab.setdefault(piece, None)
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    # transformers 5 ignores vocab_file= when building a fast tokenizer (it keeps only the special tokens);
    # vocab= reads the file
    BertTokenizerFast(vocab=str(folder / "vocab.txt"), model_max_length=64).save_pretrained(folder)
    return folder


def build_bert_classifier(folder: Path, texts: Iterable[str], *, seed: int = 0) -> Path:
    """A 2-layer BERT (hidden 16) with a 2-label classification head (monoBERT's shape)."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    build_bert_vocab(folder, texts)
    size = len((folder / "vocab.txt").read_text(encoding="utf-8").split("\n")) - 1
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=size, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=128, num_labels=2)
    BertForSequenceClassification(config).eval().save_pretrained(folder)
    return folder

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


def build_tiny_mistral(root: Path, words, seed: int = 0) -> Path:
    """A MistralForCausalLM (hidden 32, 2 layers, GQA 4/2 heads, a sliding window of 4 tokens,
    shorter than the test texts so that a window left on shows) and its tokenizer (adds <s>, no
    pad token) saved in ``root``: the layout of GritLM-7B's repository, which ``AutoModel``
    loads as its MistralModel."""
    import torch
    from transformers import MistralConfig, MistralForCausalLM, PreTrainedTokenizerFast

    path = Path(root)
    tok, size = _word_tokenizer(words, {"<unk>": 0, "<s>": 1, "</s>": 2}, "<unk>", "<s> $A", [("<s>", 1)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   model_max_length=4096)
    torch.manual_seed(seed)
    config = MistralConfig(vocab_size=size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                           sliding_window=4, bos_token_id=1, eos_token_id=2)
    MistralForCausalLM(config).eval().save_pretrained(path)
    fast.save_pretrained(path)
    return path


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
    config = BertConfig(vocab_size=size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, max_position_embeddings=512)
    BertModel(config, add_pooling_layer=False).save_pretrained(path)
    fast.save_pretrained(path)
    return path


def build_colbert(folder: Path, texts: Iterable[str], *, dim: int = 8, seed: int = 0,
                  metadata: dict | None = None, missing_marks: str = "") -> Path:
    """A colbert-ai checkpoint in the layout of ``colbert-ir/colbertv2.0``: a 2-layer BERT
    (hidden 16) whose weights sit under ``bert.`` next to a bias-free ``linear.weight``
    (hidden → ``dim``) in ``model.safetensors``, ``architectures: ["HF_ColBERT"]``, an
    ``artifact.metadata`` with colbertv2.0's query settings (``metadata`` overrides), and a
    WordPiece vocab with ``[unused0]``/``[unused1]``/``[MASK]`` and every ASCII punctuation mark
    but ``missing_marks`` (those tokenise to ``[UNK]``)."""
    import json
    import string

    import torch
    from safetensors.torch import save_file
    from transformers import BertConfig, BertModel

    build_bert_vocab(folder, [*texts, " ".join(string.punctuation)], exclude=missing_marks)
    size = len((folder / "vocab.txt").read_text(encoding="utf-8").split("\n")) - 1
    torch.manual_seed(seed)
    config = BertConfig(vocab_size=size, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=512, architectures=["HF_ColBERT"])
    bert = BertModel(config).eval()
    state = {f"bert.{k}": v.contiguous() for k, v in bert.state_dict().items()}
    state["linear.weight"] = torch.randn(dim, config.hidden_size)
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(folder)
    settings = {"query_token_id": "[unused0]", "doc_token_id": "[unused1]", "query_token": "[Q]", "doc_token": "[D]",
                "dim": dim, "doc_maxlen": 180, "mask_punctuation": True, "query_maxlen": 32,
                "attend_to_mask_tokens": False, "interaction": "colbert", "similarity": "cosine",
                "checkpoint": "colbert-ir/colbertv2.0", **(metadata or {})}
    (folder / "artifact.metadata").write_text(json.dumps(settings, indent=4), encoding="utf-8")
    return folder
