"""The suite's own isolation: in-process Hugging Face calls are offline, so a model id that is not
in the cache fails at once instead of retrying against the network."""


def test_huggingface_hub_runs_offline_in_the_test_process():
    from huggingface_hub import constants

    assert constants.HF_HUB_OFFLINE is True
