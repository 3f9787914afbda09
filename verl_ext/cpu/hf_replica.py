"""The ``hf`` rollout backend's replica (verl's ``workers/rollout/replica.py``), registered as ``"hf"`` in
``RolloutReplicaRegistry`` (:mod:`verl_ext.cpu.plugin`): one :class:`~verl_ext.cpu.hf_server.HFServer` per rank, a
hybrid actor rank (``sync``, ``colocate_async``) or a standalone rollout worker (``separate_async``)."""

from __future__ import annotations

import os

from verl.workers.rollout.replica import RolloutReplica

from verl_ext.cpu.hf_server import HFServer
from verl_ext.cpu.hf_worker import special_ids_on_worker


class HFReplica(RolloutReplica):
    """One :class:`HFServer` per rank: an actor rank (hybrid) or a standalone rollout worker (``separate_async``)."""

    async def launch_servers(self):
        if len(self.workers) != 1:
            raise NotImplementedError(
                f"the hf rollout backend serves one actor rank per replica (rollout tp = dp = pp = 1), got "
                f"{len(self.workers)} workers"
            )
        eos, pad = await self.workers[0].__ray_call__.remote(special_ids_on_worker)
        name = f"hf_server_{self.replica_rank}{self.name_suffix}_{os.getpid()}"
        server = HFServer.options(name=name, max_concurrency=self.max_concurrency).remote(
            self.workers[0],
            response_length=self.config.response_length,
            prompt_length=self.config.prompt_length,
            eos_token_ids=eos,
            pad_token_id=pad,
            max_model_len=self.config.max_model_len,
            seed=getattr(self.config, "seed", 42),
        )
        self.servers = [server]
        self._server_handle = server
        self._server_address = name
