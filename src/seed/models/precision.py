"""Which arithmetic the models run in: bf16 autocast where the hardware has native bf16 matmuls, fp32 elsewhere."""

from __future__ import annotations

import contextlib
from pathlib import Path

import torch


def cpu_supports_bf16() -> bool:
    """True where the CPU has native bf16 matmuls (AMX or AVX512-BF16); elsewhere bf16 autocast is slower."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


def autocast_dtype(device: torch.device, precision: str) -> torch.dtype | None:
    """The autocast dtype for `precision` in {auto, bf16, fp32} on this device, None for no autocast."""
    if precision == "fp32":
        return None
    if device.type == "cuda":
        return torch.bfloat16
    if precision == "bf16" or cpu_supports_bf16():
        return torch.bfloat16
    return None


def autocast_context(device: torch.device, dtype: torch.dtype | None):
    """Autocast to `dtype` on `device`'s type, or nothing where `dtype` is None (fp32)."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)
