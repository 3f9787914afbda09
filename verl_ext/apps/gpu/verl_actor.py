"""``python -m verl_ext.apps.gpu.verl_actor`` (also ``python -m verl_ext.apps.gpu.check_gpu --verl-actor``): verl 0.9.1's own
actor training step, as the recipes' trainer builds it, on one GPU without Ray, per attention backend.

What runs is the object the trainer's actor workers run: ``verl.workers.engine_workers.ActorRolloutRefWorker``
with role ``actor`` (its FSDP engine, packing, micro-batching by ``ppo_max_token_len_per_gpu``, PPO loss and
optimiser), built from a recipe's composed config, in one process with ``torch.distributed`` at world size 1. The
trainer's per-step calls are made directly: ``compute_log_prob`` (old log-probs), then ``update_actor``, each on a
batch made as verl's trainer makes it (padded, then ``left_right_2_no_padding``).

Only what must change for one GPU without the recipe's model changes (:func:`one_gpu_changes` lists each, and the
report prints them): random weights of the recipe's model shape (no hub), one GPU, the sequences per step (a
few micro-batches, not the recipe's mini-batch), the attention backend under test; on a CPU also FSDP2, no
``torch.compile``, the CPU preset's precision, a tiny model and a token budget scaled down with the lengths.
The token budgets, the response-length range, the loss, the optimiser and the dtypes are the recipe's.

Sequences [decision]: each step's batch holds one sequence of the longest length the recipe allows (prompt
``data.max_prompt_length`` + response ``data.max_response_length``: what the budget must hold) and then
sequences with a prompt uniform in ``[P/16, P/4]`` and a response log-uniform in ``[R/64, R]`` until
``--micro-batches`` x the update budget is filled; new lengths every step (new shapes, as in training).

Each backend runs in its own process under a time guard (``--guard-s``): a backend that hangs or compiles for too
long is reported as "did not finish within its guard" with the phase it was in, and the next one still runs.
Per backend and step: seconds of the old-log-prob pass and of the update, peak GPU memory, graphs compiled
(``torch._dynamo``), loss and grad norm; the first step's extra time over the later ones (compilation); and the
largest gap between verl's old log-probs (step 1, before any update) and eager attention on the padded batch of the
same weights, against :data:`LOGP_TOL`. On CUDA each backend's process runs under ``--memory-cap-gib`` (default 79:
what torch may allocate on an H100 80GB, :data:`MEMORY_CAP_GIB`; ``torch.cuda.set_per_process_memory_fraction``), and
step 1's peak includes the eager reference, so a row that finishes on an H200 says the step fits an 80 GB H100.

On a bare GPU machine (torch + transformers only) verl and what its actor imports come from the wheelhouse
(``make gpu-wheelhouse``) and Ray from the import stub ``scripts/bare_gpu/ray_import_stub``: both put on the path by
``scripts/gpu_first_hour.sh``; :func:`prepare_verl_import` skips ``verl/utils/dataset/__init__.py``, whose
dataset classes pull ``datasets`` / pyarrow / pandas (the actor needs only ``dataset_utils``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import types
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from verl_ext.models.attention import BACKENDS, AttentionBackend, get_backend

DEFAULT_RECIPE = "bots/qwen2.5-1.5b-instruct_math"  # its model, Qwen2.5-1.5B-Instruct, has the bench's 1.5b shape
LOGP_TOL = {"fp32": 1e-4, "bf16": 0.25}  # [decision] as verl_ext.apps.gpu.check_gpu (fp32 on CPU, bf16 autocast on CUDA)
CPU_TOKENS = 512  # [decision] the CPU dry run's token budget (the tiny model; a recipe's 16k would need GBs of masks)
SEED = 0


# ------------------------------------------------------------------ importing verl without Ray or datasets
def prepare_verl_import() -> None:
    """Make ``import verl``'s actor path work where only torch, transformers and the wheelhouse are installed:
    Ray must import (the real package, or the stub on ``PYTHONPATH``), and ``verl.utils.dataset`` is registered
    as a package without running its ``__init__`` when ``datasets`` is missing (nothing changes otherwise)."""
    if importlib.util.find_spec("ray") is None:
        raise SystemExit("verl imports Ray at module level: install Ray, or put scripts/bare_gpu/ray_import_stub on "
                         "PYTHONPATH (scripts/gpu_first_hour.sh does so on a bare machine)")
    if importlib.util.find_spec("datasets") is not None or "verl.utils.dataset" in sys.modules:
        return
    import verl.utils

    spec = importlib.util.find_spec("verl.utils.dataset")
    package = types.ModuleType(spec.name)
    package.__path__, package.__spec__, package.__file__ = list(spec.submodule_search_locations), spec, spec.origin
    sys.modules[spec.name] = verl.utils.dataset = package


# ------------------------------------------------------------------ the recipe's config, changed for one GPU
@dataclass(frozen=True)
class Change:
    key: str
    recipe: object
    used: object
    why: str


def compose_recipe(recipe: str, overrides: list[str]):
    """``python -m verl_ext.main --config-dir recipes +GROUP=SETTING OVERRIDES``'s config, composed (not resolved)."""
    from hydra import compose, initialize_config_dir

    from verl_ext.launch.composition import CONFIG_DIR, CONFIG_NAME, searchpath
    from verl_ext.cpu import project_root

    group, _, setting = recipe.partition("/")
    recipes = Path(project_root()) / "recipes"
    if not (recipes / group / f"{setting}.yaml").is_file():
        raise SystemExit(f"no recipe {recipe!r}: expected {recipes / group / setting}.yaml")
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        return compose(CONFIG_NAME, overrides=[searchpath(recipes), f"+{group}={setting}", *overrides])


def budgets(config) -> dict[str, int]:
    """The recipe's token budgets and lengths: update, old-log-prob pass, prompt and response."""
    ref = config.actor_rollout_ref
    return {"update": int(ref.actor.ppo_max_token_len_per_gpu),
            "log_prob": int(ref.rollout.log_prob_max_token_len_per_gpu),
            "prompt": int(config.data.max_prompt_length), "response": int(config.data.max_response_length)}


# the config sections the actor reads, and why a key in them may change
ACTOR_KEYS = ("actor_rollout_ref.actor", "actor_rollout_ref.model", "actor_rollout_ref.rollout.log_prob_",
              "actor_rollout_ref.rollout.temperature", "data.max_prompt_length", "data.max_response_length",
              "trainer.n_gpus_per_node", "trainer.nnodes")
REASONS = {"actor_rollout_ref.model.path": "random weights of the recipe's shape: no hub here",
           "trainer.": "one device, world size 1"}


def actor_config(recipe: str, device: str, model_path: str):
    """The recipe's composed config with what must change for one ``device`` of this machine, and the list of
    those changes (every actor-relevant key whose value differs from the recipe's, with why)."""
    recipe_config = compose_recipe(recipe, [])
    overrides = [f"actor_rollout_ref.model.path={model_path}", "trainer.n_gpus_per_node=1", "trainer.nnodes=1"]
    if device == "cpu":
        from verl_ext.cpu import cpu_overrides

        b = budgets(recipe_config)
        scale = CPU_TOKENS / b["update"]
        overrides = [*cpu_overrides(), *overrides, f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={CPU_TOKENS}",
                     f"actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu={round(b['log_prob'] * scale)}",
                     f"data.max_prompt_length={max(8, round(b['prompt'] * scale))}",
                     f"data.max_response_length={max(8, round(b['response'] * scale))}"]
    config = compose_recipe(recipe, overrides)
    old, new = _actor_leaves(recipe_config), _actor_leaves(config)
    changes = [Change(key, old.get(key), value, _reason(key, device)) for key, value in new.items()
               if old.get(key) != value]
    return config, changes


def _actor_leaves(config) -> dict[str, object]:
    from omegaconf import OmegaConf

    def walk(node, prefix):
        if isinstance(node, dict):
            for key, value in node.items():
                yield from walk(value, f"{prefix}.{key}" if prefix else str(key))
        elif prefix.startswith(ACTOR_KEYS):
            yield prefix, node

    sections = {k: OmegaConf.to_container(config[k], resolve=True) for k in ("actor_rollout_ref", "data", "trainer")}
    return dict(walk(sections, ""))


def _reason(key: str, device: str) -> str:
    for prefix, why in REASONS.items():
        if key.startswith(prefix):
            return why
    if device != "cpu":
        raise ValueError(f"{key} changed from the recipe's value, which only the CPU dry run may change")
    return "CPU dry run: the CPU preset, a budget scaled down with the lengths"


def compute_dtype(config) -> str:
    """``bf16`` or ``fp32``: the FSDP compute dtype of the actor (verl's default mixed precision is bf16)."""
    mp = config.actor_rollout_ref.actor.fsdp_config.get("mixed_precision") or {}
    return "fp32" if str(mp.get("param_dtype", "bf16")) in ("fp32", "float32") else "bf16"


# ------------------------------------------------------------------ a model of the recipe's shape
def write_checkpoint(out: Path, size: str, layers: int | None, device: str, model_path: str | None = None) -> str:
    """Random weights (seeded) of the bench's ``size`` shape, or ``model_path``'s config, cut to ``layers``, with a
    three-token tokenizer (the check feeds token ids): a directory verl's ``model.path`` accepts, no download."""
    from tokenizers import Tokenizer, models
    from transformers import PreTrainedTokenizerFast

    from verl_ext.apps.gpu.attention_bench import model_config, random_model

    config = model_config(size, layers, model_path)
    model = random_model(config, "sdpa", device, torch.bfloat16 if device == "cuda" else torch.float32, seed=SEED)
    model.save_pretrained(out)
    del model
    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2}
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel(vocab, unk_token="<unk>")),
                                        pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    tokenizer.save_pretrained(out)
    return f"random weights, {model_path or f'Qwen2 {size}'} shape, {config.num_hidden_layers} layers"


# ------------------------------------------------------------------ batches as verl's trainer makes them
def step_lengths(b: dict[str, int], micro_batches: int, step: int) -> list[tuple[int, int]]:
    """(prompt, response) lengths of one step's sequences (module docstring)."""
    gen = torch.Generator().manual_seed(SEED + 1000 + step)
    p, r = b["prompt"], b["response"]
    lengths = [(p, r)]
    total = p + r
    while total < micro_batches * b["update"]:
        prompt = int(torch.randint(max(1, p // 16), max(2, p // 4) + 1, (), generator=gen))
        low = max(1, r // 64)
        response = int(math.exp(math.log(low) + torch.rand((), generator=gen).item() * math.log(r / low)))
        lengths.append((prompt, response))
        total += prompt + response
    return lengths


def padded_batch(lengths: list[tuple[int, int]], vocab: int, step: int) -> dict[str, torch.Tensor]:
    """Left-padded prompts and right-padded responses of random tokens, with verl's mask and positions."""
    gen = torch.Generator().manual_seed(SEED + step)
    n, p, r = len(lengths), max(pl for pl, _ in lengths), max(rl for _, rl in lengths)
    prompts, responses = torch.zeros(n, p, dtype=torch.long), torch.zeros(n, r, dtype=torch.long)
    prompt_mask, response_mask = torch.zeros(n, p, dtype=torch.long), torch.zeros(n, r, dtype=torch.long)
    for i, (pl, rl) in enumerate(lengths):
        prompts[i, p - pl:] = torch.randint(3, vocab, (pl,), generator=gen)
        responses[i, :rl] = torch.randint(3, vocab, (rl,), generator=gen)
        prompt_mask[i, p - pl:], response_mask[i, :rl] = 1, 1
    attention_mask = torch.cat([prompt_mask, response_mask], 1)
    return {"prompts": prompts, "responses": responses, "input_ids": torch.cat([prompts, responses], 1),
            "attention_mask": attention_mask, "position_ids": (attention_mask.cumsum(1) - 1).clamp(min=0),
            "response_mask": response_mask}


def to_verl(batch: dict[str, torch.Tensor], **non_tensor):
    """verl's trainer conversion (``ray_trainer.py`` ``_update_actor``): DataProto -> TensorDict -> no padding."""
    from verl import DataProto
    from verl.utils import tensordict_utils as tu
    from verl.workers.utils.padding import left_right_2_no_padding

    td = left_right_2_no_padding(DataProto.from_single_dict(dict(batch)).to_tensordict())
    tu.assign_non_tensor(td, **non_tensor)
    return td


REFERENCE_CHUNK = 1024  # tokens a time through the LM head: at a 151,936-token vocabulary 0.6 GB of fp32 logits


def eager_log_probs(model_path: str, batch: dict[str, torch.Tensor], temperature: float, device: str,
                    chunk_tokens: int = REFERENCE_CHUNK) -> torch.Tensor:
    """Response-token log-probs of ``batch`` under the checkpoint with eager attention (fp32): the reference verl's
    packed pass must equal. Memory-bounded [decision]: one sequence at a time (no padding: eager attention on one
    row is the padded batch's row), and the LM head and the fp32 log-softmax over ``chunk_tokens`` positions at a
    time, so no whole-batch logits tensor exists (at 16k tokens and Qwen2.5's vocabulary that tensor alone was 10 GB,
    20 GB with its log-softmax). The largest transient left is one layer's eager scores of the longest row (heads x
    L^2 fp32: 7.2 GB at 12,288 tokens and 12 heads, twice that with their softmax). Equal to the unchunked
    computation up to fp32 rounding (``tests/apps/gpu/test_verl_actor_on_cpu.py``), so the tolerances stay
    :data:`LOGP_TOL`'s."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32, attn_implementation="eager")
    model = model.to(device).eval()
    head = model.get_output_embeddings()
    mask = batch["attention_mask"].bool()
    out = torch.zeros(batch["responses"].shape)
    with torch.no_grad():
        for i in range(len(mask)):
            seq = batch["input_ids"][i][mask[i]].to(device)
            r = int(batch["response_mask"][i].sum())
            # every position's last hidden state, the final norm applied
            hidden = model.base_model(input_ids=seq[None], use_cache=False).last_hidden_state[0]
            targets = seq[len(seq) - r:]  # the response tokens, predicted from the positions before each
            rows = hidden[len(seq) - r - 1: len(seq) - 1]
            for c in range(0, r, chunk_tokens):
                e = min(c + chunk_tokens, r)
                logits = head(rows[c:e]).float() / temperature
                out[i, c:e] = logits.log_softmax(-1).gather(-1, targets[c:e, None])[:, 0].cpu()
    del model
    return out


# ------------------------------------------------------------------ one backend, in its own process
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Progress:
    """The child's record, rewritten after every phase: a parent that stops it at its guard still reads how far it
    got and what each finished step measured."""

    def __init__(self, path: Path, backend: str) -> None:
        self.path, self.start = path, time.monotonic()
        self.record: dict = {"backend": backend, "status": "running", "phase": "starting", "steps": []}

    def phase(self, name: str) -> None:
        self.record |= {"phase": name, "phase_started_s": round(time.monotonic() - self.start, 1)}
        self.write()

    def write(self) -> None:
        self.path.write_text(json.dumps(self.record, indent=1))


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _compiled_graphs() -> int:
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


# [decision] what torch may allocate on an H100 80GB: the card reports 81,559 MiB (79.6 GiB), ~0.5 GiB of which the
# CUDA context takes outside torch's allocator; a step that fits under this cap on a bigger card fits on an H100
MEMORY_CAP_GIB = 79


def memory_fraction(cap_gib: float, total_bytes: int) -> float | None:
    """The fraction of a card's ``total_bytes`` that ``cap_gib`` is, for ``torch.cuda.set_per_process_memory_fraction``
    (torch then raises out-of-memory past it); None for no cap (``cap_gib`` 0, or a card no bigger than the cap)."""
    if cap_gib < 0:
        raise ValueError(f"memory cap {cap_gib} GiB: must be >= 0 (0: no cap)")
    fraction = cap_gib * 2**30 / total_bytes
    return fraction if 0 < fraction < 1 else None


def run_backend(config_path: Path, backend: AttentionBackend, device: str, steps: int, micro_batches: int,
                progress: Progress, memory_cap_gib: float = MEMORY_CAP_GIB) -> None:
    """Build the actor for ``backend`` from the composed config and run ``steps`` trainer steps (child process); on
    CUDA everything, the eager reference included, runs under ``memory_cap_gib`` (:func:`memory_fraction`)."""
    from omegaconf import OmegaConf

    os.environ.update(WORLD_SIZE="1", RANK="0", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(_free_port()))
    if device == "cpu":
        import verl_ext.cpu.platform  # noqa: F401  (registers the cpu platform VERL_PLATFORM selects)
        from verl_ext.cpu import shims

        shims.apply(per_sequence_sdpa=backend.name != "sdpa")  # sdpa: transformers' own packed path, as on a GPU
    if device == "cuda":
        fraction = memory_fraction(memory_cap_gib, torch.cuda.get_device_properties(0).total_memory)
        if fraction is not None:
            torch.cuda.set_per_process_memory_fraction(fraction)
        progress.record["memory_fraction"] = fraction
    prepare_verl_import()
    import torch.distributed as dist
    from verl.utils import tensordict_utils as tu
    from verl.workers.engine_workers import ActorRolloutRefWorker
    from verl.workers.utils.padding import no_padding_2_padding

    config = OmegaConf.load(config_path)
    for override in backend.overrides():
        key, _, value = override.partition("=")
        OmegaConf.update(config, key, OmegaConf.create(f"v: {value}").v, merge=False, force_add=True)
    b = budgets(config)
    temperature = float(config.actor_rollout_ref.rollout.temperature)
    actor = config.actor_rollout_ref.actor
    progress.phase("building the actor")
    dist.init_process_group(backend="cpu:gloo" if device == "cpu" else "cpu:gloo,cuda:nccl", rank=0, world_size=1)
    start = time.perf_counter()
    worker = ActorRolloutRefWorker(config.actor_rollout_ref, role="actor")
    worker.init_model()
    progress.record["build_s"] = round(time.perf_counter() - start, 2)
    vocab = int(worker.actor.model_config.hf_config.vocab_size)
    update_info = dict(calculate_entropy=bool(actor.calculate_entropy or actor.entropy_coeff), compute_loss=True,
                       epochs=int(actor.ppo_epochs), seed=int(actor.data_loader_seed),
                       dataloader_kwargs={"shuffle": bool(actor.shuffle)}, temperature=temperature)
    for step in range(1, steps + 1):
        lengths = step_lengths(b, micro_batches, step)
        batch = padded_batch(lengths, vocab, step)
        row = {"step": step, "sequences": len(lengths), "tokens": sum(p + r for p, r in lengths),
               "longest": max(p + r for p, r in lengths)}
        graphs = _compiled_graphs()
        if device == "cuda":
            torch.cuda.reset_peak_memory_stats()
        progress.phase(f"step {step}: old log-probs")
        _sync(device)
        t0 = time.perf_counter()
        td = to_verl(batch, calculate_entropy=True, compute_loss=False, temperature=temperature)
        old = no_padding_2_padding(tu.get(worker.compute_log_prob(td), "log_probs"), td).float()
        _sync(device)
        row["log_prob_s"] = round(time.perf_counter() - t0, 3)
        progress.phase(f"step {step}: update")
        advantages = torch.randn(len(lengths), 1, generator=torch.Generator().manual_seed(step)) * batch["response_mask"]
        td = to_verl({**batch, "old_log_probs": old, "advantages": advantages}, global_batch_size=len(lengths),
                     mini_batch_size=len(lengths), **update_info)
        t1 = time.perf_counter()
        metrics = tu.get(worker.update_actor(td), "metrics")
        _sync(device)
        row |= {"update_s": round(time.perf_counter() - t1, 3), "step_s": round(time.perf_counter() - t0, 3),
                "graphs": _compiled_graphs() - graphs,
                "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if device == "cuda" else None,
                "loss": float(statistics.fmean(metrics["actor/pg_loss"])),
                "grad_norm": float(statistics.fmean(metrics["grad_norm"]))}
        if not (math.isfinite(row["loss"]) and math.isfinite(row["grad_norm"])):
            raise RuntimeError(f"step {step}: loss {row['loss']}, grad norm {row['grad_norm']}")
        progress.record["steps"].append(row)
        if step == 1:  # the weights the old log-probs were computed with are the checkpoint's
            progress.phase("step 1: eager reference")
            reference = eager_log_probs(config.actor_rollout_ref.model.path, batch, temperature, device)
            progress.record["logp_gap"] = float(((old - reference).abs() * batch["response_mask"]).max())
            if device == "cuda":  # the step's peak, the reference's included (the stats were reset at its start)
                row["peak_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    progress.record |= {"status": "finished", "phase": "done",
                        "attention_function": getattr(ALL_ATTENTION_FUNCTIONS.get(backend.attn_implementation),
                                                      "__name__", None)}
    progress.write()
    dist.destroy_process_group()


# ------------------------------------------------------------------ the command: each backend under its guard
def guarded_run(backend: AttentionBackend, config_path: Path, workdir: Path, device: str, steps: int,
                micro_batches: int, guard_s: float, memory_cap_gib: float = MEMORY_CAP_GIB) -> dict:
    """Run the backend in a child process; stop it (and its children) at ``guard_s``. The row says how it ended."""
    progress_path, log_path = workdir / f"{_safe(backend.name)}.json", workdir / f"{_safe(backend.name)}.log"
    progress_path.unlink(missing_ok=True)
    command = [sys.executable, "-m", "verl_ext.apps.gpu.verl_actor", "--child", "--config", str(config_path),
               "--backends", backend.name, "--steps", str(steps), "--micro-batches", str(micro_batches),
               "--json", str(progress_path), "--memory-cap-gib", str(memory_cap_gib)]
    command += ["--cpu"] if device == "cpu" else []
    env = dict(os.environ)
    if device == "cpu":
        from verl_ext.cpu import cpu_env

        env |= {k: v for k, v in cpu_env(env, num_threads=1).items() if k != "VERL_USE_EXTERNAL_MODULES"}
    start = time.monotonic()
    with open(log_path, "w") as log:
        child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            code = child.wait(timeout=guard_s)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            code = None
    record = json.loads(progress_path.read_text()) if progress_path.exists() else {"backend": backend.name, "steps": []}
    record["wall_s"] = round(time.monotonic() - start, 1)
    if code is None:
        record["status"] = (f"did not finish within its guard ({guard_s:.0f} s): stopped in '{record.get('phase')}' "
                            f"(started at {record.get('phase_started_s', 0):.0f} s)")
    elif code != 0 or record.get("status") != "finished":
        lines = [line for line in log_path.read_text().splitlines() if line.strip()]
        error = next((line for line in reversed(lines) if "Error" in line or "error" in line), lines[-1] if lines else "")
        record["status"] = f"failed (exit {code}) in '{record.get('phase')}': {error.strip()[:300]}"
    return record


def _safe(name: str) -> str:
    return name.replace("/", "_")


def check_row(row: dict, tolerance: float) -> dict:
    """A finished row fails when verl's log-probs are further than ``tolerance`` from the eager reference."""
    gap = row.get("logp_gap")
    if row.get("status") == "finished" and not (gap is not None and gap <= tolerance):
        row["status"] = f"failed: log-probs differ from eager attention on the padded batch by {gap:.3g} " \
                        f"(tolerance {tolerance})"
    return row


def step_summary(row: dict) -> dict:
    """First step, median of the later ones, and the first step's extra time (compilation, first-call costs)."""
    times = [s["step_s"] for s in row.get("steps", [])]
    later = statistics.median(times[1:]) if len(times) > 1 else None
    return {"first_s": times[0] if times else None, "later_s": later,
            "first_extra_s": times[0] - later if later is not None else None,
            "peak_gib": max((s["peak_gib"] for s in row.get("steps", []) if s.get("peak_gib") is not None),
                            default=None)}


def _num(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def changes_report(changes: list[dict]) -> list[str]:
    """One line per reason: the keys changed from the recipe for it, each ``key: recipe -> used``."""
    by_reason: dict[str, list[str]] = {}
    for c in changes:
        by_reason.setdefault(c["why"], []).append(f"{c['key']}: {c['recipe']} -> {c['used']}")
    return [f"changed from the recipe ({why}): " + "; ".join(keys) for why, keys in by_reason.items()]


def report(result: dict) -> str:
    """The Markdown table of a run (one row per backend) with the config changes and budgets above it."""
    b = result["budgets"]
    lines = [f"verl actor ({result['recipe']}, {result['model']}; {result['dtype']}; token budget per micro-batch "
             f"{b['update']} (update) / {b['log_prob']} (log-probs); prompts <= {b['prompt']}, responses <= "
             f"{b['response']}; {result['steps']} steps of {result['micro_batches']} update micro-batches' tokens)",
             *changes_report(result["changes"]),
             "| backend | status | build s | first step s | later steps s | first-step extra s | graphs (step 1 / "
             "later) | peak GiB | tokens / step | log-prob gap |", "|---|---|---:|---:|---:|---:|---|---:|---:|---:|"]
    for row in result["rows"]:
        s, steps = step_summary(row), row.get("steps", [])
        graphs = f"{steps[0]['graphs']} / {sum(x['graphs'] for x in steps[1:])}" if steps else "-"
        tokens = _num(statistics.fmean(x["tokens"] for x in steps), ".0f") if steps else "-"
        lines.append(f"| {row['backend']} | {row['status'].replace('|', '/')} | {_num(row.get('build_s'), '.1f')} | "
                     f"{_num(s['first_s'], '.2f')} | {_num(s['later_s'], '.2f')} | {_num(s['first_extra_s'], '.1f')} | "
                     f"{graphs} | {_num(s['peak_gib'], '.1f')} | {tokens} | {_num(row.get('logp_gap'), '.1e')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_ext.apps.gpu.verl_actor", description=__doc__.split("\n")[0])
    parser.add_argument("--recipe", default=DEFAULT_RECIPE, help=f"GROUP/SETTING under recipes/ (default "
                        f"{DEFAULT_RECIPE})")
    parser.add_argument("--backends", nargs="+", choices=list(BACKENDS), default=list(BACKENDS),
                        help="attention backends (default: all; those that cannot run here are skipped)")
    parser.add_argument("--steps", type=int, default=3, help="trainer steps per backend (default 3)")
    parser.add_argument("--micro-batches", type=int, default=3,
                        help="tokens per step, in update budgets (default 3)")
    parser.add_argument("--guard-s", type=float, default=240, help="time limit per backend, seconds (default 240)")
    parser.add_argument("--budget-s", type=float, default=None, help="start no backend after this many seconds")
    parser.add_argument("--model", default=None, help="a checkpoint to train instead of random weights")
    parser.add_argument("--layers", type=int, default=None, help="cut the random-weight model to this many layers")
    parser.add_argument("--cpu", action="store_true", help="the dry run: CPU, tiny model, scaled budget")
    parser.add_argument("--workdir", default=None, help="checkpoint, config and logs (default: a temporary folder)")
    parser.add_argument("--json", default=None, help="write the result here (as backends finish), and its table "
                        "beside it (.md)")
    parser.add_argument("--memory-cap-gib", type=float, default=MEMORY_CAP_GIB,
                        help=f"on CUDA, run each backend under this much GPU memory, the eager reference included "
                        f"(default {MEMORY_CAP_GIB}: what torch may allocate on an H100 80GB; 0: no cap)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--config", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    device = "cpu" if args.cpu else "cuda"
    if args.child:
        progress = Progress(Path(args.json), args.backends[0])
        run_backend(Path(args.config), get_backend(args.backends[0]), device, args.steps, args.micro_batches, progress,
                    args.memory_cap_gib)
        return 0
    if device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device visible to torch; --cpu runs the dry run")
    import tempfile

    from verl_ext.apps.gpu.attention_bench import environment, skip_reason

    deadline = time.monotonic() + (args.budget_s if args.budget_s is not None else math.inf)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="verl_actor_"))
    workdir.mkdir(parents=True, exist_ok=True)
    model = args.model
    if model is None:
        model = str(workdir / "model")
        desc = write_checkpoint(Path(model), "1.5b" if device == "cuda" else "tiny", args.layers, device)
    else:
        desc = f"checkpoint {model}"
    config, changes = actor_config(args.recipe, device, model)
    from omegaconf import OmegaConf

    config_path = workdir / "actor_config.yaml"
    OmegaConf.save(config, config_path)
    dtype = compute_dtype(config)
    result = {"environment": environment(device), "recipe": args.recipe, "model": desc,
              "changes": [asdict(c) for c in changes], "budgets": budgets(config), "dtype": dtype,
              "tolerance": LOGP_TOL[dtype], "steps": args.steps, "micro_batches": args.micro_batches,
              "memory_cap_gib": args.memory_cap_gib, "rows": []}
    print("\n".join(changes_report(result["changes"])), flush=True)
    for name in args.backends:
        backend = get_backend(name)
        reason = skip_reason(backend, device)
        if reason is not None and not reason.startswith("skipped"):  # backend.unavailable()'s words
            reason = f"skipped: {reason}"
        if reason is None and time.monotonic() > deadline:
            reason = "skipped: time budget spent"
        guard = min(args.guard_s, max(1.0, deadline - time.monotonic()))
        row = ({"backend": name, "status": reason, "steps": []} if reason else
               check_row(guarded_run(backend, config_path, workdir, device, args.steps, args.micro_batches, guard,
                                     args.memory_cap_gib), LOGP_TOL[dtype]))
        result["rows"].append(row)
        print(f"{name}: {row['status']}", flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2))
    table = report(result)
    print(table)
    if args.json:
        Path(args.json).with_suffix(".md").write_text(table + "\n")
    ran = [r for r in result["rows"] if not r["status"].startswith("skipped")]
    return 0 if ran and all(r["status"] == "finished" for r in ran) else 1


if __name__ == "__main__":
    raise SystemExit(main())
