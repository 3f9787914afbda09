"""The GPU install's resolved set (``make gpu-resolve``, ``scripts/gpu_install/py3.*.txt``) agrees with what
``make install-gpu`` asks for, as the repository states it now."""

from __future__ import annotations

import hashlib
import tomllib

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.recipes.recipes import ROOT
from verl_ext.apps.gpu.check_gpu import MIN_DRIVER
from verl_ext.apps.gpu.resolved import pins, read

LOCKS = {python: ROOT / "scripts" / "gpu_install" / f"py{python}.txt" for python in ("3.12", "3.11")}
INPUTS = ("pyproject.toml", "requirements.txt", "verl_ext/REQUIRED_VERL.txt")


def unmet(requirements: list[str], pinned: dict[str, str], python: str) -> list[str]:
    """The requirements (PEP 508 strings) whose package is missing from ``pinned`` or pinned outside their specifier;
    those whose marker excludes Linux x86_64 with this Python are skipped."""
    env = {"python_version": python, "python_full_version": f"{python}.0", "sys_platform": "linux",
           "platform_system": "Linux", "platform_machine": "x86_64", "implementation_name": "cpython",
           "platform_python_implementation": "CPython", "os_name": "posix", "extra": ""}
    bad = []
    for line in requirements:
        req = Requirement(line)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        version = pinned.get(canonicalize_name(req.name))
        if version is None or not req.specifier.contains(version, prereleases=True):
            bad.append(f"{line} (pinned: {version})")
    return bad


def declared() -> list[str]:
    """What ``pip install -e ".[gpu,dev]"`` asks for: the dependency files and the two extras."""
    lines = [line.split("#", 1)[0].strip() for name in ("verl_ext/REQUIRED_VERL.txt", "requirements.txt")
             for line in (ROOT / name).read_text().splitlines()]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return [line for line in lines if line] + extras["gpu"] + extras["dev"]


def cuda_version(pinned: dict[str, str]) -> tuple[int, int]:
    """The CUDA runtime torch's wheel requires (major, minor)."""
    major, minor = pinned["nvidia-cuda-runtime"].split(".")[:2]
    return int(major), int(minor)


@pytest.mark.parametrize("python", sorted(LOCKS))
def test_the_lock_was_resolved_from_the_inputs_as_they_are(python):
    digest = hashlib.sha256(b"".join((ROOT / name).read_bytes() for name in INPUTS)).hexdigest()
    header = [line for line in LOCKS[python].read_text().splitlines() if line.startswith("# inputs:")]
    assert header == [f"# inputs: sha256 of pyproject.toml + requirements.txt + verl_ext/REQUIRED_VERL.txt = {digest}"], \
        f"{LOCKS[python]}: resolved from other inputs than these: run `make gpu-resolve`"
    assert f"for Python {python}" in LOCKS[python].read_text().splitlines()[0]


@pytest.mark.parametrize("python", sorted(LOCKS))
def test_every_declared_requirement_is_pinned_within_its_range(python):
    pinned = read(LOCKS[python])
    assert not unmet(declared(), pinned, python)
    verl = Requirement((ROOT / "verl_ext/REQUIRED_VERL.txt").read_text().strip())
    assert pinned["verl"] == str(verl.specifier).removeprefix("==")
    assert "flash-attn" not in pinned  # the recipes request attentions torch provides (scripts/README.md)


def test_the_stated_gpu_stack_is_the_resolved_one():
    """pyproject.toml's comment and scripts/README.md name the resolved torch, vLLM, transformers and the driver the
    torch's CUDA needs (make check-gpu's bound)."""
    pinned = read(LOCKS["3.12"])
    assert read(LOCKS["3.11"])["torch"] == pinned["torch"]
    major, minor = cuda_version(pinned)
    driver = MIN_DRIVER[major]
    stack = (f"vllm {pinned['vllm']}, torch {pinned['torch']} (CUDA {major}: driver >= {driver}), "
             f"transformers {pinned['transformers']}")
    assert stack in (ROOT / "pyproject.toml").read_text()
    readme = " ".join((ROOT / "scripts" / "README.md").read_text().split())
    assert (f"torch {pinned['torch']} (CUDA {major}.{minor} runtime: **driver ≥ {driver}**), vLLM "
            f"{pinned['vllm']}, transformers {pinned['transformers']}, verl {pinned['verl']}, no flash-attn") in readme


def test_pins_and_ranges_are_read_as_pip_reads_them():
    pinned = pins("a==1.0\n    # via b\nB_c[x]==2.1  # note\n")
    assert pinned == {"a": "1.0", "b-c": "2.1"}
    assert unmet(["a>=1", "b_c<2", "d", "e; python_version < '3.11'"], pinned, "3.12") == \
        ["b_c<2 (pinned: 2.1)", "d (pinned: None)"]
    with pytest.raises(ValueError, match="line 1: not a pinned requirement"):
        pins("a>=1.0\n")
