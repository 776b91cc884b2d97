"""Telling API keys from variable names: known prefixes, random-looking values, values of secret
environment variables, and names that must stay accepted."""

import base64
import json
import re
import urllib.parse

import pytest
from says import raises_saying

from instir.secrets import (
    find_token,
    leaked_secret,
    mask_secret,
    refuse_url_credentials,
    require_env_name,
    secret_env_values,
    token_reason,
)

KEYS = [
    "sk_live_51HxYzAbCdEfGhIjKlMnOpQr",       # Stripe-style, also a valid variable name
    "hf_AbCdEfGhIjKlMnOpQrStUvWxYz",          # Hugging Face
    "gsk_Q7vX2mN9pL4kR8tW1yB6cD3fG5hJ",       # Groq
    "ghp_aB3dE9fGh2JkL7mNp4QrS8tU1vW6xY0z",   # GitHub
    "AKIAIOSFODNN7EXAMPLE",                   # AWS access key id
    "sk-proj-Q7vX2mN9pL4kR8tW1yB6cD3fG5hJ0zA",
    "Ab3dE9fGh2JkL7mNp4QrS8tU1vW6",           # no prefix: random letters and digits
]
NAMES = ["OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "MY_JUDGE_KEY_2", "HF_TOKEN", "GROQ_API_KEY",
         "OPENAI_API_KEY_2024_PROD", "MyCompanyOpenAIKey2024Production", "hf_token", "sk_learn_model_directory",
         "JUDGE_KEY_FOR_THE_SECOND_LOCAL_SERVER"]


@pytest.mark.parametrize("value", KEYS)
def test_token_shaped_values_are_recognised(value):
    assert token_reason(value)
    with raises_saying(ValueError, "parameter 'judge_api_key_env'", "environment variable") as err:
        require_env_name(value, "parameter 'judge_api_key_env'")
    assert value not in str(err.value)  # the message never repeats the key


@pytest.mark.parametrize("name", NAMES)
def test_variable_names_stay_accepted(name):
    assert token_reason(name) is None
    assert require_env_name(name, "api_key_env") == name


def test_find_token_looks_inside_longer_text_and_names_only_the_prefix():
    assert find_token('{"judge_base_url": "https://x.example/v1?key=sk-proj-Q7vX2mN9pL4kR8tW1yB6cD3f"}') == "sk-"
    assert find_token("/data/hf_cache/models and task-embeddings_v2") is None


def test_a_name_equal_to_the_value_of_a_secret_variable_is_refused(monkeypatch):
    monkeypatch.setenv("OPENAIKEY", "plainlowercasekey")  # "KEY" without delimiters still marks a secret
    assert secret_env_values()["OPENAIKEY"] == "plainlowercasekey"
    with raises_saying(ValueError, "api_key_env", "$OPENAIKEY"):
        require_env_name("plainlowercasekey", "api_key_env")


@pytest.mark.parametrize("value", [None, 42, "", "1KEY", "MY-KEY", "sk-proj-abc/123+xyz"])
def test_non_names_are_refused(value):
    with pytest.raises(ValueError, match="must name an environment variable"):
        require_env_name(value, "api_key_env")


def test_an_upper_case_key_behind_a_lower_case_prefix_is_no_variable_name():
    with pytest.raises(ValueError, match="it starts like an API key"):
        require_env_name("sk_LEAKCHECK_123456", "parameter 'judge_api_key_env'")


KEY = "sk-proj-Q7vX2mN9pL4kR8tW1yB6cD3fG5hJ0zA"


@pytest.mark.parametrize("echo", [KEY, KEY[:8], KEY[:20], base64.b64encode(KEY.encode()).decode(),
                                  base64.urlsafe_b64encode(KEY.encode()).decode().rstrip("="),
                                  base64.b64encode(KEY.encode()).decode()[:12]])
def test_every_echo_of_the_key_is_masked(echo):
    masked = mask_secret(f"server said: bad key {echo}!", KEY)
    assert masked == "server said: bad key ***!"


def test_masking_leaves_short_coincidences_alone():
    assert mask_secret("sk-proj is a prefix; sk-proj-Q7 was cut", KEY) == "sk-proj is a prefix; *** was cut"
    assert mask_secret("nothing here", KEY) == "nothing here" and mask_secret("text", "") == "text"


@pytest.mark.parametrize("url, says", [
    ("https://user:pass@gw.example/v1", "holds credentials (user:password@)"),
    ("https://gw.example/v1?api-key=abc123", "holds a credential in its query (api-key=…)"),
    ("https://gw.example/v1?x=1&access_token=abc", "holds a credential in its query (access_token=…)"),
    ("https://gw.example/hf_AbCdEfGhIjKlMnOpQrStUvWxYz/v1", "holds something shaped like an API key"),
])
def test_credentials_in_a_url_are_refused_without_repeating_them(url, says):
    with pytest.raises(ValueError, match=re.escape(says)) as err:
        refuse_url_credentials(url, "parameter 'judge_base_url'")
    assert "user:pass@" not in str(err.value) and "abc" not in str(err.value) and "AbCd" not in str(err.value)


def test_plain_urls_and_non_urls_pass():
    for value in ("https://api.openai.com/v1", "http://127.0.0.1:8000/v1?stream=1", "reports/sample", 3):
        refuse_url_credentials(value, "x")


# Echoes in encoded forms (issue 30): base64 of any string holding the key, at any of the three
# byte alignments, standard or URL-safe, padded or not; hex in any case; the key in any case.

_B64_RUN = re.compile(r"[A-Za-z0-9+/_-]+")


def _leaked(masked: str, key: str) -> list[str]:
    """Pieces of ``key`` (4 bytes or more) that can still be read from ``masked``: in clear, in
    hex, or decoded from any run of base64 characters at any start within a group."""
    grams = {key.encode()[i:i + 4] for i in range(len(key) - 3)}
    readable = {masked.encode(), masked.lower().encode()}  # a set: a long text repeats its runs thousands of times
    for run in set(_B64_RUN.findall(masked)):
        run = run.replace("-", "+").replace("_", "/")
        for skip in range(4):
            body = run[skip:][:len(run[skip:]) // 4 * 4]
            readable.add(base64.b64decode(body) if body else b"")
    for hex_run in set(re.findall(r"[0-9a-fA-F]{8,}", masked)):
        readable.add(bytes.fromhex(hex_run[:len(hex_run) // 2 * 2]))
    return sorted({g.decode() for g in grams for text in readable if g in text or g.lower() in text})


@pytest.mark.parametrize("encode", [base64.b64encode, base64.urlsafe_b64encode], ids=["standard", "urlsafe"])
@pytest.mark.parametrize("padded", [True, False], ids=["padded", "unpadded"])
@pytest.mark.parametrize("before, after", [("Bearer ", ""), ("x", ""), ("xy", ""), ("x", '"}'), ("xy", "zz"),
                                           ('{"header": "Authorization: Bearer ', '", "status": 401}')])
def test_base64_of_a_string_holding_the_key_at_any_offset_is_masked(encode, padded, before, after):
    encoded = encode((before + KEY + after).encode()).decode()
    encoded = encoded if padded else encoded.rstrip("=")
    body = f'{{"error": {{"message": "invalid credentials", "echo": "{encoded}", "code": 401}}}}'
    masked = mask_secret(body, KEY)
    assert "***" in masked and _leaked(masked, KEY) == []
    assert masked.startswith('{"error": {"message": "invalid credentials", "echo": "')
    assert masked.endswith('", "code": 401}}')


def test_the_base64_authorization_header_is_masked_to_its_group_boundary():
    encoded = base64.b64encode(f"Bearer {KEY}".encode()).decode()
    masked = mask_secret(f"server saw {encoded} and refused", KEY)
    assert masked == "server saw QmVhcmVy*** and refused"  # what is left decodes to "Bearer", no key bit
    assert base64.b64decode("QmVhcmVy") == b"Bearer"


def test_a_truncated_base64_echo_at_an_offset_is_masked():
    encoded = base64.b64encode(f"Bearer {KEY}".encode()).decode()
    assert mask_secret(f"got {encoded[:24]}…", KEY) == "got QmVhcmVy***…"


@pytest.mark.parametrize("echo", [KEY.encode().hex(), KEY.encode().hex().upper(),
                                  "".join(c.upper() if i % 3 else c for i, c in enumerate(KEY.encode().hex())),
                                  KEY.encode().hex()[:24]], ids=["lower", "upper", "mixed", "truncated"])
def test_hex_of_the_key_in_any_case_is_masked(echo):
    assert mask_secret(f"header bytes: {echo}.", KEY) == "header bytes: ***."


@pytest.mark.parametrize("echo", [KEY.upper(), KEY.lower(), KEY.swapcase(), KEY.upper()[:12]])
def test_the_key_in_any_letter_case_is_masked(echo):
    assert mask_secret(f"unknown key {echo}, check it", KEY) == "unknown key ***, check it"


INNOCENT = ('{"id": "chatcmpl-9aXbT2", "choices": [{"message": {"content": "Score: 3. The passage follows the '
            'instruction."}}], "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", '
            '"blob": "eHlzay1saXZlLW90aGVyLWtleS0xMjM0NTY3OA==", "note": "sk-proj keys, SK-PROJ ones too", '
            '"b64": "QmVhcmVyIGFub3RoZXIta2V5", "hex": "736b2d7", "upper": "SK-PROJ"}')


def test_innocent_text_around_an_upper_cased_echo_is_left_as_it_is():
    """Hex digests, base64 of other strings (``Bearer another-key``, ``xysk-live-other-key-…``),
    pieces of the key shorter than :data:`MIN_ECHO` in clear (``sk-proj``, ``SK-PROJ``) and in hex
    (``736b2d7``, under 4 bytes): none is masked; only the upper-cased echo is."""
    text = INNOCENT.replace('"upper": "SK-PROJ"', f'"upper": "{KEY.upper()}"')
    assert mask_secret(text, KEY) == INNOCENT.replace('"upper": "SK-PROJ"', '"upper": "***"')
    assert mask_secret(INNOCENT, KEY) == INNOCENT


def test_a_key_shorter_than_min_echo_is_masked_only_as_a_whole_word():
    assert mask_secret("Bearer EMPTY. EMPTYING the EMPTY_SET; (EMPTY)", "EMPTY") == \
        "Bearer ***. EMPTYING the EMPTY_SET; (***)"


def test_masking_a_long_text_is_one_scan():
    """A 100,000-character judge answer with an echo at each end: both masked, the rest kept."""
    filler = "The passage is relevant but ignores the instruction. " * 1900
    text = f"{KEY.upper()} {filler}{base64.b64encode(('xy' + KEY).encode()).decode()}"
    masked = mask_secret(text, KEY)
    assert masked == f"*** {filler}***" and _leaked(masked, KEY) == []


KEY50 = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z_Q7-Zk0LmN"


@pytest.mark.parametrize("echo", [f"{KEY50[:10]}\n{KEY50[10:]}", KEY50[-30:], KEY50[12:40], KEY50[5:13],
                                  base64.b64encode(f"Bearer {KEY50}".encode()).decode()[20:],
                                  urllib.parse.quote(KEY50, safe="")],
                         ids=["broken across lines", "its end", "its middle", "eight of its characters",
                              "a base64 echo's end", "url-encoded"])
def test_a_piece_of_the_key_from_anywhere_in_it_is_masked(echo):
    masked = mask_secret(f"server said: bad key {echo}!", KEY50)
    assert KEY50[-8:] not in masked and "***" in masked
    assert masked.startswith("server said: bad key ") and masked.endswith("!")
    assert _leaked(masked.replace("\n", " "), KEY50) == []


@pytest.mark.parametrize("written", [lambda k: k.lower(), lambda k: k.encode().hex(),
                                     lambda k: base64.b64encode(f"user:{k}".encode()).decode(),
                                     lambda k: urllib.parse.quote(k, safe=""), lambda k: k],
                         ids=["lower case", "hex", "base64", "url-encoded", "non-ascii as it is"])
def test_a_secret_variables_value_in_any_form_is_found_without_saying_it(written, monkeypatch):
    secret = "Zürich-Pässwort-8841"  # a value json.dumps would escape to \\u00fc
    monkeypatch.setenv("THIRD_SECRET", secret)
    found = leaked_secret(json.dumps({"note": f"see {written(secret)}"}, ensure_ascii=False))
    assert found == "the value of $THIRD_SECRET" and secret not in found


@pytest.mark.parametrize("key, text", [
    ("sk-no-key-required", 'the passage says knowledge is required; "msg": "Field required"'),
    ("my-secret-instructions-key", "the passage follows the instructions")])
def test_a_word_inside_a_placeholder_key_is_not_masked_in_an_answer(key, text):
    # the pieces from inside a key are masked only where they read as a random key does: "required" of
    # llama.cpp's documented placeholder key had become "***" in every judge answer saying it
    assert mask_secret(text, key) == text
    assert mask_secret(f"bad key {key}!", key) == "bad key ***!"


def test_a_secret_variable_named_in_lower_case_or_shorter_than_twelve_characters_is_found(monkeypatch):
    monkeypatch.setenv("my_gateway_token", "Zürich-Pässwort-8841")  # "token" in lower case still marks a secret
    monkeypatch.setenv("SHORT_PASSWORD", "pw-4f9a1c")  # 9 characters: at least MIN_SECRET_LENGTH
    assert leaked_secret("see Zürich-Pässwort-8841") == "the value of $my_gateway_token"
    assert leaked_secret("--password pw-4f9a1c") == "the value of $SHORT_PASSWORD"


def test_a_bare_token_at_the_least_length_and_switch_rate_is_recognised():
    assert token_reason("Ab3dE9fGh2JkL7mNp4Qr") == "it has the length and randomness of an API key"  # 20 characters
    # 21 characters, 7 switches between upper case, lower case and digits in 20 pairs: 35 % exactly
    assert token_reason("AB1CD2EF3GHIJKLMNOPQr") == "it has the length and randomness of an API key"
    assert token_reason("ASIA_ROLE_SESSION_NAME_FOR_CI") is None  # an AWS prefix, but no 16 upper-case or digits


def test_a_json_web_token_is_found_by_its_prefix():
    assert find_token("Authorization: eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl") == "eyJ"


@pytest.mark.parametrize("url", ["https://s3cr3tv4lue@gw.example/v1", "https://gw.example/v1?x-api-key=abc123",
                                 "https://gw.example/v1?client_secret=abc123"])
def test_a_user_name_alone_or_a_prefixed_key_parameter_is_a_credential_in_a_url(url):
    with pytest.raises(ValueError, match="holds") as err:
        refuse_url_credentials(url, "parameter 'judge_base_url'")
    assert "s3cr3t" not in str(err.value) and "abc123" not in str(err.value)


def test_a_piece_from_inside_the_key_in_mixed_case_without_digits_is_masked():
    key = "sk-proj-AbCdEfGhIjKlMnOpQr12"
    assert mask_secret("server said: bad key EfGhIjKlMn!", key) == "server said: bad key ***!"


def test_a_key_saved_with_a_crlf_line_end_is_still_found_in_an_argument_and_its_length_is_the_keys(monkeypatch):
    # on main: "abcdefgh\r" (a .env file with CRLF line ends) was looked for with its \r, so an argument holding the key
    # passed; "abcdefg\r", a 7-character key, was 8 long and looked for
    from instir.secrets import MIN_SECRET_LENGTH, leaked_secret

    monkeypatch.setenv("MY_API_KEY", "k" * MIN_SECRET_LENGTH + "\r")
    assert secret_env_values()["MY_API_KEY"] == "k" * MIN_SECRET_LENGTH
    assert leaked_secret("--model " + "k" * MIN_SECRET_LENGTH) == "the value of $MY_API_KEY"
    monkeypatch.setenv("MY_API_KEY", "k" * (MIN_SECRET_LENGTH - 1) + "\r")
    assert "MY_API_KEY" not in secret_env_values()
