"""The warm-started embedded policy (verl_ext.apps.warm_start): built once through the real SFT path, cached
with its marker, rebuilt on request; the 2-layer truncated model keeps it fast."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from verl_ext.models.embedded import embedded_model_path
from verl_ext.apps.warm_start import WarmStartConfig, warm_start_info, warm_start_path

pytestmark = [pytest.mark.e2e, pytest.mark.beside]  # a training run, in make test's second lane

CONFIG = WarmStartConfig(steps=2, batch=4, lr=1e-4, eval_tasks=2, k=1, num_layers=2)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A private cache holding only the truncated base model (linked, not converted again)."""
    root = tmp_path_factory.mktemp("cache") / "models"  # the layout under $VERL_EXT_CACHE
    root.mkdir()
    base = Path(embedded_model_path(num_layers=2))
    (root / base.name).symlink_to(base, target_is_directory=True)
    path = warm_start_path(CONFIG, cache_dir=root)
    return {"root": root, "path": Path(path), "base": base}


def test_warm_start_is_a_fine_tuned_checkpoint_with_its_record(cache):
    from safetensors.torch import load_file

    path = cache["path"]
    assert path.parent == cache["root"] and path.name == CONFIG.name()
    info = warm_start_info(path)
    assert info["warm_start"]["steps"] == 2 and info["base"] == str(cache["root"] / cache["base"].name)
    assert info["sft_loss_last"] < info["sft_loss_first"]
    assert info["heldout"]["tasks"] == 2 and 0.0 <= info["heldout"]["accuracy"] <= 1.0
    before, after = load_file(str(cache["base"] / "model.safetensors")), load_file(str(path / "model.safetensors"))
    assert any(not torch.equal(before[k], after[k].to(before[k].dtype)) for k in before)
    assert (cache["root"] / f"{CONFIG.name()}.log").is_file()
    assert not [p for p in cache["root"].iterdir() if p.name.startswith(".tmp-")]  # nothing half-built left


def test_cached_until_rebuilt_and_each_setting_has_its_own_directory(cache, monkeypatch, capsys):
    """The cache and ``--rebuild`` through the CLI's own code (in-process, the SFT replaced by a copy of the built
    model: the real SFT and evaluation ran in the test above)."""
    from verl_ext.apps import warm_start

    marker = cache["path"] / "verl_ext_embedded.json"
    stamp = marker.stat().st_mtime_ns
    assert warm_start_path(CONFIG, cache_dir=cache["root"]) == str(cache["path"])
    assert marker.stat().st_mtime_ns == stamp  # reused, not rebuilt
    assert WarmStartConfig(steps=3, batch=4, num_layers=2).name() != CONFIG.name()
    built = []

    def copy_of_the_model(config, base, work, log):
        built.append(config)
        shutil.copytree(cache["path"], work / "model", ignore=shutil.ignore_patterns("verl_ext_embedded.json"))
        return {"sft_loss_first": 2.0, "sft_loss_last": 1.0, "sft_val_loss": None, "heldout": None}

    monkeypatch.setattr(warm_start, "_build", copy_of_the_model)
    monkeypatch.setenv("VERL_EXT_CACHE", str(cache["root"].parent))
    cli = ["--num-layers", "2", "--steps", "2", "--batch", "4", "--lr", "1e-4", "--eval-tasks", "2", "--k", "1"]
    assert warm_start.main(cli) == 0 and not built  # cached: printed, not built
    assert capsys.readouterr().out.strip().splitlines()[-1] == str(cache["path"])
    assert warm_start.main([*cli, "--rebuild"]) == 0
    assert built == [CONFIG] and capsys.readouterr().out.strip().splitlines()[-1] == str(cache["path"])
    assert marker.stat().st_mtime_ns != stamp and warm_start_info(cache["path"])["sft_loss_last"] == 1.0  # built again
    assert not [p for p in cache["root"].iterdir() if p.name.startswith(".tmp-")]
