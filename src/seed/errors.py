"""Errors that stop a command with one clear message (the `seed` command prints it and exits 1), not a traceback."""

from __future__ import annotations


class SeedError(RuntimeError):
    """Base of the run-stopping errors below."""


class CheckpointError(SeedError):
    """A saved state that cannot be trusted: unreadable, not plain data, or its checksum does not match."""


class NonFiniteError(SeedError):
    """NaN/inf weights, or too many consecutive optimizer steps skipped for NaN/inf: the run stops, nothing saved."""


class RunError(SeedError):
    """A run that cannot go on as asked: every episode faulted, a needed file is missing, the run directory holds
    another config, too many labels failed."""


class ConfigError(ValueError):
    """A config value that cannot work; the message names the key and the allowed values."""
