"""How llama.cpp holds a model in one GGUF type for one context: the bytes of each slot
(layers, KV cache, embeddings, output, compute buffers). Its own module so that the dense
placement (llama_cpp.py) and the experts' placement (llama_cpp_moe.py) both read it without
importing each other."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class GgufLayout:
    """The model as llama.cpp holds it in one GGUF type for one context: bytes per slot."""

    type: str
    head_type: str
    cache_type: str
    context: int  # as asked (-c)
    cells: int  # KV cells of a full-attention layer: -c padded to 256
    layer_bytes: tuple[int, ...]  # weights of each repeating layer, in order
    kv_bytes: tuple[int, ...]  # K and V of each layer for the context
    input_bytes: int  # token embeddings: always in CPU memory
    output_bytes: int  # the output matrix (or its copy of tied embeddings) and the final norm
    logits_buffer_bytes: int  # the compute buffer where the output layer runs
    layers_buffer_bytes: int  # the compute buffer of the layers' own work
    tied_copy_bytes: int = 0  # the output slot's copy of tied embeddings (not in the file)
    layer_read_bytes: tuple[int, ...] = ()  # what one token reads of each layer (MoE: its experts only)
    expert_bytes: tuple[int, ...] = ()  # the routed experts' tensors (ffn_*_exps) of each layer (MoE)
    expert_read_bytes: tuple[int, ...] = ()  # what one token reads of them (experts_per_token of experts)

    @property
    def layers(self) -> int:
        return len(self.layer_bytes)

    @property
    def file_bytes(self) -> int:
        """The weights as the GGUF file stores them (a tied output matrix is stored once)."""
        return self.input_bytes + sum(self.layer_bytes) + self.output_bytes - self.tied_copy_bytes

    def to_json(self) -> dict:
        data = asdict(self)
        data.update(layer_bytes=list(self.layer_bytes), kv_bytes=list(self.kv_bytes), layers=self.layers,
                    layer_read_bytes=list(self.layer_read_bytes), file_bytes=self.file_bytes,
                    expert_bytes=list(self.expert_bytes), expert_read_bytes=list(self.expert_read_bytes))
        return data
