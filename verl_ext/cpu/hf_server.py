"""The ``hf`` rollout backend's server: the Ray actor verl's agent loop sends requests to (the backend:
:mod:`verl_ext.cpu.hf_rollout`; its replica, :mod:`verl_ext.cpu.hf_replica`, starts one per rank).

:class:`HFServer`, an async Ray actor with verl's server interface: ``generate(request_id, prompt_ids,
sampling_params, ...) -> TokenOutput``, a pause around weight updates (``abort_all_requests`` / ``resume_generation``,
verl's ``colocate_async``) and no-op other lifecycle methods. Requests that arrive together (verl's agent loop sends
all ``n`` samples of every prompt at once) are grouped into one left-padded ``generate`` call per distinct sampling
configuration, run in the actor process by :func:`~verl_ext.cpu.hf_worker.generate_on_worker`. A request's token cap
is ``min(response_length, prompt_length + response_length - len(prompt))``, the rule of vLLM's server.

This module imports neither verl nor torch (the server loads them when it starts): Ray imports an actor's class
module wherever it deserializes a handle to it, and the router (:mod:`verl_ext.cpu.hf_router`) holds every server's
handle, so a heavy module here would cost its process ~8 s of CPU importing verl in every run.

Diagnostics: with ``VERL_LOGGING_LEVEL=INFO`` in the Ray workers' environment the server logs each
batch (size, tokens, seconds). ``VERL_EXT_HF_ROLLOUT_MAX_BATCH`` (64),
``VERL_EXT_HF_ROLLOUT_BATCH_WAIT_S`` (0.1) and ``VERL_EXT_HF_ROLLOUT_BATCH_MAX_WAIT_S`` (2.0) tune
how requests are grouped: a batch starts once no request arrived for ``BATCH_WAIT_S``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from dataclasses import dataclass
from typing import Any, Optional

import ray

logger = logging.getLogger(__name__)
logger.setLevel(os.getenv("VERL_LOGGING_LEVEL", "WARN"))

MAX_BATCH = int(os.getenv("VERL_EXT_HF_ROLLOUT_MAX_BATCH", "64"))
BATCH_WAIT_S = float(os.getenv("VERL_EXT_HF_ROLLOUT_BATCH_WAIT_S", "0.1"))
BATCH_MAX_WAIT_S = float(os.getenv("VERL_EXT_HF_ROLLOUT_BATCH_MAX_WAIT_S", "2.0"))


@dataclass
class _Request:
    prompt_ids: list[int]
    max_tokens: int
    future: asyncio.Future


class _HFServerImpl:
    """Token-in/token-out server forwarding batched requests to one actor worker."""

    def __init__(self, worker, *, response_length: int, prompt_length: int, eos_token_ids, pad_token_id: int,
                 max_model_len: Optional[int] = None, seed: Optional[int] = 42):
        # here, not at the top: only the server's own process needs them (see the module's docstring)
        from verl.workers.rollout.replica import TokenOutput

        from verl_ext.cpu.hf_sampling import SamplingParams
        from verl_ext.cpu.hf_worker import generate_on_worker

        self._token_output, self._sampling_params = TokenOutput, SamplingParams
        self._generate_on_worker = generate_on_worker
        self.worker = worker
        self.seed = None if seed is None else int(seed)  # base of the per-request seeds; None: global RNG
        self.response_length = int(response_length)
        self.prompt_length = int(prompt_length)
        self.max_model_len = int(max_model_len) if max_model_len else None
        self.eos_token_ids = [int(e) for e in eos_token_ids]
        self.pad_token_id = int(pad_token_id)
        self.global_steps = 0
        self._queues: dict[Any, list[_Request]] = {}  # SamplingParams -> requests
        self._runner: Optional[asyncio.Task] = None
        # verl's colocate_async pauses generation around each weight update (abort_all_requests ... resume_generation):
        # no batch starts while paused, and the pause waits for the batch running on the old weights to finish
        self._open = asyncio.Event()
        self._open.set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.num_requests = 0
        self.num_batches = 0

    def _cap(self, prompt_len: int, sampling_params: dict[str, Any]) -> int:
        if sampling_params.get("max_tokens") is not None:
            cap = int(sampling_params["max_tokens"])
        elif sampling_params.get("max_new_tokens") is not None:
            cap = int(sampling_params["max_new_tokens"])
        else:
            cap = min(self.response_length, self.prompt_length + self.response_length - prompt_len)
        if self.max_model_len is not None:
            cap = min(cap, self.max_model_len - prompt_len)
        if cap < 1:
            raise ValueError(f"prompt of {prompt_len} tokens leaves no room to generate")
        return cap

    async def generate(self, request_id=None, *, prompt_ids, sampling_params, image_data=None, video_data=None,
                       **kwargs):
        if image_data or video_data or kwargs.get("audio_data"):
            raise NotImplementedError("the hf rollout backend is text-only")
        prompt_ids = [int(t) for t in prompt_ids]
        params = self._sampling_params.from_verl(dict(sampling_params or {}))
        fut = asyncio.get_running_loop().create_future()
        cap = self._cap(len(prompt_ids), sampling_params or {})
        self._queues.setdefault(params, []).append(_Request(prompt_ids, cap, fut))
        self.num_requests += 1
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._run())
        gen, steps = await fut
        return self._token_output(
            token_ids=gen.token_ids,
            log_probs=gen.log_probs,
            stop_reason=gen.stop_reason,
            extra_fields={"global_steps": steps},
        )

    async def _collect(self) -> None:
        """Wait until requests stop arriving (verl's agent loop submits a wave over a few ms)."""
        deadline = time.monotonic() + BATCH_MAX_WAIT_S
        seen = -1
        while time.monotonic() < deadline:
            queued = sum(map(len, self._queues.values()))
            if queued == seen or queued >= MAX_BATCH:
                return
            seen = queued
            await asyncio.sleep(BATCH_WAIT_S)

    async def _run(self):
        while any(self._queues.values()):
            await self._collect()
            await self._open.wait()
            params = next(p for p, q in self._queues.items() if q)
            queue = self._queues[params]
            batch, self._queues[params] = queue[:MAX_BATCH], queue[MAX_BATCH:]
            start = time.perf_counter()
            self._idle.clear()
            try:
                gens, steps = await self.worker.__ray_call__.remote(
                    self._generate_on_worker,
                    [r.prompt_ids for r in batch],
                    [r.max_tokens for r in batch],
                    params,
                    self.eos_token_ids,
                    self.pad_token_id,
                    self.seed,
                )
                self.global_steps = steps
                self.num_batches += 1
                logger.info(
                    "hf rollout: batch of %d (%d queued) generated %d tokens in %.2f s (%.2f s in the worker, "
                    "%s threads)",
                    len(batch), sum(map(len, self._queues.values())), sum(len(g.token_ids) for g in gens),
                    time.perf_counter() - start, gens[0].extra.get("worker_seconds", float("nan")) if gens else 0.0,
                    gens[0].extra.get("torch_threads") if gens else None,
                )
                for r, g in zip(batch, gens, strict=True):
                    if not r.future.done():
                        r.future.set_result((g, steps))
            except Exception as e:  # fail this batch's requests, keep serving
                logger.exception("hf rollout batch failed")
                for r in batch:
                    if not r.future.done():
                        r.future.set_exception(e)
            finally:
                self._idle.set()

    async def abort_all_requests(self, reject_request: bool = False):
        """Pause (verl's ``abort_replicas`` before the trainer takes the weights): the batch generating now finishes
        on the weights it started with (a generate call cannot be cut short, so nothing is returned partial); queued
        and new requests wait for :meth:`resume_generation`."""
        self._open.clear()
        await self._idle.wait()

    async def resume_generation(self):
        """After the weight update: the waiting requests generate with the new weights."""
        self._open.set()

    # Other lifecycle methods called by RolloutReplica / CheckpointEngineManager: nothing to do.
    async def wake_up(self):
        return None

    async def sleep(self):
        return None

    async def clear_kv_cache(self):
        return None

    async def release_kv_cache(self):
        return None

    async def resume_kv_cache(self):
        return None

    async def start_profile(self, **kwargs):
        return None

    async def stop_profile(self):
        return None

    async def set_global_steps(self, global_steps: int):
        self.global_steps = int(global_steps)

    async def stats(self) -> dict[str, int]:
        return {"requests": self.num_requests, "batches": self.num_batches}


HFServer = ray.remote(num_cpus=0)(_HFServerImpl)
