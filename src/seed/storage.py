"""Files a run keeps, read and written so that damage is detected and nothing executes code on load.

`save_verified` / `load_verified`: tensors and plain data only, a SHA-256 over all of it, atomic temp + rename;
`torch.load(weights_only=True)` refuses any pickled object that is not plain data, and the checksum refuses a
truncated or altered file. `read_jsonl`: the rows of a JSON-lines file, skipping a torn trailing line (a write
killed midway) or any undecodable line, and saying so.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path

import torch

from seed.errors import CheckpointError

log = logging.getLogger(__name__)


def payload_digest(obj) -> str:
    """SHA-256 over a nest of dicts, lists, tensors and scalars, in iteration order (which a load preserves)."""
    h = hashlib.sha256()
    _feed(h, obj)
    return h.hexdigest()


def _feed(h, obj) -> None:
    if isinstance(obj, torch.Tensor):
        t = obj.detach().cpu().contiguous().reshape(-1)
        h.update(f"T{t.dtype}{tuple(obj.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    elif isinstance(obj, dict):
        h.update(f"D{len(obj)}".encode())
        for k, v in obj.items():
            h.update(repr(k).encode())
            _feed(h, v)
    elif isinstance(obj, (list, tuple)):
        h.update(f"L{len(obj)}".encode())
        for v in obj:
            _feed(h, v)
    else:
        h.update(f"S{type(obj).__name__}:{obj!r}".encode())


def save_verified(payload: dict, path: Path) -> Path:
    """torch.save with a checksum, atomically: a reader sees the old file or the whole new one."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save({**payload, "checksum": payload_digest(payload)}, tmp)
    os.replace(tmp, path)
    return path


def load_verified(path: Path) -> dict:
    """The dict saved by `save_verified`; raises CheckpointError unless it is plain data and verifies."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated zip, planted pickle, empty file, missing file: refused the same way
        raise CheckpointError(f"{path}: cannot be read safely ({type(exc).__name__}: {str(exc)[:200]})") from exc
    if not isinstance(state, dict) or "checksum" not in state:
        raise CheckpointError(f"{path}: no checksum (not written by this version of seed)")
    expected = state.pop("checksum")
    if payload_digest(state) != expected:
        raise CheckpointError(f"{path}: checksum mismatch (the file is damaged)")
    return state


def read_jsonl(path: Path) -> list[dict]:
    """The JSON objects of a JSON-lines file ([] if absent); a torn or undecodable line is skipped, with a warning."""
    path = Path(path)
    if not path.exists():
        return []
    rows, bad = [], []
    for n, raw in enumerate(path.read_bytes().splitlines(), 1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            bad.append(n)
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            bad.append(n)
    if bad:
        log.warning("%s: skipped %d damaged line(s) (line %s)", path, len(bad), ", ".join(map(str, bad[:5])))
    return rows


def write_jsonl_rows(path: Path, rows: list[dict]) -> None:
    """Replace a JSON-lines file atomically."""
    atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in rows))


def atomic_write_text(path: Path, text: str) -> None:
    """Write a text file via temp + rename."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
