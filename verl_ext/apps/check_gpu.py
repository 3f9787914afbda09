"""``python -m verl_ext.apps.check_gpu`` moved beside the other GPU tools: this says where."""

raise SystemExit("python -m verl_ext.apps.check_gpu moved: run `make check-gpu` or "
                 "`python -m verl_ext.apps.gpu.check_gpu` (the GPU tools are in verl_ext/apps/gpu/)")
