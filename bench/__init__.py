"""Benchmarks and accuracy measurements. Not tests: they report numbers for docs/benchmarks.md."""

from pathlib import Path

# Where bench/accuracy.py writes its result files, and where the guide's estimator#accuracy
# section and `python -m calculator accuracy` read them. The harness owns the folder; the
# engine's readers (calculator/answers/accuracy.py) take it as a parameter.
RESULTS_DIR = Path(__file__).resolve().parent / "results"
