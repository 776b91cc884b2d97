"""Suite-wide isolation: nothing a test runs writes into the user's home or real caches,
and nothing reaches the network."""

import pytest


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory, monkeypatch):
    home = tmp_path_factory.getbasetemp() / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("INSTIR_HOME", str(home / "instir"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(home / "hf"))
    monkeypatch.setenv("MPLCONFIGDIR", str(home / "mpl"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
