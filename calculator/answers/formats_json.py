"""`quantize --json`, built from the engine's answer for the command and for the quantization
page alike, so the page's "Copy as answer" writes the command's own JSON."""

from __future__ import annotations


def quantize_json(model, card, group_size: int, results, answer=None, batch: int | None = None,
                  prompt: int | None = None, new_tokens: int | None = None, workload: str | None = None) -> dict:
    """Each format's sizes and loaders; with a card (`answer`: verdicts.formats_answer), each
    format's inference peak and verdict, and the formats that fit."""
    from calculator.memory.format_support import support_of
    from calculator.memory.quantization import shipped_format

    peaks = {row["format"]: row for row in answer.figures["formats"]} if answer else {}
    data = {"model": model.name, "parameters": model.summary.parameters, "group_size": group_size,
            "shipped": shipped_format(model.config),
            "gpu": card.key if card else None, "gpu_memory_bytes": card.memory_bytes if card else None,
            "rows": [{**r.to_json(), **_loaders(support_of(r.format)),
                      **(_verdict_json(peaks[r.format]) if answer else {})} for r in results]}
    if answer:
        data.update(batch=batch, prompt=prompt, new_tokens=new_tokens, workload=workload,
                    usable_bytes=answer.figures["usable_bytes"],
                    headroom_bytes=answer.figures["headroom_bytes"], verdict=answer.verdict,
                    fitting=answer.figures["fitting"], assumptions=[a.to_json() for a in answer.assumptions])
    return data


def _verdict_json(row: dict) -> dict:
    return {"peak_bytes": row["peak_bytes"], "reserved_bytes": row["reserved_bytes"], "verdict": row["verdict"],
            "fits": row["verdict"] == "fits"}


def _loaders(support) -> dict:
    return {"transformers": support.transformers or None, "transformers_native": support.native,
            "engines": list(support.engines)}
