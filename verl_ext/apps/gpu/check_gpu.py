"""``make check-gpu`` / ``python -m verl_ext.apps.gpu.check_gpu``: is this GPU machine ready for the recipes?

Run it after ``make install-gpu`` and before a launcher. One line per check, exit 1 at the first failure:

1. Python within verl 0.9.1's bound (``Requires-Python: <3.13,>=3.10``);
2. torch is a CUDA build, the NVIDIA driver is new enough for that CUDA (verl's ``vllm`` extra pins torch
   2.11.0, whose PyPI wheel needs the CUDA 13.0 libraries: driver generation >= 580), and torch sees GPUs;
3. vLLM imports;
4. the attention backends the recipes request can run (:mod:`verl_ext.models.attention`; ``flex_attention``, ``sdpa``: torch itself;
   ``flash_attention_2``: the ``flash_attn`` package, which the GPU install does not bring);
5. one tiny vLLM generation, and one tiny actor update as verl's FSDP engine runs it (fp32 parameters, bf16
   autocast, the backend's layout: packed rows without attention mask, or padded) on a small model (default: the
   embedded SmolLM2-135M-Instruct): loss finite, parameters changed, log-probs and gradients equal to eager
   attention's on the padded batch, and far from those of packed sequences that see each other.

``--no-vllm``: a bare GPU machine with torch and transformers only (no vLLM, verl, Ray, Hydra; none imported):
no Python bound, no vLLM; the actor update for every backend of :data:`verl_ext.models.attention.BACKENDS` (those that
cannot run here skipped with the reason, a failing one listed and the others still checked) on random weights of
Qwen2.5-1.5B's shape cut to 2 layers (or ``--model``); ``--json`` keeps the rows (``scripts/gpu_first_hour.sh``).
``--cpu`` runs the update on the CPU in fp32 (flex_attention through torch's reference path: no CPU backward).

**Attention decision.** verl loads the actor and reference model with ``override_config.attn_implementation``,
default ``flash_attention_2`` (``verl/workers/config/model.py:185``). The GPU install
(``verl[verl-core,math,vllm]==0.9.1``) has no flash-attn: only verl's ``fsdp`` / ``megatron`` extras name it
(``flash-attn==2.8.3``), and PyPI serves flash-attn as source only (a CUDA compile on the user's machine). vLLM
0.24.0 brings its own attention kernels for generation, not for transformers. The recipes therefore request
``flex_attention`` (torch's compiled block-sparse kernel, no extra package) or ``sdpa``, each with a micro-batch
token budget a GPU ran through its first step (:data:`verl_ext.models.attention.MEASURED_PAIRS`), and keep
``use_remove_padding``: verl calls the model with ``attention_mask=None`` and per-sequence ``position_ids``
(``verl/workers/engine/fsdp/transformer_impl.py:1256-1260``), verl's remove-padding patch only touches flash
attention (``verl/models/transformers/monkey_patch.py:544-552``), and transformers masks the packed sequences
per document from the restarting ``position_ids`` (``transformers/masking_utils.py`` ``find_packed_sequence_indices``).
Measured on one H200 by ``scripts/gpu_first_hour.sh`` (scripts/README.md, Attention backends): flex attention at 1.3x / 1.9x /
3.1x the speed of ``sdpa`` (which gets a dense ``T x T`` mask on packed rows) at 8k / 16k / 32k tokens and about a
minute of compilation in the first step, but in the actor's step pattern only its 8192-token budget was seen to
finish the first step. With flash-attn installed by hand,
``actor_rollout_ref.model.override_config.attn_implementation=flash_attention_2`` restores verl's default;
``--attention flash_attention_2`` checks it here. The other backends and their overrides:
:mod:`verl_ext.models.attention`; their speed: ``python -m verl_ext.apps.bench attention``.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import math
import re
import subprocess
import sys
import time
import warnings
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import torch

from verl_ext.models.attention import (BACKENDS, MEASURED_PAIRS, AttentionBackend, flex_reference, get_backend,
                                token_log_probs)
from verl_ext.apps.gpu.attention_bench import model_config, one_cpu_thread, random_model

VERL_DEFAULT_ATTENTION = "flash_attention_2"  # verl/workers/config/model.py:185
# what the recipes request: the backends of the measured pairs (tests/recipes/test_gpu_stack_on_cpu.py)
RECIPE_ATTENTIONS = tuple(dict.fromkeys(backend for backend, _ in MEASURED_PAIRS))
# attention implementation -> (distribution that provides it, module to import); None: torch itself
ATTENTION_PROVIDERS = {b.attn_implementation: b.requires for b in BACKENDS.values()} | {"eager": None}
MIN_DRIVER = {13: 580, 12: 525, 11: 450}  # CUDA major -> minimum NVIDIA Linux driver (minor-version compatibility)
MAX_PYTHON = (3, 13)  # verl 0.9.1: Requires-Python <3.13
# [decision] update-check tolerances, gap to eager attention on the padded batch. Measured on CPU (2-layer
# Qwen2.5-1.5B shape, random weights): fp32 <= 3e-6 log-prob, 1e-6 gradient; bf16 autocast 0.027 and 0.012;
# sequences that see each other 2.9 and 1.1 (the embedded SmolLM2 in bf16: log-prob gap 0.05)
LOGP_TOL = {"cuda": 0.25, "cpu": 1e-4}
GRAD_TOL = {"cuda": 0.1, "cpu": 1e-4}


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

    from packaging.requirements import Requirement

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


UPDATE_LENGTHS = (70, 11, 150, 23)  # four sequences, 254 tokens: they cross flex_attention's 128-token blocks


def update_check(build: Callable[[], torch.nn.Module], backend: AttentionBackend,
                 device: str = "cuda") -> dict[str, float]:
    """One actor step as verl's FSDP engine runs it (fp32 parameters, bf16 autocast on CUDA) on four sequences in
    the backend's layout, beside eager attention on the padded batch with the same weights: the largest per-token
    log-prob gap and the relative L2 gap of all gradients (loss: mean token log-prob). The same two gaps for packed
    rows whose positions do not restart (the sequences see each other) give the scale of a wrong mask. Then an
    AdamW step: the loss and the largest parameter change. On CPU, flex_attention runs torch's reference path
    (:func:`verl_ext.models.attention.flex_reference`; its compiled kernel has no backward there)."""
    model = build().to(device).train()
    gen = torch.Generator().manual_seed(0)
    seqs = [torch.randint(3, model.config.vocab_size, (n,), generator=gen).to(device) for n in UPDATE_LENGTHS]
    reference_path = device == "cpu" and not backend.cpu_backward

    def gradients(attention: str, packed: bool, restart_positions: bool = True):
        model.set_attn_implementation(attention)
        model.zero_grad(set_to_none=True)
        with (torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=device == "cuda"),
              flex_reference() if reference_path and attention == backend.attn_implementation else nullcontext()):
            logp = token_log_probs(model, seqs, packed, restart_positions)
        loss = -logp.mean()
        loss.backward()
        return logp.detach(), torch.cat([p.grad.flatten().float() for p in model.parameters()]), loss.detach()

    def gaps(logp, grad) -> tuple[float, float]:
        return float((logp - ref_logp).abs().max()), float((grad - ref_grad).norm() / ref_grad.norm())

    start = time.perf_counter()
    ref_logp, ref_grad, _ = gradients("eager", packed=False)
    leak_logp_gap, leak_grad_gap = gaps(*gradients("sdpa", packed=True, restart_positions=False)[:2])
    logp, grad, loss = gradients(backend.attn_implementation, backend.packed)
    logp_gap, grad_gap = gaps(logp, grad)
    before = [p.detach().clone() for p in model.parameters()]
    torch.optim.AdamW(model.parameters(), lr=1e-4).step()
    change = max(float((p.detach() - b).abs().max()) for p, b in zip(model.parameters(), before))
    return {"loss": float(loss), "change": change, "logp_gap": logp_gap, "grad_gap": grad_gap,
            "leak_logp_gap": leak_logp_gap, "leak_grad_gap": leak_grad_gap, "seconds": time.perf_counter() - start}


def tiny_generate(model_path: str) -> str:
    from vllm import LLM, SamplingParams

    llm = LLM(model=model_path, dtype="bfloat16", gpu_memory_utilization=0.3, max_model_len=512, enforce_eager=True)
    out = llm.generate(["What is 2 + 3?"], SamplingParams(max_tokens=16, temperature=0.0))
    return out[0].outputs[0].text


def check_update(result: dict[str, float], device: str) -> str:
    """Raise unless the step ran and the backend matched the reference: each gap within a fixed tolerance and at
    most a tenth of the gap of sequences that see each other."""
    loss, change = result["loss"], result["change"]
    if not math.isfinite(loss) or change == 0.0:
        raise CheckFailed(f"actor update: loss {loss}, largest parameter change {change}")
    for gap, leak, tol, what in ((result["logp_gap"], result["leak_logp_gap"], LOGP_TOL[device], "log-probs"),
                                 (result["grad_gap"], result["leak_grad_gap"], GRAD_TOL[device], "gradients")):
        if not (gap <= tol and gap <= leak / 10):
            raise CheckFailed(f"actor update: {what} differ from eager attention on the padded batch by {gap:.3g} "
                              f"(tolerance {tol}; sequences that see each other: {leak:.3g}): the attention "
                              "implementation does not separate packed sequences")
    return (f"loss {loss:.3f}, largest parameter change {change:.2e}, gap to eager padded: log-prob "
            f"{result['logp_gap']:.1e}, gradient {result['grad_gap']:.1e} (sequences that see each other: "
            f"{result['leak_logp_gap']:.1e}, {result['leak_grad_gap']:.1e}; {result['seconds']:.1f} s)")


def _line(name: str, detail: str, status: str = "ok") -> None:
    print(f"[{status}] {name}: {detail}", flush=True)


def model_builder(model: str | None, device: str, vllm: bool) -> tuple[str, Callable[[], torch.nn.Module]]:
    """What the update check loads: ``model`` (a checkpoint), else the embedded SmolLM2 (with vLLM), else random
    weights (no vLLM: Qwen2.5-1.5B's shape cut to 2 layers on CUDA, the tiny shape on CPU)."""
    from transformers import AutoModelForCausalLM

    if model is None and vllm:
        from verl_ext.models.embedded import embedded_model_path

        model = embedded_model_path()
    if model is not None:
        return model, lambda: AutoModelForCausalLM.from_pretrained(model, dtype=torch.float32,
                                                                   attn_implementation="sdpa")
    size, layers = ("1.5b", 2) if device == "cuda" else ("tiny", None)
    config = model_config(size, layers)
    return (f"random weights, Qwen2 {size} shape, {config.num_hidden_layers} layers",
            lambda: random_model(config, "sdpa", device, torch.float32))


def check_backends(build: Callable[[], torch.nn.Module], names: list[str], device: str, required: bool,
                   record: Callable[[list[dict]], None] = lambda rows: None) -> list[dict]:
    """The update check for each backend; one row each, passed to ``record`` as they come. ``required``: a
    backend that cannot run fails the check at once; otherwise it is skipped with its reason, and a failing
    backend does not stop the others."""
    rows: list[dict] = []
    with one_cpu_thread(device):
        for name in names:
            rows.append(_check_backend(build, get_backend(name), device, required))
            record(rows)
    return rows


def _check_backend(build: Callable[[], torch.nn.Module], backend: AttentionBackend, device: str,
                   required: bool) -> dict:
    name = backend.name
    reason = backend.unavailable()
    if reason is not None:
        if required:
            raise CheckFailed(f"attention {name} {reason}; install it or use "
                              "actor_rollout_ref.model.override_config.attn_implementation="
                              + " or ".join(RECIPE_ATTENTIONS))
        _line(f"update {name}", reason, "skip")
        return {"backend": name, "status": f"skipped: {reason}"}
    if required:
        _line("attention", name)
    try:
        result = update_check(build, backend, device)
        detail = check_update(result, device)
    except Exception as e:  # CheckFailed, or the backend itself failing (a kernel that does not load)
        if required:
            raise CheckFailed(str(e)) from e
        _line(f"update {name}", str(e), "FAILED")
        return {"backend": name, "status": f"failed: {str(e).splitlines()[0][:200]}"}
    _line("actor update" if required else f"update {name}", detail)
    return {"backend": name, "status": "ok", **result}


def run_checks(model: str | None, attentions: list[str] | None, device: str = "cuda", vllm: bool = True,
               record: Callable[[list[dict]], None] = lambda rows: None) -> list[dict]:
    """The checks in order; raises :class:`CheckFailed` at the first failure, except that without vLLM every
    backend is checked and a failure is a row. Returns the update checks' rows."""
    if vllm and sys.version_info[:2] >= MAX_PYTHON:
        raise CheckFailed(f"Python {sys.version.split()[0]}: verl 0.9.1 needs Python < 3.13")
    _line("python", sys.version.split()[0])
    if device == "cuda":
        if torch.version.cuda is None:
            raise CheckFailed(f"no CUDA device: torch {torch.__version__} is a CPU-only build; on the GPU machine "
                              "run `make install-gpu`")
        try:
            _line("driver", check_driver(driver_version(), torch.version.cuda))
        except CheckFailed as e:  # without vLLM's pinned CUDA: torch's own device check below decides
            if vllm or "nvidia-smi" not in str(e):
                raise
            _line("driver", str(e), "skip")
        if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
            raise CheckFailed(f"no CUDA device visible to torch {torch.__version__} (check CUDA_VISIBLE_DEVICES)")
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        _line("gpus", f"{len(names)}: " + ", ".join(f"{names.count(n)} x {n}" for n in dict.fromkeys(names))
              + f" (torch {torch.__version__}, CUDA {torch.version.cuda})")
        if vllm:
            import vllm as vllm_module

            _line("vllm", vllm_module.__version__)
    required = vllm or attentions is not None
    names = attentions or (list(RECIPE_ATTENTIONS) if vllm else list(BACKENDS))
    for name in names:
        get_backend(name)  # unknown names fail before any model loads
    source, build = model_builder(model, device, vllm)
    _line("model", source)
    if vllm and device == "cuda":
        start = time.perf_counter()
        text = tiny_generate(source)
        _line("vllm generate", f"{text!r} ({time.perf_counter() - start:.1f} s)")
    return check_backends(build, names, device, required, record)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_ext.apps.gpu.check_gpu", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None, help="HF model path (default: the embedded SmolLM2-135M-Instruct; "
                        "with --no-vllm, random weights)")
    parser.add_argument("--attention", nargs="+", default=None, choices=list(BACKENDS), metavar="BACKEND",
                        help=f"attention backends to check, each required (default: {', '.join(RECIPE_ATTENTIONS)}, "
                        f"which the recipes request; with --no-vllm every backend, those that cannot run skipped). "
                        f"Choices: {', '.join(BACKENDS)}")
    parser.add_argument("--cpu", action="store_true",
                        help="skip the GPU, driver and vLLM checks; run the actor update on the CPU in fp32")
    parser.add_argument("--no-vllm", action="store_true",
                        help="a bare GPU machine (torch + transformers): no vLLM, verl, Ray or Hydra; no Python "
                        "bound; the actor update for each attention backend")
    parser.add_argument("--json", default=None, help="write the update checks' rows here")
    args = parser.parse_args(argv)
    device = "cpu" if args.cpu else "cuda"
    rows: list[dict] = []

    def record(done: list[dict], failure: str | None = None) -> None:  # as rows come: a run cut short keeps them
        rows[:] = done
        if args.json:
            Path(args.json).write_text(json.dumps({"device": device, "rows": done, "failure": failure}, indent=2))

    try:
        run_checks(args.model, args.attention, device, vllm=not args.no_vllm, record=record)
        failed = [r["backend"] for r in rows if r["status"].startswith("failed")]
        if failed:
            raise CheckFailed(f"actor update failed with {', '.join(failed)}")
    except CheckFailed as e:
        print(f"[FAILED] {e}", file=sys.stderr, flush=True)
        record(rows, str(e))
        return 1
    print("CPU pieces pass." if args.cpu else "GPU machine ready for the recipes." if not args.no_vllm
          else "Actor update checked on this GPU.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
