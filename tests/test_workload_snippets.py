"""The code a page gives for each workload runs against the installed transformers: each
snippet is executed as printed, its MODEL pointed at a tiny random model (and its tokenizer,
feature extractor or image processor) saved to a folder, on the CPU, with no download."""

from __future__ import annotations

import ast

import pytest
import torch
import transformers
from tokenizers import Tokenizer, models, pre_tokenizers

from calculator.memory.workload_snippets import workload_snippet

SPECIAL = ["[PAD]", "[UNK]", "</s>", "<|startoftranscript|>", "<|notimestamps|>"]
VOCAB = 64


def word_tokenizer(cls=transformers.PreTrainedTokenizerFast, **special):
    """A fast tokenizer over 64 words (whitespace split), saved like any Hub tokenizer."""
    words = SPECIAL + [f"w{i}" for i in range(VOCAB - len(SPECIAL))]
    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    return cls(tokenizer_object=tokenizer, unk_token="[UNK]", **special)


def save_generation(folder):
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=1, eos_token_id=2, pad_token_id=0)
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    word_tokenizer(pad_token="[PAD]", eos_token="</s>").save_pretrained(folder)


def save_forward(folder, classifier=True):
    config = transformers.BertConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                     num_attention_heads=2, num_labels=3)
    model = transformers.BertForSequenceClassification(config) if classifier else transformers.BertModel(config)
    model.save_pretrained(folder)
    word_tokenizer(pad_token="[PAD]").save_pretrained(folder)


def save_seq2seq(folder):
    config = transformers.T5Config(vocab_size=VOCAB, d_model=32, d_ff=64, d_kv=16, num_layers=1, num_heads=2,
                                   decoder_start_token_id=0, pad_token_id=0, eos_token_id=2)
    transformers.T5ForConditionalGeneration(config).save_pretrained(folder)
    word_tokenizer(pad_token="[PAD]", eos_token="</s>").save_pretrained(folder)


def save_speech(folder):
    config = transformers.WhisperConfig(vocab_size=VOCAB, d_model=32, encoder_layers=1, decoder_layers=1,
                                        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                                        decoder_ffn_dim=64, decoder_start_token_id=3, eos_token_id=2, pad_token_id=2,
                                        bos_token_id=2, begin_suppress_tokens=None, suppress_tokens=None)
    model = transformers.WhisperForConditionalGeneration(config)
    model.generation_config.no_timestamps_token_id = 4
    model.save_pretrained(folder)
    tokenizer = word_tokenizer(transformers.WhisperTokenizerFast, bos_token="</s>", eos_token="</s>", pad_token="</s>")
    transformers.WhisperProcessor(transformers.WhisperFeatureExtractor(feature_size=80), tokenizer).save_pretrained(folder)


def save_vision(folder):
    config = transformers.ViTConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                                    image_size=224, patch_size=32, num_labels=4)
    transformers.ViTForImageClassification(config).save_pretrained(folder)
    transformers.ViTImageProcessor(size={"height": 224, "width": 224}).save_pretrained(folder)


SAVERS = {"generation": save_generation, "forward": save_forward, "seq2seq": save_seq2seq, "speech": save_speech,
          "vision": save_vision}


def run_snippet(code: str, folder, capsys) -> str:
    """Execute the snippet as printed, its MODEL pointed at the folder; return what it prints."""
    assert "MODEL = 'some-org/some-model'" in code
    code = code.replace("MODEL = 'some-org/some-model'", f"MODEL = {str(folder)!r}")
    torch.manual_seed(0)
    exec(compile(code, "snippet", "exec"), {"__name__": "snippet"})
    return capsys.readouterr().out


@pytest.mark.parametrize("workload", list(SAVERS))
def test_each_workload_snippet_runs_on_a_tiny_model(workload, tmp_path, capsys):
    SAVERS[workload](tmp_path)
    code = workload_snippet(workload, "some-org/some-model", 2, "bfloat16", "en", prompt=16, new_tokens=3)
    printed = run_snippet(code, tmp_path, capsys)
    result = ast.literal_eval(printed.strip().splitlines()[-1]) if workload != "forward" else printed
    if workload in ("generation", "seq2seq", "speech"):
        assert isinstance(result, list) and len(result) == 2 and all(isinstance(r, str) for r in result)
    elif workload == "vision":
        assert result == ["LABEL_" + result[0].split("_")[1]] * 3
    else:
        assert printed.count("tensor(") == 2  # one row of class probabilities per text


def test_the_embedding_snippet_pools_over_real_tokens(tmp_path, capsys):
    save_forward(tmp_path, classifier=False)
    code = workload_snippet("forward", "some-org/some-model", 4, "float32", "fr", prompt=16, classifier=False)
    assert "AutoModel," in code and "mask.sum(1)" in code
    printed = run_snippet(code, tmp_path, capsys)
    assert printed.count("tensor(") == 2


def test_the_snippet_carries_the_case_and_nothing_a_reader_typed_runs():
    code = workload_snippet("speech", "openai/whisper-small", 16, "float16", "fr", new_tokens=128)
    assert "BATCH = 16" in code and "chunk_length_s=30, batch_size=BATCH" in code and "NEW_TOKENS = 128" in code
    assert "Transcrire" in code
    hostile = "x'); import os; os.system('echo pwned'); ('"
    code = workload_snippet("generation", hostile, 1, "float16", "en")
    tree = ast.parse(code)
    strings = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)]
    assert hostile in strings  # a plain string, never code
    assert not any(isinstance(node, ast.Attribute) and node.attr == "system" for node in ast.walk(tree))
    with pytest.raises(ValueError):
        workload_snippet("dictation", "gpt2", 1, "float16")
