"""The ``hf`` backend's request and result types, with no torch, transformers or verl: the server actor
(:mod:`verl_ext.cpu.hf_server`) groups requests by :class:`SamplingParams` and receives :class:`Generation` rows from
the actor process without importing either (its process starts in ~2 s instead of the ~5-7 s an import of verl
takes; issue 35). :mod:`verl_ext.cpu.hf_sampling` samples with them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SamplingParams:
    """What :func:`generate_batch` needs; :meth:`from_verl` reads verl's ``sampling_params`` dict."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    repetition_penalty: float = 1.0

    @property
    def do_sample(self) -> bool:
        return self.temperature > 0

    @classmethod
    def from_verl(cls, params: dict[str, Any]) -> "SamplingParams":
        temperature = params.get("temperature")
        top_p = params.get("top_p")
        top_k = params.get("top_k")
        rep = params.get("repetition_penalty")
        if params.get("do_sample") is False:  # agent loops may request greedy decoding explicitly
            temperature = 0.0
        return cls(
            temperature=1.0 if temperature is None else float(temperature),
            top_p=1.0 if top_p is None else float(top_p),
            top_k=-1 if top_k is None else int(top_k),
            repetition_penalty=1.0 if rep is None else float(rep),
        )


@dataclass
class Generation:
    token_ids: list[int]
    log_probs: list[float]
    stop_reason: str = "completed"  # "completed": EOS or length cap, as vLLM's server reports both
    finished_by_eos: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
