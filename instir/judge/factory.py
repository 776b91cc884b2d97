"""The judge a notebook or the CLI asks for by name (:func:`make_judge`), behind the judgment
cache, and the rules for the environment variable an OpenAI-compatible judge reads its key from."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from instir.errors import UsageError, unknown
from instir.secrets import refuse_url_credentials, require_env_name

if TYPE_CHECKING:
    from instir.judge.cache import CachedJudge
    from instir.judge.types import Judge

#: judge backends :func:`make_judge` builds
BACKENDS = ("openai", "hf", "baseline")

#: where an openai judge sends its requests unless ``base_url`` says otherwise
OPENAI_BASE_URL = "https://api.openai.com/v1"

#: the environment variable an openai judge reads its key from unless ``api_key_env`` names another
DEFAULT_KEY_ENV = "OPENAI_API_KEY"


def is_local_url(url: str) -> bool:
    """Whether ``url`` points at a server on this machine or network: a loopback or private
    address, ``localhost``, or a single-label host name (a container's service name)."""
    host = (urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return bool(host) and "." not in host
    return address.is_loopback or address.is_private or address.is_link_local


def key_env_for(api_key_env: str | None, base_url: str) -> str:
    """The environment variable an openai judge at ``base_url`` reads its key from, checked.

    ``api_key_env`` (empty: :data:`DEFAULT_KEY_ENV`) must be a variable *name*, not a key
    (:func:`instir.secrets.require_env_name`). A variable other than the default must be set:
    naming one that is not set is a mistake, not a wish to send no key. The default may be unset
    only for a local server (:func:`is_local_url`); requests then carry no key. Raises
    ``ValueError`` saying which rule failed."""
    name = require_env_name(api_key_env or DEFAULT_KEY_ENV, "api_key_env")
    if os.environ.get(name):
        return name
    if name != DEFAULT_KEY_ENV:
        raise UsageError(f"the environment variable {name} named by api_key_env is not set; set it to the key "
                         f"(a local server that needs no key can go without: leave api_key_env at {DEFAULT_KEY_ENV})")
    if not is_local_url(base_url):
        raise UsageError(f"{DEFAULT_KEY_ENV} is not set, and {base_url} is not a local server: set it to the key, "
                         "or name the variable that holds it with api_key_env (--api-key-env of a command)")
    return name


def make_judge(backend: str, *, model: str | None = None, gguf_file: str | None = None,
               base_url: str | None = None, api_key_env: str | None = None, timeout_s: float | None = None,
               max_retries: int | None = None, requests_per_minute: float | None = None,
               cache: str | Path | None = None) -> CachedJudge:
    """The judge ``backend`` names (one of :data:`BACKENDS`), behind the SQLite judgment cache.

    ``model``: openai: the served model name (required); hf: a local folder or model id (default:
    the bundled SmolLM2-135M-Instruct GGUF, with ``gguf_file`` naming a GGUF file in the folder);
    baseline: ``lexical`` (default) or ``embedding``. ``cache``: the cache file (default:
    ``$INSTIR_HOME/judgments.sqlite``). Options of the openai backend only (others ignore them):
    ``base_url``, the endpoint before ``/chat/completions`` (default: :data:`OPENAI_BASE_URL`);
    ``api_key_env``, the *name* of the environment variable holding the API key (checked by
    :func:`key_env_for`); ``timeout_s``, seconds each attempt may take, connect to body (default 60);
    ``max_retries``, retries per request (default 6); ``requests_per_minute``, the provider's rate limit, kept by
    pacing every request (default: none). Empty strings count as not given, as the
    notebooks' parameters use them. Raises :class:`instir.errors.UsageError` (a ``ValueError``)
    for an unknown backend, an openai judge without a model, a key variable :func:`key_env_for`
    refuses or a timeout/retry count out of range."""
    from instir.judge import (
        BaselineJudge,
        CachedJudge,
        HFCausalLMJudge,
        OpenAICompatibleJudge,
    )

    if backend not in BACKENDS:
        raise unknown("judge backend", backend, BACKENDS)
    if backend == "openai":
        if not model:
            raise UsageError("the openai judge backend needs a model name, e.g. 'gpt-4o-mini' "
                             "or the name of the model a local server serves")
        url = base_url or OPENAI_BASE_URL
        refuse_url_credentials(url, "base_url")  # before the key's check, whose message repeats the URL
        options = {"timeout_s": timeout_s, "max_retries": max_retries, "requests_per_minute": requests_per_minute}
        judge = OpenAICompatibleJudge(model, url, api_key_env=key_env_for(api_key_env, url),
                                      **{k: v for k, v in options.items() if v is not None})
    elif backend == "hf":
        if not gguf_file:  # a GGUF's folder holds no config.json
            from instir.retrieval.model_files import check_model  # numpy's store: not at every command's start

            check_model(model)
        judge = HFCausalLMJudge(model or None, gguf_file=gguf_file or None)
    else:
        judge = BaselineJudge(model or "lexical")
    if not cache:
        from instir.home import instir_home

        cache = instir_home() / "judgments.sqlite"
    return CachedJudge(judge, Path(cache))


def as_judge(judge: Judge | str) -> Judge:
    """``judge``, or for a backend name (``"baseline"``) :func:`make_judge`'s judge with its defaults: the one rule
    of the functions that take a judge (:func:`~instir.judge.following.instfol`,
    :func:`~instir.judge.validation.validate_judge`)."""
    return make_judge(judge) if isinstance(judge, str) else judge


def require_reachable(base_url: str | None, timeout_s: float = 5.0, *, where: str | None = None,
                      names: tuple[str, str] = ("judge_base_url", "judge_backend")) -> None:
    """Refuse (:class:`~instir.errors.UsageError`) an openai judge endpoint (empty:
    :data:`OPENAI_BASE_URL`) where nothing answers within ``timeout_s``: a run would otherwise
    wait out every retry of every request in silence. The message starts with ``where``
    (default: ``judge endpoint <url>``) and names the caller's endpoint and backend settings
    (``names``: the parameters' by default, a command's options from the CLI)."""
    from instir.http_retry import unreachable

    url = base_url or OPENAI_BASE_URL
    reason = unreachable(url, timeout_s)
    if reason:
        raise UsageError(f"{where or 'judge endpoint ' + url}: {reason}; start the server, fix {names[0]}, "
                         f"or choose another {names[1]}")
