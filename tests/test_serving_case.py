"""The serving chapter's case holds the whole question (users, context, tensor-parallel size),
and every calculator of the page answers that case."""

from __future__ import annotations

import pytest

from calculator.core.gpus import gpu
from calculator.models.seam import catalog_model
from calculator.serving.plan import serve
from guide.case import Case, read_case
from guide.chapters import by_slug
from guide.format import format_bytes, format_count
from tests.apptest import open_page


def test_the_case_reads_users_context_and_tensor():
    case, refused, present = read_case({"users": ["32"], "context": ["4096"], "tensor": ["4"]}, Case())
    assert (case.users, case.context, case.tensor) == (32, 4096, 4) and not refused
    assert set(present) == {"users", "context", "tensor"}
    bad, refused, _ = read_case({"users": ["0"], "context": ["inf"], "tensor": ["17"]}, Case(tensor=2))
    assert {r.param for r in refused} == {"users", "context", "tensor"}
    assert (bad.users, bad.context, bad.tensor) == (Case().users, Case().context, 2)
    assert set(by_slug("serving").case) >= {"users", "context", "tensor"}


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_a_70b_question_gets_one_answer_across_the_page(lang):
    """Llama 3.1 70B, 32 users of 4,096 tokens, tensor parallel 4 on H100s: every calculator
    works on that case, none answers "nothing is left for the KV cache"."""
    at = open_page("serving", lang=lang, model="llama-3.1-70b", gpu="h100", users="32", context="4096", tensor="4")
    assert not at.exception and not at.error
    plan = serve(catalog_model("llama-3.1-70b"), gpu("h100"), context=4096, users=32, tensor=4, layouts=False)
    pool = format_bytes(plan.replica.kv_pool_bytes_per_gpu, lang)
    sequences = format_count(plan.replica.sequences, lang)
    values = [m.value for m in at.metric]
    # serving-memory and engine-settings show the pool; concurrency and engine-settings the sequences
    assert values.count(pool) == 2 and values.count(sequences) == 2, values
    assert plan.replica.sequences >= 32 and plan.verdict == "fits"
    assert any("4 × NVIDIA H100" in s.value or "4 × NVIDIA H100" in s.value.replace("\u202f", " ")
               for s in at.success)
