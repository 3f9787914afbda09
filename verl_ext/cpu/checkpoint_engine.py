"""``gloo``: a checkpoint engine for verl's ``separate_async`` on CPUs (weights from the trainer to standalone rollout
replicas), loaded through verl's ``rollout.checkpoint_engine.custom_backend_module``.

verl 0.9.1 ships engines over NCCL, NIXL, HCCL, Mooncake and Kimi's ``checkpoint_engine``; on a CPU machine only
``naive`` (colocated: no transfer) registers, and ``separate_async`` refuses it (``trainer_separate_async.py:68``).
Ray's ``torch_gloo`` collective cannot stand in: it joins the process's default group, whose members are the
trainer's ranks. This engine builds a private group for each sync, as verl's engines do (``prepare`` ->
``build_topology`` -> ``init_process_group``, ``finalize`` after the transfer): a ``TCPStore`` served by the
trainer's rank 0 and a ``ProcessGroupGloo`` of that rank and every rollout worker. The sender packs verl's weight
chunks (``split_weight_chunks``) into buckets of ``update_weights_bucket_megabytes`` and broadcasts each bucket after
its pickled table of contents; receivers rebuild the tensors (``merge_weight_chunks``). Other trainer ranks only
consume their weight generator (it all-gathers FSDP shards, so every rank must iterate it). Blocking collectives run
in a thread, off the workers' event loops.

In CPU mode (``VERL_PLATFORM=cpu``) ``python -m verl_ext.main`` selects it for ``separate_async``
(:func:`verl_ext.cpu.separate_async_settings`); by hand::

    actor_rollout_ref.rollout.checkpoint_engine.backend=gloo \\
    actor_rollout_ref.rollout.checkpoint_engine.custom_backend_module=verl_ext.cpu.checkpoint_engine
"""

from __future__ import annotations

import asyncio
import pickle
import socket
from datetime import timedelta
from typing import Any, AsyncGenerator

import torch
import torch.distributed as dist
from verl.checkpoint_engine.base import (
    CheckpointEngine,
    CheckpointEngineRegistry,
    TensorMeta,
    merge_weight_chunks,
    split_weight_chunks,
)

BACKEND = "gloo"
TIMEOUT = timedelta(minutes=10)
_LAST = "last"  # table-of-contents key: no bucket follows this one
ALIGN = 64  # bytes: each chunk starts at a multiple, so the receiver can view it as any dtype


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


@CheckpointEngineRegistry.register(BACKEND)
class GlooCheckpointEngine(CheckpointEngine):
    """Broadcast of the policy's weights from trainer rank 0 to the rollout workers over a private gloo group."""

    def __init__(self, bucket_size: int, is_master: bool = False, **kwargs) -> None:
        if bucket_size <= 0:
            raise ValueError(f"checkpoint engine {BACKEND}: bucket_size must be positive, got {bucket_size}")
        self.bucket_size = int(bucket_size)
        self.rank: int | None = None
        self.store: dist.TCPStore | None = None
        self.group: dist.ProcessGroupGloo | None = None

    def prepare(self) -> dict[str, Any]:
        """Where this process would serve the group's store (only the trainer's rank 0's answer is used)."""
        import ray

        return {"host": ray.util.get_node_ip_address(), "port": _free_port()}

    @classmethod
    def build_topology(cls, actor_wg_world_size: int, rollout_world_size: int, metadata: list[dict]):
        """Rank 0: the trainer's rank 0 (``metadata[0]``, it serves the store); ranks 1..R: the rollout workers;
        the other trainer ranks: -1 (outside the group)."""
        world = 1 + rollout_world_size
        master = metadata[0]
        actor = {"rank": [0] + [-1] * (actor_wg_world_size - 1), "world_size": [world] * actor_wg_world_size,
                 "master": [master] * actor_wg_world_size}
        rollout = {"rank": list(range(1, world)), "world_size": [world] * rollout_world_size,
                   "master": [master] * rollout_world_size}
        return actor, rollout

    def init_process_group(self, rank: int, world_size: int, master: dict[str, Any]) -> None:
        self.rank = int(rank)
        if self.rank < 0:
            return
        self.store = dist.TCPStore(master["host"], int(master["port"]), int(world_size), is_master=self.rank == 0,
                                   timeout=TIMEOUT)
        self.group = dist.ProcessGroupGloo(self.store, self.rank, int(world_size), TIMEOUT)

    def finalize(self) -> None:
        self.group = None
        self.store = None
        self.rank = None

    # ------------------------------------------------------------------ transfer
    def _broadcast(self, tensor: torch.Tensor) -> None:
        self.group.broadcast(tensor, 0).wait()

    def _broadcast_object(self, obj: Any = None) -> Any:
        """``obj`` pickled from rank 0 to every rank (its length first)."""
        size = torch.zeros(1, dtype=torch.int64)
        payload = None
        if self.rank == 0:
            payload = torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8)
            size[0] = payload.numel()
        self._broadcast(size)
        if self.rank != 0:
            payload = torch.empty(int(size[0]), dtype=torch.uint8)
        self._broadcast(payload)
        return obj if self.rank == 0 else pickle.loads(payload.numpy().tobytes())

    def _send_bucket(self, toc: list[TensorMeta], bucket: torch.Tensor, length: int, last: bool) -> None:
        self._broadcast_object({"toc": toc, "length": length, _LAST: last})
        if length:
            self._broadcast(bucket[:length])

    async def send_weights(self, weights, global_steps: int | None = None):
        if self.rank is None:
            raise RuntimeError(f"checkpoint engine {BACKEND}: send_weights before init_process_group")
        if self.rank < 0:  # a trainer rank outside the group: its generator still has to run (FSDP all-gathers)
            async for _ in split_weight_chunks(weights, self.bucket_size, meta_only=True):
                pass
            return {}
        bucket = torch.empty(self.bucket_size, dtype=torch.uint8)
        toc: list[TensorMeta] = []
        offset = 0
        async for meta, chunk in split_weight_chunks(weights, self.bucket_size):
            offset = -(-offset // ALIGN) * ALIGN
            if offset + meta.chunk_size > self.bucket_size:
                await asyncio.to_thread(self._send_bucket, toc, bucket, offset, False)
                toc, offset = [], 0
            bucket[offset: offset + meta.chunk_size].copy_(chunk.to("cpu"))
            meta.offset = offset
            toc.append(meta)
            offset += meta.chunk_size
        await asyncio.to_thread(self._send_bucket, toc, bucket, offset, True)
        return {}

    def _receive_bucket(self) -> tuple[list[TensorMeta], torch.Tensor, bool]:
        head = self._broadcast_object()
        bucket = torch.empty(head["length"], dtype=torch.uint8)  # a fresh buffer: yielded tensors are views of it
        if head["length"]:
            self._broadcast(bucket)
        return head["toc"], bucket, head[_LAST]

    async def _chunks(self) -> AsyncGenerator[tuple[TensorMeta, torch.Tensor], None]:
        while True:
            toc, bucket, last = await asyncio.to_thread(self._receive_bucket)
            for meta in toc:
                yield meta, bucket[meta.offset: meta.offset + meta.chunk_size]
            if last:
                return

    async def receive_weights(self, global_steps: int | None = None):
        if self.rank is None or self.rank < 1:
            raise RuntimeError(f"checkpoint engine {BACKEND}: receive_weights on rank {self.rank} (receivers are "
                               "the rollout workers, ranks >= 1, after init_process_group)")
        async for name, tensor in merge_weight_chunks(self._chunks(), self.bucket_size):
            yield name, tensor
