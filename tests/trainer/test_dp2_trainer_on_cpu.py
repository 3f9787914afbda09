"""Two data-parallel ranks on two nodes of a real Slurm, end to end: ``sbatch -N 2 scripts/slurm/ray_job.sbatch python
-m verl_ext.main --cpu trainer.nnodes=2 trainer.n_gpus_per_node=1`` on slurmctld and two slurmd started on this host
by ``scripts/slurm/one_host.sh`` (the job script starts Ray's head on n1 and a worker on n2 through
``scripts/ray_cluster.sh``, each held by a job step, with its own temp dir, ports and logical CPUs, and half the
cores), compared with the one-node run ``trainer.nnodes=1 trainer.n_gpus_per_node=2`` of the same seed. The job
script's refusals (a GPU job on nodes without GPUs, a node count the command does not match, a Ray port in use), its
dry run, and ``scancel`` of a running job (no Ray process left) are checked on the same Slurm.

Two actor processes (FSDP2 over gloo), one per node, each generating its share of the rollouts with the ``hf``
backend from its own copy of the policy. BOTS (Thompson draws) picks 4 of 6 tasks per step and CoBA-RL splits 16
rollouts among them, on real rewards: a task scores 1 when the untrained 2-layer embedded model's response contains
the task's word (pass rates from about 0.95 down to 0). So what each rank samples decides the rewards, and through them
BOTS's posteriors, CoBA's counts and what ``rollout_filter=drop_degenerate`` keeps (it cuts rows, so the actor batch
is padded), under the ``seq-mean-token-mean`` loss (whose divisor padding would dilute) and two update epochs, with
fixed micro-batches of 2 rows per rank (verl then asks for fixed ones in the log-prob pass too), whose mini-batches
must split into whole micro-batches on each rank. The other trainer tests run dynamic (token-balanced) micro-batches on
one rank; ``test_batching_on_cpu`` plans mini-batches at several ranks without Ray.

Per step, the two-node run's selections, rollout counts, rollouts' tasks, each task's rewards and responses (their
mean token log-probs under the actor, to 1e-4), kept rows and mini-batch layout (plan and per-row order of the update)
must equal the one-node run's: a rank sampling differently on one node changes them. Losses are not compared.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
from omegaconf import OmegaConf

from tests.trainer.scenario import ROOT, common_overrides, run, run_env
from verl_ext.trainer import records
from verl_ext.trainer.startup_checks import check_ray_cpus

pytestmark = pytest.mark.e2e  # starts Ray, vLLM or a training run: `make test-fast` leaves it out

STEPS, EPOCHS, DP, RESPONSE, TASKS, N, SEED = 2, 2, 2, 16, 4, 4, 5
WORDS = ["I", ",", "in", "incinn", "ensely", "zebra"]  # tasks 100..105; found in ~95 % .. 0 % of the responses
REWARD = """
def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    score = float(ground_truth in solution_str)
    return {"score": score, "acc": score}
"""
MICRO_BATCHES = ["actor_rollout_ref.actor.use_dynamic_bsz=False", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
                 "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=False",
                 "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2"]
CLUSTER = ROOT / "scripts" / "ray_cluster.sh"
SBATCH = ROOT / "scripts" / "slurm" / "ray_job.sbatch"
ONE_HOST = ROOT / "scripts" / "slurm" / "one_host.sh"
NODE_CPUS = 8  # logical: 3 per rank's bundle besides the 1-CPU helper actors (4 hung, check_ray_cpus refuses it)
WORKER_PORTS, PORT_SPAN = 40, 120  # head: GCS P, node P+1.., workers P+11..; worker node: P+51.., workers P+61..
NODE_STRIDE = 10 + WORKER_PORTS  # ray_job.sbatch's default NODE_PORT_STRIDE: a node's block, its worker ports in it


def write_pool(root: Path) -> dict[str, str]:
    """The tasks' parquet files and the reward module under ``root``."""
    from data_prep.schema import make_row, write_rows

    rows = [make_row(data_source="words", question=f"Say the word {word}.", ability="test", ground_truth=word,
                     index=100 + i, split="train") for i, word in enumerate(WORDS)]
    write_rows(rows, root / "train.parquet")
    write_rows(rows[:2], root / "test.parquet")
    (root / "reward.py").write_text(REWARD)
    return {"train": str(root / "train.parquet"), "test": str(root / "test.parquet"), "reward": str(root / "reward.py")}


def dp2_overrides(data: dict[str, str], run_dir: Path, nnodes: int) -> list[str]:
    return common_overrides(data, run_dir, STEPS, tasks=TASKS, n=N, mini=2, response=RESPONSE) + [
        "actor_rollout_ref.actor.entropy_coeff=0",  # per-sample entropy then comes from the old-log-prob pass
        "selector=bots", "selector.implicit_weight=0", f"data_selection.seed={SEED}",
        "allocator=coba", "allocator.min_n=2", "allocator.max_n=8", "rollout_filter=drop_degenerate",
        f"trainer.nnodes={nnodes}", f"trainer.n_gpus_per_node={DP // nnodes}",
        f"actor_rollout_ref.actor.ppo_epochs={EPOCHS}",
        "actor_rollout_ref.actor.loss_agg_mode=seq-mean-token-mean", "actor_rollout_ref.actor.shuffle=False",
        *MICRO_BATCHES]


def free_port_base(span: int) -> int:
    """A random base port with ``span`` free ports from it (private ports: other Ray instances may run here), below
    Linux's ephemeral range (32768-60999), where outgoing connections take theirs."""
    for _ in range(50):
        base = random.randrange(20000, 32000 - span)
        try:
            for port in range(base, base + span):
                with socket.socket() as s:
                    s.bind(("", port))
            return base
        except OSError:
            continue
    raise RuntimeError(f"no {span} free ports in a row found")


@dataclass
class Slurm:
    """A real Slurm on this host (``scripts/slurm/one_host.sh``): nodes n1 and n2 of one CPU each."""
    dir: Path
    env: dict[str, str]  # what a submission needs: SLURM_CONF, and ray_job.sbatch's settings for nodes sharing a host

    def submit(self, nodes: int, command: list[str], wait: bool = True, timeout: int = 900,
               **env_vars: str) -> tuple[int, str, Path]:
        """``sbatch -N nodes ray_job.sbatch COMMAND``: (exit status, job id, output file); without ``wait`` the
        status is sbatch's."""
        args = ["sbatch", "--parsable", f"--nodes={nodes}", f"--output={self.dir}/job-%j.out"]
        proc = subprocess.run([*args, *(["--wait"] if wait else []), str(SBATCH), *command],
                              env={**self.env, **env_vars}, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
        job = proc.stdout.strip().splitlines()[0].split(";")[0] if proc.stdout.strip() else ""
        assert job.isdigit(), f"sbatch printed no job id (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
        return proc.returncode, job, self.dir / f"job-{job}.out"

    def ray_processes(self, job: str) -> list[str]:
        """The processes of the job's Ray nodes (their temp dirs are RAY_TEMP_BASE/ray-JOB-NODE)."""
        return processes_under(f"{self.dir}/ray-{job}-")


def processes_under(prefix: str) -> list[str]:
    """The processes naming a path that starts with ``prefix`` in their command line or holding a file under it open
    (Ray's agents and workers rename themselves ray::..., but keep their session's logs open)."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            files = [os.readlink(fd) for fd in (proc / "fd").iterdir()]
        except OSError:  # ended meanwhile
            continue
        if prefix in command or any(f.startswith(prefix) for f in files):
            found.append(f"{proc.name} {command[:200]}")
    return found


@pytest.fixture(scope="module")
def slurm() -> Iterator[Slurm]:
    """slurmctld and two slurmd on localhost (Debian's slurm-wlm and munge, installed when missing: root and Debian's
    package registry are there on every machine here), stopped on the way out."""
    if os.geteuid() != 0:
        pytest.fail("the Slurm test starts slurmctld and slurmd, and installs slurm-wlm when missing: it needs root")
    root = Path(tempfile.mkdtemp(prefix="sl_", dir="/tmp"))  # short: Ray's socket paths under it (107 characters)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "SLURM_"))}
    started = subprocess.run(["bash", str(ONE_HOST), "start"], capture_output=True, text=True, timeout=900,
                             env={**base, "DIR": str(root / "slurm"), "NODES": "2",
                                  "PORT": str(free_port_base(3))})
    assert started.returncode == 0, f"one_host.sh start exited with {started.returncode}:\n{started.stderr[-4000:]}"
    (conf,) = [line.removeprefix("export SLURM_CONF=") for line in started.stdout.splitlines()]
    port = free_port_base(PORT_SPAN)
    env = run_env(**base, SLURM_CONF=conf, CPU="1", NUM_CPUS=str(NODE_CPUS), OBJECT_STORE_BYTES=str(400 * 2**20),
                  RAY_PORT=str(port), NODE_PORT_BASE=str(port + 1),
                  WORKER_PORTS=str(WORKER_PORTS), HEAD_ADDR="127.0.0.1", NODE_ADDR="127.0.0.1",
                  NODE_OMP_THREADS=str(max(1, os.cpu_count() // 2)), RAY_TEMP_BASE=str(root), LOG_DIR=str(root))
    try:
        yield Slurm(root, env)
    finally:
        subprocess.run(["scancel", "--user=root"], env=env, capture_output=True, timeout=60)
        for _ in range(60):  # a job a failed test left: its steps stop their nodes before the daemons go
            if not subprocess.run(["squeue", "-h"], env=env, capture_output=True, text=True).stdout.strip():
                break
            time.sleep(1)
        subprocess.run(["bash", str(ONE_HOST), "stop"], env={**base, "DIR": str(root / "slurm")}, timeout=120)
        shutil.rmtree(root, ignore_errors=True)


ACTORS = """
import json, ray
from ray._private import state
ray.init(logging_level="ERROR")  # RAY_ADDRESS
head = {n["NodeID"] for n in ray.nodes() if "node:__internal_head__" in n["Resources"]}
print(json.dumps({"nodes": {n["NodeID"]: n["NodeID"] in head for n in ray.nodes()},
                  "actors": [[a["ActorClassName"], a["Address"]["NodeID"]] for a in state.actors().values()]}))
"""
# the job's command: the trainer, then (the cluster still up) the table of its nodes and of the actors it started
LAUNCH = """set -e
"$0" -m verl_ext.main --cpu "$@" >"$RUN_LOG" 2>&1 || { tail -n 60 "$RUN_LOG"; exit 1; }
"$0" -c "$ACTORS" >"$ACTORS_JSON"
"""


@dataclass
class TwoNodeRun:
    run: Path
    nodes: dict[str, bool]  # node id: is the head
    actors: list[list[str]]  # [class name, node id] of every actor the job started (dead ones included)
    job: str
    output: str  # the job's output (ray_job.sbatch's messages, the nodes' step logs)
    left: list[str]  # the job's Ray processes after it ended


@pytest.fixture(scope="module")
def pool(tmp_path_factory) -> dict[str, str]:
    return write_pool(tmp_path_factory.mktemp("words"))


@pytest.fixture(scope="module")
def two_node_run(tmp_path_factory, pool, slurm) -> TwoNodeRun:
    """The dp = 2 run as a Slurm job of two nodes: ``sbatch -N 2 scripts/slurm/ray_job.sbatch`` (one rank a node)."""
    root = tmp_path_factory.mktemp("nodes2")
    start = time.perf_counter()
    status, job, out = slurm.submit(2, ["bash", "-c", LAUNCH, sys.executable, *dp2_overrides(pool, root / "run", 2)],
                                    RUN_LOG=str(root / "run.log"), ACTORS=ACTORS, ACTORS_JSON=str(root / "actors.json"))
    print(f"Slurm job {job}, 2 nodes x 1 rank: {time.perf_counter() - start:.1f} s")
    output = out.read_text()
    assert status == 0, f"job {job} exited with {status}:\n{output[-6000:]}"
    found = json.loads((root / "actors.json").read_text().strip().splitlines()[-1])
    logs = "".join(p.read_text() for p in sorted((slurm.dir / f"ray-{job}").glob("*.log")))
    return TwoNodeRun(root / "run", found["nodes"], found["actors"], job, output + logs, slurm.ray_processes(job))


@pytest.fixture(scope="module")
def one_node_run(tmp_path_factory, pool) -> Path:
    root = tmp_path_factory.mktemp("node1")
    seconds = run("verl_ext.main", dp2_overrides(pool, root / "run", 1), root / "run.log", timeout=600)
    print(f"1 node x 2 ranks: {seconds:.1f} s")
    return root / "run"


def dumps(run_dir: Path) -> list[dict]:
    out = records.read_dumps(run_dir)
    assert sorted(out) == list(range(1, STEPS + 1))
    return list(out.values())


def by_task(dump: dict, key: str) -> dict[int, list[float]]:
    """Each task's values of a per-rollout ``key``, sorted (a rank draws a prompt's samples in the order its requests
    arrive)."""
    out: dict[int, list[float]] = {}
    for task, value in zip(dump["rollout_task"], dump[key]):
        out.setdefault(task, []).append(value)
    return {task: sorted(values) for task, values in out.items()}


def test_a_node_started_by_hand_prints_its_exports_and_stop_ends_all_of_it(tmp_path):
    """``scripts/ray_cluster.sh head`` without Slurm: the export lines on stdout, a node a driver joins with them,
    ``stop`` ending every process of its session (Ray's renamed ones included)."""
    temp = tempfile.mkdtemp(prefix="rh_", dir="/tmp")
    port = free_port_base(60)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RAY_")}, "CPU": "1", "NUM_CPUS": "2",
           "RAY_TEMP_DIR": temp, "RAY_PORT": str(port), "NODE_PORT_BASE": str(port + 1), "WORKER_PORTS": "20",
           "NODE_IP": "127.0.0.1", "OBJECT_STORE_BYTES": str(100 * 2**20)}
    try:
        head = subprocess.run(["bash", str(CLUSTER), "head"], env=env, capture_output=True, text=True, timeout=150)
        assert head.returncode == 0, head.stderr[-3000:]
        exports = dict(line.removeprefix("export ").split("=", 1) for line in head.stdout.splitlines())
        assert exports == {"RAY_ADDRESS": f"127.0.0.1:{port}", "RAY_AUTH_MODE": "token"}
        joined = subprocess.run([sys.executable, "-c", "import ray; ray.init(logging_level='ERROR'); "
                                 "print(int(ray.cluster_resources()['CPU']))"], env={**env, **exports},
                                capture_output=True, text=True, timeout=120)
        assert joined.stdout.split()[-1:] == ["2"], joined.stderr[-3000:]
        assert any("raylet" in p for p in processes_under(temp + "/"))
        stop = subprocess.run(["bash", str(CLUSTER), "stop"], env=env, capture_output=True, text=True, timeout=60)
        assert stop.returncode == 0 and f"stopped the Ray node of {temp}" in stop.stderr, stop.stderr
    finally:
        left = processes_under(temp + "/")
        subprocess.run(["bash", str(CLUSTER), "stop"], env=env, capture_output=True, timeout=60)
        shutil.rmtree(temp, ignore_errors=True)
    assert left == []


def test_the_job_script_prints_its_steps_in_a_dry_run(slurm):
    status, job, out = slurm.submit(2, ["python", "-m", "verl_ext.main", "--cpu", "trainer.nnodes=2"], DRY_RUN="1")
    lines = out.read_text().splitlines()
    assert status == 0, lines
    head, worker = (line for line in lines if "ray_cluster.sh" in line)
    assert "--nodelist=n1" in head and "HOLD=1" in head and head.endswith("ray_cluster.sh head")
    assert f"RAY_TEMP_DIR={slurm.dir}/ray-{job}-n1" in head and f"NODE_PORT_BASE={int(slurm.env['RAY_PORT']) + 1}" in head
    assert "--nodelist=n2" in worker and "HEAD_ADDR=127.0.0.1" in worker and worker.endswith("ray_cluster.sh worker")
    assert f"NODE_PORT_BASE={int(slurm.env['RAY_PORT']) + 1 + NODE_STRIDE}" in worker
    assert lines[-1].startswith(f"NNODES=2 RAY_ADDRESS=127.0.0.1:{slurm.env['RAY_PORT']} RAY_AUTH_MODE=token python -m ")
    assert not slurm.ray_processes(job) and not (slurm.dir / f"ray-{job}").exists()  # nothing ran


@pytest.mark.parametrize("nodes, command, env, error", [
    (1, ["true"], {"CPU": "0", "GPUS_PER_NODE": "64"}, "GPU(s) for this job (CUDA_VISIBLE_DEVICES, else nvidia-smi -L), "
                                                       "the job asks 64 a node"),
    (1, ["python", "-m", "verl_ext.main", "--cpu", "trainer.nnodes=2"], {},
     "the command asks trainer.nnodes=2 but the allocation has 1 node(s) (n1): submit with sbatch -N 2"),
    (2, ["true"], {"NNODES": "3"}, "NNODES=3 but the allocation has 2 node(s) (n1 n2)"),
], ids=["gpu-job-on-cpu-nodes", "one-node-for-two", "nnodes-env"])
def test_an_allocation_the_command_cannot_use_is_refused_before_ray(slurm, nodes, command, env, error):
    start = time.monotonic()
    status, job, out = slurm.submit(nodes, command, timeout=120, **env)
    assert status != 0 and error in out.read_text(), out.read_text()
    assert time.monotonic() - start < 60 and not slurm.ray_processes(job)
    assert not (slurm.dir / f"ray-{job}").exists()  # made only once the checks passed, before the first node starts


def test_a_ray_port_in_use_is_refused_by_name(slurm):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        status, job, out = slurm.submit(2, ["true"], timeout=300, RAY_PORT=str(port))
    text = out.read_text()
    assert status != 0 and f"port {port} on " in text and "is in use" in text and "did not start" in text, text
    assert not slurm.ray_processes(job)


def test_every_kept_rollout_is_trained_once_per_epoch_and_nothing_else(two_node_run):
    cut = False
    for d in dumps(two_node_run.run):
        rollouts, kept = len(d["rollout_task"]), d["kept"]
        cut |= len(kept) < rollouts
        seen = Counter(d["actor_update"]["pos"])
        padding = seen.pop(-1, 0)
        assert seen == {p: EPOCHS for p in kept}, (seen, kept)
        plan = d["actor_mini_batches"]
        assert plan["rows"] == len(kept)
        assert padding == (plan["num"] * plan["size"] - len(kept)) * EPOCHS
        assert plan["size"] % DP == 0
    assert cut, "the filter never cut a row: the padded path was not exercised"


def test_drop_degenerate_keeps_every_rollout_of_a_group_with_both_rewards_and_no_other(two_node_run):
    dropped = set()
    for step, d in enumerate(dumps(two_node_run.run), start=1):
        groups = by_task(d, "rollout_reward")
        mixed = {task for task, rewards in groups.items() if len(set(rewards)) > 1}
        assert d["kept"] == [i for i, task in enumerate(d["rollout_task"]) if task in mixed], step
        dropped |= {rewards[0] for rewards in groups.values() if len(set(rewards)) == 1}
    assert dropped == {0.0, 1.0}, dropped  # an all-wrong and an all-right group were dropped


def test_seq_mean_divisor_is_the_real_rows_of_each_mini_batch(two_node_run):
    padded = False
    for d in dumps(two_node_run.run):
        # every response runs to the length cap, so verl's token count of a mini-batch is RESPONSE
        # tokens per real row (padding rows have no response tokens): the real-row count, from verl
        assert set(d["rollout_length"]) == {RESPONSE}, d["rollout_length"]
        upd, size = d["actor_update"], d["actor_mini_batches"]["size"]
        for pos, divisor, tokens in zip(upd["pos"], upd["divisor"], upd["mb_tokens"]):
            if pos >= 0:
                assert divisor == tokens // RESPONSE and tokens % RESPONSE == 0, (pos, divisor, tokens)
                padded |= divisor < size
        real = [div for pos, div in zip(upd["pos"], upd["divisor"]) if pos >= 0]
        assert max(real) - min(real) <= DP, real  # padding spread over the mini-batches, not piled up
    assert padded, "no mini-batch had padding rows: the divisor was never tested"


def test_fixed_micro_batches_divide_each_ranks_share(two_node_run):
    for d in dumps(two_node_run.run):
        assert (d["actor_mini_batches"]["size"] // DP) % 2 == 0, d["actor_mini_batches"]


def test_two_nodes_one_rank_each_train_with_finite_losses(two_node_run):
    assert len(two_node_run.nodes) == 2 and sorted(two_node_run.nodes.values()) == [False, True]
    workers = [node for name, node in two_node_run.actors if name.endswith("WorkerDict")]
    assert sorted(workers) == sorted(two_node_run.nodes), two_node_run.actors  # one actor rank on each node
    metrics = [m for m in records.read_metrics(two_node_run.run).values() if "actor/pg_loss" in m]
    assert len(metrics) == STEPS
    for m in metrics:
        assert math.isfinite(m["actor/pg_loss"]) and math.isfinite(m["actor/grad_norm"]), m
        # each rank samples from a full copy of the current policy: behaviour = actor up to numerics
        assert m["training/rollout_probs_diff_max"] < 1e-3, m["training/rollout_probs_diff_max"]
    counts = [d["counts"] for d in dumps(two_node_run.run)]
    assert any(len(set(c)) > 1 for c in counts), counts  # unequal rollout counts reached the trainer


def test_rewards_are_mixed_and_the_samples_of_a_prompt_differ(two_node_run):
    """Both rewards in every step (else selection and counts would not depend on sampling), some task with both;
    no two samples of a prompt alike (the ranks once drew a group's samples in identical pairs)."""
    for step, d in enumerate(dumps(two_node_run.run), start=1):
        rewards = by_task(d, "rollout_reward")
        assert set(d["rollout_reward"]) == {0.0, 1.0}, (step, rewards)
        assert any(len(set(r)) == 2 for r in rewards.values()), (step, rewards)
        for task, old in by_task(d, "rollout_old_log_prob").items():  # each sample's mean token log-prob
            assert len(set(old)) == len(old), (step, task, old)


def test_two_nodes_select_sample_and_batch_as_one_node_with_two_ranks(two_node_run, one_node_run):
    for step, (one, two) in enumerate(zip(dumps(one_node_run), dumps(two_node_run.run)), start=1):
        for key in ("tasks", "counts", "rollout_task", "kept", "actor_mini_batches"):
            assert one[key] == two[key], (step, key, one[key], two[key])
        rewards = [by_task(d, "rollout_reward") for d in (one, two)]
        assert rewards[0] == rewards[1], (step, *rewards)
        samples = [by_task(d, "rollout_old_log_prob") for d in (one, two)]  # the same responses: the same log-probs
        for task in one["tasks"]:
            assert samples[0][task] == pytest.approx(samples[1][task], abs=1e-4), (step, task, *samples)
        for key in ("pos", "divisor", "mb_tokens"):  # the update's rows, in order, and their mini-batches
            assert one["actor_update"][key] == two["actor_update"][key], (step, key)


def test_the_job_end_stops_both_nodes_and_leaves_no_process(two_node_run):
    assert two_node_run.output.count("stopped the Ray node of") == 2, two_node_run.output[-3000:]
    assert two_node_run.left == []


def test_scancel_of_a_running_job_leaves_no_ray_process(slurm, tmp_path):
    """A job whose command holds the two-node cluster (a driver with an actor on each node) until it is cancelled."""
    hold = ("import ray, time\n"
            "ray.init(logging_level='ERROR')\n"
            "@ray.remote(num_cpus=1)\n"
            "class Busy:\n"
            "    def node(self): return ray.get_runtime_context().get_node_id()\n"
            "actors = [Busy.options(scheduling_strategy=ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy("
            "n['NodeID'], soft=False)).remote() for n in ray.nodes()]\n"
            "print('holding', len(set(ray.get([a.node.remote() for a in actors]))), 'nodes', flush=True)\n"
            "time.sleep(900)\n")
    status, job, out = slurm.submit(2, [sys.executable, "-c", hold], wait=False)
    assert status == 0
    deadline = time.monotonic() + 300
    while "holding 2 nodes" not in (out.read_text() if out.exists() else ""):
        assert time.monotonic() < deadline, out.read_text() if out.exists() else "no output"
        time.sleep(1)
    running = slurm.ray_processes(job)
    assert any("raylet" in p or "gcs_server" in p for p in running), running  # the scan sees Ray's own processes
    subprocess.run(["scancel", job], env=slurm.env, check=True, timeout=60)
    while subprocess.run(["squeue", "-h", "-j", job], env=slurm.env, capture_output=True, text=True).stdout.strip():
        assert time.monotonic() < deadline + 120, "the cancelled job is still in the queue"
        time.sleep(1)
    for _ in range(20):  # the nodes' processes end with their job steps
        if not slurm.ray_processes(job):
            break
        time.sleep(0.5)
    assert slurm.ray_processes(job) == []


def test_too_few_logical_cpus_per_node_are_refused_not_waited_for():
    config = OmegaConf.create({"trainer": {"nnodes": 2, "n_gpus_per_node": 1}})
    check_ray_cpus(config, {"head": NODE_CPUS - 2, "worker": NODE_CPUS})  # after TransferQueue's two 1-CPU actors
    check_ray_cpus(OmegaConf.create({"trainer": {"nnodes": 1, "n_gpus_per_node": 2}}), {"head": 6})
    for free in ({"head": 2, "worker": 4}, {"head": 5}, {"head": 2.5, "worker": 2.5}):  # 4 per node hung (one fits)
        with pytest.raises(ValueError, match="too few logical CPUs"):
            check_ray_cpus(config, free)
    check_ray_cpus(config)  # outside Ray: nothing to check
