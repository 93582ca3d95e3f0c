"""What the model is asked to do: the workload, and the lengths each one runs over.

Five workloads (DESIGN.md, "The case"):
- generation: a decoder reads a prompt and writes new tokens one by one (tokens per second);
- forward: one pass over whole sequences, no cache (classification, embeddings, scoring):
  items per second;
- seq2seq: an encoder reads the input, a decoder writes the answer from its start token,
  attending to the encoder's output through cross-attention (T5, BART);
- speech: Whisper, an encoder-decoder whose encoder always reads one 30 s window of audio
  (1,500 frames after its strided convolution) and whose decoder starts from its task tokens;
  audio hours per hour;
- vision: an image encoder over its patches (images per second).

`shape` turns a case's lengths into what inference_memory and the speed model take, so the
CLI and every widget size the same run. Pure functions; nothing here imports torch.
"""

from __future__ import annotations

from dataclasses import dataclass

from calculator.models.architecture import ArchSpec
from calculator.core.errors import CalculatorError

WORKLOADS = ("generation", "forward", "seq2seq", "speech", "vision")
SPEECH_MODEL_TYPES = ("whisper",)
SPEECH_WINDOW_SECONDS = 30  # Whisper's feature extractor pads or cuts every input to 30 s
# <|startoftranscript|> <|en|> <|transcribe|> <|notimestamps|>: the decoder prompt Whisper's
# generate() builds before the first text token (decoder_start_token_id and forced ids).
SPEECH_START_TOKENS = 4
SEQ2SEQ_START_TOKENS = 1  # decoder_start_token_id


def is_speech(spec: ArchSpec) -> bool:
    return spec.kind == "encoder-decoder" and spec.model_type in SPEECH_MODEL_TYPES


def can_generate(spec: ArchSpec) -> bool:
    """A decoder or an encoder-decoder produces tokens, unless its class is a classifier."""
    return spec.has_kv_cache and spec.head != "classifier"


def workloads_for(spec: ArchSpec) -> tuple[str, ...]:
    """What this model can run: a forward pass always; generation for a decoder with an LM
    head; seq2seq or speech for an encoder-decoder; vision for an image encoder."""
    if spec.kind == "vision":
        return ("vision",)
    if spec.kind == "encoder-decoder":
        return ("speech",) if is_speech(spec) else ("seq2seq",)
    return ("generation", "forward") if can_generate(spec) else ("forward",)


def default_workload(spec: ArchSpec) -> str:
    """The workload a model's architecture implies: the first it can run."""
    return workloads_for(spec)[0]


def workload_for(spec: ArchSpec, asked: str | None) -> str:
    """The asked workload when the model runs it, else the model's own (a case set for a
    decoder keeps working when the reader picks an encoder)."""
    return asked if asked in workloads_for(spec) else default_workload(spec)


def check_workload(spec: ArchSpec, asked: str) -> str:
    """The CLI's check: an unknown or impossible workload is refused with what the model runs."""
    if asked not in WORKLOADS:
        raise CalculatorError("unknown_choice", name="workload", value=str(asked)[:30], choices=", ".join(WORKLOADS))
    if asked not in workloads_for(spec):
        raise CalculatorError("workload_not_for_model", workload=asked, model_type=spec.model_type or spec.kind,
                              choices=", ".join(workloads_for(spec)))
    return asked


@dataclass(frozen=True)
class Shape:
    """The lengths one item of a workload runs over."""

    workload: str
    mode: str  # inference_memory's mode: generate or forward
    prompt: int  # the decoder's prompt (generation, seq2seq, speech) or the sequence (forward, vision)
    new_tokens: int
    encoder_tokens: int | None = None  # seq2seq and speech: the encoder's input

    @property
    def memory_lengths(self) -> dict:
        """inference_memory's keyword arguments for these lengths."""
        if self.mode == "forward":
            return {"context": self.prompt, "mode": "forward"}
        lengths = {"prompt": self.prompt, "new_tokens": self.new_tokens, "mode": "generate"}
        if self.encoder_tokens is not None:
            lengths["encoder_tokens"] = self.encoder_tokens
        return lengths

    @property
    def generates(self) -> bool:
        return self.mode == "generate"


def shape(spec: ArchSpec, workload: str, *, prompt: int = 1024, new_tokens: int = 256, sequence: int = 512,
          encoder: int | None = None) -> Shape:
    """The run a case describes. forward: `sequence` tokens; generation: `prompt` then
    `new_tokens`; seq2seq: an `encoder` input (default: the prompt's length) and an answer of
    `new_tokens` from the decoder's start token; speech: the 30 s window's frames and the task
    tokens; vision: the image's patches (or `sequence` when the config does not fix them)."""
    if workload == "generation":
        return Shape(workload, "generate", prompt, new_tokens)
    if workload == "seq2seq":
        return Shape(workload, "generate", SEQ2SEQ_START_TOKENS, new_tokens, encoder or prompt)
    if workload == "speech":
        window = spec.encoder_tokens or 1500
        if encoder not in (None, window):  # Whisper pads or cuts every input to its 30 s window
            raise CalculatorError("speech_window", frames=window, value=str(encoder)[:30])
        return Shape(workload, "generate", SPEECH_START_TOKENS, new_tokens, window)
    if workload == "vision":
        return Shape(workload, "forward", spec.encoder_tokens or sequence, 0)
    return Shape("forward", "forward", sequence, 0)


def audio_hours_per_hour(items_per_second: float) -> float:
    """Hours of audio transcribed per hour of GPU time: each item is one 30 s window."""
    return items_per_second * SPEECH_WINDOW_SECONDS


# What a memory calculator varies: the whole context, the sequence or the encoder's input ----

FIXED_LENGTH = ("speech", "vision")  # Whisper's 30 s window, an image's patches: one length for every item


def varies(work: Shape) -> bool:
    """Whether items of this workload come in different lengths (a sentence, a document) or
    all in one (a 30 s window of audio, an image at the model's size)."""
    return work.workload not in FIXED_LENGTH


def length_of(work: Shape) -> int:
    """The length a memory calculator reads for one item: the encoder's input (seq2seq,
    speech), the patches (vision), the sequence (forward), prompt + answer (generation)."""
    if work.encoder_tokens is not None:
        return work.encoder_tokens
    return work.prompt + work.new_tokens


def lengths_at(work: Shape, length: int) -> dict:
    """inference_memory's lengths for the run `work` with its varying length set to `length`:
    a generation's whole context arriving as a prompt (the worst case of that length), a
    forward pass's sequence, a seq2seq encoder's input (the answer keeps its length); speech
    and vision keep their one length (FIXED_LENGTH)."""
    if not varies(work):
        return dict(work.memory_lengths)
    if work.workload == "seq2seq":
        return {**work.memory_lengths, "encoder_tokens": length}
    if work.workload == "forward":
        return {"context": length, "mode": "forward"}
    return {"context": length}
