"""Two data-parallel ranks on two Ray nodes, end to end: ``python -m verl_ext.main --cpu trainer.nnodes=2
trainer.n_gpus_per_node=1`` against a head and a worker node started on this host by ``scripts/ray_cluster.sh``
(``CPU=1``, each its own temp dir, ports, logical CPUs and half the cores), compared with the one-node run
``trainer.nnodes=1 trainer.n_gpus_per_node=2`` of the same seed.

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
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
from omegaconf import OmegaConf

from tests.trainer.scenario import ROOT, common_overrides, run
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
NODE_CPUS = 8  # logical: 3 per rank's bundle besides the 1-CPU helper actors (4 hung, check_ray_cpus refuses it)
WORKER_PORTS, PORT_SPAN = 40, 120  # head: GCS P, node P+1.., workers P+11..; worker node: P+60.., workers P+70..


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


def cluster_script(command: str, env: dict[str, str], timeout: int) -> tuple[int, str, str]:
    """``scripts/ray_cluster.sh COMMAND``: (exit status, stdout, stderr); past ``timeout``, status -1."""
    try:
        proc = subprocess.run(["bash", str(CLUSTER), command], env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as e:
        return -1, "", f"ray_cluster.sh {command}: still running after {timeout} s\n{e.stderr or ''}"
    return proc.returncode, proc.stdout, proc.stderr


@dataclass
class Cluster:
    env: dict[str, str]  # what the driver needs: RAY_ADDRESS, RAY_AUTH_MODE
    temp_root: str
    left: list[str] | None = None  # the stops' failures, then the cluster's processes still running after them


@contextmanager
def two_nodes() -> Iterator[Cluster]:
    """A head and a worker node on this host, stopped on the way out whatever happened (hard timeouts throughout)."""
    temp_root = tempfile.mkdtemp(prefix="rt_", dir="/tmp")  # short: Ray's socket paths have a 107-character limit
    port = free_port_base(PORT_SPAN)
    base = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    base.update(CPU="1", NUM_CPUS=str(NODE_CPUS), GPUS_PER_NODE="1", OMP_NUM_THREADS=str(max(1, os.cpu_count() // 2)),
                OBJECT_STORE_BYTES=str(400 * 2**20), RAY_PORT=str(port), RAY_AUTH_MODE="token", NODE_IP="127.0.0.1",
                WORKER_PORTS=str(WORKER_PORTS))
    nodes = {"head": {**base, "RAY_TEMP_DIR": f"{temp_root}/h", "NODE_PORT_BASE": str(port + 1)},
             "worker": {**base, "RAY_TEMP_DIR": f"{temp_root}/w", "NODE_PORT_BASE": str(port + 60),
                        "HEAD_ADDR": "127.0.0.1"}}
    cluster, started = Cluster({}, temp_root), []
    try:
        for role, env in nodes.items():
            started.append(env)
            status, out, err = cluster_script(role, env, timeout=150)
            assert status == 0, f"ray_cluster.sh {role} exited with {status}:\n{err[-4000:]}"
            exports = dict(line.removeprefix("export ").split("=", 1) for line in out.splitlines())
            cluster.env = cluster.env or exports
            assert exports == cluster.env == {"RAY_ADDRESS": f"127.0.0.1:{port}", "RAY_AUTH_MODE": "token"}, exports
        yield cluster
    finally:  # every node, even when one stop fails
        stops = [cluster_script("stop", env, timeout=60) for env in reversed(started)]
        cluster.left = [err for status, _, err in stops if status] + subprocess.run(
            ["pgrep", "-af", temp_root], capture_output=True, text=True).stdout.splitlines()
        shutil.rmtree(temp_root, ignore_errors=True)


ACTORS = """
import json, ray
from ray._private import state
ray.init(logging_level="ERROR")  # RAY_ADDRESS
head = {n["NodeID"] for n in ray.nodes() if "node:__internal_head__" in n["Resources"]}
print(json.dumps({"nodes": {n["NodeID"]: n["NodeID"] in head for n in ray.nodes()},
                  "actors": [[a["ActorClassName"], a["Address"]["NodeID"]] for a in state.actors().values()]}))
"""


@dataclass
class TwoNodeRun:
    run: Path
    nodes: dict[str, bool]  # node id: is the head
    actors: list[list[str]]  # [class name, node id] of every actor the job started (dead ones included)
    left: list[str]


@pytest.fixture(scope="module")
def pool(tmp_path_factory) -> dict[str, str]:
    return write_pool(tmp_path_factory.mktemp("words"))


@pytest.fixture(scope="module")
def two_node_run(tmp_path_factory, pool) -> TwoNodeRun:
    root = tmp_path_factory.mktemp("nodes2")
    with two_nodes() as cluster:
        seconds = run("verl_ext.main", dp2_overrides(pool, root / "run", 2), root / "run.log", timeout=600,
                      **cluster.env)
        print(f"2 nodes x 1 rank: {seconds:.1f} s")
        table = subprocess.run([sys.executable, "-c", ACTORS], env={**os.environ, **cluster.env}, capture_output=True,
                               text=True, timeout=120)
        assert table.returncode == 0, table.stderr[-4000:]
    found = json.loads(table.stdout.strip().splitlines()[-1])
    return TwoNodeRun(root / "run", found["nodes"], found["actors"], cluster.left)


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


def test_cluster_stop_leaves_no_process(two_node_run):
    assert two_node_run.left == []


def test_too_few_logical_cpus_per_node_are_refused_not_waited_for():
    config = OmegaConf.create({"trainer": {"nnodes": 2, "n_gpus_per_node": 1}})
    check_ray_cpus(config, {"head": NODE_CPUS - 2, "worker": NODE_CPUS})  # after TransferQueue's two 1-CPU actors
    check_ray_cpus(OmegaConf.create({"trainer": {"nnodes": 1, "n_gpus_per_node": 2}}), {"head": 6})
    for free in ({"head": 2, "worker": 4}, {"head": 5}, {"head": 2.5, "worker": 2.5}):  # 4 per node hung (one fits)
        with pytest.raises(ValueError, match="too few logical CPUs"):
            check_ray_cpus(config, free)
    check_ray_cpus(config)  # outside Ray: nothing to check
