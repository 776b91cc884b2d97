"""Telling an API key from the *name* of the environment variable that holds it.

Keys reach instir only through environment variables; options and notebook parameters carry the
variable's name (``judge_api_key_env``, ``--api-key-env``). A key pasted where a name belongs
would be copied into report.json, the executed notebook and the HTML, so such values go through
:func:`require_env_name`, and :func:`instir.pipeline.check_parameters` and the ``instir`` command refuse any
parameter or argument holding a token or a secret variable's value, in any of its forms (:func:`leaked_secret`).
The checks name the parameter and the reason, never the value.
"""

from __future__ import annotations

import base64
import functools
import os
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, urlsplit

from instir.errors import UsageError

#: what a value naming an environment variable may look like
ENV_VAR_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

#: environment variables whose value is a secret: the name says KEY, TOKEN, SECRET, PASSWORD, PASSWD or CREDENTIAL
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
    whose value is long enough to look for (:data:`MIN_SECRET_LENGTH`), each value without the whitespace around it:
    a ``.env`` file saved with CRLF line ends leaves a ``\\r`` at a key's end, which no argument echoing the key
    holds (and which made a 7-character key 8 long)."""
    values = {var: value.strip() for var, value in os.environ.items() if SECRET_ENV_NAME.search(var)}
    return {var: value for var, value in values.items() if len(value) >= MIN_SECRET_LENGTH}


def leaked_secret(text: str) -> str | None:
    """What in ``text`` is a secret, said without it: something shaped like an API key (:func:`find_token`), or
    the value of a secret environment variable (:func:`secret_env_values`) whole in any of its forms
    (:func:`secret_forms`: any letter case, URL-encoded, hex, base64); None when there is neither. The one check of
    what a user gives the kit to keep (notebook parameters, command-line arguments)."""
    prefix = find_token(text)
    if prefix is not None:
        return f"what looks like an API key ({prefix!r} …)"
    folded = text.lower()
    for var, value in secret_env_values().items():
        if any(form.text in (folded if form.fold else text) for form in secret_forms(value)):
            return f"the value of ${var}"
    return None


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


#: an echo of this many leading characters of a key (or of one of its encoded forms) is masked too
MIN_ECHO = 8

#: the pieces of each form looked for, at every multiple of their length: a run of MIN_ECHO characters from
#: anywhere in a form holds one whole, so a scan looks for a few dozen short pieces, not every run of MIN_ECHO
_WINDOW = MIN_ECHO // 2

#: the base64 alphabets: standard (RFC 4648 section 4) and URL-safe (section 5)
_BASE64 = ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
           "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
_TO_URLSAFE = str.maketrans("+/", "-_")

#: what may not stand next to a key too short to look for in parts, for it to be masked (see :func:`mask_secret`)
_WORD_EDGE = "A-Za-z0-9_-"


@dataclass(frozen=True)
class EchoForm:
    """One form a key may be echoed in, and how far around a match of it masking reaches.

    ``text`` is the run of characters fixed by the key alone, lower-cased when ``fold`` (then it
    is matched case-insensitively). For a base64 form the key's first and last bytes share a
    character with the bytes around it: ``before`` / ``after`` are the characters that may
    stand just before / after ``text`` given the key's own bits in them (empty: the key starts
    or ends on a character boundary), and ``before_more`` / ``after_more`` how many characters
    of ``alphabet`` (after: or ``=``) further out complete the 4-character group, so a masked
    echo leaves no character that holds a bit of the key.
    """

    text: str
    fold: bool = False
    alphabet: str = ""
    before: str = ""
    before_more: int = 0
    after: str = ""
    after_more: int = 0


def _base64_forms(raw: bytes) -> list[EchoForm]:
    """The base64 forms of ``raw`` inside any longer string: one per alignment of its first byte
    in a 3-byte group (0, 1 or 2 bytes before it in the group) and alphabet."""
    forms = []
    for lead in range(3):
        start_bit, end_bit = 8 * lead, 8 * (lead + len(raw))
        first, last = -(-start_bit // 6), end_bit // 6  # the characters fixed by raw alone: [first, last)
        fixed = base64.b64encode(bytes(lead) + raw + bytes(2)).decode()[first:last]
        head_bits, tail_bits = 6 * first - start_bit, end_bit - 6 * last  # raw's bits in the shared characters
        group_end = -(-end_bit // 24) * 4
        for alphabet in _BASE64:
            before = "".join(c for v, c in enumerate(alphabet) if head_bits
                             and v & ((1 << head_bits) - 1) == raw[0] >> (8 - head_bits))
            after = "".join(c for v, c in enumerate(alphabet) if tail_bits
                            and v >> (6 - tail_bits) == raw[-1] & ((1 << tail_bits) - 1))
            forms.append(EchoForm(fixed if alphabet == _BASE64[0] else fixed.translate(_TO_URLSAFE),
                                  alphabet=alphabet, before=before, before_more=max(first - 1, 0),
                                  after=after, after_more=group_end - last - 1 if after else 0))
    return forms


@functools.lru_cache(maxsize=32)
def secret_forms(secret: str) -> tuple[EchoForm, ...]:
    """The forms a key is echoed in, longest first: itself in any letter case, URL-encoded, its bytes in hex
    (any case), and base64 (standard and URL-safe, padded or not) of any string holding it at
    any offset (:func:`_base64_forms`), as when a server echoes the encoded ``Authorization``
    header ``Bearer <key>``. Computed once per key."""
    raw = secret.encode()
    forms = {EchoForm(secret.lower(), fold=True), EchoForm(quote(secret, safe="").lower(), fold=True),
             EchoForm(raw.hex(), fold=True), *_base64_forms(raw)}
    return tuple(sorted(forms, key=lambda f: (-len(f.text), f.text, f.alphabet)))


def _run(text: str, at: int, form: EchoForm, offset: int, step: int) -> int:
    """How many characters of ``text`` from ``at`` on, going ``step`` (+1 or -1), stand as ``form.text`` does from
    ``offset`` on (a key is short: a character loop)."""
    target, count = form.text, 0
    while 0 <= at + step * count < len(text) and 0 <= offset + step * count < len(target):
        char = text[at + step * count]
        if (char.lower() if form.fold else char) != target[offset + step * count]:
            break
        count += 1
    return count


def _random_looking(piece: str) -> bool:
    """Whether a piece of a key reads as a random key does (a digit, or upper and lower case letters), not as words:
    a piece from inside a key is masked only then, so an answer saying "is required" keeps its words when the
    placeholder key is ``sk-no-key-required``."""
    return any(c.isdigit() for c in piece) or (any(c.isupper() for c in piece) and any(c.islower() for c in piece))


def _reach(text: str, at: int, step: int, shared: str, more: int, also: str) -> int:
    """How many characters from ``at`` on, going ``step`` (+1 or -1), belong to the echo's
    outer groups: one in ``shared`` (the character holding the key's first or last bits), then
    up to ``more`` in ``also``; 0 when the next character is not in ``shared``."""
    if not shared or not 0 <= at < len(text) or text[at] not in shared:
        return 0
    count = 1
    while count <= more and 0 <= at + step * count < len(text) and text[at + step * count] in also:
        count += 1
    return count


class _Masker:
    """Every echo of one key in a text: one compiled pattern of the pieces of every form, each match extended in
    place both ways and kept when it spans :data:`MIN_ECHO` characters or more (see :func:`mask_secret`)."""

    def __init__(self, secret: str):
        #: each piece of a form at a multiple of _WINDOW, lower-cased: the forms it stands in, and where
        self.windows: dict[str, list[tuple[EchoForm, int]]] = {}
        if len(secret) < MIN_ECHO:
            self.pattern = re.compile(f"(?<![{_WORD_EDGE}]){re.escape(secret)}(?![{_WORD_EDGE}])")
            return
        alternatives = set()
        for form in (f for f in secret_forms(secret) if len(f.text) >= MIN_ECHO):
            for offset in range(0, len(form.text) - _WINDOW + 1, _WINDOW):  # every run of MIN_ECHO holds one
                window = form.text[offset:offset + _WINDOW]
                self.windows.setdefault(window.lower(), []).append((form, offset))
                alternatives.add(f"(?i:{re.escape(window)})" if form.fold else re.escape(window))
        self.pattern = re.compile("|".join(sorted(alternatives)))

    def spans(self, text: str) -> list[tuple[int, int]]:
        """The (start, end) of every echo in ``text``, merged where they overlap."""
        if not self.windows:
            return [m.span() for m in self.pattern.finditer(text)]
        found, pos = [], 0
        while (match := self.pattern.search(text, pos)) is not None:
            at = match.start()
            pos = at + 1  # every start: an echo of another form may begin inside this one
            for form, offset in self.windows.get(text[at:at + _WINDOW].lower(), ()):
                back = _run(text, at - 1, form, offset - 1, -1)
                ahead = _run(text, at, form, offset, 1)
                start, end = at - back, at + ahead
                if end - start < MIN_ECHO or (offset - back > 0 and not _random_looking(text[start:end])):
                    continue  # a piece from inside the key that reads as words ("required" of sk-no-key-required)
                if offset - back == 0:  # from the form's first character: the one before may hold key bits
                    start -= _reach(text, start - 1, -1, form.before, form.before_more, form.alphabet)
                if offset + ahead == len(form.text):
                    end += _reach(text, end, 1, form.after, form.after_more, form.alphabet + "=")
                found.append((start, end))
                pos = max(pos, end - _WINDOW + 1)
        merged: list[tuple[int, int]] = []
        for start, end in sorted(found):
            if merged and start < merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], end))
            else:
                merged.append((start, end))
        return merged


@functools.lru_cache(maxsize=32)
def _masker(secret: str) -> _Masker:
    return _Masker(secret)


def mask_secret(text: str | None, secret: str) -> str | None:
    """``text`` with every echo of ``secret`` replaced by ``***``.

    An echo is any run of :data:`MIN_ECHO` or more characters from anywhere in one of the key's forms
    (:func:`secret_forms`: a server that echoes a truncated key or its end; a key broken across lines, each
    piece a run of its own): the key in any letter case, URL-encoded, its hex in any case, and base64 of any
    string holding it (``Bearer <key>`` in an error body), standard or URL-safe, at any of the three byte
    alignments; a piece shorter than :data:`MIN_ECHO` between two escaped characters stays, and so does a piece from
    inside the key that reads as words (no digit, one letter case: :func:`_random_looking`). A base64 echo is
    masked out to its 4-character group boundaries, so no character holding a bit of the key
    stays. A key shorter than :data:`MIN_ECHO` is a placeholder (``EMPTY``, ``none``) that no
    provider issues: it is masked only where it stands as a whole word, exactly, since masking
    every ``test`` in a judge's answer would corrupt it and its parts say nothing.
    ``text`` unchanged when there is no secret. Mask *before* cutting a text to length, or a
    cut key survives in part. The forms and their pattern are built once per key, so a
    100,000-character text costs one regular-expression scan."""
    if not text or not secret:
        return text
    pieces, start = [], 0
    for at, end in _masker(secret).spans(text):
        pieces += [text[start:at], "***"]
        start = end
    return "".join(pieces) + text[start:] if pieces else text


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
