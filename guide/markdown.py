"""Chapter markdown -> blocks (headings with fixed anchors, text, widget slots). Pure Python.

Syntax, on top of plain markdown:
- `## Visible title {#anchor}`: a section heading; the id is explicit and English.
- `[[widget:name]]` on its own line: the embedded calculator `name` renders there.
- `[[chapters]]` on its own line: the list of chapters, from the registry.
- Links to other chapters are written `(slug#anchor)` or `(slug)`; they gain the reader's
  language when rendered (`slug?lang=fr#anchor`), so readers stay in their language.
"""

from __future__ import annotations

from dataclasses import dataclass
import re
from urllib.parse import urlencode

_HEADING = re.compile(r"^(?P<hashes>#{1,4})\s+(?P<text>.+?)\s*\{#(?P<anchor>[a-z0-9][a-z0-9-]*)\}\s*$")
_MARKER = re.compile(r"^\[\[(?P<kind>widget|chapters)(?::(?P<name>[a-z0-9-]+))?\]\]\s*$")
_FENCE = re.compile(r"^(```|~~~)")
ANCHOR = re.compile(r"^[a-z0-9][a-z0-9-]*$")


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    anchor: str


@dataclass(frozen=True)
class Text:
    markdown: str


@dataclass(frozen=True)
class WidgetSlot:
    name: str


@dataclass(frozen=True)
class ChapterList:
    pass


Block = Heading | Text | WidgetSlot | ChapterList


def parse(source: str) -> list[Block]:
    """Split a chapter into blocks. Headings without an explicit {#id} are refused: every
    section has to be linkable the same way in every language."""
    blocks: list[Block] = []
    lines: list[str] = []
    in_fence = False

    def flush() -> None:
        text = "\n".join(lines).strip("\n")
        if text.strip():
            blocks.append(Text(text))
        lines.clear()

    for number, line in enumerate(source.splitlines(), start=1):
        if _FENCE.match(line.strip()):
            in_fence = not in_fence
        if in_fence or _FENCE.match(line.strip()):
            lines.append(line)
            continue
        heading = _HEADING.match(line)
        marker = _MARKER.match(line.strip())
        if heading:
            flush()
            blocks.append(Heading(len(heading["hashes"]), heading["text"], heading["anchor"]))
        elif marker:
            flush()
            blocks.append(WidgetSlot(marker["name"]) if marker["kind"] == "widget" else ChapterList())
        elif re.match(r"^#{1,4}\s", line):
            raise ValueError(f"line {number}: heading without an explicit id {{#...}}: {line!r}")
        else:
            lines.append(line)
    flush()
    return blocks


def anchors(blocks: list[Block]) -> list[str]:
    return [b.anchor for b in blocks if isinstance(b, Heading)]


def widget_names(blocks: list[Block]) -> list[str]:
    return [b.name for b in blocks if isinstance(b, WidgetSlot)]


_LINK = re.compile(r"\]\((?P<slug>[a-z0-9-]*)(?P<anchor>#[a-z0-9-]+)?\)")


def localize_links(markdown: str, lang: str, slugs: set[str], carried: dict[str, str] | None = None) -> str:
    """Point links to chapters at the same language: (oom#batch-size) -> (oom?lang=fr#batch-size),
    with whatever else the reader carries from page to page (the case: model, gpu...).
    `(home)` is the home page. Links that are not chapter slugs are left alone, and so are
    links inside the same page, `(#anchor)`, which the browser scrolls to by itself."""
    if "](" not in markdown:  # most UI strings have no link: ~600 a page run
        return markdown
    query = urlencode({**(carried or {}), "lang": lang}, safe="/")

    def rewrite(match: re.Match) -> str:
        slug, anchor = match["slug"], match["anchor"] or ""
        if slug == "home":
            return f"](./?{query}{anchor})"
        if not slug or slug not in slugs:
            return match.group(0)
        return f"]({slug}?{query}{anchor})"

    return _LINK.sub(rewrite, markdown)
