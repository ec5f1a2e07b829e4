"""The per-update memory gauge follows real allocations (a leak would show as a slope in memory/rss_mb)."""

import inspect
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from seed.allocator import find_tcmalloc
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


@pytest.mark.skipif(
    find_tcmalloc() is None or not sys.platform.startswith("linux"),
    reason="tcmalloc is not installed (scripts/setup.sh installs libtcmalloc-minimal4 where it can)",
)
def test_trim_heap_releases_tcmallocs_free_pages_when_it_is_preloaded():
    """The `seed` command runs under tcmalloc, where glibc's malloc_trim would find nothing to return."""
    code = inspect.getsource(test_trim_heap_returns_freed_blocks_that_free_alone_keeps_resident).split(":\n", 1)[1]
    script = (
        "import torch\nfrom seed.train.metrics import rss_mb, trim_heap, _heap_release\n"
        "assert _heap_release().__name__ == 'MallocExtension_ReleaseFreeMemory'\n" + textwrap.dedent(code)
    )
    env = {**os.environ, "LD_PRELOAD": find_tcmalloc()}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
