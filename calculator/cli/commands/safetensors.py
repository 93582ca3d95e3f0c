"""`safetensors HUB_ID`: parameters per dtype of a Hub checkpoint, from its safetensors headers."""

from __future__ import annotations

from calculator.core.units import format_bytes, format_count
from calculator.cli.commands._common import add_command, print_json, render_table


def register(commands, shared) -> None:
    p = add_command(commands, "safetensors", shared, ("json",), run,
                    help="parameters per dtype of a Hub checkpoint, from its safetensors headers")
    p.add_argument("repo", metavar="HUB_ID", help="a Hub id (only the headers of the weight files are read)")


def run(args) -> int:
    from calculator.models.safetensors import read_headers

    count = read_headers(args.repo)
    if args.json:
        print_json(count.to_json())
        return 0
    largest = count.largest_unit()
    print(f"Model:      {count.repo} (safetensors headers: {count.files} file(s), {count.tensors} tensors)")
    print(f"Parameters: {format_count(count.elements)} stored elements")
    rows = [[d.dtype, format_count(d.elements), format_bytes(d.bytes)] for d in count.dtypes]
    print(render_table(["dtype", "elements", "bytes"], rows))
    print(f"Stored:     {format_bytes(count.stored_bytes)}")
    if largest is not None:
        print(f"Largest layer (from tensor names): {largest.name} ({format_count(largest.parameters)} elements)")
    if count.packed:
        print("Integer tensors hold packed or quantized weights: their elements are not a weight count; the bytes are exact.")
    print("Units: GiB = 2^30 bytes. No weights were downloaded.")
    return 0
