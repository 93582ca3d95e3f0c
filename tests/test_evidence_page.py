"""The evidence box on its pages (AppTest): a log read and set beside the page's case in the
reader's language, and a paste it cannot read refused with a notice in that language."""

from __future__ import annotations

from calculator.core.gpus import gpu
from calculator.models.seam import resolve
from calculator.serving.plan import serve
from tests.apptest import open_page


def _page_text(at) -> str:
    return "\n".join([m.value for m in at.markdown] + [i.value for i in at.info] + [e.value for e in at.error])


def test_a_log_at_the_serving_cases_defaults_reads_as_defaults_in_both_languages():
    case_tokens = serve(resolve("llama-3.1-8b"), gpu("h100"), layouts=False).replica.kv_tokens
    log = f"INFO [kv_cache_utils.py:1733] GPU KV cache size: {case_tokens:,} tokens"
    english = open_page("serving", "en", model="llama-3.1-8b", gpu="NVIDIA H100 SXM", ev_text=log)
    assert not english.exception
    assert f"Your log shows {case_tokens:,} tokens" in _page_text(english)
    # current vLLM's default share (0.92; 0.9 before its CUDA graphs counted in it)
    assert "your settings are the defaults (`gpu_memory_utilization` 0.92)" in _page_text(english)
    french = open_page("serving", "fr", model="llama-3.1-8b", gpu="NVIDIA H100 SXM", ev_text=log)
    assert not french.exception
    grouped = f"{case_tokens:,}".replace(",", "\u202f")
    assert f"Votre journal indique {grouped}\u202ftokens" in _page_text(french) or \
        f"Votre journal indique {grouped} tokens" in _page_text(french)
    assert "vos réglages sont ceux par défaut" in _page_text(french)


def test_an_unreadable_paste_gets_a_french_notice():
    at = open_page("oom", "fr", ev_text="bonjour, mon modèle est lent")
    assert not at.exception
    assert any("n'est rien de ce que le lecteur connaît" in e.value or "n’est rien" in e.value for e in at.error)


def test_the_page_reading_has_an_answer_to_paste_that_the_cli_gives_again(tmp_path):
    """The evidence box's "Copy as answer": its command, run on the same text, gives the same
    answer (its link aside: the page links to the section the reader is on)."""
    import re
    import shlex

    from tests.cli_runner import run_cli

    log = "INFO [kv_cache_utils.py:1733] GPU KV cache size: 443,328 tokens"
    for lang in ("en", "fr"):
        at = open_page("serving", lang, model="llama-3.1-8b", gpu="h100", ev_text=log)
        assert not at.exception
        answer = next(block.value for block in at.code if block.language == "markdown" and " read " in block.value)
        command = re.findall(r"```bash\n(.*?)\n```", answer, re.S)[-1]
        assert command == "python -m calculator read pasted.txt --model llama-3.1-8b --gpu h100"
        assert f"lang={lang}" in answer and "#engine-settings" in answer
        saved = tmp_path / "pasted.txt"  # the reader saves the text they pasted
        saved.write_text(log)
        argv = [str(saved) if word == "pasted.txt" else word for word in shlex.split(command)[3:]]
        again = run_cli(*argv, "--markdown", "--lang", lang)
        cli_answer = again.stdout.replace(str(saved), "pasted.txt")
        assert re.sub(r"https?://\S+", "LINK", cli_answer).strip() == re.sub(r"https?://\S+", "LINK", answer).strip()
