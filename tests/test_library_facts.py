"""Sentences of the chapters that state how an installed library behaves, checked against
that library's own code (transformers 5.24 here): if an upgrade changes the behaviour, the
test fails and the sentence is rewritten."""

from __future__ import annotations

from pathlib import Path

CONTENT = Path(__file__).resolve().parent.parent / "content"


def _flat(lang: str, chapter: str) -> str:
    return " ".join((CONTENT / lang / f"{chapter}.md").read_text(encoding="utf-8").split())


def test_gguf_loading_keeps_blocks_only_for_the_architectures_the_text_names():
    from transformers.integrations.gguf.gguf_conversion_mapping import GGUF_ARCHS
    from transformers.quantizers.quantizer_gguf import GgufHfQuantizer

    # The packed path covers Qwen3.5 (dense, MoE) and LFM2; every other architecture goes
    # through load_gguf_checkpoint, which dequantizes each tensor.
    assert set(GGUF_ARCHS) == {"qwen35", "qwen35moe", "lfm2"}
    assert GgufHfQuantizer(_config()).supported is False  # until read_header finds one of them
    for lang, names in (("en", ("Qwen3.5 (dense and MoE) and LFM2", "everything is dequantized")),
                        ("fr", ("Qwen3.5 (dense et MoE) et de LFM2", "tout est déquantifié"))):
        text = _flat(lang, "quantization")
        assert all(name in text for name in names), lang


def test_gguf_without_a_kernel_dequantizes_everything():
    from transformers.quantizers.quantizer_gguf import GgufHfQuantizer

    quantizer = GgufHfQuantizer(_config())
    quantizer.supported = True
    quantizer.header = type("Header", (), {"has_quantized_weights": True})()
    import transformers.quantizers.quantizer_gguf as module

    original = module.get_gguf_kernel
    module.get_gguf_kernel = lambda: False  # what it returns when `kernels` finds no ggml kernel
    try:
        quantizer.validate_environment()
    finally:
        module.get_gguf_kernel = original
    assert quantizer.quantization_config.dequantize is True


def _config():
    from transformers.utils.quantization_config import GgufConfig

    return GgufConfig()
