"""Both languages have the same UI strings, files and placeholders."""

from __future__ import annotations

import re
import string

from calculator.core.messages import CATALOG_DIR, PLURAL, catalog


def test_same_files_in_both_languages():
    assert sorted(p.name for p in (CATALOG_DIR / "en").glob("*.toml")) == \
        sorted(p.name for p in (CATALOG_DIR / "fr").glob("*.toml"))


def test_same_keys_and_placeholders():
    en, fr = catalog("en"), catalog("fr")
    assert en.keys() == fr.keys()
    # a word that agrees with {n} ({n|one|other}) reads the placeholder n; its forms differ by language
    fields = lambda s: sorted({f for _, f, _, _ in string.Formatter().parse(PLURAL.sub(r"{\1}", s)) if f})  # noqa: E731
    for key in en:
        assert fields(en[key]) == fields(fr[key]), key


def test_french_strings_are_not_left_in_english():
    en, fr = catalog("en"), catalog("fr")
    same = [k for k in en if en[k] == fr[k] and re.search(r"[a-z]{4,} [a-z]{4,}", en[k])]
    assert same == [], same


# Links to chapters in UI strings are written as in the chapters, `[words](slug#anchor)`.
CHAPTER_LINK = re.compile(r"\]\(([a-z0-9-]+)(?:#([a-z0-9-]+))?\)")


def test_links_in_ui_strings_point_at_real_sections():
    from guide.chapters import CHAPTERS
    from guide.markdown import anchors, parse

    for lang in ("en", "fr"):
        sections = {c.slug or "home": set(anchors(parse(c.content_path(lang).read_text()))) for c in CHAPTERS}
        for key, value in catalog(lang).items():
            for slug, anchor in CHAPTER_LINK.findall(value):
                assert slug in sections, f"{lang} {key}: no chapter {slug}"
                assert not anchor or anchor in sections[slug], f"{lang} {key}: no section {slug}#{anchor}"


def test_ui_strings_link_to_the_same_sections_in_both_languages():
    en, fr = catalog("en"), catalog("fr")
    assert any(CHAPTER_LINK.search(value) for value in en.values())
    for key in en:
        assert sorted(CHAPTER_LINK.findall(en[key])) == sorted(CHAPTER_LINK.findall(fr[key])), key


def test_links_in_widget_messages_keep_the_readers_language():
    from guide.widgets import Context

    for lang in ("en", "fr"):
        message = Context(lang=lang, slug="slow-model", anchor="batch-size").t(
            "batch_size.none_fits", gpu="T4", weights="30 GiB", capacity="15 GiB")
        assert f"](quantization?lang={lang}#formats)" in message
        assert f"](parallelism?lang={lang}#pipeline-parallelism)" in message
        assert "](quantization#" not in message and "lang=" + ("fr" if lang == "en" else "en") not in message
    # a user's text in a parameter is escaped before it reaches a message, so it never becomes a link
    typed = Context(lang="fr", slug="oom", anchor="oom-message").t("frame.next", title="\\[x\\]\\(oom\\)")
    assert "?lang=" not in typed


def test_every_quantization_format_names_its_source_in_both_languages():
    from calculator.memory.quantization import FORMATS

    for lang in ("en", "fr"):
        strings = catalog(lang)
        for fmt in FORMATS:
            key = "quantization.source.gguf" if fmt.family == "gguf" else f"quantization.source.{fmt.key}"
            assert key in strings, (lang, fmt.key)
