"""``python -m verl_ext.apps.bench.attention`` moved beside the other GPU tools: this says where."""

raise SystemExit("python -m verl_ext.apps.bench.attention moved: run `python -m verl_ext.apps.gpu.attention_bench` "
                 "or `python -m verl_ext.apps.bench attention` (the GPU tools are in verl_ext/apps/gpu/)")
