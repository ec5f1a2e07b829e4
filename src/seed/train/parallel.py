"""The trainer's processes: one (`SingleProcess`) or N FSDP2 ranks (`FSDPRanks`), behind one `Ranks` interface.

`seed.train.rl.train` reads the same for both: rank 0 collects (rollouts, analysis, re-scores) and records, every
rank holds the whole batch and trains its share of each mini-batch. The distributed machinery below this
(process groups, sharding, sharded checkpoints) is `seed.dist.fsdp`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import torch
import torch.distributed as dist

from seed.dist.fsdp import (
    DataParallel,
    full_state_dict,
    optimizer_state_by_name,
    save_sharded,
    shard_policy,
)
from seed.errors import NonFiniteError
from seed.models.load import trainable_parameters
from seed.models.weights import frozen_copy
from seed.train.checkpoint import prune_checkpoints, save_checkpoint
from seed.train.optim import make_optimizer


class Ranks(Protocol):
    """What `train` asks of its processes."""

    is_main: bool  # this process collects, analyses, writes metrics and episode files
    dp: DataParallel | None  # this rank's share of each mini-batch (None: all of it)

    def setup(self, components, state: dict | None) -> torch.optim.Optimizer:
        """Load a checkpoint's weights (None: fresh) and return the optimizer, with its state when resuming."""
        ...

    def share(self, batch):
        """The main process's batch, on every rank."""
        ...

    def after_update(self, components) -> None:
        """Bring what rank 0 rolls out with up to date with the weights the update wrote."""
        ...

    def save_checkpoint(self, components, optimizer, run_dir: Path, update: int, meta: dict, keep: int) -> None: ...


class SingleProcess:
    """The trainer's view of its processes when there is one."""

    is_main = True
    dp = None

    def setup(self, components, state: dict | None) -> torch.optim.Optimizer:
        """Load the checkpoint's weights and return the optimizer (with its state when resuming)."""
        optimizer = make_optimizer(components.policy.model, components.cfg)
        if state is not None:
            components.policy.model.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
        return optimizer

    def share(self, obj):
        return obj

    def after_update(self, components) -> None:
        pass

    def save_checkpoint(self, components, optimizer, run_dir: Path, update: int, meta: dict, keep: int) -> None:
        save_checkpoint(
            run_dir,
            update,
            {"model": components.policy.model.state_dict(), "optimizer": optimizer.state_dict(), **meta},
            keep=keep,
        )


class FSDPRanks:
    """`train`'s view of N FSDP2 processes: rank 0 rolls out, analyses, scores for the teacher and writes, on a
    full replica of the policy refreshed after every update (served by generation workers when configured);
    every rank trains its share of each mini-batch.
    Checkpoints are sharded folders; they resume in one process or in N."""

    def __init__(self):
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.is_main = self.rank == 0
        self.dp = DataParallel(self.rank, self.world)
        self.names: list[str] = []

    def setup(self, components, state: dict | None):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

        cfg, model = components.cfg, components.policy.model
        if state is not None:
            model.load_state_dict(state["model"])
        self.names = list(trainable_parameters(model))
        if self.is_main:  # generation workers, where configured, serve the replica's weights (rollout_backend)
            components.replica = components.policy.on(frozen_copy(model))
        components.policy = shard_policy(components.policy)
        optimizer = make_optimizer(model, cfg)
        if state is not None:
            set_optimizer_state_dict(
                model,
                optimizer,
                optimizer_state_by_name(state["optimizer"], self.names),
                options=StateDictOptions(full_state_dict=True),
            )
        return optimizer

    def share(self, batch):
        box = [batch]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def after_update(self, components) -> None:
        full = full_state_dict(components.policy.model)
        if self.is_main:
            components.replica.load_weights(full)

    def save_checkpoint(self, components, optimizer, run_dir: Path, update: int, meta: dict, keep: int) -> None:
        """A sharded checkpoint (`checkpoints/update_N.dcp/`), once every rank's shard is finite; it resumes in one
        process or in N."""
        from torch.distributed.tensor import DTensor

        shards = [p.to_local() if isinstance(p, DTensor) else p for p in components.policy.model.parameters()]
        if not self.dp.all_true(all(bool(torch.isfinite(t).all()) for t in shards if t.is_floating_point())):
            raise NonFiniteError(
                f"checkpoint of update {update}: NaN/inf weights on a rank; not saved. Lower algo.lr "
                f"or algo.grad_clip and resume from the last checkpoint"
            )
        save_sharded(
            components.policy.model, optimizer, Path(run_dir) / "checkpoints" / f"update_{update:05d}.dcp", meta
        )
        if self.is_main:
            prune_checkpoints(run_dir, keep)
