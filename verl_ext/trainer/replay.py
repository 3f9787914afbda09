"""The trainer's store of rollouts kept across steps for a replaying rollout filter (CBS).

The filter decides by stable id (``RolloutView.rollout_id``) what is kept and what is replayed; this store
holds, for each kept id, every field the actor update reads (the batch's ``fields`` after advantages: prompt
and response ids, masks, old log-probs, advantages, rewards, entropy, ...) and the trajectory's tags, copied
out of TransferQueue before verl clears the step. A replayed rollout goes back into the step's partition
under a fresh key with exactly those fields, so it trains with its **stored** old log-probs (off-policy
ratio) and its advantage from generation time. The store is saved with each checkpoint
(``global_step_N/replay_store.pt``) and restored on resume.

Rows live in driver memory, one dict of per-row tensors each (about 30 bytes per token: a 4096-token
response costs ~0.2 MB, a 2048-rollout buffer ~0.5 GB).

The trainer's replay steps, each a function :mod:`verl_ext.trainer.mode` calls: :func:`sync_replay` after the filter
(replayed rows into the step's TransferQueue partition, the stored ones out of it), :func:`zero_trainer_fields` on the
padding rows of the cut or grown actor batch, and before the update :func:`recompute_replayed`, one no-grad pass of
the current policy for the ``decoupled`` correction and for a filter that needs the entropy at a rollout's latest use.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
import torch
import transfer_queue as tq
from tensordict import NonTensorData, NonTensorStack, TensorDict
from transfer_queue import KVBatchMeta
from verl.workers.utils.padding import response_from_nested

from verl_ext.axes.base import RolloutFilter

FILE = "replay_store.pt"
JAGGED, DENSE, OBJECT = "jagged", "dense", "object"
# Per-response-token fields the trainer adds after generation; verl's padding template copies them
# from a real row, so rows padded after the filter get zeros of their one-token response.
TRAINER_TOKEN_FIELDS = ("old_log_probs", "entropy", "ref_log_prob", "values", "advantages", "returns",
                        "token_level_rewards", "rollout_is_weights")


def _split(fields: TensorDict) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """Per-field kind and one dict of values per row."""
    kinds, columns = {}, {}
    for name in fields.keys():
        value = fields.get(name)
        if isinstance(value, torch.Tensor):
            kinds[name] = JAGGED if value.is_nested else DENSE
            columns[name] = [t.clone() for t in value.unbind()]
        elif isinstance(value, NonTensorStack):
            kinds[name], columns[name] = OBJECT, value.tolist()
        elif isinstance(value, NonTensorData):
            kinds[name], columns[name] = OBJECT, [value.data] * fields.batch_size[0]
        else:
            raise TypeError(f"replay store: field {name!r} of type {type(value).__name__} is not supported")
    return kinds, [{name: col[i] for name, col in columns.items()} for i in range(fields.batch_size[0])]


def _join(kinds: dict[str, str], rows: list[dict[str, Any]]) -> TensorDict:
    out = {}
    for name, kind in kinds.items():
        values = [r[name] for r in rows]
        if kind == JAGGED:
            out[name] = torch.nested.as_nested_tensor(values, layout=torch.jagged)
        elif kind == DENSE:
            out[name] = torch.stack(values)
        else:
            out[name] = NonTensorStack(*values)
    return TensorDict(out, batch_size=len(rows))


def fresh_key() -> str:
    """A trajectory key in verl's ``{uid}_{session}_{index}`` form (no ``_`` inside the uid)."""
    return f"{uuid.uuid4()}_0_0"


class ReplayStore:
    def __init__(self):
        self.kinds: dict[str, str] = {}
        self.rows: dict[int, dict[str, Any]] = {}  # id -> field values
        self.tags: dict[int, dict[str, Any]] = {}

    def __len__(self) -> int:
        return len(self.rows)

    def ids(self) -> np.ndarray:
        return np.array(sorted(self.rows), dtype=np.int64)

    def add(self, ids: np.ndarray, fields: TensorDict, tags: list[dict[str, Any]]) -> None:
        """Keep the rows of ``fields`` (batch order = ``ids``) with their trajectory tags."""
        if len(ids) == 0:
            return
        kinds, rows = _split(fields)
        if self.kinds and kinds != self.kinds:
            raise RuntimeError(f"replay store: fields {sorted(kinds)} differ from the stored rows' {sorted(self.kinds)}")
        self.kinds = kinds
        for i, row, tag in zip(np.asarray(ids).tolist(), rows, tags):
            self.rows[int(i)], self.tags[int(i)] = row, dict(tag)

    def keep_only(self, ids: np.ndarray) -> None:
        keep = {int(i) for i in ids}
        for i in [i for i in self.rows if i not in keep]:
            del self.rows[i], self.tags[i]

    def batch(self, ids: np.ndarray) -> tuple[TensorDict, list[dict[str, Any]]]:
        """The stored fields of ``ids`` (in that order) and their tags marked ``is_replay``."""
        missing = [int(i) for i in ids if int(i) not in self.rows]
        if missing:
            raise KeyError(f"replay store holds no rollouts with ids {missing[:8]} (the filter replays only what it "
                           "listed in stored() at an earlier step)")
        rows = [self.rows[int(i)] for i in ids]
        tags = [{**{k: v for k, v in self.tags[int(i)].items() if k != "is_padding"}, "is_replay": True} for i in ids]
        return _join(self.kinds, rows), tags

    def expired(self, step: int, threshold: int) -> np.ndarray:
        """Ids of the stored rollouts that ``step`` may not train: generated by weights ``threshold`` or more updates
        older than the step's policy (verl's span ``step - min_global_steps`` above ``threshold``, the rule its
        asynchronous buffer applies to fresh groups, ``trainer/ppo/v1/replay_buffer.py:528``)."""
        missing = [i for i, tag in self.tags.items() if tag.get("min_global_steps") is None]
        if missing:
            raise KeyError(f"step {step}: stored rollouts {missing[:8]} carry no weight version (min_global_steps tag)")
        return np.array(sorted(i for i, tag in self.tags.items() if step - int(tag["min_global_steps"]) > threshold),
                        dtype=np.int64)

    def response_length(self, ids: np.ndarray) -> np.ndarray:
        return np.array([int(self.rows[int(i)]["response_mask"].sum()) for i in ids], dtype=np.int64)

    # ------------------------------------------------------------------ checkpoints
    def save(self, step_dir: str) -> None:
        tmp = os.path.join(step_dir, FILE + ".tmp")
        torch.save({"kinds": self.kinds, "rows": self.rows, "tags": self.tags}, tmp)
        os.replace(tmp, os.path.join(step_dir, FILE))

    def load(self, step_dir: str) -> None:
        path = os.path.join(step_dir, FILE)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: the checkpoint has no replay store, but the rollout filter replays "
                                    "(was it written by a run with a replaying filter?)")
        state = torch.load(path, weights_only=False)
        self.kinds, self.rows, self.tags = state["kinds"], state["rows"], state["tags"]


# ---------------------------------------------------------------------------------------------- the trainer's steps
@dataclass
class Replayed:
    """The stored rollouts a step replays: their ids, their fresh keys in the step's partition, tags and response
    lengths (the row position of replayed rollout ``j`` follows the step's own rollouts)."""

    ids: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    keys: list[str] = field(default_factory=list)
    tags: list[dict] = field(default_factory=list)
    lengths: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


def sync_replay(store: ReplayStore, rollout_filter: RolloutFilter, batch: KVBatchMeta, keys: list[str],
                rollout_id: np.ndarray) -> Replayed:
    """After the filter's ``select``: put the rollouts it replays into ``batch``'s partition (fresh keys, stored
    fields), then copy this step's rollouts (``keys``, ids ``rollout_id``) that it stores into ``store`` and drop
    what it no longer lists."""
    replay_ids = np.asarray(rollout_filter.replay(), dtype=np.int64)
    stored = set(np.asarray(rollout_filter.stored(), dtype=np.int64).tolist())
    replayed = Replayed(ids=replay_ids)
    if len(replay_ids):
        fields, tags = store.batch(replay_ids)
        replayed = Replayed(replay_ids, [fresh_key() for _ in replay_ids], tags, store.response_length(replay_ids))
        tq.kv_batch_put(keys=replayed.keys, partition_id=batch.partition_id, fields=fields, tags=tags)
    new = [i for i, rid in enumerate(rollout_id.tolist()) if rid in stored]
    if new:
        new_keys = [keys[i] for i in new]
        tag_of = dict(zip(batch.keys, batch.tags))
        fields = tq.kv_batch_get(keys=new_keys, partition_id=batch.partition_id, select_fields=batch.fields)
        store.add(rollout_id[new], fields, [tag_of[k] for k in new_keys])
    store.keep_only(np.fromiter(stored, dtype=np.int64))
    return replayed


def zero_trainer_fields(batch: KVBatchMeta, keys: list[str]) -> None:
    """Zero :data:`TRAINER_TOKEN_FIELDS` of the padding rows ``keys`` that balancing the cut (or replay-grown) actor
    batch added."""
    names = [f for f in TRAINER_TOKEN_FIELDS if f in (batch.fields or ())]
    if keys and names:
        zeros = torch.nested.as_nested_tensor([torch.zeros(1) for _ in keys], layout=torch.jagged)
        tq.kv_batch_put(keys=keys, partition_id=batch.partition_id,
                        fields=TensorDict({f: zeros.clone() for f in names}, batch_size=len(keys)))


def remeasures_entropy(rollout_filter: RolloutFilter, actor_config, fields: list[str] | None) -> bool:
    """The filter needs entropy, the update computes none (TB:1831-1833: ``calculate_entropy`` or
    ``entropy_coeff != 0``) and the old-log-prob pass measured the fresh rows' (``entropy`` in the batch's
    ``fields``)."""
    update_entropy = actor_config.calculate_entropy or actor_config.entropy_coeff != 0.0
    return rollout_filter.needs_entropy and not update_entropy and "entropy" in (fields or ())


def even_split_rows(keys: list[str], wanted: set[str], dp_size: int) -> list[int]:
    """Positions in ``keys`` of the ``wanted`` keys and of the fewest others (the first ones) that make their number a
    multiple of ``dp_size``, in ``keys`` order: a batch verl's dispatch splits into equal parts over the dp ranks."""
    mine = [i for i, k in enumerate(keys) if k in wanted]
    others = [i for i, k in enumerate(keys) if k not in wanted]
    fill = -len(mine) % dp_size
    if len(mine) != len(wanted) or fill > len(others):
        raise ValueError(f"{len(wanted)} keys wanted, {len(mine)} found among {len(keys)}; no even split over "
                         f"{dp_size} dp ranks")
    return sorted(mine + others[:fill])


def recompute_replayed(worker_group, train: KVBatchMeta, replay_keys: list[str], *, decouple: bool, entropy: bool,
                       dp_size: int, temperature: float) -> dict[str, float]:
    """One no-grad forward pass of the current policy (``worker_group.compute_log_prob``, as TB:1651-1669) before the
    actor update, for either job or both:

    * ``decouple``: the replayed rows' old log-probs for the decoupled loss (DOTS+RR), see :func:`_decouple`; the pass
      covers the whole update batch ``train``;
    * ``entropy``: CBS Table 1 note 2, a rollout's entropy is that of its latest round of use: the replayed
      rows' stored ``entropy`` (their generating policy's) becomes this step's policy's, the one the fresh rows'
      old-log-prob pass measured; the loss does not read it (entropy_coeff 0). Alone, the pass covers the replayed
      rows and the fewest other rows of ``train`` that split evenly over the ``dp_size`` ranks (its rows' entropy
      rewritten, as verl's pass does).

    Returns the decoupled weights' ``data_selection/replay/is_weight_*`` metrics (none without ``decouple``)."""
    if not (decouple or entropy):
        return {}
    rows = train.keys if decouple else [train.keys[i] for i in even_split_rows(train.keys, set(replay_keys), dp_size)]
    part = train.select_keys(rows)
    part.extra_info = {**train.extra_info, "calculate_entropy": entropy, "compute_loss": False,
                       "temperature": temperature}
    worker_group.compute_log_prob(part)
    metrics = _decouple(part, set(replay_keys)) if decouple else {}
    if entropy:
        data = tq.kv_batch_get(keys=part.keys, partition_id=part.partition_id,
                               select_fields=["entropy", "response_mask"])
        tq.kv_batch_put(keys=part.keys, partition_id=part.partition_id, fields=TensorDict(
            {"entropy": response_from_nested(data["entropy"], data["response_mask"])}, batch_size=len(part)))
    return metrics


def _decouple(batch: KVBatchMeta, replay: set[str]) -> dict[str, float]:
    """Replayed rows under the decoupled loss, from the ``log_probs`` the pass just wrote: their old log-probs become
    the current policy's (π_old), the stored ones (μ, their generating policy's) turn into per-token weights
    exp(π_old − μ) that verl's policy losses multiply in (``rollout_is_weights``); other rows keep their old log-probs
    and weight 1 (or verl's own rollout-correction weights when present)."""
    fields = ["log_probs", "old_log_probs", "response_mask"]
    has_weights = "rollout_is_weights" in (batch.fields or ())
    data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id,
                           select_fields=fields + (["rollout_is_weights"] if has_weights else []))
    current = response_from_nested(data["log_probs"], data["response_mask"]).unbind()
    stored = data["old_log_probs"].unbind()
    given = data["rollout_is_weights"].unbind() if has_weights else [None] * len(stored)
    old, weights, replayed = [], [], []
    for key, now, mu, w in zip(batch.keys, current, stored, given):
        if key in replay:
            now = now.to(mu.dtype)
            old.append(now)
            weights.append(torch.exp(now.float() - mu.float()).to(mu.dtype))
            replayed.append(weights[-1])
        else:
            old.append(mu)
            weights.append(torch.ones_like(mu) if w is None else w)
    nested = partial(torch.nested.as_nested_tensor, layout=torch.jagged)
    tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id, fields=TensorDict(
        {"old_log_probs": nested(old), "rollout_is_weights": nested(weights)}, batch_size=len(batch)))
    tokens = torch.cat(replayed).float()
    return {"data_selection/replay/is_weight_mean": float(tokens.mean()),
            "data_selection/replay/is_weight_max": float(tokens.max())}
