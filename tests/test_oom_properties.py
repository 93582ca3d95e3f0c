"""The out-of-memory reader over generated messages in every wording PyTorch has written:
each cause it states is true of the figures it read, fragmentation and "too big" are exact
complements, and the figures come back as the message printed them."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from calculator.memory.oom_message import printing_slack, read

GIB, MIB = 2**30, 2**20


def format_size(size: int) -> str:
    """c10/cuda/CUDACachingAllocator.cpp format_size, as PyTorch prints sizes."""
    if size <= 1024:
        return f"{size} bytes"
    if size <= MIB:
        return f"{size / 1024:.2f} KiB"
    if size <= GIB:
        return f"{size / MIB:.2f} MiB"
    return f"{size / GIB:.2f} GiB"


def printed(size: int) -> int:
    """The bytes a printed size stands for, as a reader must take them."""
    number, unit = format_size(size).split()
    return round(float(number) * {"bytes": 1, "KiB": 1024, "MiB": MIB, "GiB": GIB}[unit])


sizes = st.integers(min_value=0, max_value=200 * GIB)


@st.composite
def messages(draw, figures=None):
    """A message; `figures`, when given, receives the sizes it was written from."""
    figures = {} if figures is None else figures
    wording = draw(st.sampled_from(["cached", "reserved", "processes", "this_process", "no_free", "mps"]))
    total = draw(st.integers(min_value=GIB, max_value=200 * GIB))
    allocated = draw(st.integers(min_value=0, max_value=total))
    unallocated = draw(st.integers(min_value=0, max_value=total - allocated))
    context = draw(st.integers(min_value=0, max_value=total - allocated - unallocated))
    free = total - allocated - unallocated - context
    requested = draw(st.integers(min_value=512, max_value=2 * total))
    others = draw(st.lists(st.integers(min_value=MIB, max_value=total), max_size=3))
    pools = draw(st.sampled_from([0, 0, draw(st.integers(min_value=0, max_value=allocated))]))
    figures.update(requested=requested, total=total, allocated=allocated, unallocated=unallocated, free=free)
    if wording == "mps":  # the cap, PyTorch's tensors, the process's other GPU allocations; then the request
        figures.update(free=None, unallocated=0)
        return (f"MPS backend out of memory (MPS allocated: {format_size(allocated)}, other allocations: "
                f"{format_size(context)}, max allowed: {format_size(total)}). Tried to allocate "
                f"{format_size(requested)} on private pool.")
    head = f"{draw(st.sampled_from(['CUDA', 'HIP']))} out of memory. Tried to allocate {format_size(requested)}"
    if wording in ("cached", "reserved"):
        word = "cached" if wording == "cached" else "reserved in total by PyTorch"
        return head + (f" (GPU 0; {format_size(total)} total capacity; {format_size(allocated)} already allocated; "
                       f"{format_size(free)} free; {format_size(allocated + unallocated)} {word})")
    own = allocated + unallocated + context
    text = head + f". GPU 0 has a total capacity of {format_size(total)}"
    text += "." if wording == "no_free" else f" of which {format_size(free)} is free."
    if wording != "no_free" and draw(st.booleans()):  # a cap set by set_per_process_memory_fraction
        text += f" {format_size(draw(st.integers(min_value=0, max_value=total)))} allowed;"
    if wording == "processes":
        text += "".join(f" Process {100 + i} has {format_size(size)} memory in use." for i, size in enumerate([own]))
    if wording == "this_process":
        text += "".join(f" Process {200 + i} has {format_size(size)} memory in use." for i, size in enumerate(others))
        text += f" Including non-PyTorch memory, this process has {format_size(own)} memory in use."
    pool = f" with {format_size(pools)} allocated in private pools (e.g., CUDA Graphs)," if pools else ""
    figures.update(free=None if wording == "no_free" else free)
    return text + (f" Of the allocated memory {format_size(allocated)} is allocated by PyTorch,{pool} and "
                   f"{format_size(unallocated)} is reserved by PyTorch but unallocated.")


def check(cause, r) -> None:
    """The comparison each cause's sentence states, on the figures it shows."""
    p = cause.params
    if cause.key in ("fragmentation_current", "fragmentation_legacy"):
        assert p["reclaimable"] == p["free"] + p["unallocated"] == r.free + r.reserved_unallocated
        assert p["requested"] <= p["reclaimable"]
    elif cause.key == "fragmentation_nofree":
        assert r.free is None and p["requested"] <= p["unallocated"] == r.reserved_unallocated
    elif cause.key == "too_big":
        assert p["needed"] == p["allocated"] + p["requested"] == r.allocated + r.requested
        assert p["available"] == p["total"] - p["outside"] and p["needed"] > p["available"]
        assert p["outside"] == r.outside_pytorch and p["total"] == r.total
    elif cause.key == "too_big_card":
        assert p["needed"] == r.allocated + r.requested > p["total"] == r.total
    elif cause.key == "unknown_free":
        assert p["needed"] == r.allocated + r.requested <= p["total"] == r.total
    elif cause.key == "memory_fraction":
        assert p["needed"] == p["reserved"] + p["requested"] == r.reserved + r.requested > p["allowed"] == r.allowed
    elif cause.key == "memory_fraction_rounded":  # at the cap within the printing's half digit
        assert r.allowed - printing_slack(r.allowed) < p["needed"] == r.reserved + r.requested <= r.allowed
    elif cause.key in ("memory_fraction_mps", "memory_fraction_mps_rounded"):
        assert p["needed"] == p["allocated"] + p["other"] + p["requested"] == r.own_process + r.requested
        assert p["other"] >= 0 and p["allowed"] == r.allowed == r.total
        if cause.key == "memory_fraction_mps":
            assert p["needed"] > p["allowed"]
        else:
            assert p["allowed"] - printing_slack(p["allowed"]) < p["needed"] <= p["allowed"]
    elif cause.key == "free_now":
        assert p["free"] == r.free >= p["requested"] == r.requested
    elif cause.key == "huge_request":
        assert 4 * p["requested"] >= p["total"] == r.total
    elif cause.key == "other_process":
        assert p["others"] == r.other_processes > 0
    elif cause.key == "outside_pytorch_here":
        assert p["outside"] == r.this_process_outside_pytorch == r.own_process - r.reserved
    elif cause.key == "outside_pytorch":
        assert p["outside"] == r.outside_pytorch == r.total - r.free - r.reserved
    elif cause.key == "private_pools":
        assert p["pools"] == r.private_pools > 0
    else:
        raise AssertionError(f"a cause no test checks: {cause.key}")


@settings(max_examples=400, deadline=None)
@given(messages())
def test_every_stated_comparison_is_true(message):
    reading = read(message)
    r = reading.report
    assert r is not None, message
    for cause in reading.causes:
        check(cause, r)
    first = reading.causes[0].code
    verdicts = ("fragmentation", "too_big", "unknown_free", "memory_fraction")
    assert first in verdicts and sum(c.code in verdicts for c in reading.causes) == 1
    if r.wording != "mps":
        assert (first == "memory_fraction") == (r.allowed is not None and r.reserved + r.requested
                                                 > r.allowed - printing_slack(r.allowed))
    if r.free is not None and first != "memory_fraction":  # the two verdicts split on one comparison
        assert (first == "fragmentation") == (r.free + r.reserved_unallocated >= r.requested)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_figures_are_read_as_printed(data):
    figures = {}
    r = read(data.draw(messages(figures))).report
    assert (r.requested, r.total, r.allocated) == tuple(printed(figures[k]) for k in ("requested", "total", "allocated"))
    assert r.free == (None if figures["free"] is None else printed(figures["free"]))
    if r.wording == "mps":  # MPS prints no reserve apart from what is allocated
        assert r.reserved == r.allocated
    elif r.wording in ("cached", "reserved"):  # the parenthesis prints the reserved total
        assert r.reserved == printed(figures["allocated"] + figures["unallocated"])
    else:  # the sentences print what is reserved but unallocated
        assert r.reserved - r.allocated == printed(figures["unallocated"])
