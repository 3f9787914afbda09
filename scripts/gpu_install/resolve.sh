#!/usr/bin/env bash
# `make gpu-resolve`: resolve what `make install-gpu` installs (pyproject.toml's `gpu` and `dev` extras: verl 0.9.1
# with its verl-core, math and vllm extras, our runtime dependencies) for the GPU machines' Pythons 3.12 and 3.11 on
# manylinux_2_28 x86_64, installing nothing, with uv's resolver (pip's cannot resolve for another platform with the
# one sdist, antlr4-python3-runtime 4.9.3, allowed). Writes scripts/gpu_install/py3.12.txt and py3.11.txt: every
# package pinned, a header naming the inputs' digest (tests/test_gpu_install_on_cpu.py says when they changed since).
# Only releases before EXCLUDE_NEWER count (default: the date these files were last resolved), so a rerun on unchanged
# inputs gives the same pins; move it to take newer releases.
#   bash scripts/gpu_install/resolve.sh            # uv in .venv-uv (made once); INDEX_URL=... for another index
set -euo pipefail
UV_VERSION=0.13.8
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
tools="${UV_ENV:-$root/.venv-uv}"
index="${INDEX_URL:-https://pypi.org/simple}"
exclude_newer="${EXCLUDE_NEWER:-2026-12-02T00:00:00Z}"
if ! "$tools/bin/uv" --version 2>/dev/null | grep -q "^uv $UV_VERSION "; then
  python3 -m venv "$tools"
  "$tools/bin/python" -m pip install --quiet "uv==$UV_VERSION"
fi
cd "$root"
digest="$(cat pyproject.toml requirements.txt verl_ext/REQUIRED_VERL.txt | sha256sum | cut -d' ' -f1)"
for python in 3.12 3.11; do
  out="$here/py$python.txt"
  "$tools/bin/uv" pip compile pyproject.toml --extra gpu --extra dev --python-version "$python" \
    --python-platform x86_64-manylinux_2_28 --index-url "$index" --exclude-newer "$exclude_newer" --no-header --quiet --output-file "$out.tmp"
  {
    echo "# make gpu-resolve (scripts/gpu_install/resolve.sh, uv $UV_VERSION): make install-gpu's set for Python $python"
    echo "# on manylinux_2_28 x86_64, from $index, releases before $exclude_newer"
    echo "# inputs: sha256 of pyproject.toml + requirements.txt + verl_ext/REQUIRED_VERL.txt = $digest"
    cat "$out.tmp"
  } >"$out"
  rm -f "$out.tmp"
  echo "$out: $(grep -cE '^[A-Za-z0-9]' "$out") packages; $(grep -E '^(torch|vllm|transformers|verl|flash-attn)==' "$out" | tr '\n' ' ')"
done
