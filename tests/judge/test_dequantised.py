"""The dequantised-GGUF disk cache: the first load saves the weights, later processes load them
instead of dequantising again, with the same outputs."""

import pytest
import torch

from instir.judge import dequantised

pytestmark = pytest.mark.local_llm


def test_first_load_saves_a_copy_that_gives_the_same_logits(hf_judge, smollm2_gguf):
    tokenizer, model = hf_judge._loaded()  # dequantised from the GGUF file by the session fixture
    folder = dequantised.cache_folder(smollm2_gguf.parent, smollm2_gguf.name, "float32")
    assert (folder / "model.safetensors").is_file()
    assert not list(folder.parent.glob(".*.tmp"))  # written under a temporary name, then renamed
    cached_tokenizer, cached_model = dequantised.load(smollm2_gguf.parent, smollm2_gguf.name, torch.float32)
    text = '{"score": 2, "reason": "fits the instruction"}'
    assert cached_tokenizer(text).input_ids == tokenizer(text).input_ids
    ids = torch.tensor([tokenizer(text).input_ids])
    with torch.inference_mode():
        assert torch.equal(cached_model(ids).logits, model(ids).logits)


def test_the_cache_key_changes_with_the_file_content(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for folder, content in ((a, b"GGUF one"), (b, b"GGUF two")):
        folder.mkdir()
        (folder / "m.gguf").write_bytes(content)
    assert dequantised.cache_folder(a, "m.gguf", "float32") != dequantised.cache_folder(b, "m.gguf", "float32")
    assert dequantised.cache_folder(a, "m.gguf", "float32") != dequantised.cache_folder(a, "m.gguf", "bfloat16")
