"""`estimate --json`, built once for the command and for the pages that answer "does it
load?" (the estimator, the home page's quick check), so their "Copy as answer" writes the
command's own figures and, with a card, its verdict."""

from __future__ import annotations


def estimate_json(model, dtypes, card=None) -> dict:
    """Each precision's sizes and readings; with a card, each one's verdict (estimate.fit_verdict)
    and the card's usable memory."""
    from calculator.core.budget import Budget
    from calculator.memory.estimate import estimate_model, fit_verdict, load_readings, weight_rounding
    from calculator.answers.verdicts import readings_json

    result = estimate_model(model, tuple(dtypes))
    budget = Budget(card) if card is not None else None
    data = result.to_json()
    for row, estimated in zip(data["rows"], result.rows):
        row.update(readings_json(load_readings(result.summary, estimated.dtype, budget, model.spec)))
        if budget is not None:
            verdict = fit_verdict(estimated.total_bytes, estimated.rule_of_thumb_bytes, budget,
                                  weight_rounding(result.summary, estimated.dtype, model.spec))
            row.update(verdict=verdict, fits=verdict == "fits")
    if card is not None:
        data.update(gpu=card.key, usable_bytes=budget.usable_bytes, headroom_bytes=budget.headroom_bytes)
    return data
