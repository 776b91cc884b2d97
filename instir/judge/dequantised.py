"""A disk cache of dequantised GGUF judge models.

transformers dequantises a GGUF file every time it loads one, which takes many seconds. The first
load saves the dequantised weights, config and tokenizer as safetensors under
``<instir home>/models/<gguf stem>-<sha256[:16]>-transformers<version>-<dtype>/``; later processes
load that folder. The key holds the GGUF file's content hash, the transformers version (which
does the dequantising) and the dtype, so a changed file or library never reuses stale weights.
The folder is written under a temporary name and renamed when complete, so a crash never leaves
a half-written model that looks usable; deleting it is always safe.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from instir import atomic
from instir.home import instir_home

#: file whose presence marks a complete cache entry (written last)
_WEIGHTS = "model.safetensors"


def cache_folder(folder: str | Path, gguf_file: str, dtype_name: str) -> Path:
    """Where the dequantised copy of ``folder/gguf_file`` in ``dtype_name`` lives."""
    import transformers

    path = Path(folder) / gguf_file
    return (instir_home() / "models"
            / f"{path.stem}-{atomic.file_sha256(path)[:16]}-transformers{transformers.__version__}-{dtype_name}")


def load(folder: str | Path, gguf_file: str, dtype):
    """Tokenizer and model of a GGUF file, from the dequantised cache when it holds them,
    else dequantised from the file and saved to the cache for the next process."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype_name = str(dtype).removeprefix("torch.")
    cached = cache_folder(folder, gguf_file, dtype_name)
    if (cached / _WEIGHTS).is_file():
        return (AutoTokenizer.from_pretrained(cached),
                AutoModelForCausalLM.from_pretrained(cached, dtype=dtype))
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf_file, dtype=dtype)
    _save(cached, tokenizer, model)
    return tokenizer, model


def _save(target: Path, tokenizer, model) -> None:
    """Write config, tokenizer and weights into a temporary folder beside ``target``, then rename
    it; a GGUF-quantised model refuses ``save_pretrained``, so the weights go through safetensors."""
    import safetensors.torch

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"))
    try:
        model.config.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        safetensors.torch.save_model(model, str(tmp / _WEIGHTS))
        tmp.rename(target)
    except OSError:
        if not (target / _WEIGHTS).is_file():  # another process may have won the race: keep its copy
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
