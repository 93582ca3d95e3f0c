"""Facts and units every layer reads: sizes, errors and messages, precisions, the GPU cards and the usable budget, limits, searches."""
