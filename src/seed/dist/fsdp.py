"""FSDP2 data-parallel training: N processes (gloo on CPU, NCCL on GPU) share one update of the policy.

Every rank holds the whole batch (rollouts are gathered before the update) and a shard of the weights. The
algorithm code is unchanged: `policy_update(..., dp=DataParallel())` gives each rank every N-th micro-batch of each
mini-batch (padded with zero-weight micro-batches so that every rank runs the same number of forwards and
backwards, as FSDP's collectives require) and keeps the loss weights of the whole mini-batch, scaled by N
against FSDP's gradient averaging, so the step equals the single-process step up to float reordering.

Checkpoints: `save_sharded` writes one torch.distributed.checkpoint folder (each rank its shard, written to a
temporary name and renamed when complete); `load_sharded_into_one_process` reads it back as a plain state dict
for a single-process run; `export_hf` writes a plain Hugging Face folder (LoRA merged when present).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist

from seed.errors import CheckpointError
from seed.models.load import trainable_parameters
from seed.storage import load_verified, save_verified


def init_process_group(rank: int, world: int, backend: str | None = None, port: int = 29511) -> None:
    """torchrun sets the rendezvous variables; a spawned rank gets them here."""
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(port))
    dist.init_process_group(backend or ("nccl" if torch.cuda.is_available() else "gloo"), rank=rank, world_size=world)


def launch(fn: Callable, world: int, *args, port: int = 29511) -> None:
    """Run `fn(rank, world, *args)` in `world` fresh processes with a process group each (torch.multiprocessing).
    `torchrun --nproc-per-node N` does the same from the command line."""
    import torch.multiprocessing as mp

    mp.spawn(_entry, args=(world, fn, port, args), nprocs=world, join=True)


def _entry(rank: int, world: int, fn: Callable, port: int, args: tuple) -> None:
    if torch.cuda.is_available():
        torch.cuda.set_device(rank % torch.cuda.device_count())
    init_process_group(rank, world, port=port)
    try:
        fn(rank, world, *args)
    finally:
        dist.destroy_process_group()


def shard_policy(backend):
    """`backend` with its model fully_shard-ed: every decoder layer and the root (embeddings, final norm and head
    stay together, so tied embeddings work), scoring by one root forward per call. FSDP averages gradients over
    ranks (gloo has no pre-scaled sum), so `DataParallel.share` scales each rank's losses by the world size."""
    from torch.distributed.fsdp import fully_shard

    model = backend.model
    for layer in model.get_decoder().layers:
        fully_shard(layer)
    fully_shard(model)
    return backend.with_options(plain_forward=True)


class DataParallel:
    """The rank's share of the micro-batches, and the reductions `policy_update` needs."""

    def __init__(self, rank: int | None = None, world: int | None = None):
        self.rank = dist.get_rank() if rank is None else rank
        self.world = dist.get_world_size() if world is None else world

    def share(self, micros: list[list[int]]) -> list[tuple[list[int], float]]:
        """Micro-batches rank, rank + N, ...; padded to ceil(len / N) with zero-weight repeats of the first.
        The loss scale is N: FSDP's reduce-scatter averages, and the whole-mini-batch weights want a sum."""
        mine = [(m, float(self.world)) for m in micros[self.rank :: self.world]]
        per_rank = -(-len(micros) // self.world)
        return mine + [(micros[0], 0.0)] * (per_rank - len(mine))

    def sum_dict(self, values: dict[str, float]) -> dict[str, float]:
        keys = sorted(values)
        t = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64, device=_collective_device())
        dist.all_reduce(t)
        return dict(zip(keys, t.tolist()))

    def all_true(self, flag: bool) -> bool:
        t = torch.tensor([0.0 if flag else 1.0], device=_collective_device())
        dist.all_reduce(t)
        return bool(t.item() == 0)


def _collective_device() -> torch.device:
    """Where a reduction's tensor must live: NCCL reduces GPU tensors only, gloo CPU ones."""
    if dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def full_state_dict(model) -> dict[str, torch.Tensor]:
    """The whole model's weights on rank 0's CPU (empty on the others)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    return get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))


def save_sharded(model, optimizer, path: Path, meta: dict | None = None) -> None:
    """Each rank writes its shard of model + optimizer (torch.distributed.checkpoint); rank 0 adds `meta.pt` (update,
    RNG, config, ... and the parameter names). The folder appears under its final name only when complete."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    if dist.get_rank() == 0 and tmp.exists():
        shutil.rmtree(tmp)
    dist.barrier()
    model_sd, optim_sd = get_state_dict(model, optimizer)
    dcp.save({"model": model_sd, "optimizer": optim_sd}, checkpoint_id=str(tmp))
    dist.barrier()
    if dist.get_rank() == 0:
        names = list(trainable_parameters(model))
        save_verified({**(meta or {}), "parameter_names": names, "files_sha256": _folder_digest(tmp)}, tmp / "meta.pt")
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    dist.barrier()


def _folder_digest(folder: Path) -> str:
    """SHA-256 over every shard file of a checkpoint folder (names and bytes), meta.pt excepted."""
    h = hashlib.sha256()
    for f in sorted(p for p in Path(folder).iterdir() if p.is_file() and p.name != "meta.pt"):
        h.update(f.name.encode() + b"\0")
        with f.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 22), b""):
                h.update(block)
    return h.hexdigest()


class _MetadataUnpickler(pickle.Unpickler):
    """DCP stores its `.metadata` as a pickle; only the plain classes it is made of may appear in one."""

    def find_class(self, module: str, name: str):
        allowed = (
            module.startswith("torch.distributed.checkpoint.")
            or (
                module == "torch"
                and (
                    name == "Size"
                    or isinstance(getattr(torch, name, None), (torch.dtype, torch.layout, torch.memory_format))
                )
            )
            or (module == "pathlib" and name in ("PosixPath", "PurePosixPath", "WindowsPath", "PureWindowsPath"))
            or (module == "torch.serialization" and name == "_get_layout")  # torch.strided etc. by name
            or (module == "collections" and name == "OrderedDict")
        )
        if not allowed:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in checkpoint metadata")
        return super().find_class(module, name)


def _check_sharded(path: Path) -> dict:
    """The verified meta of a sharded checkpoint; raises CheckpointError before DCP unpickles anything unsafe."""
    path = Path(path)
    meta = load_verified(path / "meta.pt")
    if meta.pop("files_sha256", None) != _folder_digest(path):
        raise CheckpointError(f"{path}: checksum mismatch (a shard file is damaged)")
    try:
        with (path / ".metadata").open("rb") as f:
            _MetadataUnpickler(f).load()
    except Exception as exc:
        raise CheckpointError(f"{path}/.metadata: cannot be read safely ({exc})") from exc
    return meta


def load_sharded_into_one_process(path: Path) -> dict:
    """A sharded checkpoint as the single-process one: {"model", "optimizer" (index-keyed), + meta}; no process
    group needed."""
    import tempfile

    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    meta = _check_sharded(path)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "full.pt"
        dcp_to_torch_save(str(path), str(out))
        state = torch.load(out, map_location="cpu", weights_only=True)
    names = meta.pop("parameter_names", None)
    if names is not None:
        state["optimizer"] = optimizer_state_by_index(state["optimizer"], names)
    return {**meta, **state}


def export_hf(model, tokenizer, state_dict: dict[str, torch.Tensor], out_dir: Path) -> Path:
    """A plain Hugging Face folder from a full state dict; LoRA adapters are merged into the base weights."""
    from peft import PeftModel

    model.load_state_dict(state_dict)
    if isinstance(model, PeftModel):
        model = model.merge_and_unload()
    out_dir = Path(out_dir)
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    os.replace(tmp, out_dir)
    return out_dir


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def optimizer_state_by_name(optimizer_state: dict, names: list[str]) -> dict:
    """torch.optim's index-keyed state dict -> the parameter-name-keyed one torch.distributed.checkpoint uses."""
    return {
        "state": {names[i]: v for i, v in optimizer_state["state"].items()},
        "param_groups": [{**g, "params": [names[i] for i in g["params"]]} for g in optimizer_state["param_groups"]],
    }


def optimizer_state_by_index(optimizer_state: dict, names: list[str]) -> dict:
    index = {n: i for i, n in enumerate(names)}
    return {
        "state": {index[n]: v for n, v in optimizer_state["state"].items()},
        "param_groups": [{**g, "params": [index[n] for n in g["params"]]} for g in optimizer_state["param_groups"]],
    }
