"""Rerankers as the InstructIR authors ran them (kaistAI/InstructIR ``eval/src/rerankers.py``),
on transformers directly: monoT5 (true/false logits of the first decoder step), causal LMs
scored by P(true) (Llama-2-7b(-chat), Mistral-7B-Instruct-v0.2, FollowIR-7B) and monoBERT
cross-encoders. Each follows :class:`instir.retrieval.rerank.Reranker`. The FollowIR authors'
classes (orionw/FollowIR ``models/rerankers/reranker_models.py``, also MTEB's
``rerankers_monot5_based.py``) are the same code with another query join (``"{query}
{instruction}"``, a card's ``query_format``), FLAN-T5's prompt and yes/no tokens (a monoT5
card's ``prompt`` and tokens) and GritLM's P(true) prompt.

Why not the ``rerankers`` package: its T5 ranker builds its own prompt and has no
query + instruction join nor the authors' P(true) LLM prompts, so the authors' strings would
have to be passed through anyway; the few transformers calls below reproduce
``rerankers.py`` line by line and keep the dependency list short.

Models load lazily, on the first :meth:`score` call or the first description of their weights (the
``fingerprint`` of an identity, remembered under their files), so a fully cached rerun loads nothing.
``calls`` counts model forward passes (batches) and ``scored`` the inputs they held.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from instir.errors import unknown
from instir.formatting import check_format
from instir.home import instir_home
from instir.retrieval.dense import default_device, weights_fingerprint
from instir.retrieval.model_files import check_model, model_folder, remembered
from instir.systems.cards import DTYPES

_SRC = "kaistAI/InstructIR eval/src/rerankers.py"

#: The authors' label tokens per monoT5 checkpoint (``prediction_tokens``, from pygaggle);
#: any other checkpoint falls back to castorini/monot5-base-msmarco's (``get_prediction_tokens``).
MONOT5_PREDICTION_TOKENS: Mapping[str, tuple[str, str]] = {
    **{f"castorini/{m}": ("▁false", "▁true") for m in (
        "monot5-small-msmarco-10k", "monot5-small-msmarco-100k", "monot5-base-msmarco", "monot5-base-msmarco-10k",
        "monot5-large-msmarco", "monot5-large-msmarco-10k", "monot5-base-med-msmarco", "monot5-3b-med-msmarco",
        "monot5-3b-msmarco-10k", "monot5-3b-msmarco")},
    **{f"unicamp-dl/{m}": ("▁no", "▁yes") for m in ("mt5-base-en-msmarco", "mt5-base-mmarco-v2", "mt5-base-mmarco-v1")},
}
MONOT5_TEMPLATE = "Query: {query} Document: {text} Relevant:"

#: The name of FollowIR-7B's prompt (and what a model name holds when the authors gave it that prompt).
FOLLOWIR_PROMPT = "followir"
#: The authors' P(true) prompts (``LlamaReranker``, ``MistralReranker``, ``FollowIRReranker``,
#: ``GritLMReranker``), copied verbatim; ``{query}`` is the query joined with its instruction by
#: ``query_instruct_template`` (:data:`LLM_QUERY_FORMAT`, or a card's ``query_format``).
LLM_TEMPLATES: Mapping[str, str] = {
    "llama": ("Determine if the following document is relevant to the query (true/false).\n\n"
              "Query: {query}\nDocument: {text}\nRelevant: "),
    "llama-chat": ("<s>[INST] <<SYS>>\nYou are an expert at finding information. Determine if the following "
                   "document is relevant to the query (true/false).\n<</SYS>>Query: {query}\nDocument: {text}\n"
                   "Relevant: [/INST]"),
    "mistral": ("<s>[INST] You are an expert Google searcher, whose job is to determine if the following document "
                "is relevant to the query (true/false).\nQuery: {query}\nDocument: {text}\n"
                "Relevant (either \"true\" or \"false\"): [/INST]"),
    FOLLOWIR_PROMPT: ("<s> [INST] You are an expert Google searcher, whose job is to determine if the following "
                 "document is relevant to the query (true/false). Answer using only one word, one of those two "
                 "choices.\n\nQuery: {query}\nDocument: {text}\nRelevant (only output one word, either \"true\" or "
                 "\"false\"): [/INST] "),
    "gritlm": ("<|user|>\nRank the passage based on its relevance to the search query (true/false) {query}.\n\n"
               "{text}\n\nSearch Query: {query}.\n\nDetermine the passage's relevance to the search query."
               "Only respond with true or false, do not say any other word or explain.\n<|assistant|>\n"),
}
LLM_TEMPLATE_SOURCES: Mapping[str, str] = {
    "llama": f"{_SRC} LlamaReranker.__init__ (model name without 'chat')",
    "llama-chat": f"{_SRC} LlamaReranker.__init__ (LLAMA_CHAT_TEMPLATE, model name with 'chat')",
    "mistral": f"{_SRC} MistralReranker.__init__",
    FOLLOWIR_PROMPT: f"{_SRC} FollowIRReranker.__init__",
    "gritlm": "orionw/FollowIR models/rerankers/reranker_models.py GritLMReranker.__init__",
}
#: dtypes the authors forced (``MistralReranker``/``FollowIRReranker`` set fp_options="float16";
#: ``Reranker.__init__`` defaults to float32; GritLM loads with torch_dtype="auto", its bfloat16).
LLM_AUTHOR_DTYPES: Mapping[str, str] = {"llama": "float32", "llama-chat": "float32", "mistral": "float16",
                                        FOLLOWIR_PROMPT: "float16", "gritlm": "bfloat16"}
#: InstructIR's ``query_instruct_template`` (``LlamaReranker``): ``"{query}? {instruction}"``, stripped.
LLM_QUERY_FORMAT = "{query}? {instruction}"


def authors_llm_prompt(model: str) -> str:
    """The prompt the authors' ``MODEL_DICT`` gives ``model``: FollowIR → followir, GritLM →
    gritlm, Mistral → mistral, a name containing 'chat' → llama-chat, else llama."""
    lowered = model.lower()
    if FOLLOWIR_PROMPT in lowered:
        return FOLLOWIR_PROMPT
    if "gritlm" in lowered:
        return "gritlm"
    if "mistral" in lowered:
        return "mistral"
    return "llama-chat" if "chat" in model else "llama"


def _card_params(card: Any) -> dict:
    return dict(getattr(card, "params", None) or {})


class _HFReranker:
    """Shared lazy loading, dtype, device, query join and call counting of the transformers rerankers.

    ``query_format`` joins a query and its instruction (filled, then stripped): the class's
    own unless given (a card's ``params.query_format``)."""

    kind = ""
    query_format = "{query} {instruction}"
    #: The model a reranker of this kind loads when none is named.
    default_model = ""
    #: The transformers class the model loads with.
    auto_class = ""

    def __init__(self, model: str | None = None, *, name: str | None = None, revision: str | None = None,
                 dtype: str = "float32", batch_size: int = 64, max_length: int | None = None,
                 device: str | None = None, query_format: str | None = None):
        if dtype not in DTYPES:
            raise unknown("dtype", dtype, DTYPES)
        if query_format:
            check_format(query_format, ("query", "instruction"), f"{type(self).__name__} query_format")
            self.query_format = query_format
        self.model_name = str(model or self.default_model)
        self.name = name or f"{self.kind}-{Path(self.model_name).name}"
        self.revision = revision
        self.dtype = dtype
        self.batch_size = batch_size
        self.max_length = max_length
        self.device = device
        self.calls = 0
        self.scored = 0
        self._model = None
        self._tokenizer = None
        self._fingerprint: str | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model_name!r}, dtype={self.dtype!r})"

    def _torch_dtype(self):
        import torch

        return getattr(torch, self.dtype)

    def _base_identity(self) -> dict:
        weights = self.fingerprint()
        # a Hub id not on disk keeps the identity it always had (no content): loading it only to name it would cost
        # every warm rerun the model (a 7B one on a GPU), and its cached scores would all be made again once
        described = {"fingerprint": weights} if weights else {"local_files_sha256": None}
        return {"kind": self.kind, "model": self.model_name, "revision": self.revision, **described,
                "dtype": self.dtype, "max_length": self.max_length}

    def fingerprint(self) -> str | None:
        """The loaded model's :func:`~instir.retrieval.dense.weights_fingerprint` (it keys the score cache and a
        reranked run), remembered under its files in the kit's cache home
        (:func:`~instir.retrieval.model_files.remembered`): a rerun whose scores exist loads no model, and any
        rewritten file is described from its weights again. None for a Hub id whose files are not on disk under a
        name that stays put (:func:`~instir.retrieval.model_files.model_folder`: online at a branch)."""
        if self._fingerprint is None:
            folder = model_folder(self.model_name, self.revision)
            if folder is None:
                return None
            described = remembered(instir_home(), [folder], {"class": type(self).__name__, "dtype": self.dtype},
                                   lambda: {"fingerprint": self._loaded_fingerprint()})
            self._fingerprint = described["fingerprint"]
        return self._fingerprint

    def _loaded_fingerprint(self) -> str:
        """:func:`~instir.retrieval.dense.weights_fingerprint` of the model and tokenizer as :meth:`loaded`."""
        model, tokenizer = self.loaded()
        return weights_fingerprint(f"{model!r}|dtype={self.dtype}", tokenizer, model.state_dict())

    def joined_query(self, query: str, instruction: str) -> str:
        """The query text the model sees: ``query_format`` filled, stripped."""
        return self.query_format.format(query=query, instruction=instruction).strip()

    @classmethod
    def from_card(cls, card: Any) -> "_HFReranker":
        """From a system card (duck-typed: name, model, revision, dtype, params: batch_size, max_length,
        query_format and the class's own, :meth:`card_options`)."""
        params = _card_params(card)
        return cls(card.model, name=card.name, revision=getattr(card, "revision", None),
                   batch_size=params.get("batch_size", 64), query_format=params.get("query_format"),
                   **cls.card_options(card, params))

    @classmethod
    def card_options(cls, card: Any, params: dict) -> dict:
        """The constructor's other arguments from a card: its dtype (float32 when none) and its ``max_length``
        (else the card's ``doc_max_length``)."""
        return {"dtype": getattr(card, "dtype", None) or "float32",
                "max_length": params.get("max_length") or getattr(card, "doc_max_length", None)}

    def _load(self):
        """The model (on its device, for inference) and its tokenizer (:meth:`_prepared`)."""
        import transformers

        model = getattr(transformers, self.auto_class).from_pretrained(self.model_name, revision=self.revision,
                                                                       dtype=self._torch_dtype())
        model.to(default_device(self.device)).eval()
        return model, self._prepared(transformers.AutoTokenizer.from_pretrained(self.model_name,
                                                                                revision=self.revision))

    def _prepared(self, tokenizer):
        """The tokenizer as the authors set it up (padding, label tokens); as loaded here."""
        return tokenizer

    def _label_ids(self, tokenizer, tokens: tuple[str, str], hint: str) -> tuple[int, int]:
        """The vocabulary ids of the (false, true) label tokens; ValueError naming the missing ones and ``hint``."""
        vocab = tokenizer.get_vocab()
        missing = [t for t in tokens if t not in vocab]
        if missing:
            raise ValueError(f"{self.model_name}: label token(s) {missing} not in the tokenizer's vocabulary; {hint}")
        return vocab[tokens[0]], vocab[tokens[1]]

    def _p_true(self, logits) -> list[float]:
        """P(true) of each row: the softmax over its (false, true) label logits, in float32."""
        import torch

        return torch.log_softmax(logits[:, list(self._ids)].float(), dim=1)[:, 1].exp().tolist()

    def loaded(self):
        """``(model, tokenizer)``, loading them on first use."""
        if self._model is None:
            self._model, self._tokenizer = self._load()
        return self._model, self._tokenizer

    def _count(self, n: int) -> None:
        self.calls += 1
        self.scored += n


class MonoT5Reranker(_HFReranker):
    """monoT5 as ``MonoT5Reranker`` in kaistAI/InstructIR ``eval/src/rerankers.py``: query
    ``f"{query} {instruction}".strip()`` (``query_format``), prompt ``Query: {query} Document: {text} Relevant:``,
    tokenised with padding and truncation at the tokenizer's ``model_max_length``; the score
    is P(true) from a softmax over the (false, true) logits of the first decoded token.

    The authors read those logits from ``generate(max_new_tokens=1, output_scores=True)``;
    one forward pass with the decoder start token gives the same logits when the model's
    generation config adds no logits processors (true of the castorini checkpoints), and is
    what runs here (the tests check it against ``generate``).
    """

    kind = "monot5"
    default_model = "castorini/monot5-base-msmarco-10k"
    auto_class = "AutoModelForSeq2SeqLM"

    def __init__(self, model: str | None = None, *, name: str | None = None,
                 revision: str | None = None, dtype: str = "float32", batch_size: int = 64,
                 max_length: int | None = None, device: str | None = None,
                 token_false: str | None = None, token_true: str | None = None,
                 template: str = MONOT5_TEMPLATE, query_format: str | None = None):
        super().__init__(model, name=name, revision=revision, dtype=dtype, batch_size=batch_size,
                         max_length=max_length, device=device, query_format=query_format)
        default = MONOT5_PREDICTION_TOKENS.get(self.model_name,
                                               MONOT5_PREDICTION_TOKENS["castorini/monot5-base-msmarco"])
        self.token_false = token_false or default[0]
        self.token_true = token_true or default[1]
        check_format(template, ("query", "text"), "MonoT5Reranker template")
        self.template = template

    @classmethod
    def card_options(cls, card: Any, params: dict) -> dict:
        """Also the label tokens (``false_token``, ``true_token``) and the prompt (``prompt``; a card's
        ``template`` is a kit template name, not this)."""
        return {**super().card_options(card, params), "token_false": params.get("false_token"),
                "token_true": params.get("true_token"), "template": params.get("prompt") or MONOT5_TEMPLATE}

    def identity(self) -> dict:
        return {**self._base_identity(), "template": self.template, "template_name": "monot5",
                "template_source": f"{_SRC} MonoT5Reranker.prompt_template", "query_join": self.query_format,
                "tokens": [self.token_false, self.token_true], "decoding": "first decoder step, softmax(false, true)"}

    def model_input(self, query: str, instruction: str, text: str) -> str:
        return self.template.format(query=self.joined_query(query, instruction), text=text)

    def _prepared(self, tokenizer):
        self._ids = self._label_ids(tokenizer, (self.token_false, self.token_true), "give token_false/token_true")
        return tokenizer

    def score(self, inputs: Sequence[str]) -> list[float]:
        """P(true) of each prompt."""
        import torch

        model, tokenizer = self.loaded()
        tokens = tokenizer(list(inputs), padding=True, truncation=True, return_tensors="pt",
                           max_length=self.max_length or tokenizer.model_max_length).to(model.device)
        start = torch.full((len(inputs), 1), model.config.decoder_start_token_id, dtype=torch.long,
                           device=model.device)
        with torch.inference_mode():
            logits = model(input_ids=tokens["input_ids"], attention_mask=tokens["attention_mask"],
                           decoder_input_ids=start).logits[:, 0, :]
        self._count(len(inputs))
        return self._p_true(logits)


class CausalLMPTrueReranker(_HFReranker):
    """A causal LM scored by P(true), as ``LlamaReranker`` (and its Mistral / FollowIR
    subclasses) in kaistAI/InstructIR ``eval/src/rerankers.py``: the query becomes
    ``query_format`` filled and stripped (InstructIR's ``"{query}? {instruction}"`` by default;
    the FollowIR authors' and MTEB's ``"{query} {instruction}"``), goes into the model's true/false prompt
    (:data:`LLM_TEMPLATES`), the tokenizer pads on the left with EOS as pad and truncates
    (from the right) at ``min(2048, model_max_length)``, and the score is the softmax over
    the ("false", "true") logits at the last position — the vocabulary entries ``false`` and
    ``true`` without the word-start marker, as the authors look them up.

    Reproduced quirks: the chat/Mistral/FollowIR prompts start with the literal ``<s>`` and
    the tokenizer adds its own BOS, so those inputs begin with two BOS tokens; a prompt longer
    than the limit loses its end (``Relevant: [/INST]``) to truncation. Left padding without
    position ids shifts the absolute positions of shorter inputs; the rotary embeddings of
    Llama and Mistral depend only on relative positions, so scores do not depend on the batch
    (up to float rounding), which is why a per-input score cache is sound.
    """

    kind = "llm-ptrue"
    query_format = LLM_QUERY_FORMAT
    default_model = "jhu-clsp/FollowIR-7B"
    auto_class = "AutoModelForCausalLM"

    def __init__(self, model: str | None = None, *, name: str | None = None,
                 revision: str | None = None, prompt: str | None = None, dtype: str | None = None,
                 batch_size: int = 64, max_length: int | None = None, device: str | None = None,
                 query_format: str | None = None):
        self.prompt = prompt or authors_llm_prompt(str(model or self.default_model))
        if self.prompt not in LLM_TEMPLATES:
            raise unknown("prompt", self.prompt, LLM_TEMPLATES)
        super().__init__(model, name=name, revision=revision, dtype=dtype or LLM_AUTHOR_DTYPES[self.prompt],
                         batch_size=batch_size, max_length=max_length, device=device, query_format=query_format)

    @classmethod
    def card_options(cls, card: Any, params: dict) -> dict:
        """The prompt (``params['prompt']``: one of the authors' prompt strings in :data:`LLM_TEMPLATES`, or its
        key), the card's dtype (none: the authors' for the prompt) and ``max_length`` (none: the authors' 2048)."""
        prompt = params.get("prompt")
        return {"prompt": {text: key for key, text in LLM_TEMPLATES.items()}.get(prompt, prompt),
                "dtype": getattr(card, "dtype", None), "max_length": params.get("max_length")}

    @property
    def template(self) -> str:
        return LLM_TEMPLATES[self.prompt]

    def identity(self) -> dict:
        return {**self._base_identity(), "template": self.template, "template_name": f"ptrue-{self.prompt}",
                "template_source": LLM_TEMPLATE_SOURCES[self.prompt], "query_join": self.query_format,
                "tokens": ["false", "true"], "padding": "left, pad = eos",
                "truncation": "right, min(2048, model_max_length)"}

    def model_input(self, query: str, instruction: str, text: str) -> str:
        return self.template.format(query=self.joined_query(query, instruction), text=text)

    def _prepared(self, tokenizer):
        tokenizer.pad_token = tokenizer.eos_token
        tokenizer.padding_side = "left"
        self._ids = self._label_ids(tokenizer, ("false", "true"), "the authors' P(true) scoring needs both")
        return tokenizer

    def score(self, inputs: Sequence[str]) -> list[float]:
        """P(true) of each prompt."""
        import torch

        model, tokenizer = self.loaded()
        limit = self.max_length or min(2048, tokenizer.model_max_length)
        tokens = tokenizer(list(inputs), padding=True, truncation=True, return_tensors="pt",
                           max_length=limit).to(model.device)
        tokens.pop("token_type_ids", None)
        with torch.inference_mode():
            logits = model(**tokens, logits_to_keep=1).logits[:, -1, :]
        self._count(len(inputs))
        return self._p_true(logits)


class CrossEncoderReranker(_HFReranker):
    """A monoBERT-style cross-encoder as ``MonoBERTReranker`` in kaistAI/InstructIR
    ``eval/src/rerankers.py``: the pair (``f"{query} {instruction}".strip()``: ``query_format``, passage),
    padded, truncated ``only_second`` at the tokenizer's ``model_max_length``; the score is
    the softmax probability of label 1 (relevant). A single-logit cross-encoder (the
    sentence-transformers MS MARCO kind) scores by its raw logit instead, as it ranks."""

    kind = "cross-encoder"
    default_model = "castorini/monobert-large-msmarco"
    auto_class = "AutoModelForSequenceClassification"

    def identity(self) -> dict:
        return {**self._base_identity(), "template": [self.query_format, "{text}"],
                "template_name": "cross-encoder-pair", "template_source": f"{_SRC} MonoBERTReranker.rerank",
                "truncation": "only_second", "score": "softmax label 1 (raw logit for one-label models)"}

    def model_input(self, query: str, instruction: str, text: str) -> list[str]:
        return [self.joined_query(query, instruction), text]

    def score(self, inputs: Sequence[list[str]]) -> list[float]:
        """P(relevant) of each [query, passage] pair (raw logit for one-label models)."""
        import torch

        model, tokenizer = self.loaded()
        tokens = tokenizer([q for q, _ in inputs], [p for _, p in inputs], padding=True, truncation="only_second",
                           return_tensors="pt", max_length=self.max_length or tokenizer.model_max_length
                           ).to(model.device)
        with torch.inference_mode():
            logits = model(**tokens)[0].float()
        self._count(len(inputs))
        if logits.shape[1] == 1:
            return logits[:, 0].tolist()
        return torch.log_softmax(logits, dim=1)[:, 1].exp().tolist()


_CLASSES = {"monot5": MonoT5Reranker, "cross-encoder": CrossEncoderReranker, "llm-ptrue": CausalLMPTrueReranker}


def make_reranker(kind: str, model: str, **options: Any) -> _HFReranker:
    """A reranker by kind (``monot5``, ``cross-encoder``, ``llm-ptrue``) and model id or path."""
    if kind not in _CLASSES:
        raise unknown("reranker kind", kind, _CLASSES)
    check_model(model)
    return _CLASSES[kind](model, **options)


def reranker_from_name(name: str, cards: Any = None, *, dtype: str | None = None,
                       batch_size: int | None = None) -> _HFReranker:
    """The reranker a system card names (``monoT5-base``, ``FollowIR-7B`` …), built from its card
    (:func:`instir.systems.build_system`); ``dtype`` and ``batch_size`` override the card's."""
    import dataclasses

    from instir.errors import UsageError
    from instir.systems import build_system, get_card, load_cards

    cards = cards if cards is not None else load_cards()
    card = get_card(name, cards)
    if card.kind != "reranker":
        raise UsageError(f"system {card.name!r} is a {card.kind}, not a reranker (instir retrieve --system)")
    changes: dict[str, Any] = {"dtype": dtype} if dtype else {}
    if batch_size is not None:
        changes["params"] = {**card.params, "batch_size": batch_size}
    return build_system(dataclasses.replace(card, **changes) if changes else card, cards=cards)
