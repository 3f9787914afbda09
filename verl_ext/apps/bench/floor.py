"""A demo step against its floor: the same model and token shapes in plain torch on this CPU, beside a profile of a
real demo run (``python -m verl_ext.apps.bench floor``).

**Floor** (:func:`measure_floor`): the demo's policy (the warm start of ``make demo``), ``rollouts`` sequences of
``prompt`` + ``response`` tokens as one ``[rollouts, prompt + response]`` batch without padding (SDPA, causal), in
the trainer's compute precision (:func:`verl_ext.cpu.cpu_precision`: bf16 autocast over fp32 weights, as FSDP2's
bf16 ``param_dtype`` computes over fp32 master weights, or fp32) and with the trainer's threads (every core):

* ``forward``: no-grad forward, the logits' log-softmax (fp32) gathered at the next tokens: old log-probs' floor;
* ``update``: the same with grad, a token-mean policy-gradient loss over the response tokens, backward, gradient
  clipping at 1.0 and one AdamW step (lr 1e-5, weight decay 0.01: verl's actor defaults): the update's floor. The
  demo's update is one mini-batch (``ppo_mini_batch_size`` = the step's tasks) in one micro-batch (~1,900 tokens
  under ``ppo_max_token_len_per_gpu`` 4,096), so one forward, one backward and one optimiser step here too.

Median of ``repeats`` after one warm-up each.

**Profile** (:func:`profile_run`): the demo's trainer command (:func:`demo_command`) for ``steps`` steps, every
output line timestamped as it arrives; from the run's metrics the median ``timing_s/*`` of steps 2.. (step 1 also
pays warm-ups), the token shapes, and from the log the start-up (:func:`startup`): launch to step 1's start
(``step:1``'s arrival less its ``timing_s/step``) split at verl's own milestones, with each Ray process's start
(Ray's ``python-core-worker-*.log``) and the moment it began importing verl (its ``Platform override`` line).

Ratios: ``timing_s/old_log_prob`` / forward floor and ``timing_s/update_actor`` / update floor.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

DEMO_SHAPES = {"rollouts": 24, "prompt": 57, "response": 21}  # make demo's steps (outputs/demo/run/metrics)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
PREFIX = re.compile(r"^\((?:(?P<name>\w+) )?pid=(?P<pid>\d+)(?:, ip=[^)]*)?\) ?(?P<body>.*)$")
STAMP = re.compile(r"(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[,.]\d{3})")
# verl's set-up milestones, in order (trainer_base.py _setup / fit, main_ppo.py), and the driver's
MILESTONES = (("driver imports verl", "Platform override from VERL_PLATFORM"),
              ("ray.init called", "ray init kwargs:"),
              ("Ray instance up", "Started a local Ray instance"),
              ("dataloaders ready", "dataloader initialized"),
              ("worker group created", "create worker group"),
              ("actor engine initialized", "actor and ref model engine initialized"),
              ("reward loop manager", "reward loop manager initialized"),
              ("rollout servers", "LLMServerManager:"),
              ("checkpoint engine", "checkpoint engine manager initialized"),
              ("ready to fit", "ready to fit"))
TIMINGS = ("gen", "old_log_prob", "reward", "adv", "update_actor", "update_weights", "step")


# ------------------------------------------------------------------------------------------------------ floor
def demo_model_path() -> str:
    """The demo's policy: ``make demo``'s warm start (built on first use, ~2 min)."""
    from verl_ext.apps.inputs import TASK, WARM_START_STEPS
    from verl_ext.apps.warm_start import WarmStartConfig, warm_start_path

    return warm_start_path(WarmStartConfig(task=TASK, steps=WARM_START_STEPS, seed=0, eval_tasks=0))


def _median_time(fn, repeats: int) -> tuple[float, list[float]]:
    fn()  # warm-up: allocator, oneDNN primitives
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), times


def measure_floor(model, rollouts: int, prompt: int, response: int, *, precision: str | None = None,
                  repeats: int = 3, threads: int | None = None, seed: int = 0) -> dict:
    """Plain-torch floors of old log-probs (``forward_s``) and of the update (``update_s``) for ``model`` (a path or
    a causal LM module, trained in place) on ``rollouts`` x (``prompt`` + ``response``) tokens."""
    import torch

    from verl_ext.cpu import cpu_precision

    precision = precision or cpu_precision()
    if precision not in ("fp32", "bf16"):
        raise ValueError(f"precision must be fp32 or bf16, got {precision!r}")
    threads = int(threads or os.cpu_count() or 1)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        if isinstance(model, (str, os.PathLike)):
            from transformers import AutoModelForCausalLM

            model = AutoModelForCausalLM.from_pretrained(str(model), torch_dtype=torch.float32,
                                                         attn_implementation="sdpa")
        model.config.use_cache = False
        gen = torch.Generator().manual_seed(seed)
        vocab = model.config.vocab_size
        ids = torch.randint(0, vocab, (rollouts, prompt + response), generator=gen)
        advantages = torch.randn(rollouts, 1, generator=gen)
        mask = torch.zeros(rollouts, prompt + response - 1)
        mask[:, prompt - 1:] = 1.0  # the response tokens' positions among the shifted targets
        autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16")
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, betas=(0.9, 0.999), weight_decay=0.01)

        def log_probs():
            with autocast:
                logits = model(input_ids=ids).logits
            logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
            return logp.gather(-1, ids[:, 1:, None]).squeeze(-1)

        def forward():
            model.eval()
            with torch.no_grad():
                log_probs()

        def update():
            model.train()
            optimizer.zero_grad(set_to_none=True)
            loss = -(log_probs() * advantages * mask).sum() / mask.sum()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()

        forward_s, forward_all = _median_time(forward, repeats)
        update_s, update_all = _median_time(update, repeats)
    finally:
        torch.set_num_threads(before)
    params = sum(p.numel() for p in model.parameters())
    return {"precision": precision, "threads": threads, "rollouts": rollouts, "prompt": prompt, "response": response,
            "tokens": rollouts * (prompt + response), "params": params, "repeats": repeats,
            "forward_s": forward_s, "forward_all_s": forward_all, "update_s": update_s, "update_all_s": update_all}


# ---------------------------------------------------------------------------------------------------- profile
def demo_command(run_dir: str | Path, steps: int, extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    """``make demo``'s trainer command (:func:`verl_ext.apps.demo.train`) on its pool and warm start, ``steps``
    steps, no checkpoint."""
    from verl_ext.apps import demo

    args, _ = demo.parse_args(["--steps", str(steps)])
    data = Path(args.out) / "data"
    pools = sorted(data.glob(f"pool_{args.pool}.ref.*.n{args.ref_n}.parquet"))
    if not pools or not (data / "heldout.parquet").exists():
        raise FileNotFoundError(f"no demo pool under {data}: run `make demo` once first")
    return [*demo.trainer_command(demo_model_path(), pools[-1], data / "heldout.parquet", args),
            "trainer.project_name=bench_floor", "trainer.experiment_name=floor", f"trainer.default_local_dir={run_dir}",
            *extra]


def run_timestamped(command: list[str], log: str | Path, env: dict | None = None) -> int:
    """Run ``command``, writing each output line to ``log`` as ``<unix time> <line>`` when it arrives; the first
    line is ``<time> LAUNCH <pid>``."""
    with open(log, "w") as sink:
        launch = time.time()
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", env={**(env or os.environ), "PYTHONUNBUFFERED": "1"})
        sink.write(f"{launch:.3f} LAUNCH {proc.pid}\n")  # a local Ray session is named after its driver's pid
        for line in proc.stdout:
            sink.write(f"{time.time():.3f} {line}")
        proc.wait()
        sink.write(f"{time.time():.3f} EXIT {proc.returncode}\n")
    return proc.returncode


def _stamp(text: str) -> float | None:
    m = STAMP.search(text)
    if not m:
        return None
    return datetime.strptime(m.group(1).replace("T", " ").replace(".", ","), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def read_log(log: str | Path) -> list[tuple[float, str | None, int | None, str]]:
    """``(arrival time, Ray actor name or None, pid or None, text)`` per line of a :func:`run_timestamped` log."""
    rows = []
    for raw in Path(log).read_text(errors="replace").splitlines():
        stamp, _, text = raw.partition(" ")
        try:
            t = float(stamp)
        except ValueError:
            continue
        text = ANSI.sub("", text)
        m = PREFIX.match(text)
        rows.append((t, m.group("name"), int(m.group("pid")), m.group("body")) if m else (t, None, None, text))
    return rows


def _ray_session(driver_pid: int | None, launch: float, pids: set[int]) -> Path | None:
    """The local Ray session the driver started: Ray names it ``session_<date>_<time>_<micro>_<driver pid>``
    (``python -m verl_ext.main --cpu`` re-executes itself, keeping its pid); without the pid, the first session
    started within a minute of the launch whose workers include one of ``pids``."""
    root = Path(os.environ.get("RAY_TMPDIR", "/tmp")) / "ray"
    if driver_pid:
        found = sorted(root.glob(f"session_2*_{driver_pid}"))
        return found[-1] if found else None
    for session in sorted(root.glob("session_2*")):
        try:
            started = datetime.strptime("_".join(session.name.split("_")[1:3]), "%Y-%m-%d_%H-%M-%S").timestamp()
        except ValueError:
            continue
        if launch - 1 <= started <= launch + 60 and any(
                any((session / "logs").glob(f"python-core-worker-*_{pid}.log")) for pid in pids):
            return session
    return None


def _worker_name(logs: Path, pid: int) -> str | None:
    """The actor class or task a Ray worker ran (``:actor_name:`` / ``:task_name:`` in its ``worker-*.out``)."""
    for path in logs.glob(f"worker-*-{pid}.out"):
        with open(path, errors="replace") as f:
            for line in f:
                if line.startswith((":actor_name:", ":task_name:")):
                    return line.split(":", 2)[2].strip()
    return None


def startup(log: str | Path, step1_s: float | None) -> dict:
    """Where the start-up goes: seconds from launch of each milestone (:data:`MILESTONES`), step 1's start
    (``step:1``'s arrival less ``step1_s``) and per Ray process (name, pid): its start, when it began importing
    verl (by its own clock) and its first line; ``startup_s``: launch to step 1's start."""
    rows = read_log(log)
    launch = rows[0][0]
    words = rows[0][3].split()
    driver_pid = int(words[1]) if len(words) > 1 and words[0] == "LAUNCH" and words[1].isdigit() else None
    milestones, seen = {}, set()
    for t, name, pid, body in rows:
        for label, needle in MILESTONES:
            if label not in seen and needle in body and (label != "driver imports verl" or pid is None):
                at = _stamp(body) if label != "ray.init called" else None
                milestones[label] = round((at or t) - launch, 2)
                seen.add(label)
    procs: dict[int, dict] = {}
    step1 = None
    for t, name, pid, body in rows:
        if pid is not None:
            p = procs.setdefault(pid, {"pid": pid, "name": None, "first_line_s": round(t - launch, 2)})
            p["name"] = p["name"] or name
            if "verl_import_s" not in p and "Platform override" in body and _stamp(body):
                p["verl_import_s"] = round(_stamp(body) - launch, 2)
            if step1 is None and body.startswith("step:1 ") and step1_s is not None:
                step1 = t - step1_s
    session = _ray_session(driver_pid, launch, set(procs))
    if session is not None:
        for path in (session / "logs").glob("python-core-worker-*_*.log"):
            pid = int(path.stem.rsplit("_", 1)[1])
            with open(path, errors="replace") as f:
                at = _stamp(f.readline())
            p = procs.setdefault(pid, {"pid": pid, "name": None, "first_line_s": None})
            p["name"] = p["name"] or _worker_name(session / "logs", pid) or "(idle worker)"
            if at is not None:
                p["started_s"] = round(at - launch, 2)
    order = sorted(procs.values(), key=lambda p: p.get("started_s", p.get("verl_import_s", p["first_line_s"] or 0)))
    return {"startup_s": None if step1 is None else round(step1 - launch, 2), "milestones": milestones,
            "processes": order, "ray_session": None if session is None else str(session)}


def profile_run(out: str | Path, steps: int = 3, extra: list[str] | tuple[str, ...] = (),
                command: list[str] | None = None) -> dict:
    """Run the demo's trainer for ``steps`` steps under ``out`` and profile it (see the module docstring)."""
    from verl_ext.apps.bench.step_share import read_metrics

    out = Path(out)
    run_dir, log = out / "floor_run", out / "floor_trainer.log"
    command = command or demo_command(run_dir, steps, extra)
    start = time.perf_counter()
    code = run_timestamped(command, log)
    wall = time.perf_counter() - start
    if code != 0:
        raise RuntimeError(f"the trainer failed (exit {code}): {log}")
    metrics = read_metrics(run_dir)
    later = [m for s, m in sorted(metrics.items()) if s >= 2] or list(metrics.values())
    timing = {k: statistics.median(m.get(f"timing_s/{k}", 0.0) for m in later) for k in TIMINGS}
    first = metrics[min(metrics)]
    shapes = {"rollouts": round(statistics.median(m["perf/total_num_tokens"] / (m["prompt_length/mean"]
                                                                              + m["response_length/mean"])
                                                   for m in metrics.values())),
              "prompt": round(statistics.median(m["prompt_length/mean"] for m in metrics.values())),
              "response": round(statistics.median(m["response_length/mean"] for m in metrics.values()))}
    return {"steps": len(metrics), "timing_s": timing, "step1_timing_s": {k: first.get(f"timing_s/{k}", 0.0)
                                                                           for k in TIMINGS},
            "shapes": shapes, "wall_s": wall, "log": str(log), **startup(log, first.get("timing_s/step"))}


# ---------------------------------------------------------------------------------------------------- bench
def run(steps: int = 3, repeats: int = 3, out: str | Path = "outputs/bench", profile: bool = True,
        measure: bool = True) -> list[dict]:
    """The trainer's profile (when ``profile``), then the floor (when ``measure``) on the shapes the profile measured
    (else the demo's)."""
    prof, skipped = None, None
    if profile:
        try:
            command = demo_command(Path(out) / "floor_run", steps)
        except FileNotFoundError as e:  # no demo pool yet: the floor alone, on the demo's shapes
            skipped = f"skipped: the trainer's profile ({e})"
        else:
            prof = profile_run(out, steps, command=command)
    shapes = prof["shapes"] if prof else DEMO_SHAPES
    floor = measure_floor(demo_model_path(), shapes["rollouts"], shapes["prompt"], shapes["response"],
                          repeats=repeats) if measure else None
    row = {"floor": floor, "profile": prof, "skipped": skipped}
    if prof and floor:
        row["ratio_old_log_prob"] = prof["timing_s"]["old_log_prob"] / floor["forward_s"]
        row["ratio_update_actor"] = prof["timing_s"]["update_actor"] / floor["update_s"]
    return [row]


def report(rows: list[dict]) -> str:
    lines = []
    for row in rows:
        f, p = row["floor"], row["profile"]
        if f is None:  # the profile alone
            f = {"rollouts": p["shapes"]["rollouts"], "prompt": p["shapes"]["prompt"],
                 "response": p["shapes"]["response"], "precision": "-", "threads": "-", "repeats": 0,
                 "forward_s": float("nan"), "update_s": float("nan")}
            row = {**row, "ratio_old_log_prob": float("nan"), "ratio_update_actor": float("nan")}
        lines += [f"Floor: {f['rollouts']} x ({f['prompt']} + {f['response']}) tokens, {f['precision']}, "
                  f"{f['threads']} threads, plain torch (median of {f['repeats']})",
                  "| part | trainer s (median, steps 2..) | floor s | ratio |", "|:---|---:|---:|---:|"]
        if p:
            t = p["timing_s"]
            lines += [f"| old log-probs | {t['old_log_prob']:.2f} | {f['forward_s']:.2f} | "
                      f"{row['ratio_old_log_prob']:.2f}x |",
                      f"| update | {t['update_actor']:.2f} | {f['update_s']:.2f} | {row['ratio_update_actor']:.2f}x |"]
            lines += [f"| {k} | {t[k]:.2f} | | |" for k in ("gen", "reward", "adv", "update_weights", "step")]
            lines += ["", f"Start-up (launch to step 1's start): {p['startup_s']} s; "
                      f"step 1 {p['step1_timing_s']['step']:.1f} s (gen {p['step1_timing_s']['gen']:.1f} s); "
                      "milestones (s from launch): "
                      + ", ".join(f"{k} {v}" for k, v in p["milestones"].items()),
                      "| process | pid | started s | imports verl s | first line s |", "|:---|---:|---:|---:|---:|"]
            lines += [f"| {q['name']} | {q['pid']} | {q.get('started_s', '')} | {q.get('verl_import_s', '')} | "
                      f"{'' if q['first_line_s'] is None else q['first_line_s']} |" for q in p["processes"]]
        else:
            lines += [f"| old log-probs | | {f['forward_s']:.2f} | |", f"| update | | {f['update_s']:.2f} | |"]
        if row.get("skipped"):
            lines.append(row["skipped"])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m verl_ext.apps.bench.floor", description=__doc__)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="outputs/bench")
    parser.add_argument("--no-profile", action="store_true", help="the floor alone, on the demo's shapes")
    parser.add_argument("--no-floor", action="store_true", help="the trainer's profile alone")
    parser.add_argument("--log", help="only profile an existing run_timestamped log (start-up)")
    args = parser.parse_args(argv)
    if args.log:
        print(json.dumps(startup(args.log, None), indent=1))
        return 0
    Path(args.out).mkdir(parents=True, exist_ok=True)
    rows = run(args.steps, args.repeats, args.out, not args.no_profile, not args.no_floor)
    print(report(rows))
    (Path(args.out) / "floor.json").write_text(json.dumps({"rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
