"""Every launcher's composed trainer config, recorded (the launch path may change, the configs do not).

Each entry of :data:`INVOCATIONS` runs a launcher with ``DRY_RUN=1`` (:func:`tests.recipes.recipes.launch`); every
training command it prints is composed in-process as ``python -m verl_ext.main ARGS --cfg job --resolve`` would
(``--cpu``: the CPU preset before the overrides, :func:`verl_ext.launch.main.cpu_argv`, at a fixed precision and thread
count) and its resolved YAML, with this checkout's root and cache as placeholders, is hashed.
``tests/fixtures/launch_configs.json`` holds ``{key: sha256}`` and ``tests/fixtures/launch_configs/*.yaml`` the YAML
of :data:`KEPT` (to show a difference). Rewrite them only when a config is meant to change:
``.venv/bin/python -m tests.recipes.launch_configs --write``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
from pathlib import Path

from tests.recipes.recipes import ROOT, cached_compositions, commands, launch
from verl_ext.launch.composition import CONFIG_DIR, CONFIG_NAME, searchpath

FIXTURE = ROOT / "tests" / "fixtures" / "launch_configs.json"
KEPT_DIR = ROOT / "tests" / "fixtures" / "launch_configs"
CACHE = "/cache"  # VERL_EXT_CACHE of the launchers (the embedded policy's folder)
ENV = {"DATA_DIR": "/data", "OUT_DIR": "/out", "VERL_EXT_CACHE": CACHE}

SETTINGS = {
    "ads": ("olmo-3-7b-sft", "qwen2.5-math-1.5b", "qwen3-4b-base"),
    "bots": ("qwen2.5-1.5b-instruct_code", "qwen2.5-1.5b-instruct_logic", "qwen2.5-1.5b-instruct_math",
             "qwen2.5-7b_code", "qwen2.5-7b_logic", "qwen2.5-7b_math"),
    "cbs": ("qwen3-1.7b-base", "qwen3-4b-base", "qwen3-8b-base"),
    "coba": ("qwen2.5-7b-base", "qwen2.5-7b-instruct", "qwen3-1.7b-base", "qwen3-4b-base"),
    "progress": ("qwen2.5-0.5b_countdown",),
}
SWEEPS = {  # each grid's SWEEP values ("" = its default grid), with extra environment
    "ads": [{}, {"SWEEP": "objectives"}, {"SWEEP": "ablation"}],
    "bots": [{}, {"SWEEP": "rho"}, {"SWEEP": "lambda"}, {"SWEEP": "sampling"}],
    "cbs": [{}, {"SWEEP": "ablation", "OBJECTIVES": "grpo dapo gspo"}, {"SWEEP": "buffer", "OBJECTIVES": "grpo gspo"}],
    "coba": [{"BASELINES": "1"}, {"SWEEP": "budget"}, {"SWEEP": "kappa"}],
    "progress": [{}],
}
CHOICES = {  # the launchers' leading names: objectives, then the axis' choices (default first)
    "ads": (("grpo", "dapo", "gspo"), ("ads", "ads_no_inter", "ads_no_intra", "uniform", "dots")),
    "cbs": (("grpo", "dapo", "gspo"), ("keep_all", "cbs_star", "cbs", "cbs_random", "cbs_no_ema", "cbs_no_entropy")),
    "progress": ((), ("conservative", "uniform", "bucket_uniform", "empirical", "density_ratio", "random_buckets",
                      "prompt_utility")),
    "bots": ((), ("selector=bots", "selector=random", "selector=bots_dots")),
    "coba": ((), ("allocator=coba", "allocator=knapsack", "allocator=grpo")),
}
CLUSTER = {"NNODES": "2", "RAY_ADDRESS": "auto", "GPUS_PER_NODE": "4", "MODEL_PATH": "/m/model"}


def _invocations() -> list[tuple[str, tuple[str, ...], dict[str, str]]]:
    """``(group/script, args, env)``: every setting script bare, the first with an override, on CPU=1 and on a
    cluster; every setting's grid, the first setting's under every sweep; the small recipes (cpu_embedded,
    gpu_smoke) bare, with an override and with each objective and each choice."""
    out = []
    for group, settings in SETTINGS.items():
        out += [(f"{group}/{setting}.sh", (), {}) for setting in settings]
        out += [(f"{group}/{settings[0]}.sh", ("trainer.test_freq=5",), {}), (f"{group}/{settings[0]}.sh", (), {"CPU": "1"}),
                (f"{group}/{settings[0]}.sh", (), CLUSTER), (f"{group}/{settings[0]}.sh", (), {"CPU": "1", **CLUSTER})]
        objectives, choices = CHOICES[group]
        runs = [(o,) for o in objectives] + [((objectives[0],) if objectives else ()) + (c,) for c in choices]
        for script in ("cpu_embedded.sh", "gpu_smoke.sh"):
            out += [(f"{group}/{script}", args, {}) for args in [(), ("trainer.total_training_steps=2",), *runs]]
        out += [(f"{group}/grid.sh", (setting,), SWEEPS[group][0]) for setting in settings]
        out += [(f"{group}/grid.sh", (settings[0],), sweep) for sweep in SWEEPS[group][1:]]
    return out


INVOCATIONS = _invocations()
KEPT = ("ads/qwen3-4b-base.sh", "cbs/cpu_embedded.sh grpo cbs", "progress/gpu_smoke.sh uniform",
        "bots/qwen2.5-7b_math.sh", "coba/qwen3-4b-base.sh")


def invocation_key(script: str, args: tuple[str, ...], env: dict[str, str]) -> str:
    return " ".join([*(f"{k}={shlex.quote(v)}" for k, v in sorted(env.items())), script, *map(shlex.quote, args)])


def training_commands(script: str, args: tuple[str, ...], env: dict[str, str]) -> list[list[str]]:
    """The ``python -m verl_ext.main`` commands of one DRY_RUN launch, as argument lists after the module."""
    group, name = script.split("/")
    words = commands(launch(group, name, *args, **{**ENV, "FORCE": "1", **env}))
    return [w[w.index("verl_ext.main") + 1:] for w in words if "verl_ext.main" in w]


def main_args(args: list[str], env: dict[str, str]) -> tuple[Path, list[str]]:
    """``(--config-dir, overrides)`` that ``python -m verl_ext.main ARGS`` composes in the launcher's ``env``:
    ``--cpu`` expanded as :func:`verl_ext.launch.main.cpu_argv` does (at fp32 and 2 threads: machine-independent), then
    the recipe's rows inserted (:func:`verl_ext.launch.main.recipe_argv`)."""
    from verl_ext.cpu import cpu_overrides, split_hydra_flags, vllm_rollout
    from verl_ext.launch.main import recipe_argv

    flags, overrides = split_hydra_flags([a for a in args if a != "--cpu"])
    if "--cpu" in args:
        preset = cpu_overrides({}, num_threads=2, precision="fp32", rollout=vllm_rollout.requested_rollout(overrides),
                               ray_address=env.get("RAY_ADDRESS", ""))
        overrides = [*preset, *overrides]
    flags, overrides = split_hydra_flags(recipe_argv([*flags, *overrides]))
    if flags[:1] != ["--config-dir"] or len(flags) != 2:
        raise ValueError(f"expected --config-dir DIR before the overrides, got {flags}")
    return Path(flags[1]), overrides


def composed_yaml(args: list[str], env: dict[str, str]) -> str:
    """The resolved YAML ``python -m verl_ext.main ARGS --cfg job --resolve`` prints, this checkout's root and the
    embedded cache as ``<root>`` / ``<cache>``."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    config_dir, overrides = main_args(args, env)
    with cached_compositions(), initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        cfg = compose(CONFIG_NAME, overrides=[searchpath(config_dir), *overrides])
    return OmegaConf.to_yaml(cfg, resolve=True).replace(str(ROOT), "<root>").replace(CACHE, "<cache>")


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def record(progress: bool = True) -> tuple[dict[str, str], dict[str, str]]:
    """``({key: sha256}, {kept key: YAML})`` for every training command of :data:`INVOCATIONS`; a launch that
    prints several commands (grids) keys them ``KEY #i``."""
    from tqdm import tqdm

    hashes, kept = {}, {}
    for script, args, env in tqdm(INVOCATIONS, desc="launchers", disable=not progress):
        key = invocation_key(script, args, env)
        found = training_commands(script, args, env)
        if not found:
            raise ValueError(f"{key}: printed no training command")
        for i, words in enumerate(found):
            text = composed_yaml(words, env)
            name = key if len(found) == 1 else f"{key} #{i}"
            hashes[name] = digest(text)
            if name in KEPT:
                kept[name] = text
    return hashes, kept


def kept_path(key: str) -> Path:
    return KEPT_DIR / (key.replace("/", "__").replace(" ", "_") + ".yaml")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="rewrite the fixture (else compare and report)")
    args = parser.parse_args()
    hashes, kept = record()
    if args.write:
        FIXTURE.write_text(json.dumps(hashes, indent=1, sort_keys=True) + "\n")
        KEPT_DIR.mkdir(exist_ok=True)
        for key, text in kept.items():
            kept_path(key).write_text(text)
        print(f"{len(hashes)} configs -> {FIXTURE.relative_to(ROOT)}, {len(kept)} kept in {KEPT_DIR.relative_to(ROOT)}")
        return
    stored = json.loads(FIXTURE.read_text())
    changed = sorted(k for k in stored.keys() | hashes.keys() if stored.get(k) != hashes.get(k))
    print("\n".join(changed) or f"all {len(hashes)} configs as recorded")


if __name__ == "__main__":
    main()
