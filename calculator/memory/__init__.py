"""Memory of one process: activations, inference and its KV cache, quantization formats, the load estimate, speed, what a page's code samples run."""
