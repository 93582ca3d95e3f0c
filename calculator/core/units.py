"""Sizes and counts written for people, with units that cannot be misread.

GB is 10^9 bytes, GiB is 2^30 bytes (French: Go, Gio). GPU tools such as nvidia-smi count in
binary units, so binary is the default.
"""

from __future__ import annotations

BINARY = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
DECIMAL = ("B", "kB", "MB", "GB", "TB", "PB")
# French writes o (octet) for B.
_FRENCH_UNITS = {"B": "o", "KiB": "Kio", "MiB": "Mio", "GiB": "Gio", "TiB": "Tio", "PiB": "Pio",
                 "kB": "ko", "MB": "Mo", "GB": "Go", "TB": "To", "PB": "Po"}
# The units every module counts in, defined here once.
MIB = 2**20
GIB = 2**30
GB = 10**9


def unit_name(unit: str, lang: str = "en") -> str:
    return _FRENCH_UNITS.get(unit, unit) if lang == "fr" else unit


def format_number(value: float, decimals: int = 2, lang: str = "en") -> str:
    """12,345.67 in English; 12 345,67 in French (narrow no-break space between thousands)."""
    text = f"{value:,.{decimals}f}"
    if lang == "fr":
        text = text.replace(",", "\u202f").replace(".", ",")
    return text


def format_count(value: int, lang: str = "en") -> str:
    return format_number(value, 0, lang)


def format_bytes(size: float | None, lang: str = "en", system: str = "binary", decimals: int = 2) -> str:
    """A byte count in the largest unit that keeps the number at or above 1."""
    if size is None:
        return "—"
    units, step = (BINARY, 1024) if system == "binary" else (DECIMAL, 1000)
    value = float(size)
    index = 0
    while abs(value) >= step and index < len(units) - 1:
        value /= step
        index += 1
    places = 0 if index == 0 else decimals
    return f"{format_number(value, places, lang)} {unit_name(units[index], lang)}"


def format_in(size: float, unit: str, lang: str = "en", decimals: int = 2) -> str:
    """A byte count in a fixed unit ("GiB", "GB", ...), for tables that compare sizes."""
    factor = _FACTORS[unit]
    return f"{format_number(size / factor, decimals, lang)} {unit_name(unit, lang)}"


_FACTORS = {**{u: 1024**i for i, u in enumerate(BINARY)}, **{u: 1000**i for i, u in enumerate(DECIMAL)}}


def format_billions(parameters: int, lang: str = "en", decimals: int = 2) -> str:
    """6.74 billion / 6,74 milliards: how people say model sizes."""
    word = "milliards" if lang == "fr" else "billion"
    return f"{format_number(parameters / 1e9, decimals, lang)} {word}"
