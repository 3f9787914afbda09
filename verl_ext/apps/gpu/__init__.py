"""GPU tooling: is a GPU machine ready (:mod:`.check_gpu`), verl's own actor per attention backend
(:mod:`.verl_actor`) and the attention bench (:mod:`.attention_bench`, also ``python -m verl_ext.apps.bench
attention``)."""
