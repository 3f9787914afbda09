"""``make check-gpu`` / ``python -m verl_ext.check_gpu``: is this GPU machine ready for the recipes?

Run it after ``make install-gpu`` and before a launcher. One line per check, exit 1 at the first failure:

1. Python within verl 0.9.1's bound (``<3.13``);
2. CUDA GPUs visible to torch, and an NVIDIA driver new enough for the CUDA of the installed torch
   (verl's ``vllm`` extra pins torch 2.11, built for CUDA 13: driver generation >= 580);
3. vLLM imports;
4. the attention implementation the recipes request imports (``sdpa``: torch itself;
   ``flash_attention_2``: the ``flash_attn`` package, which the GPU install does not bring);
5. one tiny vLLM generation and one tiny actor update (bf16 forward, backward, AdamW step; loss finite,
   parameters changed) on a small model (default: the embedded SmolLM2-135M-Instruct).

**Attention decision.** verl defaults the actor to ``flash_attention_2``
(``verl/workers/config/model.py:185``), but the GPU install (``verl[verl-core,math,vllm]==0.9.1``) has no
flash-attn: verl's ``fsdp`` extra pins ``flash-attn==2.8.3``, which PyPI serves as source only (building it
needs nvcc and a long compile). The recipes therefore request ``sdpa`` (torch's own kernels) and keep
``use_remove_padding``: transformers builds a block-diagonal mask for packed sequences from their
restarting ``position_ids`` (``transformers/masking_utils.py:find_packed_sequence_indices``), checked on CPU by
``tests/recipes/test_gpu_stack_on_cpu.py``. The cost: one boolean ``T x T`` mask per packed micro-batch of
``T`` tokens (1 GiB at ``ppo_max_token_len_per_gpu=32768``) and no flash kernel for it. With flash-attn
installed, ``actor_rollout_ref.model.override_config.attn_implementation=flash_attention_2`` restores verl's
default; this script then checks it imports.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata as md
import re
import sys
import time
from pathlib import Path

from packaging.requirements import Requirement

VERL_DEFAULT_ATTENTION = "flash_attention_2"  # verl/workers/config/model.py:185
RECIPE_ATTENTION = "sdpa"
# attention implementation -> (distribution that provides it, module to import); None: torch itself
ATTENTION_PROVIDERS = {
    "flash_attention_2": ("flash-attn", "flash_attn"),
    "flash_attention_3": ("flash-attn-3", "flash_attn_interface"),
    "sdpa": None,
    "eager": None,
    "flex_attention": None,
}
MIN_DRIVER = {13: 580, 12: 525, 11: 450}  # CUDA major -> minimum NVIDIA driver generation (Linux)
MAX_PYTHON = (3, 13)  # verl 0.9.1: Requires-Python <3.13


class CheckFailed(RuntimeError):
    pass


def requested_attention(config) -> str:
    """The attention implementation verl will load the actor (and reference) model with."""
    override = config.actor_rollout_ref.model.get("override_config") or {}
    return str(override.get("attn_implementation", VERL_DEFAULT_ATTENTION))


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requires(dist: str) -> list[Requirement]:
    return [Requirement(r) for r in (md.requires(dist) or [])]


def gpu_install_packages(project_root: str | Path) -> set[str]:
    """Distribution names the GPU install asks for directly: pyproject's ``gpu`` extra, with verl's own
    extras it names expanded from verl's installed metadata (``verl[vllm]`` -> vllm, torch, ...)."""
    import tomllib

    project = tomllib.loads((Path(project_root) / "pyproject.toml").read_text())["project"]
    pending = [Requirement(r) for r in project["optional-dependencies"]["gpu"]]
    names: set[str] = set()
    expanded: set[tuple[str, str]] = set()
    while pending:
        req = pending.pop()
        names.add(_norm(req.name))
        if _norm(req.name) != "verl":
            continue
        for extra in sorted(req.extras) + [""]:
            if (extra, "verl") in expanded:
                continue
            expanded.add((extra, "verl"))
            for dep in _requires("verl"):
                marker_ok = dep.marker is None if not extra else (
                    dep.marker is not None and dep.marker.evaluate({"extra": extra}))
                if marker_ok:
                    pending.append(dep)
    return names


def attention_is_provided(attention: str, packages: set[str]) -> bool:
    if attention not in ATTENTION_PROVIDERS:
        raise ValueError(f"unknown attention implementation {attention!r} (known: {sorted(ATTENTION_PROVIDERS)})")
    provider = ATTENTION_PROVIDERS[attention]
    return provider is None or _norm(provider[0]) in packages


def min_driver(cuda_version: str) -> int:
    major = int(str(cuda_version).split(".")[0])
    if major not in MIN_DRIVER:
        raise CheckFailed(f"no known minimum driver for CUDA {cuda_version}")
    return MIN_DRIVER[major]


def driver_generation() -> int:
    import subprocess

    out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True,
                         text=True, timeout=30)
    if out.returncode != 0 or not out.stdout.strip():
        raise CheckFailed(f"nvidia-smi failed: {out.stderr.strip() or out.stdout.strip()}")
    return int(out.stdout.split()[0].split(".")[0])


def tiny_update(model_path: str, attention: str, device: str = "cuda") -> tuple[float, float]:
    """One forward/backward/AdamW step on two short sequences; returns (loss, largest parameter change)."""
    import torch
    from transformers import AutoModelForCausalLM

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(model_path, torch_dtype=dtype, attn_implementation=attention)
    model.to(device).train()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    ids = torch.randint(3, model.config.vocab_size, (2, 16), device=device)
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    torch.optim.AdamW(model.parameters(), lr=1e-4).step()
    change = max(float((p.detach() - before[n]).abs().max()) for n, p in model.named_parameters())
    return float(loss), change


def tiny_generate(model_path: str) -> str:
    from vllm import LLM, SamplingParams

    llm = LLM(model=model_path, dtype="bfloat16", gpu_memory_utilization=0.3, max_model_len=512, enforce_eager=True)
    out = llm.generate(["What is 2 + 3?"], SamplingParams(max_tokens=16, temperature=0.0))
    return out[0].outputs[0].text


def _line(name: str, detail: str) -> None:
    print(f"[ok] {name}: {detail}", flush=True)


def run_checks(model: str | None, attention: str) -> None:
    if sys.version_info[:2] >= MAX_PYTHON:
        raise CheckFailed(f"Python {sys.version.split()[0]}: verl 0.9.1 needs Python < 3.13")
    _line("python", sys.version.split()[0])
    import torch

    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        raise CheckFailed(f"no CUDA device visible to torch {torch.__version__} (CUDA build: {torch.version.cuda}); "
                          "run this on the GPU machine after `make install-gpu`")
    names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    _line("gpus", f"{len(names)} x {names[0]}")
    need, have = min_driver(torch.version.cuda), driver_generation()
    if have < need:
        raise CheckFailed(f"NVIDIA driver {have} is too old for torch {torch.__version__} (CUDA {torch.version.cuda} "
                          f"needs driver >= {need})")
    _line("driver", f"{have} (CUDA {torch.version.cuda} needs >= {need})")
    vllm = importlib.import_module("vllm")
    _line("vllm", vllm.__version__)
    provider = ATTENTION_PROVIDERS.get(attention)
    if provider is not None:
        try:
            importlib.import_module(provider[1])
        except ImportError as e:
            raise CheckFailed(f"attention {attention} needs the {provider[0]} package ({e}); install it or use "
                              f"actor_rollout_ref.model.override_config.attn_implementation={RECIPE_ATTENTION}") from e
    _line("attention", attention)
    if model is None:
        from verl_ext.models.embedded import embedded_model_path

        model = embedded_model_path()
    start = time.perf_counter()
    text = tiny_generate(model)
    _line("vllm generate", f"{text!r} ({time.perf_counter() - start:.1f} s)")
    loss, change = tiny_update(model, attention)
    if not (loss == loss and abs(loss) < float("inf")) or change == 0.0:
        raise CheckFailed(f"actor update: loss {loss}, largest parameter change {change}")
    _line("actor update", f"loss {loss:.3f}, largest parameter change {change:.2e}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_ext.check_gpu", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None, help="HF model path (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--attention", default=RECIPE_ATTENTION, choices=sorted(ATTENTION_PROVIDERS),
                        help="attention implementation to check (the recipes request sdpa)")
    args = parser.parse_args(argv)
    try:
        run_checks(args.model, args.attention)
    except CheckFailed as e:
        print(f"[FAILED] {e}", file=sys.stderr, flush=True)
        return 1
    print("GPU machine ready for the recipes.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
