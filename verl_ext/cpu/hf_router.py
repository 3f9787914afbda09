"""Routing of the ``hf`` backend's requests: all requests of one prompt to one server (rank).

The backend seeds a request by its prompt, sampling parameters, cap and its occurrence among identical requests,
counted on the rank that serves it (:mod:`verl_ext.cpu.hf_sampling`). verl's default balancer routes each request
to the least busy server, so with several ranks the ``n`` requests of a prompt were spread over them and each rank
counted its share from 0: a group's samples came in identical pairs (dp = 2), and which requests shared a seed
depended on the routing. Routed by prompt, one rank counts them all and draws what a single rank draws, whatever
the number of ranks. The CPU preset names this balancer (``rollout.router_config_path``: ``hf_router.yaml``).

:class:`PromptLoadBalancer` implements verl's ``RequestLoadBalancer`` protocol (``workers/rollout/router.py:32``,
structural: verl wraps any class the YAML names in ``ray.remote``) without importing verl or torch, and the servers
whose handles it holds are defined in a module that imports neither (:mod:`verl_ext.cpu.hf_server`; Ray imports an
actor's class module to deserialize a handle to it), so its Ray process spends ~1 s of CPU instead of ~8 s importing
them, in every CPU run.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any, Sequence

from cachetools import LRUCache  # verl's dependency, the sticky cache of its own balancer

logger = logging.getLogger(__name__)

STICKY_PROMPTS = 10_000  # prompts remembered (least recently routed forgotten first)


def prompt_key(prompt_ids: Sequence[int]) -> str:
    return hashlib.sha256(repr([int(t) for t in prompt_ids]).encode()).hexdigest()


class PromptLoadBalancer:
    """Sticky by prompt, least in flight otherwise: a prompt's first request goes to the server with the fewest
    requests in flight (the first such one in registration order), every later one to the same server while it is in
    the pool."""

    def __init__(self, servers: dict[str, Any], config: dict | None = None):  # config: verl passes the YAML
        self._servers: dict[str, Any] = dict(servers)
        self._inflight: dict[str, int] = {sid: 0 for sid in servers}
        self._server_of: LRUCache = LRUCache(maxsize=STICKY_PROMPTS)  # prompt key -> server id

    def require_acquire_fields(self) -> list[str]:
        return ["prompt_ids"]

    def require_release_fields(self) -> list[str]:
        return []

    def acquire_server(self, request_id: str, prompt_ids: Sequence[int]) -> tuple[str, Any]:
        if not self._servers:
            raise RuntimeError("no rollout server in the pool")
        key = prompt_key(prompt_ids)
        server_id = self._server_of.get(key)
        if server_id not in self._servers:
            server_id = min(self._servers, key=self._inflight.__getitem__)
        self._server_of[key] = server_id
        self._inflight[server_id] += 1
        return server_id, self._servers[server_id]

    def release_server(self, server_id: str, request_id: str | None = None) -> None:
        if self._inflight.get(server_id, 0) > 0:
            self._inflight[server_id] -= 1

    def add_servers(self, servers: dict[str, Any]) -> None:
        for sid, handle in servers.items():
            self._servers[sid] = handle
            self._inflight[sid] = 0

    def remove_servers(self, server_ids: list[str]) -> None:
        for sid in server_ids:
            self._servers.pop(sid, None)
            self._inflight.pop(sid, None)

    def get_all_servers(self) -> list[str]:
        return list(self._servers)

    def get_total_inflight(self) -> int:
        return sum(self._inflight.values())

    def get_status(self) -> dict:
        return {"servers": dict(self._inflight), "total_inflight": self.get_total_inflight(),
                "active_servers": len(self._servers), "registered_handles": list(self._servers)}

    def clear_sticky_cache(self) -> dict:
        cleared = len(self._server_of)
        self._server_of.clear()
        logger.info("hf router: forgot %d prompts' servers; in flight %s", cleared, self._inflight)
        return {"cleared_entries": cleared, "server_loads": dict(self._inflight)}
