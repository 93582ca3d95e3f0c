"""Ready-to-run Python for the case's workload: the batched loop that reaches the speed the
calculators give (slow-model#batch-size).

- generation: a causal LM's batched generate(), prompts sorted by length, padded on the left;
- forward: a classifier (AutoModelForSequenceClassification) or an embedding model (AutoModel,
  mean pooling) over batches of texts sorted by length (length bucketing: little padding);
- seq2seq: an encoder-decoder's generate() over batches sorted by length;
- speech: Whisper through the speech-recognition pipeline, long audio cut into 30 s chunks,
  `batch_size` chunks per forward;
- vision: an image classifier over batches of images.

As in snippets.py, the code is built from values the calculator chose or checked (catalog ids
or Hub ids the case accepted, whole numbers, dtypes from a fixed list) and every string goes in
through repr(), so nothing a reader typed can change what the code does. Comments are in the
reader's language (content/ui/*/workload_snippet.toml). tests/test_workload_snippets.py runs
each one against the installed transformers, on tiny random models saved to a folder.
"""

from __future__ import annotations

from calculator.core.messages import text
from calculator.memory.workloads import WORKLOADS

SNIPPET_DTYPES = ("float32", "float16", "bfloat16")


def workload_snippet(workload: str, model_id: str, batch: int, dtype: str, lang: str = "en", *, prompt: int = 512,
                     new_tokens: int = 256, classifier: bool = True) -> str:
    """The code for one workload; dtype falls back to bfloat16 for formats the snippet does
    not load (quantized checkpoints need their own loading code)."""
    if workload not in WORKLOADS:
        raise ValueError(f"unknown workload {workload!r}")
    dtype = dtype if dtype in SNIPPET_DTYPES else "bfloat16"
    say = lambda key, **params: text(f"workload_snippet.{key}", lang, **params)  # noqa: E731
    head = [f"# {say('title_' + workload)}", "import torch"]
    setup = [
        f"MODEL = {str(model_id)!r}",
        f"BATCH = {int(batch)}",
        'device = "cuda" if torch.cuda.is_available() else "cpu"',
        f"dtype = torch.{dtype} if device == \"cuda\" else torch.float32",
    ]
    body = BODIES[workload](say, int(prompt), int(new_tokens), classifier)
    return "\n".join([*head, *body[0], "", *setup, *body[1]]) + "\n"


def _sorted_batches(say) -> list[str]:
    return [
        "",
        "def batches(items, size):",
        f"    # {say('bucketing')}",
        "    order = sorted(range(len(items)), key=lambda i: len(items[i]))",
        "    for start in range(0, len(order), size):",
        "        yield order[start:start + size]",
    ]


def _generation(say, prompt: int, new_tokens: int, classifier: bool):
    imports = ["from transformers import AutoModelForCausalLM, AutoTokenizer"]
    code = [
        f"PROMPT_TOKENS, NEW_TOKENS = {prompt}, {new_tokens}",
        "",
        f"# {say('left_padding')}",
        'tokenizer = AutoTokenizer.from_pretrained(MODEL, padding_side="left")',
        "if tokenizer.pad_token is None:",
        "    tokenizer.pad_token = tokenizer.eos_token",
        "model = AutoModelForCausalLM.from_pretrained(MODEL, dtype=dtype).to(device).eval()",
        *_sorted_batches(say),
        "",
        "def generate_all(prompts):",
        "    answers = [None] * len(prompts)",
        "    with torch.inference_mode():",
        "        for ids in batches(prompts, BATCH):",
        "            inputs = tokenizer([prompts[i] for i in ids], return_tensors=\"pt\", padding=True, truncation=True,",
        "                               max_length=PROMPT_TOKENS).to(device)",
        "            out = model.generate(**inputs, max_new_tokens=NEW_TOKENS, do_sample=False,",
        "                                 pad_token_id=tokenizer.pad_token_id)",
        "            texts = tokenizer.batch_decode(out[:, inputs[\"input_ids\"].shape[1]:], skip_special_tokens=True)",
        "            for i, answer in zip(ids, texts):",
        "                answers[i] = answer",
        "    return answers",
        "",
        f"print(generate_all([{say('example_prompt')!r}, {say('example_prompt_long')!r}]))",
    ]
    return imports, code


def _forward(say, prompt: int, new_tokens: int, classifier: bool):
    model_class = "AutoModelForSequenceClassification" if classifier else "AutoModel"
    imports = [f"from transformers import {model_class}, AutoTokenizer"]
    if classifier:
        result = [f"            # {say('logits')}",
                  "            rows = out.logits.float().softmax(-1).cpu()"]
    else:
        result = [f"            # {say('mean_pooling')}",
                  "            mask = inputs[\"attention_mask\"].unsqueeze(-1).to(out.last_hidden_state.dtype)",
                  "            rows = ((out.last_hidden_state * mask).sum(1) / mask.sum(1)).float().cpu()"]
    code = [
        f"MAX_TOKENS = {prompt}",
        "",
        "tokenizer = AutoTokenizer.from_pretrained(MODEL)",
        f"model = {model_class}.from_pretrained(MODEL, dtype=dtype).to(device).eval()",
        *_sorted_batches(say),
        "",
        "def run_all(texts):",
        "    results = [None] * len(texts)",
        "    with torch.inference_mode():",
        "        for ids in batches(texts, BATCH):",
        "            inputs = tokenizer([texts[i] for i in ids], return_tensors=\"pt\", padding=True, truncation=True,",
        "                               max_length=MAX_TOKENS).to(device)",
        "            out = model(**inputs)",
        *result,
        "            for i, row in zip(ids, rows):",
        "                results[i] = row",
        "    return results",
        "",
        f"print(run_all([{say('example_prompt')!r}, {say('example_prompt_long')!r}]))",
    ]
    return imports, code


def _seq2seq(say, prompt: int, new_tokens: int, classifier: bool):
    imports = ["from transformers import AutoModelForSeq2SeqLM, AutoTokenizer"]
    code = [
        f"INPUT_TOKENS, NEW_TOKENS = {prompt}, {new_tokens}",
        "",
        "tokenizer = AutoTokenizer.from_pretrained(MODEL)",
        "model = AutoModelForSeq2SeqLM.from_pretrained(MODEL, dtype=dtype).to(device).eval()",
        *_sorted_batches(say),
        "",
        "def answer_all(texts):",
        "    answers = [None] * len(texts)",
        "    with torch.inference_mode():",
        "        for ids in batches(texts, BATCH):",
        "            inputs = tokenizer([texts[i] for i in ids], return_tensors=\"pt\", padding=True, truncation=True,",
        "                               max_length=INPUT_TOKENS).to(device)",
        f"            # {say('encoder_once')}",
        "            out = model.generate(**inputs, max_new_tokens=NEW_TOKENS, do_sample=False)",
        "            for i, answer in zip(ids, tokenizer.batch_decode(out, skip_special_tokens=True)):",
        "                answers[i] = answer",
        "    return answers",
        "",
        f"print(answer_all([{say('example_prompt')!r}, {say('example_prompt_long')!r}]))",
    ]
    return imports, code


def _speech(say, prompt: int, new_tokens: int, classifier: bool):
    imports = ["import numpy as np", "from transformers import AutoModelForSpeechSeq2Seq, AutoProcessor, pipeline"]
    code = [
        f"NEW_TOKENS = {new_tokens}",
        "",
        "model = AutoModelForSpeechSeq2Seq.from_pretrained(MODEL, dtype=dtype).to(device).eval()",
        "processor = AutoProcessor.from_pretrained(MODEL)",
        f"# {say('chunks')}",
        "asr = pipeline(\"automatic-speech-recognition\", model=model, tokenizer=processor.tokenizer,",
        "               feature_extractor=processor.feature_extractor, dtype=dtype, device=device,",
        "               chunk_length_s=30, batch_size=BATCH)",
        "",
        f"# {say('audio_inputs')}",
        "rate = processor.feature_extractor.sampling_rate",
        "audio = [np.zeros(rate * 45, dtype=np.float32), np.zeros(rate * 10, dtype=np.float32)]",
        "results = asr(audio, generate_kwargs={\"max_new_tokens\": NEW_TOKENS})",
        "print([r[\"text\"] for r in results])",
    ]
    return imports, code


def _vision(say, prompt: int, new_tokens: int, classifier: bool):
    imports = ["import numpy as np", "from transformers import AutoImageProcessor, AutoModelForImageClassification"]
    code = [
        "",
        "processor = AutoImageProcessor.from_pretrained(MODEL)",
        "model = AutoModelForImageClassification.from_pretrained(MODEL, dtype=dtype).to(device).eval()",
        "",
        "def classify_all(images):",
        f"    # {say('images')}",
        "    labels = []",
        "    with torch.inference_mode():",
        "        for start in range(0, len(images), BATCH):",
        "            inputs = processor(images=images[start:start + BATCH], return_tensors=\"pt\").to(device)",
        "            logits = model(pixel_values=inputs[\"pixel_values\"].to(dtype)).logits",
        "            labels += [model.config.id2label[int(i)] for i in logits.argmax(-1)]",
        "    return labels",
        "",
        "print(classify_all([np.zeros((224, 224, 3), dtype=np.uint8)] * 3))",
    ]
    return imports, code


BODIES = {"generation": _generation, "forward": _forward, "seq2seq": _seq2seq, "speech": _speech,
          "vision": _vision}
