"""Every moment the training engine can name as its peak is said in words in both languages
(a moment without its string would show the raw key on the fine-tuning page)."""

from __future__ import annotations

from pathlib import Path
import re

import pytest

from calculator.core.messages import catalog
from guide.inputs.training import moment_key

PEAK = Path(__file__).resolve().parent.parent / "calculator" / "training" / "peak.py"


def named_moments() -> list[str]:
    """The literal moments of peak.py, and the layer moments for each inner part it names."""
    source = PEAK.read_text()
    literal = re.findall(r'moments\["([^"]+)"\]', source)
    assert len(literal) >= 4, "peak.py changed how it names its moments: update this test"
    layered = [f"{where} layer ({inner})" for where in ("last", "first")
               for inner in ("mlp", "attention", "mlp norm", "attention norm")]
    return literal + layered + ["optimizer step"]


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_every_peak_moment_has_its_words(lang):
    strings = catalog(lang)
    missing = [name for name in named_moments() if moment_key(name) not in strings]
    assert not missing, missing
