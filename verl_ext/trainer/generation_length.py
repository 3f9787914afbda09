"""Training generation shorter than validation's, on verl 0.9.1's one rollout length.

verl 0.9.1 generates training and validation with one length, ``actor_rollout_ref.rollout.response_length``
(the vLLM server's default ``max_tokens``, ``vllm_async_server.py:601-612``; the single-turn agent loop's cut,
``single_turn_agent_loop.py:35,96``). ADS trains at 8,192 tokens and validates at a longer length (§4.1; the
authors' fork adds ``rollout.val_response_length``, 14,336 = ``max_model_len`` 16,384 - 2,048 prompt tokens:
Richard-zrx/ADS ``verl/examples/grpo_trainer/train_ads.sh``). Here:

* ``actor_rollout_ref.rollout.response_length`` is the longest generation the rollout serves: validation's;
* ``data.max_response_length`` is the training length: the trainer puts it in every training row as
  :data:`MAX_TOKENS` (:func:`with_generation_cap`), measurement rollouts included;
* the agent loop :data:`AGENT_LOOP` (``actor_rollout_ref.rollout.agent.default_agent_loop``) is verl's single-turn
  loop with the row's :data:`MAX_TOKENS` as the request's ``max_tokens``, which verl's servers honour
  (``vllm_async_server.py:602-603``) up to the model's length; validation rows carry none and get the full length.

The v1 trainer keeps every response at its own length in TransferQueue (``agent_loop_tq.py``), so the longer
rollout length pads nothing in training. :func:`check_generation_length` refuses a rollout length above the
training length without this loop (training would silently generate to the validation length).
"""

from __future__ import annotations

from typing import Any

from verl.experimental.agent_loop.agent_loop import register
from verl.experimental.agent_loop.single_turn_agent_loop import SingleTurnAgentLoop

AGENT_LOOP = "verl_ext_single_turn"
MAX_TOKENS = "__max_tokens__"  # a dataset column, like verl's __rollout_n__


@register(AGENT_LOOP)
class CappedSingleTurnAgentLoop(SingleTurnAgentLoop):
    """verl's single-turn agent loop; a row with :data:`MAX_TOKENS` generates at most that many tokens."""

    async def run(self, sampling_params: dict[str, Any], **kwargs):
        cap = kwargs.pop(MAX_TOKENS, None)
        if cap is not None:
            sampling_params = {**sampling_params, "max_tokens": int(cap)}
        return await super().run(sampling_params, **kwargs)


def training_cap(config) -> int | None:
    """``data.max_response_length`` when the rollout serves longer generations (validation's), else ``None``."""
    train, served = int(config.data.max_response_length), int(config.actor_rollout_ref.rollout.response_length)
    return train if served > train else None


def check_generation_length(config) -> list[str]:
    """The problem, if any: a rollout length above the training length needs :data:`AGENT_LOOP`."""
    rollout = config.actor_rollout_ref.rollout
    loop = (rollout.get("agent") or {}).get("default_agent_loop")
    if training_cap(config) is None or loop == AGENT_LOOP:
        return []
    return [f"actor_rollout_ref.rollout.response_length={rollout.response_length} > data.max_response_length="
            f"{config.data.max_response_length} needs actor_rollout_ref.rollout.agent.default_agent_loop={AGENT_LOOP} "
            f"(got {loop}): it stops training generation at data.max_response_length and validation at the "
            "rollout's length; verl's own loop would train at the rollout's length"]


def with_generation_cap(dataframe, cap: int):
    """``dataframe`` (a ``datasets.Dataset``) with every row's generation capped at ``cap`` tokens."""
    if MAX_TOKENS in dataframe.column_names:
        raise ValueError(f"the training data already has a column {MAX_TOKENS}")
    return dataframe.add_column(MAX_TOKENS, [int(cap)] * len(dataframe))
