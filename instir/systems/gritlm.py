"""GritLM embedder (IFIR's GritLM-7B row), following the ``gritlm`` package that IFIR calls.

IFIR ``src/utils/inst_llms.py`` ``GritLM`` builds ``gritlm.GritLM('GritLM/GritLM-7B',
pooling_method='mean', mode='embedding', torch_dtype=float16)`` and encodes queries with
``instruction='<|user|>\\nGive a query, retrieval relevant passages\\n<|embed|>\\n'`` and
documents with ``instruction='<|embed|>\\n'`` (``gritlm_instruction``), ``max_length=2048``.
What ``GritLM.encode`` (ContextualAI/gritlm ``gritlm/gritlm.py``) then does, and this module
does the same way:

- the text is ``instruction + sentence + embed_eos`` (``embed_eos`` empty by default),
  tokenised with special tokens (BOS), right padding, pad = EOS when the tokenizer has no
  pad token, truncated to ``max_length``;
- the forward pass of the base model (``AutoModel``; ``mode='embedding'``) is
  **bidirectional** when ``attn`` starts with ``bb`` (the default ``bbcc``): GritLM passes
  ``is_causal=False`` and its modeling file then builds a padding-only mask
  (``_prepare_4d_attention_mask``, no causal triangle, no sliding window);
- mean pooling (``GritLM.pooling``, ``'mean'``) over the attention mask with the
  instruction's tokens zeroed: ``attention_mask[:, :len(tokenizer(instruction)['input_ids'])] = 0``
  after the forward pass, so the instruction is attended to but not averaged (the BOS token
  counts as part of the instruction); the sum is taken in float32;
- L2 normalisation (``normalized=True``), vectors returned as float32.

The kit receives whole formatted texts (template ``ifir-gritlm``), so the instruction is
the text up to and including the first ``instruction_end`` marker (``<|embed|>\\n``, which
ends every GritLM instruction); text without the marker has no instruction, as
``encode(instruction='')``. The instruction length is counted per text (upstream counts it
once per call, for one instruction shared by the whole batch: the same for IFIR's inputs).

Two deliberate differences, neither of which changes IFIR's vectors: the model loads as the
stock transformers Mistral instead of the repository's ``modeling_gritlm7b.py`` (which does not
import under transformers 5); its forward pass honours the same ``is_causal=False`` (a
padding-only mask, hence transformers >= 5), with ``sliding_window`` switched off as GritLM's
non-causal mask has none; and a text with no token after its instruction pools to a zero
vector, where upstream divides by zero (NaN).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from instir.errors import UserError
from instir.retrieval.dense import default_device, weights_fingerprint
from instir.retrieval.embedding_cache import DEFAULT_CHUNK_SIZE
from instir.systems.cards import ATTN_MODES
from instir.systems.decoder import DecoderRetriever

if TYPE_CHECKING:
    import torch

    from instir.systems.cards import SystemCard

#: the marker that ends every GritLM instruction (IFIR ``gritlm_instruction``)
EMBED_MARKER = "<|embed|>\n"


def split_instruction(text: str, marker: str = EMBED_MARKER) -> tuple[str, str]:
    """``(instruction, sentence)``: the text up to and including the first ``marker``, and the
    rest (``("", text)`` without the marker)."""
    at = text.find(marker) if marker else -1
    if at < 0:
        return "", text
    end = at + len(marker)
    return text[:end], text[end:]


class GritLMRetriever(DecoderRetriever):
    """Dense retrieval with a GritLM embedder (see the module docstring); caching, corpus
    order and search are :class:`~instir.systems.decoder.DecoderRetriever`'s."""

    poolings = ("mean",)

    def __init__(self, model: str, *, revision: str = "", dtype: str = "float32", query_max_length: int = 512,
                 doc_max_length: int = 512, normalize: bool = True, similarity: str = "cosine", batch_size: int = 8,
                 attn: str = "bbcc", embed_eos: str = "", instruction_end: str = EMBED_MARKER,
                 device: str | None = None, cache_dir: str | Path | None = None,
                 chunk_size: int = DEFAULT_CHUNK_SIZE, progress: bool = True):
        if attn not in ATTN_MODES:
            raise ValueError(f"unknown GritLM attn {attn!r}; use one of {', '.join(ATTN_MODES)}")
        super().__init__(model, revision=revision, pooling="mean", dtype=dtype, query_max_length=query_max_length,
                         doc_max_length=doc_max_length, normalize=normalize, similarity=similarity,
                         batch_size=batch_size, padding_side="right", device=device, cache_dir=cache_dir,
                         chunk_size=chunk_size, progress=progress)
        self.attn, self.embed_eos, self.instruction_end = attn, embed_eos, instruction_end
        self.bidirectional = attn.startswith("bb")

    @classmethod
    def from_card(cls, card: SystemCard, *, device: str | None = None, cache_dir: str | Path | None = None,
                  progress: bool = True) -> GritLMRetriever:
        """The embedder a ``gritlm`` card describes (params: batch_size, attn, embed_eos,
        instruction_end; ``mode`` must be ``embedding``, the only mode IFIR used)."""
        p = card.params  # what the card may give is checked before (cards.READS)
        return cls(card.model, revision=card.revision, dtype=card.dtype or "float32",
                   query_max_length=card.query_max_length or 512, doc_max_length=card.doc_max_length or 512,
                   normalize=True if card.normalize is None else card.normalize,
                   similarity=card.similarity or "cosine", batch_size=int(p.get("batch_size", 8)),
                   attn=p.get("attn", "bbcc"), embed_eos=p.get("embed_eos", ""),
                   instruction_end=p.get("instruction_end", EMBED_MARKER), device=device, cache_dir=cache_dir,
                   progress=progress)

    # ------------------------------------------------------------ model

    def _load(self) -> None:
        import torch
        import transformers
        from transformers import AutoConfig, AutoModel, AutoTokenizer

        if self.bidirectional and int(transformers.__version__.split(".")[0]) < 5:
            raise UserError(f"the gritlm adapter needs transformers>=5 for bidirectional attention "
                            f"(is_causal=False); this is {transformers.__version__}: pip install 'transformers>=5'")
        revision = self.revision or None
        tokenizer = AutoTokenizer.from_pretrained(self.tokenizer_id, revision=revision, padding_side="right")
        if not tokenizer.pad_token and tokenizer.eos_token:
            tokenizer.pad_token = tokenizer.eos_token
        config = AutoConfig.from_pretrained(self.model_id, revision=revision)
        if self.bidirectional:  # GritLM's is_causal=False mask has no sliding window
            config.sliding_window = None
        model = AutoModel.from_pretrained(self.model_id, config=config, revision=revision,
                                          dtype=getattr(torch, self.dtype))
        model.eval().to(default_device(self.device))
        self._model, self._tokenizer = model, tokenizer
        settings = f"|attn={self.attn}|embed_eos={self.embed_eos!r}|pad={tokenizer.pad_token_id}"
        if self._fingerprint is None:  # else remembered under the model's files (DecoderRetriever.fingerprint)
            self._fingerprint = weights_fingerprint(f"{model!r}{settings}", tokenizer, model.state_dict())

    def fingerprint_options(self) -> dict:
        """The decoder's, and GritLM's attention and end-of-text settings (part of the fingerprint)."""
        return {**super().fingerprint_options(), "attn": self.attn, "embed_eos": self.embed_eos}

    @property
    def name(self) -> str:
        """Short retriever name for run files: ``gritlm-<model basename>``."""
        return "gritlm-" + self.model_id.rstrip("/").split("/")[-1]

    def encoder_description(self) -> dict:
        """Everything that changes the vectors (part of every cache key)."""
        return {**super().encoder_description(), "attn": self.attn, "embed_eos": self.embed_eos,
                "instruction_end": self.instruction_end}

    # ------------------------------------------------------------ encoding

    def _instruction_length(self, instruction: str, max_length: int, known: dict[str, int]) -> int:
        """Tokens of ``instruction`` alone, with special tokens (``GritLM.encode``); 0 without one."""
        if not instruction:
            return 0
        if instruction not in known:
            known[instruction] = len(self.tokenizer(instruction, padding=False, truncation=True, max_length=max_length,
                                                    add_special_tokens=True)["input_ids"])
        return known[instruction]

    def embed_batch(self, texts: list[str], max_length: int) -> torch.Tensor:
        """One batch as ``GritLM.encode`` embeds it: ``embed_eos`` appended, bidirectional attention where
        ``attn`` says, and the mean over each text's tokens after its instruction (up to ``instruction_end``);
        the batching, counting and normalising are :meth:`DecoderRetriever.encode`'s."""
        import torch

        texts = [text + self.embed_eos for text in texts]
        known: dict[str, int] = {}
        model, tok = self.model, self.tokenizer
        extra = {"is_causal": False} if self.bidirectional else {}
        batch = tok(texts, padding=True, truncation=True, max_length=max_length, add_special_tokens=True,
                    return_tensors="pt")
        ids, mask = batch["input_ids"].to(model.device), batch["attention_mask"].to(model.device)
        hidden = model(input_ids=ids, attention_mask=mask, **extra).last_hidden_state
        skip = torch.tensor([self._instruction_length(split_instruction(text, self.instruction_end)[0], max_length,
                                                      known) for text in texts], device=mask.device)
        keep = torch.arange(mask.shape[1], device=mask.device)[None, :] >= skip[:, None]
        weights = (mask * keep).unsqueeze(-1).to(torch.float32)
        return (hidden.to(torch.float32) * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)
