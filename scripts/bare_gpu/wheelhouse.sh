#!/usr/bin/env bash
# make gpu-wheelhouse: wheels of verl 0.9.1 and what its actor path imports beyond torch and transformers
# (scripts/bare_gpu/wheelhouse.txt), for the GPU machine's Python (GPU_PYTHON, default 3.12: the bare H100 / H200
# image) and this machine's (the CPU dry run in make test), offline-installable on the bare machine with
#   pip install --no-index --no-deps --find-links WHEELHOUSE --target DIR -r WHEELHOUSE/requirements.txt
# (scripts/gpu_first_hour.sh does it). Versions are those a GPU user's `make install-gpu` gets, from the resolved set
# scripts/gpu_install/py$GPU_PYTHON.txt (`make gpu-resolve`), so that the first GPU hour runs the users' stack. Fails
# when the folder exceeds LIMIT_MIB (48: the device tool carries at most 64 MiB of ignored files per command).
#   PYTHON=.venv/bin/python bash scripts/bare_gpu/wheelhouse.sh [OUT (default .gpu-wheelhouse)]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${1:-.gpu-wheelhouse}
PYTHON=${PYTHON:-.venv/bin/python}
GPU_PYTHON=${GPU_PYTHON:-3.12}
LIMIT_MIB=${LIMIT_MIB:-48}
SOURCE_ONLY=antlr4-python3-runtime  # PyPI has only its source: built into a wheel here (pure Python)

rm -rf "$OUT.tmp" && mkdir -p "$OUT.tmp"
names=$(grep -v '^#' scripts/bare_gpu/wheelhouse.txt | xargs)
LOCK=scripts/gpu_install/py$GPU_PYTHON.txt
[[ -f $LOCK ]] || { echo "gpu-wheelhouse: no $LOCK: GPU_PYTHON must be one make gpu-resolve resolves (3.12, 3.11)" >&2
  exit 1; }
"$PYTHON" - "$OUT.tmp/requirements.txt" "$LOCK" $names <<'PY'
import sys
from packaging.utils import canonicalize_name
from verl_ext.apps.gpu import resolved
out, lock, names = sys.argv[1], sys.argv[2], sys.argv[3:]
pinned = resolved.read(lock)
missing = [n for n in names if canonicalize_name(n) not in pinned]
if missing:
    sys.exit(f"not in {lock}: {', '.join(missing)} (scripts/bare_gpu/wheelhouse.txt names a package install-gpu lacks)")
with open(out, "w") as f:
    f.write("".join(f"{n}=={pinned[canonicalize_name(n)]}\n" for n in names))
PY
local_python=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
grep -v "^$SOURCE_ONLY==" "$OUT.tmp/requirements.txt" > "$OUT.tmp/binary.txt"
for version in $(printf '%s\n' "$GPU_PYTHON" "$local_python" | sort -u); do
  "$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: --dest "$OUT.tmp" --python-version "$version" \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -r "$OUT.tmp/binary.txt"
done
"$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$OUT.tmp" "$(grep "^$SOURCE_ONLY==" "$OUT.tmp/requirements.txt")"
rm "$OUT.tmp/binary.txt"
mib=$(( $(du -sb "$OUT.tmp" | cut -f1) / 1048576 ))
(( mib <= LIMIT_MIB )) || { echo "gpu-wheelhouse: $mib MiB, over the $LIMIT_MIB MiB limit" >&2; exit 1; }
rm -rf "$OUT" && mv "$OUT.tmp" "$OUT"
echo "gpu-wheelhouse: $(ls "$OUT"/*.whl | wc -l) wheels, $mib MiB in $OUT (Python $GPU_PYTHON and $local_python)"
