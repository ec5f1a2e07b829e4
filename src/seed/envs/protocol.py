"""The remote-env wire format (version 1): JSON over HTTP, standard library only.

    GET  /v1/info   -> {"version": 1, "env": NAME, "intro": str, "splits": [...]}
    POST /v1        {"version": 1, "calls": [CALL, ...]} -> {"version": 1, "results": [RESULT, ...]}

Calls run in order; each names its op and session:

    {"op": "open", "split": "train", "kwargs": {...}}     -> {"session": "s1"}
    {"op": "reset", "session": "s1", "seed": 7}            -> {"obs": OBS}
    {"op": "step", "session": "s1", "action": "up"}        -> {"obs": OBS, "reward": 0.0, "done": false, "info": {}}
    {"op": "expert_plan", "session": "s1"}                 -> {"plan": ["up", ...]}
    {"op": "close", "session": "s1"}                       -> {}

A call that fails answers {"error": "..."} in its place; the other calls of the batch are unaffected. OBS is
`Obs` as a JSON object; its images travel as base64 PNG. A request of another version is refused with HTTP 400.
"""

from __future__ import annotations

import base64
import io
from dataclasses import asdict
from typing import Any

from seed.envs.base import Obs

PROTOCOL_VERSION = 1
OPS = ("open", "reset", "step", "expert_plan", "close")


def obs_to_json(obs: Obs) -> dict[str, Any]:
    out = {k: v for k, v in asdict(obs).items() if k != "images"}
    out["images"] = [_png(image) for image in obs.images]
    return out


def obs_from_json(data: dict[str, Any]) -> Obs:
    fields = {k: data[k] for k in ("text", "task", "admissible", "won", "task_type", "intro") if k in data}
    return Obs(**fields, images=[_image(b) for b in data.get("images", [])])


def _png(image) -> str:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _image(encoded: str):
    from PIL import Image  # only where a served env sends frames

    with Image.open(io.BytesIO(base64.b64decode(encoded))) as image:
        return image.convert("RGB")
