"""scripts/gpu_first_hour.sh end to end on a simulated bare GPU machine (CPU, tiny model): the wheelhouse install,
verl's actor in its own processes, the attention bench, ``check_gpu --no-vllm --cpu``; ~60 s, so an e2e module, run
in make test's second lane (moved out of tests/apps/gpu/test_check_gpu_on_cpu.py)."""

from __future__ import annotations

import importlib.metadata as md
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.apps.gpu.test_gpu_first_hour_plan_on_cpu import return_problems
from verl_ext.models.attention import BACKENDS
from verl_ext.cpu import project_root

pytestmark = [pytest.mark.e2e, pytest.mark.beside]  # the whole script (~60 s), in make test's second lane

ROOT = Path(project_root())

BARE_MACHINE = ("torch", "transformers", "numpy", "safetensors", "tqdm", "pip")  # what scripts/gpu_first_hour.sh may use
SITECUSTOMIZE = """
import importlib.abc, importlib.machinery, importlib.util, json, os, sys
ALLOWED = set(os.environ["BARE_ALLOWED"].split(",")) | set(sys.stdlib_module_names) | set(sys.modules)
DIRS = [d for d in os.environ.get("BARE_DIRS", "").split(os.pathsep) if d]  # what the script installs or adds
BLOCKED = []

def allowed(name):  # _sysconfigdata_*: the standard library's, named after the platform
    top = name.partition(".")[0]
    return (top in ALLOWED or name.startswith("_sysconfigdata_")
            or importlib.machinery.PathFinder.find_spec(top, DIRS) is not None)

class Bare(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if not allowed(name):
            BLOCKED.append(name)
            raise ModuleNotFoundError(f"No module named {name!r} (not on a bare GPU machine)", name=name)

_find_spec = importlib.util.find_spec
importlib.util.find_spec = lambda name, package=None: _find_spec(name, package) if allowed(name) else None
sys.meta_path.insert(0, Bare())

@__import__("atexit").register
def _record():
    with open(os.environ["BARE_RECORD"], "a") as f:
        f.write(json.dumps({"argv": sys.argv, "blocked": sorted(set(BLOCKED)),
                            "modules": sorted({m.partition(".")[0] for m in sys.modules}),
                            "files": {m: getattr(sys.modules.get(m), "__file__", None)
                                      for m in ("verl", "ray", "transformers", "hydra")}}) + "\\n")
"""
WHEELHOUSE = ROOT / ".gpu-wheelhouse"  # make gpu-wheelhouse (a prerequisite of make test)
NOT_BARE = {"vllm", "datasets", "pyarrow", "pandas", "wandb", "transfer_queue"}
# what the H200 image holds of transformers' requirements that the wheelhouse does not carry (the device tool's
# package list, 2026-11): the dry run imports the carried transformers beside these very versions
GPU_IMAGE = {"huggingface_hub": "1.33.0", "safetensors": "0.8.0"}


def _closure(names) -> set[str]:
    """These distributions and everything they require (no extras), as installed here."""
    norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()  # noqa: E731
    seen, pending = set(), [norm(n) for n in names]
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        for req in md.requires(name) or []:
            dep, marker = re.match(r"([A-Za-z0-9_.-]+)[^;]*(?:;(.*))?", req).groups()
            if marker is None or ("extra" not in marker and _marker_holds(marker)):
                pending.append(norm(dep))
    return seen


def _marker_holds(marker: str) -> bool:
    from packaging.markers import Marker

    return Marker(marker).evaluate()


@pytest.fixture(scope="module")
def first_hour(tmp_path_factory):
    """scripts/gpu_first_hour.sh on the CPU (tiny model) with only torch, transformers, numpy, safetensors, tqdm, pip,
    their requirements, the standard library and what the script itself installs (the wheelhouse) or adds (Ray's
    import stub) importable: (output folder, work folder, one record of imports per Python process)."""
    assert (WHEELHOUSE / "requirements.txt").is_file(), f"no {WHEELHOUSE}: run `make gpu-wheelhouse` first"
    tmp_path = tmp_path_factory.mktemp("first_hour")
    dists = _closure(BARE_MACHINE)
    modules = {m for m, ds in md.packages_distributions().items()
               if any(re.sub(r"[-_.]+", "-", d).lower() in dists for d in ds)}
    assert {"torch", "transformers", "huggingface_hub", "yaml", "pip"} <= modules
    assert not {"verl", "vllm", "ray", "hydra", "omegaconf", "tensordict"} & modules
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    out, work = tmp_path / "out", tmp_path / "work"
    stub = ROOT / "scripts" / "bare_gpu" / "ray_import_stub"
    env = dict(os.environ, DEVICE="cpu", SIZE="tiny", OUT=str(out), PYTHON=sys.executable, WHEELHOUSE=str(WHEELHOUSE),
               PYTHONPATH=str(tmp_path / "site"), BARE_ALLOWED=",".join(sorted(modules | {"verl_ext"})),
               WORK=str(work), BARE_DIRS=os.pathsep.join([str(work / "site"), str(stub)]),
               BARE_RECORD=str(tmp_path / "record.jsonl"))
    proc = subprocess.run(["bash", "scripts/gpu_first_hour.sh"], capture_output=True, text=True, timeout=600,
                          cwd=ROOT, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, work, [json.loads(line) for line in (tmp_path / "record.jsonl").read_text().splitlines()]


def _program(record: dict) -> str:
    """What a recorded process ran: ``-c`` (an inline check), or the module's file."""
    return record["argv"][0] if record["argv"][0] == "-c" else Path(record["argv"][0]).relative_to(
        Path(record["argv"][0]).parents[1]).as_posix()


def test_first_hour_script_dry_run_on_a_bare_machine(first_hour):
    """Every step runs, one table comes out, and outside verl's actor step verl, vLLM, Ray and Hydra are never
    imported (check_gpu --no-vllm --cpu among the steps); everything in the output folder would come back from a GPU
    machine (installs and checkpoints are in the work folder)."""
    out, work, records = first_hour
    assert return_problems(out) == [], return_problems(out)
    assert sorted(p.name for p in out.iterdir()) == ["bench.json", "log.txt", "results.json", "results.md", "steps.json",
                                                     "update.json", "verl_actor.json", "verl_actor.md"]
    log = (out / "log.txt").read_text()  # every step's output: update check, verl's actor, step pattern, bench, table
    assert (work / "site" / "verl").is_dir() and all(line in log for line in (
        "[ok] update sdpa: ", "\nsdpa: finished\n", "\nsdpa step 1: ", "attention bench: ", "; bench model: "))
    programs = [_program(r) for r in records]
    assert sorted(programs) == sorted(["-c"] * 4 + ["pip/__main__.py", "gpu/check_gpu.py"] + ["gpu/verl_actor.py"] * 3
                                      + ["gpu/attention_bench.py"] * 3), programs  # -c: versions, verl?, stack, ray?
    pinned = dict(line.split("==") for line in (WHEELHOUSE / "requirements.txt").read_text().split())
    for r, program in zip(records, programs):
        if program not in ("pip/__main__.py", "-c"):  # every step on the wheelhouse's transformers: one stack
            assert r["files"]["transformers"].startswith(str(work / "site")), (r["argv"], r["files"])
        if program in ("gpu/verl_actor.py", "pip/__main__.py", "-c"):
            continue
        assert not {"verl", "vllm", "ray", "hydra", "omegaconf"} & set(r["modules"]), r["argv"]
        assert not {"verl", "vllm", "ray", "hydra"} & {b.partition(".")[0] for b in r["blocked"]}, r
    stack, table, steps_table = ((out / "results.md").read_text().split("\n\n"))[:3]
    assert stack.startswith("stack: python ") and f", transformers {pinned['transformers']}, tokenizers " \
        f"{pinned['tokenizers']}, " in stack and f", verl {pinned['verl']}, device " in stack, stack
    assert all(f", {name} {version}, " in stack for name, version in GPU_IMAGE.items()), stack
    table, steps_table = table.splitlines(), steps_table.splitlines()
    rows = {line.split(" | ")[0].strip("| "): line for line in table if line.startswith("| ")}
    assert set(rows) == {"backend", *BACKENDS}
    for name in ("sdpa", "sdpa_padded", "flex_attention"):  # update check passed, with both gaps
        assert re.match(rf"\| {name} \| ok \| \d\.\de[-+]\d\d \| \d\.\de[-+]\d\d \|", rows[name]), rows[name]
    assert rows["sdpa"].count(" 1.00 ") == 2  # the bench's reference at both sizes
    assert "skipped: needs the flash-attn package" in rows["flash_attention_2"]
    results = json.loads((out / "results.json").read_text())
    assert {r["status"] for r in results["bench"]["rows"] if r["backend"] == "sdpa_padded"} == {"ok"}
    steps = {r["backend"]: r for r in results["steps"]["steps"]}  # the actor's step pattern, flex skipped on CPU
    assert len(steps["sdpa"]["step_s"]) == 2 and all(t > 0 for t in steps["sdpa"]["step_s"])
    assert steps["sdpa"]["graphs"] == [0, 0] and "no backward" in steps["flex_attention"]["status"]
    assert any(re.match(r"\| sdpa \| 256 \| 2 \| \d+\.\d \| 0\.0 \| \d+\.\d\d \| 0 \| 0\.000 \| 0 \| ok \|", line)
               for line in steps_table)


def test_first_hour_runs_verls_own_actor_from_the_wheelhouse_without_ray(first_hour):
    """Step 2: verl 0.9.1's ActorRolloutRefWorker (role actor) trains 3 steps per backend from the recipe's config,
    each backend in its own process, verl from the installed wheelhouse, Ray from the import stub, no datasets,
    pyarrow, pandas or vLLM; log-probs equal eager attention on the padded batch (fp32: the suite's precision)."""
    out, work, records = first_hour
    children = [r for r in records if "--child" in r["argv"]]
    assert sorted(r["argv"][r["argv"].index("--backends") + 1] for r in children) == ["sdpa", "sdpa_padded"]
    for r in children:
        assert r["files"]["verl"].startswith(str(work / "site")), r["files"]
        assert r["files"]["transformers"].startswith(str(work / "site")), r["files"]  # the wheelhouse's pinned one
        assert "bare_gpu/ray_import_stub" in r["files"]["ray"], r["files"]
        assert not NOT_BARE & set(r["modules"]), r["argv"]
    result = json.loads((out / "verl_actor.json").read_text())
    rows = {r["backend"]: r for r in result["rows"]}
    assert "no backward" in rows["flex_attention"]["status"]
    assert result["dtype"] == "fp32" and result["tolerance"] == 1e-4
    # the cap the step ran under fits an 80 GB H100 (81,559 MiB as torch reports it), not the H200's 139 GiB
    assert 70 <= result["memory_cap_gib"] <= 81_559 / 1024
    for name in ("sdpa", "sdpa_padded"):
        row = rows[name]
        assert row["status"] == "finished" and len(row["steps"]) == 3, row
        assert row["logp_gap"] < 1e-4, row["logp_gap"]
        for step in row["steps"]:
            assert math.isfinite(step["loss"]) and step["grad_norm"] > 0, step
            assert step["longest"] == result["budgets"]["prompt"] + result["budgets"]["response"], step
            assert step["tokens"] >= 3 * result["budgets"]["update"], step  # several micro-batches per step
    assert len({tuple(s["tokens"] for s in rows[n]["steps"]) for n in ("sdpa", "sdpa_padded")}) == 1  # same data
    # sdpa ran transformers' own attention on the packed rows (the GPU's path), not the CPU mode's per-sequence one
    assert rows["sdpa"]["attention_function"] == "sdpa_attention_forward", rows["sdpa"]
    summary = (out / "results.md").read_text()  # the script's one table holds verl's actor's too
    assert re.search(r"^\| sdpa \| finished \| [\d.]+ \| [\d.]+ \|", summary, re.M), summary
    assert json.loads((out / "results.json").read_text())["verl_actor"] == result
    changed = {c["key"]: c for c in result["changes"]}
    assert changed["actor_rollout_ref.model.path"]["recipe"] == "Qwen/Qwen2.5-1.5B-Instruct"
    assert changed["trainer.n_gpus_per_node"]["used"] == 1
    assert changed["actor_rollout_ref.actor.ppo_max_token_len_per_gpu"]["recipe"] >= 8192  # the recipe's, scaled
