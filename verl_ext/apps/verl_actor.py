"""``python -m verl_ext.apps.verl_actor`` moved beside the other GPU tools: this says where."""

raise SystemExit("python -m verl_ext.apps.verl_actor moved: run `python -m verl_ext.apps.gpu.verl_actor` "
                 "(the GPU tools are in verl_ext/apps/gpu/)")
