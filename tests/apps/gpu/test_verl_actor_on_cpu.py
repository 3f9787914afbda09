"""Pieces of ``python -m verl_ext.apps.gpu.verl_actor`` (verl's own actor per attention backend without Ray) and the Ray
import stub it runs with on a bare machine. The whole command on a simulated bare machine, through
scripts/gpu_first_hour.sh: tests/apps/gpu/test_gpu_first_hour_on_cpu.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from verl_ext.apps.gpu import verl_actor
from verl_ext.models.attention import BACKENDS
from verl_ext.cpu import project_root

STUB = os.path.join(project_root(), "scripts", "bare_gpu", "ray_import_stub")

@pytest.fixture(scope="module")
def recipe_budgets() -> dict[str, int]:
    """The default recipe's token budgets and lengths, as composed."""
    return verl_actor.budgets(verl_actor.compose_recipe(verl_actor.DEFAULT_RECIPE, []))


def test_ray_stub_satisfies_imports_and_refuses_every_call():
    program = textwrap.dedent("""
        import json, ray
        from ray.experimental.state.api import get_actor
        from ray.util.placement_group import PlacementGroup, placement_group
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        @ray.remote
        class Worker: pass

        calls = {"get": lambda: ray.get([1]), "get_actor": lambda: get_actor("a"), "placement_group":
                 lambda: placement_group([]), "ObjectRef": ray.ObjectRef, "Worker.remote": Worker.remote,
                 "options": lambda: ray.remote(num_cpus=1)(dict).options(), "strategy": NodeAffinitySchedulingStrategy}
        refused = {}
        for name, call in calls.items():
            try:
                call()
            except ray.RayStubError as e:
                refused[name] = str(e)
        print(json.dumps({"file": ray.__file__, "initialized": ray.is_initialized(), "refused": refused,
                          "isinstance": isinstance(object(), ray.ObjectRef), "same": ray.ObjectRef is ray.ObjectRef,
                          "annotation": str(list[ray.actor.ActorHandle])}))
    """)
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=STUB))  # before site-packages: the stub shadows Ray
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["file"].startswith(STUB) and out["initialized"] is False
    assert out["isinstance"] is False and out["same"] and "ActorHandle" in out["annotation"]
    assert set(out["refused"]) == {"get", "get_actor", "placement_group", "ObjectRef", "Worker.remote", "options",
                                   "strategy"}
    assert "ray.get was called" in out["refused"]["get"] and "import stub for Ray" in out["refused"]["get"]
    assert "ray.experimental.state.api.get_actor" in out["refused"]["get_actor"]


def test_a_gpu_run_changes_only_the_model_and_the_device_count(tmp_path, recipe_budgets):
    config, changes = verl_actor.actor_config(verl_actor.DEFAULT_RECIPE, "cuda", str(tmp_path))
    assert {c.key: c.used for c in changes} == {"actor_rollout_ref.model.path": str(tmp_path),
                                                "trainer.n_gpus_per_node": 1}  # the recipe runs one node already
    assert verl_actor.budgets(config) == recipe_budgets  # the recipe's token budgets and lengths, unchanged
    assert verl_actor.compute_dtype(config) == "bf16"
    with pytest.raises(ValueError, match="only the CPU dry run may change"):
        verl_actor._reason("actor_rollout_ref.actor.ppo_epochs", "cuda")


def test_the_cpu_dry_run_scales_the_budget_with_the_lengths(tmp_path, recipe_budgets):
    config, changes = verl_actor.actor_config(verl_actor.DEFAULT_RECIPE, "cpu", str(tmp_path))
    b = verl_actor.budgets(config)
    assert b["update"] == verl_actor.CPU_TOKENS == b["log_prob"]
    scale = verl_actor.CPU_TOKENS / recipe_budgets["update"]
    assert (b["prompt"], b["response"]) == (round(recipe_budgets["prompt"] * scale),
                                            round(recipe_budgets["response"] * scale))
    assert b["prompt"] + b["response"] <= b["update"]  # the longest sequence fits the scaled budget
    changed = {c.key for c in changes}
    assert {"actor_rollout_ref.actor.strategy", "actor_rollout_ref.actor.use_torch_compile"} <= changed
    assert "actor_rollout_ref.actor.clip_ratio_high" not in changed and "actor_rollout_ref.actor.optim.lr" not in changed


def test_each_step_holds_the_longest_sequence_and_fills_its_micro_batches():
    budget = {"update": 16384, "log_prob": 16384, "prompt": 4096, "response": 8192}
    steps = [verl_actor.step_lengths(budget, 3, step) for step in (1, 2)]
    for lengths in steps:
        assert lengths[0] == (4096, 8192)  # what the budget must hold
        total = sum(p + r for p, r in lengths)
        assert 3 * 16384 <= total < 3 * 16384 + 4096 + 8192
        assert all(256 <= p <= 1024 and 128 <= r <= 8192 for p, r in lengths[1:])
    assert steps[0] != steps[1] and steps[0] == verl_actor.step_lengths(budget, 3, 1)  # new shapes, reproducible


def test_log_probs_beyond_the_tolerance_fail_a_finished_backend():
    assert verl_actor.check_row({"status": "finished", "logp_gap": 1e-5}, 1e-4)["status"] == "finished"
    failed = verl_actor.check_row({"status": "finished", "logp_gap": 0.3}, 0.25)["status"]
    assert failed.startswith("failed: log-probs differ") and "tolerance 0.25" in failed


def test_a_backend_past_its_guard_is_stopped_and_reported(tmp_path):
    config, _ = verl_actor.actor_config(verl_actor.DEFAULT_RECIPE, "cpu", str(tmp_path / "missing_model"))
    path = tmp_path / "actor_config.yaml"
    from omegaconf import OmegaConf

    OmegaConf.save(config, path)
    row = verl_actor.guarded_run(BACKENDS["sdpa"], path, tmp_path, "cpu", steps=1, micro_batches=1, guard_s=3)
    assert row["status"].startswith("did not finish within its guard (3 s): stopped in"), row
    assert row["wall_s"] < 20


def test_the_memory_cap_is_a_fraction_of_the_card_or_none():
    gib = 2**30
    assert verl_actor.memory_fraction(80, 141 * gib) == pytest.approx(80 / 141)  # an H200 held to an H100's memory
    assert verl_actor.memory_fraction(80, 80 * gib) is None and verl_actor.memory_fraction(80, 40 * gib) is None
    assert verl_actor.memory_fraction(0, 141 * gib) is None  # 0: no cap
    with pytest.raises(ValueError, match="must be >= 0"):
        verl_actor.memory_fraction(-1, 141 * gib)


def test_the_eager_reference_is_per_sequence_and_chunked_and_equals_the_whole_batch_computation(tmp_path):
    """The memory-bounded reference (one row at a time, the LM head over a few positions at a time) gives the
    log-probs of the straightforward one: eager attention on the whole padded batch, all logits at once."""
    import torch
    from transformers import AutoModelForCausalLM

    verl_actor.write_checkpoint(tmp_path, "tiny", 2, "cpu")
    lengths = [(5, 7), (9, 3), (2, 11)]
    batch = verl_actor.padded_batch(lengths, vocab=200, step=1)
    model = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32, attn_implementation="eager").eval()
    with torch.no_grad():
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                       position_ids=batch["position_ids"]).logits.float() / 0.7
    p = batch["prompts"].shape[1]
    whole = logits.log_softmax(-1)[:, p - 1: -1].gather(-1, batch["responses"][..., None])[..., 0]
    whole = whole * batch["response_mask"]

    widths, load = [], AutoModelForCausalLM.from_pretrained

    def loading(*args, **kwargs):  # the reference's model, its LM head counting the positions of each call
        loaded = load(*args, **kwargs)
        head = loaded.get_output_embeddings()
        head.forward = lambda x, forward=head.forward: widths.append(x.shape[0]) or forward(x)
        return loaded

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(AutoModelForCausalLM, "from_pretrained", loading)
        got = verl_actor.eager_log_probs(str(tmp_path), batch, 0.7, "cpu", chunk_tokens=4)
    assert torch.allclose(got, whole, atol=1e-5), (got - whole).abs().max()
    assert max(widths) == 4 and sorted(widths) == sorted([4, 3, 3, 4, 4, 3])  # rows of 7, 3, 11 response tokens
