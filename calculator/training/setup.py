"""What is trained and how (TrainingSetup), how the GPUs share it (Layout), the bytes each
precision recipe stores, and the checks that refuse what cannot run."""

from __future__ import annotations

from dataclasses import dataclass

from calculator.core import limits
from calculator.models.architecture import ArchSpec
from calculator.core.errors import CalculatorError

# Choices, written as they appear in URLs and on the command line (language-neutral).
PRECISIONS = ("mixed", "bfloat16", "float32", "amp", "bf16-autocast")
ADAPTER_DTYPES = ("float32", "base")
# Precisions whose forward runs under torch.autocast (16-bit products).
AUTOCAST_PRECISIONS = ("amp", "bf16-autocast")
OPTIMIZERS = ("adamw", "adamw-8bit", "sgd", "adafactor")
METHODS = ("full", "lora", "qlora")
CHECKPOINTING = ("none", "selective", "full")
ATTENTION = ("sdpa", "eager")
OPTIMIZER_IMPLS = ("fused", "foreach", "for-loop")
DEVICES = ("cuda", "cpu")
ACCOUNTINGS = ("paper", "deepspeed")
STRATEGIES = ("ddp", "zero1", "zero2", "zero3", "zero3-offload", "tensor", "pipeline", "tensor-pipeline")
ZERO_STAGES = (0, 1, 2, 3)
ALL_LINEAR = "all-linear"
# How the loss meets the output head. full: transformers' own loss (ForCausalLMLoss upcasts the
#   whole logits to float32), what the Trainer runs. fused: the head and the loss in tiles that
#   never build the logits: trl's SFTTrainer (default from trl 1.7; 1.16's fused LM head,
#   trl/kernels/chunked_logprob.py) and Liger's fused linear cross-entropy (use_liger_kernel).
#   chunked: torchtune's CEWithChunkedOutputLoss, the logits in 8 chunks along the sequence,
#   each upcast to float32 on its own (eager; torch.compile can save less).
LOSSES = ("full", "chunked", "fused")
# trl 1.16, trl/kernels/chunked_logprob.py:31 (tokens per tile) and trl/trainer/utils.py:1506
# (vocabulary per tile): one tile in the products' dtype, reused through the forward and the backward.
FUSED_TOKEN_TILE = 4096
FUSED_VOCAB_TILE = 32768
# torchtune's CEWithChunkedOutputLoss(num_output_chunks=8), its recipes' setting.
LOSS_CHUNKS = 8

MAX_TOKENS = limits.high("sequence")
MAX_BATCH = limits.high("micro_batch")
MAX_GPUS = limits.high("gpus")
MAX_RANK = 65_536
GPUS_PER_NODE = 8  # tensor parallelism stays inside a node (NVLink)


@dataclass(frozen=True)
class Precision:
    """Bytes per element of what a training step stores, for one precision recipe."""

    weight: int  # the stored (working) weights
    grad: int
    master: int  # float32 master copy kept by the optimizer (0: none)
    state: int  # one optimizer state element (AdamW moments, SGD momentum, Adafactor)
    act: int  # what the matrix products produce


# mixed: 16-bit weights and gradients, float32 master weights and optimizer states (DeepSpeed,
#   Megatron, the ZeRO paper's 2 + 2 + 12 bytes per parameter).
# bfloat16: a model loaded in bfloat16 and trained as it is: everything in 16 bits.
# float32: everything in 4 bytes.
# amp: float32 weights, gradients and states; products in 16 bits under torch.autocast
#   (the Trainer's bf16=True on a float32 model).
# bf16-autocast: the Trainer's bf16=True on a 16-bit checkpoint, which transformers 5 loads in
#   its own dtype (dtype="auto"): 16-bit weights and gradients, and torch's AdamW keeps its
#   states in the parameters' dtype; no float32 master copy. What it keeps for the backward
#   is what a bfloat16 model keeps (the products are 16-bit either way).
PRECISION_BYTES = {
    "mixed": Precision(weight=2, grad=2, master=4, state=4, act=2),
    "bfloat16": Precision(weight=2, grad=2, master=0, state=2, act=2),
    "float32": Precision(weight=4, grad=4, master=0, state=4, act=4),
    "amp": Precision(weight=4, grad=4, master=0, state=4, act=2),
    "bf16-autocast": Precision(weight=2, grad=2, master=0, state=2, act=2),
}


@dataclass(frozen=True)
class TrainingSetup:
    """What is trained and how: the choices that do not depend on the GPUs."""

    method: str = "full"
    precision: str = "mixed"
    optimizer: str = "adamw"
    micro_batch: int = 1
    sequence: int = 2048
    checkpointing: str = "none"
    attention: str = "sdpa"
    gradient_accumulation: int = 1  # micro-batches per optimizer step
    lora_rank: int = 16
    lora_targets: str = ALL_LINEAR  # module names (q_proj,v_proj) or "all-linear"
    double_quant: bool = True  # QLoRA's quantized quantization constants
    optimizer_impl: str = "fused"  # the Trainer's default with torch >= 2.8
    device: str = "cuda"  # cpu: dropout keeps its mask in the activation dtype
    # peft's get_peft_model(autocast_adapter_dtype=True), its default: adapters of a 16-bit model
    # are created in float32 ("float32"); "base" keeps them in the model's dtype.
    adapter_dtype: str = "float32"
    # QLoRA as peft's prepare_model_for_kbit_training leaves it: every parameter that is not
    # 4-bit (embeddings, norms, the output head) cast to float32, so the residual stream runs
    # in float32 under the Trainer's autocast.
    kbit_prepare: bool = True
    # optimizer.zero_grad() / model.zero_grad() frees the gradients (set_to_none=True, torch's
    # default since 2.0); False: torch 1.x's default, which zeroes them in place, so every
    # gradient stays allocated through the next forward and backward.
    grads_set_to_none: bool = True
    loss: str = "full"  # LOSSES


    @property
    def sequences_per_step(self) -> int:
        """Sequences one data-parallel replica sees per optimizer step: micro-batch x accumulation."""
        return self.micro_batch * self.gradient_accumulation


# The step the fine-tuning chapter's case and the `train` command both start from (DESIGN.md: a
# command's defaults are the page's defaults for the same chapter case): LoRA under bf16
# autocast, 4 sequences of 2,048 tokens, AdamW, full checkpointing (verdicts.default_checkpointing
# of LoRA, which `train` applies when --checkpointing is not given).
FINE_TUNING_DEFAULTS = TrainingSetup(method="lora", precision="bf16-autocast", optimizer="adamw", micro_batch=4,
                                     sequence=2048, checkpointing="full")


@dataclass(frozen=True)
class Layout:
    """How the GPUs share the work: gpus = data x tensor x pipeline."""

    gpus: int = 1
    tensor: int = 1
    pipeline: int = 1
    zero: int = 0
    offload_optimizer: bool = False
    offload_parameters: bool = False
    sequence_parallel: bool = True  # with tensor parallelism (Megatron's recommendation)
    # paper: the ZeRO paper's model states (K = 12 bytes per parameter for mixed-precision
    # Adam); deepspeed: DeepSpeed's own estimator, which also counts a float32 copy of the
    # gradients and, before stage 3, room for every 16-bit gradient.
    accounting: str = "paper"

    @property
    def data(self) -> int:
        return self.gpus // (self.tensor * self.pipeline)


# Checks ------------------------------------------------------------------------------------

def _choice(name: str, value: object, choices) -> None:
    if value not in choices:
        raise CalculatorError("unknown_choice", name=name, value=str(value)[:30],
                              choices=", ".join(str(c) for c in choices))


def _whole(name: str, value: object, high: int, low: int = 1) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise CalculatorError("bad_size", name=name, value=str(value)[:30], high=high)


def check_setup(setup: TrainingSetup) -> None:
    _choice("method", setup.method, METHODS)
    _choice("precision", setup.precision, PRECISIONS)
    _choice("optimizer", setup.optimizer, OPTIMIZERS)
    _choice("checkpointing", setup.checkpointing, CHECKPOINTING)
    _choice("attention", setup.attention, ATTENTION)
    _choice("optimizer implementation", setup.optimizer_impl, OPTIMIZER_IMPLS)
    _choice("device", setup.device, DEVICES)
    _choice("adapter dtype", setup.adapter_dtype, ADAPTER_DTYPES)
    _choice("loss", setup.loss, LOSSES)
    limits.check("micro_batch", setup.micro_batch)
    limits.check("sequence", setup.sequence)
    limits.check("gradient_accumulation", setup.gradient_accumulation)
    _whole("LoRA rank", setup.lora_rank, MAX_RANK)


def check_layout(layout: Layout, spec: ArchSpec) -> None:
    limits.check("gpus", layout.gpus)
    limits.check("tensor", layout.tensor)
    limits.check("pipeline", layout.pipeline)
    _choice("ZeRO stage", layout.zero, ZERO_STAGES)
    _choice("accounting", layout.accounting, ACCOUNTINGS)
    if layout.gpus % (layout.tensor * layout.pipeline):
        raise CalculatorError("bad_layout", gpus=layout.gpus, tensor=layout.tensor, pipeline=layout.pipeline)
    if layout.tensor > 1 and spec.heads % layout.tensor:
        raise CalculatorError("tensor_heads", tensor=layout.tensor, heads=spec.heads)
    if layout.pipeline > _layer_count(spec):
        raise CalculatorError("pipeline_layers", pipeline=layout.pipeline, layers=_layer_count(spec))
    if layout.offload_optimizer and layout.zero == 0:
        raise CalculatorError("offload_needs_zero")
    if layout.offload_parameters and (layout.zero != 3 or not layout.offload_optimizer):
        raise CalculatorError("param_offload_needs_zero3")


def _layer_count(spec: ArchSpec) -> int:
    return max(1, spec.layers + spec.encoder_layers)


def adapters_in_float32(setup: TrainingSetup) -> bool:
    """LoRA or QLoRA adapters that peft created in float32 on a model with 16-bit weights."""
    return (setup.method != "full" and setup.adapter_dtype == "float32"
            and (PRECISION_BYTES[setup.precision].weight == 2 or setup.method == "qlora"))


def float32_residual(setup: TrainingSetup) -> bool:
    """The residual stream runs in float32 while the products run in 16 bits: float32 weights
    under autocast (amp), or QLoRA's float32 embeddings and norms after prepare_model_for_kbit_training."""
    return setup.precision == "amp" or (setup.method == "qlora" and setup.kbit_prepare)
