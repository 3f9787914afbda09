"""Attention backends on the actor's packed micro-batches: forward + backward of a Qwen2.5-1.5B-shaped model.

``python -m verl_ext.apps.bench attention`` (or ``python -m verl_ext.apps.gpu.attention_bench`` for the options). One
training step's model work as verl's FSDP actor does it: gradient checkpointing on (as every recipe), the decoder on one
micro-batch of ``T`` tokens in the backend's layout (:mod:`verl_ext.models.attention`), then the next-token log-probs
of the real tokens through the LM head (in chunks of 4096 rows, checkpointed, as the same work for every
backend) and the backward. Random weights, no download: the model's shape is Qwen2.5-1.5B's (or
``--model``'s ``config.json``). On CUDA in bf16 at T = 8k / 16k / 32k; on CPU (fp32) only the tiny model
(``--size tiny``), a check that every backend's path runs, not a speed measurement.

Micro-batches [decision]: sequences of a prompt of 64-512 tokens and a response log-uniform in 256-8192 tokens
(ADS's 8k responses, ``recipes/ads/_common.yaml``) drawn until ``T`` tokens are filled, the last one cut to fit;
the padded layout pads them to the longest (verl's ``use_remove_padding=false``). Per backend and size: the
first call (compilation included), then the median of ``--repeats`` calls, the peak GPU memory, tokens/s and the
speed relative to ``sdpa`` packed (transformers' default attention).

``--steps N``: instead, the actor's step pattern (:func:`actor_steps`): N steps of eval forwards then train
forward + backward on micro-batches of new sizes, per backend: what compilation costs in the first step and whether
later steps compile again, the block masks' time, a line per call of the first step (``scripts/gpu_first_hour.sh``
runs it for the recipes' ``flex_attention`` and ``sdpa``). ``--forward-only`` leaves out the backward: the same
compilations of flex attention's forward on a CPU, where its compiled kernel has no backward.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import logging
import math
import platform
import statistics
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

from verl_ext.models.attention import BACKENDS, AttentionBackend, model_inputs, next_tokens, predicting_rows

SHAPES = {  # Qwen/Qwen2.5-1.5B's config.json [decision: the recipes' smallest policy family]; tiny: CPU checks
    "1.5b": dict(vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                 num_attention_heads=12, num_key_value_heads=2, max_position_embeddings=32768, rope_theta=1e6,
                 rms_norm_eps=1e-6, tie_word_embeddings=True),
    "tiny": dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=2048, tie_word_embeddings=True),
}
TOKENS = {"1.5b": (8192, 16384, 32768), "tiny": (256, 512)}
LENGTHS = {"1.5b": ((64, 512), (256, 8192)), "tiny": ((4, 32), (8, 256))}  # (prompt range, response range)
HEAD_CHUNK = 4096
STALL_S = 120.0  # --steps: a call running this long prints its stack [decision] (flex's first step at 8k on an H200: 67 s)
REFERENCE = "sdpa"


def model_config(size: str = "1.5b", num_layers: int | None = None, model_path: str | None = None):
    """A Qwen2 config of the named shape (or a checkpoint's own config), optionally cut to ``num_layers``."""
    from transformers import AutoConfig, Qwen2Config

    if model_path is not None:
        config = AutoConfig.from_pretrained(model_path)
    elif size in SHAPES:
        config = Qwen2Config(**SHAPES[size])
    else:
        raise ValueError(f"unknown model size {size!r} (known: {sorted(SHAPES)})")
    if num_layers is not None:
        config.num_hidden_layers = num_layers
        if getattr(config, "layer_types", None) is not None:  # one per layer (transformers >= 4.54)
            config.layer_types = config.layer_types[:num_layers]
    config.use_cache = False
    return config


def random_model(config, attention: str, device: str, dtype: torch.dtype, seed: int = 0):
    """A model of ``config`` with seeded random weights, built on ``device`` (no download)."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, attn_implementation=attention, dtype=dtype)
    return model


@contextlib.contextmanager
def one_cpu_thread(device: str) -> Iterator[None]:
    """Torch on one thread for CPU runs: the tiny model gains nothing from two, and two threads on a loaded
    machine wait for each other (one tiny step measured 25 ms idle, 400-900 ms under load)."""
    threads = torch.get_num_threads()
    if device == "cpu":
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def micro_batch_lengths(tokens: int, size: str, seed: int = 0) -> list[int]:
    """Sequence lengths filling one micro-batch of exactly ``tokens`` tokens (the last sequence cut to fit)."""
    (p_lo, p_hi), (r_lo, r_hi) = LENGTHS[size]
    gen = torch.Generator().manual_seed(seed + tokens)
    lengths: list[int] = []
    while sum(lengths) < tokens:
        prompt = int(torch.randint(p_lo, p_hi + 1, (), generator=gen))
        response = int(math.exp(math.log(r_lo) + torch.rand((), generator=gen).item() * math.log(r_hi / r_lo)))
        lengths.append(min(prompt + response, tokens - sum(lengths)))
    if lengths[-1] < 2 and len(lengths) > 1:  # a one-token sequence predicts nothing: give it to its neighbour
        lengths[-2] += lengths.pop()
    return lengths


def _chunked_nll(head: torch.nn.Module, rows: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean next-token negative log-likelihood through the LM head, ``HEAD_CHUNK`` rows at a time, each chunk
    recomputed in the backward (the full ``T x vocab`` logits would take 10 GB at 32k tokens in bf16)."""
    from torch.utils.checkpoint import checkpoint

    def chunk_nll(h: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(head(h).float(), y, reduction="sum")

    total = sum(checkpoint(chunk_nll, h, y, use_reentrant=False)
                for h, y in zip(rows.split(HEAD_CHUNK), labels.split(HEAD_CHUNK)))
    return total / len(labels)


def training_step(model, seqs: list[torch.Tensor], backend: AttentionBackend) -> Callable[[], float]:
    """One forward + backward of ``model`` on ``seqs`` in the backend's layout; returns a callable giving the loss."""
    inputs = model_inputs(seqs, backend.packed)
    labels = next_tokens(seqs)
    lengths = [len(s) for s in seqs]

    def step() -> float:
        hidden = model.model(**inputs).last_hidden_state
        loss = _chunked_nll(model.lm_head, predicting_rows(hidden, lengths, backend.packed), labels)
        loss.backward()
        model.zero_grad(set_to_none=True)
        return float(loss.detach())

    return step


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def measure(step: Callable[[], float], device: str, repeats: int) -> dict[str, float]:
    """First call (compilation included), one more untimed (first-time costs remain: on CPU with 2 threads the
    second call of a process took 0.58 s, the third 0.03 s), then the median of ``repeats`` calls and the peak GPU
    memory of those."""
    _sync(device)
    start = time.perf_counter()
    loss = step()
    _sync(device)
    first = time.perf_counter() - start
    if not math.isfinite(loss):
        raise RuntimeError(f"loss {loss}")
    step()
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        step()
        _sync(device)
        times.append(time.perf_counter() - start)
    ms = 1000 * statistics.median(times)
    peak = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None
    return {"first_call_s": first, "ms": ms, "peak_gib": peak}


def _short(error: BaseException) -> str:
    return f"{type(error).__name__}: {str(error).strip().splitlines()[0][:160] if str(error).strip() else ''}"


def skip_reason(backend: AttentionBackend, device: str, backward: bool = True) -> str | None:
    """Why ``backend`` cannot be measured on ``device`` here (a CPU has no flex backward and no CUDA kernels), or
    None."""
    if device == "cpu" and backward and not backend.cpu_backward:
        return "skipped: torch has no backward for it on CPU"
    if device == "cpu" and backend.requires is not None:
        return "skipped: CUDA kernel"
    return backend.unavailable()


def _bench_backend(backend: AttentionBackend, config, device: str, size: str, tokens: tuple[int, ...],
                   repeats: int, deadline: float) -> Iterator[dict]:
    """The backend's row at each micro-batch size, on one model (freed at the end)."""
    reason = skip_reason(backend, device)
    model = None
    for t in tokens:
        lengths = micro_batch_lengths(t, size)
        row = {"backend": backend.name, "tokens": t, "sequences": len(lengths),
               "layout_tokens": t if backend.packed else len(lengths) * max(lengths)}
        if reason is None and time.monotonic() > deadline:
            reason = "skipped: time budget spent"
        if reason is not None:
            yield row | {"status": reason}
            continue
        try:
            if model is None:
                model = random_model(config, backend.attn_implementation, device,
                                     torch.bfloat16 if device == "cuda" else torch.float32)
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
                model.train()
            gen = torch.Generator().manual_seed(t)
            seqs = [torch.randint(0, config.vocab_size, (n,), generator=gen).to(device) for n in lengths]
            row |= measure(training_step(model, seqs, backend), device, repeats)
            row |= {"tokens_per_s": t / (row["ms"] / 1000), "status": "ok"}
        except torch.cuda.OutOfMemoryError as e:
            row["status"] = f"out of memory ({_short(e)[:80]})"
            gc.collect()
            torch.cuda.empty_cache()
        except Exception as e:  # one backend's failure must not lose the others' rows
            row["status"] = f"failed: {_short(e)}"
            if model is None:  # the model does not build with this backend: no other size will
                reason = row["status"]
        yield row
    del model
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def run_bench(size: str = "1.5b", device: str = "cuda", tokens: tuple[int, ...] | None = None,
              backends: list[str] | None = None, repeats: int = 3, budget_s: float | None = None,
              model_path: str | None = None, json_path: str | Path | None = None) -> list[dict]:
    """One row per (backend, micro-batch size); rows are written to ``json_path`` as they come (a run cut short
    keeps what it measured). A backend that fails or runs out of memory gets its error in its row."""
    from tqdm import tqdm

    if device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("no CUDA device visible to torch; use --device cpu --size tiny")
    deadline = time.monotonic() + budget_s if budget_s is not None else math.inf
    config = model_config(size, model_path=model_path)
    tokens = tuple(tokens or TOKENS[size])
    names = backends or list(BACKENDS)
    rows: list[dict] = []
    env = environment(device)
    model = f"{model_path} (random weights)" if model_path else f"Qwen2 {size} shape, random weights"
    progress = tqdm(total=len(names) * len(tokens), desc="attention bench", file=sys.stderr)
    with one_cpu_thread(device):
        for name in names:
            for row in _bench_backend(BACKENDS[name], config, device, size, tokens, repeats, deadline):
                rows.append(row)
                progress.update()
                if json_path is not None:
                    Path(json_path).write_text(json.dumps({"environment": env, "model": model, "rows": rows},
                                                          indent=2))
    progress.close()
    return rows


# ------------------------------------------------------------------ the actor's step pattern
class _RecompileLimitLog(logging.Handler):
    """Counts torch._dynamo's 'hit config.recompile_limit' warnings (the frame then runs uncompiled)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.hits = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "recompile_limit" in record.getMessage() or "cache_size_limit" in record.getMessage():
            self.hits += 1


def _compiled_graphs() -> int:
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


@contextlib.contextmanager
def timed_block_masks(device: str) -> Iterator[list[float]]:
    """Within this context, the seconds of every flex-attention block mask transformers builds (its compiled
    ``create_block_mask``, ``transformers/masking_utils.py`` ``flex_attention_mask``), in a list that grows."""
    from transformers import masking_utils

    create = masking_utils.create_block_mask
    seconds: list[float] = []

    def timed(*args, **kwargs):
        _sync(device)
        start = time.perf_counter()
        mask = create(*args, **kwargs)
        _sync(device)
        seconds.append(time.perf_counter() - start)
        return mask

    masking_utils.create_block_mask = timed
    try:
        yield seconds
    finally:
        masking_utils.create_block_mask = create


@contextlib.contextmanager
def stack_on_stall(seconds: float | None, label: str) -> Iterator[None]:
    """Within this context, every ``seconds`` (None: never) a watchdog thread prints ``label`` and the Python stack
    of the thread that entered it (with the GIL held: safe, unlike faulthandler's dump of running threads)."""
    if seconds is None:
        yield
        return
    done, caller = threading.Event(), threading.get_ident()

    def watch() -> None:
        waited = 0.0
        while not done.wait(seconds):
            waited += seconds
            frame = sys._current_frames().get(caller)
            print(f"{label}: still running after {waited:.0f} s, at\n" + "".join(traceback.format_stack(frame)),
                  file=sys.stderr, flush=True)

    watchdog = threading.Thread(target=watch, daemon=True)
    watchdog.start()
    try:
        yield
    finally:
        done.set()
        watchdog.join()


def compilations() -> list[dict]:
    """torch.compile's record of each compilation since the last :func:`torch._dynamo.utils.clear_compilation_metrics`
    (at most 64): the frame (None: a backward graph, compiled at its first backward), seconds, why it recompiled."""
    from torch._dynamo.utils import get_compilation_metrics

    return [{"frame": m.co_name,
             "s": (m.entire_frame_compile_time_s if m.is_forward else m.inductor_compile_time_s) or 0.0,
             "reason": next(iter((m.recompile_reason or "").strip().splitlines()), "")[:200] or None,
             "failed": m.fail_type}
            for m in get_compilation_metrics()]


def actor_steps(backend: AttentionBackend, config, device: str, size: str, tokens: int, steps: int,
                micro_batches: int = 2, forward_only: bool = False, stall_s: float | None = STALL_S) -> dict:
    """``steps`` RL steps as verl's FSDP actor runs them: the model in eval mode for the old / reference log-probs
    (forward only, ``micro_batches`` micro-batches), then in train mode for the update (forward + backward), every
    micro-batch of a new size in ``[3T/4, T]`` tokens (``use_dynamic_bsz``). transformers compiles flex attention
    anew whenever the model's training flag changes (``transformers/integrations/flex_attention.py``
    ``WrappedFlexAttention``); this shows what that costs per step and whether torch's recompile limit is hit,
    which the fixed-shape bench above cannot. ``forward_only``: the update's micro-batches run their forward only,
    with gradients enabled but the weights frozen and no gradient checkpointing (flex attention's compiled kernel
    refuses inputs that need a gradient on CPU): the same frames and guards, without the backward graphs.

    Returns per step: seconds, graphs compiled, seconds compiling, seconds building block masks (flex only), the
    compilations (:func:`compilations`), peak GPU memory; and the recompile-limit hits. Every call of the first step,
    and any later call that compiled, prints a line, and a call still running after ``stall_s`` seconds prints its
    Python stack (:func:`stack_on_stall`): a step that never ends shows where it is. Each call starts from a fresh
    torch.compile state (``torch._dynamo.reset()``), so its compilations and recompile-limit hits are its own, not
    those of what this process compiled before (another size, another model)."""
    from torch._dynamo.utils import clear_compilation_metrics

    torch._dynamo.reset()
    log = _RecompileLimitLog()
    logging.getLogger("torch._dynamo").addHandler(log)
    model = random_model(config, backend.attn_implementation, device,
                         torch.bfloat16 if device == "cuda" else torch.float32)
    if forward_only:  # gradient checkpointing would make the embeddings' output need a gradient
        model.requires_grad_(False)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    gen = torch.Generator().manual_seed(tokens)
    record: dict[str, list] = {k: [] for k in ("step_s", "graphs", "compile_s", "mask_s", "compiled", "peak_gib")}
    try:
        with timed_block_masks(device) as masks:
            for step in range(steps):
                def batch(i: int) -> list[torch.Tensor]:
                    t = int(torch.randint(3 * tokens // 4, tokens + 1, (), generator=gen))
                    lengths = micro_batch_lengths(t, size, seed=1000 * step + i)
                    return [torch.randint(0, config.vocab_size, (n,), generator=gen).to(device) for n in lengths]

                def call(label: str, run: Callable[[], object]) -> None:
                    compiled_before, masks_before = len(compilations()), len(masks)
                    start = time.perf_counter()
                    with stack_on_stall(stall_s, f"{backend.name} step {step} {label}"):
                        result = run()
                        _sync(device)
                    if isinstance(result, float) and not math.isfinite(result):
                        raise RuntimeError(f"step {step} {label}: loss {result}")
                    new = compilations()[compiled_before:]
                    if step == 0 or new:
                        print(f"  {backend.name} step {step} {label}: {time.perf_counter() - start:.2f} s, "
                              f"{sum(c['s'] for c in new):.1f} s compiling {len(new)} graphs, block masks "
                              f"{sum(masks[masks_before:]):.2f} s", file=sys.stderr, flush=True)

                clear_compilation_metrics()
                before, masks_before = _compiled_graphs(), len(masks)
                if device == "cuda":
                    torch.cuda.reset_peak_memory_stats()
                _sync(device)
                start = time.perf_counter()
                model.eval()
                with torch.no_grad():
                    for i in range(micro_batches):
                        seqs = batch(i)
                        call(f"eval {i}", lambda: model.model(**model_inputs(seqs, backend.packed)))
                model.train()
                for i in range(micro_batches):
                    seqs = batch(micro_batches + i)
                    call(f"train {i}", (lambda: model.model(**model_inputs(seqs, backend.packed))) if forward_only
                         else training_step(model, seqs, backend))
                _sync(device)
                record["step_s"].append(time.perf_counter() - start)
                record["graphs"].append(_compiled_graphs() - before)
                record["compiled"].append(compilations())
                record["compile_s"].append(sum(c["s"] for c in record["compiled"][-1]))
                record["mask_s"].append(sum(masks[masks_before:]))
                record["peak_gib"].append(torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else None)
                print(f"{backend.name} step {step}: {record['step_s'][-1]:.2f} s, {record['graphs'][-1]} graphs "
                      f"compiled in {record['compile_s'][-1]:.1f} s, block masks {record['mask_s'][-1]:.2f} s, "
                      f"{log.hits} recompile-limit hits", file=sys.stderr, flush=True)
    finally:
        logging.getLogger("torch._dynamo").removeHandler(log)
        del model
        gc.collect()
        if device == "cuda":
            torch.cuda.empty_cache()
    return {"backend": backend.name, "tokens": tokens, "steps": steps, "forward_only": forward_only, **record,
            "recompile_limit_hits": log.hits}


def run_steps(size: str, device: str, tokens: int, steps: int, backends: list[str] | None = None,
              model_path: str | None = None, json_path: str | Path | None = None,
              forward_only: bool = False, stall_s: float | None = STALL_S) -> list[dict]:
    """:func:`actor_steps` per backend (those that cannot run here get their reason; one that fails, its error),
    written to ``json_path`` as they come."""
    config = model_config(size, model_path=model_path)
    env = environment(device)
    results: list[dict] = []
    for name in backends or list(BACKENDS):
        reason = skip_reason(BACKENDS[name], device, backward=not forward_only)
        try:
            result = ({"backend": name, "tokens": tokens, "status": reason} if reason else
                      actor_steps(BACKENDS[name], config, device, size, tokens, steps, forward_only=forward_only,
                                  stall_s=stall_s) | {"status": "ok"})
        except Exception as e:  # one backend's failure must not lose the others' rows
            result = {"backend": name, "tokens": tokens, "status": f"failed: {_short(e)}"}
            gc.collect()
            if device == "cuda":
                torch.cuda.empty_cache()
        results.append(result)
        if json_path is not None:
            Path(json_path).write_text(json.dumps({"environment": env, "steps": results}, indent=2))
    return results


def steps_report(results: list[dict]) -> str:
    """A Markdown table of :func:`run_steps`: the first step (compilation included) and the later ones."""
    lines = ["actor steps: eval forward then train forward + backward (forward only where marked), new micro-batch "
             "sizes every step",
             "| backend | tokens | steps | first step s | compiling s | later steps s (median) | graphs compiled after "
             "the first | block masks s per later step (median) | recompile-limit hits | status |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in results:
        times, graphs, masks = r.get("step_s", []), r.get("graphs", []), r.get("mask_s", [])
        later = _num(statistics.median(times[1:]), ".2f") if len(times) > 1 else "-"
        later_masks = _num(statistics.median(masks[1:]), ".3f") if len(masks) > 1 else "-"
        name = r["backend"] + (" (forward only)" if r.get("forward_only") else "")
        lines.append(f"| {name} | {r['tokens']} | {len(times) or '-'} | "
                     f"{_num(times[0] if times else None, '.1f')} | "
                     f"{_num(r['compile_s'][0] if times else None, '.1f')} | {later} | "
                     f"{sum(graphs[1:]) if times else '-'} | {later_masks} | {r.get('recompile_limit_hits', '-')} | "
                     f"{r['status'].replace('|', '/')} |")
    return "\n".join(lines)


STACK = ("tokenizers", "huggingface_hub", "safetensors", "regex", "verl")  # besides torch and transformers, read from their metadata


def environment(device: str) -> dict[str, str]:
    """What ran, read in this process: Python, torch, transformers, :data:`STACK` (as ``sys.path`` finds them, so a
    carried wheelhouse first; "none" where missing), the device; on CUDA its name, torch's CUDA and the driver."""
    import importlib.metadata as md

    import transformers

    env = {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__}
    for name in STACK:
        try:
            env[name] = md.version(name)
        except md.PackageNotFoundError:
            env[name] = "none"
    env["device"] = platform.processor() or platform.machine()
    if device == "cuda" and torch.cuda.is_available():
        env["device"] = torch.cuda.get_device_name(0)
        env["cuda"] = str(torch.version.cuda)
        try:
            smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=30)
            env["driver"] = smi.stdout.strip().splitlines()[0] if smi.returncode == 0 else "unknown"
        except (OSError, subprocess.SubprocessError, IndexError):
            env["driver"] = "unknown"
    return env


def _speedups(rows: list[dict]) -> dict[tuple[str, int], float]:
    reference = {r["tokens"]: r["ms"] for r in rows if r["backend"] == REFERENCE and r.get("status") == "ok"}
    return {(r["backend"], r["tokens"]): reference[r["tokens"]] / r["ms"]
            for r in rows if r.get("status") == "ok" and r["tokens"] in reference}


def _num(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def report(rows: list[dict]) -> str:
    speed = _speedups(rows)
    lines = [f"attention: forward + backward per micro-batch; 'x {REFERENCE}': speed relative to {REFERENCE} packed "
             "(> 1 is faster)",
             "| backend | tokens | seqs | layout tokens | first call s | ms | tokens/s | x sdpa | peak GiB | status |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['backend']} | {r['tokens']} | {r['sequences']} | {r['layout_tokens']} | "
                     f"{_num(r.get('first_call_s'), '.1f')} | {_num(r.get('ms'), '.0f')} | "
                     f"{_num(r.get('tokens_per_s'), '.0f')} | {_num(speed.get((r['backend'], r['tokens'])), '.2f')} | "
                     f"{_num(r.get('peak_gib'), '.1f')} | {r['status']} |")
    return "\n".join(lines)


def summary(bench: dict | None, checks: dict | None) -> str:
    """One Markdown table, a row per backend: its update check (``verl_ext.apps.gpu.check_gpu --json``) and its speed at
    each micro-batch size (``--json`` of this bench); either may be missing (a step cut short)."""
    rows = (bench or {}).get("rows", [])
    speed = _speedups(rows)
    tokens = sorted({r["tokens"] for r in rows})
    by_backend: dict[str, dict] = {}
    for r in rows:
        by_backend.setdefault(r["backend"], {})[r["tokens"]] = r
    check_rows = {c["backend"]: c for c in (checks or {}).get("rows", [])}
    head = ["backend", "update check", "log-prob gap", "grad gap"]
    for t in tokens:
        size = f"{t // 1024}k" if t % 1024 == 0 else str(t)
        head += [f"{size} ms", f"{size} x sdpa", f"{size} GiB"]
    env = ", ".join(f"{k} {v}" for k, v in (bench or {}).get("environment", {}).items())
    lines = [f"{env or 'no bench results'}; bench model: {(bench or {}).get('model', '-')}; update check: gaps to "
             "eager attention on the padded batch (gradients: relative L2); 'x sdpa': speed relative to sdpa packed",
             "| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
    for name in dict.fromkeys([*by_backend, *check_rows]):
        c = check_rows.get(name, {})
        cells = [name, c.get("status", "not run"), _num(c.get("logp_gap"), ".1e"), _num(c.get("grad_gap"), ".1e")]
        for t in tokens:
            r = by_backend.get(name, {}).get(t, {})
            if r.get("status") == "ok":
                cells += [f"{r['ms']:.0f}", _num(speed.get((name, t)), ".2f"), _num(r.get("peak_gib"), ".1f")]
            else:  # a skip's reason is in the update-check column; a failure's is kept
                status = r.get("status", "not run")
                cells += [status if status.startswith("failed") else status.split(":")[0], "-", "-"]
        lines.append("| " + " | ".join(cell.replace("|", "/") for cell in cells) + " |")
    return "\n".join(lines)


def write_summary(out: Path, device: str) -> str:
    """``out/results.md`` and ``out/results.json`` from ``out/bench.json``, ``out/update.json`` and, where the
    actor-step run and verl's actor (``python -m verl_ext.apps.gpu.verl_actor --json``) left them, ``out/steps.json``
    and ``out/verl_actor.json`` with its table ``out/verl_actor.md``; headed by the stack this process finds
    (:func:`environment`: the first GPU hour runs every step on the same path)."""
    def load(name: str) -> dict | None:
        path = out / name
        return json.loads(path.read_text()) if path.exists() else None

    bench, checks, steps, verl_actor = load("bench.json"), load("update.json"), load("steps.json"), \
        load("verl_actor.json")
    stack = environment(device)
    table = "stack: " + ", ".join(f"{k} {v}" for k, v in stack.items()) + "\n\n" + summary(bench, checks)
    if steps is not None:
        table += "\n\n" + steps_report(steps["steps"])
    if (out / "verl_actor.md").exists():
        table += "\n\n" + (out / "verl_actor.md").read_text().strip()
    (out / "results.md").write_text(table + "\n")
    (out / "results.json").write_text(json.dumps({"stack": stack, "bench": bench, "update_check": checks, "steps": steps,
                                                  "verl_actor": verl_actor}, indent=2))
    return table


def run() -> list[dict]:
    """``make bench``'s entry: the 1.5B shape at 8k / 16k / 32k on a GPU; on a CPU only the tiny model."""
    if torch.cuda.is_available():
        return run_bench("1.5b", "cuda")
    print("attention: no GPU, so the tiny model on CPU only (the 1.5B-shaped 8k/16k/32k bench needs CUDA)",
          flush=True)
    return run_bench("tiny", "cpu", repeats=1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_ext.apps.gpu.attention_bench", description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="1.5b", choices=sorted(SHAPES), help="model shape (default 1.5b)")
    parser.add_argument("--model", default=None, help="take the shape from this checkpoint's config.json")
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--tokens", type=int, nargs="+", help="micro-batch sizes (default: the size's)")
    parser.add_argument("--backends", nargs="+", choices=list(BACKENDS), help="default: all")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--budget-s", type=float, default=None, help="start no measurement after this many seconds")
    parser.add_argument("--json", default=None, help="write the rows here (as they come)")
    parser.add_argument("--steps", type=int, default=0, help="instead of the bench: this many RL steps per backend "
                        "(eval forward, then train forward + backward, new micro-batch sizes each time) at the "
                        "first --tokens size; per-step seconds and compilations")
    parser.add_argument("--forward-only", action="store_true", help="with --steps: the update's micro-batches run "
                        "their forward only (weights frozen): runs flex_attention on a CPU, whose compiled kernel has "
                        "no backward there")
    parser.add_argument("--stall-s", type=float, default=STALL_S, help="with --steps: a call running this long "
                        "prints its Python stack, again every as many seconds (default %(default)s)")
    parser.add_argument("--summary", metavar="DIR", help="run nothing: write DIR/results.md (one table) and "
                        "DIR/results.json from DIR/bench.json, DIR/update.json (verl_ext.apps.gpu.check_gpu --json) and "
                        "DIR/steps.json (--steps)")
    args = parser.parse_args(argv)
    if args.summary:
        print(write_summary(Path(args.summary), args.device))
        return 0
    if args.steps:
        results = run_steps(args.size, args.device, (args.tokens or TOKENS[args.size])[0], args.steps,
                            args.backends, args.model, args.json, args.forward_only, args.stall_s)
        print(steps_report(results))
        return 0 if any("step_s" in r for r in results) else 1
    rows = run_bench(args.size, args.device, args.tokens, args.backends, args.repeats, args.budget_s, args.model,
                     args.json)
    print(report(rows))
    return 0 if any(r["status"] == "ok" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
