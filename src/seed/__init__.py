"""seed: SEED (self-evolving on-policy distillation) and outcome-RL baselines for multi-turn LLM agents."""

import os

# Bound oneDNN's kernel caches before torch creates its first CPU kernel. Both keep one compiled kernel per
# distinct matmul shape (up to 1024 each by default), and every update brings new shapes (prompt widths and
# batch sizes vary), so with the defaults RSS climbs for dozens of updates. 64 entries hold a decode step's
# working set (benchmarks/kernel_caches.py; its figures are in benchmarks/RESULTS.md). A value the user set wins.
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "64")  # oneDNN's own primitive cache
os.environ.setdefault("LRU_CACHE_CAPACITY", "64")  # ideep's matmul/linear primitive cache inside PyTorch

__version__ = "0.1.0"
