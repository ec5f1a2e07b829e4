"""The per-update memory gauge follows real allocations (a leak would show as a slope in memory/rss_mb)."""
import sys

import pytest
import torch

from seed.train.metrics import phase_peak, process_peak_rss_mb, rss_mb, trim_heap


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_rss_gauge_sees_an_allocation_and_its_release():
    before = rss_mb()
    block = torch.ones(64 * 2**20 // 4 * 4)  # 256 MB, touched
    during = rss_mb()
    del block
    assert during - before > 200
    assert rss_mb() < during - 200


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc; malloc_trim is glibc's")
def test_trim_heap_returns_freed_blocks_that_free_alone_keeps_resident():
    blocks = [torch.ones(16 * 1024) for _ in range(4000)]  # 250 MB in 64 KB blocks: inside the C heap
    survivor = blocks[-1]  # keeps the heap's top in use, so free() alone cannot shrink it
    full = rss_mb()
    del blocks
    assert rss_mb() > full - 50  # freed, still resident
    assert trim_heap()
    assert rss_mb() < full - 200
    assert survivor.sum() == 16 * 1024


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="resets /proc/self/clear_refs")
def test_phase_peak_sees_a_transient_allocation_and_the_process_peak_survives_its_resets():
    stats: dict = {}
    with phase_peak(stats, "spike"):
        block = torch.ones(64 * 2**20)  # 256 MB, touched, freed before the phase ends
        del block
    with phase_peak(stats, "quiet"):
        pass
    assert stats["memory/peak_spike_mb"] > stats["memory/peak_quiet_mb"] + 200
    assert process_peak_rss_mb() >= stats["memory/peak_spike_mb"]  # the second reset did not forget the spike
