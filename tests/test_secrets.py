"""Telling API keys from variable names: known prefixes, random-looking values, values of secret
environment variables, and names that must stay accepted."""

import base64
import re

import pytest

from instir.secrets import (
    find_token,
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
    with pytest.raises(ValueError, match="must name an environment variable holding the key") as err:
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
    with pytest.raises(ValueError, match=r"it is the value of \$OPENAIKEY, not its name"):
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
