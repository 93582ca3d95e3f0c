"""python -m bench [name ...]: run the benchmarks (all by default) and print their tables."""

import importlib
import sys

BENCHMARKS = ["engine", "browser", "estimator", "big_models", "training", "activations", "accuracy", "load", "serving",
              "published"]

for name in sys.argv[1:] or BENCHMARKS:
    importlib.import_module(f"bench.{name}").main()
