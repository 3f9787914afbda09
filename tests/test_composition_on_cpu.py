"""verl_ext.launch.composition: verl's config folder named by its file path (the folder Hydra's ``pkg://`` path names:
every recorded launch config, composed with it, is unchanged: tests/recipes/test_launch_configs_on_cpu.py), and the
command line that carries it."""

import importlib.resources
from pathlib import Path

from verl_ext.launch.composition import override_key, searchpath, verl_config_source, with_searchpath


def test_verls_config_folder_is_the_one_its_package_holds():
    source = verl_config_source()
    assert source.startswith("file://")
    folder = Path(source.removeprefix("file://"))
    assert folder == Path(str(importlib.resources.files("verl.trainer.config")))
    assert (folder / "ppo_trainer.yaml").is_file()
    assert searchpath("/r", "/s") == f"hydra.searchpath=[{source},file:///r,file:///s]"


def test_the_search_path_goes_before_the_first_override_unless_the_user_sets_one():
    sp = searchpath()
    assert with_searchpath(["--config-dir", "recipes", "+cbs=x", "a.b=1", "--cfg", "job"]) == \
        ["--config-dir", "recipes", sp, "+cbs=x", "a.b=1", "--cfg", "job"]
    assert with_searchpath(["--cfg", "job"]) == ["--cfg", "job", sp]
    assert [override_key(o) for o in ("a.b=1", "+a.b=1", "++a.b=1", "~a.b", "~a.b=2")] == ["a.b"] * 5
    own = ["a=1", "hydra.searchpath=[pkg://verl.trainer.config]"]
    assert with_searchpath(own) == own and with_searchpath(["++hydra.searchpath=[]"]) == ["++hydra.searchpath=[]"]

