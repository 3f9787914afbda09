"""The trainer's replay store (verl_ext.trainer.replay): rows of a TransferQueue-shaped TensorDict (jagged,
dense and non-tensor fields) go in by rollout id and come back field for field, in any order, with their tags
marked ``is_replay``; eviction, unknown ids and a checkpoint round trip."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import NonTensorStack, TensorDict

from verl_ext.trainer.replay import FILE, ReplayStore, fresh_key


def _batch(rows):
    jagged = lambda xs, dt: torch.nested.as_nested_tensor([torch.as_tensor(x, dtype=dt) for x in xs],  # noqa: E731
                                                          layout=torch.jagged)
    return TensorDict({
        "responses": jagged([r["responses"] for r in rows], torch.int64),
        "old_log_probs": jagged([r["old"] for r in rows], torch.float32),
        "response_mask": jagged([[1] * len(r["responses"]) for r in rows], torch.int64),
        "score": torch.tensor([r["score"] for r in rows]),
        "extra_info": NonTensorStack(*[{"index": r["index"]} for r in rows]),
    }, batch_size=len(rows))


ROWS = [{"responses": [1, 2, 3], "old": [-0.1, -0.2, -0.3], "score": 1.0, "index": 7},
        {"responses": [4], "old": [-1.5], "score": 0.0, "index": 8},
        {"responses": [5, 6], "old": [-0.5, -0.25], "score": 1.0, "index": 9}]


def test_rows_come_back_field_for_field_in_the_asked_order(tmp_path):
    store = ReplayStore()
    store.add(np.array([10, 11, 12]), _batch(ROWS), [{"seq_len": 9}, {"seq_len": 5, "is_padding": False},
                                                     {"seq_len": 7}])
    fields, tags = store.batch(np.array([12, 10]))
    want = _batch([ROWS[2], ROWS[0]])
    for name in ("responses", "old_log_probs", "response_mask"):
        assert [t.tolist() for t in fields[name].unbind()] == [t.tolist() for t in want[name].unbind()]
    assert fields["score"].tolist() == [1.0, 1.0] and fields.get("extra_info").tolist() == [{"index": 9}, {"index": 7}]
    assert tags == [{"seq_len": 7, "is_replay": True}, {"seq_len": 9, "is_replay": True}]
    assert store.response_length(np.array([10, 11, 12])).tolist() == [3, 1, 2]

    store.keep_only(np.array([11, 12]))
    assert store.ids().tolist() == [11, 12]
    with pytest.raises(KeyError, match=r"ids \[10\]"):
        store.batch(np.array([10]))

    store.save(str(tmp_path))
    assert (tmp_path / FILE).is_file() and not list(tmp_path.glob("*.tmp"))
    restored = ReplayStore()
    restored.load(str(tmp_path))
    a, _ = restored.batch(np.array([11]))
    assert a["old_log_probs"].unbind()[0].tolist() == [-1.5] and restored.ids().tolist() == [11, 12]
    with pytest.raises(FileNotFoundError, match="no replay store"):
        ReplayStore().load(str(tmp_path / "missing"))


def test_fields_must_match_and_keys_follow_verls_form():
    store = ReplayStore()
    store.add(np.array([1]), _batch(ROWS[:1]), [{}])
    other = _batch(ROWS[1:2]).exclude("score")
    with pytest.raises(RuntimeError, match="fields"):
        store.add(np.array([2]), other, [{}])
    uid, session, index = fresh_key().rsplit("_", 2)
    assert "_" not in uid and (session, index) == ("0", "0")
