"""The per-update memory gauge follows real allocations (a leak would show as a slope in memory/rss_mb)."""
import sys

import pytest
import torch

from seed.train.metrics import rss_mb


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_rss_gauge_sees_an_allocation_and_its_release():
    before = rss_mb()
    block = torch.ones(64 * 2**20 // 4 * 4)  # 256 MB, touched
    during = rss_mb()
    del block
    assert during - before > 200
    assert rss_mb() < during - 200
