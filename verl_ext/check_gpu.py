"""``make check-gpu`` / ``python -m verl_ext.check_gpu``: is this GPU machine ready for the recipes?

Run it after ``make install-gpu`` and before a launcher. One line per check, exit 1 at the first failure:

1. Python within verl 0.9.1's bound (``Requires-Python: <3.13,>=3.10``);
2. torch is a CUDA build, the NVIDIA driver is new enough for that CUDA (verl's ``vllm`` extra pins torch
   2.11.0, whose PyPI wheel needs the CUDA 13.0 libraries: driver generation >= 580), and torch sees GPUs;
3. vLLM imports;
4. the attention implementation the recipes request is importable (``sdpa``: torch itself;
   ``flash_attention_2``: the ``flash_attn`` package, which the GPU install does not bring);
5. one tiny vLLM generation, and one tiny actor update as verl's FSDP engine runs it (fp32 parameters,
   bf16 autocast, a packed batch without attention mask; loss finite, parameters changed, packed log-probs
   equal to the padded batch's) on a small model (default: the embedded SmolLM2-135M-Instruct).

**Attention decision.** verl loads the actor and reference model with ``override_config.attn_implementation``,
default ``flash_attention_2`` (``verl/workers/config/model.py:185``). The GPU install
(``verl[verl-core,math,vllm]==0.9.1``) has no flash-attn: only verl's ``fsdp`` / ``megatron`` extras name it
(``flash-attn==2.8.3``), and PyPI serves flash-attn as source only (a CUDA compile on the user's machine). vLLM
0.24.0 brings its own attention kernels for generation, not for transformers. The recipes therefore request
``sdpa`` (torch's kernels) and keep ``use_remove_padding``: verl then calls the model with ``attention_mask=None``
and per-sequence ``position_ids`` (``verl/workers/engine/fsdp/transformer_impl.py:1256-1260``), verl's
remove-padding patch only touches flash attention (``verl/models/transformers/monkey_patch.py:544-552``), and
transformers (5.9.0, as pinned; same lines in 5.10) masks the packed sequences block-diagonally from the
restarting ``position_ids`` (``transformers/masking_utils.py:883-888`` ``find_packed_sequence_indices``,
``992-994``). The cost: the mask is materialised, one ``T x T`` boolean per packed micro-batch of ``T`` tokens
(1 GiB at ``ppo_max_token_len_per_gpu=32768``), which torch's memory-efficient kernel reads as an additive
bias, and no flash kernel. With flash-attn installed by hand,
``actor_rollout_ref.model.override_config.attn_implementation=flash_attention_2`` restores verl's default;
``--attention flash_attention_2`` checks it here.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata as md
import math
import re
import subprocess
import sys
import time
import warnings
from pathlib import Path

from packaging.requirements import Requirement

VERL_DEFAULT_ATTENTION = "flash_attention_2"  # verl/workers/config/model.py:185
RECIPE_ATTENTION = "sdpa"  # what recipes/{bots,coba}/_common.yaml request (tests/recipes/test_gpu_stack_on_cpu.py)
# attention implementation -> (distribution that provides it, module to import); None: torch itself
ATTENTION_PROVIDERS = {
    "flash_attention_2": ("flash-attn", "flash_attn"),
    "flash_attention_3": ("flash-attn-3", "flash_attn_interface"),
    "sdpa": None,
    "eager": None,
    "flex_attention": None,
}
MIN_DRIVER = {13: 580, 12: 525, 11: 450}  # CUDA major -> minimum NVIDIA Linux driver (minor-version compatibility)
MAX_PYTHON = (3, 13)  # verl 0.9.1: Requires-Python <3.13


class CheckFailed(RuntimeError):
    pass


def requested_attentions(config) -> dict[str, str]:
    """Attention implementation per HF model verl loads for this config: actor, plus reference (a copy of the
    actor's model config, ``verl/workers/engine_workers.py:556``) and critic when the config uses them."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy

    def attention(model_cfg) -> str:
        return str((model_cfg.get("override_config") or {}).get("attn_implementation", VERL_DEFAULT_ATTENTION))

    roles = {"actor": attention(config.actor_rollout_ref.model)}
    if need_reference_policy(config):
        roles["ref"] = roles["actor"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # need_critic warns that GRPO runs without a critic
        if need_critic(config):
            roles["critic"] = attention(config.critic.model)
    return roles


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def gpu_install_packages(project_root: str | Path) -> set[str]:
    """Distribution names the GPU install asks for directly: pyproject's ``gpu`` extra, with the verl extras
    it names expanded from verl's installed metadata (``verl[vllm]`` -> vllm, torch, ``verl[verl-core]``...)."""
    import tomllib

    project = tomllib.loads((Path(project_root) / "pyproject.toml").read_text())["project"]
    pending = [Requirement(r) for r in project["optional-dependencies"]["gpu"]]
    verl_requires = [Requirement(r) for r in md.requires("verl") or []]
    names: set[str] = set()
    expanded: set[str] = set()
    while pending:
        req = pending.pop()
        names.add(_norm(req.name))
        if _norm(req.name) != "verl":
            continue
        for extra in ({""} | set(req.extras)) - expanded:  # "": verl's own requirements
            expanded.add(extra)
            pending += [dep for dep in verl_requires if dep.marker is None or dep.marker.evaluate({"extra": extra})]
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


def parse_driver_version(smi_output: str) -> str:
    """The driver version from ``nvidia-smi --query-gpu=driver_version --format=csv,noheader`` (one line a GPU)."""
    versions = {line.strip() for line in smi_output.splitlines() if line.strip()}
    if len(versions) != 1 or not re.fullmatch(r"\d+(\.\d+)*", next(iter(versions))):
        raise CheckFailed(f"cannot read the NVIDIA driver version from nvidia-smi output {smi_output!r}")
    return versions.pop()


def check_driver(driver_version: str, cuda_version: str) -> str:
    """Raise unless the driver can run torch's CUDA; returns the line to print."""
    need = min_driver(cuda_version)
    if int(driver_version.split(".")[0]) < need:
        raise CheckFailed(f"NVIDIA driver {driver_version} is too old for the installed torch's CUDA {cuda_version} "
                          f"(needs driver >= {need}): upgrade the driver, or install a torch built for an older CUDA")
    return f"{driver_version} (CUDA {cuda_version} needs >= {need})"


def driver_version() -> str:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise CheckFailed("no CUDA device: nvidia-smi not found (no NVIDIA driver on this machine)") from None
    if out.returncode != 0:
        raise CheckFailed(f"no CUDA device: nvidia-smi failed: {(out.stderr or out.stdout).strip()}")
    return parse_driver_version(out.stdout)


def packed_batch(seqs):
    """verl's remove-padding layout: one row, ``position_ids`` restarting at 0 per sequence, no attention mask."""
    import torch

    return torch.cat(seqs)[None], torch.cat([torch.arange(len(s), device=s.device) for s in seqs])[None]


def token_log_probs(logits, labels):
    return logits.float().log_softmax(-1).gather(-1, labels[..., None])[..., 0]


def tiny_update(model_path: str, attention: str, device: str = "cuda") -> dict[str, float]:
    """One actor step as verl's FSDP engine runs it: fp32 parameters, bf16 autocast on CUDA, two sequences packed
    (``attention_mask=None``), backward and an AdamW step. Returns the loss, the largest parameter change and the
    largest gap between the packed and the padded batch's per-token log-probs (before the step)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32, attn_implementation=attention)
    model.to(device).train()
    autocast = torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=device == "cuda")
    gen = torch.Generator().manual_seed(0)
    seqs = [torch.randint(3, model.config.vocab_size, (n,), generator=gen).to(device) for n in (11, 23)]
    ids, pos = packed_batch(seqs)
    padded = torch.zeros(len(seqs), max(map(len, seqs)), dtype=torch.long, device=device)
    mask = torch.zeros_like(padded)
    for i, s in enumerate(seqs):
        padded[i, : len(s)], mask[i, : len(s)] = s, 1
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    with autocast:
        logp = token_log_probs(model(input_ids=ids, position_ids=pos, use_cache=False).logits[0, :-1], ids[0, 1:])
        with torch.no_grad():
            ref = token_log_probs(model(input_ids=padded, attention_mask=mask).logits[:, :-1], padded[:, 1:])
    starts = [0, len(seqs[0])]
    gap = max(float((logp.detach()[start: start + len(s) - 1] - ref[i, : len(s) - 1]).abs().max())
              for i, (start, s) in enumerate(zip(starts, seqs)))
    boundary = torch.ones_like(logp, dtype=torch.bool)
    boundary[len(seqs[0]) - 1] = False  # the first sequence's last token does not predict the second's first
    loss = -logp[boundary].mean()
    loss.backward()
    torch.optim.AdamW(model.parameters(), lr=1e-4).step()
    change = max(float((p.detach() - before[n]).abs().max()) for n, p in model.named_parameters())
    return {"loss": float(loss.detach()), "change": change, "packed_gap": gap}


def tiny_generate(model_path: str) -> str:
    from vllm import LLM, SamplingParams

    llm = LLM(model=model_path, dtype="bfloat16", gpu_memory_utilization=0.3, max_model_len=512, enforce_eager=True)
    out = llm.generate(["What is 2 + 3?"], SamplingParams(max_tokens=16, temperature=0.0))
    return out[0].outputs[0].text


def check_update(result: dict[str, float], packed_tol: float) -> str:
    loss, change, gap = result["loss"], result["change"], result["packed_gap"]
    if not math.isfinite(loss) or change == 0.0:
        raise CheckFailed(f"actor update: loss {loss}, largest parameter change {change}")
    if not gap <= packed_tol:
        raise CheckFailed(f"actor update: packed and padded log-probs differ by {gap:.3g} (> {packed_tol}): the "
                          "attention implementation does not separate packed sequences")
    return f"loss {loss:.3f}, largest parameter change {change:.2e}, packed vs padded log-prob gap {gap:.2e}"


def _line(name: str, detail: str) -> None:
    print(f"[ok] {name}: {detail}", flush=True)


def run_checks(model: str | None, attention: str, device: str = "cuda") -> None:
    if sys.version_info[:2] >= MAX_PYTHON:
        raise CheckFailed(f"Python {sys.version.split()[0]}: verl 0.9.1 needs Python < 3.13")
    _line("python", sys.version.split()[0])
    import torch

    if device == "cuda":
        if torch.version.cuda is None:
            raise CheckFailed(f"no CUDA device: torch {torch.__version__} is a CPU-only build; on the GPU machine "
                              "run `make install-gpu`")
        _line("driver", check_driver(driver_version(), torch.version.cuda))
        if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
            raise CheckFailed(f"no CUDA device visible to torch {torch.__version__} (check CUDA_VISIBLE_DEVICES)")
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        _line("gpus", f"{len(names)}: " + ", ".join(f"{names.count(n)} x {n}" for n in dict.fromkeys(names))
              + f" (torch {torch.__version__}, CUDA {torch.version.cuda})")
        vllm = importlib.import_module("vllm")
        _line("vllm", vllm.__version__)
    provider = ATTENTION_PROVIDERS[attention]
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
    if device == "cuda":
        start = time.perf_counter()
        text = tiny_generate(model)
        _line("vllm generate", f"{text!r} ({time.perf_counter() - start:.1f} s)")
    # embedded model, CPU: bf16 autocast gap 0.05 (fp32: 8e-6); unrestarted positions (leaking) give 6.7
    packed_tol = 0.5 if device == "cuda" else 1e-4
    _line("actor update", check_update(tiny_update(model, attention, device), packed_tol))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_ext.check_gpu", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None, help="HF model path (default: the embedded SmolLM2-135M-Instruct)")
    parser.add_argument("--attention", default=RECIPE_ATTENTION, choices=sorted(ATTENTION_PROVIDERS),
                        help=f"attention implementation to check (the recipes request {RECIPE_ATTENTION})")
    parser.add_argument("--cpu", action="store_true",
                        help="skip the GPU, driver and vLLM checks; run the actor update on the CPU in fp32")
    args = parser.parse_args(argv)
    try:
        run_checks(args.model, args.attention, "cpu" if args.cpu else "cuda")
    except CheckFailed as e:
        print(f"[FAILED] {e}", file=sys.stderr, flush=True)
        return 1
    print("CPU pieces pass." if args.cpu else "GPU machine ready for the recipes.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
