"""The model seam and what sits behind it: per-family facts, the shape of a model, configs, the Hub, safetensors headers, the meta-device count, the bounded build worker, the bundled catalog."""
