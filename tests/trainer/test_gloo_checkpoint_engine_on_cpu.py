"""The CPU checkpoint engine of ``separate_async`` (:mod:`verl_ext.cpu.checkpoint_engine`) moves every weight exactly:
one trainer rank sends, two rollout ranks receive, a second trainer rank outside the group only runs its generator;
tensors of several dtypes, larger than a bucket (split and merged) and smaller (packed several to a bucket, each
chunk aligned so it can be viewed as its dtype). In threads of one process, no Ray."""

from __future__ import annotations

import asyncio
import threading

import pytest
import torch

from verl_ext.cpu.checkpoint_engine import BACKEND, GlooCheckpointEngine, _free_port

BUCKET = 1024  # bytes


def weights() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "embed.weight": torch.randn(40, 16, generator=g),  # 2,560 bytes: three chunks
        "layer.0.bias": torch.randn(3, generator=g).to(torch.bfloat16),  # 6 bytes: packed, then realigned
        "layer.0.weight": torch.randn(7, 5, generator=g).to(torch.bfloat16),
        "layer.0.codes": torch.arange(3, dtype=torch.int8),  # 3 bytes: the next chunk would start at an odd byte
        "norm.weight": torch.randn(17, generator=g),
        "head.weight": torch.randn(256, generator=g),  # exactly one bucket
    }


def run(ranks: dict[int, callable]) -> dict[int, object]:
    out, errors = {}, []

    def target(rank, fn):
        try:
            out[rank] = asyncio.run(fn())
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append((rank, e))

    threads = [threading.Thread(target=target, args=item) for item in ranks.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    return out


def test_rollout_ranks_receive_every_weight_exactly():
    sent = weights()
    actor, rollout = GlooCheckpointEngine.build_topology(2, 2, [{"host": "127.0.0.1", "port": _free_port()}, {}])
    assert actor["rank"] == [0, -1] and rollout["rank"] == [1, 2] and set(actor["world_size"]) == {3}
    consumed = []

    def generator(record=None):
        for name, tensor in sent.items():
            if record is not None:
                record.append(name)
            yield name, tensor

    def side(kwargs: dict, i: int, body):
        async def fn():
            engine = GlooCheckpointEngine(bucket_size=BUCKET)
            engine.init_process_group(**{k: v[i] for k, v in kwargs.items()})
            try:
                return await body(engine)
            finally:
                engine.finalize()
        return fn

    async def send(engine):
        return await engine.send_weights(generator())

    async def outside(engine):
        return await engine.send_weights(generator(consumed))

    async def receive(engine):
        return [(name, tensor.clone()) async for name, tensor in engine.receive_weights()]

    out = run({0: side(actor, 0, send), -1: side(actor, 1, outside), 1: side(rollout, 0, receive),
               2: side(rollout, 1, receive)})
    assert consumed == list(sent)
    for rank in (1, 2):
        got = out[rank]
        assert [name for name, _ in got] == list(sent)
        for name, tensor in got:
            assert tensor.dtype == sent[name].dtype and tensor.shape == sent[name].shape
            assert torch.equal(tensor, sent[name]), name


def test_misuse_is_refused():
    engine = GlooCheckpointEngine(bucket_size=BUCKET)
    with pytest.raises(RuntimeError, match="before init_process_group"):
        asyncio.run(engine.send_weights(iter([])))
    with pytest.raises(ValueError, match="bucket_size"):
        GlooCheckpointEngine(bucket_size=0)
    from verl.checkpoint_engine.base import CheckpointEngineRegistry

    assert CheckpointEngineRegistry.get(BACKEND) is GlooCheckpointEngine
