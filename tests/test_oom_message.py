"""The out-of-memory message reader, on messages in the formats of several PyTorch versions
and on garbage: figures read exactly, a cause named, never an exception."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st
import pytest

from calculator.memory.oom_message import MAX_CHARS, diagnose, parse, read

GIB, MIB = 2**30, 2**20

# PyTorch 1.x (caching allocator said "cached")
TORCH_1_0 = ("RuntimeError: CUDA out of memory. Tried to allocate 12.50 MiB (GPU 0; 10.92 GiB total capacity; "
             "8.57 MiB already allocated; 9.28 GiB free; 4.68 MiB cached)")
# PyTorch 1.4 to 2.0
TORCH_1_13 = ("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.78 GiB total capacity; "
              "10.56 GiB already allocated; 1.12 GiB free; 13.98 GiB reserved in total by PyTorch) If reserved "
              "memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  See "
              "documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF")
# PyTorch 2.1 (its typo "capacty", max_split_size_mb advice), two other processes listed
TORCH_2_1 = ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 448.00 MiB. GPU 1 has a total "
             "capacty of 79.10 GiB of which 364.31 MiB is free. Process 175080 has 1.46 GiB memory in use. "
             "Process 175356 has 77.26 GiB memory in use. Of the allocated memory 72.12 GiB is allocated by "
             "PyTorch, and 3.78 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is "
             "large try setting max_split_size_mb to avoid fragmentation.")
# PyTorch 2.4+: this process named apart, another process beside it, wrapped over lines
TORCH_2_4 = """Traceback (most recent call last):
  File "train.py", line 12, in <module>
    loss.backward()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.78 GiB. GPU 0 has a total capacity of
23.69 GiB of which 875.62 MiB is free. Process 492814 has 9.21 GiB memory in use. Including non-PyTorch
memory, this process has 13.40 GiB memory in use. Of the allocated memory 11.97 GiB is allocated by PyTorch,
and 1.02 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory
Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"""
# PyTorch 2.5+, no process information (no NVML), 0 bytes free
NO_PROCESSES = ("CUDA out of memory. Tried to allocate 730.00 MiB. GPU 0 has a total capacity of 8.00 GiB of "
                "which 0 bytes is free. Of the allocated memory 6.52 GiB is allocated by PyTorch, and 666.27 MiB "
                "is reserved by PyTorch but unallocated.")
FRAGMENTED = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
              "of 79.25 GiB of which 1.06 GiB is free. Including non-PyTorch memory, this process has 78.18 GiB "
              "memory in use. Of the allocated memory 40.29 GiB is allocated by PyTorch, and 37.30 GiB is reserved "
              "by PyTorch but unallocated.")
CUDA_GRAPHS = ("CUDA out of memory. Tried to allocate 64.00 MiB. GPU 0 has a total capacity of 39.38 GiB of which "
               "27.38 MiB is free. Including non-PyTorch memory, this process has 39.35 GiB memory in use. Of the "
               "allocated memory 38.40 GiB is allocated by PyTorch, with 12.00 GiB allocated in private pools "
               "(e.g., CUDA Graphs), and 20.00 MiB is reserved by PyTorch but unallocated.")
HIP = ("OutOfMemoryError: HIP out of memory. Tried to allocate 704.00 GiB. GPU 0 has a total capacity of 191.69 GiB "
       "of which 186.02 GiB is free. Of the allocated memory 4.89 GiB is allocated by PyTorch, and 2.25 MiB is "
       "reserved by PyTorch but unallocated.")

# Intel XPU (torch 2.5+): no free figure (pytorch/pytorch#132877 wording)
XPU = ("torch.OutOfMemoryError: XPU out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of "
       "15.11 GiB. Of the allocated memory 13.06 GiB is allocated by PyTorch, and 240.38 MiB is reserved by "
       "PyTorch but unallocated.")
XPU_FRAGMENTED = XPU.replace("240.38 MiB", "4.50 GiB")
XPU_ELSEWHERE = XPU.replace("13.06 GiB", "9.06 GiB")
# A reader's report (an RTX 4090: 2.00 GiB asked, 1.12 free, 20.91 allocated, 1.05 reserved but unallocated);
# the old reader wrote "22.91 GiB exceed the 23.08 GiB" (free + reserved), which is false.
RTX_4090 = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
            "23.65 GiB of which 1.12 GiB is free. Including non-PyTorch memory, this process has 22.52 GiB memory in "
            "use. Of the allocated memory 20.91 GiB is allocated by PyTorch, and 1.05 GiB is reserved by PyTorch but "
            "unallocated.")
# A real RTX 4090 message (pytorch/pytorch#16417, comment of 2024-03-13): 22 MiB refused while 194.87 MiB sat unused
RTX_4090_SMALL = ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 22.00 MiB. GPU 0 has a total "
                  "capacity of 23.65 GiB of which 11.06 MiB is free. Including non-PyTorch memory, this process has "
                  "23.60 GiB memory in use. Of the allocated memory 22.90 GiB is allocated by PyTorch, and 194.87 MiB "
                  "is reserved by PyTorch but unallocated.")


def codes(text: str) -> list[str]:
    return [c.code for c in read(text).causes]


def test_pytorch_1_0_cached_format():
    r = parse(TORCH_1_0)
    assert (r.style, r.device, r.requested, r.total) == ("legacy", "GPU 0", round(12.5 * MIB), round(10.92 * GIB))
    assert (r.allocated, r.free, r.reserved) == (round(8.57 * MIB), round(9.28 * GIB), round(4.68 * MIB))
    assert "free_now" in codes(TORCH_1_0)  # 9 GiB free: something else held it when the request failed


def test_pytorch_1_13_reserved_format():
    r = parse(TORCH_1_13)
    assert (r.requested, r.total, r.allocated, r.free, r.reserved) == (
        2 * GIB, round(15.78 * GIB), round(10.56 * GIB), round(1.12 * GIB), round(13.98 * GIB))
    assert r.reserved_unallocated == round(13.98 * GIB) - round(10.56 * GIB)  # 3.42 GiB >= the 2 GiB asked
    # 1.12 GiB free + 3.42 GiB unused reserve cover the 2 GiB asked
    assert codes(TORCH_1_13)[0] == "fragmentation" and read(TORCH_1_13).causes[0].key == "fragmentation_legacy"


def test_pytorch_2_1_lists_processes_one_of_which_is_this_one():
    r = parse(TORCH_2_1)
    assert (r.style, r.device, r.requested, r.total, r.free) == (
        "current", "GPU 1", 448 * MIB, round(79.10 * GIB), round(364.31 * MIB))
    assert r.processes == ((175080, round(1.46 * GIB)), (175356, round(77.26 * GIB)))
    assert r.reserved == round(72.12 * GIB) + round(3.78 * GIB)
    assert r.other_processes == round(1.46 * GIB)  # the 77.26 GiB one covers what PyTorch reserved: ours
    assert codes(TORCH_2_1)[0] == "fragmentation" and read(TORCH_2_1).causes[0].key == "fragmentation_current"


def test_pytorch_2_4_other_process_named_apart_from_this_one():
    r = parse(TORCH_2_4)
    assert r.process_in_use == round(13.40 * GIB)
    assert r.processes == ((492814, round(9.21 * GIB)),)
    assert r.other_processes == round(9.21 * GIB)
    assert "other_process" in codes(TORCH_2_4)
    # 875.62 MiB free + 1.02 GiB unallocated = 1.88 GiB < 3.78 GiB asked: too big, not fragmentation
    assert codes(TORCH_2_4)[0] == "too_big" and "fragmentation" not in codes(TORCH_2_4)


def test_no_process_information_and_zero_bytes_free():
    r = parse(NO_PROCESSES)
    assert (r.free, r.requested, r.allocated) == (0, 730 * MIB, round(6.52 * GIB))
    assert r.other_processes is None and r.process_in_use is None
    # 8 GiB card, 6.52 + 0.65 GiB held by PyTorch: about 0.8 GiB outside it (a desktop, the CUDA context)
    assert r.outside_pytorch == round(8 * GIB) - round(6.52 * GIB) - round(666.27 * MIB)
    # 0 free + 666.27 MiB unallocated cannot hold 730 MiB: too big; 6.52 GiB + 730 MiB > 8 - 0.83 GiB
    assert codes(NO_PROCESSES) == ["too_big"]
    params = read(NO_PROCESSES).causes[0].params
    assert params["needed"] == round(6.52 * GIB) + 730 * MIB
    assert params["available"] == round(6.52 * GIB) + round(666.27 * MIB)  # what PyTorch held: nothing was free


def test_heavy_fragmentation_points_at_expandable_segments():
    assert codes(FRAGMENTED)[0] == "fragmentation"


def test_cuda_graph_pools():
    r = parse(CUDA_GRAPHS)
    assert r.private_pools == 12 * GIB
    assert "private_pools" in codes(CUDA_GRAPHS)


def test_rocm_and_a_request_larger_than_the_card():
    r = parse(HIP)
    assert r.requested == 704 * GIB
    assert codes(HIP)[:2] == ["too_big", "huge_request"]  # 4.89 GiB + 704 GiB > all of the card


def test_the_last_message_of_a_log_is_read():
    log = TORCH_1_13 + "\nretrying with a smaller batch\n" + NO_PROCESSES
    assert parse(log).requested == 730 * MIB


def test_an_out_of_memory_without_figures_is_recognised_as_such():
    reading = read("RuntimeError: CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported")
    assert reading.report is None and reading.mentions_oom


@pytest.mark.parametrize("garbage", ["", "hello", "Tried to allocate", "Tried to allocate 1e999 GiB. GPU 0 has",
                                     "Tried to allocate 99999999.99 GiB (GPU 0; x)", "🙂" * 5000, None, 42,
                                     "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 8.00 GiB of which",
                                     "<script>alert(1)</script> out of memory"])
def test_garbage_is_not_recognised_and_never_raises(garbage):
    reading = read(garbage)
    assert reading.report is None and reading.causes == ()


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=3000))
def test_any_text_is_read_without_exception(text):
    reading = read(text)
    assert reading.report is None or reading.causes


def test_very_long_input_is_cut_and_read_quickly():
    import time

    text = ("Tried to allocate 1.00 GiB (GPU 0; " * 20_000) + NO_PROCESSES
    start = time.perf_counter()
    assert parse(text).requested == 730 * MIB  # the tail is kept: the message ends a traceback
    assert time.perf_counter() - start < 1.0
    assert len(text) > MAX_CHARS


def test_every_cause_has_words_in_both_languages():
    from calculator.core.messages import catalog

    seen = {c.key for message in (TORCH_1_0, TORCH_1_13, TORCH_2_1, TORCH_2_4, NO_PROCESSES, FRAGMENTED,
                                  CUDA_GRAPHS, HIP, XPU, XPU_FRAGMENTED, XPU_ELSEWHERE) for c in diagnose(parse(message))}
    assert seen >= {"fragmentation_legacy", "fragmentation_current", "fragmentation_nofree", "other_process",
                    "private_pools", "huge_request", "too_big", "too_big_card", "unknown_free", "free_now"}
    for code in seen | {"outside_pytorch", "outside_pytorch_here"}:
        for lang in ("en", "fr"):
            assert f"oom_message.cause_{code}" in catalog(lang)


def test_issue_22_rtx_4090_is_fragmentation_and_states_no_false_comparison():
    reading = read(RTX_4090)
    r = reading.report
    # 1.12 GiB free + 1.05 GiB unallocated = 2.17 GiB >= 2.00 GiB asked
    assert reading.cause_ids == ("fragmentation",)
    assert reading.causes[0].params["reclaimable"] == round(1.12 * GIB) + round(1.05 * GIB)
    # this process outside PyTorch: 22.52 - 20.91 - 1.05 = 0.56 GiB (its CUDA context)
    assert r.this_process_outside_pytorch == round(22.52 * GIB) - round(20.91 * GIB) - round(1.05 * GIB)
    # everything outside PyTorch: 23.65 - 1.12 - 20.91 - 1.05 = 0.57 GiB
    assert r.outside_pytorch == round(23.65 * GIB) - round(1.12 * GIB) - round(20.91 * GIB) - round(1.05 * GIB)


def test_a_small_request_beside_unused_small_blocks_is_fragmentation():
    # 11.06 MiB free + 194.87 MiB unallocated >= 22 MiB: the memory was there, in pieces
    assert codes(RTX_4090_SMALL)[0] == "fragmentation"
    assert parse(RTX_4090_SMALL).this_process_outside_pytorch == (
        round(23.60 * GIB) - round(22.90 * GIB) - round(194.87 * MIB))


def test_xpu_messages_have_no_free_figure():
    r = parse(XPU)
    assert (r.free, r.wording, r.total) == (None, "no_free", round(15.11 * GIB))
    # 13.06 GiB + 4 GiB > 15.11 GiB: too big for the card itself
    assert read(XPU).causes[0].key == "too_big_card"
    assert read(XPU_FRAGMENTED).causes[0].key == "fragmentation_nofree"  # 4.50 GiB unused >= 4 GiB asked
    assert read(XPU_ELSEWHERE).causes[0].key == "unknown_free"  # 9.06 + 4 < 15.11: held outside PyTorch


@pytest.mark.parametrize("message, wording", [(TORCH_1_0, "cached"), (TORCH_1_13, "reserved"),
                                              (TORCH_2_1, "processes"), (TORCH_2_4, "this_process"), (XPU, "no_free")])
def test_each_wording_is_named(message, wording):
    assert parse(message).wording == wording


# ROCm/TheRock#2118 (torch 2.9 test run on ROCm): a process capped by set_per_process_memory_fraction
CAPPED = ("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 MiB. GPU 0 has a total capacity of "
          "255.98 GiB of which 244.64 GiB is free. 1.05 GiB allowed; Of the allocated memory 1017.01 MiB is allocated "
          "by PyTorch, with 17.00 MiB allocated in private pools (e.g., HIP Graphs), and 54.99 MiB is reserved by "
          "PyTorch but unallocated.")
# mistralai/mistral-finetune#69 (A10G): NVML reported this process at 0 bytes
NVML_ZERO = ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 896.00 MiB. GPU 0 has a total "
             "capacity of 21.99 GiB of which 759.38 MiB is free. Including non-PyTorch memory, this process has 0 "
             "bytes memory in use. Of the allocated memory 20.52 GiB is allocated by PyTorch, and 102.08 MiB is "
             "reserved by PyTorch but unallocated.")


def test_a_capped_process_names_its_cap():
    reading = read(CAPPED)
    assert reading.report.allowed == round(1.05 * GIB)
    # 1017.01 + 54.99 MiB reserved + 2 MiB asked = 1,074 MiB: under the printed 1.05 GiB (1,075.2 MiB), but
    # within the 0.005 GiB (5.12 MiB) that printing to two decimals hides, with 244.64 GiB free
    assert round(1.05 * GIB) - 5.12 * MIB < round(1017.01 * MIB) + round(54.99 * MIB) + 2 * MIB < round(1.05 * GIB)
    assert reading.causes[0].key == "memory_fraction_rounded"
    over = read(CAPPED.replace("1.05 GiB allowed", "1.04 GiB allowed"))
    assert over.causes[0].key == "memory_fraction"
    assert over.causes[0].params["needed"] == round(1017.01 * MIB) + round(54.99 * MIB) + 2 * MIB


def test_nvml_misreporting_this_process_gives_no_reading_outside_pytorch():
    r = parse(NVML_ZERO)
    assert r.process_in_use == 0 and r.this_process_outside_pytorch is None
    assert r.generation == "2.2+" and parse(TORCH_2_1).generation == "2.1" and parse(TORCH_1_0).generation == "1.0-1.3"


# Comfy-Org/ComfyUI#7440 (GiB labels) and pharmapsychotic/clip-interrogator-ext#74 (torch before 2.3: "GB", binary)
MPS = ("MPS backend out of memory (MPS allocated: 9.57 GiB, other allocations: 17.35 GiB, max allowed: 27.20 GiB). "
       "Tried to allocate 292.50 MiB on private pool. Use PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 to disable upper limit "
       "for memory allocations (may cause system failure).")
MPS_OLD = ("RuntimeError: MPS backend out of memory (MPS allocated: 6.04 GB, other allocations: 1.04 GB, max allowed: "
           "6.77 GB). Tried to allocate 459.07 MB on private pool.")


def test_apple_mps_messages_name_the_cap():
    r = parse(MPS)
    assert (r.wording, r.device, r.total, r.allocated) == ("mps", "MPS", round(27.20 * GIB), round(9.57 * GIB))
    assert r.this_process_outside_pytorch == round(17.35 * GIB)
    # 9.57 + 17.35 GiB + 292.50 MiB = 27.21 GiB > 27.20 GiB allowed
    cause = read(MPS).causes[0]
    assert cause.key == "memory_fraction_mps"
    assert cause.params["needed"] == round(9.57 * GIB) + round(17.35 * GIB) + round(292.50 * MIB) > round(27.20 * GIB)
    old = parse(MPS_OLD)  # "GB" there is GiB: 6.04 + 1.04 GiB + 459.07 MiB = 7.53 GiB > 6.77 GiB
    assert (old.allocated, old.requested) == (round(6.04 * GIB), round(459.07 * MIB))
    assert read(MPS_OLD).causes[0].key == "memory_fraction_mps"
