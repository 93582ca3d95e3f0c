"""python -m bench [name ...] [--options]: run the benchmarks (all by default) and print their
tables; options after the names go to the benchmark that takes them (python -m bench load
--levels 1 2 4)."""

import importlib
import inspect
import sys

BENCHMARKS = ["engine", "browser", "case_change", "case_change_browser", "case_change_ab", "own_input_browser",
              "charts_json", "first_heading",
              "estimator", "big_models", "training", "activations", "accuracy", "load", "memory_curve", "memory_holders",
              "resting_memory", "serving",
              "published", "cuda_context"]

args = sys.argv[1:]
first_option = next((i for i, a in enumerate(args) if a.startswith("-")), len(args))
names, options = args[:first_option], args[first_option:]
for name in names or BENCHMARKS:
    main = importlib.import_module(f"bench.{name}").main
    if options and inspect.signature(main).parameters:
        main(options)
    else:
        main()
