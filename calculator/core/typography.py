"""French typography, done once, when French text is rendered. Pure Python (no streamlit): the
guide registers it for every UI message (guide/typography.py), the CLI for its French answers.

The chapters (content/fr/*.md) and the UI messages (content/ui/fr/*.toml) are written with
ordinary spaces; `french()` turns them into what French typesetting asks for:

- a narrow no-break space (U+202F) before ; : ! ? % and », and after «;
- the same space between a number and its unit (16 Go, 600 Go/s, 4 bits, 2 ms, 10 %);
- the same space between groups of thousands (8 192, 1 073 741 824);
- a decimal comma in a number that carries a unit (3.5 Go -> 3,5 Go); other numbers with a
  point are left alone, since they are versions (PyTorch 2.1, Mistral 7B v0.1, PCIe 4.0).

Nothing changes inside fenced code blocks, code spans, link targets, bare URLs or the
delimiter rows of tables. The function is idempotent: applying it twice changes nothing.
"""

from __future__ import annotations

import re


NNBSP = "\u202f"  # espace fine insécable
_SPACE = "[ \u00a0\u202f]"  # a space that may stand between a number and what follows

# Units a number is kept with. Longer spellings first, so "Go/s" wins over "Go".
_UNITS = sorted({
    "o", "octet", "octets", "Ko", "ko", "Mo", "Go", "To", "Po", "Kio", "Mio", "Gio", "Tio", "Pio",
    "kB", "KB", "MB", "GB", "TB", "KiB", "MiB", "GiB", "TiB",
    "Mo/s", "Go/s", "To/s", "MB/s", "GB/s", "TB/s", "Gbit/s", "Gb/s",
    "bit", "bits", "ns", "µs", "ms", "s", "min", "h", "W", "GHz",
    "GFLOP", "TFLOP", "TFLOP/s", "TFLOPS", "TOPS", "Md", "M",
    "milliard", "milliards", "million", "millions",
}, key=len, reverse=True)
_UNIT = "(?:" + "|".join(re.escape(unit) for unit in _UNITS) + ")(?![\\w/])"

_FENCE = re.compile(r"^\s*(```|~~~)")
# Every pattern here runs on text that may quote a reader's values: each is linear in its input
# (no two unbounded repeats over the same characters, a run of spaces matched from its start only).
_TABLE_RULE = re.compile(r"^\s*(?:\|\s*)?:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*(?:\|\s*)?$")
# What is never touched inside a line: code spans, link targets, autolinks and bare URLs.
_PROTECTED = re.compile(
    r"(?P<code>(`+).+?(?<!`)\2(?!`))"
    r"|(?P<target>\]\((?:[^()\s]|\([^()\s]*\))*\))"
    r"|(?P<auto><https?://[^>\s]+>)"
    r"|(?P<url>https?://[^\s<>()\]]+)"
)

_THOUSANDS = re.compile(r"(?<![\d.,])\d{1,3}(?:" + _SPACE + r"\d{3})+(?![\d\w])")
_DECIMAL = re.compile(r"(?<![\w.,])(\d+)\.(\d+)(?=" + _SPACE + r"?(?:" + _UNIT + r"|%))")
_NUMBER_UNIT = re.compile(r"(\d)" + _SPACE + "(" + _UNIT + ")")
_PERCENT = re.compile(r"(\d)" + _SPACE + r"?%")
# Punctuation is punctuation when it ends a word: "?lang=fr" and "a:b" are not touched.
_ENDS = r"(?=\s|$|[*_)\]»”’]|[.,](?!\w))"
_SPACE_BEFORE = re.compile(r"(?<![ \u00a0\u202f])[ \u00a0\u202f]+([;:!?])" + _ENDS)
_SPACE_BEFORE_GUILLEMET = re.compile(r"(?<![ \u00a0])[ \u00a0]+»")
_MISSING_BEFORE = re.compile(r"(?<=[\w)\]*_”’…])([;:!?])" + _ENDS)
_MISSING_BEFORE_GUILLEMET = re.compile(r"(?<=\S)(?<!\u202f)»")
_AFTER_GUILLEMET = re.compile(r"«[ \u00a0\u202f]*")


def _prose(text: str) -> str:
    """The rules, on a piece of prose that holds no code and no URL."""
    text = _THOUSANDS.sub(lambda m: re.sub(_SPACE, NNBSP, m.group(0)), text)
    text = _DECIMAL.sub(r"\1,\2", text)
    text = _NUMBER_UNIT.sub(lambda m: m.group(1) + NNBSP + m.group(2), text)
    text = _PERCENT.sub(lambda m: m.group(1) + NNBSP + "%", text)
    text = _SPACE_BEFORE.sub(lambda m: NNBSP + m.group(1), text)
    text = _SPACE_BEFORE_GUILLEMET.sub(NNBSP + "»", text)
    text = _MISSING_BEFORE.sub(lambda m: NNBSP + m.group(1), text)
    text = _MISSING_BEFORE_GUILLEMET.sub(NNBSP + "»", text)
    return _AFTER_GUILLEMET.sub("«" + NNBSP, text)


def _line(line: str) -> str:
    if _TABLE_RULE.match(line):
        return line
    out, start = [], 0
    for match in _PROTECTED.finditer(line):
        out.append(_prose(line[start:match.start()]))
        out.append(match.group(0))
        start = match.end()
    out.append(_prose(line[start:]))
    return "".join(out)


def french(text: str) -> str:
    """`text` (markdown or plain) with French typography; code and URLs untouched."""
    lines, in_fence = [], False
    for line in text.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
            lines.append(line)
        elif in_fence:
            lines.append(line)
        else:
            lines.append(_line(line))
    return "\n".join(lines)


def for_language(text: str, lang: str) -> str:
    """French typography for French text; any other language as it is."""
    return french(text) if lang == "fr" else text


# Every UI message rendered in French goes through `french` (calculator.core.messages.text, which
# the widgets use too); guide/render.py applies it to the chapters' text and
# guide/chapters.py to their titles. Importing this module is enough: guide.chapters, which
# every page and widget imports, does.
