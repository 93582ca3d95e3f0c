"""Several devices: pipeline and tensor parallelism, CPU offloading (accelerate's placement, bitsandbytes with offload), llama.cpp's GPU layers."""
