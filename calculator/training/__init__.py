"""Memory of training and fine-tuning, per GPU.

Every figure is derived from the real model: its weight matrices (ModelSummary.linears), its
parameter groups, and its shape (ArchSpec: heads, key/value heads, hidden size, MLP width
and gating, experts, vocabulary). A step holds:

- weights: the stored weights (16-bit, float32, or 4-bit NF4 for QLoRA's frozen base) and,
  under mixed precision, the float32 master copy the optimizer updates;
- gradients, one per trainable parameter (16-bit under mixed precision);
- optimizer states: AdamW (two), 8-bit AdamW as bitsandbytes stores it, SGD with momentum
  (one), Adafactor (factored second moments: rows + columns of each matrix);
- activations kept for the backward pass, tensor by tensor as transformers' layers keep
  them (norms, projections, attention, MLP, dropout masks), with no recomputation,
  selective recomputation or full checkpointing, and the float32 logits of the loss;
- temporaries: gradients flowing through a layer, the logits' gradients, the optimizer's
  intermediate results, communication and gather buffers.

The peak is found on a timeline rather than by adding everything: gradients appear while
activations are released during the backward pass, and gradients are freed before the next
forward. Two phases compete: the backward pass and the optimizer step.

Distribution: plain data parallelism (PyTorch DDP keeps a bucket copy of the gradients),
ZeRO stages 1-3 (Rajbhandari et al., SC 2020) with CPU offload of the optimizer (Ren et al.,
ZeRO-Offload, 2021) or of the parameters, Megatron-style tensor parallelism with sequence
parallelism and pipeline parallelism with the 1F1B schedule (Korthikanti et al., "Reducing
Activation Recomputation in Large Transformer Models", 2022; Narayanan et al., SC 2021), and
their combinations. Figures are per GPU, for the GPU that holds the most.

The package follows the steps of that computation, one module each:

- setup: the choices (precision, optimizer, method...), the precision recipes' bytes, the
  layout of the GPUs, and the checks;
- tensors: the trainable tensors and what the optimizer keeps for them;
- quantized: QLoRA's NF4 base and the largest single module;
- layer_tensors: the tensors one layer keeps for the backward pass, block by block;
- activations: what a micro-batch keeps, and the moments of a layer's backward pass;
- peak: model states per GPU and the peak of one step;
- inverse: the largest micro-batch, the fewest GPUs, the rule of thumb, the methods compared.

`from calculator.training import X` is the way in: every public name is here.

All sizes in bytes. Pure Python: nothing here imports torch.
"""

from __future__ import annotations

from calculator.models.families import ModelTraits, traits_from_config
from calculator.training.activations import (
    ActivationModel, KorthikantiLayer, Moment, activation_model, korthikanti_layer_bytes, layer_activation_bytes,
)
from calculator.training.inverse import (
    GpuCount, MethodMemory, candidate_gpu_counts, compare_methods, fewest_gpus, largest_micro_batch,
    rule_of_thumb_bytes, rule_of_thumb_split, strategy_layout,
)
from calculator.training.layer_tensors import ACTIVATION_KEEPS, LAYER_GROUPS, ROLES, SITES, Saved
from calculator.training.peak import PEAK_COMPONENTS, TrainingMemory, model_traits_default, training_memory
from calculator.training.quantized import (
    NF4_BLOCK, NF4_SCALE_BLOCK, kbit_upcast_bytes, largest_module_parameters, nf4_bytes, quantized_base_bytes,
    unconverted_expert_parameters,
)
from calculator.training.setup import (
    ACCOUNTINGS, ADAPTER_DTYPES, ALL_LINEAR, ATTENTION, AUTOCAST_PRECISIONS, CHECKPOINTING, DEVICES,
    FINE_TUNING_DEFAULTS, FUSED_TOKEN_TILE, FUSED_VOCAB_TILE, GPUS_PER_NODE, LOSS_CHUNKS, LOSSES,
    MAX_BATCH, MAX_GPUS, MAX_RANK, MAX_TOKENS, METHODS, OPTIMIZER_IMPLS, OPTIMIZERS, PRECISION_BYTES, PRECISIONS,
    STRATEGIES, ZERO_STAGES, Layout, Precision, TrainingSetup, adapters_in_float32, check_layout, check_setup,
    float32_residual,
)
from calculator.training.tensors import (
    BNB_BLOCK, BNB_MIN_8BIT, BNB_QMAPS_BYTES, NAME_ROLES, TensorGroup, full_tensors, idle_adapter_parameters,
    linear_role, lora_modules, lora_parameters, lora_rank_of, lora_tensors, optimizer_state_bytes,
    optimizer_step_temporary,
)

__all__ = [
    "ADAPTER_DTYPES", "AUTOCAST_PRECISIONS", "adapters_in_float32", "float32_residual",
    # setup
    "PRECISIONS", "OPTIMIZERS", "METHODS", "CHECKPOINTING", "ATTENTION", "OPTIMIZER_IMPLS", "DEVICES", "ACCOUNTINGS",
    "STRATEGIES", "ZERO_STAGES", "ALL_LINEAR", "LOSSES",
    "FUSED_TOKEN_TILE", "FUSED_VOCAB_TILE", "LOSS_CHUNKS", "MAX_TOKENS", "MAX_BATCH", "MAX_GPUS", "MAX_RANK", "GPUS_PER_NODE",
    "Precision", "PRECISION_BYTES", "TrainingSetup", "FINE_TUNING_DEFAULTS", "Layout", "check_setup", "check_layout",
    # tensors
    "BNB_BLOCK", "BNB_MIN_8BIT", "BNB_QMAPS_BYTES", "NAME_ROLES", "linear_role", "TensorGroup", "full_tensors",
    "idle_adapter_parameters", "lora_modules", "lora_rank_of", "lora_parameters", "lora_tensors", "optimizer_state_bytes",
    "optimizer_step_temporary",
    # quantized
    "NF4_BLOCK", "NF4_SCALE_BLOCK", "nf4_bytes", "quantized_base_bytes", "largest_module_parameters",
    "kbit_upcast_bytes", "unconverted_expert_parameters",
    # activations
    "ACTIVATION_KEEPS", "ROLES", "SITES", "LAYER_GROUPS", "Saved", "Moment", "ActivationModel", "activation_model",
    "layer_activation_bytes", "KorthikantiLayer", "korthikanti_layer_bytes",
    # peak
    "PEAK_COMPONENTS", "TrainingMemory", "model_traits_default", "training_memory",
    # inverse
    "largest_micro_batch", "strategy_layout", "candidate_gpu_counts", "GpuCount", "fewest_gpus", "rule_of_thumb_bytes",
    "rule_of_thumb_split", "MethodMemory", "compare_methods",
    # kept for callers that took them from here (they live in calculator.models.families)
    "ModelTraits", "traits_from_config",
]
