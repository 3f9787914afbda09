"""Routing of the ``hf`` backend's requests: all requests of one prompt to one server (rank).

The backend seeds a request by its prompt, sampling parameters, cap and its occurrence among identical requests,
counted on the rank that serves it (:mod:`verl_ext.cpu.hf_sampling`). verl's default balancer routes each request
to the least busy server, so with several ranks the ``n`` requests of a prompt were spread over them and each rank
counted its share from 0: a group's samples came in identical pairs (dp = 2), and which requests shared a seed
depended on the routing. Routed by prompt, one rank counts them all and draws what a single rank draws, whatever
the number of ranks. The CPU preset names this balancer (``rollout.router_config_path``: ``hf_router.yaml``).
"""

from __future__ import annotations

import hashlib
from typing import Any, Sequence

from verl.workers.rollout.router import GlobalRequestLoadBalancer


def prompt_key(prompt_ids: Sequence[int]) -> str:
    return hashlib.sha256(repr([int(t) for t in prompt_ids]).encode()).hexdigest()


class PromptLoadBalancer(GlobalRequestLoadBalancer):
    """verl's sticky, least-in-flight balancer keyed by the prompt's token ids instead of the request id: a prompt's
    first request goes to the least busy server, every later one to the same server."""

    def __init__(self, servers: dict[str, Any], config: dict | None = None):  # config: verl passes the YAML
        super().__init__(servers)

    def require_acquire_fields(self) -> list[str]:
        return ["prompt_ids"]

    def acquire_server(self, request_id: str, prompt_ids: Sequence[int]) -> tuple[str, Any]:
        return super().acquire_server(prompt_key(prompt_ids))
