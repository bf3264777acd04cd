"""Data-parallel / sharded training over several processes (``torchrun``): the hooks :mod:`suite.train.loop` and
:mod:`suite.train.lm` call.

One code path: with one process every function here is a no-op (``world_size == 1``), so a plain
``python -m suite.train.run ...`` trains exactly as before. Under ``torchrun --nproc_per_node N`` (or with a
process group a caller initialised, as the gloo tests do):

* every rank builds the same model from the same seed, then :func:`wrap` shards it with FSDP2
  (``torch.distributed.fsdp.fully_shard`` on each decoder block named in the model's ``_no_split_modules``,
  then on the root) or replicates it with DDP (``parallel="ddp"``, fine for small models);
* the batch of step s is still ``TokenBatches.batch(s)`` (a pure function of seed and step): every rank
  builds the same global [B, T] batch and keeps its own B / N rows (:func:`shard_rows`), so N ranks with
  per-rank batch B / N see exactly what one process with batch B sees, and resume at the exact sample;
* losses are averaged over ranks (:func:`mean`; equal rows per rank, so this is the global-batch mean) and
  gradients are averaged by FSDP2's reduce-scatter / DDP's all-reduce: the update is the one-process update;
* checkpoints stay HF-loadable: :func:`full_state` gathers the full model and optimizer state to rank 0
  (``torch.distributed.checkpoint.state_dict`` with ``full_state_dict=True``), which writes the usual
  ``checkpoint/`` folder; :func:`load_optimizer` restores it on any world size;
* only rank 0 writes files and shows progress.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

PARALLEL = ("fsdp", "ddp")


@dataclass(frozen=True)
class Dist:
    """This process's place in the job: ``rank`` in [0, world_size); rank 0 writes the outputs."""

    rank: int = 0
    world_size: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1


def context() -> Dist:
    """The default process group's rank and size, or a single process when none is initialised."""
    if dist.is_available() and dist.is_initialized():
        return Dist(dist.get_rank(), dist.get_world_size())
    return Dist()


def init_from_env(device: str) -> str:
    """Initialise the default process group when launched by torchrun (``WORLD_SIZE`` > 1 in the environment).

    Backend: nccl for ``device`` "cuda", gloo otherwise. Returns the device of this rank: ``cuda:<LOCAL_RANK>``
    for "cuda" under torchrun, else ``device`` unchanged. Raises ValueError when torchrun started more
    processes on this node than it has GPUs.
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1 or (dist.is_available() and dist.is_initialized()):
        return device
    local = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.device(device).type == "cuda"
    if cuda:
        if local >= torch.cuda.device_count():
            raise ValueError(f"LOCAL_RANK {local} but only {torch.cuda.device_count()} GPU(s) visible: "
                             f"use --nproc_per_node <= the GPU count")
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    dist.init_process_group("nccl" if cuda else "gloo")
    return device


def shutdown() -> None:
    """Destroy the default process group if one is initialised."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def shard_rows(batch: torch.Tensor, ctx: Dist) -> torch.Tensor:
    """This rank's rows of a global batch [B, ...]: rows ``rank * B/N .. (rank + 1) * B/N - 1``.

    Raises ValueError when B is not a multiple of the world size N.
    """
    B = batch.shape[0]
    if B % ctx.world_size:
        raise ValueError(f"batch_size {B} is not a multiple of the world size {ctx.world_size}")
    n = B // ctx.world_size
    return batch[ctx.rank * n:(ctx.rank + 1) * n]


def wrap(model: torch.nn.Module, ctx: Dist, parallel: str = "fsdp") -> torch.nn.Module:
    """``model`` (already on this rank's device, same weights on every rank) sharded with FSDP2 or wrapped in DDP.

    One process: returns ``model`` itself. Raises ValueError for a ``parallel`` not in ``PARALLEL``.
    """
    if parallel not in PARALLEL:
        raise ValueError(f"parallel must be one of {PARALLEL}, got {parallel!r}")
    if not ctx.active:
        return model
    if parallel == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        device_ids = [model.device.index] if getattr(model, "device", torch.device("cpu")).type == "cuda" else None
        return DistributedDataParallel(model, device_ids=device_ids)
    from torch.distributed.fsdp import fully_shard

    names = set(getattr(model, "_no_split_modules", None) or ())
    for module in [m for m in model.modules() if type(m).__name__ in names]:
        fully_shard(module)
    return fully_shard(model)


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The HF model inside a DDP wrapper (FSDP2 shards in place: the model itself)."""
    return getattr(model, "module", model)


def is_fsdp(model: torch.nn.Module) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def total(value: torch.Tensor, ctx: Dist) -> torch.Tensor:
    """Sum over ranks of a tensor, without a host sync (one process: ``value`` itself; else a float32 copy)."""
    if not ctx.active:
        return value
    value = value.detach().float().clone()
    dist.all_reduce(value)
    return value


def mean(value: torch.Tensor, ctx: Dist) -> float:
    """Mean over ranks of a scalar tensor, as a Python float (one process: ``value.item()``)."""
    return total(value, ctx).item() / ctx.world_size


def broadcast(obj, ctx: Dist):
    """Rank 0's picklable ``obj`` on every rank (one process: ``obj``)."""
    if not ctx.active:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def barrier(ctx: Dist) -> None:
    if ctx.active:
        dist.barrier()


def full_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer, ctx: Dist) -> tuple[dict | None, dict | None]:
    """Full (unsharded, CPU) model and optimizer state dicts on rank 0, for an HF-loadable checkpoint.

    A collective: every rank must call it. Returns (None, None) when the model is not FSDP-sharded (one
    process or DDP: the model's and optimizer's own state dicts are already complete on rank 0). The FSDP
    optimizer state is keyed by parameter name (``torch.distributed.checkpoint.state_dict`` layout).
    """
    if not (ctx.active and is_fsdp(model)):
        return None, None
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, get_optimizer_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_model_state_dict(model, options=options), get_optimizer_state_dict(model, optimizer, options=options)


def load_optimizer(model: torch.nn.Module, optimizer: torch.optim.Optimizer, state: dict) -> None:
    """Restore a checkpoint's optimizer ``state`` (from ``optimizer.state_dict()`` or :func:`full_state`) into
    ``optimizer`` of ``model`` (plain, DDP or FSDP2-sharded): a checkpoint resumes on any world size."""
    by_name = bool(state["state"]) and isinstance(next(iter(state["state"])), str)
    if not by_name and not is_fsdp(model):
        optimizer.load_state_dict(state)
        return
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_optimizer_state_dict

    if not by_name:  # integer ids -> parameter names, in the order the optimizer holds its parameters
        fqn = {id(p): n for n, p in unwrap(model).named_parameters()}
        order = [fqn[id(p)] for group in optimizer.param_groups for p in group["params"]]
        state = {"state": {order[i]: v for i, v in state["state"].items()},
                 "param_groups": [{**g, "params": [order[i] for i in g["params"]]} for g in state["param_groups"]]}
    set_optimizer_state_dict(model, optimizer, state, options=StateDictOptions(full_state_dict=True))
