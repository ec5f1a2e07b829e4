import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def tokenizer():
    from seed.models import load_tokenizer

    return load_tokenizer("tiny-random")
