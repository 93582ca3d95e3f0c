"""Why the serving calculators refuse a model, in what is true of it: a model that does not
generate gets no KV cache from a serving engine; an encoder-decoder does generate, but keeps
its encoder's output as cross-attention keys and values per request, which the decoder-only
engine model here (blocks, scheduler, KV cache per token) does not price. vLLM serves Whisper
through its transcription API (/v1/audio/transcriptions; docs.vllm.ai, "Speech to Text APIs"),
so Whisper is told where its figures are instead of being told it does not generate."""

from __future__ import annotations


def not_served_code(spec) -> str:
    """The error code for a model the serving calculators do not price."""
    from calculator.memory.workloads import is_speech

    if spec is not None and spec.kind == "encoder-decoder":
        return "serve_speech" if is_speech(spec) else "serve_encoder_decoder"
    return "serve_no_decoder"
