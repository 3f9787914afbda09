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
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import numpy as np
import torch
from tensordict import NonTensorData, NonTensorStack, TensorDict

FILE = "replay_store.pt"
JAGGED, DENSE, OBJECT = "jagged", "dense", "object"


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
