"""`multi-gpu MODEL --gpu G --gpus N [--dtype D] [--batch B] [--context C]`: transformers without
a serving engine over several GPUs: the fullest GPU under device_map="auto" (whole layers, one
GPU at work at a time) and under the tensor-parallel plan (every matrix split, every GPU at
work), with the loading code (serving#multi-gpu-inference)."""

from __future__ import annotations

from calculator.core.units import format_bytes
from calculator.cli.commands._common import VERDICT_MARKS, add_command, find_gpu, print_json, render_table, resolve_model

def register(commands, shared) -> None:
    p = add_command(commands, "multi-gpu", shared, ("model", "json"), run,
                    help="transformers on several GPUs: device_map=\"auto\" against the tensor-parallel plan")
    p.add_argument("--gpu", required=True, help="GPU key (e.g. l4, a100-80gb)")
    p.add_argument("--gpus", type=int, default=2, help="number of GPUs (default 2)")
    p.add_argument("--dtype", default="bfloat16", help="the checkpoint's precision: float32, float16, bfloat16, or a "
                   "format transformers loads (mxfp4, fp8-block128, bnb-nf4...; default bfloat16)")
    p.add_argument("--batch", type=int, default=1, help="sequences at once (default 1)")
    p.add_argument("--context", type=int, default=4096, help="tokens per sequence (default 4096)")


def run(args) -> int:
    from calculator.answers.offload_multi import multi_gpu_json
    from calculator.memory.inference import check_sizes

    check_sizes(args.batch, args.context)
    card = find_gpu(args.gpu)
    data = multi_gpu_json(resolve_model(args), card, args.gpus, args.dtype, args.batch, args.context)
    if args.json:
        print_json(data)
        return 0
    print(f"Model: {data['model']} in {data['weights_dtype']}   {data['gpus']} x {card.name} "
          f"(usable {format_bytes(data['usable_bytes'])} each)   batch {data['batch']} x {data['context']} tokens")
    rows = []
    for name, way in (("device_map=\"auto\"", data["device_map"]),
                      (f"DistributedConfig(tp_size={data['gpus']})", data["tensor_parallel"])):
        if way is not None:
            rows.append([name, format_bytes(way["weights_bytes"]), format_bytes(way["cache_bytes"]),
                         format_bytes(data["activation_bytes"]), format_bytes(way["peak_bytes"]),
                         VERDICT_MARKS[way["verdict"]], str(way["gpus_at_work"])])
    print(render_table(["plan", "weights", "KV cache", "activations", "fullest GPU", "fits", "GPUs at work"], rows))
    if data["weights_source"] == "dequantized":
        print(f"transformers dequantizes {data['dtype']} to bfloat16 on {card.name} (compute capability below 7.5).")
    if data["no_tensor_parallel"] == "format":
        print(f"The tensor-parallel plan is priced for float32, float16 and bfloat16 only, not {data['weights_dtype']}.")
    elif data["tensor_parallel"] is None:
        print(f"{data['gpus']} GPUs do not divide the model's {data['heads']} attention heads: no tensor-parallel plan.")
    return 0
