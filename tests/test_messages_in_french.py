"""A refusal whose cause a library or the system wrote in English (json, the OS, the Hub's
client, a build worker, argparse) reads whole in the reader's language: the causes people meet
are sentences of ours (content/ui/*/reasons.toml), their position, status or exit code kept as
data. Real inputs: broken JSON files, the fake Hub answering 401/403/404/429/
500, a refused connection, a build worker killed, argparse refusing a command line."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys

import pytest

from calculator.core.errors import CalculatorError
from calculator.core.messages import text
from calculator.core.reasons import exit_reason, os_reason
from calculator.models.configs import parse_config_text, read_config_file
from tests.cli_runner import run_cli

# English a French message must not hold: the words of json, the OS, httpx, argparse, ours before.
ENGLISH = ("Expecting", "delimiter", "Unterminated", "Extra data", "Invalid", "Permission denied",
           "File name too long", "ConnectError", "exit code", "it stopped", "unrecognized arguments",
           "the following arguments", "invalid choice", "invalid int value", "HF_HUB_OFFLINE)", " is not ")


def french_is_whole(message: str) -> None:
    assert not [word for word in ENGLISH if word in message], message


def plain(message: str) -> str:
    """A message without the no-break spaces French typography adds when the guide's is
    registered (another test file imports it): compared as typed."""
    return message.replace("\u202f", " ").replace("\u00a0", " ")


def reason_text(key: str, lang: str, **params) -> str:
    return plain(text(f"reason.{key}", lang, **params))


def refusal(call) -> CalculatorError:
    with pytest.raises(CalculatorError) as caught:
        call()
    return caught.value


def one_line_refusal(lang: str, *argv: str, env: dict | None = None) -> str:
    """A command's refusal: exit 2, nothing on stdout, one line on stderr in `lang`."""
    out = run_cli(*argv, "--lang", lang, env=env)
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("erreur :" if lang == "fr" else "error:"), out.stderr
    if lang == "fr":
        french_is_whole(lines[0])
    return plain(lines[0])


# --- JSON: the cause, the line and the column (found by hand in each text) ----------------------

BROKEN_JSON = [  # text, the cause, line, column of the first character json could not take
    ('{\n  "a": 1\n  "b": 2\n}', "json_comma_missing", 3, 3),  # the quote opening "b"
    ('{\n  "a": 1,\n}', "json_key_not_quoted", 3, 1),  # the brace after the comma
    ('{"a" 1}', "json_colon_missing", 1, 6),  # the 1
    ('{"a": tru}', "json_value_missing", 1, 7),  # the t
    ('{"a": "x', "json_string_not_closed", 1, 7),  # the opening quote
    ("{} x", "json_extra_data", 1, 4),  # the x
    ('{"a": "\\q"}', "json_bad_escape", 1, 8),  # the backslash
    ('{"a": "\tb"}', "json_control_character", 1, 8),  # the tab
]


@pytest.mark.parametrize("lang, where", [("en", "line {line}, column {column}"), ("fr", "ligne {line}, colonne {column}")])
@pytest.mark.parametrize("raw, cause, line, column", BROKEN_JSON, ids=[case[1] for case in BROKEN_JSON])
def test_broken_json_says_what_is_wrong_and_where(raw, cause, line, column, lang, where):
    error = refusal(lambda: parse_config_text(raw.encode()))
    assert error.code == "config_not_json"
    message = plain(error.message(lang))
    assert reason_text(cause, lang) in message and where.format(line=line, column=column) in message
    if lang == "fr":
        french_is_whole(message)


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_the_cli_says_it_on_one_line(tmp_path, lang):
    path = tmp_path / "config.json"
    path.write_text(BROKEN_JSON[0][0])
    line = one_line_refusal(lang, "estimate", str(path))
    assert reason_text("json_comma_missing", lang) in line and str(path) in line


@pytest.mark.parametrize("raw, en, fr", [(b"[1, 2]", "an array", "un tableau"), (b'"config"', "a string", "une chaîne"),
                                         (b"3", "a number", "un nombre"), (b"null", "null", "null")])
def test_a_document_that_is_no_object_is_named_as_json_names_it(raw, en, fr):
    error = refusal(lambda: parse_config_text(raw))
    assert error.code == "config_not_object"
    assert f"holds {en} in JSON" in plain(error.message("en")) and f"contient {fr} en JSON" in plain(error.message("fr"))


def test_json_words_nobody_mapped_are_labelled_as_json_s_in_english():
    from calculator.core.reasons import json_reason

    class Unknown(ValueError):
        msg = "Something new"

    french = plain(json_reason(Unknown()).shown("fr"))
    assert french == "message du module json, en anglais : « Something new »"


# --- files the system cannot read ---------------------------------------------------------------

def test_a_path_too_long_is_unreadable_not_a_crash():
    error = refusal(lambda: read_config_file("a" * 5000))
    assert error.code == "config_unreadable"
    assert reason_text("os_name_too_long", "fr") in plain(error.message("fr"))
    assert len(error.params["path"]) <= 201  # the path shown is cut, not echoed whole


def test_real_os_errors_become_our_causes(tmp_path):
    with pytest.raises(OSError) as folder:
        open(tmp_path, "rb")
    assert os_reason(folder.value).key == "os_is_directory"
    with pytest.raises(OSError) as missing:
        open(tmp_path / "gone", "rb")
    assert os_reason(missing.value).key == "os_not_found"
    assert os_reason(OSError(errno.EACCES, "Permission denied")).key == "os_permission"
    assert plain(os_reason(OSError(errno.EXDEV, "Invalid cross-device link")).shown("fr")) == \
        "message du système, en anglais : « Invalid cross-device link »"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_a_file_this_account_may_not_read(tmp_path):
    path = tmp_path / "config.json"
    path.write_text("{}")
    path.chmod(0)
    error = refusal(lambda: read_config_file(path))
    assert error.code == "config_unreadable" and reason_text("os_permission", "fr") in plain(error.message("fr"))


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_read_names_a_folder_as_a_folder(tmp_path, lang):
    line = one_line_refusal(lang, "read", str(tmp_path))
    assert reason_text("os_is_directory", lang) in line


# --- the Hub ------------------------------------------------------------------------------------

def _server_error(status: int):
    def setup(hub):
        hub.add("org/model", {"README.md": "hello"})
        hub.hostile["org/model/config.json"] = {"status": status}
    return setup


HUB_ANSWERS = [  # what the fake Hub does, our error, the cause inside it
    (lambda hub: None, "hub_not_found", None),  # 401 RepoNotFound
    (lambda hub: hub.add("org/model", {"README.md": "hello"}), "hub_no_config", None),  # 404 EntryNotFound
    (lambda hub: (hub.add("org/model", {"config.json": "{}"}), hub.gated.add("org/model")), "hub_gated", None),
    (_server_error(403), "hub_forbidden", None),
    (_server_error(500), "hub_unreachable", ("http_server_error", {"status": 500})),
    (_server_error(429), "hub_unreachable", ("http_rate_limited", {"status": 429})),
]


@pytest.mark.parametrize("setup, code, cause", HUB_ANSWERS, ids=["401", "404", "gated", "403", "500", "429"])
def test_the_hub_s_answers_in_both_languages(hub, setup, code, cause):
    from calculator.models.hub import fetch_config

    setup(hub)
    error = refusal(lambda: fetch_config("org/model"))
    assert error.code == code
    for lang in ("en", "fr"):
        if cause:
            assert reason_text(cause[0], lang, **cause[1]) in plain(error.message(lang))
    french_is_whole(error.message("fr"))


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_the_cli_gives_the_hub_s_answer_on_one_line(hub, lang):
    _server_error(500)(hub)
    line = one_line_refusal(lang, "estimate", "org/model")
    assert reason_text("http_server_error", lang, status=500) in line


@pytest.mark.parametrize("env, cause", [
    ({"HF_ENDPOINT": "http://127.0.0.1:9"}, "net_refused"),  # nothing listens on the discard port
    ({"HF_HUB_OFFLINE": "1"}, "offline_mode"),
])
@pytest.mark.parametrize("lang", ["en", "fr"])
def test_no_hub_at_all(tmp_path, env, cause, lang):
    from calculator.models.seam import clear_caches

    clear_caches()
    line = one_line_refusal(lang, "estimate", "org/not-cached", env={**env, "HF_HOME": str(tmp_path)})
    assert reason_text(cause, lang) in line


# --- a build worker that died -------------------------------------------------------------------

def test_a_killed_worker_is_said_in_both_languages():
    from calculator.models import builder, catalog
    from calculator.models.seam import clear_caches, resolve_config

    clear_caches()
    pool = builder.reset_pool(builder.Limits(workers=1, spare=False))
    try:
        resolve_config(catalog.config("gpt2"), "gpt2.json")
        [worker] = pool.workers()
        worker.process.kill()
        worker.process.wait()
        error = refusal(lambda: resolve_config(catalog.config("t5-small"), "t5.json"))
    finally:
        clear_caches()
        builder.reset_pool()
    assert error.code == "build_worker_failed"
    detail = error.params["detail"]
    assert detail.key in ("worker_pipe_broken", "process_killed")
    assert plain(detail.shown("fr")) in plain(error.message("fr")) and detail.shown("en") in error.message("en")
    french_is_whole(error.message("fr"))


def test_how_a_process_ended_is_told_by_its_signal_or_code():
    killed = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    killed.send_signal(signal.SIGKILL)
    assert plain(exit_reason(killed.wait()).shown("fr")).startswith("il a été arrêté par le signal SIGKILL")
    ended = subprocess.run([sys.executable, "-c", "raise SystemExit(3)"]).returncode
    assert plain(exit_reason(ended).shown("fr")) == "il s'est terminé avec le code de sortie 3"
    assert exit_reason(ended).shown("en") == "it ended with the exit code 3"


# --- argparse -----------------------------------------------------------------------------------

COMMAND_LINES = [  # what a person types, the cause, its data
    (("estimate",), "cli_required", {"args": "MODEL"}),
    (("catalog", "--bogus"), "cli_unrecognized", {"args": "--bogus"}),
    (("estimate", "gpt2", "--model-class", "x"), "cli_invalid_choice",
     {"argument": "--model-class", "value": "'x'", "choices": "'auto', 'base'"}),
    (("serve", "gpt2", "--context", "abc"), "cli_not_whole_number", {"argument": "--context", "value": "'abc'"}),
    (("serve", "gpt2", "--gpu"), "cli_expected_one", {"argument": "--gpu"}),
    (("estimate", "gpt2", "--json=3"), "cli_takes_no_value", {"argument": "--json", "value": "'3'"}),
]


@pytest.mark.parametrize("lang", ["en", "fr"])
@pytest.mark.parametrize("argv, cause, data", COMMAND_LINES, ids=[case[1] for case in COMMAND_LINES])
def test_argparse_refusals_in_our_words(argv, cause, data, lang):
    line = one_line_refusal(lang, *argv)
    assert reason_text(cause, lang, **data) in line


def test_argparse_words_nobody_mapped_are_labelled():
    from calculator.cli.usage import usage_reason

    assert plain(usage_reason("something argparse says one day").shown("fr")) == \
        "message d'argparse, en anglais : « something argparse says one day »"


# --- the page -----------------------------------------------------------------------------------

@pytest.mark.parametrize("lang, where", [("en", "line 3, column 3"), ("fr", "ligne 3, colonne 3")])
def test_the_page_says_the_json_cause_in_the_reader_s_language(lang, where):
    from tests.test_estimator import errors, estimator, no_table, upload

    at = upload(estimator(lang), "config.json", BROKEN_JSON[0][0].encode())
    [shown] = [message.replace("\\", "") for message in errors(at)]
    plain = shown.replace("\u202f", " ").replace("\u00a0", " ")
    assert reason_text("json_comma_missing", lang) in plain and where in plain
    if lang == "fr":
        french_is_whole(shown)
    assert no_table(at)


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_the_page_says_the_hub_s_500_in_the_reader_s_language(hub, lang):
    from tests.test_estimator import errors, estimator, no_table

    _server_error(500)(hub)
    at = estimator(lang, es_hub="org/model")
    [shown] = [message.replace("\\", "").replace("\u202f", " ").replace("\u00a0", " ") for message in errors(at)]
    assert reason_text("http_server_error", lang, status=500).replace("\u202f", " ") in shown
    if lang == "fr":
        french_is_whole(shown)
    assert no_table(at)
