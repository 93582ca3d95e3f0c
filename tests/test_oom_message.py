"""The out-of-memory message reader, on messages in the formats of several PyTorch versions
and on garbage: figures read exactly, a cause named, never an exception."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st
import pytest

from calculator.oom_message import MAX_CHARS, diagnose, parse, read

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
    assert codes(TORCH_1_13)[0] == "fragmentation_legacy"


def test_pytorch_2_1_lists_processes_one_of_which_is_this_one():
    r = parse(TORCH_2_1)
    assert (r.style, r.device, r.requested, r.total, r.free) == (
        "current", "GPU 1", 448 * MIB, round(79.10 * GIB), round(364.31 * MIB))
    assert r.processes == ((175080, round(1.46 * GIB)), (175356, round(77.26 * GIB)))
    assert r.reserved == round(72.12 * GIB) + round(3.78 * GIB)
    assert r.other_processes == round(1.46 * GIB)  # the 77.26 GiB one covers what PyTorch reserved: ours
    assert codes(TORCH_2_1)[0] == "fragmentation_current"


def test_pytorch_2_4_other_process_named_apart_from_this_one():
    r = parse(TORCH_2_4)
    assert r.process_in_use == round(13.40 * GIB)
    assert r.processes == ((492814, round(9.21 * GIB)),)
    assert r.other_processes == round(9.21 * GIB)
    assert "other_process" in codes(TORCH_2_4)
    assert "fragmentation_current" not in codes(TORCH_2_4)  # 1.02 GiB unallocated < 3.78 GiB asked


def test_no_process_information_and_zero_bytes_free():
    r = parse(NO_PROCESSES)
    assert (r.free, r.requested, r.allocated) == (0, 730 * MIB, round(6.52 * GIB))
    assert r.other_processes is None and r.process_in_use is None
    # 8 GiB card, 6.52 + 0.65 GiB held by PyTorch: about 0.8 GiB outside it (a desktop, the CUDA context)
    assert r.outside_pytorch == round(8 * GIB) - round(6.52 * GIB) - round(666.27 * MIB)
    # 666.27 MiB unallocated cannot hold 730 MiB: not fragmentation; 6.52 GiB + 730 MiB > 8 - 0.81 GiB
    assert codes(NO_PROCESSES) == ["real_overflow"]


def test_heavy_fragmentation_points_at_expandable_segments():
    assert codes(FRAGMENTED)[0] == "fragmentation_current"


def test_cuda_graph_pools():
    r = parse(CUDA_GRAPHS)
    assert r.private_pools == 12 * GIB
    assert "private_pools" in codes(CUDA_GRAPHS)


def test_rocm_and_a_request_larger_than_the_card():
    r = parse(HIP)
    assert r.requested == 704 * GIB
    assert codes(HIP)[0] == "huge_request"


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
    from calculator.messages import catalog

    seen = {c.code for message in (TORCH_1_0, TORCH_1_13, TORCH_2_1, TORCH_2_4, NO_PROCESSES, FRAGMENTED,
                                   CUDA_GRAPHS, HIP) for c in diagnose(parse(message))}
    assert seen >= {"fragmentation_legacy", "fragmentation_current", "other_process", "private_pools",
                    "huge_request", "real_overflow", "free_now"}
    for code in seen | {"outside_pytorch", "outside_pytorch_here"}:
        for lang in ("en", "fr"):
            assert f"oom_message.cause_{code}" in catalog(lang)
