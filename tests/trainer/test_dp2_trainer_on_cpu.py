"""Two data-parallel ranks on two Ray nodes, end to end: ``python -m verl_ext.main --cpu trainer.nnodes=2
trainer.n_gpus_per_node=1`` against a head and a worker node started on this host by ``scripts/ray_cluster.sh``
(``CPU=1``, each its own temp dir, ports, logical CPUs and half the cores).

Two actor processes (FSDP2 over gloo), one per node, each generating its share of the rollouts with the ``hf``
backend from its own copy of the policy. The scenario of ``tests.trainer.scenario`` (scripted rewards: easy /
hard / coin tasks) with ``allocator=variance`` (unequal rollout counts) and ``rollout_filter=drop_degenerate`` (the
filter cuts rows, so the actor batch is padded), under the ``seq-mean-token-mean`` loss (whose divisor padding would
dilute) and two update epochs, with fixed micro-batches of 2 rows per rank (verl then asks for fixed ones in the
log-prob pass too), whose mini-batches must split into whole micro-batches on each rank. The other trainer tests run
dynamic (token-balanced) micro-batches on one rank; ``test_batching_on_cpu`` plans mini-batches at several ranks
without Ray.

The run's selections, rollout counts and kept rows must equal the one-node run of the same scenario and seed
(``test_axes_trainer_on_cpu``'s, one rank, shared within the session): one Ray run for both the data-parallel and
the multi-node checks. Losses and rewards are not compared across runs (they differ even between two 2-node runs).
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

from tests.trainer.scenario import ROOT, run, scenario_overrides, scenario_run, write_scenario
from verl_ext.trainer import records
from verl_ext.trainer.startup_checks import check_ray_cpus

pytestmark = pytest.mark.e2e  # starts Ray, vLLM or a training run: `make test-fast` leaves it out

STEPS, EPOCHS, DP, RESPONSE = 2, 2, 2, 32
MICRO_BATCHES = ["actor_rollout_ref.actor.use_dynamic_bsz=False", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
                 "actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=False",
                 "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2"]
CLUSTER = ROOT / "scripts" / "ray_cluster.sh"
NODE_CPUS = 8  # logical: 3 per rank's bundle besides the 1-CPU helper actors (4 hung, check_ray_cpus refuses it)
WORKER_PORTS, PORT_SPAN = 40, 120  # head: GCS P, node P+1.., workers P+11..; worker node: P+60.., workers P+70..


def dp2_overrides(data: dict[str, str], run_dir: Path, nnodes: int) -> list[str]:
    return scenario_overrides(data, run_dir, STEPS) + [
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
    root: Path
    nodes: dict[str, bool]  # node id: is the head
    actors: list[list[str]]  # [class name, node id] of every actor the job started (dead ones included)
    left: list[str]


@pytest.fixture(scope="module")
def two_node_run(tmp_path_factory) -> TwoNodeRun:
    root = tmp_path_factory.mktemp("nodes2")
    data = write_scenario(root)
    with two_nodes() as cluster:
        seconds = run("verl_ext.main", dp2_overrides(data, root / "run", 2), root / "run.log", timeout=600,
                      **cluster.env)
        print(f"2 nodes x 1 rank: {seconds:.1f} s")
        table = subprocess.run([sys.executable, "-c", ACTORS], env={**os.environ, **cluster.env}, capture_output=True,
                               text=True, timeout=120)
        assert table.returncode == 0, table.stderr[-4000:]
    found = json.loads(table.stdout.strip().splitlines()[-1])
    return TwoNodeRun(root, found["nodes"], found["actors"], cluster.left)


def dumps(root: Path) -> list[dict]:
    out = records.read_dumps(root / "run")
    assert sorted(out) == list(range(1, STEPS + 1))
    return list(out.values())


def step_metrics(root: Path) -> list[dict]:
    return list(records.read_metrics(root / "run").values())


def test_every_kept_rollout_is_trained_once_per_epoch_and_nothing_else(two_node_run):
    root = two_node_run.root
    cut = False
    for d in dumps(root):
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
    root = two_node_run.root
    padded = False
    for d in dumps(root):
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
    for d in dumps(two_node_run.root):
        assert (d["actor_mini_batches"]["size"] // DP) % 2 == 0, d["actor_mini_batches"]


def test_two_nodes_one_rank_each_train_with_finite_losses(two_node_run):
    assert len(two_node_run.nodes) == 2 and sorted(two_node_run.nodes.values()) == [False, True]
    workers = [node for name, node in two_node_run.actors if name.endswith("WorkerDict")]
    assert sorted(workers) == sorted(two_node_run.nodes), two_node_run.actors  # one actor rank on each node
    metrics = [m for m in step_metrics(two_node_run.root) if "actor/pg_loss" in m]
    assert len(metrics) == STEPS
    for m in metrics:
        assert math.isfinite(m["actor/pg_loss"]) and math.isfinite(m["actor/grad_norm"]), m
        # each rank samples from a full copy of the current policy: behaviour = actor up to numerics
        assert m["training/rollout_probs_diff_max"] < 1e-3, m["training/rollout_probs_diff_max"]
    counts = [d["counts"] for d in dumps(two_node_run.root)]
    assert any(len(set(c)) > 1 for c in counts), counts  # unequal rollout counts reached the trainer


def test_two_nodes_select_count_and_filter_as_one_node(tmp_path_factory, two_node_run):
    one = records.read_dumps(scenario_run(tmp_path_factory)[1])
    for step, b in enumerate(dumps(two_node_run.root), start=1):
        a = one[step]
        for key in ("tasks", "counts", "rollout_task", "kept"):
            assert a[key] == b[key], (step, key, a[key], b[key])
        for t in a["tasks"]:  # the same rewards per task (a coin group's order follows scoring order)
            rewards = [sorted(r for task, r in zip(d["rollout_task"], d["rollout_reward"]) if task == t) for d in (a, b)]
            assert rewards[0] == rewards[1], (step, t, rewards)


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
