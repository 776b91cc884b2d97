"""Telling an API key from the *name* of the environment variable that holds it.

Keys reach instir only through environment variables; options and notebook parameters carry the
variable's name (``judge_api_key_env``, ``--api-key-env``). A key pasted where a name belongs
would be copied into report.json, the executed notebook and the HTML, so such values go through
:func:`require_env_name`, and :func:`instir.pipeline.check_parameters` refuses any parameter
holding a token (:func:`find_token`) or a secret variable's value (:func:`secret_env_values`).
The checks name the parameter and the reason, never the value.
"""

from __future__ import annotations

import base64
import os
import re
from urllib.parse import parse_qsl, urlsplit

from instir.errors import UsageError

#: what a value naming an environment variable may look like
ENV_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: environment variables whose value is a secret: the name says KEY, TOKEN, SECRET, PASSWORD or CREDENTIAL
SECRET_ENV_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)

#: shorter secret values are not looked for in parameters (too many accidental matches)
MIN_SECRET_LENGTH = 8

#: prefixes of well-known API key formats (OpenAI, Anthropic, Stripe-style, Hugging Face, Groq,
#: GitHub, GitLab, Slack, AWS, Google, Replicate, Perplexity, NVIDIA, JSON web tokens)
TOKEN_PREFIXES = ("sk-", "sk_", "rk_", "pk_", "hf_", "gsk_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_",
                  "glpat-", "xoxb-", "xoxp-", "xoxa-", "xoxs-", "xapp-", "AKIA", "ASIA", "AIza", "ya29.", "r8_",
                  "pplx-", "nvapi-", "eyJ")

_PREFIXED = re.compile(
    r"(?<![A-Za-z0-9])(?P<prefix>" + "|".join(re.escape(p) for p in sorted(TOKEN_PREFIXES, key=len, reverse=True))
    + r")(?P<tail>[A-Za-z0-9_\-.]{16,})")
_AWS_TAIL = re.compile(r"[A-Z0-9]{16}")

#: a bare token: at least this many letters and digits, and this share of class switches
_MIN_BARE_LENGTH = 20
_MIN_SWITCH_RATE = 0.35


def _char_class(c: str) -> int:
    return 0 if c.isdigit() else 1 if c.isupper() else 2


def _prefixed_token(match: re.Match) -> bool:
    prefix, tail = match.group("prefix"), match.group("tail")
    if prefix in ("AKIA", "ASIA"):
        return bool(_AWS_TAIL.match(tail))
    letters = [c for c in tail if c.isalpha()]
    return any(c.isupper() for c in letters) and any(c.islower() for c in letters)


def _bare_token(value: str) -> bool:
    core = [c for c in value if c.isascii() and c.isalnum()]
    if len(core) < _MIN_BARE_LENGTH or not any(c.isdigit() for c in core) or not any(c.isalpha() for c in core):
        return False
    switches = sum(_char_class(a) != _char_class(b) for a, b in zip(core, core[1:]))
    return switches / (len(core) - 1) >= _MIN_SWITCH_RATE


def token_reason(value: str) -> str | None:
    """Why ``value`` looks like an API key rather than a variable name, or ``None``.

    A token is a known key prefix (:data:`TOKEN_PREFIXES`) followed by at least 16 key
    characters in mixed case (``AKIA``/``ASIA``: 16 upper-case letters or digits), so
    ``hf_cache_dir`` stays a name; or 20 or more letters and digits, letters mixed with digits,
    switching between upper case, lower case and digits at 35 % or more of adjacent pairs, as
    random keys do (about 60 %) and names do not (``MyCompanyOpenAIKey2024Production``: 32 %).
    The reason names the matched prefix or the shape, never the value itself."""
    prefix = find_token(value)
    if prefix is not None:
        return f"it starts like an API key ({prefix!r} …)"
    if _bare_token(value):
        return "it has the length and randomness of an API key"
    return None


def find_token(text: str) -> str | None:
    """The known key prefix of the first prefixed token anywhere in ``text`` (e.g. inside a URL
    or a JSON dump of parameters), or ``None``."""
    for match in _PREFIXED.finditer(text):
        if _prefixed_token(match):
            return match.group("prefix")
    return None


def secret_env_values() -> dict[str, str]:
    """Environment variables whose name says they hold a secret (:data:`SECRET_ENV_NAME`) and
    whose value is long enough to look for (:data:`MIN_SECRET_LENGTH`)."""
    return {var: value for var, value in os.environ.items()
            if SECRET_ENV_NAME.search(var) and len(value) >= MIN_SECRET_LENGTH}


#: a variable *name* never starts with a lower-case key prefix followed by a tail holding digits
#: (``sk_LEAKCHECK_123456``: an upper-case key the mixed-case rule of :func:`token_reason` lets by)
_LOWER_PREFIXES = [p for p in TOKEN_PREFIXES if p.islower() or p.endswith(("-", "_"))]
_KEY_LIKE_NAME = re.compile(r"^(?:" + "|".join(re.escape(p) for p in _LOWER_PREFIXES)
                            + r")(?=[A-Za-z0-9_\-.]*\d)[A-Za-z0-9_\-.]{12,}$")


def require_env_name(value: object, what: str) -> str:
    """``value`` if it can be the name of an environment variable holding a key; otherwise a
    ``ValueError`` naming ``what`` (e.g. ``"parameter 'judge_api_key_env'"``) and the reason:
    not a variable name, shaped like a token (:func:`token_reason`, or a key prefix with a tail
    holding digits), or equal to the value of a secret environment variable."""
    hint = f"{what} must name an environment variable holding the key (e.g. OPENAI_API_KEY), not hold a key"
    if not isinstance(value, str) or not ENV_VAR_NAME.match(value):
        raise UsageError(hint)
    reason = token_reason(value) or ("it starts like an API key" if _KEY_LIKE_NAME.match(value) else None)
    if reason:
        raise UsageError(f"{hint}: {reason}")
    for var, secret in secret_env_values().items():
        if value == secret:
            raise UsageError(f"{hint}: it is the value of ${var}, not its name")
    return value


#: an echo of this many leading characters of a key (or of its base64 form) is masked too
MIN_ECHO = 8


def secret_forms(secret: str) -> list[str]:
    """The forms a key is echoed in: itself and its base64 encodings (standard and URL-safe,
    with and without padding), longest first."""
    raw = secret.encode()
    forms = {secret, base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()}
    forms |= {f.rstrip("=") for f in forms}
    return sorted(forms, key=len, reverse=True)


def mask_secret(text: str | None, secret: str) -> str | None:
    """``text`` with every echo of ``secret`` replaced by ``***``: the whole key, any run of its
    first :data:`MIN_ECHO` or more characters (a server that echoes a truncated key), and the
    same for its base64 forms (:func:`secret_forms`). ``text`` unchanged when there is no secret.
    Mask *before* cutting a text to length, or a cut key survives in part."""
    if not text or not secret:
        return text
    for form in secret_forms(secret):
        if len(form) < MIN_ECHO:
            continue
        head, pieces, start = form[:MIN_ECHO], [], 0
        while (at := text.find(head, start)) >= 0:
            end = at + MIN_ECHO
            while end < len(text) and end - at < len(form) and text[end] == form[end - at]:
                end += 1
            pieces += [text[start:at], "***"]
            start = end
        text = "".join(pieces) + text[start:]
    return text


#: query parameters of a URL that carry credentials (``?api-key=…``, ``&access_token=…``)
_CREDENTIAL_QUERY = re.compile(r"(?:^|[_.-])(?:api[_-]?key|key|token|access[_-]?token|secret|password|auth|sig"
                               r"|signature|code)$", re.IGNORECASE)


def refuse_url_credentials(url: object, what: str) -> None:
    """A ``UsageError`` naming ``what`` when ``url`` carries credentials: a user-info part
    (``https://user:pass@host``), a query parameter named like a key (``?api-key=…``), or a
    token-shaped string anywhere (:func:`find_token`). Keys come from environment variables
    only; a URL is written to report.json, the index and every notebook. The message never
    holds the value."""
    if not isinstance(url, str) or "://" not in url:
        return
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        raise UsageError(f"{what} holds credentials (user:password@): give the key through an environment "
                         "variable (judge_api_key_env) and the URL without them")
    named = [name for name, _ in parse_qsl(parts.query, keep_blank_values=True) if _CREDENTIAL_QUERY.search(name)]
    if named:
        raise UsageError(f"{what} holds a credential in its query ({named[0]}=…): give the key through an "
                         "environment variable (judge_api_key_env) and the URL without it")
    if find_token(url):
        raise UsageError(f"{what} holds something shaped like an API key: give the key through an environment "
                         "variable (judge_api_key_env) and the URL without it")
