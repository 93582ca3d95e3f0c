"""Every "Copy as answer" block a chapter shows, as a reader pastes it: its reproduce line is a
command the CLI accepts (no `None`, no empty value, every option known), and running it
answers. The chapters open on their own case and on a case that sets the serving engine's
options, in both languages."""

from __future__ import annotations

from functools import cache
import re
import shlex

import pytest

from guide import chapters
from tests.apptest import open_page
from tests.cli_runner import run_cli

CASES = [(chapter.slug, "en", ()) for chapter in chapters.CHAPTERS] + [
    ("serving", "fr", (("svm_engine", "sglang"),)),  # an engine without vLLM's batched tokens
    ("serving", "en", (("users", "64"), ("gpu", "rtx4090"), ("context", "8192"))),
]


@cache
def reproduce_lines(slug: str, lang: str, query: tuple) -> tuple[str, ...]:
    at = open_page(slug, lang, **dict(query))
    assert not at.exception, [e.value for e in at.exception]
    lines = []
    for block in at.code:
        if block.language == "markdown":
            lines += re.findall(r"```bash\n(python -m calculator .*?)\n```", block.value, re.S)
    return tuple(lines)


@pytest.mark.parametrize("slug,lang,query", CASES, ids=lambda v: v if isinstance(v, str) else None)
def test_every_reproduce_line_is_a_command_that_answers(slug, lang, query):
    lines = reproduce_lines(slug, lang, query)
    assert lines, f"/{slug}: no Copy-as-answer block"
    refused = []
    for line in lines:
        argv = shlex.split(line)[3:]
        if "None" in argv or any(not word.strip() for word in argv):
            refused.append(f"{line}: a value left unset")
            continue
        done = run_cli(*argv, "--markdown", "--lang", lang)
        if done.returncode != 0:
            refused.append(f"{line}: {done.stderr.strip()}")
    assert not refused, refused
