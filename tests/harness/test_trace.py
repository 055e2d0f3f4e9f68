"""``launches.trace``: what replacement 16 compares a CPU re-run with its capture by.

A re-run touches the capture's storages when it reads and writes the same
pre-existing tensors; it does not when it reads a copy made outside the run,
however equal its values, and a tensor the run allocates itself never counts.
"""

from __future__ import annotations

import torch

from mla_harness import launches

BUFFERS = {"rows": torch.arange(8), "out": torch.zeros(8, dtype=torch.int64)}


def _step(rows: torch.Tensor) -> None:
    """A graph-like step: reads ``rows``, writes ``out`` in place, and uses a
    temporary of its own."""
    tmp = rows * 2
    BUFFERS["out"].copy_(tmp + 1)


def _trace(rows):
    with launches.trace() as t:
        _step(rows)
    return t


def test_same_buffers_touch_the_same_storages():
    first, again = _trace(BUFFERS["rows"]), _trace(BUFFERS["rows"])
    assert first.external == again.external
    ptrs = {BUFFERS[name].untyped_storage().data_ptr() for name in BUFFERS}
    assert first.external == ptrs  # the temporary is not external


def test_a_copy_made_outside_the_run_is_another_storage():
    copy = BUFFERS["rows"].clone()  # equal values, its own storage
    assert _trace(copy).external != _trace(BUFFERS["rows"]).external


def test_events_are_the_notes_in_order():
    """(Triton launches join them by kernel name: runner_check's order check.)"""
    with launches.trace() as t:
        launches.note("marker")
        _step(BUFFERS["rows"])
        launches.note("attention")
    assert t.events == ["marker", "attention"]  # aten ops are not events


def _hooked():
    from triton.runtime.jit import KernelInterface

    return (vars(KernelInterface).get("__getitem__"), vars(torch.cuda.CUDAGraph).get("replay"))


def test_the_counters_are_installed_only_while_a_count_or_trace_is_open():
    """A timed call outside a count pays nothing for the counters (runner_check
    times whole ``execute`` calls between counted ones)."""
    before = _hooked()
    with launches.count_launches():
        with launches.trace():
            assert _hooked()[0] is not before[0] and _hooked()[1] is not before[1]
        assert _hooked() != before  # the count is still open
    assert _hooked() == before
