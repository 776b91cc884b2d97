"""A disk cache of dequantised GGUF judge models, kept in the kit's verified store.

transformers dequantises a GGUF file every time it loads one, which takes many seconds. The first
load saves the dequantised weights, config and tokenizer as safetensors in the entry
``<instir home>/models/<gguf stem, 48 characters at most>-<sha256[:16]>-transformers<version>-<dtype>/`` of a
:class:`~instir.verified_store.VerifiedStore`; later processes load that entry. The key holds the GGUF
file's content hash, the transformers version (which does the dequantising) and the dtype, so a changed
file or library never reuses stale weights. The store's rules hold: an entry is published whole or not at
all, every load checks it against its manifest (sizes, and SHA-256 up to the store's budget), and a damaged
one (a truncated or zeroed weights file, a config that no longer loads) is said, removed and dequantised
again, never loaded into a judge. Deleting it is always safe.
"""

from __future__ import annotations

from pathlib import Path

from instir import atomic
from instir.home import instir_home
from instir.stamps import json_sha256
from instir.verified_store import Entry, VerifiedStore

#: The weights file every entry holds.
_WEIGHTS = "model.safetensors"


def _entry(folder: str | Path, gguf_file: str, dtype_name: str) -> tuple[VerifiedStore, str, dict]:
    """The store, the entry's name and what keys it (the GGUF's content, the dequantising library, the dtype)."""
    import transformers

    path = Path(folder) / gguf_file
    identity = {"gguf": path.name, "gguf_sha256": atomic.file_sha256(path),
                "transformers": transformers.__version__, "dtype": dtype_name}
    name = f"{path.stem[:48]}-{identity['gguf_sha256'][:16]}-transformers{transformers.__version__}-{dtype_name}"
    return VerifiedStore(instir_home() / "models", "dequantised model cache"), name, identity


def cache_folder(folder: str | Path, gguf_file: str, dtype_name: str) -> Path:
    """Where the dequantised copy of ``folder/gguf_file`` in ``dtype_name`` lives."""
    store, name, _ = _entry(folder, gguf_file, dtype_name)
    return store.entry_dir(name)


def load(folder: str | Path, gguf_file: str, dtype):
    """Tokenizer and model of a GGUF file, from the verified dequantised copy when there is one,
    else dequantised from the file and stored for the next process."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    store, name, identity = _entry(folder, gguf_file, str(dtype).removeprefix("torch."))

    def from_entry(entry: Entry):
        return AutoTokenizer.from_pretrained(entry.path), AutoModelForCausalLM.from_pretrained(entry.path, dtype=dtype)

    found = store.read(name, json_sha256(identity), from_entry, required=(_WEIGHTS, "config.json"))
    if found is not None:
        return found
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=gguf_file)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf_file, dtype=dtype)
    store.put(name, json_sha256(identity), lambda tmp: _save(tmp, tokenizer, model), description=identity)
    return tokenizer, model


def _save(folder: Path, tokenizer, model) -> None:
    """Config, tokenizer and weights into ``folder``; a GGUF-quantised model refuses ``save_pretrained``,
    so the weights go through safetensors."""
    import safetensors.torch

    model.config.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    safetensors.torch.save_model(model, str(folder / _WEIGHTS))
