"""The dequantised-GGUF disk cache: the first load saves the weights, later processes load them
instead of dequantising again, with the same outputs."""

import pytest
import torch

from instir.judge import dequantised


def _tiny_llama_from_gguf(monkeypatch):
    """Stand-ins for transformers' GGUF loading (its dequantising is transformers' own job): a
    call with ``gguf_file=`` returns a tiny random Llama and the bundled MiniLM's tokenizer;
    any other call loads as usual. Returns the stand-in model."""
    import transformers

    from instir.retrieval.dense import bundled_model_path

    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=30522, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1)).eval()
    for auto, made in ((transformers.AutoModelForCausalLM, lambda: model),
                       (transformers.AutoTokenizer, lambda: transformers.AutoTokenizer.from_pretrained(
                           bundled_model_path()))):
        real = auto.from_pretrained

        def from_pretrained(*args, _real=real, _made=made, **kwargs):
            return _made() if kwargs.pop("gguf_file", None) else _real(*args, **kwargs)

        monkeypatch.setattr(auto, "from_pretrained", from_pretrained)
    return model


@pytest.mark.local_llm  # builds and saves a (tiny) causal LM: ~3 s, out of the quick tier
def test_first_load_saves_a_copy_that_gives_the_same_logits(tmp_path, monkeypatch):
    monkeypatch.setenv("INSTIR_HOME", str(tmp_path / "home"))
    (tmp_path / "m.gguf").write_bytes(b"GGUF stand-in")
    dequantised_model = _tiny_llama_from_gguf(monkeypatch)
    tokenizer, model = dequantised.load(tmp_path, "m.gguf", torch.float32)  # cold: "dequantised", then saved
    assert model is dequantised_model
    folder = dequantised.cache_folder(tmp_path, "m.gguf", "float32")
    assert (folder / "model.safetensors").is_file()
    assert not list(folder.parent.glob(".*.tmp"))  # written under a temporary name, then renamed
    cached_tokenizer, cached_model = dequantised.load(tmp_path, "m.gguf", torch.float32)  # warm: the saved copy
    assert cached_model is not dequantised_model
    text = '{"score": 2, "reason": "fits the instruction"}'
    assert cached_tokenizer(text).input_ids == tokenizer(text).input_ids
    ids = torch.tensor([tokenizer(text).input_ids])
    with torch.inference_mode():
        assert torch.equal(cached_model(ids).logits, model(ids).logits)


@pytest.mark.local_llm  # builds and saves a (tiny) causal LM: ~3 s, out of the quick tier
@pytest.mark.parametrize("damage", ["zeroed weights", "no manifest"])
def test_a_damaged_copy_is_said_removed_and_dequantised_again_never_loaded(tmp_path, monkeypatch, damage):
    """On the commit before (a folder of its own, no manifest), zeroed weights of the same size loaded into the
    judge without a word: a judge of other weights, whose judgments would be reported as the model's."""
    from instir.verified_store import CacheWarning

    monkeypatch.setenv("INSTIR_HOME", str(tmp_path / "home"))
    (tmp_path / "m.gguf").write_bytes(b"GGUF stand-in")
    dequantised_model = _tiny_llama_from_gguf(monkeypatch)
    dequantised.load(tmp_path, "m.gguf", torch.float32)
    folder = dequantised.cache_folder(tmp_path, "m.gguf", "float32")
    if damage == "zeroed weights":
        weights = folder / "model.safetensors"
        weights.write_bytes(bytes(weights.stat().st_size))
    else:  # what the kit wrote before the store kept this cache
        (folder / "manifest.json").unlink()
    with pytest.warns(CacheWarning, match="dequantised model cache: .*removed, rebuilding it"):
        _, model = dequantised.load(tmp_path, "m.gguf", torch.float32)
    assert model is dequantised_model and (folder / "manifest.json").is_file()


def test_the_bundled_judge_loads_from_its_dequantised_copy(hf_judge, smollm2_gguf):
    """The session's SmolLM2 judge left (or found) its dequantised copy, complete."""
    folder = dequantised.cache_folder(smollm2_gguf.parent, smollm2_gguf.name, "float32")
    assert (folder / "model.safetensors").is_file() and (folder / "config.json").is_file()
    _, model = hf_judge._loaded()
    assert model.config.model_type == "llama" and model.dtype == torch.float32


def test_the_cache_key_changes_with_the_file_content(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for folder, content in ((a, b"GGUF one"), (b, b"GGUF two")):
        folder.mkdir()
        (folder / "m.gguf").write_bytes(content)
    assert dequantised.cache_folder(a, "m.gguf", "float32") != dequantised.cache_folder(b, "m.gguf", "float32")
    assert dequantised.cache_folder(a, "m.gguf", "float32") != dequantised.cache_folder(a, "m.gguf", "bfloat16")
